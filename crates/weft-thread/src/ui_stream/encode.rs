//! Thread → stream: the inverse of [`crate::ui_stream::assemble`].
//!
//! Each agent turn is `start`, a `turn` annotation, one step per message (`start-step`, a
//! `message` annotation, the parts' chunks, `finish-step`), a `turn-end` annotation and
//! `finish`. System messages become `data-*`, `source-*` or `error` chunks when those express
//! them exactly, else a `system` annotation. After each part the encoder runs the assembler's
//! own mapping on the chunks it emitted and sends a `patch` annotation for any difference, so
//! reassembly gives back exactly the thread (the property tests check this).
//!
//! A `tool-return` whose call is not in the same turn is sent as a `part` annotation, because an
//! AI SDK client rejects `tool-output-*` for a tool call it has not seen in the message.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::types::{AgentTurn, JsonMap, MessagePart, SystemMessage, Thread, Turn, TurnMessage};
use crate::ui_stream::ANNOTATION_CHUNK_TYPE;
use crate::ui_stream::chunk::UiChunk;
use crate::ui_stream::mapping;
use crate::ui_stream::sse;

/// Which chunk set to emit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UiStreamVersion {
    /// The ai@5.0.0 chunk set, accepted by every client since (default).
    #[default]
    V5,
    /// Adds `finishReason` on `finish` (ai@5.0.x later releases, ai@6, ai@7).
    V6,
}

/// Options of the encoder.
#[derive(Debug, Clone, Copy, Default)]
pub struct EncodeOptions {
    /// The chunk set.
    pub version: UiStreamVersion,
}

fn to_map<T: Serialize>(value: &T) -> JsonMap {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

fn annotation(kind: &str, fill: impl FnOnce(&mut JsonMap)) -> UiChunk {
    let mut data = Map::new();
    data.insert("kind".into(), Value::String(kind.to_owned()));
    fill(&mut data);
    UiChunk::Data {
        name: ANNOTATION_CHUNK_TYPE.to_owned(),
        id: None,
        data: Value::Object(data),
        transient: true,
    }
}

fn annotation_with(kind: &str, key: &str, value: JsonMap) -> UiChunk {
    annotation(kind, |data| {
        data.insert(key.to_owned(), Value::Object(value));
    })
}

/// Encodes a whole thread: a `thread` annotation, then every turn in order.
pub fn encode_thread(thread: &Thread, options: &EncodeOptions) -> Vec<UiChunk> {
    let mut header = to_map(thread);
    header.remove("turns");
    let mut chunks = vec![annotation_with("thread", "thread", header)];
    let mut tool_names = HashMap::new();
    for turn in &thread.turns {
        match turn {
            Turn::User(_) => chunks.push(annotation_with("user-turn", "turn", to_map(turn))),
            Turn::Agent(agent_turn) => {
                encode_turn_into(agent_turn, options, &mut tool_names, &mut chunks)
            }
        }
    }
    chunks
}

/// Encodes one agent turn, as a server answering one request sends it.
///
/// `tool_names` maps tool call IDs to tool names across the stream; pass the same map for every
/// turn of one stream (the assembler keeps the same).
pub fn encode_agent_turn(
    turn: &AgentTurn,
    options: &EncodeOptions,
    tool_names: &mut HashMap<String, String>,
) -> Vec<UiChunk> {
    let mut chunks = Vec::new();
    encode_turn_into(turn, options, tool_names, &mut chunks);
    chunks
}

/// Frames chunks as SSE, ending with `data: [DONE]`.
pub fn to_sse(chunks: &[UiChunk]) -> String {
    let mut out = String::new();
    for chunk in chunks {
        sse::frame(&chunk.to_value().to_string(), &mut out);
    }
    out.push_str(sse::DONE);
    out
}

struct TurnEncoder<'a> {
    chunks: &'a mut Vec<UiChunk>,
    tool_names: &'a mut HashMap<String, String>,
    calls_in_turn: HashSet<String>,
    next_id: usize,
}

