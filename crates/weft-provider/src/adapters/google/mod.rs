//! Google Gemini API: the `google:MODEL` provider (`POST {base}/models/MODEL:generateContent`,
//! `:streamGenerateContent?alt=sse` for streams, `:batchEmbedContents` for embeddings; key from
//! `GEMINI_API_KEY` or `GOOGLE_API_KEY`, sent as `x-goog-api-key`).
//!
//! # Mapping
//!
//! | UPP | Gemini |
//! |---|---|
//! | `system` | `systemInstruction.parts[0].text` |
//! | user text / image / document / audio / video / binary | `text`, `inlineData` (base64) or `fileData` (URL) parts |
//! | assistant reasoning | `{text, thought: true, thoughtSignature}` parts; only reasoning that came from Gemini (metadata `google`) is sent back |
//! | assistant text | `text` parts, with the `thoughtSignature` each had (`metadata.google.textSignatures`, keyed by the text block's ordinal) |
//! | assistant tool calls | `functionCall` parts (`id`, `name`, `args`) with their `thoughtSignature` (`metadata.google.functionCallSignatures`, keyed by call id) |
//! | tool results | `functionResponse` parts `{id, name, response: {return_value}}`, or `{error}` when `isError` |
//! | `tools` | one `functionDeclarations` tool; each declaration `{name, description, parametersJsonSchema}` plus `Tool.metadata.google` keys |
//! | `params.tools` | native tools (`googleSearch`, `codeExecution`, `urlContext`, …), appended |
//! | `structure` | `generationConfig.responseMimeType = "application/json"` + `responseJsonSchema` (merged with `params.generationConfig`) |
//!
//! Every `thoughtSignature` (on thought, text and function-call parts) is sent back byte for
//! byte on the part it came with. Gemini function calls usually have no id; Weft makes one
//! (`call_…`) and sends it back in `functionCall.id` and `functionResponse.id`.
//!
//! # Usage
//!
//! `inputTokens` = `promptTokenCount` (which includes cached content) +
//! `toolUsePromptTokenCount`; `cacheReadTokens` = `cachedContentTokenCount`; `outputTokens` =
//! `candidatesTokenCount` + `thoughtsTokenCount`. The raw `usageMetadata` is kept in
//! `metadata.google`.
//!
//! # Stop reasons and errors
//!
//! `STOP` → `end_turn` (`tool_use` with function calls), `MAX_TOKENS` → `max_tokens`, `SAFETY`,
//! `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII` → `content_filter`; when such a
//! reason leaves no content at all (or `promptFeedback.blockReason` blocks the prompt) the
//! request fails with `CONTENT_FILTERED`. HTTP errors go through [`crate::http`], which honours
//! the `RetryInfo.retryDelay` of a 429.

mod convert;
mod embed;
mod finish_reason;
mod partial_args;
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

pub use embed::{GeminiEmbeddingModel, MAX_BATCH_SIZE as EMBEDDING_MAX_BATCH_SIZE};

/// Reference prefix and metadata namespace.
pub const NAME: &str = "google";
/// The default base URL.
pub const BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";
/// Environment variables holding the key, in order.
pub const KEY_ENV: &[&str] = &["GEMINI_API_KEY", "GOOGLE_API_KEY"];

const CAPABILITIES: LlmCapabilities = LlmCapabilities {
    streaming: true,
    tools: true,
    structured_output: true,
    image_input: true,
    document_input: true,
    video_input: true,
    audio_input: true,
};

/// Parameters of `generateContent` that Weft passes through in `params` (UPP-195). Every field
/// is optional; unknown keys pass through as well.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoogleLlmParams {
    /// `temperature`, `maxOutputTokens`, `thinkingConfig`, `responseModalities`, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_config: Option<Value>,
    /// Safety thresholds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub safety_settings: Option<Vec<Value>>,
    /// Function calling mode, e.g. `{"functionCallingConfig": {"mode": "ANY"}}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<Value>,
    /// Native tools, appended after the function declarations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    /// A cached content name (`cachedContents/…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_content: Option<String>,
}

/// A Gemini model.
#[derive(Debug)]
pub struct GeminiModel {
    model_id: String,
}

/// The model path segment: `models/ID` unless the id already names a resource (`tunedModels/…`).
pub(crate) fn model_path(model_id: &str) -> String {
    if model_id.contains('/') {
        model_id.to_owned()
    } else {
        format!("models/{model_id}")
    }
}

impl GeminiModel {
    async fn http_request(
        &self,
        request: &LlmRequest,
        stream: bool,
    ) -> Result<reqwest::Response, UppError> {
        let method = if stream {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        };
        let url = format!(
            "{}/{}:{method}",
            driver::base_url(request.config.base_url.as_deref(), BASE_URL),
            model_path(&self.model_id)
        );
        let key = resolve_api_key(&request.config, KEY_ENV, NAME).await?;
        let body = convert::request_body(request)?;
        let body = encode_body(&body, NAME, Modality::Llm)?;
        let headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("x-goog-api-key".to_owned(), key.clone()),
        ];
        let http = HttpRequest {
            provider: NAME,
            modality: Modality::Llm,
            method: reqwest::Method::POST,
            url,
            headers,
            body: Some(body),
            api_key: Some(&key),
        };
        send(&http, &request.config, &request.signal)
            .await
            .map_err(invalid_key_is_authentication)
    }
}

/// Gemini answers a bad key with 400 `INVALID_ARGUMENT` (reason `API_KEY_INVALID`): that is an
/// authentication failure, not a malformed request.
pub(crate) fn invalid_key_is_authentication(mut error: UppError) -> UppError {
    let says_key = error
        .cause
        .as_ref()
        .is_some_and(|c| c.to_string().contains("API_KEY_INVALID"))
        || error.message.contains("API key not valid");
    if error.code == crate::error::ErrorCode::InvalidRequest && says_key {
        error.code = crate::error::ErrorCode::AuthenticationFailed;
    }
    error
}

impl LlmModel for GeminiModel {
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

/// Decodes a complete recorded `streamGenerateContent` SSE body offline: the stream events and the final
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

/// Decodes a non-streaming `generateContent` body offline.
///
/// # Errors
/// `INVALID_RESPONSE` for a body without candidates, `CONTENT_FILTERED` when blocked.
pub fn decode_response(body: &Value) -> Result<LlmResponse, UppError> {
    convert::decode_response(body)
}

/// The `google` provider (LLM and embeddings).
pub fn provider() -> Arc<Provider> {
    Arc::new(
        Provider::new(NAME, env!("CARGO_PKG_VERSION"))
            .with_llm(
                |model_id: &str, _options: &Value| -> Result<Arc<dyn LlmModel>, UppError> {
                    Ok(Arc::new(GeminiModel {
                        model_id: model_id.to_owned(),
                    }))
                },
            )
            .with_embedding(embed::handler()),
    )
}

/// Helper constructors for Gemini's native tools (§10.9), to put in `params.tools`.
///
/// # Examples
///
/// ```
/// use weft_provider::adapters::google::tools;
///
/// assert_eq!(tools::google_search(), serde_json::json!({"googleSearch": {}}));
/// ```
pub mod tools {
    use serde_json::{Value, json};

    /// Grounding with Google Search.
    pub fn google_search() -> Value {
        json!({"googleSearch": {}})
    }

    /// Code execution.
    pub fn code_execution() -> Value {
        json!({"codeExecution": {}})
    }

    /// URL context.
    pub fn url_context() -> Value {
        json!({"urlContext": {}})
    }
}
