//! The run API's shapes — as the LangGraph SDK clients send and parse them — and how Weft's
//! records map onto them. Every type here is in the OpenAPI document.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use weft_provider::{ContentBlock, Message};
use weft_store::{DecisionRecord, DecisionStatus, RunRecord, RunStatus as WeftStatus};

use crate::config::Busy;

/// An assistant: one of the project's agents (`assistant_id` = `graph_id` = its name).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Assistant {
    /// The agent's name.
    pub assistant_id: String,
    /// The agent's name.
    pub graph_id: String,
    /// The agent's title, else its name.
    pub name: String,
    /// The agent's description.
    pub description: Option<String>,
    /// Always `{}` (an agent is configured in the project's files).
    #[schema(value_type = Object)]
    pub config: Value,
    /// Always `{}`.
    #[schema(value_type = Object)]
    pub context: Value,
    /// `{"kind": "ai_human" | "dual_ai"}`.
    #[schema(value_type = Object)]
    pub metadata: Value,
    /// Always 1.
    pub version: u32,
    /// When the server started.
    pub created_at: String,
    /// When the server started.
    pub updated_at: String,
}

/// What a thread is doing, from its newest run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ThreadStatus {
    /// Nothing runs and nothing waits.
    Idle,
    /// A run is in progress (or queued).
    Busy,
    /// A run waits for decisions (its `interrupts`).
    Interrupted,
    /// The newest run failed.
    Error,
}

/// A run's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Queued behind the thread's run in progress (`multitask_strategy: enqueue`).
    Pending,
    /// Being driven.
    Running,
    /// Failed.
    Error,
    /// Finished.
    Success,
    /// Not used by Weft (a budget ends a run `success` or `error`).
    Timeout,
    /// Stopped (cancelled, or its process stopped: resumable) or waiting for decisions.
    Interrupted,
}

impl RunStatus {
    /// The status of a stored run; `running` is whether a process drives it now.
    pub fn of(status: WeftStatus, running: bool) -> Self {
        if running {
            return RunStatus::Running;
        }
        match status {
            WeftStatus::Running => RunStatus::Running,
            WeftStatus::Completed => RunStatus::Success,
            WeftStatus::Failed => RunStatus::Error,
            WeftStatus::Interrupted | WeftStatus::Suspended => RunStatus::Interrupted,
        }
    }
}

impl RunStatus {
    /// Its word.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Error => "error",
            RunStatus::Success => "success",
            RunStatus::Timeout => "timeout",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

/// A call waiting for a person's decision, as the thread's `interrupts` show it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Interrupt {
    /// The decision's id: the key of `command.resume`.
    pub id: String,
    /// The call.
    pub value: InterruptValue,
}

/// What a pending decision is about.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InterruptValue {
    /// The tool.
    pub tool: String,
    /// Its arguments.
    #[schema(value_type = Object)]
    pub arguments: Value,
    /// The call's id.
    pub tool_call_id: String,
    /// `approval` (the tool requires approval) or `uncertain` (a call lost mid-flight).
    pub kind: String,
    /// Why it waits.
    pub reason: Option<String>,
}

impl Interrupt {
    /// The interrupt of a decision.
    pub fn of(d: &DecisionRecord) -> Self {
        Interrupt {
            id: d.id.clone(),
            value: InterruptValue {
                tool: d.tool_name.clone(),
                arguments: d.arguments.clone(),
                tool_call_id: d.tool_call_id.clone(),
                kind: d.kind.as_str().to_owned(),
                reason: d.reason.clone(),
            },
        }
    }

    /// The pending ones of `decisions`.
    pub fn pending(decisions: &[DecisionRecord]) -> Vec<Self> {
        decisions
            .iter()
            .filter(|d| d.status == DecisionStatus::Pending)
            .map(Interrupt::of)
            .collect()
    }
}

/// A thread.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Thread {
    /// Its id (a Weft thread id).
    pub thread_id: String,
    /// When it was created.
    pub created_at: String,
    /// Its last update.
    pub updated_at: String,
    /// Its metadata (Weft keeps `forkedFrom`, `importedFrom` and `weftQueue` here too).
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// What it is doing.
    pub status: ThreadStatus,
    /// Its state: `{"messages": [...]}` (LangChain message dicts).
    #[schema(value_type = Object)]
    pub values: Value,
    /// Pending decisions by the run waiting for them.
    pub interrupts: BTreeMap<String, Vec<Interrupt>>,
}

/// A checkpoint's address.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Checkpoint {
    /// The thread.
    pub thread_id: String,
    /// Always `""`.
    #[serde(default)]
    pub checkpoint_ns: String,
    /// The Weft checkpoint id.
    pub checkpoint_id: Option<String>,
    /// Always null.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub checkpoint_map: Option<Value>,
}

