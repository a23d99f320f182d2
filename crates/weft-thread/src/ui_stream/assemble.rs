//! Stream → thread: the incremental [`Assembler`] and the [`ThreadBuilder`] that collects its
//! events into a [`Thread`].
//!
//! Rules (spec "Event Stream to ThreadProtocol Bijection" and "Critical Rules"):
//! - `start` (or `message-start`) begins an agent turn and its `messageId` is kept as the turn
//!   member `meta:ui_message_id` (a `meta:` member, so it does not change the default hash); a
//!   content chunk without a `start` begins one too.
//! - `text-*`, `reasoning-*`, `tool-input-*` sequences become parts only when their closing
//!   chunk arrives; a `*-start` without its end is discarded (at `finish-step`, `finish`,
//!   `reset-step` or the end of the stream).
//! - Nothing is canonical before `finish`: only then is the turn emitted, whole (turns are
//!   atomic). `abort`, a new `start`, or the end of the stream discard the pending turn and
//!   report an [`Interruption`] (Strategy 1 of the implementation guide).
//! - Timestamps come from `data-weft` annotations when present, otherwise from the injected
//!   [`Clock`] at receipt of the chunk that opened the message / turn or of `finish`.
//! - `data-*` chunks become system messages with that `event_type` (transient ones are skipped
//!   unless [`AssemblerOptions::keep_transient_data`]); `source-url` / `source-document` become
//!   `source.url` / `source.document` system messages with the chunk's members as `event_data`;
//!   `error` inside a turn becomes an `error` system message `{errorText}`, outside a turn it is
//!   reported as [`AssemblyEvent::StreamError`].
//! - A tool output (`tool-output-available`, `-error`, `-denied`) whose call the stream never
//!   announced is reported as an [`AssemblyEvent::StreamError`] and adds no part.
//! - Without annotations, model parts (text, thinking, tool calls, files) go to `response`
//!   messages and tool results to `request` messages; switching between the two, `start-step`
//!   and `finish-step` close the current message. System messages that arrive while a message
//!   is open are placed right after it.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::clock::{Clock, SystemClock};
use crate::hash::content_uuid;
use crate::types::{
    AgentConfig, AgentTurn, JsonMap, PROTOCOL_VERSION, Thread, Turn, TurnMessage, UserTurn,
};
use crate::ui_stream::ANNOTATION_CHUNK_TYPE;
use crate::ui_stream::chunk::UiChunk;
use crate::ui_stream::mapping;
use crate::{ParseError, Timestamp};

/// Options of the [`Assembler`].
#[derive(Debug, Clone)]
pub struct AssemblerOptions {
    /// Agent of turns whose stream does not name one (default `assistant`).
    pub default_agent_id: String,
    /// `provider_name` of reasoning without `providerMetadata` (default `unknown`).
    pub default_thinking_provider: String,
    /// Record transient `data-*` chunks as system messages too (default: skip them, as the AI
    /// SDK does not store them).
    pub keep_transient_data: bool,
}

impl Default for AssemblerOptions {
    fn default() -> Self {
        Self {
            default_agent_id: "assistant".to_owned(),
            default_thinking_provider: "unknown".to_owned(),
            keep_transient_data: false,
        }
    }
}

/// Why a pending turn was discarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterruptionReason {
    /// An `abort` chunk, with its reason.
    Aborted(Option<String>),
    /// The stream ended before `finish`.
    IncompleteStream,
    /// A new `start` arrived before `finish`.
    Superseded,
    /// The turn's annotations do not form a valid turn.
    Invalid(String),
}

/// A discarded partial turn: what the application may log or show (it never enters the thread).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interruption {
    /// Why it was discarded.
    pub reason: InterruptionReason,
    /// The turn's agent.
    pub agent_id: String,
    /// When the turn started.
    pub started_at: String,
    /// The text received so far (completed and pending text parts), for Strategy 2 of the guide.
    pub partial_text: String,
}

