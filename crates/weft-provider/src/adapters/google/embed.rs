//! Gemini embeddings: one `batchEmbedContents` request per batch (at most
//! [`MAX_BATCH_SIZE`] inputs).
//!
//! Each input becomes `{model, content: {parts: [{text}]}}` plus every key of `params`
//! (`taskType`, `title`, `outputDimensionality`); without a `taskType` in `params`, the input
//! type maps to `RETRIEVAL_DOCUMENT` / `RETRIEVAL_QUERY`. The response's other top-level fields
//! are kept as response metadata.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::adapters::driver::{self, encode_body, read_json, with_modality};
use crate::config::resolve_api_key;
use crate::embedding::{
    EmbeddingHandler, EmbeddingInput, EmbeddingInputType, EmbeddingModel, EmbeddingRequest,
    EmbeddingResponse, EmbeddingUsage, EmbeddingVector, VectorData,
};
use crate::error::{ErrorCode, Modality, UppError};
use crate::http::{HttpRequest, send};
use crate::tool::BoxFuture;

use super::{BASE_URL, KEY_ENV, NAME, model_path};

/// Most inputs in one `batchEmbedContents` request.
pub const MAX_BATCH_SIZE: usize = 100;

/// A Gemini embedding model.
#[derive(Debug)]
pub struct GeminiEmbeddingModel {
    model_id: String,
}

fn invalid_response(message: &str, body: &Value) -> UppError {
    UppError::new(
        ErrorCode::InvalidResponse,
        message,
        NAME,
        Modality::Embedding,
    )
    .with_cause(body.clone())
}

impl GeminiEmbeddingModel {
    async fn run(&self, request: EmbeddingRequest) -> Result<EmbeddingResponse, UppError> {
        let model = model_path(&self.model_id);
        let mut items = Vec::with_capacity(request.inputs.len());
        for input in &request.inputs {
            let EmbeddingInput::Text(text) = input else {
                return Err(UppError::new(
                    ErrorCode::InvalidRequest,
                    "Gemini embeddings take text only",
                    NAME,
                    Modality::Embedding,
                ));
            };
            let mut item = Map::new();
            item.insert("model".into(), json!(model));
            item.insert("content".into(), json!({"parts": [{"text": text}]}));
            if let Some(kind) = request.input_type {
                let task = match kind {
                    EmbeddingInputType::Document => "RETRIEVAL_DOCUMENT",
                    EmbeddingInputType::Query => "RETRIEVAL_QUERY",
                };
                item.insert("taskType".into(), json!(task));
            }
            if let Some(params) = &request.params {
                for (key, value) in params {
                    item.insert(key.clone(), value.clone());
                }
            }
            items.push(Value::Object(item));
        }
        let url = format!(
            "{}/{model}:batchEmbedContents",
            driver::base_url(request.config.base_url.as_deref(), BASE_URL)
        );
        let key = resolve_api_key(&request.config, KEY_ENV, NAME)
            .await
            .map_err(|e| with_modality(e, Modality::Embedding))?;
        let body = encode_body(&json!({ "requests": items }), NAME, Modality::Embedding)?;
        let http = HttpRequest {
            provider: NAME,
            modality: Modality::Embedding,
            method: reqwest::Method::POST,
            url,
            headers: vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("x-goog-api-key".to_owned(), key.clone()),
            ],
            body: Some(body),
            api_key: Some(&key),
        };
        let response = send(&http, &request.config, &request.signal)
            .await
            .map_err(super::invalid_key_is_authentication)?;
        let body = read_json(response, NAME, Modality::Embedding, &request.signal).await?;
        decode(&body)
    }
}

/// Decodes a `batchEmbedContents` response.
pub(crate) fn decode(body: &Value) -> Result<EmbeddingResponse, UppError> {
    let list = body
        .get("embeddings")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid_response("the response has no embeddings", body))?;
    let mut embeddings = Vec::with_capacity(list.len());
    for (index, item) in list.iter().enumerate() {
        let values = item
            .get("values")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid_response("an embedding has no values", body))?;
        let vector: Option<Vec<f32>> = values
            .iter()
            .map(|v| v.as_f64().map(|f| f as f32))
            .collect();
        let vector =
            vector.ok_or_else(|| invalid_response("an embedding value is not a number", body))?;
        let mut extra = item.as_object().cloned().unwrap_or_default();
        extra.remove("values");
        let tokens = extra
            .pointer_u64("/statistics/tokenCount")
            .or_else(|| extra.pointer_u64("/statistics/token_count"));
        embeddings.push(EmbeddingVector {
            vector: VectorData::Floats(vector),
            index,
            tokens,
            metadata: (!extra.is_empty()).then(|| {
                let mut map = Map::new();
                map.insert(NAME.into(), Value::Object(extra));
                map
            }),
        });
    }
    let mut rest = body.as_object().cloned().unwrap_or_default();
    rest.remove("embeddings");
    let total_tokens = rest
        .get("usageMetadata")
        .and_then(|u| {
            u.get("promptTokenCount")
                .or_else(|| u.get("totalTokenCount"))
        })
        .and_then(Value::as_u64)
        .unwrap_or_else(|| embeddings.iter().filter_map(|e| e.tokens).sum());
    Ok(EmbeddingResponse {
        embeddings,
        usage: EmbeddingUsage { total_tokens },
        metadata: (!rest.is_empty()).then(|| {
            let mut map = Map::new();
            map.insert(NAME.into(), Value::Object(rest));
            map
        }),
    })
}

trait PointerU64 {
    fn pointer_u64(&self, pointer: &str) -> Option<u64>;
}

impl PointerU64 for Map<String, Value> {
    fn pointer_u64(&self, pointer: &str) -> Option<u64> {
        let mut parts = pointer.trim_start_matches('/').splitn(2, '/');
        let first = self.get(parts.next()?)?;
        match parts.next() {
            Some(rest) => first.pointer(&format!("/{rest}"))?.as_u64(),
            None => first.as_u64(),
        }
    }
}

impl EmbeddingModel for GeminiEmbeddingModel {
    fn model_id(&self) -> &str {
        &self.model_id
    }
    fn provider(&self) -> &str {
        NAME
    }
    fn max_batch_size(&self) -> usize {
        MAX_BATCH_SIZE
    }
    fn max_input_length(&self) -> Option<usize> {
        Some(2048)
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

/// The embedding handler of the `google` provider.
pub(crate) fn handler() -> impl EmbeddingHandler {
    |model_id: &str, _options: &Value| -> Result<Arc<dyn EmbeddingModel>, UppError> {
        Ok(Arc::new(GeminiEmbeddingModel {
            model_id: model_id.to_owned(),
        }))
    }
}
