//! The records the store keeps: runs, events, artifacts, agent lineage, threads, tool calls
//! and checkpoint summaries. Field names in JSON are snake_case (the CLI's `--json` contract).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The current time as stored: RFC 3339, UTC, microseconds (`2026-11-22T10:00:00.123456Z`).
pub fn now_string() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// A fresh UUIDv4 string.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Tokens and cost.
///
/// The cost is `None` when it is unknown (a model without a price took part): unknown is
/// never reported as 0. The usage of nothing ([`Usage::default`]) costs 0.
///
/// # Examples
///
/// ```
/// use weft_store::Usage;
///
/// let priced = Usage { input_tokens: 10, output_tokens: 1, cost: Some(0.5) };
/// let unpriced = Usage { input_tokens: 5, output_tokens: 5, cost: None };
/// assert_eq!(priced.plus(priced).cost, Some(1.0));
/// assert_eq!(priced.plus(unpriced).cost, None);
/// assert_eq!(Usage::default().cost, Some(0.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cost in US dollars; `None` when unknown.
    #[serde(default)]
    pub cost: Option<f64>,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input_tokens: 0,
            output_tokens: 0,
            cost: Some(0.0),
        }
    }
}

impl Usage {
    /// The sum of two usages (the cost is unknown when either is).
    #[must_use]
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            cost: self.cost.zip(other.cost).map(|(a, b)| a + b),
        }
    }
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Running in a live process.
    Running,
    /// Finished.
    Completed,
    /// Ended with an error.
    Failed,
    /// Its process died or it was stopped before the end; `weft resume` continues it.
    Interrupted,
    /// Waiting for a person's decision on a tool call (`weft approve` / `weft deny`, then
    /// `weft resume`).
    Suspended,
}

impl RunStatus {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Suspended => "suspended",
        }
    }

    /// Parses the stored word.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => RunStatus::Running,
            "completed" => RunStatus::Completed,
            "failed" => RunStatus::Failed,
            "interrupted" => RunStatus::Interrupted,
            "suspended" => RunStatus::Suspended,
            _ => return None,
        })
    }
}

/// One run of an agent on a thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run id.
    pub run_id: String,
    /// The thread it runs on (also the checkpoint session id).
    pub thread_id: String,
    /// The root agent.
    pub agent_id: String,
    /// The status. `running` runs whose owner process is gone read as `interrupted`.
    pub status: RunStatus,
    /// The recorded run spec (see `run::RunSpec`).
    pub spec: Value,
    /// When it started.
    pub started_at: String,
    /// Last update.
    pub updated_at: String,
    /// When it ended.
    pub ended_at: Option<String>,
    /// Steps done.
    pub steps: u64,
    /// Usage so far.
    pub usage: Usage,
    /// The process running it.
    pub owner_pid: Option<u32>,
    /// That process's host.
    pub owner_host: Option<String>,
    /// The error that ended it.
    pub error: Option<String>,
    /// The final answer.
    pub output: Option<String>,
    /// The run this one was started from (a resume of a branch), if any.
    pub parent_run_id: Option<String>,
    /// Who owns the run now (read-only here: leases change only through
    /// [`crate::lease::Leases`], never through `put_run`).
    #[serde(default)]
    pub lease: Lease,
}

/// A run's ownership: the owner, until when its lease holds, and the fencing epoch (every
/// claim increments it; writes of an older epoch are rejected).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The owner (`HOST/PID/NONCE`), `None` when nobody holds the run.
    pub owner: Option<String>,
    /// Milliseconds since the Unix epoch until which the lease holds.
    pub until_ms: Option<i64>,
    /// Incremented by every claim.
    pub epoch: i64,
}

/// A model response recorded before its tools ran (runtime spec §5.9: replay never asks
/// the model again for a step whose response is recorded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedResponse {
    /// The run.
    pub run_id: String,
    /// Where in the run the request was made (scope and conversation length).
    pub position: String,
    /// A fingerprint of the request's context; a different one on replay is a divergence.
    pub fingerprint: String,
    /// The response (message, usage, stop reason, structured data).
    pub response: Value,
}

/// The event types of the runtime spec (§5.6) plus Weft's own; any other string is kept.
pub mod event_type {
    /// A step (model call + tool round) starts.
    pub const TURN_START: &str = "turn_start";
    /// A step ends.
    pub const TURN_END: &str = "turn_end";
    /// A tool call starts.
    pub const TOOL_CALL_START: &str = "tool_call_start";
    /// A tool call ends.
    pub const TOOL_CALL_END: &str = "tool_call_end";
    /// A recorded tool result was re-used instead of running the tool.
    pub const TOOL_CALL_REPLAYED: &str = "tool_call_replayed";
    /// A call answered with an error before its tool ran (unknown tool, invalid arguments).
    pub const TOOL_CALL_REFUSED: &str = "tool_call_refused";
    /// A run resumes from a checkpoint (or recovery mode starts).
    pub const RECOVERY: &str = "recovery";
    /// The task completed.
    pub const COMPLETION: &str = "completion";
    /// An error.
    pub const ERROR: &str = "error";
    /// A model routing decision.
    pub const ROUTING: &str = "routing";
    /// A checkpoint was written.
    pub const CHECKPOINT: &str = "checkpoint";
    /// A run started.
    pub const RUN_START: &str = "run_start";
}

