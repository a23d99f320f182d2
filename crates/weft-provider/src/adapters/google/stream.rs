//! `streamGenerateContent?alt=sse` streaming: each event is a whole `GenerateContentResponse`
//! chunk → UPP stream events.
//!
//! The decoder merges the chunks into one response: consecutive text parts of the same kind
//! (thought or answer) join into one part and one UPP block, a part's `thoughtSignature` is
//! kept on the part it came with (a new part starts when a second signature would be lost),
//! every `functionCall` part is one block (a call without an `id` gets one here, so events and
//! the final message agree), and the last chunk's usage, finish reason and safety ratings win.
//!
//! Calls usually come whole. With `streamFunctionCallArguments` (Gemini 3 on Vertex AI) a call
//! is streamed instead: a part with its `name`, `willContinue: true` and the part's
//! `thoughtSignature`; parts whose `partialArgs` fill the arguments in
//! ([`partial_args::ArgumentsBuilder`]), with `willContinue` while more follow; and an empty
//! `functionCall: {}` (or the first part without `willContinue`) ending it. Parts with only
//! `willContinue: true` mark progress. The pieces become one `functionCall` part with `args`
//! (and the signature, sent back with the call), and `tool_call_delta` events as they come. The merged response goes through
//! [`convert::decode_response`], like a non-streamed one. A stream that ends without a
//! `finishReason` is cut (`INVALID_RESPONSE`); an `error` object in a chunk is mapped by its
//! `code` like an HTTP error.

use serde_json::{Map, Value, json};

use crate::adapters::driver::{StreamDecoder, event_json};
use crate::error::{ErrorCode, UppError};
use crate::provider::LlmStreamPart;
use crate::sse::SseEvent;
use crate::stream::StreamEvent;

use super::partial_args::ArgumentsBuilder;
use super::{NAME, convert};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Thought,
    Text,
    Other,
}

/// Decoder state for one streamed response.
#[derive(Debug, Default)]
pub(crate) struct EventDecoder {
    started: bool,
    /// The merged parts, each with its UPP block index and kind.
    parts: Vec<(u32, Kind, Value)>,
    open: Option<u32>,
    next_index: u32,
    top: Map<String, Value>,
    candidate: Map<String, Value>,
    finished: bool,
    /// The call whose arguments are being streamed: its block index and arguments so far.
    streaming: Option<(u32, ArgumentsBuilder)>,
}

impl EventDecoder {
    pub(crate) fn new() -> Self {
        EventDecoder::default()
    }

    fn close(&mut self, out: &mut Vec<LlmStreamPart>) {
        if let Some(index) = self.open.take() {
            out.push(LlmStreamPart::Event(StreamEvent::block_stop(index)));
        }
    }

    fn new_block(&mut self, kind: Kind, part: Value, out: &mut Vec<LlmStreamPart>) -> u32 {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        out.push(LlmStreamPart::Event(StreamEvent::block_start(index)));
        self.parts.push((index, kind, part));
        self.open = Some(index);
        index
    }

    fn text_part(&mut self, part: &Value, text: &str, kind: Kind, out: &mut Vec<LlmStreamPart>) {
        let signature = part.get("thoughtSignature").filter(|s| s.is_string());
        if text.is_empty() && signature.is_none() {
            return;
        }
        let open = self.open;
        let target = self.parts.last_mut().filter(|(index, k, existing)| {
            Some(*index) == open
                && *k == kind
                && (signature.is_none() || existing.get("thoughtSignature").is_none())
        });
        let index = match target {
            Some((index, _, existing)) => {
                if let Some(object) = existing.as_object_mut() {
                    if let Some(Value::String(joined)) = object.get_mut("text") {
                        joined.push_str(text);
                    }
                    if let Some(signature) = signature {
                        object.insert("thoughtSignature".into(), signature.clone());
                    }
                }
                *index
            }
            None => self.new_block(kind, part.clone(), out),
        };
        if !text.is_empty() {
            out.push(LlmStreamPart::Event(match kind {
                Kind::Thought => StreamEvent::reasoning_delta(index, text),
                _ => StreamEvent::text_delta(index, text),
            }));
        }
    }

