//! Context management (runtime spec §5.11): when a conversation's tokens pass
//! `compressionThreshold` × the model's context limit, the history is compressed before the
//! next model call.
//!
//! * **What is kept** ([`select`]): the system prompt (it is not part of the history: the
//!   model call adds it), the last `preserveLastN` user messages, and the current turn — the
//!   last model response and every tool result answering it (the results the next model call
//!   reads). Everything else before the current turn is the *middle*, which is replaced.
//! * **How** ([`CompressionStrategy`]): `truncate` drops the middle (a one-line note says how
//!   many messages went); `summarize` asks the model (the step's own model, through the same
//!   provider path as every call: recorded, budgeted, traced) for a summary that replaces the
//!   middle; `hybrid` first replaces the middle's tool outputs with a placeholder and, when
//!   that is not enough, summarizes.
//! * **Nothing is lost**: the message that stands for replaced history (the summary, the note,
//!   a cleared tool output) carries a small [`Marker`] in its metadata (`weftCompression`:
//!   the agent step whose checkpoint holds the replaced messages, their index ranges and
//!   first/last ids). The store keeps every message once, so the compressed checkpoint just
//!   references rows that already exist; [`expand`] restores the replaced messages from the
//!   earlier checkpoint (`weft runs show --expand`).
//! * **Token counts** ([`TokenCount`]): the provider's reported usage of the last model call
//!   (its input plus output tokens) plus an estimate of what was added since, when the
//!   provider reported usage; otherwise an estimate of everything (JSON bytes / 4).
//!
//! # Examples
//!
//! ```
//! use weft_provider::Message;
//! use weft_runtime::profile::context::select;
//!
//! let history = vec![
//!     Message::user("task"),
//!     Message::assistant("thinking"),
//!     Message::assistant("more"),
//!     Message::assistant("last response"),
//! ];
//! // Keep the last user message and the current turn: messages 1..3 are the middle.
//! assert_eq!(select(&history, 1), vec![1..3]);
//! ```

use std::ops::Range;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_provider::{
    ContentBlock, LlmInstance, Message, MessageOptions, TokenUsage, ToolResultMessage, Turn,
    UserMessage,
};

use crate::event::{EventKind, Side};
use crate::ledger::RunContext;

/// The metadata key of a compression [`Marker`] (on a message that stands for replaced
/// history) and of a summary request (on the summarizer's input).
pub const MARKER_KEY: &str = "weftCompression";

/// The context limit used when neither `maxTokens` nor a known limit of the model applies.
pub const DEFAULT_CONTEXT_LIMIT: u64 = 128_000;

/// What replaces a tool output the `hybrid` strategy cleared.
pub const CLEARED_OUTPUT: &str = "[output cleared by context compression]";

/// The summarizer's instructions (its system prompt).
pub const SUMMARY_INSTRUCTIONS: &str = "You compress the earlier part of a conversation between a user and an AI agent, so \
the agent can go on with its task without it. Write a concise summary: the task, what was done (tools called and what \
they returned that still matters: facts, file names, numbers, errors), decisions, and what is still open. Answer with \
the summary only.";

/// `[runtime.context]`: the spec's `ContextManagementConfig`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextConfig {
    /// The model's context limit in tokens; absent: the model's known limit
    /// ([`known_context_limit`]), else [`DEFAULT_CONTEXT_LIMIT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Compression starts when the conversation's tokens pass this share of the limit
    /// (default 0.8).
    #[serde(default = "default_threshold")]
    pub compression_threshold: f64,
    /// The user messages always kept, counted from the newest (default 2).
    #[serde(default = "default_preserve")]
    pub preserve_last_n: usize,
    /// `summarize` (default), `truncate` or `hybrid`.
    #[serde(default)]
    pub compression_strategy: CompressionStrategy,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            max_tokens: None,
            compression_threshold: default_threshold(),
            preserve_last_n: default_preserve(),
            compression_strategy: CompressionStrategy::default(),
        }
    }
}

fn default_threshold() -> f64 {
    0.8
}

fn default_preserve() -> usize {
    2
}

/// How the middle of the history is compressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompressionStrategy {
    /// A model call summarizes the middle; the summary replaces it (the default).
    #[default]
    Summarize,
    /// The middle is dropped (a note says how many messages went).
    Truncate,
    /// The middle's tool outputs are cleared first; when that is not enough, it is
    /// summarized.
    Hybrid,
}

impl CompressionStrategy {
    /// The configuration's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CompressionStrategy::Summarize => "summarize",
            CompressionStrategy::Truncate => "truncate",
            CompressionStrategy::Hybrid => "hybrid",
        }
    }
}

impl ContextConfig {
    /// What is wrong with these settings (`(key under runtime.context, message)`).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        if !(self.compression_threshold > 0.0 && self.compression_threshold <= 1.0) {
            problems.push((
                "compressionThreshold",
                "must be more than 0 and at most 1 (a share of the context limit)".to_owned(),
            ));
        }
        if self.max_tokens == Some(0) {
            problems.push(("maxTokens", "must be at least 1".to_owned()));
        }
        problems
    }

    /// The context limit for `model` (a model id or `provider:model` reference) and where it
    /// comes from (`maxTokens`, `model`, `default`).
    pub fn limit_for(&self, model: &str) -> (u64, &'static str) {
        match (self.max_tokens, known_context_limit(model)) {
            (Some(max), _) => (max, "maxTokens"),
            (None, Some(known)) => (known, "model"),
            (None, None) => (DEFAULT_CONTEXT_LIMIT, "default"),
        }
    }

    /// The token count above which the history is compressed, for a limit of `limit`.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    pub fn trigger(&self, limit: u64) -> u64 {
        (limit as f64 * self.compression_threshold).floor() as u64
    }
}

