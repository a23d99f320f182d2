//! Transcripts: what was said in a thread, read back from the store — each side's
//! conversation from its checkpoints (side A under the thread id, side B of a `dual_ai`
//! session under `THREAD.sideB`), every message attributed to the run that added it and to
//! the agent that spoke (after an `agent.handoff` event of the run's log, the target agent),
//! and the handoffs themselves.
//!
//! [`Transcript::lines`] is the readable form (`weft runs show`); [`Transcript::to_thread`]
//! the ThreadProtocol thread (`weft thread export`). Both are built only from stored data
//! (message timestamps, the thread id, agent names), so two exports of the same run are
//! equal byte for byte.
//!
//! A run attached to an older thread (`weft run --continue`) added only the messages after
//! the thread's state when it started: [`Transcript::load`] of that run reads the thread up
//! to the run's last checkpoint, and its lines are the entries whose `run_id` is the run's
//! (`earlier` counts the ones before).

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use weft_provider::{ContentBlock, Message};
use weft_store::{
    CheckpointSummary, EventLog as _, EventQuery, RunRecord, Runs as _, Store, Threads as _,
};
use weft_thread::types::{
    AgentConfig, AgentTurn, SystemMessage, Thread, ThreadLink, ThreadRelationships, Turn,
    TurnMessage,
};
use weft_thread::weft_messages;

use crate::error::RunError;
use crate::event::Side;
use crate::spec::RunSpec;

/// The ThreadProtocol system message of a handoff.
pub const HANDOFF_EVENT: &str = "agent.handoff";

/// The ThreadProtocol system message of a thread spawned from this one (a subagent's).
pub const SPAWN_EVENT: &str = "thread.spawn";

/// One thing that happened in a thread: a message, or a handoff between agents.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The side whose conversation holds it.
    pub side: Side,
    /// The agent speaking (the run's agent, or the target of a handoff after it).
    pub agent: String,
    /// The run that added it (`None` for messages a fork copied from another thread).
    pub run_id: Option<String>,
    /// A user message that is a run's input (not a `dual_ai` side hearing the other).
    pub input: bool,
    /// What it is.
    pub item: Item,
}

/// A message or a handoff.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A message of the side's conversation.
    Message(Message),
    /// Control passed from one agent to another.
    Handoff {
        /// The agent that handed off.
        from: String,
        /// The agent that took over.
        to: String,
        /// The handoff's message.
        message: String,
        /// When (the handoff call's result).
        at: DateTime<Utc>,
    },
    /// A child run's thread started by a call of this one (a subagent).
    Spawn {
        /// The child's thread (its reference).
        thread: String,
        /// The subagent.
        agent: String,
        /// When (the call's result: the child had ended).
        at: DateTime<Utc>,
    },
}

impl Entry {
    fn at(&self) -> DateTime<Utc> {
        match &self.item {
            Item::Message(m) => m.timestamp(),
            Item::Handoff { at, .. } | Item::Spawn { at, .. } => *at,
        }
    }
}

/// A thread's conversation as of a run's end (or the thread's latest checkpoint).
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// The thread.
    pub thread_id: String,
    /// The thread this one was forked from, if any (a subagent's thread: its parent's).
    pub forked_from: Option<String>,
    /// The subagent whose child run this thread is (`None`: not a child run's thread). Its
    /// link to the parent thread is the spec's `spawned_from`, its agent named after it.
    pub subagent: Option<String>,
    /// Whether side B has a conversation of its own (a `dual_ai` session).
    pub dual: bool,
    /// Every message of both sides and every handoff, in time order.
    pub entries: Vec<Entry>,
    /// When the thread was created (used when it holds no message).
    pub created_at: String,
}

/// One line of a transcript, as `weft runs show` prints it and as its JSON `transcript` holds
/// it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    /// `sideA` / `sideB`.
    pub side: Side,
    /// The agent speaking.
    pub agent: String,
    /// When (RFC 3339).
    pub timestamp: String,
    /// What was said or done.
    #[serde(flatten)]
    pub said: Said,
}