/// What the assembler reports.
#[derive(Debug, Clone, PartialEq)]
pub enum AssemblyEvent {
    /// A thread header (`data-weft` kind `thread`): the thread without `turns`.
    ThreadHeader(JsonMap),
    /// A complete user turn (`data-weft` kind `user-turn`).
    UserTurn(UserTurn),
    /// A complete agent turn: canonical from now on.
    AgentTurn(AgentTurn),
    /// A partial turn was discarded.
    Interrupted(Interruption),
    /// An `error` chunk outside any turn, or a chunk the stream's protocol does not allow
    /// (the output of a tool call that was never announced).
    StreamError(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    Model,
    Tool,
}

#[derive(Debug)]
struct OpenMessage {
    header: JsonMap,
    parts: Vec<Value>,
    annotated: bool,
    category: Category,
}

#[derive(Debug, Default)]
struct Buffer {
    content: String,
    provider_metadata: Option<Value>,
}

#[derive(Debug)]
struct PendingTurn {
    header: Option<JsonMap>,
    end: Option<JsonMap>,
    agent_id: String,
    message_id: Option<String>,
    started_at: Timestamp,
    messages: Vec<Value>,
    open: Option<OpenMessage>,
    queued_system: Vec<Value>,
    system_header: Option<JsonMap>,
    text: HashMap<String, Buffer>,
    reasoning: HashMap<String, Buffer>,
    tool_inputs: HashMap<String, String>,
    finish_reason: Option<&'static str>,
}

impl PendingTurn {
    fn discard_incomplete(&mut self) {
        self.text.clear();
        self.reasoning.clear();
        self.tool_inputs.clear();
    }

    fn partial_text(&self) -> String {
        let mut text = String::new();
        let messages = self
            .messages
            .iter()
            .chain(self.open.iter().flat_map(|open| open.parts.iter()));
        for value in messages {
            let parts = value
                .get("parts")
                .and_then(Value::as_array)
                .map_or(std::slice::from_ref(value), Vec::as_slice);
            for part in parts {
                if part.get("part_kind").and_then(Value::as_str) == Some("text")
                    && let Some(content) = part.get("content").and_then(Value::as_str)
                {
                    text.push_str(content);
                }
            }
        }
        for buffer in self.text.values() {
            text.push_str(&buffer.content);
        }
        text
    }
}

/// The incremental stream → turn assembler. Feed it chunks with [`Assembler::push`]; it returns
/// events, among them [`AssemblyEvent::AgentTurn`] for each completed turn. Call
/// [`Assembler::finish`] at the end of the stream.
///
/// # Examples
///
/// ```
/// use weft_thread::clock::FixedClock;
/// use weft_thread::ui_stream::{Assembler, AssemblerOptions, AssemblyEvent, UiChunk};
/// use weft_thread::Timestamp;
///
/// let clock = FixedClock(Timestamp::parse("2025-01-20T10:00:00Z")?);
/// let mut assembler = Assembler::with_clock(AssemblerOptions::default(), clock);
/// let mut events = Vec::new();
/// for line in [
///     r#"{"type":"text-start","id":"1"}"#,
///     r#"{"type":"text-delta","id":"1","delta":"Hello"}"#,
///     r#"{"type":"text-end","id":"1"}"#,
///     r#"{"type":"finish"}"#,
/// ] {
///     events.extend(assembler.push(UiChunk::from_json(line)?));
/// }
/// assert!(matches!(&events[..], [AssemblyEvent::AgentTurn(turn)] if turn.messages.len() == 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Assembler<C: Clock = SystemClock> {
    options: AssemblerOptions,
    clock: C,
    pending: Option<PendingTurn>,
    tool_names: HashMap<String, String>,
}

impl Assembler<SystemClock> {
    /// An assembler using the system clock for receipt times.
    pub fn new(options: AssemblerOptions) -> Self {
        Self::with_clock(options, SystemClock)
    }
}

impl<C: Clock> Assembler<C> {
    /// An assembler with an injected clock.
    pub fn with_clock(options: AssemblerOptions, clock: C) -> Self {
        Self {
            options,
            clock,
            pending: None,
            tool_names: HashMap::new(),
        }
    }

    /// Whether a turn is being received.
    pub fn has_pending_turn(&self) -> bool {
        self.pending.is_some()
    }

