//! Turns: what a user submitted ([`UserTurn`]) and one complete agent run ([`AgentTurn`]).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::serde_util::{from_body, serialize_tagged, split_tag};
use crate::types::{JsonMap, MessagePart, TurnMessage, Usage};

/// One turn of a thread, tagged by `turn_type`.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// `turn_type: "user"`.
    User(UserTurn),
    /// `turn_type: "agent"`.
    Agent(AgentTurn),
}

impl Turn {
    /// When the turn started: `submitted_at` or `started_at`.
    pub fn start(&self) -> &str {
        match self {
            Turn::User(turn) => &turn.submitted_at,
            Turn::Agent(turn) => &turn.started_at,
        }
    }

    /// When the turn ended: `submitted_at` or `completed_at`.
    pub fn end(&self) -> &str {
        match self {
            Turn::User(turn) => &turn.submitted_at,
            Turn::Agent(turn) => &turn.completed_at,
        }
    }
}

impl Serialize for Turn {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Turn::User(turn) => serialize_tagged(serializer, "turn_type", "user", turn),
            Turn::Agent(turn) => serialize_tagged(serializer, "turn_type", "agent", turn),
        }
    }
}

impl<'de> Deserialize<'de> for Turn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (tag, body) = split_tag(deserializer, "turn_type")?;
        match tag.as_str() {
            "user" => from_body(body).map(Turn::User),
            "agent" => from_body(body).map(Turn::Agent),
            other => Err(serde::de::Error::unknown_variant(other, &["user", "agent"])),
        }
    }
}

/// What a user submitted; it serves as the initial model request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserTurn {
    /// ISO 8601 submission time.
    pub submitted_at: String,
    /// The submitted parts, usually one `user-prompt`.
    pub parts: Vec<MessagePart>,
    /// Namespaced client directives; never passed to a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata: Option<JsonMap>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// One complete agent run. Partial turns never appear in a thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentTurn {
    /// The agent whose turn this is (a key of the registry).
    pub agent_id: String,
    /// ISO 8601 start of the run.
    pub started_at: String,
    /// ISO 8601 end of the run.
    pub completed_at: String,
    /// Every message of the run, in order.
    pub messages: Vec<TurnMessage>,
    /// Usage aggregated over the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_usage: Option<Usage>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

impl AgentTurn {
    /// The sum of the `usage` of every message, or `None` when no message has usage.
    pub fn aggregate_usage(&self) -> Option<Usage> {
        let mut total: Option<Usage> = None;
        for message in &self.messages {
            if let TurnMessage::Thread(message) = message
                && let Some(usage) = &message.usage
            {
                total.get_or_insert_with(Usage::default).accumulate(usage);
            }
        }
        total
    }
}
