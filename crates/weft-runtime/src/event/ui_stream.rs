//! [`UiStreamEncoder`]: a run's events as the Vercel AI SDK's UI message stream, chunk by
//! chunk as they come (the assistant message a `useChat` client renders).

use serde_json::Value;
use weft_thread::ui_stream::UiChunk;

use super::{EventKind, RunEvent};

/// Turns the events of one run into UI message stream chunks, incrementally: `start` at the
/// first event, a step (`start-step` … `finish-step`) per turn, text and reasoning parts
/// opened and closed around their deltas, a tool call's input when it starts and its output
/// (or error) when it ends, `finish` (or `error` and `finish`) at `run_end`. Events of
/// sub-agents (`agentPath` deeper than the root) are not part of the root's message.
///
/// # Examples
///
/// ```
/// use weft_runtime::event::{AgentPath, EventKind, RunEvent, UiStreamEncoder};
/// let event = |seq, kind| RunEvent {
///     seq, timestamp: "2026-11-24T10:00:00.000Z".into(), run_id: "R".into(),
///     agent: AgentPath::root("main"), turn: 1, tool_call_id: None, kind,
/// };
/// let mut encoder = UiStreamEncoder::new("msg-1");
/// let mut chunks = encoder.push(&event(1, EventKind::TurnStart { messages: 1, side: None }));
/// chunks.extend(encoder.push(&event(2, EventKind::TextDelta { text: "Hi".into(), side: None })));
/// chunks.extend(encoder.finish());
/// let types: Vec<String> = chunks.iter().map(|c| c.to_value()["type"].as_str().unwrap_or_default().to_owned()).collect();
/// assert_eq!(types, ["start", "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"]);
/// ```
#[derive(Debug)]
pub struct UiStreamEncoder {
    message_id: String,
    approvals: ApprovalChunks,
    /// Calls a person denied: their error result is the `tool-output-denied` already sent.
    denied: Vec<String>,
    /// Calls the client's message already shows (a continued message): their input is not
    /// sent again, only what happens to them.
    known: Vec<String>,
    /// The client's message ends inside a step (a continued message): the first turn's
    /// `start-step` is that step's, already sent.
    continued: bool,
    started: bool,
    in_step: bool,
    /// The open text or reasoning part: its id and whether it is reasoning.
    open: Option<(String, bool)>,
    parts: u32,
    finished: bool,
}

/// How the stream tells a client of a call that waits for a person's decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ApprovalChunks {
    /// The AI SDK v6 way: `tool-approval-request` (`approvalId`, `toolCallId`), and
    /// `tool-output-denied` for a call a person denied.
    #[default]
    ToolApprovalRequest,
    /// A `data-approval` part (`approvalId`, `toolCallId`, `tool`, `arguments`, `kind`,
    /// `reason`), which AI SDK v5 clients accept (they know no approval chunk).
    DataPart,
}

impl UiStreamEncoder {
    /// An encoder of the assistant message `message_id`.
    pub fn new(message_id: &str) -> Self {
        UiStreamEncoder {
            message_id: message_id.to_owned(),
            approvals: ApprovalChunks::default(),
            denied: Vec::new(),
            known: Vec::new(),
            continued: false,
            started: false,
            in_step: false,
            open: None,
            parts: 0,
            finished: false,
        }
    }

    /// This encoder, telling of calls that wait for a person's decision with `approvals`.
    #[must_use]
    pub fn with_approvals(mut self, approvals: ApprovalChunks) -> Self {
        self.approvals = approvals;
        self
    }

    /// This encoder, continuing a message the client holds up to a step in progress whose
    /// calls `known` it shows (the run resumed after the client answered approvals): that
    /// step is not started again and those calls' inputs are not sent again, so the client
    /// updates its parts instead of adding copies.
    #[must_use]
    pub fn continuing(mut self, known: Vec<String>) -> Self {
        self.known = known;
        self.continued = true;
        self.in_step = true;
        self
    }