    /// Ends the stream: a pending turn is discarded ([`InterruptionReason::IncompleteStream`]).
    pub fn finish(&mut self) -> Vec<AssemblyEvent> {
        self.pending
            .take()
            .map(|turn| vec![interrupted(turn, InterruptionReason::IncompleteStream)])
            .unwrap_or_default()
    }

    fn begin_turn(&mut self, message_id: Option<String>) {
        self.pending = Some(new_turn(&self.options, &self.clock, message_id));
    }

    fn turn(&mut self) -> &mut PendingTurn {
        let (options, clock) = (&self.options, &self.clock);
        self.pending
            .get_or_insert_with(|| new_turn(options, clock, None))
    }

    /// A tool output becomes a tool-return part of the call this stream announced. The output
    /// of a call the stream never announced (no `tool-input-available` / `tool-input-error`
    /// for its id) is a [`AssemblyEvent::StreamError`] and adds nothing: the thread would
    /// name an unknown `tool_call_id` (the AI SDK's client rejects such a chunk too).
    fn tool_return(
        &mut self,
        tool_call_id: &str,
        status: &str,
        content: Value,
        outcome: Option<&str>,
        events: &mut Vec<AssemblyEvent>,
    ) {
        let Some(name) = self.tool_names.get(tool_call_id) else {
            events.push(AssemblyEvent::StreamError(format!(
                "tool output for tool call `{tool_call_id}`, which the stream never announced"
            )));
            return;
        };
        let mut part =
            mapping::tool_return_part(tool_call_id, Some(name.as_str()), status, content);
        if let Some(outcome) = outcome {
            part.insert("outcome".into(), Value::String(outcome.into()));
        }
        self.add_part(part, Category::Tool);
    }

