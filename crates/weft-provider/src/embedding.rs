//! `embedding()`: vector embeddings (UPP-1.2 §12).
//!
//! The core normalizes inputs, splits them into batches no larger than the model's
//! `max_batch_size`, decodes base64 vectors, and reassembles results in input order. A
//! provider implements one batch request ([`EmbeddingModel::embed`]).

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::ProviderConfig;
use crate::content::ImageBlock;
use crate::error::{ErrorCode, Modality, UppError};
use crate::provider::ModelReference;
use crate::tool::BoxFuture;

/// One input to embed.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbeddingInput {
    /// Text (every provider).
    Text(String),
    /// An image (only where `supported_inputs` lists `image`).
    Image(ImageBlock),
}

impl From<&str> for EmbeddingInput {
    fn from(text: &str) -> Self {
        EmbeddingInput::Text(text.to_owned())
    }
}

impl From<String> for EmbeddingInput {
    fn from(text: String) -> Self {
        EmbeddingInput::Text(text)
    }
}

/// Whether the inputs are documents to index or queries (`EmbeddingInputType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingInputType {
    /// Documents to be searched.
    Document,
    /// Search queries.
    Query,
}

/// A vector as a provider returned it.
#[derive(Debug, Clone, PartialEq)]
pub enum VectorData {
    /// Floats.
    Floats(Vec<f32>),
    /// Little-endian f32 bytes in base64 (OpenAI `encoding_format: "base64"`).
    Base64(String),
}

/// One vector of a provider response.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingVector {
    /// The vector.
    pub vector: VectorData,
    /// Position in the request's inputs.
    pub index: usize,
    /// Tokens of this input, when reported.
    pub tokens: Option<u64>,
    /// Per-item metadata (e.g. truncation).
    pub metadata: Option<serde_json::Map<String, Value>>,
}

/// One batch request to a provider.
#[derive(Debug, Clone)]
pub struct EmbeddingRequest {
    /// The inputs of this batch.
    pub inputs: Vec<EmbeddingInput>,
    /// Vendor parameters, passed through unchanged.
    pub params: Option<serde_json::Map<String, Value>>,
    /// Document or query.
    pub input_type: Option<EmbeddingInputType>,
    /// Resolved configuration.
    pub config: Arc<ProviderConfig>,
    /// Cancellation.
    pub signal: CancellationToken,
}

/// A provider's answer to one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingResponse {
    /// The vectors.
    pub embeddings: Vec<EmbeddingVector>,
    /// Total tokens.
    pub usage: EmbeddingUsage,
    /// Response-level metadata.
    pub metadata: Option<serde_json::Map<String, Value>>,
}

/// Token usage of an embedding call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddingUsage {
    /// Tokens processed.
    pub total_tokens: u64,
}

/// A model bound for embeddings (§12.6 `BoundEmbeddingModel`).
pub trait EmbeddingModel: Send + Sync + fmt::Debug {
    /// The model id.
    fn model_id(&self) -> &str;
    /// The provider name.
    fn provider(&self) -> &str;
    /// Most inputs in one request.
    fn max_batch_size(&self) -> usize;
    /// Longest input (tokens), when known.
    fn max_input_length(&self) -> Option<usize>;
    /// Vector length, when fixed.
    fn dimensions(&self) -> Option<usize>;
    /// `["text"]` or `["text", "image"]`.
    fn supported_inputs(&self) -> &[&'static str];
    /// One batch.
    fn embed(
        &self,
        request: EmbeddingRequest,
    ) -> BoxFuture<'_, Result<EmbeddingResponse, UppError>>;
}

/// The embedding handler of a provider.
pub trait EmbeddingHandler: Send + Sync {
    /// Binds `model_id`.
    ///
    /// # Errors
    /// When the id is not valid for this provider.
    fn bind(&self, model_id: &str, options: &Value) -> Result<Arc<dyn EmbeddingModel>, UppError>;
}

impl<F> EmbeddingHandler for F
where
    F: Fn(&str, &Value) -> Result<Arc<dyn EmbeddingModel>, UppError> + Send + Sync,
{
    fn bind(&self, model_id: &str, options: &Value) -> Result<Arc<dyn EmbeddingModel>, UppError> {
        self(model_id, options)
    }
}

/// One embedding of the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Embedding {
    /// The vector.
    pub vector: Vec<f32>,
    /// Its length.
    pub dimensions: usize,
    /// Input position.
    pub index: usize,
    /// Tokens of this input, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Per-item metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Map<String, Value>>,
}

