//! The Vercel AI SDK UI message stream ⇄ ThreadProtocol.
//!
//! - [`assemble`]: stream → thread. An incremental [`Assembler`] fed chunks yields only complete
//!   turns (the bijection table and critical rules of the spec).
//! - [`encode`]: thread → stream, the inverse, so that thread → stream → thread is the identity
//!   for every valid thread.
//! - [`chunk`]: the chunk types; [`sse`]: SSE framing.
//!
//! # Wire format
//!
//! Weft emits the **v5 chunk set** by default (accepted by ai@5, ai@6 and ai@7 clients, which
//! validate strictly in early releases: no extra fields on known chunk types). Serve it with
//! the headers in [`UI_MESSAGE_STREAM_HEADERS`] — `content-type: text/event-stream` and
//! `x-vercel-ai-ui-message-stream: v1` are the required ones — frame each chunk as
//! `data: <json>\n\n` and end with `data: [DONE]\n\n`.
//!
//! # The `data-weft` annotation chunk
//!
//! What the standard chunks cannot carry (thread header, user turns, turn and message headers
//! with their timestamps, parts without a chunk such as `user-prompt`, and fields a chunk
//! drops) travels in **transient** `data-weft` chunks: `{"type":"data-weft","data":{"kind":K,…},
//! "transient":true}`. AI SDK clients pass transient data to `onData` and do not store it, so
//! the rendered message is unchanged. Kinds:
//!
//! | kind | payload | meaning |
//! |---|---|---|
//! | `thread` | `thread`: the thread without `turns` | thread header |
//! | `user-turn` | `turn`: a user turn | a user turn, whole |
//! | `turn` | `turn`: the agent turn without `messages`, `completed_at`, `total_usage` | follows `start` |
//! | `turn-end` | `completed_at`, `total_usage?` | precedes `finish` |
//! | `message` | `message`: the message without `parts` (system: without `event_type`, `event_data`) | header of the next message |
//! | `part` | `part`: a whole part | a part no chunk expresses |
//! | `system` | `message`: a whole system message | an event no chunk expresses |
//! | `patch` | `set`: members, `unset`: names | corrects the part just completed |
//!
//! A stream without annotations (any AI SDK server) still assembles: message boundaries come
//! from `start-step`/`finish-step` and from the switch between model parts and tool results;
//! timestamps are receipt times from the injected [`Clock`](crate::clock::Clock).

pub mod assemble;
pub mod chunk;
pub mod encode;
mod mapping;
pub mod sse;

pub use assemble::{
    AssembledThread, Assembler, AssemblerOptions, AssemblyEvent, Interruption, InterruptionReason,
    ThreadBuilder, ThreadDefaults, assemble_thread, default_thread,
};
pub use chunk::{ChunkError, UiChunk};
pub use encode::{EncodeOptions, UiStreamVersion, encode_agent_turn, encode_thread, to_sse};

/// The response headers of a UI message stream (`UI_MESSAGE_STREAM_HEADERS` of the AI SDK).
pub const UI_MESSAGE_STREAM_HEADERS: [(&str, &str); 5] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

/// The `type` of Weft's annotation chunks.
pub const ANNOTATION_CHUNK_TYPE: &str = "data-weft";

/// Input that is not a readable stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// A data line is not JSON.
    #[error("invalid JSON in chunk: {0}")]
    Json(String),
    /// A JSON value is not a usable chunk.
    #[error(transparent)]
    Chunk(#[from] ChunkError),
    /// A line of the input could not be read.
    #[error("line {line}: {source}")]
    AtLine {
        /// 1-based line (JSON lines) or event (SSE) number.
        line: usize,
        /// What went wrong.
        #[source]
        source: Box<StreamError>,
    },
}

/// Reads a whole stream given as text: SSE (`data:` lines; `[DONE]` and `ping` events skipped)
/// or JSON lines (one chunk per non-empty line). The format is detected from the first
/// non-blank line.
///
/// # Errors
///
/// [`StreamError::AtLine`] for the first data payload that is not a usable chunk.
pub fn parse_stream(text: &str) -> Result<Vec<UiChunk>, StreamError> {
    let first = text
        .trim_start_matches('\u{feff}')
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    let is_sse = first.starts_with("data:")
        || first.starts_with(':')
        || first.starts_with("event:")
        || first.starts_with("id:");
    let mut chunks = Vec::new();
    if is_sse {
        let mut decoder = sse::SseDecoder::new();
        let mut events = decoder.push(text.as_bytes());
        events.extend(decoder.finish());
        for (index, event) in events.into_iter().enumerate() {
            let data = event.data.trim();
            if data == "[DONE]" || data.is_empty() || event.event.as_deref() == Some("ping") {
                continue;
            }
            chunks.push(
                UiChunk::from_json(data).map_err(|source| StreamError::AtLine {
                    line: index + 1,
                    source: Box::new(source),
                })?,
            );
        }
    } else {
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line == "[DONE]" {
                continue;
            }
            chunks.push(
                UiChunk::from_json(line).map_err(|source| StreamError::AtLine {
                    line: index + 1,
                    source: Box::new(source),
                })?,
            );
        }
    }
    Ok(chunks)
}
