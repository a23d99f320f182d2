//! Messages: user input, assistant replies and tool results (UPP-1.2 §6.1–§6.2, §6.9).
//!
//! Every message has a unique `id` (a UUIDv4 unless given), a `timestamp` and optional
//! `metadata`, a map keyed by provider name. Providers read their own namespace and ignore the
//! others; everything in the map survives serialization unchanged.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::content::{
    AudioBlock, ContentBlock, DocumentBlock, ImageBlock, ReasoningBlock, VideoBlock,
};
use crate::tool::{ToolCall, ToolResult};

/// Provider-namespaced metadata: `{ "anthropic": {...}, "google": {...} }`.
pub type Metadata = serde_json::Map<String, serde_json::Value>;

/// A fresh UUIDv4 string.
///
/// The random bits come from a per-thread generator seeded from the OS (no system call per
/// id): ids must be unique, not secret.
pub fn new_id() -> String {
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    // Encoded in place (no formatting machinery), then one allocation of the exact size.
    uuid::Builder::from_random_bytes(fastrand::u128(..).to_le_bytes())
        .into_uuid()
        .hyphenated()
        .encode_lower(&mut text)
        .to_owned()
}

/// The three message kinds (§14.5.1 `MessageRole`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    /// `user`
    User,
    /// `assistant`
    Assistant,
    /// `tool_result`
    ToolResult,
}

/// Optional id and metadata for a new message (§6.2 `MessageOptions`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageOptions {
    /// The id to use instead of a generated one.
    pub id: Option<String>,
    /// Initial metadata.
    pub metadata: Option<Metadata>,
}

/// A message of a conversation.
///
/// # Examples
///
/// ```
/// use weft_provider::{Message, MessageType};
///
/// let message = Message::user("What is 2 + 2?");
/// assert_eq!(message.message_type(), MessageType::User);
/// assert_eq!(message.text(), "What is 2 + 2?");
/// let json = serde_json::to_value(&message)?;
/// assert_eq!(json["type"], "user");
/// assert_eq!(json["content"][0]["text"], "What is 2 + 2?");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// Input from the user.
    User(UserMessage),
    /// A model reply.
    Assistant(AssistantMessage),
    /// Results of tool calls.
    ToolResult(ToolResultMessage),
}

impl Message {
    /// A user message with one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User(UserMessage::new(vec![ContentBlock::text(text)]))
    }

    /// An assistant message with one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::Assistant(AssistantMessage::text(text))
    }

    /// The message's id.
    pub fn id(&self) -> &str {
        match self {
            Message::User(m) => &m.id,
            Message::Assistant(m) => &m.id,
            Message::ToolResult(m) => &m.id,
        }
    }

    /// When the message was created.
    pub fn timestamp(&self) -> DateTime<Utc> {
        match self {
            Message::User(m) => m.timestamp,
            Message::Assistant(m) => m.timestamp,
            Message::ToolResult(m) => m.timestamp,
        }
    }

    /// The message's metadata.
    pub fn metadata(&self) -> Option<&Metadata> {
        match self {
            Message::User(m) => m.metadata.as_ref(),
            Message::Assistant(m) => m.metadata.as_ref(),
            Message::ToolResult(m) => m.metadata.as_ref(),
        }
    }

    /// Its kind.
    pub fn message_type(&self) -> MessageType {
        match self {
            Message::User(_) => MessageType::User,
            Message::Assistant(_) => MessageType::Assistant,
            Message::ToolResult(_) => MessageType::ToolResult,
        }
    }

    /// The content blocks (empty for tool results).
    pub fn content(&self) -> &[ContentBlock] {
        match self {
            Message::User(m) => &m.content,
            Message::Assistant(m) => &m.content,
            Message::ToolResult(_) => &[],
        }
    }

    /// All text blocks joined with `"\n\n"` (§6.1).
    pub fn text(&self) -> String {
        join_text(self.content())
    }

    /// All image blocks.
    pub fn images(&self) -> Vec<&ImageBlock> {
        self.content()
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Image(i) => Some(i),
                _ => None,
            })
            .collect()
    }

    /// All document blocks.
    pub fn documents(&self) -> Vec<&DocumentBlock> {
        self.content()
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Document(d) => Some(d),
                _ => None,
            })
            .collect()
    }

    /// All audio blocks.
    pub fn audio(&self) -> Vec<&AudioBlock> {
        self.content()
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Audio(a) => Some(a),
                _ => None,
            })
            .collect()
    }

    /// All video blocks.
    pub fn video(&self) -> Vec<&VideoBlock> {
        self.content()
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Video(v) => Some(v),
                _ => None,
            })
            .collect()
    }

    /// Whether this is a user message (§6.9 `isUserMessage`).
    pub fn is_user(&self) -> bool {
        matches!(self, Message::User(_))
    }

    /// Whether this is an assistant message (§6.9 `isAssistantMessage`).
    pub fn is_assistant(&self) -> bool {
        matches!(self, Message::Assistant(_))
    }

    /// Whether this is a tool result message (§6.9 `isToolResultMessage`).
    pub fn is_tool_result(&self) -> bool {
        matches!(self, Message::ToolResult(_))
    }
}

