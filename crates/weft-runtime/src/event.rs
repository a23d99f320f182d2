//! The events of a run: one typed vocabulary that `weft run --json`, `weft resume --json`
//! and library callers read (serialized as `{"type": "...", ...}` with camelCase keys; the
//! schema is in docs/architecture/weft-standard.md). Standard Agents sessions produce them
//! today; issue 15 of the tracker numbers and stores them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The conversation mode of an agent (agents §2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentType {
    /// Side A is the AI, side B the human (the default, SA-002).
    #[default]
    AiHuman,
    /// Both sides are AI (SA-007).
    DualAi,
}

impl AgentType {
    /// The spec's spelling: `ai_human` or `dual_ai`.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentType::AiHuman => "ai_human",
            AgentType::DualAi => "dual_ai",
        }
    }
}

/// One side of a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Side {
    /// Side A (the AI of an `ai_human` agent; the first speaker of a `dual_ai` one).
    #[serde(rename = "sideA")]
    A,
    /// Side B (the human of an `ai_human` agent; the second AI of a `dual_ai` one).
    #[serde(rename = "sideB")]
    B,
}

impl Side {
    /// The key spelling: `sideA` / `sideB`.
    pub fn key(self) -> &'static str {
        match self {
            Side::A => "sideA",
            Side::B => "sideB",
        }
    }

    /// The other side.
    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Stopped by `sessionStop`, a stop tool, or a response (exit code 0).
    Completed,
    /// Stopped by `sessionFail`, a safety limit of a `dual_ai` session, or an error (exit 1).
    Failed,
    /// Stopped by the caller's signal (exit 130).
    Interrupted,
}

/// What stopped the session (agents §5), in evaluation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// A `sessionStop` binding was called.
    SessionStop,
    /// A `sessionFail` binding was called.
    SessionFail,
    /// The side's `stopTool` was called.
    StopTool,
    /// A text response without tool calls (`stopOnResponse`).
    Response,
    /// `maxSteps` of a side turn.
    MaxSteps,
    /// `maxSessionTurns`.
    MaxSessionTurns,
    /// The model or the runtime failed.
    Error,
    /// The caller stopped the session.
    Interrupted,
}

/// One event of a running run (a Standard Agents session's turns, steps, text and tools). Serialized as `{"type": "...", ...}` with camelCase keys:
/// the `--json` output of `weft run` (docs/architecture/weft-standard.md lists the schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
    /// The session started.
    #[serde(rename_all = "camelCase")]
    SessionStart {
        /// The agent.
        agent: String,
        /// `ai_human` or `dual_ai`.
        agent_type: AgentType,
    },
    /// A side's turn started.
    #[serde(rename_all = "camelCase")]
    TurnStart {
        /// The agent.
        agent: String,
        /// The side.
        side: Side,
        /// The side's label (or the agent's name).
        label: String,
        /// The session turn, from 1.
        turn: u64,
        /// Nesting depth (0 for the top-level agent).
        depth: u32,
    },
    /// A model call is about to be made.
    #[serde(rename_all = "camelCase")]
    StepStart {
        /// The agent.
        agent: String,
        /// The side.
        side: Side,
        /// The step number of this side's state.
        step: u64,
        /// Nesting depth.
        depth: u32,
    },
    /// A step ended (its model call and tool round), with the run's usage so far.
    #[serde(rename_all = "camelCase")]
    StepEnd {
        /// The agent.
        agent: String,
        /// The side.
        side: Side,
        /// The step number of this side's state.
        step: u64,
        /// Input tokens of the run so far.
        input_tokens: u64,
        /// Output tokens of the run so far.
        output_tokens: u64,
        /// What the run cost so far, in US dollars (`null`: a model without a known price).
        cost: Option<f64>,
        /// Nesting depth.
        depth: u32,
    },
    /// Streamed text.
    #[serde(rename_all = "camelCase")]
    TextDelta {
        /// The agent.
        agent: String,
        /// The side.
        side: Side,
        /// The text.
        text: String,
        /// Nesting depth.
        depth: u32,
    },
    /// Streamed reasoning.
    #[serde(rename_all = "camelCase")]
    ReasoningDelta {
        /// The agent.
        agent: String,
        /// The side.
        side: Side,
        /// The text.
        text: String,
        /// Nesting depth.
        depth: u32,
    },
    /// A tool call starts.
    #[serde(rename_all = "camelCase")]
    ToolCall {
        /// The agent.
        agent: String,
        /// The side.
        side: Side,
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// The arguments.
        arguments: Value,
        /// Nesting depth.
        depth: u32,
    },
    /// A tool call ended.
    #[serde(rename_all = "camelCase")]
    ToolResult {
        /// The agent.
        agent: String,
        /// The side.
        side: Side,
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// The result.
        result: Value,
        /// Whether the tool failed.
        is_error: bool,
        /// Nesting depth.
        depth: u32,
    },
    /// A `sessionStatus` update (SA-016).
    #[serde(rename_all = "camelCase")]
    Status {
        /// The agent.
        agent: String,
        /// The side.
        side: Side,
        /// The status text.
        message: String,
    },
    /// Control passed to another agent on the same thread (SA-024).
    #[serde(rename_all = "camelCase")]
    Handoff {
        /// The agent that handed off.
        from: String,
        /// The agent that takes over.
        to: String,
        /// The handoff message.
        message: String,
    },
    /// A side's turn ended.
    #[serde(rename_all = "camelCase")]
    TurnEnd {
        /// The agent.
        agent: String,
        /// The side.
        side: Side,
        /// The session turn.
        turn: u64,
        /// Why it ended.
        reason: StopReason,
        /// The turn's output (what the other side receives).
        output: String,
    },
    /// The session ended.
    #[serde(rename_all = "camelCase")]
    SessionEnd {
        /// How.
        status: SessionStatus,
        /// Why.
        reason: StopReason,
        /// The final output or the lifecycle message.
        message: String,
        /// Attachment paths of the lifecycle payload.
        attachments: Vec<String>,
        /// Model calls made.
        steps: u64,
        /// Input tokens.
        input_tokens: u64,
        /// Output tokens.
        output_tokens: u64,
    },
}