    /// Feeds one chunk; returns what it completed.
    pub fn push(&mut self, chunk: UiChunk) -> Vec<AssemblyEvent> {
        let mut events = Vec::new();
        match chunk {
            UiChunk::Start { message_id, .. } => {
                if let Some(previous) = self.pending.take() {
                    events.push(interrupted(previous, InterruptionReason::Superseded));
                }
                self.begin_turn(message_id);
            }
            UiChunk::StartStep => close_open(self.turn()),
            UiChunk::FinishStep => {
                let turn = self.turn();
                close_open(turn);
                turn.discard_incomplete();
            }
            UiChunk::ResetStep => {
                if let Some(turn) = &mut self.pending {
                    turn.open = None;
                    turn.discard_incomplete();
                }
            }
            UiChunk::TextStart {
                id,
                provider_metadata,
            } => {
                self.turn().text.insert(
                    id,
                    Buffer {
                        content: String::new(),
                        provider_metadata,
                    },
                );
            }
            UiChunk::TextDelta { id, delta } => {
                if let Some(buffer) = self
                    .pending
                    .as_mut()
                    .and_then(|turn| turn.text.get_mut(&id))
                {
                    buffer.content.push_str(&delta);
                }
            }
            UiChunk::TextEnd { id, .. } => {
                if let Some(buffer) = self.pending.as_mut().and_then(|turn| turn.text.remove(&id)) {
                    let part = mapping::text_part(&id, buffer.content);
                    self.add_part(part, Category::Model);
                }
            }
            UiChunk::ReasoningStart {
                id,
                provider_metadata,
            } => {
                self.turn().reasoning.insert(
                    id,
                    Buffer {
                        content: String::new(),
                        provider_metadata,
                    },
                );
            }
            UiChunk::ReasoningDelta { id, delta } => {
                if let Some(buffer) = self
                    .pending
                    .as_mut()
                    .and_then(|turn| turn.reasoning.get_mut(&id))
                {
                    buffer.content.push_str(&delta);
                }
            }
            UiChunk::ReasoningEnd {
                id,
                provider_metadata,
            } => {
                if let Some(buffer) = self
                    .pending
                    .as_mut()
                    .and_then(|turn| turn.reasoning.remove(&id))
                {
                    let metadata = buffer.provider_metadata.or(provider_metadata);
                    let part = mapping::thinking_part(
                        &id,
                        buffer.content,
                        metadata.as_ref(),
                        &self.options.default_thinking_provider,
                    );
                    self.add_part(part, Category::Model);
                }
            }
            UiChunk::ToolInputStart {
                tool_call_id,
                tool_name,
            } => {
                self.turn().tool_inputs.insert(tool_call_id, tool_name);
            }
            UiChunk::ToolInputDelta { .. } => {}
            UiChunk::ToolInputAvailable {
                tool_call_id,
                tool_name,
                input,
            } => {
                if let Some(turn) = &mut self.pending {
                    turn.tool_inputs.remove(&tool_call_id);
                }
                let part = mapping::tool_call_part(&tool_call_id, &tool_name, input);
                self.tool_names.insert(tool_call_id, tool_name);
                self.add_part(part, Category::Model);
            }
            UiChunk::ToolInputError {
                tool_call_id,
                tool_name,
                input,
                error_text,
            } => {
                if let Some(turn) = &mut self.pending {
                    turn.tool_inputs.remove(&tool_call_id);
                }
                let mut part = mapping::tool_call_part(&tool_call_id, &tool_name, input);
                part.insert("input_error".into(), Value::String(error_text));
                self.tool_names.insert(tool_call_id, tool_name);
                self.add_part(part, Category::Model);
            }
            UiChunk::ToolOutputAvailable {
                tool_call_id,
                output,
                preliminary,
            } => {
                if !preliminary {
                    self.tool_return(&tool_call_id, "success", output, None, &mut events);
                }
            }
            UiChunk::ToolOutputError {
                tool_call_id,
                error_text,
            } => {
                let error = Value::String(error_text);
                self.tool_return(&tool_call_id, "error", error, None, &mut events);
            }
            UiChunk::ToolOutputDenied { tool_call_id } => {
                let error = Value::String("tool call denied".into());
                self.tool_return(&tool_call_id, "error", error, Some("denied"), &mut events);
            }
            UiChunk::File {
                url,
                media_type,
                provider_metadata,
            } => {
                let part = mapping::file_part(&url, &media_type, provider_metadata.as_ref());
                self.add_part(part, Category::Model);
            }
            UiChunk::SourceUrl(fields) => self.add_system("source.url", Value::Object(fields)),
            UiChunk::SourceDocument(fields) => {
                self.add_system("source.document", Value::Object(fields))
            }
            UiChunk::Data {
                name,
                data,
                transient,
                ..
            } => {
                if name == ANNOTATION_CHUNK_TYPE {
                    self.annotation(data, &mut events);
                } else if !transient || self.options.keep_transient_data {
                    self.add_system(&name, data);
                }
            }
            UiChunk::Error { error_text } => {
                if self.pending.is_some() {
                    let mut data = Map::new();
                    data.insert("errorText".into(), Value::String(error_text));
                    self.add_system("error", Value::Object(data));
                } else {
                    events.push(AssemblyEvent::StreamError(error_text));
                }
            }
            UiChunk::Abort { reason } => {
                if let Some(turn) = self.pending.take() {
                    events.push(interrupted(turn, InterruptionReason::Aborted(reason)));
                }
            }
            UiChunk::Finish { finish_reason, .. } => {
                if let Some(turn) = &mut self.pending {
                    turn.finish_reason = finish_reason
                        .as_deref()
                        .and_then(mapping::finish_reason_from_ui);
                }
                if let Some(turn) = self.pending.take() {
                    let now = self.clock.now();
                    events.push(complete(turn, now));
                }
            }
            UiChunk::MessageMetadata { .. } | UiChunk::Other(_) => {}
        }
        events
    }

    fn add_part(&mut self, part: JsonMap, category: Category) {
        let now = self.clock.now();
        let turn = self.turn();
        let reuse = turn
            .open
            .as_ref()
            .is_some_and(|open| open.annotated || open.category == category);
        if !reuse {
            close_open(turn);
            let mut header = Map::with_capacity(3);
            let message_type = if category == Category::Model {
                "response"
            } else {
                "request"
            };
            header.insert("message_type".into(), Value::String(message_type.into()));
            header.insert("timestamp".into(), Value::String(now.to_string()));
            header.insert("agent_id".into(), Value::String(turn.agent_id.clone()));
            turn.open = Some(OpenMessage {
                header,
                parts: Vec::new(),
                annotated: false,
                category,
            });
        }
        if let Some(open) = &mut turn.open {
            open.parts.push(Value::Object(part));
        }
    }

