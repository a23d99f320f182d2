//! The root [`Thread`], its agent registry and its outgoing relationships.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ParseError;
use crate::types::{JsonMap, Turn};

/// The protocol version this crate reads and writes.
pub const PROTOCOL_VERSION: &str = "0.0.3";

/// A ThreadProtocol thread: the canonical record of a multi-agent conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thread {
    /// Protocol version, `"0.0.3"`.
    pub version: String,
    /// The thread's UUID.
    pub thread_id: String,
    /// ISO 8601 creation time.
    pub created_at: String,
    /// ISO 8601 time of the last change.
    pub updated_at: String,
    /// Human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonMap>,
    /// The agent registry, keyed by agent ID.
    pub agents: BTreeMap<String, AgentConfig>,
    /// The conversation: complete turns only.
    pub turns: Vec<Turn>,
    /// Outgoing links to other threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relationships: Option<ThreadRelationships>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

impl Thread {
    /// Parses a thread from JSON text.
    ///
    /// This checks the shape only; run [`crate::validate()`] for the protocol rules.
    ///
    /// # Errors
    ///
    /// [`ParseError`] when the text is not JSON or does not have the shape of a thread.
    pub fn from_json(text: &str) -> Result<Self, ParseError> {
        let value: Value = serde_json::from_str(text).map_err(ParseError::Json)?;
        Self::from_value(value)
    }

    /// Converts a parsed JSON value into a thread (shape only, see [`Thread::from_json`]).
    ///
    /// # Errors
    ///
    /// [`ParseError::Shape`] when the value does not have the shape of a thread.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        serde_json::from_value(value).map_err(ParseError::Shape)
    }

    /// The thread as a JSON value.
    ///
    /// # Errors
    ///
    /// Only if a value in `extra` cannot be represented (never for values read from JSON).
    pub fn to_value(&self) -> Result<Value, ParseError> {
        serde_json::to_value(self).map_err(ParseError::Shape)
    }
}

/// An entry of the agent registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentConfig {
    /// Globally unique agent ID (a UUID by the spec; other strings are accepted with a warning).
    pub agent_id: String,
    /// Human-readable name.
    pub agent_name: String,
    /// Model name, e.g. `gpt-4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    /// Provider name, e.g. `openai`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_name: Option<String>,
    /// ISO 8601 creation time.
    pub created_at: String,
    /// Reference to the agent's configuration kept elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<String>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// The outgoing relationships of a thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadRelationships {
    /// Outgoing links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<Vec<ThreadLink>>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// One outgoing link to another thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadLink {
    /// The target thread's UUID.
    pub thread_id: String,
    /// `spawned_from`, `merged_from`, `referenced` or a custom relation.
    pub relation: String,
    /// Relation-specific data (`null` is kept).
    #[serde(
        default,
        deserialize_with = "crate::serde_util::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub metadata: Option<Value>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}
