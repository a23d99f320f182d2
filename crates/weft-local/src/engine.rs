//! The engine: a loaded model and tokenizer, and the token loop of one generation.
//!
//! Engines are loaded once per file and shared (see [`engine_for`]). A generation owns its
//! key/value cache, so concurrent generations share only read-only weights. The loop checks
//! the request's cancellation token before every token, so cancelling costs at most one
//! forward pass.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::constrain::{Constraints, Grammar, apply_mask};
use crate::model::{Gemma3, ModelError};
use crate::options::{GenerationOptions, StopMatcher};
use crate::sampling::Sampler;
use crate::template::{END_OF_TURN, START_OF_TURN, Segment};
use crate::tokenizer::{Tokenizer, Utf8Stream};

/// Prompt tokens run per forward pass during prefill (bounds the attention scratch memory
/// and lets cancellation in between).
const PREFILL_CHUNK: usize = 256;

/// Why a generation failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GenerateError {
    #[error(
        "the prompt is {prompt} tokens; the context of {model} holds {context} (leave room for at least one output token)"
    )]
    ContextLength {
        prompt: usize,
        context: usize,
        model: String,
    },
    #[error("cancelled")]
    Cancelled,
    #[error("the output constraint could not be built: {0}")]
    Grammar(String),
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// Why a generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    EndOfTurn,
    MaxTokens,
    Sequence,
}

/// Time spent in each phase.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Timings {
    pub(crate) prefill: Duration,
    pub(crate) decode: Duration,
    pub(crate) grammar: Duration,
}

/// The result of one generation.
#[derive(Debug, Clone)]
pub(crate) struct Generation {
    pub(crate) text: String,
    pub(crate) prompt_tokens: usize,
    pub(crate) output_tokens: usize,
    pub(crate) stop: Stop,
    pub(crate) timings: Timings,
}

/// A loaded model.
#[derive(Debug)]
pub(crate) struct Engine {
    model: Gemma3,
    tokenizer: Tokenizer,
    path: PathBuf,
    stop_tokens: Vec<u32>,
    constraints: OnceLock<Result<Constraints, String>>,
}

fn engines() -> &'static Mutex<HashMap<PathBuf, Arc<Engine>>> {
    static ENGINES: OnceLock<Mutex<HashMap<PathBuf, Arc<Engine>>>> = OnceLock::new();
    ENGINES.get_or_init(Default::default)
}

/// The engine of `path`, loading it on first use. Loads are serialized; a loaded engine stays
/// for the life of the process.
pub(crate) fn engine_for(path: &Path) -> Result<Arc<Engine>, ModelError> {
    let mut engines = engines()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(engine) = engines.get(path) {
        return Ok(engine.clone());
    }
    let engine = Arc::new(Engine::load(path)?);
    engines.insert(path.to_owned(), engine.clone());
    Ok(engine)
}

impl Engine {
    /// Loads the GGUF at `path`. Sets candle's thread count first (see
    /// [`crate::configure_threads`]).
    pub(crate) fn load(path: &Path) -> Result<Engine, ModelError> {
        crate::configure_threads();
        let loaded = Gemma3::load(path)?;
        let tokenizer = loaded.tokenizer;
        let mut stop_tokens = Vec::new();
        for piece in [END_OF_TURN, START_OF_TURN] {
            if let Some(id) = tokenizer.control(piece) {
                stop_tokens.push(id);
            }
        }
        stop_tokens.push(tokenizer.eos());
        Ok(Engine {
            model: loaded.model,
            tokenizer,
            path: path.to_owned(),
            stop_tokens,
            constraints: OnceLock::new(),
        })
    }

    /// The tokenizer.
    pub(crate) fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The GGUF file this engine was loaded from, for messages and metadata.
    pub(crate) fn file_name(&self) -> String {
        self.path.display().to_string()
    }

    /// The model's context length.
    pub(crate) fn context_length(&self) -> usize {
        self.model.config().context_length
    }

