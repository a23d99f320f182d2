//! Context-window middlewares (UAP-1.0 §6.2): they shrink `ctx.state` with `with_context`
//! before the run. UAP gives no token counts; these estimate ~4 characters of JSON per token,
//! and the limits are yours to set for your model.
//!
//! **Invariant:** none of them separates an assistant message's tool calls from the tool
//! results that answer them: windows start at a user message, and pruning keeps every result
//! (only its content is replaced).

use async_trait::async_trait;
use serde_json::Value;
use weft_provider::{LlmInstance, Message, ToolResultMessage};

use super::{Middleware, MiddlewareContext};
use crate::error::AgentError;

/// Estimated tokens of a message: its JSON length / 4.
pub fn estimate_tokens(message: &Message) -> usize {
    serde_json::to_string(message).map_or(0, |s| s.len() / 4)
}

/// The first index `>= from` where a window may start: a user message, else the first
/// message that is not a tool result; `None` if there is none.
fn window_start(messages: &[Message], from: usize) -> Option<usize> {
    (from..messages.len())
        .find(|&i| messages[i].is_user())
        .or_else(|| (from..messages.len()).find(|&i| !messages[i].is_tool_result()))
}

// ----- prune -----

/// Options of [`prune_tool_outputs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneOptions {
    /// The model's context size, in tokens (default 200,000).
    pub context_limit: usize,
    /// Tokens kept free for the reply (default 16,000).
    pub output_reserve: usize,
    /// The most recent tokens never pruned (default 40,000).
    pub protect_recent: usize,
    /// What replaces a pruned output.
    pub placeholder: String,
}

impl Default for PruneOptions {
    fn default() -> Self {
        PruneOptions {
            context_limit: 200_000,
            output_reserve: 16_000,
            protect_recent: 40_000,
            placeholder: "[Output cleared - context limit]".into(),
        }
    }
}

/// Replaces old tool outputs with a placeholder when the history is over budget.
#[derive(Debug, Clone)]
pub struct PruneToolOutputs {
    options: PruneOptions,
}

/// `pruneToolOutputs` of §6.2, pattern 1.
pub fn prune_tool_outputs(options: PruneOptions) -> PruneToolOutputs {
    PruneToolOutputs { options }
}

impl PruneToolOutputs {
    /// The pruned history, or `None` when nothing changes.
    pub fn prune(&self, messages: &[Message]) -> Option<Vec<Message>> {
        let estimates: Vec<usize> = messages.iter().map(estimate_tokens).collect();
        let total: usize = estimates.iter().sum();
        let usable = self
            .options
            .context_limit
            .saturating_sub(self.options.output_reserve);
        if total <= usable {
            return None;
        }
        let placeholder = Value::String(self.options.placeholder.clone());
        let mut out = messages.to_vec();
        let mut protected = 0usize;
        let mut changed = false;
        for i in (0..out.len()).rev() {
            protected += estimates[i];
            if protected <= self.options.protect_recent {
                continue;
            }
            if let Message::ToolResult(message) = &out[i]
                && message.results.iter().any(|r| r.result != placeholder)
            {
                let mut results = message.results.clone();
                for result in &mut results {
                    result.result = placeholder.clone();
                }
                out[i] = Message::ToolResult(ToolResultMessage {
                    results,
                    ..message.clone()
                });
                changed = true;
            }
        }
        changed.then_some(out)
    }
}

#[async_trait]
impl Middleware for PruneToolOutputs {
    fn name(&self) -> &str {
        "prune-tool-outputs"
    }

    async fn before(&self, ctx: &mut MiddlewareContext) -> Result<(), AgentError> {
        if let Some(messages) = self.prune(&ctx.state.messages_vec()) {
            ctx.state = ctx.state.with_context(messages);
        }
        Ok(())
    }
}

// ----- sliding window -----

/// Keeps at most `max_messages` recent messages, starting at a user message.
#[derive(Debug, Clone, Copy)]
pub struct SlidingWindow {
    max_messages: usize,
}

/// `slidingWindow(n)` of §6.2, pattern 2.
pub fn sliding_window(max_messages: usize) -> SlidingWindow {
    SlidingWindow { max_messages }
}

impl SlidingWindow {
    /// The window, or `None` when the history already fits.
    pub fn window(&self, messages: &[Message]) -> Option<Vec<Message>> {
        if messages.len() <= self.max_messages {
            return None;
        }
        let from = messages.len() - self.max_messages;
        let start = window_start(messages, from).unwrap_or(messages.len());
        Some(messages[start..].to_vec())
    }
}

#[async_trait]
impl Middleware for SlidingWindow {
    fn name(&self) -> &str {
        "sliding-window"
    }

