//! A run's stream in the LangGraph SDK's parts: `metadata` first, then for each run event
//! the parts of the requested `stream_mode`s, each with `id:` = the event's `seq`, and `end`
//! last (see [`super::runs`] for the modes).

use std::collections::HashMap;

use axum::http::{HeaderValue, header};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use weft_runtime::event::{EventKind, RunEvent, Side};
use weft_store::DecisionStatus;

use super::latest_values;
use super::model::{self, Interrupt};
use super::runs::{content_location, wait_started};
use crate::error::ApiError;
use crate::sse::{self, Next};
use crate::state::AppState;

/// Events queued for one stream before its producer waits for the client.
const QUEUE: usize = 64;

/// The stream modes a request asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Modes {
    values: bool,
    updates: bool,
    messages: bool,
    tuples: bool,
}

impl Modes {
    pub(super) fn default_for_runs() -> Self {
        Modes {
            values: true,
            ..Modes::default()
        }
    }

    pub(super) fn default_for_join() -> Self {
        Modes {
            values: true,
            updates: true,
            tuples: true,
            messages: false,
        }
    }

    pub(super) fn parse(value: Option<&Value>, default: Self) -> Result<Self, ApiError> {
        let list: Vec<&Value> = match value {
            None | Some(Value::Null) => return Ok(default),
            Some(Value::Array(list)) => list.iter().collect(),
            Some(one) => vec![one],
        };
        let mut modes = Modes::default();
        for mode in list {
            match mode.as_str() {
                Some("values") => modes.values = true,
                Some("updates") => modes.updates = true,
                Some("messages") => modes.messages = true,
                Some("messages-tuple") => modes.tuples = true,
                // Accepted and not produced: Weft has no counterpart (its own run events
                // are at /api/runs/{run}/events).
                Some(
                    "events" | "debug" | "custom" | "tasks" | "checkpoints" | "tools" | "lifecycle",
                ) => {}
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "unknown stream_mode {mode}: use values, updates, messages or messages-tuple"
                    )));
                }
            }
        }
        Ok(modes)
    }
}

/// Turns run events into the parts of the requested stream modes.
struct Encoder {
    modes: Modes,
    thread: String,
    run_id: String,
    /// The step's message so far: id, text, tool calls, tool messages.
    id: String,
    text: String,
    calls: Vec<Value>,
    tools: Vec<Value>,
    /// Whether `messages/complete` went out for the step's AI message.
    completed: bool,
    /// Tool names by call id.
    names: HashMap<String, String>,
}

impl Encoder {
    fn new(modes: Modes, thread: &str, run_id: &str) -> Self {
        Encoder {
            modes,
            thread: thread.to_owned(),
            run_id: run_id.to_owned(),
            id: String::new(),
            text: String::new(),
            calls: Vec::new(),
            tools: Vec::new(),
            completed: false,
            names: HashMap::new(),
        }
    }

    fn meta(&self, event: &RunEvent) -> Value {
        json!({
            "run_id": self.run_id,
            "thread_id": self.thread,
            "langgraph_node": event.agent.agent_id(),
            "langgraph_step": event.turn,
            "weft_seq": event.seq,
        })
    }

    fn ai(&self) -> Value {
        model::ai_message(&self.id, &self.text, self.calls.clone())
    }

    fn part(seq: u64, name: &str, data: &Value) -> Event {
        Event::default()
            .id(seq.to_string())
            .event(name)
            .data(data.to_string())
    }

    fn complete_ai(&mut self, seq: u64, out: &mut Vec<Event>) {
        if self.modes.messages
            && !self.completed
            && (!self.text.is_empty() || !self.calls.is_empty())
        {
            out.push(Self::part(seq, "messages/complete", &json!([self.ai()])));
        }
        self.completed = true;
    }

