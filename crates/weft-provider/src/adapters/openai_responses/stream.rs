//! Responses API streaming: `response.*` events → UPP stream events.
//!
//! Blocks are keyed by `(output_index, content_index)`: a reasoning item or a function call is
//! one block, each `output_text` part of a message item is one. Reasoning summary parts of one
//! item are joined with a blank line, as in the decoded message. The final response is decoded
//! from the `response` object of `response.completed` (or `response.incomplete`); when a server
//! sends it without `output`, the items of `response.output_item.done` are used. A stream
//! without either event is cut (`INVALID_RESPONSE`); `response.failed` and `error` events
//! become the mapped [`UppError`].

use serde_json::Value;

use crate::adapters::driver::{StreamDecoder, event_json};
use crate::error::{ErrorCode, UppError};
use crate::provider::LlmStreamPart;
use crate::sse::SseEvent;
use crate::stream::StreamEvent;

use super::{NAME, convert};

type Key = (u64, u64);

/// Decoder state for one streamed response.
#[derive(Debug, Default)]
pub(crate) struct EventDecoder {
    started: bool,
    blocks: Vec<(Key, u32)>,
    open: Vec<u32>,
    next_index: u32,
    items: Vec<(u64, Value)>,
    done: bool,
}

fn number(data: &Value, key: &str) -> u64 {
    data.get(key).and_then(Value::as_u64).unwrap_or(0)
}

impl EventDecoder {
    pub(crate) fn new() -> Self {
        EventDecoder::default()
    }

    fn start(&mut self, out: &mut Vec<LlmStreamPart>) {
        if !self.started {
            self.started = true;
            out.push(LlmStreamPart::Event(StreamEvent::message_start()));
        }
    }

    /// The UPP index of `key`, starting the block (and `message_start`) when new.
    fn block(&mut self, key: Key, out: &mut Vec<LlmStreamPart>) -> (u32, bool) {
        self.start(out);
        if let Some((_, index)) = self.blocks.iter().find(|(k, _)| *k == key) {
            return (*index, false);
        }
        let index = self.next_index;
        self.next_index += 1;
        self.blocks.push((key, index));
        self.open.push(index);
        out.push(LlmStreamPart::Event(StreamEvent::block_start(index)));
        (index, true)
    }

    fn close_item(&mut self, output_index: u64, out: &mut Vec<LlmStreamPart>) {
        let indices: Vec<u32> = self
            .blocks
            .iter()
            .filter(|((o, _), _)| *o == output_index)
            .map(|(_, i)| *i)
            .collect();
        for index in indices {
            if let Some(position) = self.open.iter().position(|i| *i == index) {
                self.open.remove(position);
                out.push(LlmStreamPart::Event(StreamEvent::block_stop(index)));
            }
        }
    }

    fn complete(&mut self, data: &Value, out: &mut Vec<LlmStreamPart>) -> Result<(), UppError> {
        self.done = true;
        let mut response = data.get("response").cloned().unwrap_or(Value::Null);
        if !response.is_object() {
            return Err(UppError::llm(
                ErrorCode::InvalidResponse,
                NAME,
                "the completion event carries no response object",
            )
            .with_cause(data.clone()));
        }
        let empty = response
            .get("output")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if empty && !self.items.is_empty() {
            self.items.sort_by_key(|(i, _)| *i);
            let items = self.items.drain(..).map(|(_, item)| item).collect();
            if let Some(object) = response.as_object_mut() {
                object.insert("output".into(), Value::Array(items));
            }
        }
        let decoded = convert::decode_response(&response)?;
        self.start(out);
        for index in std::mem::take(&mut self.open) {
            out.push(LlmStreamPart::Event(StreamEvent::block_stop(index)));
        }
        out.push(LlmStreamPart::Event(StreamEvent::message_stop()));
        out.push(LlmStreamPart::Response(decoded));
        Ok(())
    }
}