    fn add_system(&mut self, event_type: &str, event_data: Value) {
        let now = self.clock.now();
        let turn = self.turn();
        let message = match turn.system_header.take() {
            Some(mut header) => {
                header.insert("event_type".into(), Value::String(event_type.to_owned()));
                header.insert("event_data".into(), event_data);
                header
            }
            None => mapping::system_message(now.to_string(), event_type, event_data),
        };
        push_system(turn, Value::Object(message));
    }

    fn annotation(&mut self, data: Value, events: &mut Vec<AssemblyEvent>) {
        let Value::Object(mut data) = data else {
            return;
        };
        let kind = match data.remove("kind") {
            Some(Value::String(kind)) => kind,
            _ => return,
        };
        let object = |data: &mut JsonMap, key: &str| match data.remove(key) {
            Some(Value::Object(map)) => Some(map),
            _ => None,
        };
        match kind.as_str() {
            "thread" => {
                if let Some(thread) = object(&mut data, "thread") {
                    events.push(AssemblyEvent::ThreadHeader(thread));
                }
            }
            "user-turn" => {
                if let Some(turn) = object(&mut data, "turn")
                    && let Ok(Turn::User(turn)) = serde_json::from_value(Value::Object(turn))
                {
                    events.push(AssemblyEvent::UserTurn(turn));
                }
            }
            "turn" => {
                if let Some(header) = object(&mut data, "turn") {
                    let turn = self.turn();
                    if let Some(agent_id) = header.get("agent_id").and_then(Value::as_str) {
                        turn.agent_id = agent_id.to_owned();
                    }
                    turn.header = Some(header);
                }
            }
            "turn-end" => self.turn().end = Some(data),
            "message" => {
                if let Some(header) = object(&mut data, "message") {
                    let turn = self.turn();
                    close_open(turn);
                    let message_type = header.get("message_type").and_then(Value::as_str);
                    if message_type == Some("system") {
                        turn.system_header = Some(header);
                    } else {
                        let category = if message_type == Some("request") {
                            Category::Tool
                        } else {
                            Category::Model
                        };
                        turn.open = Some(OpenMessage {
                            header,
                            parts: Vec::new(),
                            annotated: true,
                            category,
                        });
                    }
                }
            }
            "part" => {
                if let Some(part) = object(&mut data, "part") {
                    let category = match part.get("part_kind").and_then(Value::as_str) {
                        Some("tool-return" | "retry-prompt" | "user-prompt") => Category::Tool,
                        _ => Category::Model,
                    };
                    self.add_part(part, category);
                }
            }
            "system" => {
                if let Some(message) = object(&mut data, "message") {
                    push_system(self.turn(), Value::Object(message));
                }
            }
            "patch" => {
                if let Some(Value::Object(part)) = self
                    .pending
                    .as_mut()
                    .and_then(|turn| turn.open.as_mut())
                    .and_then(|open| open.parts.last_mut())
                {
                    mapping::apply_patch(part, &data);
                }
            }
            _ => {}
        }
    }
}

fn new_turn(
    options: &AssemblerOptions,
    clock: &impl Clock,
    message_id: Option<String>,
) -> PendingTurn {
    PendingTurn {
        header: None,
        end: None,
        agent_id: options.default_agent_id.clone(),
        message_id,
        started_at: clock.now(),
        messages: Vec::new(),
        open: None,
        queued_system: Vec::new(),
        system_header: None,
        text: HashMap::new(),
        reasoning: HashMap::new(),
        tool_inputs: HashMap::new(),
        finish_reason: None,
    }
}

fn push_system(turn: &mut PendingTurn, message: Value) {
    if turn.open.is_some() {
        turn.queued_system.push(message);
    } else {
        turn.messages.push(message);
    }
}