/// The published context windows of a few model families (`None`: unknown).
///
/// ```
/// use weft_runtime::profile::context::known_context_limit;
/// assert_eq!(known_context_limit("anthropic:claude-sonnet-4-5"), Some(200_000));
/// assert_eq!(known_context_limit("gpt-4o-mini"), Some(128_000));
/// assert_eq!(known_context_limit("scripted-turns:script.json"), None);
/// ```
pub fn known_context_limit(model: &str) -> Option<u64> {
    let id = model.rsplit_once(':').map_or(model, |(_, id)| id);
    let id = id.rsplit('/').next().unwrap_or(id).to_ascii_lowercase();
    let table: [(&str, u64); 9] = [
        ("claude-", 200_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("gpt-5", 400_000),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4", 200_000),
        ("gemini-", 1_048_576),
    ];
    table
        .iter()
        .find(|(prefix, _)| id.starts_with(prefix))
        .map(|(_, limit)| *limit)
}

/// Estimated tokens of `messages`: their JSON bytes / 4.
pub fn estimate(messages: &[Message]) -> u64 {
    messages.iter().map(estimate_one).sum()
}

fn estimate_one(message: &Message) -> u64 {
    serde_json::to_vec(message).map_or(0, |bytes| bytes.len() as u64 / 4)
}

/// Estimated tokens of a text: its bytes / 4.
pub fn estimate_text(text: &str) -> u64 {
    text.len() as u64 / 4
}

/// How many tokens a conversation holds, and whether that is the provider's count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenCount {
    /// The tokens.
    pub tokens: u64,
    /// `usage`: the provider's reported usage of the last call plus an estimate of what
    /// came after it; `estimate`: an estimate of everything.
    pub source: &'static str,
}

/// The tokens of the next model call's context: `history` (and `pending`, the messages the
/// call adds), with `fixed` tokens of system prompt and tool definitions. `reported` is the
/// last model call's usage and the history length when it answered (the messages up to and
/// including its response), when the provider reported usage.
pub fn count(
    history: &[Message],
    pending: &[Message],
    fixed: u64,
    reported: Option<(&TokenUsage, usize)>,
) -> TokenCount {
    match reported {
        Some((usage, at)) if usage.input_tokens > 0 && at <= history.len() => {
            // The last cycle's tokens: its input (the whole request) and its output.
            let (input, output) = usage
                .cycles
                .as_ref()
                .and_then(|cycles| cycles.last())
                .map_or((usage.input_tokens, usage.output_tokens), |c| {
                    (c.input_tokens, c.output_tokens)
                });
            TokenCount {
                tokens: input + output + estimate(&history[at..]) + estimate(pending),
                source: "usage",
            }
        }
        _ => TokenCount {
            tokens: fixed + estimate(history) + estimate(pending),
            source: "estimate",
        },
    }
}

/// Whether `message` stands for compressed history (a summary, a truncation note or a
/// cleared tool output).
pub fn is_marker(message: &Message) -> bool {
    message
        .metadata()
        .is_some_and(|m| m.contains_key(MARKER_KEY))
}

/// The index ranges of `history` that compression replaces: everything before the current
/// turn (the last assistant message and what follows it) except the last `preserve_last_n`
/// user messages (messages that stand for earlier compressions do not count as user
/// messages: they are compressed again). Ranges are in order and never split an assistant
/// message from its tool results.
pub fn select(history: &[Message], preserve_last_n: usize) -> Vec<Range<usize>> {
    let current = history
        .iter()
        .rposition(|m| matches!(m, Message::Assistant(_)))
        .unwrap_or(history.len());
    let mut kept = vec![false; history.len()];
    for k in &mut kept[current..] {
        *k = true;
    }
    let users = history
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.is_user() && !is_marker(m))
        .take(preserve_last_n);
    for (i, _) in users {
        kept[i] = true;
    }
    let mut ranges: Vec<Range<usize>> = Vec::new();
    for (i, keep) in kept.iter().enumerate() {
        if *keep {
            continue;
        }
        match ranges.last_mut() {
            Some(range) if range.end == i => range.end = i + 1,
            _ => ranges.push(i..i + 1),
        }
    }
    ranges
}

/// One replaced range: indexes `from..to` of the history of the checkpoint at `agentStep`,
/// from the message `firstId` to `lastId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplacedRange {
    /// First index (inclusive).
    pub from: usize,
    /// Last index (exclusive).
    pub to: usize,
    /// The id of the first replaced message.
    pub first_id: String,
    /// The id of the last replaced message.
    pub last_id: String,
}

