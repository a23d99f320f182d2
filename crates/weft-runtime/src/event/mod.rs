//! The events of a run: one typed vocabulary, numbered and stored.
//!
//! A [`RunEvent`] is an envelope — `seq` (1, 2, 3, … per run, without gaps), `id`,
//! `timestamp`, `runId`, the agent that acted (`agentId`, and `agentPath` for sub-agents:
//! `main/researcher`), `turn` (the run's step), `toolCallId` where it concerns a call — around
//! an [`EventKind`] (`type` and `payload`). It is the runtime spec's `RuntimeEvent`; `weft run
//! --json`, `weft events --json` and library callers read the same objects, one per line:
//!
//! ```json
//! {"seq":4,"id":"R:4","timestamp":"2026-11-24T10:00:00.120Z","runId":"R","agentId":"main",
//!  "agentPath":"main","type":"tool_call_start","turn":1,"toolCallId":"call_1",
//!  "payload":{"tool":"read_file","arguments":{"path":"notes.md"}}}
//! ```
//!
//! Every event of a run is written to the store's event log by the run's [`Emitter`] in
//! `seq` order (text deltas coalesced, about 100 ms or 4 KB per event), so a viewer that
//! joins late — another process, a reconnecting browser — reads the log after the last `seq`
//! it saw and misses nothing. Live subscribers ([`RunEvents`]) receive the same events over a
//! bounded channel; one that falls behind reads back from the log. The schema is in
//! `docs/events.md`.

mod emitter;
mod kind;
mod mapping;
mod stream;
mod ui_stream;

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use weft_store::EventRecord;

pub use emitter::Emitter;
pub use kind::{AgentType, EventKind, SessionStatus, Side, StopReason};
pub use stream::RunEvents;
pub use ui_stream::{ApprovalChunks, UiStreamEncoder};

/// Which agent of a run acted: the root agent's name, then each sub-agent's, joined by `/`
/// (`main`, `main/researcher`). Cheap to clone.
///
/// # Examples
///
/// ```
/// use weft_runtime::event::AgentPath;
/// let child = AgentPath::root("main").child("researcher");
/// assert_eq!((child.as_str(), child.agent_id(), child.depth()), ("main/researcher", "researcher", 1));
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct AgentPath(Arc<str>);

impl AgentPath {
    /// The path of a run's root agent.
    pub fn root(name: &str) -> Self {
        AgentPath(Arc::from(name))
    }

    /// The path of a sub-agent `name` of this agent.
    #[must_use]
    pub fn child(&self, name: &str) -> Self {
        AgentPath(Arc::from(format!("{}/{name}", self.0)))
    }

    /// The whole path.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The agent itself (the path's last name).
    pub fn agent_id(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or_default()
    }

    /// 0 for the root agent, 1 for its sub-agents, …
    pub fn depth(&self) -> usize {
        self.0.matches('/').count()
    }
}

impl fmt::Debug for AgentPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for AgentPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One event of a run (see the module docs for its JSON form).
///
/// # Examples
///
/// ```
/// use weft_runtime::event::{AgentPath, EventKind, RunEvent};
/// let event = RunEvent {
///     seq: 1,
///     timestamp: "2026-11-24T10:00:00.000Z".into(),
///     run_id: "R".into(),
///     agent: AgentPath::root("main"),
///     turn: 0,
///     tool_call_id: None,
///     kind: EventKind::Error { message: "boom".into(), reason: None },
/// };
/// let json = serde_json::to_value(&event)?;
/// assert_eq!((json["type"].as_str(), json["payload"]["message"].as_str()), (Some("error"), Some("boom")));
/// assert_eq!(serde_json::from_value::<RunEvent>(json)?, event);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RunEvent {
    /// The event's number in its run: 1, 2, 3, … without gaps.
    pub seq: u64,
    /// When it happened (ISO 8601, UTC).
    pub timestamp: String,
    /// The run.
    pub run_id: String,
    /// The agent that acted.
    pub agent: AgentPath,
    /// The run's step (the runtime spec's turn) when it happened.
    pub turn: u64,
    /// The tool call it concerns.
    pub tool_call_id: Option<String>,
    /// What happened.
    pub kind: EventKind,
}

impl RunEvent {
    /// The event's id: `{runId}:{seq}`, unique in a store.
    pub fn id(&self) -> String {
        format!("{}:{}", self.run_id, self.seq)
    }

    /// The event a stored record holds.
    pub fn from_record(record: EventRecord) -> Self {
        RunEvent {
            seq: record.seq,
            kind: EventKind::from_parts(&record.event_type, record.payload),
            timestamp: record.timestamp,
            run_id: record.run_id,
            agent: AgentPath(Arc::from(record.agent_id)),
            turn: record.turn,
            tool_call_id: record.tool_call_id,
        }
    }
}

/// The JSON form (the runtime spec's `RuntimeEvent`, plus `seq` and `agentPath`).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    seq: u64,
    #[serde(default)]
    id: String,
    timestamp: String,
    run_id: String,
    agent_id: String,
    agent_path: String,
    #[serde(rename = "type")]
    kind: String,
    turn: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
    payload: Value,
}

impl Serialize for RunEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (kind, payload) = self.kind.clone().into_parts();
        Wire {
            seq: self.seq,
            id: self.id(),
            timestamp: self.timestamp.clone(),
            run_id: self.run_id.clone(),
            agent_id: self.agent.agent_id().to_owned(),
            agent_path: self.agent.as_str().to_owned(),
            kind,
            turn: self.turn,
            tool_call_id: self.tool_call_id.clone(),
            payload,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RunEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(deserializer)?;
        Ok(RunEvent {
            seq: wire.seq,
            timestamp: wire.timestamp,
            run_id: wire.run_id,
            agent: AgentPath(Arc::from(wire.agent_path)),
            turn: wire.turn,
            tool_call_id: wire.tool_call_id,
            kind: EventKind::from_parts(&wire.kind, wire.payload),
        })
    }
}
