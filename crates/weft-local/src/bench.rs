//! Measurements for the benchmark example (`examples/bench.rs`) and the real-model tests:
//! load time, prefill and decode of raw prompts, without the chat template or the
//! process-wide engine cache.

use std::path::Path;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::engine::Engine;
use crate::options::GenerationOptions;
use crate::tokenizer::Tokenizer;

/// What one measured generation took.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// From opening the file to the model being ready for its first token.
    pub load: Duration,
    /// Prompt length in tokens (with `<bos>`).
    pub prompt_tokens: usize,
    /// Time to run the prompt.
    pub prefill: Duration,
    /// Tokens generated.
    pub output_tokens: usize,
    /// Time to generate them.
    pub decode: Duration,
    /// The generated text.
    pub text: String,
    /// CPU time of this thread during the load (Linux only; `None` elsewhere). On a busy
    /// machine this is closer to the time the work needs than the wall-clock figures.
    pub load_cpu: Option<Duration>,
    /// CPU time of this thread during prefill and decode together (Linux only).
    pub generate_cpu: Option<Duration>,
}

/// CPU time (user + system) of the calling thread, from `/proc/thread-self/stat`.
pub fn thread_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 here (0-based 11, 12).
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // The kernel reports clock ticks; USER_HZ is 100 on Linux.
    Some(Duration::from_millis(ticks * 10))
}

fn cpu_since(start: Option<Duration>) -> Option<Duration> {
    Some(thread_cpu_time()?.saturating_sub(start?))
}

/// Reads only the tokenizer of a GGUF file.
///
/// # Errors
/// When the file cannot be read or has no SentencePiece vocabulary.
pub fn read_tokenizer(path: &Path) -> Result<Tokenizer, String> {
    crate::model::read_tokenizer_file(path).map_err(|e| e.to_string())
}

/// Loads `path` afresh, then greedily continues `prompt` (raw text after `<bos>`, no chat
/// template) for at most `max_tokens` tokens.
///
/// # Errors
/// When loading or generating fails.
pub fn measure(path: &Path, prompt: &str, max_tokens: usize) -> Result<Measurement, String> {
    let (cpu, started) = (thread_cpu_time(), Instant::now());
    let engine = Engine::load(path).map_err(|e| e.to_string())?;
    let load = (started.elapsed(), cpu_since(cpu));
    let ids = engine.tokenizer().encode_with_bos(prompt);
    measure_ids(&engine, &ids, max_tokens, load)
}

/// Like [`measure`], with a prompt of exactly `prompt_tokens` tokens cut from `text` repeated.
///
/// # Errors
/// When loading or generating fails.
pub fn measure_prefill(
    path: &Path,
    text: &str,
    prompt_tokens: usize,
    max_tokens: usize,
) -> Result<Measurement, String> {
    let (cpu, started) = (thread_cpu_time(), Instant::now());
    let engine = Engine::load(path).map_err(|e| e.to_string())?;
    let load = (started.elapsed(), cpu_since(cpu));
    let mut ids = vec![engine.tokenizer().bos()];
    let piece = engine.tokenizer().encode(text);
    if piece.is_empty() {
        return Err("the text encodes to no tokens".to_owned());
    }
    while ids.len() < prompt_tokens {
        ids.extend_from_slice(&piece);
    }
    ids.truncate(prompt_tokens);
    measure_ids(&engine, &ids, max_tokens, load)
}

fn measure_ids(
    engine: &Engine,
    ids: &[u32],
    max_tokens: usize,
    (load, load_cpu): (Duration, Option<Duration>),
) -> Result<Measurement, String> {
    let cpu = thread_cpu_time();
    let options = GenerationOptions {
        max_tokens,
        ..GenerationOptions::default()
    };
    let generation = engine
        .generate(
            ids,
            &options,
            None,
            None,
            &CancellationToken::new(),
            &mut |_| true,
        )
        .map_err(|e| e.to_string())?;
    Ok(Measurement {
        load,
        prompt_tokens: ids.len(),
        prefill: generation.timings.prefill,
        output_tokens: generation.output_tokens,
        decode: generation.timings.decode,
        text: generation.text,
        load_cpu,
        generate_cpu: cpu_since(cpu),
    })
}