fn close_open(turn: &mut PendingTurn) {
    if let Some(open) = turn.open.take()
        && (open.annotated || !open.parts.is_empty())
    {
        let mut message = open.header;
        message.insert("parts".into(), Value::Array(open.parts));
        turn.messages.push(Value::Object(message));
    }
    turn.messages.append(&mut turn.queued_system);
}

fn interrupted(turn: PendingTurn, reason: InterruptionReason) -> AssemblyEvent {
    AssemblyEvent::Interrupted(Interruption {
        partial_text: turn.partial_text(),
        reason,
        agent_id: turn.agent_id,
        started_at: turn.started_at.to_string(),
    })
}

fn complete(mut turn: PendingTurn, now: Timestamp) -> AssemblyEvent {
    close_open(&mut turn);
    turn.discard_incomplete();
    let annotated = turn.header.is_some();
    let mut map = match turn.header.take() {
        Some(header) => header,
        None => {
            let mut header = Map::new();
            header.insert("turn_type".into(), Value::String("agent".into()));
            header.insert("agent_id".into(), Value::String(turn.agent_id.clone()));
            header.insert(
                "started_at".into(),
                Value::String(turn.started_at.to_string()),
            );
            if let Some(id) = &turn.message_id {
                header.insert("meta:ui_message_id".into(), Value::String(id.clone()));
            }
            header
        }
    };
    map.insert("turn_type".into(), Value::String("agent".into()));
    let end = turn.end.take();
    let completed_at = end
        .as_ref()
        .and_then(|end| end.get("completed_at"))
        .cloned();
    map.insert(
        "completed_at".into(),
        completed_at.unwrap_or_else(|| Value::String(now.to_string())),
    );
    if !annotated
        && let Some(reason) = turn.finish_reason
        && let Some(last) =
            turn.messages.iter_mut().rev().find(|message| {
                message.get("message_type").and_then(Value::as_str) == Some("response")
            })
        && let Some(last) = last.as_object_mut()
    {
        last.entry("finish_reason")
            .or_insert_with(|| Value::String(reason.into()));
    }
    let messages = std::mem::take(&mut turn.messages);
    map.insert("messages".into(), Value::Array(messages));
    if let Some(usage) = end.and_then(|mut end| end.remove("total_usage")) {
        map.insert("total_usage".into(), usage);
    }
    match serde_json::from_value::<Turn>(Value::Object(map)) {
        Ok(Turn::Agent(mut agent_turn)) => {
            if !annotated && agent_turn.total_usage.is_none() {
                agent_turn.total_usage = agent_turn.aggregate_usage();
            }
            AssemblyEvent::AgentTurn(agent_turn)
        }
        Ok(Turn::User(_)) => interrupted(
            turn,
            InterruptionReason::Invalid("the turn annotation is not an agent turn".into()),
        ),
        Err(error) => interrupted(turn, InterruptionReason::Invalid(error.to_string())),
    }
}

/// What a thread built from a stream uses when the stream has no `data-weft` thread header.
#[derive(Debug, Clone, Default)]
pub struct ThreadDefaults {
    /// Thread ID; default: a UUID derived from the canonical turns (same stream, same ID).
    pub thread_id: Option<String>,
    /// Fallback `created_at` when there are no turns.
    pub created_at: Option<String>,
}

/// A thread built from a stream, with what was left out of it.
#[derive(Debug, Clone)]
pub struct AssembledThread {
    /// The thread: complete turns only.
    pub thread: Thread,
    /// Partial turns that were discarded.
    pub interruptions: Vec<Interruption>,
    /// `error` chunks received outside a turn.
    pub stream_errors: Vec<String>,
}

/// Collects [`AssemblyEvent`]s into a thread.
#[derive(Debug, Default)]
pub struct ThreadBuilder {
    header: Option<JsonMap>,
    turns: Vec<Turn>,
    interruptions: Vec<Interruption>,
    stream_errors: Vec<String>,
}

