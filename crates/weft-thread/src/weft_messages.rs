//! Weft's own messages (`weft-provider`, UPP-1.2) ⇄ ThreadProtocol turns.
//!
//! One `generate` of one agent is one [`AgentTurn`]; a user's input is a [`UserTurn`].
//!
//! | UPP | ThreadProtocol |
//! |---|---|
//! | `UserMessage` (the turn's input) | `UserTurn` with one `user-prompt` part |
//! | `UserMessage` inside a run | a `request` message with a `user-prompt` part |
//! | `AssistantMessage` | a `response` message: `thinking` parts (content, `signature`, `provider_name`), `text` parts, `tool-call` parts, `file` parts for media |
//! | `ToolResultMessage` | a `request` message of `tool-return` parts (`status` `error` when `isError`) |
//!
//! What ThreadProtocol has no field for rides in `meta:*` members, which the canonical hash
//! excludes: `meta:weft_message_id` (message ids), `meta:weft_metadata` (provider metadata of a
//! message or a reasoning block), `meta:weft_media` (an image/audio/video block's source and
//! sizes). So `messages → turn → messages` gives back equal messages: ids, timestamps,
//! content, tool calls and results, reasoning with signatures, metadata.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};
use weft_provider as upp;
use weft_provider::{Blob, ContentBlock, ImageSource};

use crate::types::{
    AgentTurn, BinaryContent, FilePart, FinishReason, JsonMap, MessagePart, MessageType, TextPart,
    ThinkingPart, ThreadMessage, ToolCallPart, ToolReturnPart, ToolReturnStatus, TurnMessage,
    Usage, UserContent, UserPromptContent, UserPromptPart, UserTurn,
};

const ID: &str = "meta:weft_message_id";
const METADATA: &str = "meta:weft_metadata";
const MEDIA: &str = "meta:weft_media";

/// Why turns could not be turned back into messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// A timestamp is not RFC 3339.
    #[error("invalid timestamp {0:?}")]
    Timestamp(String),
    /// Content Weft cannot represent (named).
    #[error("cannot convert {0}")]
    Unsupported(String),
}

fn timestamp(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

fn parse_time(text: &str) -> Result<DateTime<Utc>, ConversionError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| ConversionError::Timestamp(text.to_owned()))
}

fn meta(id: &str, metadata: Option<&upp::Metadata>) -> JsonMap {
    let mut extra = JsonMap::new();
    extra.insert(ID.into(), json!(id));
    if let Some(metadata) = metadata {
        extra.insert(METADATA.into(), Value::Object(metadata.clone()));
    }
    extra
}

fn take_meta(extra: &JsonMap) -> (Option<String>, Option<upp::Metadata>) {
    let id = extra.get(ID).and_then(Value::as_str).map(str::to_owned);
    let metadata = extra.get(METADATA).and_then(Value::as_object).cloned();
    (id, metadata)
}

/// The user turn for a user message.
pub fn user_turn(message: &upp::UserMessage) -> UserTurn {
    UserTurn {
        submitted_at: timestamp(message.timestamp),
        parts: vec![user_prompt(message)],
        client_metadata: None,
        extra: meta(&message.id, message.metadata.as_ref()),
    }
}

fn user_prompt(message: &upp::UserMessage) -> MessagePart {
    let content = match message.content.as_slice() {
        [ContentBlock::Text(text)] => UserPromptContent::Text(text.text.clone()),
        blocks => UserPromptContent::Items(
            blocks
                .iter()
                .enumerate()
                .map(|(i, block)| user_content(block, &message.id, i))
                .collect(),
        ),
    };
    MessagePart::UserPrompt(UserPromptPart {
        content,
        extra: JsonMap::new(),
    })
}

fn binary(
    data: String,
    media_type: &str,
    identifier: String,
    media: Option<Value>,
) -> BinaryContent {
    let mut extra = JsonMap::new();
    if let Some(media) = media {
        extra.insert(MEDIA.into(), media);
    }
    BinaryContent {
        data,
        media_type: media_type.to_owned(),
        identifier,
        vendor_metadata: None,
        extra,
    }
}

