//! Stream events (UPP-1.2 §9.2, §9.6).
//!
//! Each inference cycle is `message_start`, then per content block `content_block_start` …
//! deltas … `content_block_stop`, then `message_stop`. Between cycles the `llm()` core emits
//! `tool_execution_start` / `tool_execution_end` for every tool it runs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::content::Blob;

/// The kind of a stream event (§14.5.1 `StreamEventType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamEventType {
    /// Partial text.
    TextDelta,
    /// Partial reasoning.
    ReasoningDelta,
    /// Partial image data.
    ImageDelta,
    /// Partial audio data.
    AudioDelta,
    /// Partial video data.
    VideoDelta,
    /// Partial tool call (name, then argument JSON fragments).
    ToolCallDelta,
    /// A tool started running.
    ToolExecutionStart,
    /// A tool finished.
    ToolExecutionEnd,
    /// A cycle's message started.
    MessageStart,
    /// A cycle's message is complete.
    MessageStop,
    /// A content block started.
    ContentBlockStart,
    /// A content block is complete.
    ContentBlockStop,
}

impl StreamEventType {
    /// The wire string, e.g. `"text_delta"`.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamEventType::TextDelta => "text_delta",
            StreamEventType::ReasoningDelta => "reasoning_delta",
            StreamEventType::ImageDelta => "image_delta",
            StreamEventType::AudioDelta => "audio_delta",
            StreamEventType::VideoDelta => "video_delta",
            StreamEventType::ToolCallDelta => "tool_call_delta",
            StreamEventType::ToolExecutionStart => "tool_execution_start",
            StreamEventType::ToolExecutionEnd => "tool_execution_end",
            StreamEventType::MessageStart => "message_start",
            StreamEventType::MessageStop => "message_stop",
            StreamEventType::ContentBlockStart => "content_block_start",
            StreamEventType::ContentBlockStop => "content_block_stop",
        }
    }
}

/// The payload of a stream event; which fields are set depends on the type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventDelta {
    /// Text (text and reasoning deltas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Binary data (image/audio/video deltas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Blob>,
    /// Tool call id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// A fragment of the tool call's argument JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_json: Option<String>,
    /// Tool result (`tool_execution_end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Whether the tool failed (`tool_execution_end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Unix time in milliseconds (`tool_execution_start` / `_end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
}

/// One streaming event.
///
/// # Examples
///
/// ```
/// use weft_provider::{StreamEvent, StreamEventType};
///
/// let event = StreamEvent::text_delta(0, "Hel");
/// assert_eq!(event.event_type, StreamEventType::TextDelta);
/// assert_eq!(
///     serde_json::to_string(&event)?,
///     r#"{"type":"text_delta","index":0,"delta":{"text":"Hel"}}"#
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamEvent {
    /// The event type.
    #[serde(rename = "type")]
    pub event_type: StreamEventType,
    /// The content block this event belongs to.
    pub index: u32,
    /// The payload.
    #[serde(default)]
    pub delta: EventDelta,
}

impl StreamEvent {
    /// An event with an empty delta.
    pub fn new(event_type: StreamEventType, index: u32) -> Self {
        StreamEvent {
            event_type,
            index,
            delta: EventDelta::default(),
        }
    }

    /// `message_start`.
    pub fn message_start() -> Self {
        StreamEvent::new(StreamEventType::MessageStart, 0)
    }

    /// `message_stop`.
    pub fn message_stop() -> Self {
        StreamEvent::new(StreamEventType::MessageStop, 0)
    }

    /// `content_block_start` at `index`.
    pub fn block_start(index: u32) -> Self {
        StreamEvent::new(StreamEventType::ContentBlockStart, index)
    }

    /// `content_block_stop` at `index`.
    pub fn block_stop(index: u32) -> Self {
        StreamEvent::new(StreamEventType::ContentBlockStop, index)
    }

    /// `text_delta`.
    pub fn text_delta(index: u32, text: impl Into<String>) -> Self {
        StreamEvent {
            event_type: StreamEventType::TextDelta,
            index,
            delta: EventDelta {
                text: Some(text.into()),
                ..EventDelta::default()
            },
        }
    }

    /// `reasoning_delta`.
    pub fn reasoning_delta(index: u32, text: impl Into<String>) -> Self {
        StreamEvent {
            event_type: StreamEventType::ReasoningDelta,
            index,
            delta: EventDelta {
                text: Some(text.into()),
                ..EventDelta::default()
            },
        }
    }

    /// `tool_call_delta` carrying any of id, name and an argument fragment.
    pub fn tool_call_delta(
        index: u32,
        tool_call_id: Option<String>,
        tool_name: Option<String>,
        arguments_json: Option<String>,
    ) -> Self {
        StreamEvent {
            event_type: StreamEventType::ToolCallDelta,
            index,
            delta: EventDelta {
                tool_call_id,
                tool_name,
                arguments_json,
                ..EventDelta::default()
            },
        }
    }
}
