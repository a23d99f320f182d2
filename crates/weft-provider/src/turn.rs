//! `Turn` and `TokenUsage`: the complete result of one `generate` (UPP-1.2 §7).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{AssistantMessage, Message};
use crate::tool::ToolExecution;

/// Token counts of one inference cycle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CycleUsage {
    /// Input (prompt) tokens.
    pub input_tokens: u64,
    /// Output (completion) tokens, reasoning included.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
}

/// Token usage of a turn: totals plus one entry per cycle (§7.1).
///
/// # Examples
///
/// ```
/// use weft_provider::{CycleUsage, TokenUsage};
///
/// let mut usage = TokenUsage::default();
/// usage.add_cycle(CycleUsage { input_tokens: 10, output_tokens: 5, ..Default::default() });
/// usage.add_cycle(CycleUsage { input_tokens: 20, output_tokens: 1, cache_read_tokens: 8, ..Default::default() });
/// assert_eq!((usage.input_tokens, usage.output_tokens, usage.total_tokens), (30, 6, 36));
/// assert_eq!(usage.cycles.as_ref().map(Vec::len), Some(2));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Sum of input tokens.
    pub input_tokens: u64,
    /// Sum of output tokens.
    pub output_tokens: u64,
    /// `input_tokens + output_tokens`.
    pub total_tokens: u64,
    /// Sum of cache-read tokens (0 when the provider does not report them).
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Sum of cache-write tokens (0 when the provider does not report them).
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Per-cycle breakdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles: Option<Vec<CycleUsage>>,
}

impl TokenUsage {
    /// Usage of a single cycle.
    pub fn from_cycle(cycle: CycleUsage) -> Self {
        let mut usage = TokenUsage::default();
        usage.add_cycle(cycle);
        usage
    }

    /// Adds one cycle to the totals and the breakdown.
    pub fn add_cycle(&mut self, cycle: CycleUsage) {
        self.input_tokens += cycle.input_tokens;
        self.output_tokens += cycle.output_tokens;
        self.total_tokens = self.input_tokens + self.output_tokens;
        self.cache_read_tokens += cycle.cache_read_tokens;
        self.cache_write_tokens += cycle.cache_write_tokens;
        self.cycles.get_or_insert_with(Vec::new).push(cycle);
    }

    /// Adds another turn's usage (totals and cycles).
    pub fn merge(&mut self, other: &TokenUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens = self.input_tokens + self.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        if let Some(cycles) = &other.cycles {
            self.cycles
                .get_or_insert_with(Vec::new)
                .extend_from_slice(cycles);
        }
    }

    /// This usage as one cycle (the per-cycle list dropped).
    pub fn as_cycle(&self) -> CycleUsage {
        CycleUsage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_read_tokens: self.cache_read_tokens,
            cache_write_tokens: self.cache_write_tokens,
        }
    }
}

/// The complete result of one `generate` or `stream`: every message it produced, the final
/// response, the tool executions, usage summed over cycles, and the parsed structured output.
///
/// The messages are shared (`Arc<Message>`), not copied, with whoever else keeps them: an
/// agent's state appends the very same messages, so a step's messages exist once however many
/// owners see them. Reading goes through `Deref` (`turn.messages[0].text()`); `&*m` or
/// [`Turn::messages`] gives the `&Message` a pattern match needs. The JSON form is a plain
/// list of messages (the `Arc` is invisible).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use weft_provider::{llm, LlmOptions, Message};
///
/// let model = weft_provider::adapters::scripted::model(
///     weft_provider::adapters::scripted::Script::texts(["Hello!"]),
/// );
/// let turn = llm(LlmOptions::new(model))?.generate(&[], "Hi").await?;
/// assert!(turn.messages[0].is_user());
/// assert!(matches!(turn.messages().nth(1), Some(Message::Assistant(reply)) if reply.text_content() == "Hello!"));
/// assert_eq!(serde_json::to_value(&turn)?["messages"][1]["type"], "assistant");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// The turn's messages in order: the user input, each assistant tool-call message and
    /// tool-result message, and the final assistant message.
    #[serde(with = "shared_messages")]
    pub messages: Vec<Arc<Message>>,
    /// The final assistant message (also the last assistant message of `messages`, shared
    /// with it). Reads as an [`AssistantMessage`]; its JSON carries `"type": "assistant"` like
    /// every message (Appendix A.3).
    #[serde(with = "tagged_assistant")]
    pub response: TurnResponse,
    /// Every tool execution, in completion order within a round and round order overall.
    pub tool_executions: Vec<crate::tool::ToolExecution>,
    /// Usage summed over all cycles.
    pub usage: TokenUsage,
    /// Number of inference cycles: 1 + the number of tool rounds.
    pub cycles: u32,
    /// The parsed structured output, when `structure` was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl Turn {
    /// `earlier` (when there is one) followed by `later`, as one turn: messages, tool
    /// executions, usage and cycles add up; the response and the structured data are
    /// `later`'s. How a run of several steps sums up its steps.
    pub fn fold(earlier: Option<Turn>, later: Turn) -> Turn {
        match earlier {
            None => later,
            Some(mut turn) => {
                turn.messages.extend(later.messages);
                turn.response = later.response;
                turn.tool_executions.extend(later.tool_executions);
                turn.usage.merge(&later.usage);
                turn.cycles += later.cycles;
                turn.data = later.data;
                turn
            }
        }
    }

    /// The turn's messages as `&Message`, in order.
    pub fn messages(&self) -> impl DoubleEndedIterator<Item = &Message> + ExactSizeIterator + '_ {
        self.messages.iter().map(|m| &**m)
    }

    /// The final response's text.
    pub fn text(&self) -> String {
        self.response.text_content()
    }

    /// Executions of one tool.
    pub fn executions_of<'a>(&'a self, tool: &'a str) -> impl Iterator<Item = &'a ToolExecution> {
        self.tool_executions
            .iter()
            .filter(move |e| e.tool_name == tool)
    }
}

