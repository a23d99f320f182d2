//! The typed model of a ThreadProtocol v0.0.3 document.
//!
//! Every struct keeps the members it does not know in an `extra` map (`#[serde(flatten)]`), and
//! every enum of open kinds (parts, user content) has a raw variant, so parse → serialize keeps
//! unknown fields, `custom:*` parts and `meta:*` members (extension rules 1–4). Optional fields
//! whose spec type is `any` keep an explicit `null`; other optional fields must be absent or of
//! their type (a `null` there is a validation error, see [`crate::validate()`]).
//!
//! Timestamps stay the strings the document holds; [`crate::Timestamp`] parses them when order
//! matters. The typed model does not check cross-references: run [`crate::validate()`] on the
//! JSON value first.

mod content;
mod message;
mod part;
mod thread;
mod turn;
mod usage;

pub use content::{BinaryContent, ContentRef, MultiModalContent, UrlContent, UserContent};
pub use message::{MessageType, NORMATIVE_EVENT_TYPES, SystemMessage, ThreadMessage, TurnMessage};
pub use part::{
    FilePart, MessagePart, RetryPromptContent, RetryPromptPart, TextPart, ThinkingPart,
    ToolCallPart, ToolReturnPart, ToolReturnStatus, UserPromptContent, UserPromptPart,
};
pub use thread::{AgentConfig, PROTOCOL_VERSION, Thread, ThreadLink, ThreadRelationships};
pub use turn::{AgentTurn, Turn, UserTurn};
pub use usage::{FinishReason, Usage};

/// A JSON object: the type of `extra` maps and open records.
pub type JsonMap = serde_json::Map<String, serde_json::Value>;
