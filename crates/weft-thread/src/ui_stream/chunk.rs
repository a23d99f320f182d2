//! The chunks of the Vercel AI SDK UI message stream (v5 set, plus the later types as
//! [`UiChunk::Other`]), read from and written to JSON.
//!
//! Fields the mapping does not use (`providerExecuted`, `dynamic`, `title`, …) are not kept.

use serde_json::{Map, Value};

use crate::types::JsonMap;

/// One UI message stream chunk.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum UiChunk {
    /// `start` (also read from `message-start`).
    Start {
        /// `messageId`.
        message_id: Option<String>,
        /// `messageMetadata`.
        message_metadata: Option<Value>,
    },
    /// `start-step`.
    StartStep,
    /// `text-start`.
    TextStart {
        /// Part ID.
        id: String,
        /// `providerMetadata`.
        provider_metadata: Option<Value>,
    },
    /// `text-delta`.
    TextDelta {
        /// Part ID.
        id: String,
        /// Text to append.
        delta: String,
    },
    /// `text-end`.
    TextEnd {
        /// Part ID.
        id: String,
        /// `providerMetadata`.
        provider_metadata: Option<Value>,
    },
    /// `reasoning-start`.
    ReasoningStart {
        /// Part ID.
        id: String,
        /// `providerMetadata`.
        provider_metadata: Option<Value>,
    },
    /// `reasoning-delta`.
    ReasoningDelta {
        /// Part ID.
        id: String,
        /// Text to append.
        delta: String,
    },
    /// `reasoning-end`.
    ReasoningEnd {
        /// Part ID.
        id: String,
        /// `providerMetadata`.
        provider_metadata: Option<Value>,
    },
    /// `tool-input-start`.
    ToolInputStart {
        /// `toolCallId`.
        tool_call_id: String,
        /// `toolName`.
        tool_name: String,
    },
    /// `tool-input-delta`.
    ToolInputDelta {
        /// `toolCallId`.
        tool_call_id: String,
        /// `inputTextDelta`: a fragment of the arguments' JSON text.
        input_text_delta: String,
    },
    /// `tool-input-available`.
    ToolInputAvailable {
        /// `toolCallId`.
        tool_call_id: String,
        /// `toolName`.
        tool_name: String,
        /// The parsed arguments.
        input: Value,
    },
    /// `tool-input-error`.
    ToolInputError {
        /// `toolCallId`.
        tool_call_id: String,
        /// `toolName`.
        tool_name: String,
        /// The arguments as received.
        input: Value,
        /// `errorText`.
        error_text: String,
    },
    /// `tool-output-available`.
    ToolOutputAvailable {
        /// `toolCallId`.
        tool_call_id: String,
        /// The result.
        output: Value,
        /// `preliminary: true` marks a non-final result.
        preliminary: bool,
    },
    /// `tool-output-error`.
    ToolOutputError {
        /// `toolCallId`.
        tool_call_id: String,
        /// `errorText`.
        error_text: String,
    },
    /// `tool-output-denied`.
    ToolOutputDenied {
        /// `toolCallId`.
        tool_call_id: String,
    },
    /// `source-url`: the chunk's members other than `type`.
    SourceUrl(JsonMap),
    /// `source-document`: the chunk's members other than `type`.
    SourceDocument(JsonMap),
    /// `file`.
    File {
        /// A `data:` URL or an HTTP URL.
        url: String,
        /// `mediaType`.
        media_type: String,
        /// `providerMetadata`.
        provider_metadata: Option<Value>,
    },
    /// `data-*`.
    Data {
        /// The full chunk type, e.g. `data-weather`.
        name: String,
        /// Reconciliation ID.
        id: Option<String>,
        /// The payload.
        data: Value,
        /// Transient data is not stored in the UI message.
        transient: bool,
    },
    /// `finish-step`.
    FinishStep,
    /// `reset-step` (v7): drop the parts of the current step.
    ResetStep,
    /// `message-metadata`.
    MessageMetadata {
        /// `messageMetadata`.
        message_metadata: Value,
    },
    /// `finish`.
    Finish {
        /// `finishReason` (absent in ai@5.0.0).
        finish_reason: Option<String>,
        /// `messageMetadata`.
        message_metadata: Option<Value>,
    },
    /// `error`.
    Error {
        /// `errorText`.
        error_text: String,
    },
    /// `abort`.
    Abort {
        /// `reason` (v6+).
        reason: Option<String>,
    },
    /// Any other chunk type (`tool-approval-request`, `custom`, `reasoning-file`, …), whole.
    Other(JsonMap),
}

