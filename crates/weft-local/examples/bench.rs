//! Measures the local model: load time, prefill of a 200-token prompt, decode speed, and
//! resident memory. Needs the weights (see `weft models list`).
//!
//! ```text
//! RUSTFLAGS="-C target-cpu=native" cargo run --release -p weft-local --features candle --example bench
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

fn rss() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| l[name.len()..].trim().to_owned())
            .unwrap_or_else(|| "?".to_owned())
    };
    format!("VmRSS {} (peak VmHWM {})", field("VmRSS:"), field("VmHWM:"))
}

fn main() -> ExitCode {
    weft_local::configure_threads();
    let path: PathBuf = match std::env::args_os().nth(1) {
        Some(path) => path.into(),
        None => match weft_local::Locator::from_environment().ensure_file(&weft_local::GEMMA3_270M)
        {
            Ok(path) => path,
            Err(error) => {
                eprintln!("bench: {error}");
                return ExitCode::FAILURE;
            }
        },
    };
    println!("model: {}", path.display());
    println!(
        "threads: CANDLE_NUM_THREADS={:?} RAYON_NUM_THREADS={:?}",
        std::env::var("CANDLE_NUM_THREADS").ok(),
        std::env::var("RAYON_NUM_THREADS").ok()
    );
    let decode = match weft_local::bench::measure(&path, "The capital of France is", 128) {
        Ok(m) => m,
        Err(error) => {
            eprintln!("bench: {error}");
            return ExitCode::FAILURE;
        }
    };
    let cpu = |d: Option<std::time::Duration>| {
        d.map_or_else(|| "?".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()))
    };
    println!(
        "load (file to first token possible): {:.3} s wall, {} CPU",
        decode.load.as_secs_f64(),
        cpu(decode.load_cpu)
    );
    println!(
        "decode: {} tokens in {:.3} s = {:.1} tok/s (prompt {} tokens, prefill {:.3} s)",
        decode.output_tokens,
        decode.decode.as_secs_f64(),
        decode.output_tokens as f64 / decode.decode.as_secs_f64(),
        decode.prompt_tokens,
        decode.prefill.as_secs_f64()
    );
    println!(
        "  CPU time of prefill + decode: {}",
        cpu(decode.generate_cpu)
    );
    println!("greedy text: {:?}", decode.text);
    println!("memory after decode: {}", rss());
    let text = "The quick brown fox jumps over the lazy dog while the sun sets behind the hills. ";
    let prefill = match weft_local::bench::measure_prefill(&path, text, 200, 1) {
        Ok(m) => m,
        Err(error) => {
            eprintln!("bench: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "prefill: {} tokens in {:.3} s wall = {:.0} tok/s ({} CPU)",
        prefill.prompt_tokens,
        prefill.prefill.as_secs_f64(),
        prefill.prompt_tokens as f64 / prefill.prefill.as_secs_f64(),
        cpu(prefill.generate_cpu)
    );
    println!("memory at the end: {}", rss());
    ExitCode::SUCCESS
}
