//! Tools: definitions the model may call, calls, results and execution records (UPP-1.2 §10).
//!
//! A [`Tool`] is a value: name, description, a JSON-Schema object for its parameters, and a
//! `run` function. The model's arguments are untrusted input; the tool checks them (the bare
//! `llm()` loop does not validate them, §10.4; the agent layer does, as stage one of its gate
//! pipeline).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::message::Metadata;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The provider's id for the call (or one Weft made up when the provider sent none).
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments, a JSON object.
    pub arguments: Value,
    /// UAP-1.0 §8.6: ids of calls in the same round that must finish before this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
}

impl ToolCall {
    /// A call without ordering constraints.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            tool_call_id: id.into(),
            tool_name: name.into(),
            arguments,
            after: Vec::new(),
        }
    }
}

/// The result of one tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The call this answers.
    pub tool_call_id: String,
    /// The result value (a string, object, …).
    pub result: Value,
    /// Whether the result reports an error.
    #[serde(default)]
    pub is_error: bool,
}

/// The record of one tool execution in a turn (§7.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolExecution {
    /// The tool's name.
    pub tool_name: String,
    /// The call id.
    pub tool_call_id: String,
    /// The arguments the tool ran with (after any `on_before_call` transformation).
    pub arguments: Value,
    /// What was sent back to the model.
    pub result: Value,
    /// Whether the result is an error.
    pub is_error: bool,
    /// Wall time in milliseconds.
    pub duration: u64,
    /// The approval decision, when the tool has an approval hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
}

/// An error returned by a tool's `run`; sent to the model as an error result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// What went wrong, in words the model can act on.
    pub message: String,
    /// Whether the failure is transient (a retry may succeed). Used by the runtime profile.
    pub transient: bool,
    /// Whether the tool may have had its effect although it did not finish (its process died
    /// mid-call, a timeout cut it off): a durable run leaves such a call *uncertain* — not
    /// recorded as done — and stops on it until a person decides (see
    /// [`ToolError::uncertain`]).
    pub uncertain: bool,
}

impl ToolError {
    /// A permanent tool error.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            transient: false,
            uncertain: false,
        }
    }

    /// A transient tool error (e.g. a network hiccup).
    pub fn transient(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            transient: true,
            uncertain: false,
        }
    }

    /// The call ended without an answer and its effect is unknown (the server running it
    /// exited mid-call). Never retried; a durable run keeps the call pending and stops on it.
    ///
    /// ```
    /// let error = weft_provider::ToolError::uncertain("the server exited during the call");
    /// assert!(error.uncertain && !error.transient);
    /// ```
    pub fn uncertain(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            transient: false,
            uncertain: true,
        }
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        ToolError::new(message)
    }
}

/// A type map for values a caller hands to tools (the agent layer puts its execution context
/// here: parent model, agent id, event sink).
#[derive(Clone, Default)]
pub struct Extensions {
    map: Option<Arc<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>>,
}

impl Extensions {
    /// An empty map.
    pub fn new() -> Self {
        Extensions::default()
    }

    /// Adds (or replaces) the value of type `T`.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: T) {
        let map = Arc::make_mut(self.map.get_or_insert_with(Default::default));
        map.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The value of type `T`, if present.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.map
            .as_ref()?
            .get(&TypeId::of::<T>())
            .and_then(|v| v.downcast_ref::<T>())
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = self.map.as_ref().map_or(0, |m| m.len());
        write!(f, "Extensions({len} values)")
    }
}

/// What a running tool knows about its call.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The call's id: stable across replays, so tools can use it as an idempotency key.
    pub tool_call_id: String,
    /// Cancelled when the generation is aborted; long-running tools should watch it.
    pub signal: CancellationToken,
    /// Values the caller provided for tools.
    pub extensions: Extensions,
}

/// The body of a tool.
pub trait ToolRun: Send + Sync {
    /// Runs the tool with the model's arguments.
    fn run(
        &self,
        arguments: Value,
        context: ToolContext,
    ) -> BoxFuture<'static, Result<Value, ToolError>>;
}