/// A UPP block as Pydantic-style user content (text or binary/URL media).
fn user_content(block: &ContentBlock, message_id: &str, index: usize) -> UserContent {
    let identifier = format!("{message_id}-{index}");
    let whole = serde_json::to_value(block).unwrap_or(Value::Null);
    let media = match block {
        ContentBlock::Text(text) => return UserContent::Text(text.text.clone()),
        ContentBlock::Image(image) => match &image.source {
            ImageSource::Base64 { data } => {
                binary(data.clone(), &image.mime_type, identifier, Some(whole))
            }
            ImageSource::Bytes { data } => {
                binary(data.to_base64(), &image.mime_type, identifier, Some(whole))
            }
            ImageSource::Url { url } => {
                return url_content("image-url", url, &image.mime_type, identifier, whole);
            }
        },
        ContentBlock::Document(doc) => match &doc.source {
            upp::DocumentSource::Base64 { data } => {
                binary(data.clone(), &doc.mime_type, identifier, Some(whole))
            }
            upp::DocumentSource::Text { data } => binary(
                Blob(data.as_bytes().to_vec()).to_base64(),
                &doc.mime_type,
                identifier,
                Some(whole),
            ),
            upp::DocumentSource::Url { url } => {
                return url_content("document-url", url, &doc.mime_type, identifier, whole);
            }
        },
        ContentBlock::Audio(a) => binary(a.data.to_base64(), &a.mime_type, identifier, Some(whole)),
        ContentBlock::Video(v) => binary(v.data.to_base64(), &v.mime_type, identifier, Some(whole)),
        ContentBlock::Binary(b) => {
            binary(b.data.to_base64(), &b.mime_type, identifier, Some(whole))
        }
        ContentBlock::Reasoning(r) => return UserContent::Text(r.text.clone()),
    };
    UserContent::Media(crate::types::MultiModalContent::Binary(media))
}

fn url_content(
    kind: &str,
    url: &str,
    media_type: &str,
    identifier: String,
    whole: Value,
) -> UserContent {
    let mut map = JsonMap::new();
    map.insert("kind".into(), json!(kind));
    map.insert("url".into(), json!(url));
    map.insert("identifier".into(), json!(identifier));
    map.insert("media_type".into(), json!(media_type));
    map.insert(MEDIA.into(), whole);
    match serde_json::from_value(Value::Object(map)) {
        Ok(content) => UserContent::Media(content),
        Err(_) => UserContent::Text(url.to_owned()),
    }
}

fn usage_of(cycle: &upp::CycleUsage) -> Usage {
    Usage {
        input_tokens: Some(cycle.input_tokens),
        output_tokens: Some(cycle.output_tokens),
        thinking_tokens: None,
        total_tokens: Some(cycle.input_tokens + cycle.output_tokens),
        extra: JsonMap::new(),
    }
}

