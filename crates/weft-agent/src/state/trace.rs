//! Sub-agent execution traces kept in `AgentState` (UAP-1.0 §8.8).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_provider::{TokenUsage, ToolExecution};

/// One tool execution inside a sub-agent run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolExecutionTrace {
    /// The tool's name.
    pub tool_name: String,
    /// The call id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The arguments.
    pub arguments: Value,
    /// The result, as text (a JSON string result is kept as its string).
    pub result: String,
    /// Whether the tool failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Wall time in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<u64>,
}

impl From<&ToolExecution> for ToolExecutionTrace {
    fn from(execution: &ToolExecution) -> Self {
        ToolExecutionTrace {
            tool_name: execution.tool_name.clone(),
            tool_call_id: Some(execution.tool_call_id.clone()),
            arguments: execution.arguments.clone(),
            result: value_text(&execution.result),
            is_error: Some(execution.is_error),
            duration: Some(execution.duration),
        }
    }
}

/// A JSON value as text: strings as they are, everything else as JSON.
pub(crate) fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The record of one sub-agent run.
///
/// # Examples
///
/// ```
/// use weft_agent::{AgentState, SubagentExecutionTrace};
///
/// let trace = SubagentExecutionTrace {
///     subagent_id: "8d2c…".into(), subagent_type: "explorer".into(),
///     parent_tool_call_id: "call_1".into(), prompt: "find main".into(),
///     start_time: 1_700_000_000_000, end_time: 1_700_000_000_250, success: true,
///     result: Some("src/main.rs".into()), error: None, tool_executions: None, usage: None,
/// };
/// let state = AgentState::initial().with_subagent_trace(trace.clone());
/// assert_eq!(state.subagent_traces().next(), Some(&trace));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentExecutionTrace {
    /// The sub-agent instance id.
    pub subagent_id: String,
    /// The sub-agent's type or name.
    pub subagent_type: String,
    /// The tool call that spawned it.
    pub parent_tool_call_id: String,
    /// The task given to it.
    pub prompt: String,
    /// Start, in ms since the epoch.
    pub start_time: i64,
    /// End, in ms since the epoch.
    pub end_time: i64,
    /// Whether it succeeded.
    pub success: bool,
    /// Its response, on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The error, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every tool it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_executions: Option<Vec<ToolExecutionTrace>>,
    /// Its token usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
}