impl StreamDecoder for EventDecoder {
    fn push(&mut self, event: &SseEvent, out: &mut Vec<LlmStreamPart>) -> Result<(), UppError> {
        // After response.completed the response is out: nothing that follows can change it,
        // not even an event that is not JSON.
        if self.done || event.data.trim().is_empty() || event.is_done() {
            return Ok(());
        }
        let data = event_json(event, NAME)?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("");
        let text = |key: &str| data.get(key).and_then(Value::as_str).unwrap_or("");
        let output_index = number(&data, "output_index");
        match kind {
            "response.created" | "response.in_progress" | "response.queued" => self.start(out),
            "response.output_item.added" => {
                let item = data.get("item").cloned().unwrap_or(Value::Null);
                match item.get("type").and_then(Value::as_str) {
                    Some("function_call") => {
                        let (index, _) = self.block((output_index, 0), out);
                        out.push(LlmStreamPart::Event(StreamEvent::tool_call_delta(
                            index,
                            item.get("call_id")
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                            item.get("name").and_then(Value::as_str).map(str::to_owned),
                            None,
                        )));
                    }
                    Some("reasoning") => {
                        self.block((output_index, 0), out);
                    }
                    _ => self.start(out),
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let key = (output_index, number(&data, "content_index"));
                let (index, _) = self.block(key, out);
                if !text("delta").is_empty() {
                    out.push(LlmStreamPart::Event(StreamEvent::text_delta(
                        index,
                        text("delta"),
                    )));
                }
            }
            "response.function_call_arguments.delta" => {
                let (index, _) = self.block((output_index, 0), out);
                if !text("delta").is_empty() {
                    out.push(LlmStreamPart::Event(StreamEvent::tool_call_delta(
                        index,
                        None,
                        None,
                        Some(text("delta").to_owned()),
                    )));
                }
            }
            "response.reasoning_summary_part.added" => {
                let (index, _) = self.block((output_index, 0), out);
                if number(&data, "summary_index") > 0 {
                    out.push(LlmStreamPart::Event(StreamEvent::reasoning_delta(
                        index, "\n\n",
                    )));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let (index, _) = self.block((output_index, 0), out);
                if !text("delta").is_empty() {
                    out.push(LlmStreamPart::Event(StreamEvent::reasoning_delta(
                        index,
                        text("delta"),
                    )));
                }
            }
            "response.output_item.done" => {
                if let Some(item) = data.get("item") {
                    self.items.push((output_index, item.clone()));
                }
                self.close_item(output_index, out);
            }
            "response.completed" | "response.incomplete" => self.complete(&data, out)?,
            "response.failed" => {
                let error = data
                    .pointer("/response/error")
                    .filter(|e| !e.is_null())
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"message": "the response failed"}));
                return Err(convert::error_from_object(&error, &data));
            }
            "error" => return Err(convert::error_from_object(&data, &data)),
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<LlmStreamPart>) -> Result<(), UppError> {
        if self.done {
            Ok(())
        } else {
            Err(UppError::llm(
                ErrorCode::InvalidResponse,
                NAME,
                "the stream ended before response.completed (the response is incomplete)",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::driver::decode_sse_bytes;

    const CREATED: &str = "data: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"output\":[]}}\n\n";
    const DELTA: &str = "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"hi\"}\n\n";
    const COMPLETED: &str = "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"id\":\"m\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"hi\",\"annotations\":[]}]}]}}\n\n";

    fn decode(parts: &[&str]) -> Result<Vec<LlmStreamPart>, UppError> {
        decode_sse_bytes(EventDecoder::new(), parts.concat().as_bytes())
    }

    /// Noticed while fuzzing: an event that is not JSON after `response.completed` turned a
    /// complete stream into an error. Nothing after the final response can change it.
    #[test]
    fn nothing_after_response_completed_changes_the_response() {
        let plain = decode(&[CREATED, DELTA, COMPLETED]).expect("decodes");
        let after = decode(&[CREATED, DELTA, COMPLETED, "data: {not json\n\n", DELTA])
            .expect("garbage after the final response is ignored");
        // Equal but for the message's generated id and receipt time.
        let shape = |parts: Vec<LlmStreamPart>| -> Vec<String> {
            parts
                .into_iter()
                .map(|part| match part {
                    LlmStreamPart::Response(response) => {
                        format!("{:?} {}", response.message.content, response.stop_reason)
                    }
                    other => format!("{other:?}"),
                })
                .collect()
        };
        assert_eq!(shape(after), shape(plain));
        // Before the final response, the same garbage is an invalid response.
        let error =
            decode(&[CREATED, "data: {not json\n\n", DELTA, COMPLETED]).expect_err("invalid");
        assert_eq!(error.code, ErrorCode::InvalidResponse, "{error}");
    }
}