fn encode_turn_into(
    turn: &AgentTurn,
    options: &EncodeOptions,
    tool_names: &mut HashMap<String, String>,
    chunks: &mut Vec<UiChunk>,
) {
    let message_id = turn
        .extra
        .get("meta:ui_message_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    chunks.push(UiChunk::Start {
        message_id,
        message_metadata: None,
    });
    let mut header = to_map(&Turn::Agent(turn.clone()));
    for key in ["messages", "completed_at", "total_usage"] {
        header.remove(key);
    }
    chunks.push(annotation_with("turn", "turn", header));
    let mut encoder = TurnEncoder {
        chunks,
        tool_names,
        calls_in_turn: HashSet::new(),
        next_id: 0,
    };
    for message in &turn.messages {
        match message {
            TurnMessage::Thread(message) => {
                encoder.chunks.push(UiChunk::StartStep);
                let mut header = to_map(message);
                header.remove("parts");
                encoder
                    .chunks
                    .push(annotation_with("message", "message", header));
                for part in &message.parts {
                    encoder.part(part);
                }
                encoder.chunks.push(UiChunk::FinishStep);
            }
            TurnMessage::System(message) => encoder.system(message),
        }
    }
    chunks.push(annotation("turn-end", |data| {
        data.insert(
            "completed_at".into(),
            Value::String(turn.completed_at.clone()),
        );
        if let Some(usage) = &turn.total_usage {
            data.insert("total_usage".into(), Value::Object(to_map(usage)));
        }
    }));
    let finish_reason = match options.version {
        UiStreamVersion::V5 => None,
        UiStreamVersion::V6 => turn
            .messages
            .iter()
            .rev()
            .find_map(|message| match message {
                TurnMessage::Thread(message) => message
                    .finish_reason
                    .map(|reason| mapping::finish_reason_to_ui(reason.as_str()).to_owned()),
                TurnMessage::System(_) => None,
            }),
    };
    chunks.push(UiChunk::Finish {
        finish_reason,
        message_metadata: None,
    });
}

impl TurnEncoder<'_> {
    fn fresh_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}-{}", self.next_id)
    }

    fn patch(&mut self, actual: &JsonMap, derived: &JsonMap) {
        if let Some(patch) = mapping::diff(actual, derived) {
            self.chunks.push(UiChunk::Data {
                name: ANNOTATION_CHUNK_TYPE.to_owned(),
                id: None,
                data: Value::Object(patch),
                transient: true,
            });
        }
    }

    fn whole_part(&mut self, actual: JsonMap) {
        self.chunks.push(annotation_with("part", "part", actual));
    }

    fn part(&mut self, part: &MessagePart) {
        let actual = to_map(part);
        match part {
            MessagePart::Text(text) => {
                let id = text.id.clone().unwrap_or_else(|| self.fresh_id("text"));
                self.chunks.push(UiChunk::TextStart {
                    id: id.clone(),
                    provider_metadata: None,
                });
                if !text.content.is_empty() {
                    self.chunks.push(UiChunk::TextDelta {
                        id: id.clone(),
                        delta: text.content.clone(),
                    });
                }
                self.chunks.push(UiChunk::TextEnd {
                    id: id.clone(),
                    provider_metadata: None,
                });
                let derived = mapping::text_part(&id, text.content.clone());
                self.patch(&actual, &derived);
            }
            MessagePart::Thinking(thinking) => {
                let id = thinking
                    .thinking_id
                    .clone()
                    .unwrap_or_else(|| self.fresh_id("reasoning"));
                let mut entry = Map::new();
                if let Some(signature) = &thinking.signature {
                    entry.insert("signature".into(), Value::String(signature.clone()));
                }
                let mut metadata = Map::new();
                metadata.insert(thinking.provider_name.clone(), Value::Object(entry));
                let metadata = Value::Object(metadata);
                let content = thinking.content.clone().unwrap_or_default();
                self.chunks.push(UiChunk::ReasoningStart {
                    id: id.clone(),
                    provider_metadata: Some(metadata.clone()),
                });
                if !content.is_empty() {
                    self.chunks.push(UiChunk::ReasoningDelta {
                        id: id.clone(),
                        delta: content.clone(),
                    });
                }
                self.chunks.push(UiChunk::ReasoningEnd {
                    id: id.clone(),
                    provider_metadata: None,
                });
                let derived = mapping::thinking_part(&id, content, Some(&metadata), "");
                self.patch(&actual, &derived);
            }
            MessagePart::ToolCall(call) => {
                let id = call.tool_call_id.clone();
                self.chunks.push(UiChunk::ToolInputStart {
                    tool_call_id: id.clone(),
                    tool_name: call.tool_name.clone(),
                });
                self.chunks.push(UiChunk::ToolInputDelta {
                    tool_call_id: id.clone(),
                    input_text_delta: call.args.to_string(),
                });
                self.chunks.push(UiChunk::ToolInputAvailable {
                    tool_call_id: id.clone(),
                    tool_name: call.tool_name.clone(),
                    input: call.args.clone(),
                });
                self.tool_names.insert(id.clone(), call.tool_name.clone());
                self.calls_in_turn.insert(id.clone());
                let derived = mapping::tool_call_part(&id, &call.tool_name, call.args.clone());
                self.patch(&actual, &derived);
            }
            MessagePart::ToolReturn(result)
                if self.calls_in_turn.contains(&result.tool_call_id) =>
            {
                let id = result.tool_call_id.clone();
                let name = self.tool_names.get(&id).map(String::as_str);
                let derived = match (&result.status, &result.content) {
                    (
                        crate::ToolReturnStatus::Error | crate::ToolReturnStatus::ValidationError,
                        Some(Value::String(text)),
                    ) => {
                        self.chunks.push(UiChunk::ToolOutputError {
                            tool_call_id: id.clone(),
                            error_text: text.clone(),
                        });
                        mapping::tool_return_part(&id, name, "error", Value::String(text.clone()))
                    }
                    (_, content) => {
                        let output = content.clone().unwrap_or(Value::Null);
                        self.chunks.push(UiChunk::ToolOutputAvailable {
                            tool_call_id: id.clone(),
                            output: output.clone(),
                            preliminary: false,
                        });
                        mapping::tool_return_part(&id, name, "success", output)
                    }
                };
                self.patch(&actual, &derived);
            }
            MessagePart::File(file) => {
                let url = format!(
                    "data:{};base64,{}",
                    file.content.media_type, file.content.data
                );
                let mut weft = Map::new();
                weft.insert(
                    "identifier".into(),
                    Value::String(file.content.identifier.clone()),
                );
                let mut metadata = Map::new();
                metadata.insert("weft".into(), Value::Object(weft));
                let metadata = Value::Object(metadata);
                let derived = mapping::file_part(&url, &file.content.media_type, Some(&metadata));
                self.chunks.push(UiChunk::File {
                    url,
                    media_type: file.content.media_type.clone(),
                    provider_metadata: Some(metadata),
                });
                self.patch(&actual, &derived);
            }
            _ => self.whole_part(actual),
        }
    }

    fn system(&mut self, message: &SystemMessage) {
        let chunk = system_chunk(message);
        match chunk {
            Some(chunk) => {
                let mut header = to_map(message);
                header.remove("event_type");
                header.remove("event_data");
                header.insert("message_type".into(), Value::String("system".into()));
                self.chunks
                    .push(annotation_with("message", "message", header));
                self.chunks.push(chunk);
            }
            None => {
                let mut whole = to_map(message);
                whole.insert("message_type".into(), Value::String("system".into()));
                self.chunks
                    .push(annotation_with("system", "message", whole));
            }
        }
    }
}