    async fn push(&mut self, state: &AppState, event: &RunEvent) -> Vec<Event> {
        let mut out = Vec::new();
        let seq = event.seq;
        let root = event.agent.depth() == 0;
        let side_a = |side: &Option<Side>| side.is_none_or(|s| s == Side::A);
        match &event.kind {
            EventKind::RunStart { .. } if self.modes.values => {
                if let Ok(values) = latest_values(state, &self.thread).await {
                    out.push(Self::part(seq, "values", &values));
                }
            }
            EventKind::TurnStart { side, .. } if root && side_a(side) => {
                self.id = format!("{}:{}", self.run_id, seq);
                self.text.clear();
                self.calls.clear();
                self.tools.clear();
                self.completed = false;
            }
            EventKind::TextDelta { text, side } if root && side_a(side) => {
                let first = self.text.is_empty() && self.calls.is_empty();
                self.text.push_str(text);
                if self.modes.tuples {
                    let chunk = json!({
                        "type": "AIMessageChunk",
                        "content": text,
                        "id": self.id,
                        "tool_calls": [],
                        "tool_call_chunks": [],
                        "additional_kwargs": {},
                        "response_metadata": {},
                    });
                    out.push(Self::part(
                        seq,
                        "messages",
                        &json!([chunk, self.meta(event)]),
                    ));
                }
                if self.modes.messages {
                    if first {
                        out.push(Self::part(
                            seq,
                            "messages/metadata",
                            &json!({ self.id.clone(): {"metadata": self.meta(event)} }),
                        ));
                    }
                    out.push(Self::part(seq, "messages/partial", &json!([self.ai()])));
                }
            }
            EventKind::ToolCallStart {
                tool,
                arguments,
                side,
            } if root && side_a(side) => {
                let id = event.tool_call_id.clone().unwrap_or_default();
                self.names.insert(id.clone(), tool.clone());
                let call = model::tool_call(&id, tool, arguments);
                self.calls.push(call.clone());
                if self.modes.tuples {
                    let chunk = json!({
                        "type": "AIMessageChunk",
                        "content": "",
                        "id": self.id,
                        "tool_calls": [call],
                        "tool_call_chunks": [],
                        "additional_kwargs": {},
                        "response_metadata": {},
                    });
                    out.push(Self::part(
                        seq,
                        "messages",
                        &json!([chunk, self.meta(event)]),
                    ));
                }
                if self.modes.messages {
                    out.push(Self::part(seq, "messages/partial", &json!([self.ai()])));
                }
            }
            EventKind::ToolCallEnd {
                tool,
                is_error,
                result,
                side,
                ..
            } if root && side_a(side) => {
                self.complete_ai(seq, &mut out);
                let call = event.tool_call_id.clone().unwrap_or_default();
                let message = model::tool_message(
                    &format!("{}:{seq}", self.run_id),
                    &call,
                    tool,
                    result.as_ref().unwrap_or(&Value::Null),
                    *is_error,
                );
                self.tools.push(message.clone());
                if self.modes.tuples {
                    out.push(Self::part(
                        seq,
                        "messages",
                        &json!([message, self.meta(event)]),
                    ));
                }
                if self.modes.messages {
                    out.push(Self::part(seq, "messages/complete", &json!([message])));
                }
            }
            EventKind::TurnEnd { side, .. } if root && side_a(side) => {
                self.complete_ai(seq, &mut out);
                if self.modes.updates {
                    let mut messages = Vec::new();
                    if !self.text.is_empty() || !self.calls.is_empty() {
                        messages.push(self.ai());
                    }
                    messages.extend(self.tools.iter().cloned());
                    let node = event.agent.agent_id().to_owned();
                    out.push(Self::part(
                        seq,
                        "updates",
                        &json!({ node: {"messages": messages} }),
                    ));
                }
            }
            EventKind::Checkpoint { side, .. } if self.modes.values && root && side_a(side) => {
                if let Ok(values) = latest_values(state, &self.thread).await {
                    out.push(Self::part(seq, "values", &values));
                }
            }
            EventKind::RunEnd {
                status,
                error,
                decisions,
                ..
            } => {
                if status == "suspended" {
                    let pending: Vec<Interrupt> = decisions
                        .iter()
                        .filter(|d| d.status == DecisionStatus::Pending)
                        .map(Interrupt::of)
                        .collect();
                    let pending = serde_json::to_value(pending).unwrap_or_default();
                    if self.modes.updates {
                        out.push(Self::part(
                            seq,
                            "updates",
                            &json!({"__interrupt__": pending.clone()}),
                        ));
                    }
                    if self.modes.values
                        && let Ok(mut values) = latest_values(state, &self.thread).await
                    {
                        values["__interrupt__"] = pending;
                        out.push(Self::part(seq, "values", &values));
                    }
                } else if status == "failed" {
                    out.push(Self::part(
                        seq,
                        "error",
                        &json!({
                            "error": "RunError",
                            "message": error.clone().unwrap_or_else(|| "the run failed".to_owned()),
                        }),
                    ));
                }
            }
            _ => {}
        }
        out
    }
}

/// A run's stream: `metadata`, the parts of `modes` for its events after `after_seq`, `end`.
pub(super) fn stream_response(
    state: &AppState,
    thread: &str,
    run_id: &str,
    after_seq: u64,
    modes: Modes,
) -> Response {
    let (tx, rx) = mpsc::channel(QUEUE);
    let producer = state.clone();
    let (thread_id, run) = (thread.to_owned(), run_id.to_owned());
    tokio::spawn(async move {
        let metadata = json!({"run_id": run, "thread_id": thread_id, "attempt": 1});
        if tx
            .send(
                Event::default()
                    .event("metadata")
                    .data(metadata.to_string()),
            )
            .await
            .is_err()
        {
            return;
        }
        let error = |message: String| {
            Event::default()
                .event("error")
                .data(json!({"error": "RunError", "message": message}).to_string())
        };
        if !wait_started(&producer, &thread_id, &run).await {
            let _ = tx
                .send(error(format!("run {run} was cancelled or could not start")))
                .await;
            let _ = tx.send(Event::default().event("end")).await;
            return;
        }
        let mut events = match producer.runtime().follow(&run, after_seq).await {
            Ok(events) => sse::Followed::new(events),
            Err(e) => {
                let _ = tx.send(error(e.to_string())).await;
                let _ = tx.send(Event::default().event("end")).await;
                return;
            }
        };
        let mut encoder = Encoder::new(modes, &thread_id, &run);
        let mut first = true;
        loop {
            match sse::next(&producer, &mut events, &run, first).await {
                Next::Event(event) => {
                    first = false;
                    for part in encoder.push(&producer, &event).await {
                        if tx.send(part).await.is_err() {
                            // The client went away; the run goes on.
                            return;
                        }
                    }
                }
                Next::End => break,
                Next::Abandoned => {
                    let message =
                        format!("run {run} is not being driven any more (its process stopped)");
                    if tx.send(error(message)).await.is_err() {
                        return;
                    }
                    break;
                }
            }
        }
        let _ = tx.send(Event::default().event("end")).await;
    });
    let mut response = sse::respond(rx, state.config().stream, sse::Ping::Comment).into_response();
    sse::no_buffering(&mut response);
    if let Ok(value) = HeaderValue::from_str(&format!("/threads/{thread}/runs/{run_id}/stream")) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    content_location(&mut response, thread, run_id);
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn modes_are_one_or_a_list_of_known_names() {
        let modes = Modes::parse(Some(&json!(["updates", "messages"])), Modes::default()).unwrap();
        assert!(modes.updates && modes.messages && !modes.values && !modes.tuples);
        assert!(Modes::parse(Some(&json!("nope")), Modes::default()).is_err());
    }
}