/// The agent turn of one run: `messages` are the run's messages after its input (e.g.
/// `turn.messages[1..]` of a UPP turn whose first message is the user input), `usage` the
/// per-cycle usage (each response gets its cycle's usage, in order), `provider` and `model`
/// the names to record on responses.
pub fn agent_turn(
    agent_id: &str,
    messages: &[upp::Message],
    usage: &[upp::CycleUsage],
    provider: Option<&str>,
    model: Option<&str>,
) -> AgentTurn {
    let mut out = Vec::with_capacity(messages.len());
    let mut tool_names: Map<String, Value> = Map::new();
    let mut cycles = usage.iter();
    for message in messages {
        let thread_message = match message {
            upp::Message::User(user) => ThreadMessage {
                message_type: MessageType::Request,
                timestamp: timestamp(user.timestamp),
                parts: vec![user_prompt(user)],
                agent_id: agent_id.to_owned(),
                model_name: None,
                provider_name: None,
                provider_response_id: None,
                usage: None,
                finish_reason: None,
                extra: meta(&user.id, user.metadata.as_ref()),
            },
            upp::Message::Assistant(assistant) => {
                for call in &assistant.tool_calls {
                    tool_names.insert(call.tool_call_id.clone(), json!(call.tool_name));
                }
                ThreadMessage {
                    message_type: MessageType::Response,
                    timestamp: timestamp(assistant.timestamp),
                    parts: response_parts(assistant, provider.unwrap_or("weft")),
                    agent_id: agent_id.to_owned(),
                    model_name: model.map(str::to_owned),
                    provider_name: provider.map(str::to_owned),
                    provider_response_id: None,
                    usage: cycles.next().map(usage_of),
                    finish_reason: Some(if assistant.has_tool_calls() {
                        FinishReason::ToolCall
                    } else {
                        FinishReason::Stop
                    }),
                    extra: meta(&assistant.id, assistant.metadata.as_ref()),
                }
            }
            upp::Message::ToolResult(results) => ThreadMessage {
                message_type: MessageType::Request,
                timestamp: timestamp(results.timestamp),
                parts: results
                    .results
                    .iter()
                    .map(|r| {
                        MessagePart::ToolReturn(ToolReturnPart {
                            tool_name: tool_names
                                .get(&r.tool_call_id)
                                .and_then(Value::as_str)
                                .unwrap_or("unknown")
                                .to_owned(),
                            tool_call_id: r.tool_call_id.clone(),
                            status: if r.is_error {
                                ToolReturnStatus::Error
                            } else {
                                ToolReturnStatus::Success
                            },
                            content: Some(r.result.clone()),
                            content_ref: None,
                            metadata: None,
                            extra: JsonMap::new(),
                        })
                    })
                    .collect(),
                agent_id: agent_id.to_owned(),
                model_name: None,
                provider_name: None,
                provider_response_id: None,
                usage: None,
                finish_reason: None,
                extra: meta(&results.id, results.metadata.as_ref()),
            },
        };
        out.push(TurnMessage::Thread(thread_message));
    }
    let started_at = messages
        .first()
        .map_or_else(|| timestamp(Utc::now()), |m| timestamp(m.timestamp()));
    let completed_at = messages
        .last()
        .map_or_else(|| started_at.clone(), |m| timestamp(m.timestamp()));
    let mut turn = AgentTurn {
        agent_id: agent_id.to_owned(),
        started_at,
        completed_at,
        messages: out,
        total_usage: None,
        extra: JsonMap::new(),
    };
    turn.total_usage = turn.aggregate_usage();
    turn
}

fn response_parts(assistant: &upp::AssistantMessage, provider: &str) -> Vec<MessagePart> {
    let mut parts = Vec::new();
    for (i, block) in assistant.content.iter().enumerate() {
        match block {
            ContentBlock::Text(text) => {
                parts.push(MessagePart::Text(TextPart {
                    content: text.text.clone(),
                    id: None,
                    extra: JsonMap::new(),
                }));
            }
            ContentBlock::Reasoning(reasoning) => {
                let mut extra = JsonMap::new();
                if let Some(metadata) = &reasoning.metadata {
                    extra.insert(METADATA.into(), Value::Object(metadata.clone()));
                }
                parts.push(MessagePart::Thinking(ThinkingPart {
                    content: Some(reasoning.text.clone()),
                    signature: reasoning.signature.clone(),
                    provider_name: provider.to_owned(),
                    thinking_id: None,
                    extra,
                }));
            }
            other => {
                if let UserContent::Media(crate::types::MultiModalContent::Binary(content)) =
                    user_content(other, &assistant.id, i)
                {
                    parts.push(MessagePart::File(FilePart {
                        content,
                        id: None,
                        extra: JsonMap::new(),
                    }));
                }
            }
        }
    }
    for call in &assistant.tool_calls {
        let mut extra = JsonMap::new();
        if !call.after.is_empty() {
            extra.insert("meta:weft_after".into(), json!(call.after));
        }
        parts.push(MessagePart::ToolCall(ToolCallPart {
            tool_name: call.tool_name.clone(),
            tool_call_id: call.tool_call_id.clone(),
            args: call.arguments.clone(),
            extra,
        }));
    }
    parts
}

