//! Chat Completions streaming: `chat.completion.chunk` events → UPP stream events, and the
//! final [`LlmResponse`] built from them.
//!
//! Block indices are assigned as blocks appear (reasoning, text, then each tool call by its
//! `index`); a block is closed when another one starts or the stream finishes. A stream that
//! ends without `finish_reason` and without `[DONE]` is cut: `INVALID_RESPONSE`.

use std::collections::HashMap;

use serde_json::Value;

use crate::adapters::accumulate::MessageAccumulator;
use crate::adapters::driver::StreamDecoder;
use crate::error::{ErrorCode, UppError};
use crate::message::Metadata;
use crate::provider::{LlmResponse, LlmStreamPart};
use crate::sse::SseEvent;
use crate::stream::StreamEvent;
use crate::turn::TokenUsage;

use super::{convert, finish_reason};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum BlockKey {
    Reasoning,
    Text,
    Tool(u64),
}

/// Decoder state for one streamed response.
#[derive(Debug)]
pub(crate) struct ChunkDecoder {
    provider: String,
    started: bool,
    blocks: HashMap<BlockKey, u32>,
    open: Option<u32>,
    next_index: u32,
    accumulator: MessageAccumulator,
    finish: Option<String>,
    usage: Option<TokenUsage>,
    raw_usage: Option<Value>,
    last_chunk: Value,
    extra: serde_json::Map<String, Value>,
    done: bool,
}

impl ChunkDecoder {
    pub(crate) fn new(provider: &str) -> Self {
        ChunkDecoder {
            provider: provider.to_owned(),
            started: false,
            blocks: HashMap::new(),
            open: None,
            next_index: 0,
            accumulator: MessageAccumulator::new(),
            finish: None,
            usage: None,
            raw_usage: None,
            last_chunk: Value::Null,
            extra: serde_json::Map::new(),
            done: false,
        }
    }

    fn block(&mut self, key: BlockKey, out: &mut Vec<LlmStreamPart>) -> u32 {
        let index = match self.blocks.get(&key) {
            Some(index) => *index,
            None => {
                let index = self.next_index;
                self.next_index += 1;
                self.blocks.insert(key, index);
                index
            }
        };
        if self.open != Some(index) {
            if let Some(previous) = self.open.take() {
                out.push(LlmStreamPart::Event(StreamEvent::block_stop(previous)));
            }
            out.push(LlmStreamPart::Event(StreamEvent::block_start(index)));
            self.open = Some(index);
        }
        index
    }

    /// Handles one SSE event; returns what to emit.
    fn handle(&mut self, event: &SseEvent, out: &mut Vec<LlmStreamPart>) -> Result<(), UppError> {
        if event.is_done() {
            self.done = true;
            return Ok(());
        }
        if event.data.trim().is_empty() {
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(&event.data).map_err(|error| {
            UppError::llm(
                ErrorCode::InvalidResponse,
                &self.provider,
                format!("a stream chunk is not valid JSON: {error}"),
            )
            .with_cause(serde_json::json!({ "data": event.data }))
        })?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(convert::stream_error(error, &self.provider));
        }
        if !self.started {
            self.started = true;
            out.push(LlmStreamPart::Event(StreamEvent::message_start()));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(convert::usage(Some(usage)));
            self.raw_usage = Some(usage.clone());
        }
        for choice in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
            for key in ["reasoning_content", "reasoning"] {
                if let Some(text) = delta
                    .get(key)
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                {
                    let index = self.block(BlockKey::Reasoning, out);
                    self.accumulator.reasoning(index, text);
                    out.push(LlmStreamPart::Event(StreamEvent::reasoning_delta(
                        index, text,
                    )));
                    break;
                }
            }
            if let Some(text) = delta
                .get("content")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                let index = self.block(BlockKey::Text, out);
                self.accumulator.text(index, text);
                out.push(LlmStreamPart::Event(StreamEvent::text_delta(index, text)));
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let position = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                let index = self.block(BlockKey::Tool(position), out);
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                let name = call
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                let arguments = call
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                self.accumulator.tool_call(index, id, name, arguments);
                out.push(LlmStreamPart::Event(StreamEvent::tool_call_delta(
                    index,
                    id.map(str::to_owned),
                    name.map(str::to_owned),
                    arguments.map(str::to_owned),
                )));
            }
            if let Some(object) = delta.as_object() {
                for (key, value) in object {
                    let known = matches!(
                        key.as_str(),
                        "role"
                            | "content"
                            | "tool_calls"
                            | "reasoning_content"
                            | "reasoning"
                            | "refusal"
                            | "function_call"
                    );
                    if !known && !value.is_null() {
                        self.extra.insert(key.clone(), value.clone());
                    }
                }
            }
            if let Some(finish) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(finish.to_owned());
            }
        }
        self.last_chunk = chunk;
        Ok(())
    }

    /// Closes the stream: emits the remaining stops and the response.
    fn close(&mut self, out: &mut Vec<LlmStreamPart>) -> Result<(), UppError> {
        if self.finish.is_none() && !self.done {
            return Err(UppError::llm(
                ErrorCode::InvalidResponse,
                &self.provider,
                "the stream ended before the response was complete (no finish_reason and no [DONE])",
            ));
        }
        if let Some(open) = self.open {
            out.push(LlmStreamPart::Event(StreamEvent::block_stop(open)));
        }
        if !self.started {
            out.push(LlmStreamPart::Event(StreamEvent::message_start()));
        }
        out.push(LlmStreamPart::Event(StreamEvent::message_stop()));
        let mut meta_source = std::mem::take(&mut self.last_chunk);
        // The vendor's usage object, wherever in the stream it came.
        if let (Some(object), Some(usage)) = (meta_source.as_object_mut(), self.raw_usage.take()) {
            object.insert("usage".into(), usage);
        }
        let extra = Value::Object(std::mem::take(&mut self.extra));
        let mut namespace =
            convert::response_metadata(&meta_source, Some(&extra), self.finish.as_deref());
        if let Some(object) = namespace.as_object_mut() {
            object.remove("object");
        }
        let mut metadata = Metadata::new();
        metadata.insert(self.provider.clone(), namespace);
        let message = std::mem::take(&mut self.accumulator).finish(
            &self.provider,
            Some(metadata),
            convert::fresh_call_id,
        )?;
        let stop_reason = match self.finish.as_deref() {
            Some(f) => finish_reason::map(f).to_owned(),
            None if message.has_tool_calls() => "tool_use".to_owned(),
            None => "end_turn".to_owned(),
        };
        out.push(LlmStreamPart::Response(LlmResponse {
            message,
            usage: self.usage.take().unwrap_or_else(|| convert::usage(None)),
            stop_reason,
            data: None,
        }));
        Ok(())
    }
}

impl StreamDecoder for ChunkDecoder {
    fn push(&mut self, event: &SseEvent, out: &mut Vec<LlmStreamPart>) -> Result<(), UppError> {
        self.handle(event, out)
    }

    fn finish(&mut self, out: &mut Vec<LlmStreamPart>) -> Result<(), UppError> {
        self.close(out)
    }
}