/// A JSON value that is not a usable chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    /// Not a JSON object.
    #[error("a chunk must be a JSON object")]
    NotAnObject,
    /// No string `type`.
    #[error("a chunk needs a string `type`")]
    MissingType,
    /// A required field is missing or has the wrong type.
    #[error("`{chunk_type}` chunk: field `{field}` is missing or has the wrong type")]
    Field {
        /// The chunk type.
        chunk_type: String,
        /// The field.
        field: &'static str,
    },
}

fn take_string(
    map: &mut Map<String, Value>,
    chunk_type: &str,
    field: &'static str,
) -> Result<String, ChunkError> {
    match map.remove(field) {
        Some(Value::String(text)) => Ok(text),
        _ => Err(ChunkError::Field {
            chunk_type: chunk_type.to_owned(),
            field,
        }),
    }
}

fn take_optional_string(map: &mut Map<String, Value>, field: &str) -> Option<String> {
    match map.remove(field) {
        Some(Value::String(text)) => Some(text),
        _ => None,
    }
}

impl UiChunk {
    /// Reads a chunk from its JSON object.
    ///
    /// # Errors
    ///
    /// [`ChunkError`] when the value is not an object with a `type`, or a known chunk type lacks
    /// a required field.
    pub fn from_value(value: Value) -> Result<Self, ChunkError> {
        let Value::Object(mut map) = value else {
            return Err(ChunkError::NotAnObject);
        };
        let chunk_type = match map.get("type") {
            Some(Value::String(chunk_type)) => chunk_type.clone(),
            _ => return Err(ChunkError::MissingType),
        };
        let t = chunk_type.as_str();
        let provider_metadata = |map: &mut Map<String, Value>| map.remove("providerMetadata");
        Ok(match t {
            "start" | "message-start" => UiChunk::Start {
                message_id: take_optional_string(&mut map, "messageId"),
                message_metadata: map.remove("messageMetadata"),
            },
            "start-step" => UiChunk::StartStep,
            "text-start" => UiChunk::TextStart {
                id: take_string(&mut map, t, "id")?,
                provider_metadata: provider_metadata(&mut map),
            },
            "text-delta" => UiChunk::TextDelta {
                id: take_string(&mut map, t, "id")?,
                delta: take_string(&mut map, t, "delta")?,
            },
            "text-end" => UiChunk::TextEnd {
                id: take_string(&mut map, t, "id")?,
                provider_metadata: provider_metadata(&mut map),
            },
            "reasoning-start" => UiChunk::ReasoningStart {
                id: take_string(&mut map, t, "id")?,
                provider_metadata: provider_metadata(&mut map),
            },
            "reasoning-delta" => UiChunk::ReasoningDelta {
                id: take_string(&mut map, t, "id")?,
                delta: take_string(&mut map, t, "delta")?,
            },
            "reasoning-end" => UiChunk::ReasoningEnd {
                id: take_string(&mut map, t, "id")?,
                provider_metadata: provider_metadata(&mut map),
            },
            "tool-input-start" => UiChunk::ToolInputStart {
                tool_call_id: take_string(&mut map, t, "toolCallId")?,
                tool_name: take_string(&mut map, t, "toolName")?,
            },
            "tool-input-delta" => UiChunk::ToolInputDelta {
                tool_call_id: take_string(&mut map, t, "toolCallId")?,
                input_text_delta: take_string(&mut map, t, "inputTextDelta")?,
            },
            "tool-input-available" => UiChunk::ToolInputAvailable {
                tool_call_id: take_string(&mut map, t, "toolCallId")?,
                tool_name: take_string(&mut map, t, "toolName")?,
                input: map.remove("input").unwrap_or(Value::Null),
            },
            "tool-input-error" => UiChunk::ToolInputError {
                tool_call_id: take_string(&mut map, t, "toolCallId")?,
                tool_name: take_string(&mut map, t, "toolName")?,
                input: map.remove("input").unwrap_or(Value::Null),
                error_text: take_string(&mut map, t, "errorText")?,
            },
            "tool-output-available" => UiChunk::ToolOutputAvailable {
                tool_call_id: take_string(&mut map, t, "toolCallId")?,
                output: map.remove("output").unwrap_or(Value::Null),
                preliminary: map
                    .get("preliminary")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            },
            "tool-output-error" => UiChunk::ToolOutputError {
                tool_call_id: take_string(&mut map, t, "toolCallId")?,
                error_text: take_string(&mut map, t, "errorText")?,
            },
            "tool-output-denied" => UiChunk::ToolOutputDenied {
                tool_call_id: take_string(&mut map, t, "toolCallId")?,
            },
            "source-url" | "source-document" => {
                map.remove("type");
                if t == "source-url" {
                    UiChunk::SourceUrl(map)
                } else {
                    UiChunk::SourceDocument(map)
                }
            }
            "file" => UiChunk::File {
                url: take_string(&mut map, t, "url")?,
                media_type: take_string(&mut map, t, "mediaType")?,
                provider_metadata: provider_metadata(&mut map),
            },
            "finish-step" => UiChunk::FinishStep,
            "reset-step" => UiChunk::ResetStep,
            "message-metadata" => UiChunk::MessageMetadata {
                message_metadata: map.remove("messageMetadata").unwrap_or(Value::Null),
            },
            "finish" => UiChunk::Finish {
                finish_reason: take_optional_string(&mut map, "finishReason"),
                message_metadata: map.remove("messageMetadata"),
            },
            "error" => UiChunk::Error {
                error_text: take_string(&mut map, t, "errorText")?,
            },
            "abort" => UiChunk::Abort {
                reason: take_optional_string(&mut map, "reason"),
            },
            _ if t.starts_with("data-") => UiChunk::Data {
                name: chunk_type.clone(),
                id: take_optional_string(&mut map, "id"),
                data: map.remove("data").unwrap_or(Value::Null),
                transient: map
                    .get("transient")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            },
            _ => UiChunk::Other(map),
        })
    }