/// `isUserMessage` as a free function.
pub fn is_user_message(message: &Message) -> bool {
    message.is_user()
}

/// `isAssistantMessage` as a free function.
pub fn is_assistant_message(message: &Message) -> bool {
    message.is_assistant()
}

/// `isToolResultMessage` as a free function.
pub fn is_tool_result_message(message: &Message) -> bool {
    message.is_tool_result()
}

pub(crate) fn join_text(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for text in blocks.iter().filter_map(ContentBlock::as_text) {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(text);
    }
    out
}

impl From<UserMessage> for Message {
    fn from(m: UserMessage) -> Self {
        Message::User(m)
    }
}

impl From<AssistantMessage> for Message {
    fn from(m: AssistantMessage) -> Self {
        Message::Assistant(m)
    }
}

impl From<ToolResultMessage> for Message {
    fn from(m: ToolResultMessage) -> Self {
        Message::ToolResult(m)
    }
}

/// Input from the user: text, images, documents, audio, video or binary blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// Unique id.
    pub id: String,
    /// The content.
    pub content: Vec<ContentBlock>,
    /// Creation time (ISO 8601 on the wire).
    pub timestamp: DateTime<Utc>,
    /// Provider-namespaced metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl UserMessage {
    /// A user message with a generated id.
    pub fn new(content: Vec<ContentBlock>) -> Self {
        UserMessage::with_options(content, MessageOptions::default())
    }

    /// A user message with the given id and metadata.
    pub fn with_options(content: Vec<ContentBlock>, options: MessageOptions) -> Self {
        UserMessage {
            id: options.id.unwrap_or_else(new_id),
            content,
            timestamp: Utc::now(),
            metadata: options.metadata,
        }
    }
}

/// A model reply: content (reasoning first, then text and media) and optional tool calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "AssistantWire")]
pub struct AssistantMessage {
    /// Unique id.
    pub id: String,
    /// The content: text, reasoning, image, audio or video blocks (never binary).
    pub content: Vec<ContentBlock>,
    /// Tool calls the model requested, in the model's order.
    #[serde(rename = "toolCalls", default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Creation time.
    pub timestamp: DateTime<Utc>,
    /// Provider-namespaced metadata (e.g. `{"openai": {"finishReason": "stop"}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Why an assistant message could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "assistant content may not contain a binary block (block {index}); binary data is user content only"
)]
pub struct BinaryInAssistantContent {
    /// Index of the offending block.
    pub index: usize,
}

#[derive(Deserialize)]
struct AssistantWire {
    id: String,
    content: Vec<ContentBlock>,
    #[serde(rename = "toolCalls", default)]
    tool_calls: Option<Vec<ToolCall>>,
    timestamp: DateTime<Utc>,
    #[serde(default)]
    metadata: Option<Metadata>,
}

impl TryFrom<AssistantWire> for AssistantMessage {
    type Error = BinaryInAssistantContent;

    fn try_from(wire: AssistantWire) -> Result<Self, Self::Error> {
        check_assistant_content(&wire.content)?;
        Ok(AssistantMessage {
            id: wire.id,
            content: wire.content,
            tool_calls: wire.tool_calls.unwrap_or_default(),
            timestamp: wire.timestamp,
            metadata: wire.metadata,
        })
    }
}

fn check_assistant_content(content: &[ContentBlock]) -> Result<(), BinaryInAssistantContent> {
    match content
        .iter()
        .position(|b| matches!(b, ContentBlock::Binary(_)))
    {
        Some(index) => Err(BinaryInAssistantContent { index }),
        None => Ok(()),
    }
}