/// An event to append.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEvent {
    /// See [`event_type`].
    #[serde(rename = "type")]
    pub event_type: String,
    /// The run.
    pub run_id: String,
    /// The thread.
    pub thread_id: String,
    /// The agent.
    pub agent_id: String,
    /// The turn (step) number.
    pub turn: u64,
    /// The tool call, for tool events.
    pub tool_call_id: Option<String>,
    /// Details (redacted before they are written).
    pub payload: Value,
    /// The event's number in its run (`None`: the next one, assigned by the store; writers
    /// appending to one run at once, through one handle or several, get 1, 2, 3, … with no
    /// gap and no duplicate). A run's owner numbers its events itself to publish them before
    /// they are written; numbers are unique per run.
    #[serde(default)]
    pub seq: Option<u64>,
    /// When it happened, ISO 8601 (`None`: now).
    #[serde(default)]
    pub timestamp: Option<String>,
}

impl NewEvent {
    /// An event of `run_id` on `thread_id` by `agent_id`, numbered and stamped by the store.
    pub fn new(
        event_type: impl Into<String>,
        run_id: impl Into<String>,
        thread_id: impl Into<String>,
        agent_id: impl Into<String>,
        payload: Value,
    ) -> Self {
        NewEvent {
            event_type: event_type.into(),
            run_id: run_id.into(),
            thread_id: thread_id.into(),
            agent_id: agent_id.into(),
            turn: 0,
            tool_call_id: None,
            payload,
            seq: None,
            timestamp: None,
        }
    }
}

/// A stored event (the runtime spec's `RuntimeEvent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// The event's number in its run: 1, 2, 3, … without gaps (log order within the run).
    pub seq: u64,
    /// The event id (`{run_id}:{seq}`; a UUID for events written before schema 6).
    pub id: String,
    /// See [`event_type`].
    #[serde(rename = "type")]
    pub event_type: String,
    /// The run.
    pub run_id: String,
    /// The thread.
    pub thread_id: String,
    /// The agent.
    pub agent_id: String,
    /// The turn.
    pub turn: u64,
    /// ISO 8601.
    pub timestamp: String,
    /// The tool call, for tool events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Details.
    pub payload: Value,
}

/// Which events to read. Empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventQuery {
    /// Only this run.
    pub run_id: Option<String>,
    /// Only this thread.
    pub thread_id: Option<String>,
    /// Only these types.
    pub types: Vec<String>,
    /// At or after this time (ISO 8601).
    pub since: Option<String>,
    /// Before this time.
    pub until: Option<String>,
    /// Only events after this `seq` (for following a run's log; meaningful with `run_id`).
    pub after_seq: Option<u64>,
    /// At most this many.
    pub limit: Option<u64>,
}

/// Artifact types (§8.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactType {
    /// A file on disk (`path`).
    File,
    /// A plan.
    Plan,
    /// A report.
    Report,
    /// A diagram.
    Diagram,
}

impl ArtifactType {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactType::File => "file",
            ArtifactType::Plan => "plan",
            ArtifactType::Report => "report",
            ArtifactType::Diagram => "diagram",
        }
    }

    /// Parses the stored word.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "file" => ArtifactType::File,
            "plan" => ArtifactType::Plan,
            "report" => ArtifactType::Report,
            "diagram" => ArtifactType::Diagram,
            _ => return None,
        })
    }
}

/// An artifact to store: `path` for files, `content` for inline artifacts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewArtifact {
    /// The run.
    pub run_id: String,
    /// The agent that produced it.
    pub agent_id: String,
    /// The checkpoint that produced it.
    pub checkpoint_id: Option<String>,
    /// Its type.
    pub artifact_type: ArtifactType,
    /// File path (file artifacts; hashed when readable and `content` is empty).
    pub path: Option<String>,
    /// Inline content.
    pub content: Option<String>,
    /// Media type (e.g. `text/markdown`).
    pub media_type: Option<String>,
}

/// `{size, hash, mimeType}` (§8.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactMetadata {
    /// Bytes.
    pub size: u64,
    /// `sha256:<hex>`.
    pub hash: String,
    /// Media type.
    pub mime_type: Option<String>,
}