/// The standard chunk that carries a system message's `event_type` and `event_data` exactly,
/// if there is one.
fn system_chunk(message: &SystemMessage) -> Option<UiChunk> {
    let event_type = message.event_type.as_str();
    let data = &message.event_data;
    let only = |allowed: &[&str], required: &[&str]| -> Option<JsonMap> {
        let fields = data.as_object()?;
        let keys_ok = fields.keys().all(|key| allowed.contains(&key.as_str()));
        let required_ok = required
            .iter()
            .all(|key| fields.get(*key).is_some_and(Value::is_string));
        let optional_ok = fields.iter().all(|(key, value)| match key.as_str() {
            "providerMetadata" => value.is_object(),
            _ => value.is_string(),
        });
        (keys_ok && required_ok && optional_ok).then(|| fields.clone())
    };
    match event_type {
        "error" => {
            let fields = only(&["errorText"], &["errorText"])?;
            let text = fields.get("errorText")?.as_str()?.to_owned();
            Some(UiChunk::Error { error_text: text })
        }
        "source.url" => only(
            &["sourceId", "url", "title", "providerMetadata"],
            &["sourceId", "url"],
        )
        .map(UiChunk::SourceUrl),
        "source.document" => only(
            &[
                "sourceId",
                "mediaType",
                "title",
                "filename",
                "providerMetadata",
            ],
            &["sourceId", "mediaType", "title"],
        )
        .map(UiChunk::SourceDocument),
        _ if event_type.starts_with("data-") && event_type != ANNOTATION_CHUNK_TYPE => {
            Some(UiChunk::Data {
                name: event_type.to_owned(),
                id: None,
                data: data.clone(),
                transient: false,
            })
        }
        _ => None,
    }
}
