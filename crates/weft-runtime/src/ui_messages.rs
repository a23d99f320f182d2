//! A thread as the Vercel AI SDK's `UIMessage`s: what a `useChat` page shows of a stored
//! conversation, with the ids its live stream used.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};
use weft_provider::{ContentBlock, Message};

use crate::event::Side;
use crate::transcript::{Item, Transcript};

/// The id of the assistant message a run adds to a chat: one message per run (all its
/// steps), the same in the live stream ([`crate::event::UiStreamEncoder`]'s `start` chunk)
/// and in the stored history, across resumes.
///
/// ```
/// assert_eq!(weft_runtime::ui_messages::assistant_message_id("r1"), "msg-r1");
/// ```
pub fn assistant_message_id(run_id: &str) -> String {
    format!("msg-{run_id}")
}

/// The id of the user message that is a run's input, when the client gave none.
///
/// ```
/// assert_eq!(weft_runtime::ui_messages::input_message_id("r1"), "user-r1");
/// ```
pub fn input_message_id(run_id: &str) -> String {
    format!("user-{run_id}")
}

/// The `UIMessage` part type of a silent message (a child's result or failure queued for the
/// model, [`crate::ledger::SILENT`]): `{"type": "data-subagent-result", "id", "data": {"text"}}`.
pub const SUBAGENT_RESULT_PART: &str = "data-subagent-result";

impl Transcript {
    /// Side A's conversation as `UIMessage` objects: each run's input is a user message
    /// (with the id the client gave it, from `input_ids` by run id, else
    /// [`input_message_id`]); everything a run's agents said and did is one assistant
    /// message ([`assistant_message_id`]) with a `step-start` part per model response, its
    /// reasoning and text parts, and a `tool-NAME` part per call (`output-available` or
    /// `output-error` once its result is known, `input-available` before). A silent message
    /// (a child's result queued for the model) is a [`SUBAGENT_RESULT_PART`] part of the
    /// run's assistant message, not a user message.
    pub fn to_ui_messages(&self, input_ids: &HashMap<String, String>) -> Vec<Value> {
        let mut messages: Vec<Value> = Vec::new();
        // The assistant message being built: its run and parts; where each call's part is.
        let mut current: Option<(String, Vec<Value>)> = None;
        let mut calls: BTreeMap<String, usize> = BTreeMap::new();
        let flush = |current: &mut Option<(String, Vec<Value>)>, messages: &mut Vec<Value>| {
            if let Some((run, parts)) = current.take() {
                messages.push(json!({
                    "id": assistant_message_id(&run),
                    "role": "assistant",
                    "parts": parts,
                }));
            }
        };
        for entry in &self.entries {
            if entry.side != Side::A {
                continue;
            }
            let run = entry.run_id.clone().unwrap_or_default();
            let Item::Message(message) = &entry.item else {
                continue;
            };
            match message {
                // A silent message (a child's result the runtime queued for the model) is
                // not the user's: it is a `data-subagent-result` part of the run's assistant
                // message, never a user bubble.
                Message::User(_) if crate::ledger::is_silent(message) => {
                    if current.as_ref().is_none_or(|(r, _)| *r != run) {
                        flush(&mut current, &mut messages);
                        calls.clear();
                        current = Some((run.clone(), Vec::new()));
                    }
                    if let Some((_, parts)) = current.as_mut() {
                        parts.push(json!({
                            "type": SUBAGENT_RESULT_PART,
                            "id": message.id(),
                            "data": {"text": message.text()},
                        }));
                    }
                }
                Message::User(_) => {
                    flush(&mut current, &mut messages);
                    calls.clear();
                    let id = input_ids
                        .get(&run)
                        .cloned()
                        .unwrap_or_else(|| input_message_id(&run));
                    messages.push(json!({
                        "id": id,
                        "role": "user",
                        "parts": [{"type": "text", "text": message.text()}],
                    }));
                }
                Message::Assistant(assistant) => {
                    if current.as_ref().is_none_or(|(r, _)| *r != run) {
                        flush(&mut current, &mut messages);
                        calls.clear();
                        current = Some((run.clone(), Vec::new()));
                    }
                    let Some((_, parts)) = current.as_mut() else {
                        continue;
                    };
                    parts.push(json!({"type": "step-start"}));
                    for block in &assistant.content {
                        match block {
                            ContentBlock::Reasoning(r) if !r.text.is_empty() => parts.push(
                                json!({"type": "reasoning", "text": r.text, "state": "done"}),
                            ),
                            ContentBlock::Text(t) if !t.text.is_empty() => {
                                parts.push(json!({"type": "text", "text": t.text, "state": "done"}))
                            }
                            _ => {}
                        }
                    }
                    for call in &assistant.tool_calls {
                        calls.insert(call.tool_call_id.clone(), parts.len());
                        parts.push(json!({
                            "type": format!("tool-{}", call.tool_name),
                            "toolCallId": call.tool_call_id,
                            "state": "input-available",
                            "input": call.arguments,
                        }));
                    }
                }
                Message::ToolResult(results) => {
                    let Some((_, parts)) = current.as_mut() else {
                        continue;
                    };
                    for result in &results.results {
                        let Some(Value::Object(part)) = calls
                            .get(&result.tool_call_id)
                            .and_then(|at| parts.get_mut(*at))
                        else {
                            continue;
                        };
                        complete(part, &result.result, result.is_error);
                    }
                }
            }
        }
        flush(&mut current, &mut messages);
        messages
    }
}