/// A stored artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactRecord {
    /// Its id.
    pub id: String,
    /// What was stored.
    #[serde(flatten)]
    pub artifact: NewArtifact,
    /// Size, hash, media type.
    pub metadata: ArtifactMetadata,
    /// When.
    pub created_at: String,
}

/// Lineage status (§8.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    /// Running.
    Active,
    /// Done.
    Completed,
    /// Failed.
    Failed,
    /// In recovery.
    Recovering,
}

impl AgentStatus {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Active => "active",
            AgentStatus::Completed => "completed",
            AgentStatus::Failed => "failed",
            AgentStatus::Recovering => "recovering",
        }
    }

    /// Parses the stored word.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "active" => AgentStatus::Active,
            "completed" => AgentStatus::Completed,
            "failed" => AgentStatus::Failed,
            "recovering" => AgentStatus::Recovering,
            _ => return None,
        })
    }
}

/// One agent in a run's lineage tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentNode {
    /// The agent id.
    pub id: String,
    /// The run.
    pub run_id: String,
    /// The parent agent (`None` for the root).
    pub parent_agent_id: Option<String>,
    /// Its SOP role (`coder`, `researcher`, …).
    pub role: String,
    /// Status.
    pub status: AgentStatus,
    /// 0 for the root.
    pub depth: u32,
    /// When created.
    pub created_at: String,
    /// When finished.
    pub completed_at: Option<String>,
    /// Its own usage (not its children's).
    pub usage: Usage,
}

/// Checkpoint retention of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Retention {
    /// Keep only the newest N checkpoints (`None`: all).
    pub keep_last: Option<u32>,
    /// Drop tool-result checkpoints older than the newest step-end checkpoint.
    pub drop_superseded_tool_checkpoints: bool,
}

/// A thread: the persistent entity runs work on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadRecord {
    /// Its id.
    pub id: String,
    /// When created.
    pub created_at: String,
    /// Last update.
    pub updated_at: String,
    /// The thread it was branched from.
    pub parent_thread_id: Option<String>,
    /// A title.
    pub title: Option<String>,
    /// User metadata.
    pub metadata: Map<String, Value>,
    /// Checkpoint retention (`None`: keep everything).
    pub retention: Option<Retention>,
}

impl ThreadRecord {
    /// A new thread record with `id`, now.
    pub fn new(id: impl Into<String>) -> Self {
        let now = now_string();
        ThreadRecord {
            id: id.into(),
            created_at: now.clone(),
            updated_at: now,
            parent_thread_id: None,
            title: None,
            metadata: Map::new(),
            retention: None,
        }
    }
}

/// State of a recorded tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// Recorded before it ran; no result yet (in flight, or uncertain after a crash).
    Pending,
    /// The result is recorded.
    Completed,
}

/// A tool call in the durable ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// The run.
    pub run_id: String,
    /// The call's position in the run (`SCOPE@MESSAGES#INDEX`: the request that asked for it
    /// and its index in the response): the ledger's key.
    pub position: String,
    /// The call id the model gave.
    pub tool_call_id: String,
    /// SHA-256 of the call's canonical arguments (hex), checked on replay.
    pub args_hash: String,
    /// The thread.
    pub thread_id: String,
    /// The tool.
    pub tool_name: String,
    /// Arguments (redacted).
    pub arguments: Value,
    /// Pending or completed.
    pub status: ToolCallStatus,
    /// The result, once completed.
    pub result: Option<Value>,
    /// Whether the result is an error.
    pub is_error: bool,
    /// How many times the tool was started for this call.
    pub attempts: u32,
    /// The tool declared side effects.
    pub side_effects: bool,
    /// The tool declared itself idempotent.
    pub idempotent: bool,
    /// The turn (step) it belongs to.
    pub turn: u64,
    /// First start.
    pub started_at: String,
    /// When the result was recorded.
    pub ended_at: Option<String>,
}

/// One row of `weft checkpoints list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointSummary {
    /// Checkpoint id.
    pub id: String,
    /// The thread.
    pub thread_id: String,
    /// Ordinal within the thread (`checkpoints.step`).
    pub step: u64,
    /// `step` (a step end) or `tool` (after a tool result).
    pub kind: String,
    /// The agent's step number.
    pub agent_step: u64,
    /// The agent.
    pub agent_id: String,
    /// The run, when known.
    pub run_id: Option<String>,
    /// ISO 8601.
    pub timestamp: String,
    /// Messages in the state.
    pub message_count: u64,
    /// Pending tool calls.
    pub pending_tools: u64,
    /// Completed tool calls.
    pub completed_tools: u64,
    /// Usage so far.
    pub usage: Usage,
}