    /// Starts a streamed call (`name` with `willContinue: true`).
    fn start_call(
        &mut self,
        part: &Value,
        call: &Map<String, Value>,
        out: &mut Vec<LlmStreamPart>,
    ) {
        self.finish_call(out);
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map_or_else(convert::fresh_call_id, str::to_owned);
        let name = call.get("name").and_then(Value::as_str).unwrap_or_default();
        let mut merged = Map::new();
        merged.insert("functionCall".into(), json!({"id": id, "name": name}));
        if let Some(signature) = part.get("thoughtSignature").filter(|s| s.is_string()) {
            merged.insert("thoughtSignature".into(), signature.clone());
        }
        let index = self.new_block(Kind::Other, Value::Object(merged), out);
        out.push(LlmStreamPart::Event(StreamEvent::tool_call_delta(
            index,
            Some(id),
            Some(name.to_owned()),
            None,
        )));
        self.streaming = Some((index, ArgumentsBuilder::default()));
    }

    /// Adds one part's `partialArgs` to the streamed call; ends the call when the part says
    /// nothing more follows.
    fn continue_call(
        &mut self,
        part: &Value,
        call: &Map<String, Value>,
        out: &mut Vec<LlmStreamPart>,
    ) -> Result<(), UppError> {
        let Some((index, builder)) = self.streaming.as_mut() else {
            return Err(UppError::llm(
                ErrorCode::InvalidResponse,
                NAME,
                "streamed function-call arguments arrived before the call's name",
            )
            .with_cause(part.clone()));
        };
        let index = *index;
        let items = call
            .get("partialArgs")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut text = String::new();
        for item in items {
            text.push_str(&builder.apply(item).map_err(|message| {
                UppError::llm(ErrorCode::InvalidResponse, NAME, message).with_cause(part.clone())
            })?);
        }
        if !text.is_empty() {
            out.push(LlmStreamPart::Event(StreamEvent::tool_call_delta(
                index,
                None,
                None,
                Some(text),
            )));
        }
        if let Some(signature) = part.get("thoughtSignature").filter(|s| s.is_string())
            && let Some((_, _, merged)) = self.parts.iter_mut().find(|(i, _, _)| *i == index)
            && let Some(object) = merged.as_object_mut()
        {
            object
                .entry("thoughtSignature")
                .or_insert_with(|| signature.clone());
        }
        let continues = |value: Option<&Value>| value.and_then(Value::as_bool) == Some(true);
        if !continues(call.get("willContinue"))
            && !items.iter().any(|item| continues(item.get("willContinue")))
        {
            self.finish_call(out);
        }
        Ok(())
    }

    /// Ends the streamed call, if any: its arguments go into its part, the closing text into a
    /// last `tool_call_delta`.
    fn finish_call(&mut self, out: &mut Vec<LlmStreamPart>) {
        let Some((index, builder)) = self.streaming.take() else {
            return;
        };
        let (args, text) = builder.finish();
        if let Some((_, _, merged)) = self.parts.iter_mut().find(|(i, _, _)| *i == index)
            && let Some(Value::Object(call)) = merged.get_mut("functionCall")
        {
            call.insert("args".into(), args);
        }
        out.push(LlmStreamPart::Event(StreamEvent::tool_call_delta(
            index,
            None,
            None,
            Some(text),
        )));
        self.close(out);
    }

    /// Handles a `functionCall` part that belongs to a streamed call; `false` for a whole call.
    fn streamed_call_part(
        &mut self,
        part: &Value,
        out: &mut Vec<LlmStreamPart>,
    ) -> Result<bool, UppError> {
        let Some(call) = part.get("functionCall").and_then(Value::as_object) else {
            return Ok(false);
        };
        let has = |key: &str| call.get(key).is_some_and(|v| !v.is_null());
        let will_continue = call.get("willContinue").and_then(Value::as_bool) == Some(true);
        if has("args") {
            return Ok(false);
        }
        if has("name") {
            if !will_continue && !has("partialArgs") {
                return Ok(false);
            }
            self.start_call(part, call, out);
            if has("partialArgs") {
                self.continue_call(part, call, out)?;
            }
            return Ok(true);
        }
        if has("partialArgs") {
            self.continue_call(part, call, out)?;
        } else if !will_continue {
            // `functionCall: {}` ends the streamed call (and is nothing on its own).
            self.finish_call(out);
        }
        Ok(true)
    }

