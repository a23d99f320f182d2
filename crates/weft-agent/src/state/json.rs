//! `AgentStateJSON` (UAP-1.0 §12.1, §12.3): the serialized form of an [`AgentState`].
//!
//! Ids are kept exactly; message timestamps are ISO 8601 (RFC 3339) and binary content is
//! base64, both by the UPP message serialization; metadata (state and message) is kept as is.
//! `version` is checked first. Deserialization validates the structure with typed serde
//! decoding and reports the JSON path of the first problem.
//!
//! # Untrusted input
//!
//! Serialized state may hold tool results, file contents and anything a model said. Do not
//! deserialize state from a source you do not trust (UAP-1.0 §15.3). When you must, use
//! [`FromJsonOptions::untrusted`], which caps the input size and the history length.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use weft_provider::Message;

use super::{AgentState, PlanStep, SubagentExecutionTrace};
use crate::error::StateError;

/// The version written by [`AgentState::to_json`].
pub const STATE_VERSION: &str = "1.0";
const SUPPORTED: &str = "1.x";

/// The JSON form of an [`AgentState`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStateJson {
    /// UAP version (`"1.0"`).
    pub version: String,
    /// State id.
    pub id: String,
    /// UPP messages.
    pub messages: Vec<Message>,
    /// Step number.
    pub step: u64,
    /// User metadata.
    pub metadata: Map<String, Value>,
    /// Reasoning traces.
    #[serde(default)]
    pub reasoning: Vec<String>,
    /// The plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<PlanStep>>,
    /// Sub-agent traces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subagent_traces: Vec<SubagentExecutionTrace>,
}

/// Limits for [`AgentState::from_json_str_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FromJsonOptions {
    /// Largest accepted input, in bytes.
    pub max_bytes: Option<usize>,
    /// Most messages accepted.
    pub max_messages: Option<usize>,
}

impl Default for FromJsonOptions {
    fn default() -> Self {
        FromJsonOptions::trusted()
    }
}

impl FromJsonOptions {
    /// No limits (your own checkpoints).
    pub const fn trusted() -> Self {
        FromJsonOptions {
            max_bytes: None,
            max_messages: None,
        }
    }

    /// Limits for input from elsewhere: 16 MiB and 10,000 messages.
    pub const fn untrusted() -> Self {
        FromJsonOptions {
            max_bytes: Some(16 << 20),
            max_messages: Some(10_000),
        }
    }
}

fn check_version(version: &str) -> Result<(), StateError> {
    let major = version.split('.').next().unwrap_or_default();
    if major == "1" && version.split('.').all(|p| p.parse::<u32>().is_ok()) {
        Ok(())
    } else {
        Err(StateError::UnsupportedVersion {
            found: version.to_owned(),
            supported: SUPPORTED,
        })
    }
}

/// The JSON form of a state, borrowed from it: what [`AgentState`]'s `Serialize` writes
/// (the same document as [`AgentStateJson`]).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentStateRef<'a> {
    version: &'static str,
    id: &'a str,
    messages: Messages<'a>,
    step: u64,
    metadata: &'a Map<String, Value>,
    reasoning: Items<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<&'a [PlanStep]>,
    #[serde(skip_serializing_if = "Items::is_empty")]
    subagent_traces: Items<'a, SubagentExecutionTrace>,
}

/// The history, serialized as a JSON array of messages (decoded one at a time).
struct Messages<'a>(&'a super::History);

impl Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter())
    }
}

/// A persistent vector of shared items, serialized as a JSON array.
struct Items<'a, T: ?Sized>(&'a imbl::Vector<Arc<T>>);

impl<T: ?Sized> Items<'_, T> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<T: Serialize + ?Sized> Serialize for Items<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|item| &**item))
    }
}

/// Writes the UAP `AgentStateJSON` document (as [`AgentState::to_json`] would, without
/// copying the history).
impl Serialize for AgentState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        AgentStateRef {
            version: STATE_VERSION,
            id: self.id(),
            messages: Messages(&self.messages),
            step: self.step,
            metadata: &self.extras.metadata,
            reasoning: Items(&self.extras.reasoning),
            plan: self.extras.plan.as_deref(),
            subagent_traces: Items(&self.extras.subagent_traces),
        }
        .serialize(serializer)
    }
}

/// Reads an `AgentStateJSON` document and validates it as [`AgentState::from_json`] does.
impl<'de> Deserialize<'de> for AgentState {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json = AgentStateJson::deserialize(deserializer)?;
        AgentState::from_json(json).map_err(serde::de::Error::custom)
    }
}

fn malformed(error: impl std::fmt::Display) -> StateError {
    StateError::Malformed(error.to_string())
}

impl AgentState {
    /// Serializes the whole state.
    pub fn to_json(&self) -> AgentStateJson {
        AgentStateJson {
            version: STATE_VERSION.to_owned(),
            id: self.id().to_owned(),
            messages: self.messages_vec(),
            step: self.step,
            metadata: (*self.extras.metadata).clone(),
            reasoning: self
                .extras
                .reasoning
                .iter()
                .map(|r| r.to_string())
                .collect(),
            plan: self.extras.plan.as_ref().map(|p| p.to_vec()),
            subagent_traces: self
                .extras
                .subagent_traces
                .iter()
                .map(|t| (**t).clone())
                .collect(),
        }
    }

