//! Message parts (Pydantic AI's parts, minus `system-prompt`), tagged by `part_kind`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::serde_util::{from_body, serialize_tagged, split_tag};
use crate::types::{BinaryContent, ContentRef, JsonMap, UserContent};

/// One part of a message or user turn.
///
/// The seven normative kinds are typed; every other kind (`custom:*`, `meta:*` or unknown) is
/// [`MessagePart::Other`] and round-trips unchanged.
#[derive(Debug, Clone, PartialEq)]
pub enum MessagePart {
    /// `part_kind: "user-prompt"`.
    UserPrompt(UserPromptPart),
    /// `part_kind: "text"`.
    Text(TextPart),
    /// `part_kind: "thinking"`.
    Thinking(ThinkingPart),
    /// `part_kind: "tool-call"`.
    ToolCall(ToolCallPart),
    /// `part_kind: "tool-return"`.
    ToolReturn(ToolReturnPart),
    /// `part_kind: "retry-prompt"`.
    RetryPrompt(RetryPromptPart),
    /// `part_kind: "file"`.
    File(FilePart),
    /// Any other part kind, kept whole (including `part_kind`).
    Other(JsonMap),
}

impl MessagePart {
    /// The normative part kinds (TP-002).
    pub const NORMATIVE_KINDS: [&'static str; 7] = [
        "text",
        "thinking",
        "tool-call",
        "tool-return",
        "retry-prompt",
        "user-prompt",
        "file",
    ];

    /// The part's `part_kind`.
    pub fn kind(&self) -> &str {
        match self {
            Self::UserPrompt(_) => "user-prompt",
            Self::Text(_) => "text",
            Self::Thinking(_) => "thinking",
            Self::ToolCall(_) => "tool-call",
            Self::ToolReturn(_) => "tool-return",
            Self::RetryPrompt(_) => "retry-prompt",
            Self::File(_) => "file",
            Self::Other(map) => map.get("part_kind").and_then(Value::as_str).unwrap_or(""),
        }
    }
}

impl Serialize for MessagePart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let kind = self.kind();
        match self {
            Self::UserPrompt(part) => serialize_tagged(serializer, "part_kind", kind, part),
            Self::Text(part) => serialize_tagged(serializer, "part_kind", kind, part),
            Self::Thinking(part) => serialize_tagged(serializer, "part_kind", kind, part),
            Self::ToolCall(part) => serialize_tagged(serializer, "part_kind", kind, part),
            Self::ToolReturn(part) => serialize_tagged(serializer, "part_kind", kind, part),
            Self::RetryPrompt(part) => serialize_tagged(serializer, "part_kind", kind, part),
            Self::File(part) => serialize_tagged(serializer, "part_kind", kind, part),
            Self::Other(map) => map.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for MessagePart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (kind, body) = split_tag(deserializer, "part_kind")?;
        Ok(match kind.as_str() {
            "user-prompt" => Self::UserPrompt(from_body(body)?),
            "text" => Self::Text(from_body(body)?),
            "thinking" => Self::Thinking(from_body(body)?),
            "tool-call" => Self::ToolCall(from_body(body)?),
            "tool-return" => Self::ToolReturn(from_body(body)?),
            "retry-prompt" => Self::RetryPrompt(from_body(body)?),
            "file" => Self::File(from_body(body)?),
            _ => {
                let mut map = JsonMap::with_capacity(body.len() + 1);
                map.insert("part_kind".to_owned(), Value::String(kind));
                map.extend(body);
                Self::Other(map)
            }
        })
    }
}

/// Text content from the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextPart {
    /// The text.
    pub content: String,
    /// Provider or stream ID of the part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// Model reasoning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThinkingPart {
    /// Visible thinking text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Opaque provider signature; must round-trip byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The provider the thinking may be sent back to.
    pub provider_name: String,
    /// Provider ID of the thinking block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_id: Option<String>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// A tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallPart {
    /// The tool's name.
    pub tool_name: String,
    /// Correlates the call with its [`ToolReturnPart`].
    pub tool_call_id: String,
    /// The arguments: any JSON (Pydantic AI may hold a raw JSON string).
    pub args: Value,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// The outcome of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolReturnStatus {
    /// The tool succeeded.
    Success,
    /// The tool failed.
    Error,
    /// The arguments did not validate.
    ValidationError,
}

/// The result of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolReturnPart {
    /// The tool's name.
    pub tool_name: String,
    /// The ID of the [`ToolCallPart`] this answers.
    pub tool_call_id: String,
    /// How the call went.
    pub status: ToolReturnStatus,
    /// The inline result (`null` is kept).
    #[serde(
        default,
        deserialize_with = "crate::serde_util::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub content: Option<Value>,
    /// A reference to the result stored elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_ref: Option<ContentRef>,
    /// Additional context (`null` is kept).
    #[serde(
        default,
        deserialize_with = "crate::serde_util::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub metadata: Option<Value>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// The content of a [`RetryPromptPart`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RetryPromptContent {
    /// A message to the model.
    Text(String),
    /// Validation errors (Pydantic `ErrorDetails`), kept as JSON.
    Errors(Vec<Value>),
}

/// A request to the model to try again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryPromptPart {
    /// Why to retry.
    pub content: RetryPromptContent,
    /// The tool whose call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// The failed call's ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// Binary or media content produced by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilePart {
    /// The file.
    pub content: BinaryContent,
    /// Provider ID of the part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// The content of a [`UserPromptPart`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserPromptContent {
    /// Plain text.
    Text(String),
    /// Text and media items.
    Items(Vec<UserContent>),
}

/// User input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserPromptPart {
    /// What the user wrote or attached.
    pub content: UserPromptContent,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}