    /// The chunks `event` adds to the message.
    pub fn push(&mut self, event: &RunEvent) -> Vec<UiChunk> {
        let mut chunks = Vec::new();
        if self.finished || event.agent.depth() > 0 {
            return chunks;
        }
        if !self.started {
            self.started = true;
            chunks.push(UiChunk::Start {
                message_id: Some(self.message_id.clone()),
                message_metadata: None,
            });
        }
        let call_id = || event.tool_call_id.clone().unwrap_or_default();
        match &event.kind {
            EventKind::TurnStart { .. } if self.continued => self.continued = false,
            EventKind::TurnStart { .. } => {
                self.end_step(&mut chunks);
                self.in_step = true;
                chunks.push(UiChunk::StartStep);
            }
            EventKind::TextDelta { text, .. } => self.delta(text, false, &mut chunks),
            EventKind::ReasoningDelta { text, .. } => self.delta(text, true, &mut chunks),
            EventKind::ToolCallStart { .. } if self.known.contains(&call_id()) => {}
            EventKind::ToolCallStart {
                tool, arguments, ..
            } => {
                self.step(&mut chunks);
                self.close(&mut chunks);
                chunks.push(UiChunk::ToolInputAvailable {
                    tool_call_id: call_id(),
                    tool_name: tool.clone(),
                    input: arguments.clone(),
                });
            }
            EventKind::DecisionPending {
                decision,
                kind,
                tool,
                arguments,
                reason,
                ..
            } => {
                self.step(&mut chunks);
                chunks.push(match self.approvals {
                    ApprovalChunks::ToolApprovalRequest => {
                        let mut chunk = serde_json::Map::new();
                        chunk.insert("type".into(), "tool-approval-request".into());
                        chunk.insert("approvalId".into(), Value::String(decision.clone()));
                        chunk.insert("toolCallId".into(), Value::String(call_id()));
                        UiChunk::Other(chunk)
                    }
                    ApprovalChunks::DataPart => UiChunk::Data {
                        name: "data-approval".to_owned(),
                        id: Some(decision.clone()),
                        data: serde_json::json!({
                            "approvalId": decision,
                            "toolCallId": call_id(),
                            "tool": tool,
                            "arguments": arguments,
                            "kind": kind,
                            "reason": reason,
                        }),
                        transient: false,
                    },
                });
            }
            EventKind::Decision {
                approved: false, ..
            } if self.approvals == ApprovalChunks::ToolApprovalRequest => {
                self.step(&mut chunks);
                self.denied.push(call_id());
                let mut chunk = serde_json::Map::new();
                chunk.insert("type".into(), "tool-output-denied".into());
                chunk.insert("toolCallId".into(), Value::String(call_id()));
                chunks.push(UiChunk::Other(chunk));
            }
            EventKind::ToolCallEnd { is_error: true, .. } if self.denied.contains(&call_id()) => {}
            EventKind::ToolCallEnd {
                is_error,
                result,
                result_ref,
                ..
            } => {
                let output = result
                    .clone()
                    .or_else(|| result_ref.clone())
                    .unwrap_or(Value::Null);
                chunks.push(if *is_error {
                    UiChunk::ToolOutputError {
                        tool_call_id: call_id(),
                        error_text: output
                            .as_str()
                            .map_or_else(|| output.to_string(), str::to_owned),
                    }
                } else {
                    UiChunk::ToolOutputAvailable {
                        tool_call_id: call_id(),
                        output,
                        preliminary: false,
                    }
                });
            }
            EventKind::TurnEnd { .. } => self.end_step(&mut chunks),
            EventKind::RunEnd { status, error, .. } => {
                if let Some(error) = error {
                    self.end_step(&mut chunks);
                    chunks.push(UiChunk::Error {
                        error_text: error.clone(),
                    });
                }
                let reason = match status.as_str() {
                    "completed" => "stop",
                    "failed" => "error",
                    _ => "other",
                };
                self.finish_with(Some(reason), &mut chunks);
            }
            _ => {}
        }
        chunks
    }

    /// Ends the message (open parts closed, the step finished, `finish`), when the run's
    /// events stop without a `run_end`.
    pub fn finish(&mut self) -> Vec<UiChunk> {
        let mut chunks = Vec::new();
        if self.started && !self.finished {
            self.finish_with(None, &mut chunks);
        }
        chunks
    }

    fn finish_with(&mut self, reason: Option<&str>, chunks: &mut Vec<UiChunk>) {
        self.end_step(chunks);
        self.finished = true;
        chunks.push(UiChunk::Finish {
            finish_reason: reason.map(str::to_owned),
            message_metadata: None,
        });
    }

    fn delta(&mut self, text: &str, reasoning: bool, chunks: &mut Vec<UiChunk>) {
        self.step(chunks);
        if self.open.as_ref().is_some_and(|(_, r)| *r != reasoning) {
            self.close(chunks);
        }
        let id = match &self.open {
            Some((id, _)) => id.clone(),
            None => {
                self.parts += 1;
                let id = format!("{}-{}", self.message_id, self.parts);
                chunks.push(if reasoning {
                    UiChunk::ReasoningStart {
                        id: id.clone(),
                        provider_metadata: None,
                    }
                } else {
                    UiChunk::TextStart {
                        id: id.clone(),
                        provider_metadata: None,
                    }
                });
                self.open = Some((id.clone(), reasoning));
                id
            }
        };
        let delta = text.to_owned();
        chunks.push(if reasoning {
            UiChunk::ReasoningDelta { id, delta }
        } else {
            UiChunk::TextDelta { id, delta }
        });
    }

