//! Anthropic Messages API: the `anthropic:MODEL` provider (`POST {base}/messages`, key from
//! `ANTHROPIC_API_KEY`, header `anthropic-version: 2023-06-01` unless `config.api_version`
//! says otherwise; `config.headers` such as `anthropic-beta` win over both).
//!
//! # Mapping
//!
//! | UPP | Messages API |
//! |---|---|
//! | `system` | top-level `system` string (a `params.system` array with `cache_control` replaces it) |
//! | user text / image / document | `text`, `image` (base64 or URL), `document` (PDF base64 or URL, plain text) |
//! | assistant reasoning | `thinking` with its `signature`, byte for byte; `redacted_thinking` with `data` from `ReasoningBlock.metadata.anthropic` |
//! | assistant tool calls | `tool_use` blocks after the text |
//! | tool results | one user message of `tool_result` blocks (`is_error` kept) |
//! | `tools` | `{name, description, input_schema}` plus every key of `Tool.metadata.anthropic` (e.g. `cache_control`) |
//! | `params.tools` | provider-native tools (web search, code execution, …) appended after the function tools |
//! | `structure` | native structured output: `output_config.format = {type: "json_schema", schema}` (merged with `params.output_config`, e.g. `effort`) |
//! | message `metadata.anthropic.cache_control` | `cache_control` on that message's last block |
//!
//! **Structured output** uses Anthropic's native JSON-schema output rather than forcing a
//! synthetic tool: it works with extended thinking (a forced `tool_choice` does not) and the
//! reply is plain JSON text that the `llm()` core parses. Models without native structured
//! output answer 400 (`INVALID_REQUEST`).
//!
//! **`max_tokens`** is required by Anthropic. When `params` has none, Weft sends
//! [`DEFAULT_MAX_TOKENS`] (4096): the one documented exception to "no injected defaults"
//! (UPP-003), because the API rejects a request without it.
//!
//! **Reasoning** blocks are sent back only when they came from Anthropic (their metadata has
//! the `anthropic` namespace): a `thinking` block needs its signature, a `redacted_thinking`
//! block its opaque `data`. Server-side tool blocks (`server_tool_use`,
//! `web_search_tool_result`, …) are kept in `metadata.anthropic.extra_blocks` and sent back.
//!
//! # Usage
//!
//! `inputTokens` counts every input token processed: `input_tokens +
//! cache_read_input_tokens + cache_creation_input_tokens`; `cacheReadTokens` and
//! `cacheWriteTokens` are the cached subsets. The raw `usage` object (with the TTL breakdown)
//! is kept in `metadata.anthropic.usage`.
//!
//! # Stop reasons and errors
//!
//! `end_turn`, `tool_use`, `max_tokens`, `stop_sequence` map to themselves, `refusal` to
//! `content_filter`; others pass through, the original in `metadata.anthropic.stop_reason`.
//! HTTP errors go through [`crate::http`] (529 `overloaded_error` → `PROVIDER_ERROR`, retried;
//! 429 → `RATE_LIMITED`, retried after `retry-after`). An `error` event inside a stream maps by
//! its `error.type` the same way.

mod convert;
mod finish_reason;
mod stream;

use std::sync::Arc;

use serde_json::Value;

use crate::adapters::driver::{
    self, decode_sse_bytes, decode_sse_chunks, encode_body, llm_stream, read_json,
};
use crate::config::resolve_api_key;
use crate::error::{Modality, UppError};
use crate::http::{HttpRequest, send};
use crate::provider::{
    LlmCapabilities, LlmModel, LlmRequest, LlmResponse, LlmStream, LlmStreamPart, Provider,
};
use crate::tool::BoxFuture;

/// Reference prefix and metadata namespace.
pub const NAME: &str = "anthropic";
/// The default base URL.
pub const BASE_URL: &str = "https://api.anthropic.com/v1";
/// The default `anthropic-version` header.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` sent when `params` has none (the API requires the field).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;
/// Environment variables holding the key.
pub const KEY_ENV: &[&str] = &["ANTHROPIC_API_KEY"];

const CAPABILITIES: LlmCapabilities = LlmCapabilities {
    streaming: true,
    tools: true,
    structured_output: true,
    image_input: true,
    document_input: true,
    video_input: false,
    audio_input: false,
};

/// Parameters of the Messages API that Weft passes through in `params` (UPP-195). Every field
/// is optional; unknown keys pass through as well.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct AnthropicLlmParams {
    /// Most output tokens (default [`DEFAULT_MAX_TOKENS`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Top-k sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u64>,
    /// Stop sequences.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Extended thinking, e.g. `{"type": "enabled", "budget_tokens": 2048}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Value>,
    /// Tool choice, e.g. `{"type": "auto"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Provider-native tools, appended after the function tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    /// Request metadata (`user_id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Output configuration (`effort`, …), merged with the structured-output format.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_config: Option<Value>,
}