    /// Serializes the whole state to a JSON string (straight from the shared history; no
    /// copy of it is made).
    ///
    /// # Errors
    /// Only if a metadata value cannot be serialized (not possible for `serde_json::Value`).
    pub fn to_json_string(&self) -> Result<String, StateError> {
        serde_json::to_string(self).map_err(malformed)
    }

    /// Restores a state exactly (same id, same content).
    ///
    /// # Errors
    /// [`StateError::UnsupportedVersion`] for a version other than 1.x,
    /// [`StateError::Invalid`] for an empty id or an empty message id.
    pub fn from_json(json: AgentStateJson) -> Result<Self, StateError> {
        check_version(&json.version)?;
        if json.id.trim().is_empty() {
            return Err(StateError::Invalid("the state id is empty".into()));
        }
        if let Some((i, _)) = json
            .messages
            .iter()
            .enumerate()
            .find(|(_, m)| m.id().is_empty())
        {
            return Err(StateError::Invalid(format!("message {i} has an empty id")));
        }
        if let Some(step) = json.plan.iter().flatten().find(|s| s.id.trim().is_empty()) {
            return Err(StateError::Invalid(format!(
                "a plan step has an empty id ({:?})",
                step.description
            )));
        }
        let empty = json.metadata.is_empty()
            && json.reasoning.is_empty()
            && json.plan.is_none()
            && json.subagent_traces.is_empty();
        let extras = if empty {
            super::no_extras()
        } else {
            Arc::new(super::Extras {
                metadata: Arc::new(json.metadata),
                reasoning: json.reasoning.into_iter().map(Arc::from).collect(),
                plan: json.plan.map(Arc::from),
                subagent_traces: json.subagent_traces.into_iter().map(Arc::new).collect(),
            })
        };
        Ok(AgentState {
            id: json.id.into(),
            step: json.step,
            messages: super::History::from_messages(json.messages.into_iter().map(Arc::new)),
            extras,
        })
    }

    /// Parses and validates a JSON value.
    ///
    /// # Errors
    /// As [`AgentState::from_json_str_with`].
    pub fn from_json_value(value: Value) -> Result<Self, StateError> {
        precheck(&value, &FromJsonOptions::trusted())?;
        AgentState::from_json(serde_json::from_value(value).map_err(malformed)?)
    }

    /// Parses and validates a JSON string (no limits).
    ///
    /// # Errors
    /// As [`AgentState::from_json_str_with`].
    pub fn from_json_str(text: &str) -> Result<Self, StateError> {
        AgentState::from_json_str_with(text, &FromJsonOptions::trusted())
    }

    /// Parses and validates a JSON string within `options`' limits.
    ///
    /// # Errors
    /// [`StateError::TooLarge`], [`StateError::Malformed`] (with the JSON path or line and
    /// column of the problem), [`StateError::UnsupportedVersion`], [`StateError::Invalid`].
    pub fn from_json_str_with(text: &str, options: &FromJsonOptions) -> Result<Self, StateError> {
        if let Some(limit) = options.max_bytes
            && text.len() > limit
        {
            return Err(StateError::TooLarge {
                size: text.len(),
                limit,
            });
        }
        let value: Value = serde_json::from_str(text).map_err(malformed)?;
        precheck(&value, options)?;
        AgentState::from_json(serde_json::from_value(value).map_err(malformed)?)
    }
}

/// Checks what gives the clearest error before typed decoding: the root shape, the version,
/// and the history length.
fn precheck(value: &Value, options: &FromJsonOptions) -> Result<(), StateError> {
    let Some(object) = value.as_object() else {
        return Err(StateError::Malformed(
            "the agent state must be a JSON object".into(),
        ));
    };
    match object.get("version") {
        Some(Value::String(version)) => check_version(version)?,
        Some(_) => return Err(StateError::Malformed("`version` must be a string".into())),
        None => return Err(StateError::Malformed("missing field `version`".into())),
    }
    if let (Some(limit), Some(Value::Array(messages))) =
        (options.max_messages, object.get("messages"))
        && messages.len() > limit
    {
        return Err(StateError::Invalid(format!(
            "{} messages, over the limit of {limit}",
            messages.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn versions() {
        assert!(check_version("1.0").is_ok());
        assert!(check_version("1.3").is_ok());
        assert!(check_version("2.0").is_err());
        assert!(check_version("1.x").is_err());
        assert!(check_version("").is_err());
    }

    #[test]
    fn malformed_input_names_the_problem() {
        let e = AgentState::from_json_value(json!([])).unwrap_err();
        assert!(matches!(e, StateError::Malformed(_)));
        let e = AgentState::from_json_value(json!({"version": "1.0", "id": "x", "messages": [],
            "step": -1, "metadata": {}}))
        .unwrap_err();
        assert!(e.to_string().contains("step") || e.to_string().contains("invalid value"));
    }
}
