//! The bodies of Weft's fuzz targets: one function per target, taking the fuzzer's bytes and
//! panicking when an invariant breaks. The cargo-fuzz crate in `fuzz/` (nightly, libFuzzer)
//! calls them; the stable test `tests/corpus.rs` replays every seed in `fuzz/corpus/` and
//! every saved crash in `fuzz/regressions/` through them, so CI checks the corpora and keeps
//! the bodies compiling without a nightly toolchain.
//!
//! ```
//! // Every target accepts any bytes; an invariant violation is a panic.
//! for (name, body) in weft_fuzz::TARGETS {
//!     body(b"data: {}\n\n");
//!     body(name.as_bytes());
//! }
//! ```
//!
//! See `docs/TESTING.md` (Fuzzing) for what each target asserts.

mod hook;
mod provider;
mod server;
mod splits;
mod sse;
mod standard;
mod thread;

pub use hook::hook_payload;
pub use provider::{provider_body, provider_stream};
pub use server::server_request;
pub use sse::sse_decode;
pub use standard::{scripted_script, standard_project};
pub use thread::{stream_assemble, thread_parse};

/// A target's body.
pub type Body = fn(&[u8]);

/// Every target, by its cargo-fuzz name (the folder names under `fuzz/corpus/`).
pub const TARGETS: &[(&str, Body)] = &[
    ("sse_decode", sse_decode),
    ("provider_stream", provider_stream),
    ("provider_body", provider_body),
    ("thread_parse", thread_parse),
    ("stream_assemble", stream_assemble),
    ("standard_project", standard_project),
    ("scripted_script", scripted_script),
    ("hook_payload", hook_payload),
    ("server_request", server_request),
];