/// The result of `embed` (§12.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddingResult {
    /// One per input, in input order.
    pub embeddings: Vec<Embedding>,
    /// Usage summed over batches.
    pub usage: EmbeddingUsage,
    /// Response-level metadata of every batch, in order (`{"batches": [...]}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Map<String, Value>>,
}

/// Options of `embedding()`.
#[derive(Debug, Clone)]
pub struct EmbeddingOptions {
    /// The model.
    pub model: ModelReference,
    /// Configuration.
    pub config: ProviderConfig,
    /// Vendor parameters.
    pub params: Option<serde_json::Map<String, Value>>,
}

/// Binds an embedding model (§12.1).
///
/// # Errors
/// `INVALID_REQUEST` when the provider has no embedding handler.
pub fn embedding(options: EmbeddingOptions) -> Result<EmbeddingInstance, UppError> {
    let handler = options.model.provider.embedding_handler()?;
    let model = handler.bind(&options.model.model_id, &options.model.options)?;
    let config = crate::llm::merge_config(&options.model.provider.default_config, options.config);
    Ok(EmbeddingInstance {
        model,
        config: Arc::new(config),
        params: options.params,
    })
}

/// A bound embedding model with `embed` (§12.3).
#[derive(Debug, Clone)]
pub struct EmbeddingInstance {
    model: Arc<dyn EmbeddingModel>,
    config: Arc<ProviderConfig>,
    params: Option<serde_json::Map<String, Value>>,
}

/// Options of one `embed` call.
#[derive(Debug, Clone, Default)]
pub struct EmbedOptions {
    /// Inputs per request; defaults to (and is capped at) the model's `max_batch_size`.
    pub batch_size: Option<usize>,
    /// Requests in flight at once (default 1).
    pub concurrency: Option<usize>,
    /// Document or query.
    pub input_type: Option<EmbeddingInputType>,
    /// Cancels the operation.
    pub signal: Option<CancellationToken>,
}

impl EmbeddingInstance {
    /// The bound model.
    pub fn model(&self) -> &Arc<dyn EmbeddingModel> {
        &self.model
    }

    /// The vendor parameters.
    pub fn params(&self) -> Option<&serde_json::Map<String, Value>> {
        self.params.as_ref()
    }