/// What a message that stands for compressed history replaced: small, whatever the size of
/// the history (it references the messages the store already holds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Marker {
    /// The compression's number in the conversation (1, 2, …).
    pub generation: u64,
    /// The strategy that made this message (`summarize`, `truncate`, `hybrid`).
    pub strategy: String,
    /// The agent step whose checkpoint holds the replaced messages.
    pub agent_step: u64,
    /// The replaced ranges of that checkpoint's history.
    pub replaced: Vec<ReplacedRange>,
    /// `summary`, `note` (truncate) or `cleared` (a cleared tool output).
    pub kind: String,
}

impl Marker {
    /// The marker of `message`, if it stands for compressed history.
    pub fn of(message: &Message) -> Option<Marker> {
        let value = message.metadata()?.get(MARKER_KEY)?;
        serde_json::from_value(value.clone()).ok()
    }

    /// How many messages it replaced.
    pub fn count(&self) -> usize {
        self.replaced.iter().map(|r| r.to - r.from).sum()
    }
}

/// The highest compression generation of `messages` (0: never compressed).
pub fn generation(messages: &[Message]) -> u64 {
    messages
        .iter()
        .filter_map(|m| m.metadata()?.get(MARKER_KEY)?.get("generation")?.as_u64())
        .max()
        .unwrap_or(0)
}

/// The compression generation a model request belongs to, for the recorded responses'
/// positions: the highest marker generation of `messages`, `s` added for a summary request
/// (`None`: never compressed). Within one generation the conversation only grows.
pub fn generation_label<M: std::borrow::Borrow<Message>>(messages: &[M]) -> Option<String> {
    label(
        messages
            .iter()
            .fold(None, |best, m| newest_marker(best, m.borrow())),
    )
}

/// `best` (the highest marker generation so far, and whether it marks a summary request)
/// with `message`'s marker taken into account: a fold over a conversation's messages, which
/// [`crate::recorded`] keeps going as the conversation grows instead of reading it again.
pub(crate) fn newest_marker(best: Option<(u64, bool)>, message: &Message) -> Option<(u64, bool)> {
    let Some(value) = message.metadata().and_then(|m| m.get(MARKER_KEY)) else {
        return best;
    };
    let generation = value.get("generation").and_then(Value::as_u64).unwrap_or(0);
    let request = value.get("request").and_then(Value::as_bool) == Some(true);
    if best.is_none_or(|(g, _)| generation > g) {
        Some((generation, request))
    } else {
        best
    }
}

/// The label of [`generation_label`] for the fold's result.
pub(crate) fn label(best: Option<(u64, bool)>) -> Option<String> {
    best.map(|(g, request)| {
        if request {
            format!("{g}s")
        } else {
            g.to_string()
        }
    })
}

/// A compression that happened: the new history and what the `compression` event says.
#[derive(Debug, Clone, PartialEq)]
pub struct Compressed {
    /// The history to go on with.
    pub history: Vec<Message>,
    /// The strategy used (for `hybrid`: `hybrid` too; `stage` says which part ran).
    pub strategy: CompressionStrategy,
    /// `hybrid` only: `cleared` (tool outputs cleared was enough) or `summarized`.
    pub stage: Option<&'static str>,
    /// The tokens before (as counted) and after (that count less the estimate of what was
    /// removed plus what was added).
    pub tokens_before: u64,
    /// See `tokens_before`.
    pub tokens_after: u64,
    /// The replaced ranges of the history before.
    pub replaced: Vec<ReplacedRange>,
    /// The id of the summary (or note) message.
    pub summary_id: Option<String>,
    /// The summary call's usage (`summarize`, `hybrid`'s second stage).
    pub summary_usage: Option<TokenUsage>,
}

/// Why a compression could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CompressionError {
    /// The summary call failed.
    #[error("the context compression's summary call failed: {0}")]
    Summary(#[from] weft_provider::UppError),
    /// The summary was empty.
    #[error("the context compression's summary call gave no text")]
    EmptySummary,
    /// No model could be built for the summary call.
    #[error("no model could be built for the context compression's summary call")]
    NoModel,
}