/// A model on the Messages API.
#[derive(Debug)]
pub struct AnthropicModel {
    model_id: String,
}

impl AnthropicModel {
    async fn http_request(
        &self,
        request: &LlmRequest,
        stream: bool,
    ) -> Result<reqwest::Response, UppError> {
        let url = format!(
            "{}/messages",
            driver::base_url(request.config.base_url.as_deref(), BASE_URL)
        );
        let key = resolve_api_key(&request.config, KEY_ENV, NAME).await?;
        let body = convert::request_body(&self.model_id, request, stream)?;
        let body = encode_body(&body, NAME, Modality::Llm)?;
        let version = request
            .config
            .api_version
            .clone()
            .unwrap_or_else(|| API_VERSION.to_owned());
        let mut headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("x-api-key".to_owned(), key.clone()),
            ("anthropic-version".to_owned(), version),
        ];
        if stream {
            headers.push(("accept".to_owned(), "text/event-stream".to_owned()));
        }
        let http = HttpRequest {
            provider: NAME,
            modality: Modality::Llm,
            method: reqwest::Method::POST,
            url,
            headers,
            body: Some(body),
            api_key: Some(&key),
        };
        send(&http, &request.config, &request.signal).await
    }
}

impl LlmModel for AnthropicModel {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn provider(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> LlmCapabilities {
        CAPABILITIES
    }

    fn complete(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmResponse, UppError>> {
        Box::pin(async move {
            let response = self.http_request(&request, false).await?;
            let body = read_json(response, NAME, Modality::Llm, &request.signal).await?;
            convert::decode_message(&body)
        })
    }

    fn stream(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmStream, UppError>> {
        Box::pin(async move {
            let response = self.http_request(&request, true).await?;
            Ok(llm_stream(
                response,
                NAME,
                Some(request.config.effective_idle_timeout()),
                request.signal.clone(),
                stream::EventDecoder::new(),
            ))
        })
    }
}

/// Decodes a complete recorded Messages API SSE body offline: the stream events and the final
/// response, exactly as [`LlmModel::stream`] would yield them (for replay tests and benches).
///
/// # Errors
/// What the live stream would report: `INVALID_RESPONSE` for a cut or garbled stream, the
/// mapped code for an `error` event.
pub fn decode_stream(body: &[u8]) -> Result<Vec<LlmStreamPart>, UppError> {
    decode_sse_bytes(stream::EventDecoder::new(), body)
}

/// [`decode_stream`] for a body that arrived in `chunks` (split anywhere, as a network
/// delivers it): the result is the same as for the joined body.
///
/// # Errors
/// As [`decode_stream`].
pub fn decode_stream_chunks(chunks: &[&[u8]]) -> Result<Vec<LlmStreamPart>, UppError> {
    decode_sse_chunks(stream::EventDecoder::new(), chunks)
}

/// Decodes a non-streaming Messages API response body offline.
///
/// # Errors
/// `INVALID_RESPONSE` when the body is not a `message` object.
pub fn decode_response(body: &Value) -> Result<LlmResponse, UppError> {
    convert::decode_message(body)
}

/// The `anthropic` provider.
pub fn provider() -> Arc<Provider> {
    Arc::new(Provider::new(NAME, env!("CARGO_PKG_VERSION")).with_llm(
        |model_id: &str, _options: &Value| -> Result<Arc<dyn LlmModel>, UppError> {
            Ok(Arc::new(AnthropicModel {
                model_id: model_id.to_owned(),
            }))
        },
    ))
}

/// Helper constructors for Anthropic's server-side tools (§10.9), to put in `params.tools`.
///
/// # Examples
///
/// ```
/// use weft_provider::adapters::anthropic::tools;
///
/// let search = tools::web_search(Some(3));
/// assert_eq!(search["type"], "web_search_20250305");
/// assert_eq!(search["max_uses"], 3);
/// ```
pub mod tools {
    use serde_json::{Value, json};

    /// The web search tool (`web_search_20250305`), optionally limited to `max_uses` searches.
    pub fn web_search(max_uses: Option<u32>) -> Value {
        let mut tool = json!({"type": "web_search_20250305", "name": "web_search"});
        if let (Some(max), Some(object)) = (max_uses, tool.as_object_mut()) {
            object.insert("max_uses".into(), json!(max));
        }
        tool
    }

    /// The web fetch tool (`web_fetch_20250910`; needs the `anthropic-beta:
    /// web-fetch-2025-09-10` header in `config.headers`).
    pub fn web_fetch() -> Value {
        json!({"type": "web_fetch_20250910", "name": "web_fetch"})
    }
}