    /// Opens a step if none is open (a stream joined mid-step).
    fn step(&mut self, chunks: &mut Vec<UiChunk>) {
        if !self.in_step {
            self.in_step = true;
            chunks.push(UiChunk::StartStep);
        }
    }

    fn close(&mut self, chunks: &mut Vec<UiChunk>) {
        if let Some((id, reasoning)) = self.open.take() {
            chunks.push(if reasoning {
                UiChunk::ReasoningEnd {
                    id,
                    provider_metadata: None,
                }
            } else {
                UiChunk::TextEnd {
                    id,
                    provider_metadata: None,
                }
            });
        }
    }

    fn end_step(&mut self, chunks: &mut Vec<UiChunk>) {
        self.close(chunks);
        if self.in_step {
            self.in_step = false;
            chunks.push(UiChunk::FinishStep);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::event::AgentPath;

    fn event(seq: u64, call: Option<&str>, kind: EventKind) -> RunEvent {
        RunEvent {
            seq,
            timestamp: "2026-11-24T10:00:00.000Z".into(),
            run_id: "R".into(),
            agent: AgentPath::root("main"),
            turn: 1,
            tool_call_id: call.map(str::to_owned),
            kind,
        }
    }

    fn types(chunks: &[UiChunk]) -> Vec<String> {
        chunks
            .iter()
            .map(|c| c.to_value()["type"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    fn start() -> EventKind {
        EventKind::ToolCallStart {
            tool: "write_file".into(),
            arguments: json!({"path": "a"}),
            side: None,
        }
    }

    fn end(is_error: bool) -> EventKind {
        EventKind::ToolCallEnd {
            tool: "write_file".into(),
            is_error,
            result: Some(json!("denied: no")),
            result_bytes: None,
            result_ref: None,
            side: None,
        }
    }

    fn pending() -> EventKind {
        EventKind::DecisionPending {
            decision: "d-1".into(),
            kind: "approval".into(),
            tool: "write_file".into(),
            arguments: json!({"path": "a"}),
            position: "main@1#0".into(),
            reason: None,
        }
    }

    #[test]
    fn a_pending_call_asks_for_approval_the_v6_way_or_as_a_data_part() {
        let mut v6 = UiStreamEncoder::new("m");
        let mut chunks = v6.push(&event(1, Some("c1"), start()));
        chunks.extend(v6.push(&event(2, Some("c1"), pending())));
        let last = chunks.last().map(UiChunk::to_value).unwrap_or_default();
        assert_eq!(last["type"], "tool-approval-request");
        assert_eq!(last["approvalId"], "d-1");
        assert_eq!(last["toolCallId"], "c1");

        let mut v5 = UiStreamEncoder::new("m").with_approvals(ApprovalChunks::DataPart);
        let chunks = v5.push(&event(1, Some("c1"), pending()));
        let last = chunks.last().map(UiChunk::to_value).unwrap_or_default();
        assert_eq!(last["type"], "data-approval");
        assert_eq!(last["data"]["approvalId"], "d-1");
        assert_eq!(last["data"]["arguments"], json!({"path": "a"}));
    }

    #[test]
    fn a_continued_message_goes_on_in_its_step_without_resending_known_calls() {
        let mut encoder = UiStreamEncoder::new("m").continuing(vec!["c1".into()]);
        let mut chunks = encoder.push(&event(
            1,
            None,
            EventKind::TurnStart {
                messages: 2,
                side: None,
            },
        ));
        chunks.extend(encoder.push(&event(2, Some("c1"), start())));
        chunks.extend(encoder.push(&event(
            3,
            Some("c1"),
            EventKind::Decision {
                decision: "d-1".into(),
                tool: "write_file".into(),
                approved: false,
                reason: Some("no".into()),
            },
        )));
        chunks.extend(encoder.push(&event(4, Some("c1"), end(true))));
        chunks.extend(encoder.push(&event(
            5,
            None,
            EventKind::TurnEnd {
                tool_calls: 1,
                input_tokens: 0,
                output_tokens: 0,
                run_input_tokens: 0,
                run_output_tokens: 0,
                cost: None,
                side: None,
            },
        )));
        assert_eq!(
            types(&chunks),
            ["start", "tool-output-denied", "finish-step"],
            "no new step, no second input, the denial instead of an error"
        );
    }
}