    async fn before(&self, ctx: &mut MiddlewareContext) -> Result<(), AgentError> {
        if ctx.state.message_count() > self.max_messages {
            let messages = ctx.state.messages_vec();
            if let Some(window) = self.window(&messages) {
                ctx.state = ctx.state.with_context(window);
            }
        }
        Ok(())
    }
}

// ----- summarize -----

/// Options of [`summarize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummarizeOptions {
    /// Summarize when the history is over this many estimated tokens (default 150,000).
    pub threshold_tokens: usize,
    /// Messages kept verbatim at the end, at least (default 10; the cut moves back to a
    /// user message).
    pub keep_recent: usize,
    /// The instruction given to the summarizer.
    pub prompt: String,
}

impl Default for SummarizeOptions {
    fn default() -> Self {
        SummarizeOptions {
            threshold_tokens: 150_000,
            keep_recent: 10,
            prompt: "Summarize this conversation, preserving key facts:".into(),
        }
    }
}

/// Replaces old history with a summary written by another LLM.
#[derive(Debug, Clone)]
pub struct Summarize {
    llm: LlmInstance,
    options: SummarizeOptions,
}

/// `summarizeOldContext.init(llm)` of §6.2, pattern 3.
pub fn summarize(llm: LlmInstance, options: SummarizeOptions) -> Summarize {
    Summarize { llm, options }
}

#[async_trait]
impl Middleware for Summarize {
    fn name(&self) -> &str {
        "summarize-context"
    }

    async fn before(&self, ctx: &mut MiddlewareContext) -> Result<(), AgentError> {
        let messages = ctx.state.messages_vec();
        let total: usize = messages.iter().map(estimate_tokens).sum();
        if total <= self.options.threshold_tokens || messages.len() <= self.options.keep_recent {
            return Ok(());
        }
        let from = messages.len() - self.options.keep_recent;
        // Move the cut back to a user message so no tool exchange is split.
        let Some(cut) = (0..=from).rev().find(|&i| messages[i].is_user()) else {
            return Ok(());
        };
        if cut == 0 {
            return Ok(());
        }
        let old: Vec<String> = messages[..cut]
            .iter()
            .filter_map(|m| serde_json::to_string(m).ok())
            .collect();
        let prompt = format!("{}\n{}", self.options.prompt, old.join("\n"));
        let turn = self
            .llm
            .generate(&[], prompt)
            .await
            .map_err(|e| AgentError::Middleware {
                name: self.name().to_owned(),
                message: e.to_string(),
            })?;
        let mut context = Vec::with_capacity(messages.len() - cut + 1);
        context.push(Message::user(format!(
            "[Previous conversation summary]\n{}",
            turn.text()
        )));
        context.extend(messages[cut..].iter().cloned());
        ctx.state = ctx.state.with_context(context);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;
    use weft_provider::{AssistantMessage, MessageOptions, ToolCall, ToolResult};

    fn exchange(i: usize) -> Vec<Message> {
        let id = format!("c{i}");
        vec![
            Message::user(format!("q{i}")),
            Message::Assistant(
                AssistantMessage::new(
                    vec![],
                    vec![ToolCall::new(&id, "t", json!({}))],
                    MessageOptions::default(),
                )
                .unwrap(),
            ),
            Message::ToolResult(ToolResultMessage::new(vec![ToolResult {
                tool_call_id: id,
                result: json!("x".repeat(400)),
                is_error: false,
            }])),
            Message::assistant(format!("a{i}")),
        ]
    }

    #[test]
    fn sliding_window_never_starts_inside_a_tool_exchange() {
        let messages: Vec<Message> = (0..5).flat_map(exchange).collect();
        for max in 1..messages.len() {
            let window = sliding_window(max).window(&messages).unwrap();
            assert!(window.len() <= max);
            if let Some(first) = window.first() {
                assert!(!first.is_tool_result());
                if max >= 4 {
                    assert!(first.is_user());
                }
            }
        }
    }

    #[test]
    fn prune_keeps_recent_and_every_result() {
        let messages: Vec<Message> = (0..20).flat_map(exchange).collect();
        let prune = prune_tool_outputs(PruneOptions {
            context_limit: 1000,
            output_reserve: 0,
            protect_recent: 500,
            ..PruneOptions::default()
        });
        let out = prune.prune(&messages).unwrap();
        assert_eq!(out.len(), messages.len());
        let last = out.last().unwrap();
        assert_eq!(last, messages.last().unwrap());
        let Message::ToolResult(first) = &out[2] else {
            panic!()
        };
        assert_eq!(
            first.results[0].result,
            json!("[Output cleared - context limit]")
        );
        let Message::ToolResult(recent) = &out[out.len() - 2] else {
            panic!()
        };
        assert_ne!(
            recent.results[0].result,
            json!("[Output cleared - context limit]")
        );
    }
}