impl<F, Fut> ToolRun for F
where
    F: Fn(Value, ToolContext) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    fn run(
        &self,
        arguments: Value,
        context: ToolContext,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        Box::pin(self(arguments, context))
    }
}

/// An approval hook (§10.3): `Ok(true)` runs the tool, `Ok(false)` refuses it (the model gets
/// an error result), `Err` aborts the whole generation.
pub trait ToolApproval: Send + Sync {
    /// Decides whether the call may run.
    fn approve(&self, arguments: &Value) -> BoxFuture<'static, Result<bool, ToolError>>;
}

impl<F, Fut> ToolApproval for F
where
    F: Fn(&Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<bool, ToolError>> + Send + 'static,
{
    fn approve(&self, arguments: &Value) -> BoxFuture<'static, Result<bool, ToolError>> {
        Box::pin(self(arguments))
    }
}

/// A tool the model may call.
///
/// # Examples
///
/// ```
/// use serde_json::json;
/// use weft_provider::{Tool, ToolError};
///
/// let add = Tool::new(
///     "add",
///     "Adds two integers.",
///     json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
///            "required": ["a", "b"]}),
///     |args: serde_json::Value, _ctx| async move {
///         let a = args["a"].as_i64().ok_or(ToolError::new("a must be an integer"))?;
///         let b = args["b"].as_i64().ok_or(ToolError::new("b must be an integer"))?;
///         Ok(json!(a + b))
///     },
/// );
/// assert_eq!(add.name, "add");
/// ```
#[derive(Clone)]
pub struct Tool {
    /// Unique name within one `llm()` instance.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments (`type: "object"`).
    pub parameters: Value,
    /// Provider-namespaced extras (e.g. `{"anthropic": {"cache_control": …}}`).
    pub metadata: Option<Metadata>,
    /// Whether running the tool changes the world (files, processes, network writes).
    /// Durable execution makes such calls durable before they run.
    pub side_effects: bool,
    /// Whether re-running the tool with the same call id is harmless.
    pub idempotent: bool,
    /// UAP-1.0 §8.5: this tool never runs in parallel with other calls.
    pub sequential: bool,
    /// UAP-1.0 §8.5: names of tools whose calls in the same round must finish first.
    pub depends_on: Vec<String>,
    run: Arc<dyn ToolRun>,
    approval: Option<Arc<dyn ToolApproval>>,
    /// The compiled `parameters` schema, looked up on first use (`None`: not a valid
    /// schema). No allocation until then; tools with the same schema share one validator.
    validator: std::sync::OnceLock<Option<Arc<jsonschema::Validator>>>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("parameters", &self.parameters)
            .field("side_effects", &self.side_effects)
            .field("approval", &self.approval.is_some())
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// A tool from its name, description, parameter schema and body. By default it is
    /// side-effect free, not idempotent-declared, parallel and without approval.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        run: impl ToolRun + 'static,
    ) -> Self {
        Tool {
            name: name.into(),
            description: description.into(),
            parameters,
            metadata: None,
            side_effects: false,
            idempotent: false,
            sequential: false,
            depends_on: Vec::new(),
            run: Arc::new(run),
            approval: None,
            validator: std::sync::OnceLock::new(),
        }
    }

    /// What is wrong with `arguments` against the tool's `parameters` schema, in one line
    /// (`None` when they match, or when the schema itself cannot be compiled). The schema is
    /// compiled once per tool.
    pub fn schema_problems(&self, arguments: &Value) -> Option<String> {
        let validator = self
            .validator
            .get_or_init(|| compiled_schema(&self.parameters))
            .as_ref()?;
        // The common case first: a valid call costs one check, no error collection.
        if validator.is_valid(arguments) {
            return None;
        }
        let problems: Vec<String> = validator
            .iter_errors(arguments)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        (!problems.is_empty()).then(|| problems.join("; "))
    }

    /// Adds an approval hook, asked before every run.
    #[must_use]
    pub fn with_approval(mut self, approval: impl ToolApproval + 'static) -> Self {
        self.approval = Some(Arc::new(approval));
        self
    }

    /// Declares that the tool has side effects.
    #[must_use]
    pub fn with_side_effects(mut self, side_effects: bool) -> Self {
        self.side_effects = side_effects;
        self
    }

    /// Declares that the tool is idempotent (safe to re-run with the same call id).
    #[must_use]
    pub fn with_idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// Marks the tool as sequential (UAP-1.0 §8.5).
    #[must_use]
    pub fn with_sequential(mut self, sequential: bool) -> Self {
        self.sequential = sequential;
        self
    }

    /// Sets the tools that must finish before this one in the same round (UAP-1.0 §8.5).
    #[must_use]
    pub fn with_depends_on(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.depends_on = names.into_iter().map(Into::into).collect();
        self
    }

    /// Sets provider-namespaced metadata.
    #[must_use]
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// Whether the tool has an approval hook.
    pub fn requires_approval(&self) -> bool {
        self.approval.is_some()
    }

    /// Asks the approval hook; `Ok(true)` when there is none.
    ///
    /// # Errors
    /// When the hook fails; the generation must then be aborted (§10.4).
    pub async fn approve(&self, arguments: &Value) -> Result<bool, ToolError> {
        match &self.approval {
            Some(approval) => approval.approve(arguments).await,
            None => Ok(true),
        }
    }

    /// Runs the tool.
    ///
    /// # Errors
    /// Whatever the tool reports; the loop sends it to the model as an error result.
    pub fn run(
        &self,
        arguments: Value,
        context: ToolContext,
    ) -> BoxFuture<'static, Result<Value, ToolError>> {
        self.run.run(arguments, context)
    }
}

