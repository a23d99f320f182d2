//! OpenAI-style embeddings (`POST {base}/embeddings`) for the `openai:` provider
//! (api.openai.com, at most [`OPENAI_MAX_BATCH_SIZE`] inputs per request, key from
//! `OPENAI_API_KEY`) and the `openai-compatible:` provider (Ollama's `/v1/embeddings`,
//! llama.cpp, vLLM; base URL required, key optional).
//!
//! The body is `{model, input: [texts], ...params}`; `params` pass through unchanged
//! (`dimensions`, `encoding_format`, `user`). With `encoding_format: "base64"` the vectors come
//! back as base64 little-endian f32 and the `embedding()` core decodes them. Per-item extra
//! fields are kept as item metadata, the response's `model`, `object` and `usage` as response
//! metadata, under the provider's namespace.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::adapters::driver::{self, encode_body, read_json, with_modality};
use crate::config::resolve_api_key;
use crate::embedding::{
    EmbeddingHandler, EmbeddingInput, EmbeddingModel, EmbeddingRequest, EmbeddingResponse,
    EmbeddingUsage, EmbeddingVector, VectorData,
};
use crate::error::{ErrorCode, Modality, UppError};
use crate::http::{HttpRequest, send};
use crate::tool::BoxFuture;

/// Most inputs in one OpenAI `/embeddings` request.
pub const OPENAI_MAX_BATCH_SIZE: usize = 2048;
/// Inputs per request for OpenAI-compatible servers (Ollama accepts any list; keep requests modest).
pub const COMPATIBLE_MAX_BATCH_SIZE: usize = 256;
/// The compatible server's base URL, as for its Chat Completions (`WEFT_OPENAI_COMPATIBLE_BASE_URL`).
pub const COMPATIBLE_BASE_URL_ENV: &str = "WEFT_OPENAI_COMPATIBLE_BASE_URL";

const OPENAI: &str = "openai";
const COMPATIBLE: &str = "openai-compatible";
const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// An embedding model on an OpenAI-style `/embeddings` endpoint.
#[derive(Debug)]
pub struct OpenAiEmbeddingModel {
    provider: &'static str,
    model_id: String,
    max_batch_size: usize,
    key_env: &'static [&'static str],
    key_required: bool,
}

fn error(code: ErrorCode, provider: &str, message: impl Into<String>) -> UppError {
    UppError::new(code, message, provider, Modality::Embedding)
}

impl OpenAiEmbeddingModel {
    fn url(&self, request: &EmbeddingRequest) -> Result<String, UppError> {
        let configured = request.config.base_url.clone().or_else(|| {
            (self.provider == COMPATIBLE)
                .then(|| std::env::var(COMPATIBLE_BASE_URL_ENV).ok())
                .flatten()
        });
        let base = match (configured, self.provider) {
            (Some(url), _) => driver::base_url(Some(&url), OPENAI_BASE_URL),
            (None, OPENAI) => OPENAI_BASE_URL.to_owned(),
            (None, _) => {
                return Err(error(
                    ErrorCode::InvalidRequest,
                    self.provider,
                    format!(
                        "{COMPATIBLE} needs a base URL: set config.base_url or {COMPATIBLE_BASE_URL_ENV} (e.g. http://127.0.0.1:11434/v1 for Ollama)"
                    ),
                ));
            }
        };
        Ok(format!("{base}/embeddings"))
    }

    async fn run(&self, request: EmbeddingRequest) -> Result<EmbeddingResponse, UppError> {
        let mut texts = Vec::with_capacity(request.inputs.len());
        for input in &request.inputs {
            match input {
                EmbeddingInput::Text(text) => texts.push(json!(text)),
                EmbeddingInput::Image(_) => {
                    return Err(error(
                        ErrorCode::InvalidRequest,
                        self.provider,
                        "this embeddings endpoint takes text only",
                    ));
                }
            }
        }
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model_id));
        body.insert("input".into(), Value::Array(texts));
        driver::merge_params(&mut body, request.params.as_ref(), &[], &[]);
        let url = self.url(&request)?;
        let key = if self.key_required || request.config.api_key.is_some() {
            Some(
                resolve_api_key(&request.config, self.key_env, self.provider)
                    .await
                    .map_err(|e| with_modality(e, Modality::Embedding))?,
            )
        } else {
            self.key_env
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|k| !k.trim().is_empty()))
        };
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        if let Some(key) = &key {
            headers.push(("authorization".to_owned(), format!("Bearer {key}")));
        }
        let http = HttpRequest {
            provider: self.provider,
            modality: Modality::Embedding,
            method: reqwest::Method::POST,
            url,
            headers,
            body: Some(encode_body(
                &Value::Object(body),
                self.provider,
                Modality::Embedding,
            )?),
            api_key: key.as_deref(),
        };
        let response = send(&http, &request.config, &request.signal).await?;
        let body = read_json(
            response,
            self.provider,
            Modality::Embedding,
            &request.signal,
        )
        .await?;
        decode(&body, self.provider)
    }
}

