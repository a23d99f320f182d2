//! The `local` provider: `local:gemma3-270m` or `local:PATH.gguf`, as an [`LlmModel`].
//!
//! Binding is cheap: it checks the model id. The weights are found (and pip chunks assembled)
//! and loaded on the first request, on a blocking thread; later requests reuse the loaded
//! engine. Every request renders the conversation with [`crate::template`], constrains the
//! output when tools or a structure are given ([`crate::calls`]), and decodes token by token,
//! checking `request.signal` before each token.
//!
//! Provider options (the `options` of the model reference): `{"context_length": N}` caps the
//! context below the model's own (32,768 for Gemma 3 270M).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use weft_provider::tool::BoxFuture;
use weft_provider::{
    ErrorCode, LlmCapabilities, LlmModel, LlmRequest, LlmResponse, LlmStream, ModelReference,
    Provider, UppError,
};

use crate::NAME;
use crate::weights::{self, Locator};

/// What the local provider supports: streaming, tools and structured output (both enforced
/// by constrained decoding); text only, no media input.
pub const CAPABILITIES: LlmCapabilities = LlmCapabilities {
    streaming: true,
    tools: true,
    structured_output: true,
    image_input: false,
    document_input: false,
    video_input: false,
    audio_input: false,
};

/// Which file a model id names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A known model found through [`Locator`] (`local:gemma3-270m`).
    Known(&'static weights::ModelSpec),
    /// A GGUF path (`local:PATH.gguf`).
    File(PathBuf),
}

impl ModelSource {
    /// Parses a model id.
    ///
    /// # Errors
    /// `MODEL_NOT_FOUND` when the id is neither a known model nor a `.gguf` path.
    pub fn parse(model_id: &str) -> Result<Self, UppError> {
        if let Some(spec) = weights::known_model(model_id) {
            return Ok(ModelSource::Known(spec));
        }
        if model_id.ends_with(".gguf") {
            return Ok(ModelSource::File(PathBuf::from(model_id)));
        }
        let known: Vec<&str> = weights::KNOWN_MODELS.iter().map(|s| s.id).collect();
        Err(UppError::llm(
            ErrorCode::ModelNotFound,
            NAME,
            format!(
                "unknown local model {model_id:?}: use one of {} or a path ending in .gguf",
                known.join(", ")
            ),
        ))
    }

    /// The GGUF file, assembling pip chunks into the cache when needed.
    ///
    /// # Errors
    /// `MODEL_NOT_FOUND` with the discovery error's advice.
    pub fn resolve(&self) -> Result<PathBuf, UppError> {
        match self {
            ModelSource::File(path) => {
                if path.is_file() {
                    Ok(path.clone())
                } else {
                    Err(UppError::llm(
                        ErrorCode::ModelNotFound,
                        NAME,
                        format!("the GGUF file {} does not exist", path.display()),
                    ))
                }
            }
            ModelSource::Known(spec) => Locator::from_environment()
                .ensure_file(spec)
                .map_err(|e| UppError::llm(ErrorCode::ModelNotFound, NAME, e.to_string())),
        }
    }
}

/// A bound local model.
pub struct LocalModel {
    model_id: String,
    source: ModelSource,
    #[cfg_attr(not(feature = "candle"), allow(dead_code))]
    context_limit: Option<usize>,
    #[cfg(feature = "candle")]
    engine: tokio::sync::OnceCell<Arc<crate::engine::Engine>>,
}

impl fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalModel")
            .field("model_id", &self.model_id)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Binds `model_id` with provider `options` (`{"context_length": N}`).
    ///
    /// # Errors
    /// `MODEL_NOT_FOUND` for an unknown id, `INVALID_REQUEST` for bad options or when Weft was
    /// built without the `candle` feature.
    pub fn bind(model_id: &str, options: &Value) -> Result<Self, UppError> {
        let source = ModelSource::parse(model_id)?;
        let context_limit = match options.get("context_length") {
            None | Some(Value::Null) => None,
            Some(value) => Some(
                value
                    .as_u64()
                    .filter(|n| *n > 0)
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| {
                        UppError::llm(
                            ErrorCode::InvalidRequest,
                            NAME,
                            format!(
                                "option context_length must be a positive integer, got {value}"
                            ),
                        )
                    })?,
            ),
        };
        if !cfg!(feature = "candle") {
            return Err(UppError::llm(
                ErrorCode::InvalidRequest,
                NAME,
                "this build of Weft has no local inference: rebuild with the `local` feature \
                 (weft-cli) or `candle` (weft-local)",
            ));
        }
        Ok(LocalModel {
            model_id: model_id.to_owned(),
            source,
            context_limit,
            #[cfg(feature = "candle")]
            engine: tokio::sync::OnceCell::new(),
        })
    }
}

impl LlmModel for LocalModel {
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
            #[cfg(feature = "candle")]
            {
                let engine = self.engine().await?;
                crate::run::complete(engine, request, self.context_limit).await
            }
            #[cfg(not(feature = "candle"))]
            {
                let _ = request;
                Err(no_inference())
            }
        })
    }

    fn stream(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmStream, UppError>> {
        Box::pin(async move {
            #[cfg(feature = "candle")]
            {
                let engine = self.engine().await?;
                Ok(crate::run::stream(engine, request, self.context_limit))
            }
            #[cfg(not(feature = "candle"))]
            {
                let _ = request;
                Err(no_inference())
            }
        })
    }
}

#[cfg(not(feature = "candle"))]
fn no_inference() -> UppError {
    UppError::llm(
        ErrorCode::InvalidRequest,
        NAME,
        "this build of Weft has no local inference",
    )
}

#[cfg(feature = "candle")]
impl LocalModel {
    /// The loaded engine (found, assembled and loaded on a blocking thread on first use).
    async fn engine(&self) -> Result<Arc<crate::engine::Engine>, UppError> {
        self.engine
            .get_or_try_init(|| async {
                let source = self.source.clone();
                tokio::task::spawn_blocking(move || {
                    let path = source.resolve()?;
                    crate::engine::engine_for(&path)
                        .map_err(|e| UppError::llm(ErrorCode::ProviderError, NAME, e.to_string()))
                })
                .await
                .map_err(|e| UppError::llm(ErrorCode::ProviderError, NAME, e.to_string()))?
            })
            .await
            .cloned()
    }
}

/// The `local` provider for a [`weft_provider::ProviderRegistry`]:
/// `registry.register("local", weft_local::provider)`.
pub fn provider() -> Arc<Provider> {
    Arc::new(Provider::new(NAME, env!("CARGO_PKG_VERSION")).with_llm(
        |model_id: &str, options: &Value| {
            let model: Arc<dyn weft_provider::LlmModel> =
                Arc::new(LocalModel::bind(model_id, options)?);
            Ok(model)
        },
    ))
}

/// A reference to `local:MODEL` (e.g. `gemma3-270m`).
pub fn model(model_id: &str) -> ModelReference {
    provider().model(model_id)
}