/// The validator of `schema`, compiled once per process for each distinct schema (agents
/// built per conversation share their tools' validators). `None` for a schema that does not
/// compile.
fn compiled_schema(schema: &Value) -> Option<Arc<jsonschema::Validator>> {
    type Cache = std::sync::Mutex<HashMap<String, Option<Arc<jsonschema::Validator>>>>;
    static CACHE: std::sync::LazyLock<Cache> = std::sync::LazyLock::new(Cache::default);
    let key = schema.to_string();
    if let Some(found) = CACHE.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return found;
    }
    let compiled = jsonschema::validator_for(schema).ok().map(Arc::new);
    if let Ok(mut cache) = CACHE.lock() {
        if cache.len() >= 1024 {
            cache.clear();
        }
        cache.insert(key, compiled.clone());
    }
    compiled
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn extensions_hold_one_value_per_type() {
        let mut ext = Extensions::new();
        assert!(ext.get::<u32>().is_none());
        ext.insert(7u32);
        ext.insert("agent-1".to_string());
        let copy = ext.clone();
        ext.insert(8u32);
        assert_eq!(ext.get::<u32>(), Some(&8));
        assert_eq!(copy.get::<u32>(), Some(&7));
        assert_eq!(copy.get::<String>().map(String::as_str), Some("agent-1"));
    }

    #[test]
    fn tool_result_is_error_defaults_to_false() {
        let result: ToolResult =
            serde_json::from_value(json!({"toolCallId": "c", "result": "ok"})).unwrap();
        assert!(!result.is_error);
    }

    #[tokio::test]
    async fn approval_defaults_to_yes_and_hooks_are_asked() {
        let tool = Tool::new("t", "d", json!({"type": "object"}), |_a: Value, _c| async {
            Ok(json!(1))
        });
        assert!(tool.approve(&json!({})).await.unwrap());
        let guarded = tool.with_approval(|args: &Value| {
            let ok = args["ok"] == json!(true);
            async move { Ok(ok) }
        });
        assert!(guarded.requires_approval());
        assert!(!guarded.approve(&json!({"ok": false})).await.unwrap());
        assert!(guarded.approve(&json!({"ok": true})).await.unwrap());
    }
}