/// The final assistant message of a [`Turn`]: it reads as an [`AssistantMessage`] (through
/// `Deref`) and is the very message the turn's `messages` hold, shared instead of copied.
///
/// # Examples
///
/// ```
/// use weft_provider::{AssistantMessage, Message, TurnResponse};
///
/// let response = TurnResponse::from(AssistantMessage::text("Hi"));
/// assert_eq!(response.text_content(), "Hi");          // an AssistantMessage to read
/// assert!(response.message().is_assistant());           // and a shared Message
/// assert_eq!(response.clone().into_assistant(), AssistantMessage::clone(&response));
/// ```
#[derive(Clone)]
pub struct TurnResponse(Arc<Message>);

impl TurnResponse {
    /// The response as the shared message of the turn's `messages`.
    pub fn message(&self) -> &Arc<Message> {
        &self.0
    }

    /// `message` as a response, when it is an assistant message.
    ///
    /// # Errors
    /// The message itself when it is not an assistant message.
    pub fn from_message(message: Arc<Message>) -> Result<Self, Arc<Message>> {
        match &*message {
            Message::Assistant(_) => Ok(TurnResponse(message)),
            _ => Err(message),
        }
    }

    /// The assistant message, moved out when nothing else shares it, else copied.
    pub fn into_assistant(self) -> AssistantMessage {
        match Arc::try_unwrap(self.0) {
            Ok(Message::Assistant(message)) => message,
            Ok(_) => AssistantMessage::clone(no_response()),
            Err(shared) => match &*shared {
                Message::Assistant(message) => message.clone(),
                _ => AssistantMessage::clone(no_response()),
            },
        }
    }
}

/// What a `TurnResponse` would read as if it held no assistant message (its constructors make
/// that impossible).
fn no_response() -> &'static AssistantMessage {
    static EMPTY: std::sync::LazyLock<AssistantMessage> = std::sync::LazyLock::new(|| {
        AssistantMessage::new(Vec::new(), Vec::new(), crate::MessageOptions::default())
            .unwrap_or_else(|_| AssistantMessage::text(""))
    });
    &EMPTY
}

impl std::ops::Deref for TurnResponse {
    type Target = AssistantMessage;

    fn deref(&self) -> &AssistantMessage {
        match &*self.0 {
            Message::Assistant(message) => message,
            _ => no_response(),
        }
    }
}

impl From<AssistantMessage> for TurnResponse {
    fn from(message: AssistantMessage) -> Self {
        TurnResponse(Arc::new(Message::Assistant(message)))
    }
}

impl PartialEq for TurnResponse {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || **self == **other
    }
}

impl PartialEq<AssistantMessage> for TurnResponse {
    fn eq(&self, other: &AssistantMessage) -> bool {
        **self == *other
    }
}

impl std::fmt::Debug for TurnResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        AssistantMessage::fmt(self, f)
    }
}

/// Shared messages in JSON: a plain list of messages.
mod shared_messages {
    use std::sync::Arc;

    use serde::ser::SerializeSeq as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::message::Message;

    pub(super) fn serialize<S: Serializer>(
        messages: &[Arc<Message>],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(messages.len()))?;
        for message in messages {
            seq.serialize_element(&**message)?;
        }
        seq.end()
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<Arc<Message>>, D::Error> {
        Ok(Vec::<Message>::deserialize(deserializer)?
            .into_iter()
            .map(Arc::new)
            .collect())
    }
}

/// Serializes an assistant message with its `type` tag, as `Message` does.
mod tagged_assistant {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::TurnResponse;
    use crate::message::{AssistantMessage, Message};

    #[derive(Serialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum Tagged<'a> {
        Assistant(&'a AssistantMessage),
    }

    pub(super) fn serialize<S: Serializer>(
        message: &TurnResponse,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        Tagged::Assistant(message).serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<TurnResponse, D::Error> {
        let mut value = serde_json::Value::deserialize(deserializer)?;
        if let Some(map) = value.as_object_mut() {
            map.entry("type").or_insert_with(|| "assistant".into());
        }
        match serde_json::from_value::<Message>(value).map_err(serde::de::Error::custom)? {
            Message::Assistant(message) => Ok(message.into()),
            other => Err(serde::de::Error::custom(format!(
                "response must be an assistant message, not {:?}",
                other.message_type()
            ))),
        }
    }
}