impl Checkpoint {
    /// The address of checkpoint `id` of `thread`.
    pub fn new(thread: &str, id: &str) -> Self {
        Checkpoint {
            thread_id: thread.to_owned(),
            checkpoint_ns: String::new(),
            checkpoint_id: Some(id.to_owned()),
            checkpoint_map: None,
        }
    }
}

/// A run waiting for decisions, as a thread state's task.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ThreadTask {
    /// The run.
    pub id: String,
    /// Its agent.
    pub name: String,
    /// Always null.
    pub error: Option<String>,
    /// Its pending decisions.
    pub interrupts: Vec<Interrupt>,
    /// Always null.
    pub checkpoint: Option<Checkpoint>,
    /// Always null.
    #[schema(value_type = Option<Object>)]
    pub state: Option<Value>,
    /// Always null.
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
}

/// A thread's state at one checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ThreadState {
    /// `{"messages": [...]}`.
    #[schema(value_type = Object)]
    pub values: Value,
    /// The agent that goes on when the thread waits for decisions, else empty.
    pub next: Vec<String>,
    /// This checkpoint.
    pub checkpoint: Checkpoint,
    /// `{"step", "run_id", "source", "kind", "agent_step"}`.
    #[schema(value_type = Object)]
    pub metadata: Value,
    /// When it was taken.
    pub created_at: Option<String>,
    /// The checkpoint before it.
    pub parent_checkpoint: Option<Checkpoint>,
    /// The run waiting for decisions, if any (latest state only).
    pub tasks: Vec<ThreadTask>,
    /// Its pending decisions (latest state only).
    pub interrupts: Vec<Interrupt>,
}

/// A run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Run {
    /// Its id (a Weft run id).
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// Its agent.
    pub assistant_id: String,
    /// When it was created.
    pub created_at: String,
    /// Its last update.
    pub updated_at: String,
    /// Its status.
    pub status: RunStatus,
    /// `{"steps", "usage", "error", "output"}` (Weft's record).
    #[schema(value_type = Object)]
    pub metadata: Value,
    /// What a new run does when this thread is busy (as requested; `enqueue` for runs read
    /// back from the store).
    pub multitask_strategy: Busy,
}

impl Run {
    /// The API's view of a stored run.
    pub fn of(record: &RunRecord, running: bool, strategy: Busy) -> Self {
        let usage = &record.usage;
        Run {
            run_id: record.run_id.clone(),
            thread_id: record.thread_id.clone(),
            assistant_id: agent_of(record),
            created_at: record.started_at.clone(),
            updated_at: record.updated_at.clone(),
            status: RunStatus::of(record.status, running),
            metadata: json!({
                "steps": record.steps,
                "usage": {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "cost": usage.cost,
                },
                "error": record.error,
                "output": record.output,
                "weft_status": record.status.as_str(),
            }),
            multitask_strategy: strategy,
        }
    }
}

/// The agent a stored run runs.
pub fn agent_of(record: &RunRecord) -> String {
    record
        .spec
        .pointer("/program/agent")
        .and_then(Value::as_str)
        .map_or_else(|| record.agent_id.clone(), str::to_owned)
}

/// The body of `POST /threads`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct ThreadCreate {
    /// The id to give it (letters, digits, `-`, `_`, `.`, `:`); a new UUID when absent.
    pub thread_id: Option<String>,
    /// Its metadata.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
    /// `raise` (default: 409 when it exists) or `do_nothing` (answer the existing one).
    pub if_exists: Option<String>,
}

/// The body of `PATCH /threads/{thread_id}`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct ThreadPatch {
    /// Keys to set (merged into the thread's metadata).
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
}

/// The body of `POST /threads/search` and `POST /threads/count`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct ThreadSearch {
    /// Threads whose metadata holds these keys with these values.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
    /// Only these threads.
    pub ids: Option<Vec<String>>,
    /// Only threads with this status.
    pub status: Option<ThreadStatus>,
    /// At most this many (default 10).
    pub limit: Option<usize>,
    /// Skip this many.
    pub offset: Option<usize>,
    /// `created_at` or `updated_at` (default).
    pub sort_by: Option<String>,
    /// `asc` or `desc` (default).
    pub sort_order: Option<String>,
}

/// A checkpoint named in a request: `{"checkpoint_id": …}` (other keys are ignored).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct CheckpointRef {
    /// The Weft checkpoint id.
    pub checkpoint_id: Option<String>,
}

