//! Shared helpers of the adapter replay tests (`anthropic.rs`, `openai_responses.rs`,
//! `google.rs`, `openai.rs`, `embeddings.rs`): bind a model against the local replay server,
//! send one request (complete or stream), and compare request bodies with recorded ones.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use weft_provider::{
    ContentBlock, LinearBackoff, LlmModel, LlmRequest, LlmResponse, LlmStreamPart, Message,
    NoRetry, ProviderConfig, ProviderRegistry, StreamEventType, Tool, ToolChoice, ToolResult,
    ToolResultMessage, UppError,
};
use weft_testkit::{Interaction, ReplayServer, cassette_path, load_cassette};

/// A fake key, so no environment variable is needed.
pub const KEY: &str = "test-key-0123456789abcdef";

/// The interactions of a cassette under `cassettes/`.
pub fn cassette(relative: &str) -> Vec<Interaction> {
    load_cassette(&cassette_path(relative)).expect("cassette")
}

/// Binds `reference` (`PROVIDER:MODEL`) through the builtin registry.
pub fn bind(reference: &str) -> Arc<dyn LlmModel> {
    let reference = ProviderRegistry::with_builtins()
        .resolve(reference)
        .unwrap();
    reference
        .provider
        .llm_handler()
        .unwrap()
        .bind(&reference.model_id, &Value::Null)
        .unwrap()
}

/// A config pointing at `server` (`base_path` appended, e.g. `/v1`), with a fake key and fast
/// retries.
pub fn config(server: &ReplayServer, base_path: &str) -> ProviderConfig {
    ProviderConfig::default()
        .base_url(format!("{}{base_path}", server.url()))
        .api_key(KEY)
        .retry_strategy(LinearBackoff {
            max_attempts: 3,
            delay: Duration::from_millis(5),
        })
}

/// Like [`config`] but never retrying.
pub fn config_no_retry(server: &ReplayServer, base_path: &str) -> ProviderConfig {
    config(server, base_path).retry_strategy(NoRetry)
}

/// One request's inputs.
#[derive(Debug, Clone, Default)]
pub struct Call {
    /// History plus input.
    pub messages: Vec<Message>,
    /// System prompt.
    pub system: Option<String>,
    /// Vendor params.
    pub params: Option<Map<String, Value>>,
    /// Function tools.
    pub tools: Vec<Tool>,
    /// Structured output schema.
    pub structure: Option<Value>,
    /// The typed tool choice.
    pub tool_choice: ToolChoice,
}

impl Call {
    pub fn request(&self, config: ProviderConfig) -> LlmRequest {
        LlmRequest {
            messages: Arc::new(self.messages.iter().cloned().map(Arc::new).collect()),
            system: self.system.clone(),
            params: self.params.clone(),
            tools: self.tools.clone().into(),
            tool_choice: self.tool_choice.clone(),
            structure: self.structure.clone(),
            signal: CancellationToken::new(),
            config: Arc::new(config),
        }
    }
}

/// `params` from a JSON object.
pub fn params(value: Value) -> Option<Map<String, Value>> {
    value.as_object().cloned()
}

/// A tool that is never run (the tests drive one request at a time).
pub fn tool(name: &str, description: &str, parameters: Value) -> Tool {
    Tool::new(
        name,
        description,
        parameters,
        |_args: Value, _ctx| async move { Ok(Value::Null) },
    )
}

/// A tool-result message answering `calls` in order with `answers`.
pub fn results(calls: &[weft_provider::ToolCall], answers: &[(&str, bool)]) -> Message {
    assert_eq!(calls.len(), answers.len(), "one answer per call");
    Message::ToolResult(ToolResultMessage::new(
        calls
            .iter()
            .zip(answers)
            .map(|(call, (answer, is_error))| ToolResult {
                tool_call_id: call.tool_call_id.clone(),
                result: Value::String((*answer).to_owned()),
                is_error: *is_error,
            })
            .collect(),
    ))
}

/// Every part of one streamed request, or the first error.
pub async fn stream_parts(
    model: &dyn LlmModel,
    request: LlmRequest,
) -> Result<Vec<LlmStreamPart>, UppError> {
    let mut stream = model.stream(request).await?;
    let mut parts = Vec::new();
    while let Some(part) = stream.next().await {
        parts.push(part?);
    }
    Ok(parts)
}