impl ThreadBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one event.
    pub fn apply(&mut self, event: AssemblyEvent) {
        match event {
            AssemblyEvent::ThreadHeader(header) => self.header = Some(header),
            AssemblyEvent::UserTurn(turn) => self.turns.push(Turn::User(turn)),
            AssemblyEvent::AgentTurn(turn) => self.turns.push(Turn::Agent(turn)),
            AssemblyEvent::Interrupted(interruption) => self.interruptions.push(interruption),
            AssemblyEvent::StreamError(text) => self.stream_errors.push(text),
        }
    }

    /// Builds the thread: the stream's header with its turns, or a header made from the turns
    /// (see [`ThreadDefaults`]; every agent referenced gets a registry entry named by its ID).
    ///
    /// # Errors
    ///
    /// [`ParseError::Shape`] when a `data-weft` thread header does not have the shape of a thread.
    pub fn build(
        self,
        defaults: &ThreadDefaults,
        clock: &impl Clock,
    ) -> Result<AssembledThread, ParseError> {
        let thread = match self.header {
            Some(mut header) => {
                let turns = serde_json::to_value(&self.turns).map_err(ParseError::Shape)?;
                header.insert("turns".into(), turns);
                Thread::from_value(Value::Object(header))?
            }
            None => default_thread(self.turns, defaults, clock),
        };
        Ok(AssembledThread {
            thread,
            interruptions: self.interruptions,
            stream_errors: self.stream_errors,
        })
    }
}

/// Builds a thread header around turns: deterministic thread ID (unless given), `created_at` /
/// `updated_at` from the first / last turn, and a registry entry for every referenced agent.
pub fn default_thread(turns: Vec<Turn>, defaults: &ThreadDefaults, clock: &impl Clock) -> Thread {
    let created_at = turns
        .first()
        .map(|turn| turn.start().to_owned())
        .or_else(|| defaults.created_at.clone())
        .unwrap_or_else(|| clock.now().to_string());
    let updated_at = turns
        .last()
        .map_or_else(|| created_at.clone(), |turn| turn.end().to_owned());
    let mut agents = std::collections::BTreeMap::new();
    let mut add = |id: &str| {
        agents.entry(id.to_owned()).or_insert_with(|| AgentConfig {
            agent_id: id.to_owned(),
            agent_name: id.to_owned(),
            model_name: None,
            provider_name: None,
            created_at: created_at.clone(),
            config_ref: None,
            extra: Map::new(),
        });
    };
    for turn in &turns {
        if let Turn::Agent(turn) = turn {
            add(&turn.agent_id);
            for message in &turn.messages {
                match message {
                    TurnMessage::Thread(message) => add(&message.agent_id),
                    TurnMessage::System(message) => {
                        message
                            .source_agent
                            .iter()
                            .chain(message.target_agents.iter().flatten())
                            .for_each(|id| add(id));
                    }
                }
            }
        }
    }
    let thread_id = defaults.thread_id.clone().unwrap_or_else(|| {
        let turns_json = serde_json::to_value(&turns).unwrap_or(Value::Null);
        content_uuid(&crate::canonical::canonicalize(
            &turns_json,
            crate::canonical::CanonicalOptions::default(),
        ))
    });
    Thread {
        version: PROTOCOL_VERSION.to_owned(),
        thread_id,
        created_at,
        updated_at,
        title: None,
        metadata: None,
        agents,
        turns,
        relationships: None,
        extra: Map::new(),
    }
}

/// Assembles a whole stream into a thread (turns that never finished are left out and reported).
///
/// # Errors
///
/// See [`ThreadBuilder::build`].
pub fn assemble_thread<C: Clock>(
    chunks: impl IntoIterator<Item = UiChunk>,
    options: AssemblerOptions,
    defaults: &ThreadDefaults,
    clock: C,
) -> Result<AssembledThread, ParseError> {
    let mut assembler = Assembler::with_clock(options, clock);
    let mut builder = ThreadBuilder::new();
    for chunk in chunks {
        for event in assembler.push(chunk) {
            builder.apply(event);
        }
    }
    for event in assembler.finish() {
        builder.apply(event);
    }
    builder.build(defaults, &assembler.clock)
}
