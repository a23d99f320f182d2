//! OpenAI Responses API: the `openai-responses:MODEL` provider (`POST {base}/responses`, key
//! from `OPENAI_API_KEY`, `Authorization: Bearer`).
//!
//! # `openai:` or `openai-responses:`?
//!
//! UPP-012 says the OpenAI factory defaults to the Responses API, with an `api` option for
//! Chat Completions. Weft uses explicit prefixes instead: `openai:MODEL` is Chat Completions
//! (shared with `openai-compatible:`, see [`crate::adapters::openai_chat`]) and
//! `openai-responses:MODEL` is this adapter, so a model reference always names its wire
//! dialect. Use `openai-responses:` for reasoning models whose reasoning must be carried
//! across turns, and for OpenAI's built-in tools.
//!
//! # Mapping
//!
//! | UPP | Responses API |
//! |---|---|
//! | `system` | `instructions` |
//! | user text | `{role: "user", content: "…"}` (one text block) or `input_text` / `input_image` / `input_file` parts |
//! | assistant reasoning | the `reasoning` item exactly as received (`id`, `summary`, `encrypted_content`, …), kept in `ReasoningBlock.metadata["openai-responses"]` |
//! | assistant text | `{role: "assistant", content: "…"}` |
//! | assistant tool calls | `function_call` items (`call_id`, `name`, `arguments`, and the item `id` from `metadata["openai-responses"].function_call_ids`) |
//! | tool results | `function_call_output` items |
//! | `tools` | `{type: "function", name, description, parameters}` plus every key of `Tool.metadata["openai-responses"]` (e.g. `strict`) |
//! | `params.tools` | built-in tools (`web_search`, `file_search`, `code_interpreter`, `image_generation`, …), appended |
//! | `params.include` | appended; ask for `["reasoning.encrypted_content"]` to carry reasoning with `store: false` |
//! | `structure` | `text.format = {type: "json_schema", name: "response", schema, strict: true}` |
//!
//! Every reasoning item received is sent back on later requests, with its encrypted content
//! when the API returned it. Built-in tool items (`web_search_call`, …) are kept in
//! `metadata["openai-responses"].extra_items` and sent back; generated images become
//! [`crate::ImageBlock`]s.
//!
//! # Usage
//!
//! `inputTokens` is `input_tokens`, which already counts cached tokens; `cacheReadTokens` is
//! `input_tokens_details.cached_tokens`. Output tokens include reasoning tokens.
//!
//! # Stop reasons and errors
//!
//! `completed` → `tool_use` when the output has function calls, else `end_turn`; `incomplete`
//! → `max_tokens` / `content_filter` by `incomplete_details.reason`. HTTP errors go through
//! [`crate::http`]; `response.failed` and `error` events in a stream map by their `code`
//! (`rate_limit_exceeded`, `context_length_exceeded`, `server_error`, …).

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
pub const NAME: &str = "openai-responses";
/// The default base URL.
pub const BASE_URL: &str = "https://api.openai.com/v1";
/// Environment variables holding the key.
pub const KEY_ENV: &[&str] = &["OPENAI_API_KEY"];

const CAPABILITIES: LlmCapabilities = LlmCapabilities {
    streaming: true,
    tools: true,
    structured_output: true,
    image_input: true,
    document_input: true,
    video_input: false,
    audio_input: false,
};

/// Parameters of the Responses API that Weft passes through in `params` (UPP-195). Every
/// field is optional; unknown keys pass through as well.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct OpenAiResponsesParams {
    /// Most output tokens, reasoning included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Reasoning options, e.g. `{"effort": "low", "summary": "detailed"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Value>,
    /// Extra output, e.g. `["reasoning.encrypted_content"]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// Whether OpenAI stores the response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    /// Tool choice (`"auto"`, `"required"`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Built-in tools, appended after the function tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    /// Whether several function calls may come in one response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Continue from a stored response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
}

/// A model on the Responses API.
#[derive(Debug)]
pub struct ResponsesModel {
    model_id: String,
}

impl ResponsesModel {
    async fn http_request(
        &self,
        request: &LlmRequest,
        stream: bool,
    ) -> Result<reqwest::Response, UppError> {
        let url = format!(
            "{}/responses",
            driver::base_url(request.config.base_url.as_deref(), BASE_URL)
        );
        let key = resolve_api_key(&request.config, KEY_ENV, NAME).await?;
        let body = convert::request_body(&self.model_id, request, stream)?;
        let body = encode_body(&body, NAME, Modality::Llm)?;
        let mut headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("authorization".to_owned(), format!("Bearer {key}")),
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

impl LlmModel for ResponsesModel {
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
            convert::decode_response(&body)
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

/// Decodes a complete recorded Responses API SSE body offline: the stream events and the final
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

/// Decodes a non-streaming Responses API body offline.
///
/// # Errors
/// `INVALID_RESPONSE` when the body is not a `response` object; the mapped code when it carries an error.
pub fn decode_response(body: &Value) -> Result<LlmResponse, UppError> {
    convert::decode_response(body)
}

/// The `openai-responses` provider.
pub fn provider() -> Arc<Provider> {
    Arc::new(Provider::new(NAME, env!("CARGO_PKG_VERSION")).with_llm(
        |model_id: &str, _options: &Value| -> Result<Arc<dyn LlmModel>, UppError> {
            Ok(Arc::new(ResponsesModel {
                model_id: model_id.to_owned(),
            }))
        },
    ))
}

/// Helper constructors for the Responses API's built-in tools (§10.9), to put in
/// `params.tools`.
///
/// # Examples
///
/// ```
/// use weft_provider::adapters::openai_responses::tools;
///
/// assert_eq!(tools::web_search()["type"], "web_search");
/// assert_eq!(tools::file_search(&["vs_1"])["vector_store_ids"][0], "vs_1");
/// ```
pub mod tools {
    use serde_json::{Value, json};

    /// Web search.
    pub fn web_search() -> Value {
        json!({"type": "web_search"})
    }

    /// File search over vector stores.
    pub fn file_search(vector_store_ids: &[&str]) -> Value {
        json!({"type": "file_search", "vector_store_ids": vector_store_ids})
    }

    /// The code interpreter in an automatic container.
    pub fn code_interpreter() -> Value {
        json!({"type": "code_interpreter", "container": {"type": "auto"}})
    }

    /// Image generation; the images come back as image blocks.
    pub fn image_generation() -> Value {
        json!({"type": "image_generation"})
    }
}
