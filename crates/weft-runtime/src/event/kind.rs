//! What happened: [`EventKind`], the `type` and `payload` of a [`RunEvent`](super::RunEvent),
//! and the small vocabularies its payloads use.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_store::DecisionRecord;

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

/// What an event says: its `type` and its `payload` (camelCase keys). The runtime spec's
/// types (`turn_start`, `turn_end`, `tool_call_start`, `tool_call_end`, `recovery`,
/// `completion`, `error`, `routing`) are among them; a *turn* here is the runtime spec's:
/// one model call and its tool round (a step). A Standard Agents side turn is
/// `side_turn_start` / `side_turn_end`.
///
/// `side` is present in the payload of a `dual_ai` session's events (`sideA` / `sideB`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "payload", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// The run was created (written once, with the run).
    #[serde(rename_all = "camelCase")]
    RunStart {
        /// The agent (a Standard Agents agent's name, or the agent program's role).
        #[serde(default)]
        agent: String,
        /// The thread it runs on.
        #[serde(default)]
        thread_id: String,
        /// The run's spec, as stored.
        spec: Value,
    },
    /// The run ended in this process (the last event a live viewer receives).
    #[serde(rename_all = "camelCase")]
    RunEnd {
        /// `completed`, `failed`, `interrupted`, `stopped` (an uncertain call) or `suspended`
        /// (a decision is awaited).
        status: String,
        /// The exit code `weft` gives this end (0, 1, 3, 4, 130).
        exit_code: u8,
        /// Steps of the whole run.
        steps: u64,
        /// Input tokens of the whole run.
        input_tokens: u64,
        /// Output tokens of the whole run.
        output_tokens: u64,
        /// What the run cost, in US dollars (`null`: a model without a known price).
        cost: Option<f64>,
        /// The output, when completed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        /// The error, when failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Decisions the run waits for (approvals, uncertain calls).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        decisions: Vec<DecisionRecord>,
        /// The command that goes on with the run, where one does (set by `weft`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume: Option<String>,
        /// A note on resuming (set by `weft`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume_note: Option<String>,
    },
    /// A run resumes from its checkpoint (runtime spec §5.6), or a resume stopped on calls
    /// whose effect is unknown.
    #[serde(rename_all = "camelCase")]
    Recovery {
        /// The checkpoint resumed from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_checkpoint: Option<String>,
        /// The agent step resumed at.
        #[serde(default)]
        agent_step: u64,
        /// Calls whose recorded results will be replayed.
        #[serde(default)]
        recorded_results: u64,
        /// Uncertain calls a person allowed to run again (their positions).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        rerun_uncertain: Vec<String>,
        /// The resume stopped: these calls may have had their effect (`toolCallId`, `tool`,
        /// `position`, `decision`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        uncertain_calls: Vec<Value>,
        /// The runtime profile's recovery (§5.2): the turn limit's grace period begins
        /// (`{trigger: "limit_reached", turns, maxTurns, graceTurns, graceTimeoutMs}`); absent
        /// for a resume.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grace: Option<Value>,
    },
    /// A Standard Agents session started.
    #[serde(rename_all = "camelCase")]
    SessionStart {
        /// `ai_human` or `dual_ai`.
        agent_type: AgentType,
    },
    /// A Standard Agents session ended.
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
    /// A side's turn of a session started.
    #[serde(rename_all = "camelCase")]
    SideTurnStart {
        /// The side.
        side: Side,
        /// The side's label (or the agent's name).
        label: String,
        /// The session turn, from 1.
        session_turn: u64,
    },
    /// A side's turn of a session ended.
    #[serde(rename_all = "camelCase")]
    SideTurnEnd {
        /// The side.
        side: Side,
        /// The session turn.
        session_turn: u64,
        /// Why it ended.
        reason: StopReason,
        /// The turn's output (what the other side receives).
        output: String,
    },
    /// A step starts: a model call is about to be made (the runtime spec's turn).
    #[serde(rename_all = "camelCase")]
    TurnStart {
        /// Messages in the conversation.
        messages: u64,
        /// The side.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// A step ended (its model call and tool round), with the run's spending so far.
    #[serde(rename_all = "camelCase")]
    TurnEnd {
        /// Tool calls of the step.
        tool_calls: u64,
        /// The step's input tokens.
        input_tokens: u64,
        /// The step's output tokens.
        output_tokens: u64,
        /// Input tokens of the run so far.
        run_input_tokens: u64,
        /// Output tokens of the run so far.
        run_output_tokens: u64,
        /// What the run cost so far, in US dollars (`null`: unknown).
        cost: Option<f64>,
        /// The side.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// Streamed text (stored coalesced: about 100 ms or 4 KB per event).
    #[serde(rename_all = "camelCase")]
    TextDelta {
        /// The text.
        text: String,
        /// The side.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// Streamed reasoning (coalesced like text).
    #[serde(rename_all = "camelCase")]
    ReasoningDelta {
        /// The text.
        text: String,
        /// The side.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// A tool call starts (the envelope's `toolCallId` names it).
    #[serde(rename_all = "camelCase")]
    ToolCallStart {
        /// The tool.
        tool: String,
        /// The arguments.
        arguments: Value,
        /// The side.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// A tool call ended.
    #[serde(rename_all = "camelCase")]
    ToolCallEnd {
        /// The tool.
        tool: String,
        /// Whether it failed.
        is_error: bool,
        /// The result (absent when it is larger than 16 KiB: see `resultRef`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// The result's size as JSON, when it is referred to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result_bytes: Option<u64>,
        /// Where the whole result is (`{"toolCall": position}` in the run's ledger).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result_ref: Option<Value>,
        /// The side.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// A recorded result was given back instead of running the tool again (a resume).
    #[serde(rename_all = "camelCase")]
    ToolCallReplayed {
        /// The tool.
        tool: String,
        /// Whether the recorded result is an error.
        is_error: bool,
        /// The call's position in the run.
        position: String,
    },
    /// A call was answered with an error before its tool ran, by the named stage of the
    /// tool pipeline (`call`: an unknown tool or arguments that are not JSON).
    #[serde(rename_all = "camelCase")]
    ToolCallRefused {
        /// The tool.
        tool: String,
        /// The stage that refused it.
        stage: String,
        /// Why (what the model reads).
        reason: Value,
        /// The arguments.
        arguments: Value,
        /// Whether a sub-agent made the call.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        sub_agent: bool,
    },
    /// A call is run again after a transient failure.
    #[serde(rename_all = "camelCase")]
    ToolCallRetry {
        /// The tool.
        tool: String,
        /// The retry number, from 1.
        attempt: u32,
        /// The failure.
        error: String,
        /// The wait before the retry.
        delay_ms: u64,
    },
    /// A call waits for a person's decision.
    #[serde(rename_all = "camelCase")]
    DecisionPending {
        /// The decision id.
        decision: String,
        /// `approval`, or `uncertain` (the call may have had its effect: its server died,
        /// it timed out).
        kind: String,
        /// The tool.
        tool: String,
        /// The arguments.
        arguments: Value,
        /// The call's position in the run.
        position: String,
        /// Why it waits (an uncertain call's failure).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A person decided on a call.
    #[serde(rename_all = "camelCase")]
    Decision {
        /// The decision id.
        decision: String,
        /// The tool.
        tool: String,
        /// Whether it may run.
        approved: bool,
        /// Why it was denied.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The task completed.
    #[serde(rename_all = "camelCase")]
    Completion {
        /// The final output.
        summary: String,
        /// Steps of the agent.
        steps: u64,
        /// Why the session stopped (Standard Agents).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<StopReason>,
    },
    /// An error ended the agent's work.
    #[serde(rename_all = "camelCase")]
    Error {
        /// What failed.
        message: String,
        /// Why the session stopped (Standard Agents).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<StopReason>,
    },
    /// Which model serves a turn, and why (runtime spec §5.7).
    #[serde(rename_all = "camelCase")]
    Routing {
        /// The model asked for.
        requested: String,
        /// The model used.
        resolved: String,
        /// Why (`prompt`, `project`, `override`).
        reason: String,
        /// `cost`, `latency` or `quality`.
        policy: String,
        /// The side.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// A checkpoint was written at a step's end.
    #[serde(rename_all = "camelCase")]
    Checkpoint {
        /// The agent's step.
        agent_step: u64,
        /// Messages in the conversation.
        messages: u64,
        /// The side.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// A `sessionStatus` update (SA-016).
    #[serde(rename_all = "camelCase", alias = "session.status")]
    Status {
        /// The status text.
        message: String,
        /// The side.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// Control passed to another agent on the same thread (SA-024).
    #[serde(rename_all = "camelCase", alias = "agent.handoff")]
    Handoff {
        /// The agent that handed off.
        from: String,
        /// The agent that takes over.
        to: String,
        /// The handoff message.
        message: String,
        /// The session turn that ended with it.
        turn: u64,
    },
    /// The tools an agent's MCP servers offer changed (`tools/list_changed`): the next step
    /// offers these.
    #[serde(rename_all = "camelCase")]
    McpToolsChanged {
        /// The servers of the agent's prompt.
        servers: Vec<String>,
        /// Their tools now (`SERVER__TOOL`).
        tools: Vec<String>,
    },
    /// The completion checklist ran before the run could end completed.
    #[serde(rename_all = "camelCase")]
    CompletionGates {
        /// Whether every required check passed.
        passed: bool,
        /// Each check's result.
        summary: Value,
    },
    /// The runtime profile's state machine (runtime spec §6) took an edge.
    #[serde(rename_all = "camelCase")]
    StateTransition {
        /// The state left (`IDLE`, `THINKING`, `TOOL_WAIT`, `OBSERVATION`, `RECOVERY`).
        from: String,
        /// The state entered.
        to: String,
        /// What moved it (`user_input`, `llm_response`, `tool_results`, …).
        trigger: String,
        /// The side (`dual_ai` sessions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// The runtime profile compressed the conversation before a model call (runtime spec
    /// §5.11): how, the tokens before and after, what was replaced.
    #[serde(rename_all = "camelCase")]
    Compression {
        /// `summarize`, `truncate` or `hybrid`.
        strategy: String,
        /// `hybrid` only: `cleared` (clearing old tool outputs was enough) or `summarized`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stage: Option<String>,
        /// The conversation's tokens before.
        tokens_before: u64,
        /// Its tokens after (estimated: the count before less what was removed plus what was
        /// added).
        tokens_after: u64,
        /// `usage` (the provider's reported usage plus an estimate of what came since) or
        /// `estimate` (JSON bytes / 4).
        token_source: String,
        /// The context limit and where it comes from (`maxTokens`, `model`, `default`).
        limit: u64,
        /// See `limit`.
        limit_source: String,
        /// `compressionThreshold` × `limit`: the count that was passed.
        trigger: u64,
        /// The agent step whose checkpoint holds the replaced messages.
        agent_step: u64,
        /// The replaced ranges (`from`, `to`, `firstId`, `lastId`) of that checkpoint's
        /// history.
        replaced: Value,
        /// The message that stands for them (the summary or the truncation note).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary_id: Option<String>,
        /// The configured strategy when it could not be used and `truncate` was (its
        /// summary call failed); `None`: the configured strategy compressed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fallback_from: Option<String>,
        /// Why the configured strategy could not be used (the summary call's error).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The side (`dual_ai` sessions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// The agent's SOP role (runtime spec §7) entered a phase: the tools offered from now on.
    #[serde(rename_all = "camelCase")]
    SopPhase {
        /// The role (`Coder`, `Researcher`, …, or a custom role's name).
        role: String,
        /// The phase entered.
        phase: String,
        /// The phase left (`None`: the role's first phase).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        /// The role's tools offered in the phase (besides `complete_task` and `advance_phase`).
        tools: Vec<String>,
        /// What moved it: `start`, `advance_phase` (the model's call), `max_react_loop`
        /// (the phase used its steps).
        trigger: String,
        /// The side (`dual_ai` sessions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// A notice about a delegated child (`delegate_to_agent`, runtime spec §5.4) as its
    /// parent received it over the run tree's message bus ([`crate::bus`]).
    #[serde(rename_all = "camelCase")]
    Delegation {
        /// The child's reference (its thread id and lineage id).
        reference: String,
        /// The child's role.
        role: String,
        /// `delegated`, `started`, `finished`, `failed` or `suspended`.
        status: String,
        /// The child's depth in the lineage.
        depth: u32,
        /// The bus topic the notice came on.
        topic: String,
    },
    /// A quality gate of the agent's SOP role (runtime spec §7) was checked.
    #[serde(rename_all = "camelCase")]
    SopGate {
        /// The role.
        role: String,
        /// The phase the gate guards (`after`).
        phase: String,
        /// `tests_exist`, `tests_pass` or `diagram_exists`.
        check: String,
        /// Whether it passed.
        passed: bool,
        /// What the check found (the files, the test command's output).
        detail: String,
        /// The side (`dual_ai` sessions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
    },
    /// An event of a type this build does not know (a newer Weft wrote it), kept as is.
    #[serde(skip)]
    Other {
        /// Its type.
        kind: String,
        /// Its payload.
        payload: Value,
    },
}

impl EventKind {
    /// Every type name, for filters (`weft events --type`).
    pub const TYPES: [&'static str; 31] = [
        "run_start",
        "run_end",
        "recovery",
        "session_start",
        "session_end",
        "side_turn_start",
        "side_turn_end",
        "turn_start",
        "turn_end",
        "text_delta",
        "reasoning_delta",
        "tool_call_start",
        "tool_call_end",
        "tool_call_replayed",
        "tool_call_refused",
        "tool_call_retry",
        "decision_pending",
        "decision",
        "completion",
        "error",
        "routing",
        "checkpoint",
        "status",
        "handoff",
        "completion_gates",
        "mcp_tools_changed",
        "state_transition",
        "compression",
        "delegation",
        "sop_phase",
        "sop_gate",
    ];

    /// The `type` and the `payload`.
    pub fn into_parts(self) -> (String, Value) {
        if let EventKind::Other { kind, payload } = self {
            return (kind, payload);
        }
        match serde_json::to_value(&self) {
            Ok(Value::Object(mut map)) => {
                let kind = match map.remove("type") {
                    Some(Value::String(kind)) => kind,
                    _ => String::new(),
                };
                (kind, map.remove("payload").unwrap_or(Value::Null))
            }
            _ => (String::new(), Value::Null),
        }
    }

    /// The kind a stored `type` and `payload` say; one this build cannot read is kept as
    /// [`EventKind::Other`].
    pub fn from_parts(kind: &str, payload: Value) -> Self {
        let mut tagged = serde_json::json!({"type": kind, "payload": payload});
        EventKind::deserialize(&tagged).unwrap_or_else(|_| EventKind::Other {
            kind: kind.to_owned(),
            payload: tagged
                .get_mut("payload")
                .map(Value::take)
                .unwrap_or_default(),
        })
    }

    /// The text of a text or reasoning delta.
    pub fn delta_text(&self) -> Option<&str> {
        match self {
            EventKind::TextDelta { text, .. } | EventKind::ReasoningDelta { text, .. } => {
                Some(text)
            }
            _ => None,
        }
    }
}
