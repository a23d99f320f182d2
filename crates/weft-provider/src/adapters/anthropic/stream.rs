//! Messages API streaming: `message_start`, `content_block_start` / `_delta` / `_stop`,
//! `message_delta`, `message_stop`, `ping` and `error` events → UPP stream events.
//!
//! The decoder rebuilds the complete `message` object as the events arrive (text, thinking
//! and signature deltas appended; `input_json_delta` fragments joined and parsed at the
//! block's stop; `message_delta` stop reason and usage merged) and decodes it with
//! [`convert::decode_message`], so a streamed turn equals the non-streamed one. UPP event
//! indices are Anthropic's block indices. A stream that ends before `message_stop` is cut:
//! `INVALID_RESPONSE`.

use serde_json::{Map, Value, json};

use crate::adapters::driver::{StreamDecoder, event_json};
use crate::error::{ErrorCode, UppError};
use crate::provider::LlmStreamPart;
use crate::sse::SseEvent;
use crate::stream::StreamEvent;

use super::{NAME, convert};

/// Decoder state for one streamed message.
#[derive(Debug, Default)]
pub(crate) struct EventDecoder {
    message: Option<Map<String, Value>>,
    blocks: Vec<(u32, Value, String)>,
    /// Blocks started and not yet stopped.
    open: Vec<u32>,
    done: bool,
}

impl EventDecoder {
    pub(crate) fn new() -> Self {
        EventDecoder::default()
    }

    fn block_mut(&mut self, index: u32) -> Option<&mut (u32, Value, String)> {
        self.blocks.iter_mut().find(|(i, _, _)| *i == index)
    }

    fn cut(message: &str) -> UppError {
        UppError::llm(ErrorCode::InvalidResponse, NAME, message.to_owned())
    }
}

fn index_of(event: &Value) -> Result<u32, UppError> {
    event
        .get("index")
        .and_then(Value::as_u64)
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| {
            UppError::llm(
                ErrorCode::InvalidResponse,
                NAME,
                "a content block event has no valid index",
            )
            .with_cause(event.clone())
        })
}

fn append(block: &mut Value, key: &str, text: &str) {
    if let Some(object) = block.as_object_mut() {
        let entry = object.entry(key).or_insert_with(|| json!(""));
        if let Value::String(existing) = entry {
            existing.push_str(text);
        } else {
            *entry = json!(text);
        }
    }
}