/// The body of `POST /threads/{thread_id}/history`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct HistoryRequest {
    /// At most this many states, newest first (default 10).
    pub limit: Option<usize>,
    /// Only states older than this checkpoint: a checkpoint id, or `{"checkpoint_id"}`.
    #[schema(value_type = Option<Object>)]
    pub before: Option<Value>,
}

/// The body of `POST /threads/{thread_id}/state/checkpoint`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct StateRequest {
    /// The checkpoint.
    pub checkpoint: Option<CheckpointRef>,
}

/// The body of `POST /threads/{thread_id}/copy` (Weft extension: fork from a checkpoint).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct CopyRequest {
    /// Fork from this checkpoint (default: the latest).
    pub checkpoint_id: Option<String>,
}

/// `command` of a run request.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct Command {
    /// Decisions on the thread's pending calls, keyed by interrupt (decision) id:
    /// `{"approve": bool, "reason"?}`, `true`/`false`, `"approve"`/`"deny"`, or
    /// `{"type": "approve"|"reject", "message"?}`. A single value (not keyed) answers the
    /// only pending call.
    #[schema(value_type = Option<Object>)]
    pub resume: Option<Value>,
    /// Not supported (422).
    #[schema(value_type = Option<Object>)]
    pub update: Option<Value>,
    /// Not supported (422).
    #[schema(value_type = Option<Object>)]
    pub goto: Option<Value>,
}

/// The body of a run request (`POST /threads/{thread_id}/runs`, `…/runs/stream`,
/// `…/runs/wait`).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct RunCreate {
    /// The agent (default: the project's default agent).
    pub assistant_id: Option<String>,
    /// `{"messages": [{"role": "user", "content": "…"}]}`: the last user (`human`)
    /// message is the run's input.
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    /// Resuming a run waiting for decisions.
    pub command: Option<Command>,
    /// `values`, `updates`, `messages`, `messages-tuple` (one or a list; default `values`).
    #[schema(value_type = Option<Object>)]
    pub stream_mode: Option<Value>,
    /// What to do when a run is in progress on the thread (default `enqueue`; `rollback` is
    /// not supported).
    pub multitask_strategy: Option<String>,
    /// `reject` (default: 404 for an unknown thread) or `create`.
    pub if_not_exists: Option<String>,
    /// Accepted; Weft's run records are the run's metadata.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// Only the thread's latest checkpoint (or none): a Weft thread is linear; branch from an
    /// earlier checkpoint with `POST /threads/{thread_id}/copy` (422 otherwise).
    pub checkpoint_id: Option<String>,
    /// As `checkpoint_id`: `{"checkpoint_id"}`.
    pub checkpoint: Option<CheckpointRef>,
    /// Not supported (422 when not empty): Weft has no graph nodes to stop at.
    #[schema(value_type = Option<Object>)]
    pub interrupt_before: Option<Value>,
    /// Not supported (422 when not empty).
    #[schema(value_type = Option<Object>)]
    pub interrupt_after: Option<Value>,
    /// Not supported (422).
    pub webhook: Option<String>,
    /// Not supported (422 when above 0).
    pub after_seconds: Option<f64>,
}

impl RunCreate {
    /// What the request asks that Weft does not do, as a sentence.
    pub fn unsupported(&self) -> Option<&'static str> {
        let set = |v: &Option<Value>| {
            v.as_ref().is_some_and(|v| match v {
                Value::Null => false,
                Value::Array(a) => !a.is_empty(),
                Value::String(s) => !s.is_empty(),
                _ => true,
            })
        };
        if set(&self.interrupt_before) || set(&self.interrupt_after) {
            Some(
                "interrupt_before and interrupt_after are not supported: Weft interrupts a run where a call needs approval (requiresApproval)",
            )
        } else if self.webhook.as_deref().is_some_and(|w| !w.is_empty()) {
            Some("webhook is not supported: stream the run, wait for it, or join it")
        } else if self.after_seconds.is_some_and(|s| s > 0.0) {
            Some("after_seconds is not supported: start the run when it is due")
        } else {
            None
        }
    }

    /// The checkpoint the request names, if any.
    pub fn checkpoint(&self) -> Option<&str> {
        self.checkpoint_id.as_deref().or_else(|| {
            self.checkpoint
                .as_ref()
                .and_then(|c| c.checkpoint_id.as_deref())
        })
    }
}