impl AssistantMessage {
    /// An assistant message with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        AssistantMessage {
            id: new_id(),
            content: vec![ContentBlock::text(text)],
            tool_calls: Vec::new(),
            timestamp: Utc::now(),
            metadata: None,
        }
    }

    /// Builds an assistant message from content and tool calls. Reasoning blocks are moved
    /// before the other blocks (keeping their relative order), as §6.3 requires.
    ///
    /// # Errors
    /// When the content holds a binary block (§6.3: user content only).
    pub fn new(
        mut content: Vec<ContentBlock>,
        tool_calls: Vec<ToolCall>,
        options: MessageOptions,
    ) -> Result<Self, BinaryInAssistantContent> {
        check_assistant_content(&content)?;
        if content.windows(2).any(|w| {
            !matches!(w[0], ContentBlock::Reasoning(_))
                && matches!(w[1], ContentBlock::Reasoning(_))
        }) {
            content.sort_by_key(|b| !matches!(b, ContentBlock::Reasoning(_)));
        }
        Ok(AssistantMessage {
            id: options.id.unwrap_or_else(new_id),
            content,
            tool_calls,
            timestamp: Utc::now(),
            metadata: options.metadata,
        })
    }

    /// Whether the model requested tool calls.
    pub fn has_tool_calls(&self) -> bool {
        !self.tool_calls.is_empty()
    }

    /// Text blocks joined with `"\n\n"`.
    pub fn text_content(&self) -> String {
        join_text(&self.content)
    }

    /// The reasoning blocks.
    pub fn reasoning(&self) -> impl Iterator<Item = &ReasoningBlock> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::Reasoning(r) => Some(r),
            _ => None,
        })
    }

    /// This provider's metadata namespace.
    pub fn provider_metadata(&self, provider: &str) -> Option<&serde_json::Value> {
        self.metadata.as_ref().and_then(|m| m.get(provider))
    }
}

/// The results of one round of tool calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultMessage {
    /// Unique id.
    pub id: String,
    /// One result per executed call, in call order.
    pub results: Vec<ToolResult>,
    /// Creation time.
    pub timestamp: DateTime<Utc>,
    /// Provider-namespaced metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl ToolResultMessage {
    /// A tool result message with a generated id.
    pub fn new(results: Vec<ToolResult>) -> Self {
        ToolResultMessage {
            id: new_id(),
            results,
            timestamp: Utc::now(),
            metadata: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::content::{BinaryBlock, Blob};
    use serde_json::json;

    #[test]
    fn text_joins_text_blocks_with_blank_line() {
        let message = Message::User(UserMessage::new(vec![
            ContentBlock::text("a"),
            ContentBlock::reasoning("ignored"),
            ContentBlock::text("b"),
        ]));
        assert_eq!(message.text(), "a\n\nb");
    }

    #[test]
    fn ids_are_unique_and_options_win() {
        let a = UserMessage::new(vec![]);
        let b = UserMessage::new(vec![]);
        assert_ne!(a.id, b.id);
        let c = UserMessage::with_options(
            vec![],
            MessageOptions {
                id: Some("fixed".into()),
                metadata: None,
            },
        );
        assert_eq!(c.id, "fixed");
    }

    #[test]
    fn assistant_rejects_binary_content_when_built_and_when_parsed() {
        let binary = ContentBlock::Binary(BinaryBlock {
            data: Blob(vec![0]),
            mime_type: "application/octet-stream".into(),
            metadata: None,
        });
        assert_eq!(
            AssistantMessage::new(vec![binary.clone()], vec![], MessageOptions::default()),
            Err(BinaryInAssistantContent { index: 0 })
        );
        let json = json!({"type": "assistant", "id": "x", "timestamp": "2026-01-01T00:00:00Z",
            "content": [serde_json::to_value(&binary).unwrap()]});
        let error = serde_json::from_value::<Message>(json).unwrap_err();
        assert!(error.to_string().contains("binary"), "{error}");
    }

    #[test]
    fn reasoning_is_moved_before_text() {
        let message = AssistantMessage::new(
            vec![ContentBlock::text("answer"), ContentBlock::reasoning("why")],
            vec![],
            MessageOptions::default(),
        )
        .unwrap();
        assert!(matches!(message.content[0], ContentBlock::Reasoning(_)));
    }

    #[test]
    fn unknown_metadata_namespaces_survive_a_round_trip() {
        let json = json!({"type": "assistant", "id": "m1", "timestamp": "2026-01-01T00:00:00Z",
            "content": [{"type": "text", "text": "hi"}],
            "toolCalls": [{"toolCallId": "c1", "toolName": "t", "arguments": {"a": 1}}],
            "metadata": {"future-provider": {"nested": [1, 2, {"x": null}]}}});
        let message: Message = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&message).unwrap(), json);
        let Message::Assistant(assistant) = &message else {
            panic!("not assistant")
        };
        assert!(assistant.has_tool_calls());
    }
}