    fn merged_response(&mut self) -> Value {
        let parts: Vec<Value> = self.parts.drain(..).map(|(_, _, part)| part).collect();
        let mut candidate = std::mem::take(&mut self.candidate);
        candidate.insert("content".into(), json!({"role": "model", "parts": parts}));
        let mut body = std::mem::take(&mut self.top);
        body.insert("candidates".into(), json!([Value::Object(candidate)]));
        Value::Object(body)
    }
}

impl StreamDecoder for EventDecoder {
    fn push(&mut self, event: &SseEvent, out: &mut Vec<LlmStreamPart>) -> Result<(), UppError> {
        if event.data.trim().is_empty() || event.is_done() {
            return Ok(());
        }
        let chunk = event_json(event, NAME)?;
        if let Some(error) = chunk.get("error").filter(|e| e.is_object()) {
            return Err(convert::error_from_body(error, &chunk));
        }
        let Some(object) = chunk.as_object() else {
            return Err(UppError::llm(
                ErrorCode::InvalidResponse,
                NAME,
                "a stream chunk is not a JSON object",
            )
            .with_cause(chunk.clone()));
        };
        if !self.started {
            self.started = true;
            out.push(LlmStreamPart::Event(StreamEvent::message_start()));
        }
        for (key, value) in object {
            if key != "candidates" && !value.is_null() {
                self.top.insert(key.clone(), value.clone());
            }
        }
        let candidate = chunk
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        let Some(candidate) = candidate.and_then(Value::as_object) else {
            return Ok(());
        };
        for (key, value) in candidate {
            if key != "content" && !value.is_null() {
                self.candidate.insert(key.clone(), value.clone());
            }
        }
        if candidate.contains_key("finishReason") {
            self.finished = true;
        }
        for part in candidate
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if self.streamed_call_part(part, out)? {
                continue;
            }
            self.finish_call(out);
            if let Some(call) = part.get("functionCall") {
                let mut part = part.clone();
                let mut call = call.clone();
                let id = match call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    Some(id) => id.to_owned(),
                    None => {
                        let id = convert::fresh_call_id();
                        if let Some(object) = call.as_object_mut() {
                            object.insert("id".into(), json!(id));
                        }
                        id
                    }
                };
                let name = call.get("name").and_then(Value::as_str).map(str::to_owned);
                let arguments = call
                    .get("args")
                    .filter(|a| !a.is_null())
                    .map_or_else(|| "{}".to_owned(), Value::to_string);
                if let Some(object) = part.as_object_mut() {
                    object.insert("functionCall".into(), call);
                }
                let index = self.new_block(Kind::Other, part, out);
                out.push(LlmStreamPart::Event(StreamEvent::tool_call_delta(
                    index,
                    Some(id),
                    name,
                    Some(arguments),
                )));
                self.close(out);
            } else if let Some(text) = part.get("text").and_then(Value::as_str) {
                let kind = if part.get("thought").and_then(Value::as_bool) == Some(true) {
                    Kind::Thought
                } else {
                    Kind::Text
                };
                self.text_part(part, text, kind, out);
            } else {
                self.new_block(Kind::Other, part.clone(), out);
                self.close(out);
            }
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<LlmStreamPart>) -> Result<(), UppError> {
        if !self.finished {
            return Err(UppError::llm(
                ErrorCode::InvalidResponse,
                NAME,
                "the stream ended without a finishReason (the response is incomplete)",
            ));
        }
        self.finish_call(out);
        self.close(out);
        let body = self.merged_response();
        let response = convert::decode_response(&body)?;
        out.push(LlmStreamPart::Event(StreamEvent::message_stop()));
        out.push(LlmStreamPart::Response(response));
        Ok(())
    }
}