/// The conversation of a state as LangChain message dicts.
/// Takes borrowed messages or a state's `AgentState::messages()` (`Cow`s).
pub fn lc_messages<M: std::borrow::Borrow<Message>>(
    messages: impl Iterator<Item = M>,
) -> Vec<Value> {
    let mut out = Vec::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for message in messages {
        match message.borrow() {
            Message::User(user) => out.push(json!({
                "type": "human",
                "content": Message::User(user.clone()).text(),
                "id": user.id,
                "additional_kwargs": {},
                "response_metadata": {},
            })),
            Message::Assistant(a) => {
                let text: String = a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                let calls: Vec<Value> = a
                    .tool_calls
                    .iter()
                    .map(|c| {
                        names.insert(c.tool_call_id.clone(), c.tool_name.clone());
                        tool_call(&c.tool_call_id, &c.tool_name, &c.arguments)
                    })
                    .collect();
                out.push(ai_message(&a.id, &text, calls));
            }
            Message::ToolResult(results) => {
                for (i, r) in results.results.iter().enumerate() {
                    let name = names.get(&r.tool_call_id).cloned().unwrap_or_default();
                    out.push(tool_message(
                        &format!("{}-{i}", results.id),
                        &r.tool_call_id,
                        &name,
                        &r.result,
                        r.is_error,
                    ));
                }
            }
        }
    }
    out
}

/// A tool call of an AI message dict.
pub fn tool_call(id: &str, name: &str, args: &Value) -> Value {
    json!({"name": name, "args": args, "id": id, "type": "tool_call"})
}

/// An AI message dict.
pub fn ai_message(id: &str, text: &str, tool_calls: Vec<Value>) -> Value {
    json!({
        "type": "ai",
        "content": text,
        "id": id,
        "tool_calls": tool_calls,
        "invalid_tool_calls": [],
        "additional_kwargs": {},
        "response_metadata": {},
    })
}

/// A tool message dict.
pub fn tool_message(id: &str, call: &str, name: &str, result: &Value, is_error: bool) -> Value {
    let content = match result {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    json!({
        "type": "tool",
        "content": content,
        "id": id,
        "tool_call_id": call,
        "name": name,
        "status": if is_error { "error" } else { "success" },
        "additional_kwargs": {},
        "response_metadata": {},
    })
}

/// The text of the last user message of a run's `input`.
///
/// # Errors
/// A sentence saying what is missing.
pub fn input_text(input: &Value) -> Result<String, String> {
    let messages = match input {
        Value::Object(o) => o.get("messages").cloned().unwrap_or(Value::Null),
        Value::String(s) => return Ok(s.clone()),
        _ => Value::Null,
    };
    let list = match messages {
        Value::Array(list) => list,
        Value::Object(one) => vec![Value::Object(one)],
        Value::String(s) => return Ok(s),
        _ => {
            return Err(
                "input has no messages: send {\"messages\": [{\"role\": \"user\", \"content\": \"…\"}]}"
                    .into(),
            );
        }
    };
    let last = list
        .iter()
        .rev()
        .find(|m| {
            let role = m
                .get("role")
                .or_else(|| m.get("type"))
                .and_then(Value::as_str);
            matches!(role, Some("user" | "human"))
        })
        .ok_or("input.messages has no user message")?;
    match last.get("content") {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => Ok(parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("text") => {
                    o.get("text").and_then(Value::as_str)
                }
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")),
        _ => Err("the user message has no content".into()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_input_is_the_last_user_message() {
        let input = json!({"messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "x"},
            {"type": "human", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
        ]});
        assert_eq!(input_text(&input).unwrap(), "ab");
        assert_eq!(
            input_text(&json!({"messages": [{"role": "user", "content": "hi"}]})).unwrap(),
            "hi"
        );
        assert!(input_text(&json!({"foo": 1})).is_err());
        assert!(input_text(&json!({"messages": [{"role": "assistant", "content": "x"}]})).is_err());
    }

    #[test]
    fn messages_become_langchain_dicts() {
        let call = weft_provider::ToolCall::new("c1", "add", json!({"a": 1}));
        let asks = Message::Assistant(
            weft_provider::AssistantMessage::new(
                vec![ContentBlock::text("adding")],
                vec![call],
                Default::default(),
            )
            .unwrap(),
        );
        let result = Message::ToolResult(weft_provider::ToolResultMessage::new(vec![
            weft_provider::ToolResult {
                tool_call_id: "c1".into(),
                result: json!(2),
                is_error: false,
            },
        ]));
        let user = Message::user("add");
        let dicts = lc_messages([user, asks, result].iter());
        assert_eq!(dicts[0]["type"], "human");
        assert_eq!(dicts[0]["content"], "add");
        assert_eq!(dicts[1]["type"], "ai");
        assert_eq!(dicts[1]["tool_calls"][0]["name"], "add");
        assert_eq!(dicts[1]["tool_calls"][0]["args"]["a"], 1);
        assert_eq!(dicts[2]["type"], "tool");
        assert_eq!(dicts[2]["name"], "add");
        assert_eq!(dicts[2]["content"], "2");
        assert_eq!(dicts[2]["status"], "success");
    }
}