/// What one [`Line`] holds, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Said {
    /// A user message: the run's input, or (`dual_ai`) the other side's output.
    User {
        /// Its text.
        text: String,
        /// Whether it is the run's input.
        input: bool,
        /// Whether it is a silent message (the runtime's, e.g. a child's result queued for
        /// the model: [`crate::ledger::SILENT`]), not something a person said.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        silent: bool,
    },
    /// The model's text (and reasoning, when it gave any).
    Assistant {
        /// Its text.
        text: String,
        /// Its reasoning text.
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
    },
    /// A tool call, whole.
    ToolCall {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// Its arguments.
        arguments: Value,
    },
    /// A tool call's result, whole.
    ToolResult {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// The result.
        result: Value,
        /// Whether it reports an error.
        is_error: bool,
    },
    /// A handoff.
    Handoff {
        /// The agent that handed off.
        from: String,
        /// The agent that took over.
        to: String,
        /// The handoff's message.
        message: String,
    },
    /// A subagent's child thread, started by the call just before.
    Spawn {
        /// The child's thread.
        thread: String,
        /// The subagent.
        agent: String,
    },
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// What loading one side found: its messages and where each run's part begins.
struct SideMessages {
    messages: Vec<Message>,
    /// `(first message index, run)`, ascending.
    starts: Vec<(usize, String)>,
}

impl SideMessages {
    fn run_of(&self, index: usize) -> Option<&str> {
        self.starts
            .iter()
            .rev()
            .find(|(start, _)| *start <= index)
            .map(|(_, run)| run.as_str())
    }
}

/// Where each run's part of a side begins: the message count of the checkpoint before the
/// run's first one (a run's first checkpoint of side A ends with its input).
fn starts_of(summaries: &[CheckpointSummary]) -> Vec<(usize, String)> {
    let mut starts: Vec<(usize, String)> = Vec::new();
    for (i, summary) in summaries.iter().enumerate() {
        let Some(run) = &summary.run_id else { continue };
        if starts.iter().any(|(_, r)| r == run) {
            continue;
        }
        let start = if i == 0 {
            0
        } else {
            usize::try_from(summaries[i - 1].message_count).unwrap_or(usize::MAX)
        };
        starts.push((start, run.clone()));
    }
    starts
}

async fn side_messages(
    store: &Store,
    key: &str,
    end: impl Fn(&[CheckpointSummary]) -> Option<usize>,
) -> Result<Option<SideMessages>, RunError> {
    let summaries = store.list_checkpoints(key).await?;
    let Some(last) = end(&summaries) else {
        return Ok(None);
    };
    let Some(stored) = store.checkpoint_at(key, summaries[last].step).await? else {
        return Ok(None);
    };
    Ok(Some(SideMessages {
        messages: stored.checkpoint.state.messages_vec(),
        starts: starts_of(&summaries[..=last]),
    }))
}

/// A run's agent, its handoffs in log order, and the child threads its calls on this thread
/// started (call id → child thread, subagent).
struct RunInfo {
    agent: String,
    handoffs: Vec<(String, String)>,
    spawns: BTreeMap<String, (String, String)>,
}

/// The child runs the calls of `run` on `thread` started: call id → (child thread, agent).
/// A child's reference derives from the run and the call's position
/// ([`crate::child::child_reference`]), and its lineage node has that id.
async fn spawns_of(
    store: &Store,
    run: &str,
    thread: &str,
) -> Result<BTreeMap<String, (String, String)>, RunError> {
    use weft_store::{Lineage as _, ToolLedger as _};
    let lineage = store.lineage(run).await?;
    let children: BTreeMap<&str, &str> = lineage
        .iter()
        .filter(|n| n.parent_agent_id.is_some())
        .map(|n| (n.id.as_str(), n.role.as_str()))
        .collect();
    if children.is_empty() {
        return Ok(BTreeMap::new());
    }
    Ok(store
        .tool_calls(run)
        .await?
        .into_iter()
        .filter(|c| c.thread_id == thread)
        .filter_map(|c| {
            let reference = crate::child::child_reference(run, &c.position);
            let agent = (*children.get(reference.as_str())?).to_owned();
            Some((c.tool_call_id, (reference, agent)))
        })
        .collect())
}