fn block_from_media(media: &BinaryContent) -> Result<ContentBlock, ConversionError> {
    if let Some(whole) = media.extra.get(MEDIA)
        && let Ok(block) = serde_json::from_value::<ContentBlock>(whole.clone())
    {
        return Ok(block);
    }
    let data = Blob::from_base64(&media.data)
        .map_err(|_| ConversionError::Unsupported(format!("file {}", media.identifier)))?;
    let mime = media.media_type.clone();
    Ok(if mime.starts_with("image/") {
        ContentBlock::Image(upp::ImageBlock {
            source: ImageSource::Bytes { data },
            mime_type: mime,
            width: None,
            height: None,
        })
    } else if mime.starts_with("audio/") {
        ContentBlock::Audio(upp::AudioBlock {
            data,
            mime_type: mime,
            duration: None,
        })
    } else if mime.starts_with("video/") {
        ContentBlock::Video(upp::VideoBlock {
            data,
            mime_type: mime,
            duration: None,
            width: None,
            height: None,
        })
    } else {
        ContentBlock::Binary(upp::BinaryBlock {
            data,
            mime_type: mime,
            metadata: None,
        })
    })
}

fn blocks_from_prompt(part: &UserPromptPart) -> Result<Vec<ContentBlock>, ConversionError> {
    match &part.content {
        UserPromptContent::Text(text) => Ok(vec![ContentBlock::text(text.clone())]),
        UserPromptContent::Items(items) => items
            .iter()
            .map(|item| match item {
                UserContent::Text(text) => Ok(ContentBlock::text(text.clone())),
                UserContent::Media(crate::types::MultiModalContent::Binary(media)) => {
                    block_from_media(media)
                }
                UserContent::Media(other) => {
                    let value = serde_json::to_value(other).unwrap_or(Value::Null);
                    value
                        .get(MEDIA)
                        .and_then(|whole| {
                            serde_json::from_value::<ContentBlock>(whole.clone()).ok()
                        })
                        .ok_or_else(|| {
                            ConversionError::Unsupported(format!("user content {value}"))
                        })
                }
            })
            .collect(),
    }
}

/// The user message of a user turn (its `user-prompt` parts joined).
///
/// # Errors
/// A bad timestamp or content Weft cannot represent.
pub fn user_message(turn: &UserTurn) -> Result<upp::UserMessage, ConversionError> {
    let mut content = Vec::new();
    for part in &turn.parts {
        if let MessagePart::UserPrompt(prompt) = part {
            content.extend(blocks_from_prompt(prompt)?);
        }
    }
    let (id, metadata) = take_meta(&turn.extra);
    let mut message = upp::UserMessage::with_options(content, upp::MessageOptions { id, metadata });
    message.timestamp = parse_time(&turn.submitted_at)?;
    Ok(message)
}