fn complete(part: &mut Map<String, Value>, result: &Value, is_error: bool) {
    if is_error {
        part.insert("state".into(), "output-error".into());
        let text = result
            .as_str()
            .map_or_else(|| result.to_string(), str::to_owned);
        part.insert("errorText".into(), Value::String(text));
    } else {
        part.insert("state".into(), "output-available".into());
        part.insert("output".into(), result.clone());
    }
}

#[cfg(test)]
mod tests {
    use weft_provider::{
        AssistantMessage, ContentBlock, MessageOptions, ToolCall, ToolResult, ToolResultMessage,
    };

    use super::*;
    use crate::transcript::Entry;

    fn entry(run: &str, input: bool, message: Message) -> Entry {
        Entry {
            side: Side::A,
            agent: "main".into(),
            run_id: Some(run.into()),
            input,
            item: Item::Message(message),
        }
    }

    #[test]
    fn each_run_is_its_input_and_one_assistant_message_with_its_calls_completed() {
        let call = ToolCall::new("c1", "write_file", json!({"path": "a"}));
        let asked = AssistantMessage::new(
            vec![ContentBlock::text("Writing.")],
            vec![call],
            MessageOptions::default(),
        )
        .expect("no binary content");
        let result = ToolResultMessage::new(vec![ToolResult {
            tool_call_id: "c1".into(),
            result: json!("denied: no"),
            is_error: true,
        }]);
        let transcript = Transcript {
            thread_id: "t".into(),
            forked_from: None,
            subagent: None,
            dual: false,
            entries: vec![
                entry("r1", true, Message::user("Write a")),
                entry("r1", false, Message::Assistant(asked)),
                entry("r1", false, Message::ToolResult(result)),
                entry("r1", false, Message::assistant("Could not.")),
                entry("r2", true, Message::user("Why?")),
            ],
            created_at: "2026-11-24T10:00:00Z".into(),
        };
        let ids = HashMap::from([("r1".to_owned(), "client-1".to_owned())]);
        let messages = transcript.to_ui_messages(&ids);
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(
            messages[0]["id"], "client-1",
            "the client's id of the input"
        );
        assert_eq!(
            messages[1]["id"], "msg-r1",
            "one message per run, the stream's id"
        );
        assert_eq!(messages[2]["id"], "user-r2", "no client id: the run's");
        let parts = messages[1]["parts"].as_array().cloned().unwrap_or_default();
        let kinds: Vec<&str> = parts
            .iter()
            .map(|p| p["type"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            kinds,
            [
                "step-start",
                "text",
                "tool-write_file",
                "step-start",
                "text"
            ]
        );
        assert_eq!(parts[2]["state"], "output-error");
        assert_eq!(parts[2]["errorText"], "denied: no");
        assert_eq!(parts[2]["input"], json!({"path": "a"}));
    }

    #[test]
    fn a_silent_message_is_a_data_part_of_the_run_not_a_user_message() {
        let mut metadata = weft_provider::Metadata::new();
        metadata.insert(crate::ledger::SILENT.into(), Value::Bool(true));
        let result = "Subagent (reference: u1) has returned the following result:\n\ndone";
        let silent = Message::User(weft_provider::UserMessage::with_options(
            vec![ContentBlock::text(result)],
            MessageOptions {
                id: Some("q-1".into()),
                metadata: Some(metadata),
            },
        ));
        let transcript = Transcript {
            thread_id: "t".into(),
            forked_from: None,
            subagent: None,
            dual: false,
            entries: vec![
                entry("r1", true, Message::user("Start the writer")),
                entry("r1", false, Message::assistant("Started.")),
                entry("r1", false, silent),
                entry("r1", false, Message::assistant("The writer is done.")),
            ],
            created_at: "2026-11-24T10:00:00Z".into(),
        };
        let messages = transcript.to_ui_messages(&HashMap::new());
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(roles, ["user", "assistant"], "{messages:?}");
        let parts = messages[1]["parts"].as_array().cloned().unwrap_or_default();
        let data: Vec<&Value> = parts
            .iter()
            .filter(|p| p["type"] == SUBAGENT_RESULT_PART)
            .collect();
        assert_eq!(data.len(), 1, "{parts:?}");
        assert_eq!(data[0]["id"], "q-1");
        assert_eq!(data[0]["data"]["text"], result);
    }
}