impl Transcript {
    /// The conversation of `thread`, up to the last checkpoint of `run` when one is given
    /// (what the thread held when that run ended), else up to the thread's latest.
    ///
    /// # Errors
    /// [`RunError::UnknownThread`] when the thread has no checkpoint; storage failures.
    pub async fn load(
        store: &Store,
        thread: &str,
        run: Option<&RunRecord>,
    ) -> Result<Transcript, RunError> {
        let run_id = run.map(|r| r.run_id.clone());
        let mut side_a = side_messages(store, thread, |s| match &run_id {
            Some(id) => s
                .iter()
                .rposition(|c| c.run_id.as_deref() == Some(id))
                .or_else(|| s.len().checked_sub(1)),
            None => s.len().checked_sub(1),
        })
        .await?
        .ok_or_else(|| RunError::UnknownThread(format!("{thread} has no checkpoint")))?;
        let a_end = side_a.messages.last().map(Message::timestamp);
        let mut side_b = side_messages(store, &format!("{thread}.sideB"), |s| match &run_id {
            Some(id) => s
                .iter()
                .rposition(|c| c.run_id.as_deref() == Some(id))
                .or_else(|| {
                    // This run took no side-B step: side B as the earlier runs left it.
                    s.iter().rposition(|c| {
                        a_end.is_some_and(|end| {
                            DateTime::parse_from_rfc3339(&c.timestamp)
                                .is_ok_and(|t| t.with_timezone(&Utc) <= end)
                        })
                    })
                }),
            None => s.len().checked_sub(1),
        })
        .await?;
        // Checkpoints written before they named their run: all of it is the run's.
        if let Some(id) = &run_id {
            for side in std::iter::once(&mut side_a).chain(side_b.as_mut()) {
                if side.starts.is_empty() {
                    side.starts.push((0, id.clone()));
                }
            }
        }
        let mut runs: BTreeMap<String, RunInfo> = BTreeMap::new();
        for record in store.runs(None).await? {
            if record.thread_id != thread {
                continue;
            }
            let agent = RunSpec::from_stored(&record.spec)
                .map(|s| s.role().to_owned())
                .unwrap_or_else(|_| record.agent_id.clone());
            let handoffs = store
                .events(&EventQuery {
                    run_id: Some(record.run_id.clone()),
                    // `handoff` events (logs before schema 6 spelled them `agent.handoff`).
                    types: vec!["handoff".to_owned(), HANDOFF_EVENT.to_owned()],
                    ..EventQuery::default()
                })
                .await?
                .into_iter()
                .filter_map(|e| {
                    let to = e.payload["to"].as_str()?.to_owned();
                    Some((to, e.payload["message"].as_str().unwrap_or("").to_owned()))
                })
                .collect();
            let spawns = spawns_of(store, &record.run_id, thread).await?;
            runs.insert(
                record.run_id.clone(),
                RunInfo {
                    agent,
                    handoffs,
                    spawns,
                },
            );
        }
        let record = store.thread(thread).await?;
        // A child run's thread (`weft_runtime::child`) names its subagent.
        let subagent = record
            .as_ref()
            .and_then(|r| r.metadata.get(crate::child::SUBAGENT_KEY))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        let first_agent = side_a
            .starts
            .first()
            .and_then(|(_, r)| runs.get(r))
            .map(|i| i.agent.clone())
            .or_else(|| subagent.clone())
            .unwrap_or_else(|| "agent".to_owned());
        let entries_a = side_entries(Side::A, &side_a, &runs, &first_agent);
        let entries_b = side_b
            .as_ref()
            .map(|b| side_entries(Side::B, b, &runs, &first_agent))
            .unwrap_or_default();
        Ok(Transcript {
            thread_id: thread.to_owned(),
            forked_from: record.as_ref().and_then(|r| r.parent_thread_id.clone()),
            subagent,
            dual: side_b.is_some(),
            entries: merge(entries_a, entries_b),
            created_at: record.map_or_else(weft_store::now_string, |r| r.created_at),
        })
    }