    /// Parses a chunk from JSON text.
    ///
    /// # Errors
    ///
    /// [`crate::ui_stream::StreamError`] when the text is not JSON or not a usable chunk.
    pub fn from_json(text: &str) -> Result<Self, crate::ui_stream::StreamError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|error| crate::ui_stream::StreamError::Json(error.to_string()))?;
        Self::from_value(value).map_err(crate::ui_stream::StreamError::Chunk)
    }

    /// The chunk as a JSON object with `type` first.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        let mut put = |key: &str, value: Value| {
            map.insert(key.to_owned(), value);
        };
        let s = |text: &str| Value::String(text.to_owned());
        match self {
            UiChunk::Start {
                message_id,
                message_metadata,
            } => {
                put("type", s("start"));
                if let Some(id) = message_id {
                    put("messageId", s(id));
                }
                if let Some(metadata) = message_metadata {
                    put("messageMetadata", metadata.clone());
                }
            }
            UiChunk::StartStep => put("type", s("start-step")),
            UiChunk::TextStart {
                id,
                provider_metadata,
            }
            | UiChunk::TextEnd {
                id,
                provider_metadata,
            }
            | UiChunk::ReasoningStart {
                id,
                provider_metadata,
            }
            | UiChunk::ReasoningEnd {
                id,
                provider_metadata,
            } => {
                let chunk_type = match self {
                    UiChunk::TextStart { .. } => "text-start",
                    UiChunk::TextEnd { .. } => "text-end",
                    UiChunk::ReasoningStart { .. } => "reasoning-start",
                    _ => "reasoning-end",
                };
                put("type", s(chunk_type));
                put("id", s(id));
                if let Some(metadata) = provider_metadata {
                    put("providerMetadata", metadata.clone());
                }
            }
            UiChunk::TextDelta { id, delta } | UiChunk::ReasoningDelta { id, delta } => {
                put(
                    "type",
                    s(if matches!(self, UiChunk::TextDelta { .. }) {
                        "text-delta"
                    } else {
                        "reasoning-delta"
                    }),
                );
                put("id", s(id));
                put("delta", s(delta));
            }
            UiChunk::ToolInputStart {
                tool_call_id,
                tool_name,
            } => {
                put("type", s("tool-input-start"));
                put("toolCallId", s(tool_call_id));
                put("toolName", s(tool_name));
            }
            UiChunk::ToolInputDelta {
                tool_call_id,
                input_text_delta,
            } => {
                put("type", s("tool-input-delta"));
                put("toolCallId", s(tool_call_id));
                put("inputTextDelta", s(input_text_delta));
            }
            UiChunk::ToolInputAvailable {
                tool_call_id,
                tool_name,
                input,
            } => {
                put("type", s("tool-input-available"));
                put("toolCallId", s(tool_call_id));
                put("toolName", s(tool_name));
                put("input", input.clone());
            }
            UiChunk::ToolInputError {
                tool_call_id,
                tool_name,
                input,
                error_text,
            } => {
                put("type", s("tool-input-error"));
                put("toolCallId", s(tool_call_id));
                put("toolName", s(tool_name));
                put("input", input.clone());
                put("errorText", s(error_text));
            }
            UiChunk::ToolOutputAvailable {
                tool_call_id,
                output,
                preliminary,
            } => {
                put("type", s("tool-output-available"));
                put("toolCallId", s(tool_call_id));
                put("output", output.clone());
                if *preliminary {
                    put("preliminary", Value::Bool(true));
                }
            }
            UiChunk::ToolOutputError {
                tool_call_id,
                error_text,
            } => {
                put("type", s("tool-output-error"));
                put("toolCallId", s(tool_call_id));
                put("errorText", s(error_text));
            }
            UiChunk::ToolOutputDenied { tool_call_id } => {
                put("type", s("tool-output-denied"));
                put("toolCallId", s(tool_call_id));
            }
            UiChunk::SourceUrl(fields) | UiChunk::SourceDocument(fields) => {
                put(
                    "type",
                    s(if matches!(self, UiChunk::SourceUrl(_)) {
                        "source-url"
                    } else {
                        "source-document"
                    }),
                );
                for (key, value) in fields {
                    put(key, value.clone());
                }
            }
            UiChunk::File {
                url,
                media_type,
                provider_metadata,
            } => {
                put("type", s("file"));
                put("url", s(url));
                put("mediaType", s(media_type));
                if let Some(metadata) = provider_metadata {
                    put("providerMetadata", metadata.clone());
                }
            }
            UiChunk::Data {
                name,
                id,
                data,
                transient,
            } => {
                put("type", s(name));
                if let Some(id) = id {
                    put("id", s(id));
                }
                put("data", data.clone());
                if *transient {
                    put("transient", Value::Bool(true));
                }
            }
            UiChunk::FinishStep => put("type", s("finish-step")),
            UiChunk::ResetStep => put("type", s("reset-step")),
            UiChunk::MessageMetadata { message_metadata } => {
                put("type", s("message-metadata"));
                put("messageMetadata", message_metadata.clone());
            }
            UiChunk::Finish {
                finish_reason,
                message_metadata,
            } => {
                put("type", s("finish"));
                if let Some(metadata) = message_metadata {
                    put("messageMetadata", metadata.clone());
                }
                if let Some(reason) = finish_reason {
                    put("finishReason", s(reason));
                }
            }
            UiChunk::Error { error_text } => {
                put("type", s("error"));
                put("errorText", s(error_text));
            }
            UiChunk::Abort { reason } => {
                put("type", s("abort"));
                if let Some(reason) = reason {
                    put("reason", s(reason));
                }
            }
            UiChunk::Other(fields) => {
                if let Some(chunk_type) = fields.get("type") {
                    put("type", chunk_type.clone());
                }
                for (key, value) in fields {
                    put(key, value.clone());
                }
            }
        }
        Value::Object(map)
    }
}