/// The messages of an agent turn, in order. System messages (handoffs, spawns, …) have no
/// UPP counterpart and are skipped.
///
/// # Errors
/// A bad timestamp or content Weft cannot represent.
pub fn messages(turn: &AgentTurn) -> Result<Vec<upp::Message>, ConversionError> {
    let mut out = Vec::new();
    for message in &turn.messages {
        let TurnMessage::Thread(message) = message else {
            continue;
        };
        let (id, metadata) = take_meta(&message.extra);
        let time = parse_time(&message.timestamp)?;
        match message.message_type {
            MessageType::Response => {
                let mut content = Vec::new();
                let mut calls = Vec::new();
                for part in &message.parts {
                    match part {
                        MessagePart::Text(text) => {
                            content.push(ContentBlock::text(text.content.clone()))
                        }
                        MessagePart::Thinking(thinking) => {
                            content.push(ContentBlock::Reasoning(upp::ReasoningBlock {
                                text: thinking.content.clone().unwrap_or_default(),
                                signature: thinking.signature.clone(),
                                metadata: thinking
                                    .extra
                                    .get(METADATA)
                                    .and_then(Value::as_object)
                                    .cloned(),
                            }))
                        }
                        MessagePart::ToolCall(call) => {
                            let mut tool_call = upp::ToolCall::new(
                                call.tool_call_id.clone(),
                                call.tool_name.clone(),
                                call.args.clone(),
                            );
                            if let Some(after) =
                                call.extra.get("meta:weft_after").and_then(Value::as_array)
                            {
                                tool_call.after = after
                                    .iter()
                                    .filter_map(Value::as_str)
                                    .map(str::to_owned)
                                    .collect();
                            }
                            calls.push(tool_call);
                        }
                        MessagePart::File(file) => content.push(block_from_media(&file.content)?),
                        _ => {}
                    }
                }
                let mut assistant = upp::AssistantMessage::new(
                    content,
                    calls,
                    upp::MessageOptions { id, metadata },
                )
                .map_err(|e| ConversionError::Unsupported(e.to_string()))?;
                assistant.timestamp = time;
                out.push(upp::Message::Assistant(assistant));
            }
            MessageType::Request => {
                let returns: Vec<upp::ToolResult> = message
                    .parts
                    .iter()
                    .filter_map(|part| match part {
                        MessagePart::ToolReturn(r) => Some(upp::ToolResult {
                            tool_call_id: r.tool_call_id.clone(),
                            result: r.content.clone().unwrap_or(Value::Null),
                            is_error: r.status != ToolReturnStatus::Success,
                        }),
                        _ => None,
                    })
                    .collect();
                if !returns.is_empty() {
                    let mut results = upp::ToolResultMessage::new(returns);
                    if let Some(id) = id.clone() {
                        results.id = id;
                    }
                    results.metadata.clone_from(&metadata);
                    results.timestamp = time;
                    out.push(upp::Message::ToolResult(results));
                }
                let mut content = Vec::new();
                for part in &message.parts {
                    if let MessagePart::UserPrompt(prompt) = part {
                        content.extend(blocks_from_prompt(prompt)?);
                    }
                }
                if !content.is_empty() {
                    let mut user = upp::UserMessage::with_options(
                        content,
                        upp::MessageOptions { id, metadata },
                    );
                    user.timestamp = time;
                    out.push(upp::Message::User(user));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use weft_provider::{
        AssistantMessage, MessageOptions, ReasoningBlock, ToolCall, ToolResult, ToolResultMessage,
        UserMessage,
    };

    fn run() -> (UserMessage, Vec<upp::Message>) {
        let image = weft_provider::Image::from_bytes(vec![1, 2, 3], "image/png").to_block();
        let input = UserMessage::new(vec![
            ContentBlock::text("What is in this picture? Then add 1 and 2."),
            image,
        ]);
        let mut reasoning_meta = upp::Metadata::new();
        reasoning_meta.insert("anthropic".into(), json!({"redacted": false}));
        let mut message_meta = upp::Metadata::new();
        message_meta.insert(
            "anthropic".into(),
            json!({"stop_reason": "tool_use", "id": "msg_1"}),
        );
        let mut call = ToolCall::new("toolu_1", "add", json!({"a": 1, "b": 2}));
        call.after = vec!["toolu_0".into()];
        let assistant = AssistantMessage::new(
            vec![
                ContentBlock::Reasoning(ReasoningBlock {
                    text: "Let me look.".into(),
                    signature: Some("EqQBCkYIARgC".into()),
                    metadata: Some(reasoning_meta),
                }),
                ContentBlock::text("A square. Adding now."),
            ],
            vec![call],
            MessageOptions {
                id: Some("a1".into()),
                metadata: Some(message_meta),
            },
        )
        .unwrap();
        let results = ToolResultMessage::new(vec![ToolResult {
            tool_call_id: "toolu_1".into(),
            result: json!(3),
            is_error: false,
        }]);
        let done = AssistantMessage::text("The sum is 3.");
        (
            input,
            vec![
                upp::Message::Assistant(assistant),
                upp::Message::ToolResult(results),
                upp::Message::Assistant(done),
            ],
        )
    }

    #[test]
    fn messages_round_trip_through_turns_losslessly() {
        let (input, messages) = run();
        let usage = [
            upp::CycleUsage {
                input_tokens: 10,
                output_tokens: 5,
                ..Default::default()
            },
            upp::CycleUsage {
                input_tokens: 20,
                output_tokens: 2,
                ..Default::default()
            },
        ];
        let user = user_turn(&input);
        let agent = agent_turn(
            "agent-1",
            &messages,
            &usage,
            Some("anthropic"),
            Some("claude"),
        );
        // Valid ThreadProtocol JSON, and back.
        let user_json = serde_json::to_value(&user).unwrap();
        let agent_json = serde_json::to_value(&agent).unwrap();
        let user: UserTurn = serde_json::from_value(user_json).unwrap();
        let agent: AgentTurn = serde_json::from_value(agent_json.clone()).unwrap();
        assert_eq!(user_message(&user).unwrap(), input);
        assert_eq!(super::messages(&agent).unwrap(), messages);
        assert_eq!(
            agent.total_usage.as_ref().and_then(|u| u.input_tokens),
            Some(30)
        );
        let parts = &agent_json["messages"][0]["parts"];
        assert_eq!(parts[0]["part_kind"], "thinking");
        assert_eq!(parts[0]["signature"], "EqQBCkYIARgC");
        assert_eq!(parts[0]["provider_name"], "anthropic");
        assert_eq!(parts[2]["part_kind"], "tool-call");
        assert_eq!(agent_json["messages"][1]["parts"][0]["tool_name"], "add");
        assert_eq!(agent_json["messages"][1]["parts"][0]["status"], "success");
    }

    #[test]
    fn a_run_makes_a_valid_thread() {
        let (input, messages) = run();
        let agent_id = "550e8400-e29b-41d4-a716-446655440001";
        let user = serde_json::to_value(user_turn(&input)).unwrap();
        let mut user_with_tag = user.as_object().unwrap().clone();
        user_with_tag.insert("turn_type".into(), json!("user"));
        let mut agent = serde_json::to_value(agent_turn(
            agent_id,
            &messages,
            &[],
            Some("anthropic"),
            None,
        ))
        .unwrap();
        agent["turn_type"] = json!("agent");
        let thread = json!({
            "version": "0.0.3",
            "thread_id": "550e8400-e29b-41d4-a716-446655440000",
            "created_at": user_with_tag["submitted_at"],
            "updated_at": agent["completed_at"],
            "agents": {agent_id: {"agent_id": agent_id, "agent_name": "helper", "created_at": "2020-01-01T00:00:00Z"}},
            "turns": [Value::Object(user_with_tag), agent],
        });
        let report = crate::validate(&thread);
        assert!(report.is_valid(), "{:#?}", report.findings);
    }

    #[test]
    fn error_results_and_media_only_responses() {
        let results = ToolResultMessage::new(vec![ToolResult {
            tool_call_id: "c".into(),
            result: json!("boom"),
            is_error: true,
        }]);
        let turn = agent_turn(
            "a",
            &[upp::Message::ToolResult(results.clone())],
            &[],
            None,
            None,
        );
        assert_eq!(
            super::messages(&turn).unwrap(),
            vec![upp::Message::ToolResult(results)]
        );
    }
}