/// One compression, from `history` (the committed state's, at `agent_step`) counted at
/// `before` tokens, the `generation`th of the conversation. `summarizer` is the model the
/// summary asks (the step's, without tools, with [`SUMMARY_INSTRUCTIONS`] as its system
/// prompt); `target` is the count the `hybrid` strategy's first stage must reach. `None`
/// when nothing can be replaced (the history is all kept).
///
/// # Errors
/// [`CompressionError`] when a summary is needed and its model call fails.
#[allow(clippy::too_many_arguments)]
pub async fn compress(
    config: &ContextConfig,
    history: &[Message],
    agent_step: u64,
    generation: u64,
    before: u64,
    target: u64,
    summarizer: &LlmInstance,
    signal: tokio_util::sync::CancellationToken,
) -> Result<Option<Compressed>, CompressionError> {
    let ranges = select(history, config.preserve_last_n);
    if ranges.is_empty() {
        return Ok(None);
    }
    let replaced: Vec<ReplacedRange> = ranges
        .iter()
        .map(|r| ReplacedRange {
            from: r.start,
            to: r.end,
            first_id: history[r.start].id().to_owned(),
            last_id: history[r.end - 1].id().to_owned(),
        })
        .collect();
    let marker = |kind: &str, replaced: Vec<ReplacedRange>| Marker {
        generation,
        strategy: config.compression_strategy.as_str().to_owned(),
        agent_step,
        replaced,
        kind: kind.to_owned(),
    };
    let removed: u64 = ranges.iter().map(|r| estimate(&history[r.clone()])).sum();
    let mut stage = None;
    if config.compression_strategy == CompressionStrategy::Hybrid {
        // First stage: the middle's tool outputs cleared, each standing for its original.
        let mut cleared = history.to_vec();
        let mut changed = Vec::new();
        for range in &ranges {
            for i in range.clone() {
                if let Message::ToolResult(results) = &history[i]
                    && !is_marker(&history[i])
                {
                    let mut results = results.results.clone();
                    for result in &mut results {
                        result.result = Value::String(CLEARED_OUTPUT.to_owned());
                    }
                    let mut message = ToolResultMessage::new(results);
                    message.metadata = Some(marker_metadata(&marker(
                        "cleared",
                        vec![ReplacedRange {
                            from: i,
                            to: i + 1,
                            first_id: history[i].id().to_owned(),
                            last_id: history[i].id().to_owned(),
                        }],
                    )));
                    cleared[i] = Message::ToolResult(message);
                    changed.push(i);
                }
            }
        }
        if !changed.is_empty() {
            let old: u64 = changed.iter().map(|&i| estimate_one(&history[i])).sum();
            let new: u64 = changed.iter().map(|&i| estimate_one(&cleared[i])).sum();
            let after = before.saturating_sub(old) + new;
            if after <= target {
                return Ok(Some(Compressed {
                    history: cleared,
                    strategy: CompressionStrategy::Hybrid,
                    stage: Some("cleared"),
                    tokens_before: before,
                    tokens_after: after,
                    replaced: changed
                        .iter()
                        .map(|&i| ReplacedRange {
                            from: i,
                            to: i + 1,
                            first_id: history[i].id().to_owned(),
                            last_id: history[i].id().to_owned(),
                        })
                        .collect(),
                    summary_id: None,
                    summary_usage: None,
                }));
            }
        }
        stage = Some("summarized");
    }
    let (text, kind, usage) = match config.compression_strategy {
        CompressionStrategy::Truncate => (
            format!(
                "[Context compression: {} earlier messages were removed to fit the context window.]",
                ranges.iter().map(ExactSizeIterator::len).sum::<usize>()
            ),
            "note",
            None,
        ),
        CompressionStrategy::Summarize | CompressionStrategy::Hybrid => {
            let clip = (config.compression_strategy == CompressionStrategy::Hybrid).then_some(500);
            let transcript = ranges
                .iter()
                .flat_map(|r| history[r.clone()].iter())
                .map(|m| render(m, clip))
                .collect::<Vec<_>>()
                .join("\n");
            let request = UserMessage::with_options(
                vec![ContentBlock::text(format!(
                    "The conversation so far (to summarize):\n\n{transcript}"
                ))],
                MessageOptions {
                    id: None,
                    metadata: Some(request_metadata(generation)),
                },
            );
            let turn = summarizer
                .generate_with_signal(&[], Message::User(request), signal)
                .await?;
            let summary = turn.response.text_content();
            if summary.trim().is_empty() {
                return Err(CompressionError::EmptySummary);
            }
            (
                format!("[Summary of the earlier conversation]\n{}", summary.trim()),
                "summary",
                Some(turn.usage),
            )
        }
    };
    let stand_in = Message::User(UserMessage::with_options(
        vec![ContentBlock::text(text)],
        MessageOptions {
            id: None,
            metadata: Some(marker_metadata(&marker(kind, replaced.clone()))),
        },
    ));
    let added = estimate_one(&stand_in);
    let summary_id = stand_in.id().to_owned();
    let mut out = Vec::with_capacity(history.len());
    let mut stand_in = Some(stand_in);
    for (i, message) in history.iter().enumerate() {
        if ranges.iter().any(|r| r.contains(&i)) {
            if let Some(first) = stand_in.take() {
                out.push(first);
            }
            continue;
        }
        out.push(message.clone());
    }
    Ok(Some(Compressed {
        history: out,
        strategy: config.compression_strategy,
        stage,
        tokens_before: before,
        tokens_after: before.saturating_sub(removed) + added,
        replaced,
        summary_id: Some(summary_id),
        summary_usage: usage,
    }))
}

fn marker_metadata(marker: &Marker) -> weft_provider::message::Metadata {
    let mut metadata = weft_provider::message::Metadata::new();
    metadata.insert(
        MARKER_KEY.to_owned(),
        serde_json::to_value(marker).unwrap_or(Value::Null),
    );
    metadata
}

fn request_metadata(generation: u64) -> weft_provider::message::Metadata {
    let mut metadata = weft_provider::message::Metadata::new();
    metadata.insert(
        MARKER_KEY.to_owned(),
        json!({"generation": generation, "request": true}),
    );
    metadata
}