    /// The lines of `run` (all lines when `None`), and how many entries come before the
    /// run's first (earlier runs of the thread).
    pub fn lines(&self, run: Option<&str>) -> (Vec<Line>, usize) {
        let mut lines = Vec::new();
        let mut earlier = 0;
        let mut names: BTreeMap<&str, &str> = BTreeMap::new();
        let mut seen = false;
        for entry in &self.entries {
            // Tool names by call id, for results.
            if let Item::Message(Message::Assistant(a)) = &entry.item {
                for call in &a.tool_calls {
                    names.insert(&call.tool_call_id, &call.tool_name);
                }
            }
            if let Some(run) = run
                && entry.run_id.as_deref() != Some(run)
            {
                if !seen {
                    earlier += 1;
                }
                continue;
            }
            seen = true;
            let line = |said: Said| Line {
                side: entry.side,
                agent: entry.agent.clone(),
                timestamp: time(entry.at()),
                said,
            };
            match &entry.item {
                Item::Handoff {
                    from, to, message, ..
                } => lines.push(line(Said::Handoff {
                    from: from.clone(),
                    to: to.clone(),
                    message: message.clone(),
                })),
                Item::Spawn { thread, agent, .. } => lines.push(line(Said::Spawn {
                    thread: thread.clone(),
                    agent: agent.clone(),
                })),
                Item::Message(Message::User(u)) => {
                    let message = Message::User(u.clone());
                    lines.push(line(Said::User {
                        text: message.text(),
                        input: entry.input,
                        silent: crate::ledger::is_silent(&message),
                    }));
                }
                Item::Message(Message::Assistant(a)) => {
                    let text = Message::Assistant(a.clone()).text();
                    let reasoning: Vec<&str> = a
                        .content
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Reasoning(r) => Some(r.text.as_str()),
                            _ => None,
                        })
                        .collect();
                    if !text.is_empty() || !reasoning.is_empty() {
                        lines.push(line(Said::Assistant {
                            text,
                            reasoning: (!reasoning.is_empty()).then(|| reasoning.join("\n\n")),
                        }));
                    }
                    for call in &a.tool_calls {
                        lines.push(line(Said::ToolCall {
                            id: call.tool_call_id.clone(),
                            name: call.tool_name.clone(),
                            arguments: call.arguments.clone(),
                        }));
                    }
                }
                Item::Message(Message::ToolResult(results)) => {
                    for r in &results.results {
                        lines.push(line(Said::ToolResult {
                            id: r.tool_call_id.clone(),
                            name: names
                                .get(r.tool_call_id.as_str())
                                .map_or_else(|| "?".to_owned(), |n| (*n).to_owned()),
                            result: r.result.clone(),
                            is_error: r.is_error,
                        }));
                    }
                }
            }
        }
        (lines, earlier)
    }

    /// The name an agent has in the thread: its own, with the side for a `dual_ai` session.
    fn agent_name(&self, agent: &str, side: Side) -> String {
        if self.dual {
            format!("{agent} ({})", side.key())
        } else {
            agent.to_owned()
        }
    }

    /// The agent's id in the thread: derived from the thread id and its name.
    fn agent_id(&self, name: &str) -> String {
        weft_thread::hash::content_uuid(format!("{}/{name}", self.thread_id).as_bytes())
    }

    /// The ThreadProtocol thread: the first input of each run is a user turn; each side
    /// turn (up to the next input, the other side's reply or a handoff) is an agent turn of
    /// its agent (`NAME (sideA)` / `NAME (sideB)` in a `dual_ai` session), a handoff an
    /// `agent.handoff` system message closing the turn of the agent that handed off. Agent
    /// ids are derived from the thread id and the agent's name, so the thread (and its hash)
    /// is the same however often it is exported.
    pub fn to_thread(&self) -> Thread {
        let mut agents: BTreeMap<String, AgentConfig> = BTreeMap::new();
        let mut turns: Vec<Turn> = Vec::new();
        // The agent turn being built: its agent's name and id, messages, and handoffs.
        let mut open: Option<(String, Side, Vec<Message>, Vec<SystemMessage>)> = None;
        let close = |open: &mut Option<(String, Side, Vec<Message>, Vec<SystemMessage>)>,
                     turns: &mut Vec<Turn>| {
            if let Some((id, _, messages, system)) = open.take() {
                let mut turn: AgentTurn =
                    weft_messages::agent_turn(&id, &messages, &[], None, None);
                for message in system {
                    turn.completed_at.clone_from(&message.timestamp);
                    turn.messages.push(TurnMessage::System(message));
                }
                if !turn.messages.is_empty() {
                    turns.push(Turn::Agent(turn));
                }
            }
        };
        let mut register = |name: String, at: DateTime<Utc>| {
            let id = self.agent_id(&name);
            agents.entry(id.clone()).or_insert_with(|| AgentConfig {
                agent_id: id.clone(),
                agent_name: name,
                model_name: None,
                provider_name: None,
                created_at: time(at),
                config_ref: None,
                extra: Default::default(),
            });
            id
        };
        for entry in &self.entries {
            let id = register(self.agent_name(&entry.agent, entry.side), entry.at());
            match &entry.item {
                Item::Message(Message::User(user)) if entry.input => {
                    close(&mut open, &mut turns);
                    turns.push(Turn::User(weft_messages::user_turn(user)));
                }
                Item::Message(message) => {
                    let new_turn = match &open {
                        None => true,
                        Some((open_id, side, _, system)) => {
                            *open_id != id
                                || *side != entry.side
                                || !system.is_empty()
                                || matches!(message, Message::User(_))
                        }
                    };
                    if new_turn {
                        close(&mut open, &mut turns);
                        open = Some((id, entry.side, Vec::new(), Vec::new()));
                    }
                    if let Some((_, _, messages, _)) = &mut open {
                        messages.push(message.clone());
                    }
                }
                Item::Handoff {
                    from,
                    to,
                    message,
                    at,
                } => {
                    let system = SystemMessage {
                        timestamp: time(*at),
                        event_type: HANDOFF_EVENT.to_owned(),
                        event_data: json!({"from": from, "to": to, "message": message}),
                        source_agent: Some(id.clone()),
                        target_agents: Some(vec![register(self.agent_name(to, entry.side), *at)]),
                        extra: Default::default(),
                    };
                    match &mut open {
                        Some((_, _, _, pending)) => pending.push(system),
                        None => {
                            open = Some((id, entry.side, Vec::new(), vec![system]));
                        }
                    }
                }
                Item::Spawn { thread, agent, at } => {
                    let system = SystemMessage {
                        timestamp: time(*at),
                        event_type: SPAWN_EVENT.to_owned(),
                        event_data: json!({"threadId": thread, "agent": agent}),
                        source_agent: Some(id.clone()),
                        target_agents: None,
                        extra: Default::default(),
                    };
                    match &mut open {
                        Some((_, _, _, pending)) => pending.push(system),
                        None => {
                            open = Some((id, entry.side, Vec::new(), vec![system]));
                        }
                    }
                }
            }
        }
        close(&mut open, &mut turns);
        let first = self
            .entries
            .first()
            .map_or_else(|| self.created_at.clone(), |e| time(e.at()));
        let last = turns
            .last()
            .map_or_else(|| first.clone(), |t| t.end().to_owned());
        Thread {
            version: weft_thread::types::PROTOCOL_VERSION.to_owned(),
            thread_id: self.thread_id.clone(),
            created_at: first,
            updated_at: last,
            title: None,
            metadata: None,
            agents,
            turns,
            relationships: self.forked_from.as_ref().map(|parent| ThreadRelationships {
                links: Some(vec![ThreadLink {
                    thread_id: parent.clone(),
                    // A subagent's thread was spawned from its parent's; a fork is forked.
                    relation: if self.subagent.is_some() {
                        "spawned_from"
                    } else {
                        "forked_from"
                    }
                    .to_owned(),
                    metadata: None,
                    extra: Default::default(),
                }]),
                extra: Default::default(),
            }),
            extra: Default::default(),
        }
    }
}

