//! OpenAI Chat Completions: the `openai:` provider (api.openai.com) and the
//! `openai-compatible:` provider (Ollama, llama.cpp server, vLLM, groq-style servers).
//!
//! Both speak one dialect: `POST {base}/chat/completions`, streaming as SSE chunks ending in
//! `data: [DONE]` with `stream_options.include_usage` so usage arrives in the last chunk.
//!
//! | reference | base URL | key |
//! |---|---|---|
//! | `openai:MODEL` | `https://api.openai.com/v1` | `OPENAI_API_KEY` (required) |
//! | `openai-compatible:MODEL` | `--base-url` or `WEFT_OPENAI_COMPATIBLE_BASE_URL` | `WEFT_OPENAI_COMPATIBLE_API_KEY` (optional; never `OPENAI_API_KEY`, which must not reach a server the user names) |
//!
//! Vendor fields that UPP has no place for (`system_fingerprint`, `service_tier`, Gemini's
//! `extra_content.google.thought_signature`, …) are kept in `metadata.{provider}`;
//! `extra_content` is sent back on later requests.

mod convert;
mod finish_reason;
mod stream;

use std::sync::Arc;

use serde_json::Value;

use crate::adapters::driver::{decode_sse_chunks, llm_stream, read_json};
use crate::config::resolve_api_key;
use crate::error::{ErrorCode, Modality, UppError};
use crate::http::{HttpRequest, send};
use crate::provider::{
    LlmCapabilities, LlmModel, LlmRequest, LlmResponse, LlmStream, LlmStreamPart, Provider,
};
use crate::tool::BoxFuture;

/// Reference prefix of the OpenAI Chat Completions provider.
pub const OPENAI: &str = "openai";
/// Reference prefix of the OpenAI-compatible provider.
pub const COMPATIBLE: &str = "openai-compatible";
/// Environment variable with the compatible server's base URL.
pub const COMPATIBLE_BASE_URL_ENV: &str = "WEFT_OPENAI_COMPATIBLE_BASE_URL";

const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

const CAPABILITIES: LlmCapabilities = LlmCapabilities {
    streaming: true,
    tools: true,
    structured_output: true,
    image_input: true,
    document_input: true,
    video_input: false,
    audio_input: true,
};

/// A model speaking Chat Completions.
#[derive(Debug)]
pub struct ChatModel {
    provider: &'static str,
    model_id: String,
    default_base_url: Option<&'static str>,
    key_env: &'static [&'static str],
    key_required: bool,
}

impl ChatModel {
    fn base_url(&self, request: &LlmRequest) -> Result<String, UppError> {
        let configured = request.config.base_url.clone().or_else(|| {
            (self.provider == COMPATIBLE)
                .then(|| std::env::var(COMPATIBLE_BASE_URL_ENV).ok())
                .flatten()
                .filter(|v| !v.trim().is_empty())
        });
        configured
            .or_else(|| self.default_base_url.map(str::to_owned))
            .map(|url| url.trim_end_matches('/').to_owned())
            .ok_or_else(|| {
                UppError::llm(
                    ErrorCode::InvalidRequest,
                    self.provider,
                    format!("{COMPATIBLE} needs a base URL: pass --base-url or set {COMPATIBLE_BASE_URL_ENV} (e.g. http://127.0.0.1:11434/v1 for Ollama)"),
                )
            })
    }

    async fn http_request(
        &self,
        request: &LlmRequest,
        stream: bool,
    ) -> Result<reqwest::Response, UppError> {
        let url = format!("{}/chat/completions", self.base_url(request)?);
        let key = if self.key_required || request.config.api_key.is_some() {
            Some(resolve_api_key(&request.config, self.key_env, self.provider).await?)
        } else {
            self.key_env
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|k| !k.trim().is_empty()))
        };
        let body = convert::request_body(&self.model_id, request, self.provider, stream)?;
        let body = serde_json::to_vec(&body).map_err(|e| {
            UppError::llm(
                ErrorCode::InvalidRequest,
                self.provider,
                format!("cannot encode the request: {e}"),
            )
        })?;
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        if stream {
            headers.push(("accept".to_owned(), "text/event-stream".to_owned()));
        }
        if let Some(key) = &key {
            headers.push(("authorization".to_owned(), format!("Bearer {key}")));
        }
        let http = HttpRequest {
            provider: self.provider,
            modality: Modality::Llm,
            method: reqwest::Method::POST,
            url,
            headers,
            body: Some(body),
            api_key: key.as_deref(),
        };
        send(&http, &request.config, &request.signal).await
    }
}