/// The final response of a list of parts, after checking the stream's shape: one response,
/// last; `message_start` first and `message_stop` right before the response; every block
/// started before its deltas and stopped once; text and reasoning deltas adding up to the
/// response's blocks.
pub fn check_stream(parts: &[LlmStreamPart]) -> LlmResponse {
    let responses = parts
        .iter()
        .filter(|p| matches!(p, LlmStreamPart::Response(_)))
        .count();
    assert_eq!(responses, 1, "exactly one response");
    let Some(LlmStreamPart::Response(response)) = parts.last() else {
        panic!("the response is not last")
    };
    let events: Vec<_> = parts
        .iter()
        .filter_map(|p| match p {
            LlmStreamPart::Event(e) => Some(e),
            LlmStreamPart::Response(_) => None,
        })
        .collect();
    assert_eq!(
        events.first().map(|e| e.event_type),
        Some(StreamEventType::MessageStart)
    );
    assert_eq!(
        events.last().map(|e| e.event_type),
        Some(StreamEventType::MessageStop)
    );
    let mut open = std::collections::BTreeSet::new();
    let mut closed = std::collections::BTreeSet::new();
    let mut text = String::new();
    let mut reasoning = String::new();
    for event in &events {
        match event.event_type {
            StreamEventType::ContentBlockStart => assert!(
                open.insert(event.index),
                "block {} started twice",
                event.index
            ),
            StreamEventType::ContentBlockStop => {
                assert!(
                    open.contains(&event.index),
                    "block {} stopped before start",
                    event.index
                );
                assert!(
                    closed.insert(event.index),
                    "block {} stopped twice",
                    event.index
                );
            }
            StreamEventType::TextDelta
            | StreamEventType::ReasoningDelta
            | StreamEventType::ToolCallDelta => {
                assert!(
                    open.contains(&event.index) && !closed.contains(&event.index),
                    "delta outside its block {}",
                    event.index
                );
                let delta = event.delta.text.clone().unwrap_or_default();
                if event.event_type == StreamEventType::TextDelta {
                    text.push_str(&delta);
                } else if event.event_type == StreamEventType::ReasoningDelta {
                    reasoning.push_str(&delta);
                }
            }
            _ => {}
        }
    }
    assert_eq!(open, closed, "every block stopped");
    let want_text: String = response
        .message
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect();
    assert_eq!(text, want_text, "text deltas add up to the text");
    let want_reasoning: String = response
        .message
        .reasoning()
        .map(|r| r.text.as_str())
        .collect();
    assert_eq!(
        reasoning, want_reasoning,
        "reasoning deltas add up to the reasoning"
    );
    response.clone()
}

/// Removes each JSON pointer from `value` (missing ones are ignored).
pub fn strip(mut value: Value, pointers: &[&str]) -> Value {
    for pointer in pointers {
        let (parent, key) = pointer.rsplit_once('/').expect("pointer");
        match value.pointer_mut(parent) {
            Some(Value::Object(map)) => {
                map.remove(key);
            }
            Some(Value::Array(items)) => {
                if let Ok(index) = key.parse::<usize>()
                    && index < items.len()
                {
                    items.remove(index);
                }
            }
            _ => {}
        }
    }
    value
}

/// Asserts two JSON bodies are equal, printing both on failure.
#[track_caller]
pub fn assert_same_body(sent: &Value, recorded: &Value) {
    if sent != recorded {
        panic!(
            "request body differs from the recording\n--- sent ---\n{}\n--- recorded ---\n{}",
            serde_json::to_string_pretty(sent).unwrap(),
            serde_json::to_string_pretty(recorded).unwrap()
        );
    }
}

/// Chops a recorded SSE body at every position and feeds garbage: the decoder must return
/// errors, never panic.
pub fn fuzz_decoder(body: &str, decode: impl Fn(&[u8]) -> Result<Vec<LlmStreamPart>, UppError>) {
    let bytes = body.as_bytes();
    let step = (bytes.len() / 200).max(1);
    let mut cut = 0;
    while cut < bytes.len() {
        let _ = decode(&bytes[..cut]);
        cut += step;
    }
    let garbled: Vec<u8> = bytes
        .iter()
        .enumerate()
        .map(|(i, b)| if i % 37 == 0 { b'}' } else { *b })
        .collect();
    let _ = decode(&garbled);
    let _ = decode(b"data: {\"type\":\"\xff\"}\n\n");
    let _ = decode(b"data: not json\n\n");
    let _ = decode(b"data: []\n\ndata: 1\n\ndata: null\n\n");
}
