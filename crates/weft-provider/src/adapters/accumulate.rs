//! Builds an assistant message from stream events, for adapters whose stream carries no
//! complete message at the end. Text and reasoning deltas are concatenated per block; tool
//! call fragments are joined and parsed when the stream ends.

use serde_json::Value;

use crate::content::{ContentBlock, ReasoningBlock};
use crate::error::{ErrorCode, UppError};
use crate::message::{AssistantMessage, MessageOptions, Metadata};
use crate::tool::ToolCall;

#[derive(Debug)]
enum Block {
    Text(String),
    Reasoning(ReasoningBlock),
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
}

/// Collects blocks by index as events arrive.
#[derive(Debug, Default)]
pub struct MessageAccumulator {
    blocks: Vec<(u32, Block)>,
}

impl MessageAccumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        MessageAccumulator::default()
    }

    fn block(&mut self, index: u32, make: impl FnOnce() -> Block) -> &mut Block {
        let position = match self.blocks.iter().position(|(i, _)| *i == index) {
            Some(p) => p,
            None => {
                self.blocks.push((index, make()));
                self.blocks.len() - 1
            }
        };
        &mut self.blocks[position].1
    }

    /// Appends text to the text block at `index`.
    pub fn text(&mut self, index: u32, delta: &str) {
        if let Block::Text(text) = self.block(index, || Block::Text(String::new())) {
            text.push_str(delta);
        }
    }

    /// Appends reasoning to the reasoning block at `index`.
    pub fn reasoning(&mut self, index: u32, delta: &str) {
        if let Block::Reasoning(r) = self.block(index, || Block::Reasoning(empty_reasoning())) {
            r.text.push_str(delta);
        }
    }

    /// Appends to the signature of the reasoning block at `index`.
    pub fn signature(&mut self, index: u32, delta: &str) {
        if let Block::Reasoning(r) = self.block(index, || Block::Reasoning(empty_reasoning())) {
            r.signature.get_or_insert_with(String::new).push_str(delta);
        }
    }

    /// Sets provider metadata on the reasoning block at `index`.
    pub fn reasoning_metadata(&mut self, index: u32, provider: &str, value: Value) {
        if let Block::Reasoning(r) = self.block(index, || Block::Reasoning(empty_reasoning())) {
            r.metadata
                .get_or_insert_with(Metadata::new)
                .insert(provider.to_owned(), value);
        }
    }

    /// Starts or extends the tool call at `index`.
    pub fn tool_call(
        &mut self,
        index: u32,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&str>,
    ) {
        let block = self.block(index, || Block::ToolCall {
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
        });
        if let Block::ToolCall {
            id: i,
            name: n,
            arguments: a,
        } = block
        {
            if let Some(id) = id.filter(|s| !s.is_empty()) {
                id.clone_into(i);
            }
            if let Some(name) = name {
                n.push_str(name);
            }
            if let Some(arguments) = arguments {
                a.push_str(arguments);
            }
        }
    }

    /// Whether anything was received.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The message. Tool calls without an id get one from `fresh_id`; empty arguments
    /// become `{}`.
    ///
    /// # Errors
    /// `INVALID_RESPONSE` when a tool call's arguments are not JSON.
    pub fn finish(
        mut self,
        provider: &str,
        metadata: Option<Metadata>,
        fresh_id: impl Fn() -> String,
    ) -> Result<AssistantMessage, UppError> {
        self.blocks.sort_by_key(|(i, _)| *i);
        let mut content = Vec::new();
        let mut calls = Vec::new();
        for (_, block) in self.blocks {
            match block {
                Block::Text(text) => content.push(ContentBlock::text(text)),
                Block::Reasoning(r) => content.push(ContentBlock::Reasoning(r)),
                Block::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    let arguments = parse_arguments(&arguments, &name, provider)?;
                    let id = if id.is_empty() { fresh_id() } else { id };
                    calls.push(ToolCall::new(id, name, arguments));
                }
            }
        }
        AssistantMessage::new(content, calls, MessageOptions { id: None, metadata })
            .map_err(|e| UppError::llm(ErrorCode::InvalidResponse, provider, e.to_string()))
    }
}

fn empty_reasoning() -> ReasoningBlock {
    ReasoningBlock {
        text: String::new(),
        signature: None,
        metadata: None,
    }
}

/// Parses a tool call's argument JSON (empty means `{}`). Text that is not JSON is kept as
/// a JSON string: the tool round answers such a call with an error result the model can
/// correct (instead of failing the whole response), and the text goes back to the provider
/// as the model wrote it ([`arguments_text`]).
///
/// # Errors
/// None today; the `Result` keeps the adapters' call sites uniform.
pub fn parse_arguments(text: &str, _tool: &str, _provider: &str) -> Result<Value, UppError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    Ok(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())))
}

/// A call's arguments as the text a provider takes: the JSON of an object, or the model's
/// own text when it was not JSON (see [`parse_arguments`]).
pub fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A call's arguments as an object for providers that take one (Anthropic's `input`,
/// Gemini's `args`): text that was not JSON becomes `{}`.
pub fn arguments_object(arguments: &Value) -> Value {
    match arguments {
        Value::String(_) => Value::Object(Default::default()),
        other => other.clone(),
    }
}
