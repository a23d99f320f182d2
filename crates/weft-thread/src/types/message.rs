//! Messages of an agent turn: model requests and responses ([`ThreadMessage`]) and system events
//! ([`SystemMessage`]).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::serde_util::{from_body, serialize_tagged};
use crate::types::{FinishReason, JsonMap, MessagePart, Usage};

/// A message of an agent turn, distinguished by `message_type`.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnMessage {
    /// `message_type: "request" | "response"`.
    Thread(ThreadMessage),
    /// `message_type: "system"`.
    System(SystemMessage),
}

impl TurnMessage {
    /// The message's ISO 8601 timestamp.
    pub fn timestamp(&self) -> &str {
        match self {
            TurnMessage::Thread(message) => &message.timestamp,
            TurnMessage::System(message) => &message.timestamp,
        }
    }
}

impl Serialize for TurnMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            TurnMessage::Thread(message) => message.serialize(serializer),
            TurnMessage::System(message) => {
                serialize_tagged(serializer, "message_type", "system", message)
            }
        }
    }
}

impl<'de> Deserialize<'de> for TurnMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut body = JsonMap::deserialize(deserializer)?;
        match body.get("message_type") {
            Some(Value::String(kind)) if kind == "system" => {
                body.remove("message_type");
                from_body(body).map(TurnMessage::System)
            }
            _ => from_body(body).map(TurnMessage::Thread),
        }
    }
}

/// Whether a [`ThreadMessage`] went to the model or came from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    /// A Pydantic AI `ModelRequest`.
    Request,
    /// A Pydantic AI `ModelResponse`.
    Response,
}

/// A Pydantic AI `ModelMessage` with multi-agent attribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadMessage {
    /// Request or response.
    pub message_type: MessageType,
    /// ISO 8601 time of the message.
    pub timestamp: String,
    /// The message's parts.
    pub parts: Vec<MessagePart>,
    /// The agent that produced the message.
    pub agent_id: String,
    /// Model that produced a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    /// Provider that served a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_name: Option<String>,
    /// The provider's ID for a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_response_id: Option<String>,
    /// Usage of a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Why a response ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// An event outside the model's scope (handoffs, sources, `data-*` events, errors, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemMessage {
    /// ISO 8601 time of the event.
    pub timestamp: String,
    /// The event type: normative (`agent.handoff`, `thread.spawn`, `thread.merge`,
    /// `thread.end`, `error`) or an extension (`data-*`, `meta:*`, `source.*`, …).
    pub event_type: String,
    /// The event's payload.
    pub event_data: Value,
    /// The agent that triggered the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_agent: Option<String>,
    /// The agents the event affects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_agents: Option<Vec<String>>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// The normative system event types (TP-003); they are never redefined.
pub const NORMATIVE_EVENT_TYPES: [&str; 5] = [
    "agent.handoff",
    "thread.spawn",
    "thread.merge",
    "thread.end",
    "error",
];