    /// Token ids of a rendered prompt.
    pub(crate) fn encode_prompt(&self, segments: &[Segment]) -> Vec<u32> {
        let mut ids = Vec::new();
        for segment in segments {
            match segment {
                Segment::Control(piece) => match self.tokenizer.control(piece) {
                    Some(id) => ids.push(id),
                    None => self.tokenizer.encode_into(piece, &mut ids),
                },
                Segment::Text(text) => self.tokenizer.encode_into(text, &mut ids),
            }
        }
        ids
    }

    fn constraints(&self) -> Result<&Constraints, String> {
        self.constraints
            .get_or_init(|| Constraints::new(&self.tokenizer, &self.stop_tokens))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Runs one generation. `on_text` receives text as it becomes final (never part of a
    /// stop sequence); returning `false` cancels.
    pub(crate) fn generate(
        &self,
        prompt: &[u32],
        options: &GenerationOptions,
        grammar: Option<&Grammar>,
        context_limit: Option<usize>,
        signal: &CancellationToken,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Generation, GenerateError> {
        let context = context_limit
            .unwrap_or(usize::MAX)
            .min(self.context_length());
        if prompt.len() >= context {
            return Err(GenerateError::ContextLength {
                prompt: prompt.len(),
                context,
                model: self.path.display().to_string(),
            });
        }
        let max_new = options.max_tokens.min(context - prompt.len());
        let mut timings = Timings::default();
        let mut matcher = match grammar {
            Some(grammar) => {
                let started = Instant::now();
                let matcher = self
                    .constraints()
                    .and_then(|c| c.matcher(grammar))
                    .map_err(GenerateError::Grammar)?;
                timings.grammar = started.elapsed();
                Some(matcher)
            }
            None => None,
        };
        let started = Instant::now();
        let mut cache = self.model.new_cache(prompt.len() + max_new)?;
        let mut logits = Vec::new();
        for chunk in prompt.chunks(PREFILL_CHUNK) {
            if signal.is_cancelled() {
                return Err(GenerateError::Cancelled);
            }
            logits = self.model.forward(chunk, &mut cache)?;
        }
        timings.prefill = started.elapsed();
        let started = Instant::now();
        let mut sampler = Sampler::new(options.sampling);
        let stops = StopMatcher::new(&options.stop);
        let mut utf8 = Utf8Stream::default();
        let mut text = String::new();
        let mut shown = 0usize;
        let mut output_tokens = 0usize;
        let mut stop = Stop::MaxTokens;
        while output_tokens < max_new {
            if signal.is_cancelled() {
                return Err(GenerateError::Cancelled);
            }
            if let Some(matcher) = matcher.as_mut() {
                apply_mask(matcher, &mut logits).map_err(GenerateError::Grammar)?;
            }
            let Some(token) = sampler.sample(&logits) else {
                // Nothing allowed: the grammar is finished or stuck.
                stop = Stop::EndOfTurn;
                break;
            };
            output_tokens += 1;
            if self.stop_tokens.contains(&token) {
                stop = Stop::EndOfTurn;
                break;
            }
            if let Some(matcher) = matcher.as_mut() {
                matcher
                    .consume_token(token)
                    .map_err(|e| GenerateError::Grammar(e.to_string()))?;
            }
            text.push_str(&utf8.push(&self.tokenizer.token_bytes(token)));
            if let Some(at) = stops.find(&text) {
                text.truncate(at);
                stop = Stop::Sequence;
                break;
            }
            let safe = stops.safe_len(&text);
            if safe > shown {
                if !on_text(&text[shown..safe]) {
                    return Err(GenerateError::Cancelled);
                }
                shown = safe;
            }
            if output_tokens < max_new {
                logits = self.model.forward(&[token], &mut cache)?;
            }
        }
        if stop != Stop::Sequence {
            text.push_str(&utf8.finish());
        }
        if text.len() > shown && !on_text(&text[shown..]) {
            return Err(GenerateError::Cancelled);
        }
        timings.decode = started.elapsed();
        Ok(Generation {
            text,
            prompt_tokens: prompt.len(),
            output_tokens,
            stop,
            timings,
        })
    }
}