/// One message as a line of the summarizer's transcript (tool outputs clipped to `clip`
/// characters when set).
fn render(message: &Message, clip: Option<usize>) -> String {
    let clipped = |text: String| match clip {
        Some(n) if text.chars().count() > n => {
            format!("{}… [clipped]", text.chars().take(n).collect::<String>())
        }
        _ => text,
    };
    match message {
        Message::User(_) => format!("user: {}", message.text()),
        Message::Assistant(a) => {
            let mut line = format!("assistant: {}", message.text());
            for call in &a.tool_calls {
                line.push_str(&format!(
                    "\n  [called {} {}]",
                    call.tool_name, call.arguments
                ));
            }
            line
        }
        Message::ToolResult(results) => results
            .results
            .iter()
            .map(|r| {
                let text = match &r.result {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                format!(
                    "tool result{}: {}",
                    if r.is_error { " (error)" } else { "" },
                    clipped(text)
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The history of `messages` with every compression undone, as far as `load` finds the
/// checkpoints that hold the replaced messages: `load(agent_step)` gives the history of that
/// step's checkpoint. Each stand-in is followed by nothing (it is replaced by what it stood
/// for); a stand-in whose checkpoint is gone stays as it is. Returns the expanded history and
/// the markers that were expanded.
///
/// # Errors
/// What `load` returns.
pub async fn expand<F, Fut, E>(
    messages: Vec<Message>,
    mut load: F,
) -> Result<(Vec<Message>, Vec<Marker>), E>
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = Result<Option<Vec<Message>>, E>>,
{
    let mut expanded = Vec::new();
    let mut markers = Vec::new();
    // Work list, newest compression first; each stand-in replaced by its messages, which may
    // hold older stand-ins (a summary of a summary), expanded in turn. Bounded by the
    // generations: each expansion goes to an earlier checkpoint.
    let mut pending: std::collections::VecDeque<Message> = messages.into();
    let mut rounds = 0usize;
    while let Some(message) = pending.pop_front() {
        let marker = Marker::of(&message).filter(|_| rounds < 10_000);
        let Some(marker) = marker else {
            expanded.push(message);
            continue;
        };
        rounds += 1;
        let Some(history) = load(marker.agent_step).await? else {
            expanded.push(message);
            continue;
        };
        let mut originals = Vec::new();
        for range in &marker.replaced {
            let slice = history.get(range.from..range.to).unwrap_or_default();
            let matches = slice.first().map(Message::id) == Some(range.first_id.as_str())
                && slice.last().map(Message::id) == Some(range.last_id.as_str());
            if matches {
                originals.extend(slice.iter().cloned());
            }
        }
        if originals.is_empty() {
            expanded.push(message);
            continue;
        }
        markers.push(marker);
        for original in originals.into_iter().rev() {
            pending.push_front(original);
        }
    }
    Ok((expanded, markers))
}

/// Context management of one agent's steps under the profile: counts the tokens of the
/// next model call's context and compresses the history when they pass the trigger, with a
/// `compression` event in the run's log.
#[derive(Debug)]
pub struct ContextManager {
    config: ContextConfig,
    run: Option<Arc<RunContext>>,
    side: Option<Side>,
    /// The last model call's usage and the history length through its response, when the
    /// provider reported usage (cleared by a compression).
    reported: Mutex<Option<(TokenUsage, usize)>>,
    /// The estimate of the history so far: its tokens, through how many messages, the last
    /// of which has this id (checked before it is reused).
    estimated: Mutex<Option<(u64, usize, String)>>,
}

impl ContextManager {
    /// Context management with `config`, logging to `run` (when durable) with `side`.
    pub fn new(config: ContextConfig, run: Option<Arc<RunContext>>, side: Option<Side>) -> Self {
        ContextManager {
            config,
            run,
            side,
            reported: Mutex::new(None),
            estimated: Mutex::new(None),
        }
    }

    fn lock_estimated(&self) -> std::sync::MutexGuard<'_, Option<(u64, usize, String)>> {
        match self.estimated.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The tokens of the next model call's context (see [`count`]), over `state`'s history.
    pub fn count(
        &self,
        state: &weft_agent::AgentState,
        pending: &[Message],
        llm: &LlmInstance,
    ) -> TokenCount {
        let n = state.message_count();
        let since = |from: usize| -> u64 {
            (from..n)
                .filter_map(|i| state.message(i))
                .map(|m| estimate_one(&m))
                .sum()
        };
        if let Some((usage, at)) = self.reported().as_ref()
            && usage.input_tokens > 0
            && *at <= n
        {
            let (input, output) = usage
                .cycles
                .as_ref()
                .and_then(|cycles| cycles.last())
                .map_or((usage.input_tokens, usage.output_tokens), |c| {
                    (c.input_tokens, c.output_tokens)
                });
            return TokenCount {
                tokens: input + output + since(*at) + estimate(pending),
                source: "usage",
            };
        }
        let fixed = estimate_text(llm.system().unwrap_or_default())
            + llm
                .tools()
                .iter()
                .map(|t| {
                    estimate_text(&t.name)
                        + estimate_text(&t.description)
                        + estimate_text(&t.parameters.to_string())
                })
                .sum::<u64>();
        let mut cache = self.lock_estimated();
        let (known, upto) = match cache.as_ref() {
            Some((tokens, upto, last))
                if *upto <= n
                    && *upto > 0
                    && state.message(*upto - 1).is_some_and(|m| m.id() == last) =>
            {
                (*tokens, *upto)
            }
            _ => (0, 0),
        };
        let history = known + since(upto);
        if let Some(last) = n.checked_sub(1).and_then(|i| state.message(i)) {
            *cache = Some((history, n, last.id().to_owned()));
        }
        TokenCount {
            tokens: fixed + history + estimate(pending),
            source: "estimate",
        }
    }

    fn reported(&self) -> std::sync::MutexGuard<'_, Option<(TokenUsage, usize)>> {
        match self.reported.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A step ended with `turn`; `state` is the committed state after it. Remembers the
    /// step's last model call's usage when the provider reported it.
    pub fn step_ended(&self, turn: &Turn, state: &weft_agent::AgentState) {
        let n = state.message_count();
        // The response is among the step's last messages (its tool results after it).
        let answered = (n.saturating_sub(8)..n)
            .rev()
            .find(|&i| state.message(i).is_some_and(|m| m.id() == turn.response.id))
            .map(|i| i + 1);
        *self.reported() = match answered {
            Some(at) if turn.usage.input_tokens > 0 => Some((turn.usage.clone(), at)),
            _ => None,
        };
    }

    /// Before a model call on `state`'s history (the committed state, at its step) with
    /// `pending` messages to add, offered by `llm`: the compression made when the tokens
    /// pass the trigger and something can be replaced (its history to go on with, and the
    /// summary call's usage, which the caller counts in the run's), `None` otherwise.
    /// `summarizer` builds the summary model (the step's model without tools, with the given
    /// system prompt) when a summary is needed. Counting costs O(messages since the last
    /// count), not O(history).
    ///
    /// A summary that cannot be made — its call failed (a provider error, a timeout), it was
    /// empty, or there is no model for it — does not stop the run: the history is truncated
    /// instead, and the `compression` event says so (`fallbackFrom`, `reason`).
    ///
    /// # Errors
    /// [`CompressionError`]: the summary call was cancelled (the run is stopping).
    pub async fn before_call(
        &self,
        state: &weft_agent::AgentState,
        pending: &[Message],
        llm: &LlmInstance,
        summarizer: impl FnOnce(&str) -> Option<LlmInstance>,
        signal: tokio_util::sync::CancellationToken,
    ) -> Result<Option<Compressed>, CompressionError> {
        let model = format!("{}:{}", llm.model().provider(), llm.model().model_id());
        let (limit, limit_source) = self.config.limit_for(&model);
        let trigger = self.config.trigger(limit);
        let counted = self.count(state, pending, llm);
        if counted.tokens <= trigger {
            return Ok(None);
        }
        let history = state.messages_vec();
        let agent_step = state.step();
        let history = history.as_slice();
        let needs_model = self.config.compression_strategy != CompressionStrategy::Truncate;
        let summary_llm = needs_model
            .then(|| summarizer(SUMMARY_INSTRUCTIONS))
            .flatten();
        let generation = generation(history) + 1;
        let at = Attempt {
            history,
            agent_step,
            generation,
            before: counted.tokens,
            target: trigger,
            signal: &signal,
        };
        let made = match &summary_llm {
            Some(summarizer) => at.compress(&self.config, summarizer).await,
            None if needs_model => Err(CompressionError::NoModel),
            None => at.compress(&self.config, llm).await,
        };
        let (compressed, fallback) = match made {
            Ok(compressed) => (compressed, None),
            Err(error) if signal.is_cancelled() => return Err(error),
            Err(error) => {
                tracing::warn!(%error, "the context compression falls back to truncate");
                let truncate = ContextConfig {
                    compression_strategy: CompressionStrategy::Truncate,
                    ..self.config.clone()
                };
                // Truncating asks no model: it cannot fail.
                (at.compress(&truncate, llm).await?, Some(error.to_string()))
            }
        };
        let Some(compressed) = compressed else {
            tracing::warn!(
                tokens = counted.tokens,
                trigger,
                "the context is over the compression threshold but everything in it is kept"
            );
            return Ok(None);
        };
        *self.reported() = None;
        *self.lock_estimated() = None;
        if let Some(run) = &self.run {
            run.emit(EventKind::Compression {
                strategy: compressed.strategy.as_str().to_owned(),
                stage: compressed.stage.map(str::to_owned),
                tokens_before: compressed.tokens_before,
                tokens_after: compressed.tokens_after,
                token_source: counted.source.to_owned(),
                limit,
                limit_source: limit_source.to_owned(),
                trigger,
                agent_step,
                replaced: serde_json::to_value(&compressed.replaced).unwrap_or(Value::Null),
                summary_id: compressed.summary_id.clone(),
                fallback_from: fallback
                    .is_some()
                    .then(|| self.config.compression_strategy.as_str().to_owned()),
                reason: fallback,
                side: self.side,
            })
            .await;
        }
        Ok(Some(compressed))
    }
}

/// The arguments of [`compress`] one compression shares between its attempts (the
/// configured strategy, then `truncate`).
struct Attempt<'a> {
    history: &'a [Message],
    agent_step: u64,
    generation: u64,
    before: u64,
    target: u64,
    signal: &'a tokio_util::sync::CancellationToken,
}

impl Attempt<'_> {
    async fn compress(
        &self,
        config: &ContextConfig,
        summarizer: &LlmInstance,
    ) -> Result<Option<Compressed>, CompressionError> {
        compress(
            config,
            self.history,
            self.agent_step,
            self.generation,
            self.before,
            self.target,
            summarizer,
            self.signal.clone(),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use weft_provider::{AssistantMessage, ToolCall, ToolResult};

    fn call(id: &str) -> Message {
        Message::Assistant(
            AssistantMessage::new(
                Vec::new(),
                vec![ToolCall::new(id, "read_file", json!({"path": "a"}))],
                MessageOptions::default(),
            )
            .unwrap(),
        )
    }

    fn result(id: &str) -> Message {
        Message::ToolResult(ToolResultMessage::new(vec![ToolResult {
            tool_call_id: id.into(),
            result: json!("x".repeat(2000)),
            is_error: false,
        }]))
    }

    #[test]
    fn the_last_users_and_the_current_turn_are_kept() {
        // 0 U, 1 A, 2 T, 3 A, 4 T, 5 U, 6 A, 7 T, 8 A(current), 9 T(current)
        let history = vec![
            Message::user("task"),
            call("1"),
            result("1"),
            call("2"),
            result("2"),
            Message::user("also this"),
            call("3"),
            result("3"),
            call("4"),
            result("4"),
        ];
        assert_eq!(select(&history, 2), vec![1..5, 6..8]);
        // One user message kept: the older one is replaced too.
        assert_eq!(select(&history, 1), vec![0..5, 6..8]);
        // Nothing but the current turn.
        assert_eq!(select(&history, 0), vec![0..8]);
        // Every user message kept and no middle: nothing to do.
        let short = vec![Message::user("task"), call("1"), result("1")];
        assert!(select(&short, 1).is_empty());
        // The current turn is the last response and every tool result after it.
        let two_results = vec![Message::user("t"), call("1"), result("1"), result("1")];
        assert!(select(&two_results, 1).is_empty());
    }

    #[test]
    fn stand_ins_do_not_count_as_user_messages() {
        let mut summary = UserMessage::new(vec![ContentBlock::text("[Summary] …")]);
        summary.metadata = Some(marker_metadata(&Marker {
            generation: 1,
            strategy: "summarize".into(),
            agent_step: 3,
            replaced: Vec::new(),
            kind: "summary".into(),
        }));
        let history = vec![
            Message::user("task"),
            Message::User(summary),
            call("5"),
            result("5"),
            call("6"),
            result("6"),
        ];
        // The summary is compressed again; the task stays.
        assert_eq!(select(&history, 1), vec![1..4]);
        assert_eq!(generation_label(&history).as_deref(), Some("1"));
        assert_eq!(generation_label(&history[..1]), None);
    }

    #[test]
    fn counts_use_reported_usage_when_known() {
        let history = vec![Message::user("task"), call("1"), result("1")];
        let estimated = count(&history, &[], 10, None);
        assert_eq!(estimated.source, "estimate");
        assert_eq!(estimated.tokens, 10 + estimate(&history));
        let usage = TokenUsage::from_cycle(weft_provider::CycleUsage {
            input_tokens: 900,
            output_tokens: 20,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
        });
        // The call answered at message 2 (its response included): the tool result is new.
        let reported = count(&history, &[], 10, Some((&usage, 2)));
        assert_eq!(reported.source, "usage");
        assert_eq!(reported.tokens, 920 + estimate(&history[2..]));
    }

    fn summarizer(texts: &[&str]) -> LlmInstance {
        use weft_provider::adapters::scripted::{self, Script};
        let model = scripted::model(Script::texts(texts.iter().copied()));
        weft_provider::llm(weft_provider::LlmOptions::new(model)).unwrap()
    }

    /// 0 task, 1 A, 2 T, 3 A, 4 T, 5 A(current), 6 T(current).
    fn long_history() -> Vec<Message> {
        vec![
            Message::user("task"),
            call("1"),
            result("1"),
            call("2"),
            result("2"),
            call("3"),
            result("3"),
        ]
    }

    fn config(strategy: CompressionStrategy) -> ContextConfig {
        ContextConfig {
            preserve_last_n: 1,
            compression_strategy: strategy,
            ..ContextConfig::default()
        }
    }

    #[tokio::test]
    async fn each_strategy_replaces_the_middle_and_keeps_the_rest() {
        let history = long_history();
        let signal = tokio_util::sync::CancellationToken::new;
        // summarize: one model call; its summary stands for messages 1..5.
        let llm = summarizer(&["the summary"]);
        let done = compress(
            &config(CompressionStrategy::Summarize),
            &history,
            3,
            1,
            2000,
            100,
            &llm,
            signal(),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(done.history.len(), 4);
        assert_eq!(done.history[0], history[0]);
        assert_eq!(&done.history[2..], &history[5..]);
        assert!(done.history[1].text().contains("the summary"));
        let marker = Marker::of(&done.history[1]).unwrap();
        assert_eq!((marker.generation, marker.agent_step), (1, 3));
        assert_eq!(marker.kind, "summary");
        assert_eq!(
            marker.replaced,
            vec![ReplacedRange {
                from: 1,
                to: 5,
                first_id: history[1].id().into(),
                last_id: history[4].id().into()
            }]
        );
        assert!(done.tokens_after < done.tokens_before);
        assert_eq!(generation_label(&done.history).as_deref(), Some("1"));

        // truncate: no model call (the scripted model has no answer left); a note.
        let done = compress(
            &config(CompressionStrategy::Truncate),
            &history,
            3,
            2,
            2000,
            100,
            &summarizer(&[]),
            signal(),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(done.history.len(), 4);
        assert!(
            done.history[1]
                .text()
                .contains("4 earlier messages were removed")
        );
        assert_eq!(Marker::of(&done.history[1]).unwrap().kind, "note");

        // hybrid: clearing the middle's tool outputs is enough for a low count; every
        // message stays, the cleared ones stand for their originals.
        let done = compress(
            &config(CompressionStrategy::Hybrid),
            &history,
            3,
            3,
            1500,
            1000,
            &summarizer(&[]),
            signal(),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(done.stage, Some("cleared"));
        assert_eq!(done.history.len(), history.len());
        assert_eq!(done.history[1], history[1]);
        assert_ne!(done.history[2].id(), history[2].id());
        assert!(
            serde_json::to_string(&done.history[2])
                .unwrap()
                .contains(CLEARED_OUTPUT)
        );
        assert_eq!(
            done.history[6], history[6],
            "the current turn's results stay"
        );
        // Not enough: it summarizes.
        let done = compress(
            &config(CompressionStrategy::Hybrid),
            &history,
            3,
            3,
            5000,
            300,
            &summarizer(&["short"]),
            signal(),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(done.stage, Some("summarized"));
        assert_eq!(done.history.len(), 4);

        // Nothing to replace: no compression.
        let none = compress(
            &config(CompressionStrategy::Summarize),
            &history[..3],
            1,
            1,
            2000,
            100,
            &summarizer(&[]),
            signal(),
        )
        .await
        .unwrap();
        assert!(none.is_none());
        // A failed summary call is an error, not a silent loss.
        let failed = compress(
            &config(CompressionStrategy::Summarize),
            &history,
            3,
            1,
            2000,
            100,
            &summarizer(&[]),
            signal(),
        )
        .await;
        assert!(matches!(failed, Err(CompressionError::Summary(_))));
    }

    #[tokio::test]
    async fn expand_restores_what_compressions_replaced_even_nested() {
        let history = long_history();
        let signal = tokio_util::sync::CancellationToken::new;
        let first = compress(
            &config(CompressionStrategy::Summarize),
            &history,
            3,
            1,
            2000,
            100,
            &summarizer(&["first"]),
            signal(),
        )
        .await
        .unwrap()
        .unwrap();
        // Two more steps, then a second compression (at step 5) summarizes the first summary.
        let mut later = first.history.clone();
        later.extend([call("4"), result("4"), call("5"), result("5")]);
        let second = compress(
            &config(CompressionStrategy::Summarize),
            &later,
            5,
            2,
            2000,
            100,
            &summarizer(&["second"]),
            signal(),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(generation(&second.history), 2);
        let checkpoints =
            std::collections::HashMap::from([(3u64, history.clone()), (5, later.clone())]);
        let (expanded, markers) = expand(second.history.clone(), |step| {
            let found = checkpoints.get(&step).cloned();
            async move { Ok::<_, std::convert::Infallible>(found) }
        })
        .await
        .unwrap();
        assert_eq!(markers.len(), 2);
        let ids: Vec<&str> = expanded.iter().map(Message::id).collect();
        // The task, the first summary's originals, the steps after it, the current turn.
        let mut want: Vec<&str> = history.iter().map(Message::id).collect();
        want.extend(later[4..].iter().map(Message::id));
        assert_eq!(ids, want);
    }

    #[test]
    fn config_defaults_and_problems() {
        let config: ContextConfig = serde_json::from_value(json!({})).unwrap();
        assert_eq!(config.compression_threshold, 0.8);
        assert_eq!(config.compression_strategy, CompressionStrategy::Summarize);
        assert_eq!(config.limit_for("gpt-4o"), (128_000, "model"));
        assert_eq!(
            config.limit_for("local"),
            (DEFAULT_CONTEXT_LIMIT, "default")
        );
        assert_eq!(config.trigger(1000), 800);
        let config: ContextConfig =
            serde_json::from_value(json!({"maxTokens": 1000, "compressionStrategy": "hybrid"}))
                .unwrap();
        assert_eq!(config.limit_for("gpt-4o"), (1000, "maxTokens"));
        for strategy in ["summarize", "truncate", "hybrid"] {
            let c: ContextConfig =
                serde_json::from_value(json!({ "compressionStrategy": strategy })).unwrap();
            assert_eq!(c.compression_strategy.as_str(), strategy);
        }
        assert!(
            serde_json::from_value::<ContextConfig>(json!({"compressionStrategy": "drop"}))
                .is_err()
        );
        let bad = ContextConfig {
            compression_threshold: 1.5,
            ..ContextConfig::default()
        };
        assert_eq!(bad.problems()[0].0, "compressionThreshold");
    }
}