impl LlmModel for ChatModel {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn provider(&self) -> &str {
        self.provider
    }

    fn capabilities(&self) -> LlmCapabilities {
        CAPABILITIES
    }

    fn complete(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmResponse, UppError>> {
        Box::pin(async move {
            let response = self.http_request(&request, false).await?;
            let body = read_json(response, self.provider, Modality::Llm, &request.signal).await?;
            convert::decode_response(&body, self.provider)
        })
    }

    fn stream(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmStream, UppError>> {
        Box::pin(async move {
            let response = self.http_request(&request, true).await?;
            Ok(llm_stream(
                response,
                self.provider,
                Some(request.config.effective_idle_timeout()),
                request.signal.clone(),
                stream::ChunkDecoder::new(self.provider),
            ))
        })
    }
}

/// Decodes a complete recorded Chat Completions SSE body offline: the stream events and the
/// final response, exactly as [`LlmModel::stream`] would yield them (replay tests, fuzzing).
///
/// # Errors
/// What the live stream would report: `INVALID_RESPONSE` for a cut or garbled stream, the
/// mapped code for an error chunk.
pub fn decode_stream(body: &[u8]) -> Result<Vec<LlmStreamPart>, UppError> {
    decode_stream_chunks(&[body])
}

/// [`decode_stream`] for a body that arrived in `chunks` (split anywhere, as a network
/// delivers it): the result is the same as for the joined body.
///
/// # Errors
/// As [`decode_stream`].
pub fn decode_stream_chunks(chunks: &[&[u8]]) -> Result<Vec<LlmStreamPart>, UppError> {
    decode_sse_chunks(stream::ChunkDecoder::new(OPENAI), chunks)
}

/// Decodes a non-streaming Chat Completions response body offline.
///
/// # Errors
/// `INVALID_RESPONSE` when the body is not a `chat.completion` object; the mapped code when it
/// carries an error.
pub fn decode_response(body: &Value) -> Result<LlmResponse, UppError> {
    convert::decode_response(body, OPENAI)
}

fn bind(
    provider: &'static str,
    default_base_url: Option<&'static str>,
    key_env: &'static [&'static str],
    key_required: bool,
) -> impl Fn(&str, &Value) -> Result<Arc<dyn LlmModel>, UppError> + Send + Sync {
    move |model_id: &str, _options: &Value| {
        let model: Arc<dyn LlmModel> = Arc::new(ChatModel {
            provider,
            model_id: model_id.to_owned(),
            default_base_url,
            key_env,
            key_required,
        });
        Ok(model)
    }
}

/// The `openai` provider (Chat Completions on api.openai.com; key from `OPENAI_API_KEY`).
pub fn openai_provider() -> Arc<Provider> {
    Arc::new(
        Provider::new(OPENAI, env!("CARGO_PKG_VERSION")).with_llm(bind(
            OPENAI,
            Some(OPENAI_BASE_URL),
            &["OPENAI_API_KEY"],
            true,
        )),
    )
}

/// The `openai-compatible` provider (any Chat Completions server; base URL required; key
/// optional, from `WEFT_OPENAI_COMPATIBLE_API_KEY` only: an OpenAI key in `OPENAI_API_KEY` is
/// never sent to a server the user names).
pub fn compatible_provider() -> Arc<Provider> {
    Arc::new(
        Provider::new(COMPATIBLE, env!("CARGO_PKG_VERSION")).with_llm(bind(
            COMPATIBLE,
            None,
            &["WEFT_OPENAI_COMPATIBLE_API_KEY"],
            false,
        )),
    )
}