/// Decodes an OpenAI-style embeddings response.
pub(crate) fn decode(body: &Value, provider: &str) -> Result<EmbeddingResponse, UppError> {
    let invalid = |message: &str| {
        error(ErrorCode::InvalidResponse, provider, message).with_cause(body.clone())
    };
    let data = body
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("the response has no data array"))?;
    let mut embeddings = Vec::with_capacity(data.len());
    for (position, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok())
            .unwrap_or(position);
        let vector = match item.get("embedding") {
            Some(Value::String(text)) => VectorData::Base64(text.clone()),
            Some(Value::Array(values)) => {
                let floats: Option<Vec<f32>> = values
                    .iter()
                    .map(|v| v.as_f64().map(|f| f as f32))
                    .collect();
                VectorData::Floats(
                    floats.ok_or_else(|| invalid("an embedding value is not a number"))?,
                )
            }
            _ => return Err(invalid("an item has no embedding")),
        };
        let mut extra = item.as_object().cloned().unwrap_or_default();
        for key in ["embedding", "index", "object"] {
            extra.remove(key);
        }
        embeddings.push(EmbeddingVector {
            vector,
            index,
            tokens: None,
            metadata: (!extra.is_empty()).then(|| {
                let mut map = Map::new();
                map.insert(provider.to_owned(), Value::Object(extra));
                map
            }),
        });
    }
    let total_tokens = body
        .pointer("/usage/total_tokens")
        .or_else(|| body.pointer("/usage/prompt_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let mut rest = body.as_object().cloned().unwrap_or_default();
    rest.remove("data");
    Ok(EmbeddingResponse {
        embeddings,
        usage: EmbeddingUsage { total_tokens },
        metadata: (!rest.is_empty()).then(|| {
            let mut map = Map::new();
            map.insert(provider.to_owned(), Value::Object(rest));
            map
        }),
    })
}

impl EmbeddingModel for OpenAiEmbeddingModel {
    fn model_id(&self) -> &str {
        &self.model_id
    }
    fn provider(&self) -> &str {
        self.provider
    }
    fn max_batch_size(&self) -> usize {
        self.max_batch_size
    }
    fn max_input_length(&self) -> Option<usize> {
        (self.provider == OPENAI).then_some(8192)
    }
    fn dimensions(&self) -> Option<usize> {
        None
    }
    fn supported_inputs(&self) -> &[&'static str] {
        &["text"]
    }
    fn embed(
        &self,
        request: EmbeddingRequest,
    ) -> BoxFuture<'_, Result<EmbeddingResponse, UppError>> {
        Box::pin(self.run(request))
    }
}

fn handler(
    provider: &'static str,
    max_batch_size: usize,
    key_env: &'static [&'static str],
    key_required: bool,
) -> impl EmbeddingHandler {
    move |model_id: &str, _options: &Value| -> Result<Arc<dyn EmbeddingModel>, UppError> {
        Ok(Arc::new(OpenAiEmbeddingModel {
            provider,
            model_id: model_id.to_owned(),
            max_batch_size,
            key_env,
            key_required,
        }))
    }
}

/// The embedding handler of the `openai` provider.
pub fn openai_handler() -> impl EmbeddingHandler {
    handler(OPENAI, OPENAI_MAX_BATCH_SIZE, &["OPENAI_API_KEY"], true)
}

/// The embedding handler of the `openai-compatible` provider.
pub fn compatible_handler() -> impl EmbeddingHandler {
    handler(
        COMPATIBLE,
        COMPATIBLE_MAX_BATCH_SIZE,
        &["WEFT_OPENAI_COMPATIBLE_API_KEY"],
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_never_panics() {
        for body in [
            json!(null),
            json!({"data": 1}),
            json!({"data": [{"embedding": [1, "x"]}]}),
            json!({"data": [{}]}),
        ] {
            assert!(decode(&body, "openai").is_err());
        }
    }
}