/// The entries of one side: each message with its run and agent, handoffs where the run's
/// log says control passed (after the handoff call's results).
fn side_entries(
    side: Side,
    found: &SideMessages,
    runs: &BTreeMap<String, RunInfo>,
    first_agent: &str,
) -> Vec<Entry> {
    let mut entries = Vec::with_capacity(found.messages.len());
    let mut current_run: Option<&str> = None;
    let mut agent = first_agent.to_owned();
    let mut handoffs: std::slice::Iter<'_, (String, String)> = [].iter();
    let mut spawns: Option<&BTreeMap<String, (String, String)>> = None;
    // A handoff call seen, waiting for its results: (to, message, when).
    let mut pending: Option<(String, String, DateTime<Utc>)> = None;
    for (index, message) in found.messages.iter().enumerate() {
        let run = found.run_of(index);
        if run != current_run {
            current_run = run;
            if let Some(info) = run.and_then(|r| runs.get(r)) {
                agent.clone_from(&info.agent);
                handoffs = info.handoffs.iter();
                spawns = Some(&info.spawns);
            }
        }
        let is_result = matches!(message, Message::ToolResult(_));
        if let Some((to, text, at)) = pending.take() {
            if is_result {
                pending = Some((to, text, message.timestamp()));
            } else {
                entries.push(Entry {
                    side,
                    agent: agent.clone(),
                    run_id: run.map(str::to_owned),
                    input: false,
                    item: Item::Handoff {
                        from: agent.clone(),
                        to: to.clone(),
                        message: text,
                        at,
                    },
                });
                agent = to;
            }
        }
        let starts_run = found.starts.iter().any(|(start, _)| *start == index);
        entries.push(Entry {
            side,
            agent: agent.clone(),
            run_id: run.map(str::to_owned),
            input: side == Side::A
                && (index == 0 || starts_run)
                && matches!(message, Message::User(_)),
            item: Item::Message(message.clone()),
        });
        // The child threads this message's results came from (a subagent's call).
        if let (Message::ToolResult(results), Some(spawns)) = (message, spawns) {
            for result in &results.results {
                if let Some((thread, child)) = spawns.get(&result.tool_call_id) {
                    entries.push(Entry {
                        side,
                        agent: agent.clone(),
                        run_id: run.map(str::to_owned),
                        input: false,
                        item: Item::Spawn {
                            thread: thread.clone(),
                            agent: child.clone(),
                            at: message.timestamp(),
                        },
                    });
                }
            }
        }
        if side == Side::A
            && let Message::Assistant(a) = message
            && let Some((to, _)) = handoffs.as_slice().first()
            && a.tool_calls.iter().any(|c| &c.tool_name == to)
            && let Some((to, text)) = handoffs.next()
        {
            pending = Some((to.clone(), text.clone(), message.timestamp()));
        }
    }
    if let Some((to, text, at)) = pending {
        entries.push(Entry {
            side,
            agent: agent.clone(),
            run_id: current_run.map(str::to_owned),
            input: false,
            item: Item::Handoff {
                from: agent,
                to,
                message: text,
                at,
            },
        });
    }
    entries
}