    /// Embeds `inputs`, in batches of at most `max_batch_size`, calling `progress` after
    /// each batch with `(completed, total)`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for image inputs the model does not take; provider errors;
    /// `CANCELLED`.
    pub async fn embed_with_progress(
        &self,
        inputs: Vec<EmbeddingInput>,
        options: EmbedOptions,
        mut progress: impl FnMut(&[Embedding], usize, usize),
    ) -> Result<EmbeddingResult, UppError> {
        let provider = self.model.provider().to_owned();
        if inputs.iter().any(|i| matches!(i, EmbeddingInput::Image(_)))
            && !self.model.supported_inputs().contains(&"image")
        {
            return Err(UppError::new(
                ErrorCode::InvalidRequest,
                format!("{provider} embeddings do not take image input"),
                &provider,
                Modality::Embedding,
            ));
        }
        let max = self.model.max_batch_size().max(1);
        let batch_size = options.batch_size.unwrap_or(max).clamp(1, max);
        let concurrency = options.concurrency.unwrap_or(1).max(1);
        let signal = options.signal.unwrap_or_default();
        let total = inputs.len();
        let batches: Vec<(usize, Vec<EmbeddingInput>)> = inputs
            .chunks(batch_size)
            .enumerate()
            .map(|(i, chunk)| (i * batch_size, chunk.to_vec()))
            .collect();
        let mut embeddings: Vec<Option<Embedding>> = vec![None; total];
        let mut usage = EmbeddingUsage::default();
        let mut batch_metadata = Vec::new();
        let mut completed = 0;
        use futures_util::StreamExt as _;
        let mut results = futures_util::stream::iter(batches.into_iter().map(|(offset, chunk)| {
            let request = EmbeddingRequest {
                inputs: chunk,
                params: self.params.clone(),
                input_type: options.input_type,
                config: self.config.clone(),
                signal: signal.child_token(),
            };
            let model = self.model.clone();
            async move { (offset, model.embed(request).await) }
        }))
        .buffered(concurrency);
        loop {
            let next = tokio::select! {
                biased;
                () = signal.cancelled() => return Err(UppError::cancelled(&provider, Modality::Embedding)),
                next = results.next() => next,
            };
            let Some((offset, response)) = next else {
                break;
            };
            let response = response?;
            usage.total_tokens += response.usage.total_tokens;
            if let Some(meta) = response.metadata {
                batch_metadata.push(Value::Object(meta));
            }
            let mut fresh = Vec::with_capacity(response.embeddings.len());
            for item in response.embeddings {
                let index = offset + item.index;
                let vector = decode_vector(item.vector, &provider)?;
                let embedding = Embedding {
                    dimensions: vector.len(),
                    vector,
                    index,
                    tokens: item.tokens,
                    metadata: item.metadata,
                };
                if let Some(slot) = embeddings.get_mut(index) {
                    fresh.push(embedding.clone());
                    *slot = Some(embedding);
                }
            }
            completed += fresh.len();
            progress(&fresh, completed, total);
        }
        let missing = embeddings.iter().position(Option::is_none);
        if let Some(index) = missing {
            return Err(UppError::new(
                ErrorCode::InvalidResponse,
                format!("{provider} returned no embedding for input {index}"),
                &provider,
                Modality::Embedding,
            ));
        }
        let metadata = (!batch_metadata.is_empty()).then(|| {
            let mut map = serde_json::Map::new();
            map.insert("batches".into(), Value::Array(batch_metadata));
            map
        });
        Ok(EmbeddingResult {
            embeddings: embeddings.into_iter().flatten().collect(),
            usage,
            metadata,
        })
    }

    /// Embeds `inputs` (one or many).
    ///
    /// # Errors
    /// As [`EmbeddingInstance::embed_with_progress`].
    pub async fn embed(
        &self,
        inputs: Vec<EmbeddingInput>,
        options: EmbedOptions,
    ) -> Result<EmbeddingResult, UppError> {
        self.embed_with_progress(inputs, options, |_, _, _| {})
            .await
    }
}

fn decode_vector(data: VectorData, provider: &str) -> Result<Vec<f32>, UppError> {
    match data {
        VectorData::Floats(v) => Ok(v),
        VectorData::Base64(text) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|e| {
                    UppError::new(
                        ErrorCode::InvalidResponse,
                        format!("invalid base64 vector: {e}"),
                        provider,
                        Modality::Embedding,
                    )
                })?;
            if bytes.len() % 4 != 0 {
                return Err(UppError::new(
                    ErrorCode::InvalidResponse,
                    "a base64 vector's length is not a multiple of 4 bytes",
                    provider,
                    Modality::Embedding,
                ));
            }
            Ok(bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_vectors_decode_to_floats() {
        let bytes: Vec<u8> = [1.0f32, -2.5]
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect();
        let text = base64::engine::general_purpose::STANDARD.encode(bytes);
        assert_eq!(
            decode_vector(VectorData::Base64(text), "p").ok(),
            Some(vec![1.0, -2.5])
        );
        assert!(decode_vector(VectorData::Base64("AAA=".into()), "p").is_err());
    }
}