impl StreamDecoder for EventDecoder {
    fn push(&mut self, event: &SseEvent, out: &mut Vec<LlmStreamPart>) -> Result<(), UppError> {
        // After message_stop the response is out: nothing may follow it.
        if self.done || event.data.trim().is_empty() {
            return Ok(());
        }
        let data = event_json(event, NAME)?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("");
        match kind {
            "ping" => {}
            "error" => return Err(convert::error_from_event(&data)),
            "message_start" => {
                let message = data
                    .get("message")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                self.message = Some(message);
                out.push(LlmStreamPart::Event(StreamEvent::message_start()));
            }
            "content_block_start" => {
                let index = index_of(&data)?;
                if self.open.contains(&index) {
                    return Err(EventDecoder::cut(
                        "a content_block_start arrived for a block that is still open",
                    ));
                }
                self.open.push(index);
                let block = data.get("content_block").cloned().unwrap_or(json!({}));
                out.push(LlmStreamPart::Event(StreamEvent::block_start(index)));
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(text) = block
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(LlmStreamPart::Event(StreamEvent::text_delta(index, text)));
                        }
                    }
                    Some("thinking") => {
                        if let Some(text) = block
                            .get("thinking")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(LlmStreamPart::Event(StreamEvent::reasoning_delta(
                                index, text,
                            )));
                        }
                    }
                    Some("tool_use") => {
                        out.push(LlmStreamPart::Event(StreamEvent::tool_call_delta(
                            index,
                            block.get("id").and_then(Value::as_str).map(str::to_owned),
                            block.get("name").and_then(Value::as_str).map(str::to_owned),
                            None,
                        )));
                    }
                    _ => {}
                }
                self.blocks.retain(|(i, _, _)| *i != index);
                self.blocks.push((index, block, String::new()));
            }
            "content_block_delta" => {
                let index = index_of(&data)?;
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                if !self.open.contains(&index) {
                    return Err(EventDecoder::cut(
                        "a content_block_delta arrived for a block that is not open (never started, or stopped)",
                    ));
                }
                let Some((_, block, json_text)) = self.block_mut(index) else {
                    return Err(EventDecoder::cut(
                        "a content_block_delta arrived for a block that never started",
                    ));
                };
                let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or("");
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        append(block, "text", text("text"));
                        if !text("text").is_empty() {
                            out.push(LlmStreamPart::Event(StreamEvent::text_delta(
                                index,
                                text("text"),
                            )));
                        }
                    }
                    Some("thinking_delta") => {
                        append(block, "thinking", text("thinking"));
                        if !text("thinking").is_empty() {
                            out.push(LlmStreamPart::Event(StreamEvent::reasoning_delta(
                                index,
                                text("thinking"),
                            )));
                        }
                    }
                    Some("signature_delta") => append(block, "signature", text("signature")),
                    Some("input_json_delta") => {
                        let fragment = text("partial_json");
                        json_text.push_str(fragment);
                        if !fragment.is_empty() {
                            out.push(LlmStreamPart::Event(StreamEvent::tool_call_delta(
                                index,
                                None,
                                None,
                                Some(fragment.to_owned()),
                            )));
                        }
                    }
                    Some("citations_delta") => {
                        if let (Some(object), Some(citation)) =
                            (block.as_object_mut(), delta.get("citation"))
                        {
                            let list = object.entry("citations").or_insert_with(|| json!([]));
                            if let Value::Array(items) = list {
                                items.push(citation.clone());
                            }
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = index_of(&data)?;
                let Some(position) = self.open.iter().position(|i| *i == index) else {
                    return Err(EventDecoder::cut(
                        "a content_block_stop arrived for a block that is not open",
                    ));
                };
                self.open.remove(position);
                if let Some((_, block, json_text)) = self.block_mut(index)
                    && !json_text.trim().is_empty()
                    && let Some(object) = block.as_object_mut()
                {
                    // Parsed by decode_message, which reports invalid JSON with the tool name.
                    object.insert("input".into(), Value::String(std::mem::take(json_text)));
                }
                out.push(LlmStreamPart::Event(StreamEvent::block_stop(index)));
            }
            "message_delta" => {
                let message = self.message.get_or_insert_with(Map::new);
                if let Some(Value::Object(delta)) = data.get("delta") {
                    for (key, value) in delta {
                        message.insert(key.clone(), value.clone());
                    }
                }
                if let Some(Value::Object(usage)) = data.get("usage") {
                    let entry = message.entry("usage").or_insert_with(|| json!({}));
                    if let Value::Object(existing) = entry {
                        for (key, value) in usage {
                            if !value.is_null() {
                                existing.insert(key.clone(), value.clone());
                            }
                        }
                    }
                }
            }
            "message_stop" => {
                if self.done {
                    return Ok(());
                }
                self.done = true;
                let Some(mut message) = self.message.take() else {
                    return Err(EventDecoder::cut(
                        "message_stop arrived before message_start",
                    ));
                };
                self.blocks.sort_by_key(|(i, _, _)| *i);
                let content = self.blocks.drain(..).map(|(_, block, _)| block).collect();
                message.insert("content".into(), Value::Array(content));
                let response = convert::decode_message(&Value::Object(message))?;
                out.push(LlmStreamPart::Event(StreamEvent::message_stop()));
                out.push(LlmStreamPart::Response(response));
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<LlmStreamPart>) -> Result<(), UppError> {
        if self.done {
            Ok(())
        } else {
            Err(EventDecoder::cut(
                "the stream ended before message_stop (the response is incomplete)",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::driver::decode_sse_bytes;

    const START: &str = "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{}}}\n\n";
    const BLOCK: &str = "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
    const DELTA: &str = "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n";
    const STOP: &str = "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n";
    const END: &str = "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\ndata: {\"type\":\"message_stop\"}\n\n";

    fn decode(parts: &[&str]) -> Result<Vec<LlmStreamPart>, UppError> {
        decode_sse_bytes(EventDecoder::new(), parts.concat().as_bytes())
    }

    /// Found by the `provider_stream` fuzz target: a delta after its block's stop was emitted
    /// as an event of a closed block.
    #[test]
    fn block_events_outside_their_block_are_invalid() {
        assert!(decode(&[START, BLOCK, DELTA, STOP, END]).is_ok());
        for broken in [
            &[START, BLOCK, DELTA, STOP, DELTA, END][..],
            &[START, BLOCK, BLOCK, STOP, END],
            &[START, BLOCK, STOP, STOP, END],
            &[START, STOP, END],
        ] {
            let error = decode(broken).expect_err("invalid");
            assert_eq!(error.code, ErrorCode::InvalidResponse, "{error}");
        }
    }

    /// Found by the `provider_stream` fuzz target: events after `message_stop` came after the
    /// final response.
    #[test]
    fn nothing_follows_message_stop() {
        let events = |parts: Vec<LlmStreamPart>| -> Vec<LlmStreamPart> {
            assert!(matches!(parts.last(), Some(LlmStreamPart::Response(_))));
            parts
                .into_iter()
                .filter(|p| matches!(p, LlmStreamPart::Event(_)))
                .collect()
        };
        let after = decode(&[START, BLOCK, DELTA, STOP, END, BLOCK, DELTA]).expect("decodes");
        let plain = decode(&[START, BLOCK, DELTA, STOP, END]).expect("decodes");
        assert_eq!(events(after), events(plain));
    }
}