/// Both sides in time order (each side's own order kept; side A first on equal times).
fn merge(a: Vec<Entry>, b: Vec<Entry>) -> Vec<Entry> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let mut a = a.into_iter().peekable();
    let mut b = b.into_iter().peekable();
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.at() <= y.at(),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_a { a.next() } else { b.next() };
        out.extend(next);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn summary(run: Option<&str>, messages: u64) -> CheckpointSummary {
        CheckpointSummary {
            id: String::new(),
            thread_id: "t".into(),
            step: 0,
            kind: "step".into(),
            agent_step: 0,
            agent_id: String::new(),
            run_id: run.map(str::to_owned),
            timestamp: String::new(),
            message_count: messages,
            pending_tools: 0,
            completed_tools: 0,
            usage: weft_store::Usage::default(),
        }
    }

    #[test]
    fn a_runs_part_starts_after_the_checkpoint_before_its_first() {
        // A fork's copy (no run), then run r1 (input + 2), then r2 continuing (input + 1).
        let summaries = [
            summary(None, 2),
            summary(Some("r1"), 3),
            summary(Some("r1"), 5),
            summary(Some("r2"), 6),
            summary(Some("r2"), 7),
        ];
        assert_eq!(
            starts_of(&summaries),
            [(2, "r1".to_owned()), (5, "r2".to_owned())]
        );
        let side = SideMessages {
            messages: Vec::new(),
            starts: starts_of(&summaries),
        };
        assert_eq!(
            (side.run_of(1), side.run_of(2), side.run_of(6)),
            (None, Some("r1"), Some("r2"))
        );
    }

    #[test]
    fn a_handoff_closes_the_turn_of_the_agent_that_handed_off() {
        let input = Message::user("refund");
        let call = weft_provider::ToolCall::new("h", "billing", json!({"message": "refund"}));
        let asks = Message::Assistant(
            weft_provider::AssistantMessage::new(vec![], vec![call], Default::default()).unwrap(),
        );
        let result = Message::ToolResult(weft_provider::ToolResultMessage::new(vec![
            weft_provider::ToolResult {
                tool_call_id: "h".into(),
                result: json!("ok"),
                is_error: false,
            },
        ]));
        let side = SideMessages {
            messages: vec![
                input,
                asks,
                result,
                Message::Assistant(weft_provider::AssistantMessage::text("done")),
            ],
            starts: vec![(0, "r".to_owned())],
        };
        let runs = BTreeMap::from([(
            "r".to_owned(),
            RunInfo {
                agent: "triage".into(),
                handoffs: vec![("billing".into(), "refund".into())],
                spawns: BTreeMap::new(),
            },
        )]);
        let entries = side_entries(Side::A, &side, &runs, "triage");
        let agents: Vec<&str> = entries.iter().map(|e| e.agent.as_str()).collect();
        assert_eq!(agents, ["triage", "triage", "triage", "triage", "billing"]);
        assert!(matches!(entries[3].item, Item::Handoff { .. }));
        let transcript = Transcript {
            thread_id: "550e8400-e29b-41d4-a716-446655440000".into(),
            forked_from: None,
            subagent: None,
            dual: false,
            entries,
            created_at: weft_store::now_string(),
        };
        let thread = transcript.to_thread().to_value().unwrap();
        let report = weft_thread::validate(&thread);
        assert!(report.is_valid(), "{:?}", report.findings);
        assert_eq!(thread["turns"][1]["messages"][2]["message_type"], "system");
        assert_eq!(thread["turns"].as_array().unwrap().len(), 3);
    }
}
