//! Pydantic AI `ModelMessages` JSON ⇄ ThreadProtocol.
//!
//! - [`from_agent_run`]: the messages of one `agent.run()` (e.g. `result.new_messages()` dumped
//!   with `ModelMessagesTypeAdapter`) → one [`AgentTurn`] (TP-049).
//! - [`to_model_messages`]: turns → `ModelMessages` JSON for one viewing agent (TP-050), in the
//!   field set Pydantic AI 1.x writes, which 1.x and 2.x both load.
//!
//! # Mapping
//!
//! | Pydantic AI | ThreadProtocol |
//! |---|---|
//! | `kind` | `message_type` |
//! | `system-prompt` part, request `instructions` | dropped (TP-015) |
//! | `thinking.id` | `thinking_id` |
//! | `tool-return.outcome` `success` / `failed` / `retried` | `status` `success` / `error` / `validation_error` (other outcomes: `error`, `outcome` kept) |
//! | `usage.input_tokens`, `output_tokens`, `output_reasoning_tokens` | `input_tokens`, `output_tokens`, `thinking_tokens`; `total_tokens` = input + output |
//! | other usage counters (non-zero), `details` (non-empty) | kept in `usage` |
//! | unknown part kinds (`builtin-tool-call`, `compaction`, …) | `custom:pydantic-ai/<kind>` |
//! | `null` members | dropped (they are Pydantic defaults) |
//! | every other member | kept unchanged |
//!
//! Back to Pydantic AI the mapping is inverted; a `tool-return` with status
//! `validation_error` becomes a `retry-prompt` (loadable by 1.x; 2.x converts it back to a
//! tool return with outcome `retried`). System messages and `custom:*` parts not from Pydantic
//! AI have no Pydantic AI form and are reported in [`ModelMessages::skipped`].
//!
//! # Multi-agent attribution
//!
//! For the viewing agent, its own turns keep their requests and responses. Another agent's turn
//! is context, not something the viewing model said: each of its responses with text or files
//! becomes one request with a `user-prompt` part whose text is prefixed `[<agent>]: `; its
//! thinking, tool calls and tool results stay private to it. A user turn becomes a request with
//! its parts and `submitted_at` (`client_metadata` is never passed, TP-045); it is left out when
//! the next turn is the viewing agent's and starts with a request holding the same user prompt
//! (a run's `new_messages()` repeat the prompt).

use serde_json::{Map, Value};

use crate::types::{AgentTurn, JsonMap, Thread, Turn, TurnMessage, UserTurn};

/// Pydantic AI messages that cannot be turned into a turn.
#[derive(Debug, thiserror::Error)]
pub enum PydanticError {
    /// The top level is not a JSON array.
    #[error("ModelMessages JSON must be an array of messages")]
    NotAnArray,
    /// The run has no messages.
    #[error("the agent run has no messages")]
    Empty,
    /// A message is unusable.
    #[error("message {index}: {reason}")]
    Message {
        /// Index in the array.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// The converted turn does not have the shape of a turn.
    #[error("converted turn has an unexpected shape: {0}")]
    Shape(#[source] serde_json::Error),
}

/// The prefix of part kinds Pydantic AI has and ThreadProtocol does not.
pub const CUSTOM_PREFIX: &str = "custom:pydantic-ai/";

fn without_nulls(map: &JsonMap) -> JsonMap {
    map.iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

fn s(text: &str) -> Value {
    Value::String(text.to_owned())
}

/// Converts the `ModelMessages` JSON of one agent run into an agent turn.
///
/// # Errors
///
/// [`PydanticError`] when the JSON is not a non-empty array of messages with a `kind` of
/// `request` / `response` and a timestamp (a request without one borrows it from its parts or
/// the previous message).
pub fn from_agent_run(messages: &Value, agent_id: &str) -> Result<AgentTurn, PydanticError> {
    let Value::Array(items) = messages else {
        return Err(PydanticError::NotAnArray);
    };
    if items.is_empty() {
        return Err(PydanticError::Empty);
    }
    let mut converted = Vec::with_capacity(items.len());
    let mut previous_timestamp: Option<String> = None;
    for (index, item) in items.iter().enumerate() {
        let fail = |reason: &str| PydanticError::Message {
            index,
            reason: reason.to_owned(),
        };
        let Value::Object(message) = item else {
            return Err(fail("not an object"));
        };
        let message = without_nulls(message);
        let message_type = match message.get("kind").and_then(Value::as_str) {
            Some("request") => "request",
            Some("response") => "response",
            _ => return Err(fail("`kind` must be \"request\" or \"response\"")),
        };
        let parts: &[Value] = message
            .get("parts")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let timestamp = message
            .get("timestamp")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                parts
                    .iter()
                    .find_map(|part| part.get("timestamp").and_then(Value::as_str))
                    .map(str::to_owned)
            })
            .or_else(|| previous_timestamp.clone())
            .ok_or_else(|| fail("no timestamp"))?;
        previous_timestamp = Some(timestamp.clone());
        let provider = message.get("provider_name").and_then(Value::as_str);
        let mut out = Map::new();
        out.insert("message_type".into(), s(message_type));
        out.insert("timestamp".into(), Value::String(timestamp.clone()));
        let parts: Vec<Value> = parts
            .iter()
            .filter_map(|part| part.as_object())
            .filter_map(|part| part_from_pydantic(part, provider))
            .map(Value::Object)
            .collect();
        out.insert("parts".into(), Value::Array(parts));
        out.insert("agent_id".into(), s(agent_id));
        for (key, value) in &message {
            match key.as_str() {
                "kind" | "timestamp" | "parts" | "instructions" => {}
                "usage" => {
                    if let Some(usage) = value.as_object() {
                        out.insert("usage".into(), Value::Object(usage_from_pydantic(usage)));
                    }
                }
                "finish_reason" => {
                    let valid = value
                        .as_str()
                        .and_then(crate::FinishReason::parse)
                        .is_some();
                    out.insert(
                        if valid {
                            "finish_reason"
                        } else {
                            "provider_finish_reason"
                        }
                        .into(),
                        value.clone(),
                    );
                }
                _ => {
                    out.insert(key.clone(), value.clone());
                }
            }
        }
        converted.push(Value::Object(out));
    }
    let first = converted
        .first()
        .and_then(|message| message.get("timestamp"))
        .cloned()
        .unwrap_or(Value::Null);
    let last = converted
        .last()
        .and_then(|message| message.get("timestamp"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut turn = Map::new();
    turn.insert("turn_type".into(), s("agent"));
    turn.insert("agent_id".into(), s(agent_id));
    turn.insert("started_at".into(), first);
    turn.insert("completed_at".into(), last);
    turn.insert("messages".into(), Value::Array(converted));
    match serde_json::from_value::<Turn>(Value::Object(turn)).map_err(PydanticError::Shape)? {
        Turn::Agent(mut turn) => {
            turn.total_usage = turn.aggregate_usage();
            Ok(turn)
        }
        Turn::User(_) => Err(PydanticError::Empty),
    }
}

fn part_from_pydantic(part: &JsonMap, message_provider: Option<&str>) -> Option<JsonMap> {
    let mut part = without_nulls(part);
    let kind = part
        .get("part_kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    match kind.as_str() {
        "system-prompt" => return None,
        "user-prompt" | "text" | "tool-call" | "retry-prompt" | "file" => {}
        "thinking" => {
            if let Some(id) = part.remove("id") {
                part.insert("thinking_id".into(), id);
            }
            if !part.contains_key("provider_name") {
                part.insert(
                    "provider_name".into(),
                    s(message_provider.unwrap_or("unknown")),
                );
            }
        }
        "tool-return" => {
            let outcome = part.remove("outcome");
            let status = match outcome.as_ref().and_then(Value::as_str) {
                None | Some("success") => "success",
                Some("failed") => "error",
                Some("retried") => "validation_error",
                Some(_) => {
                    if let Some(outcome) = outcome {
                        part.insert("outcome".into(), outcome);
                    }
                    "error"
                }
            };
            part.insert("status".into(), s(status));
        }
        _ => {
            part.insert(
                "part_kind".into(),
                Value::String(format!("{CUSTOM_PREFIX}{kind}")),
            );
        }
    }
    Some(part)
}

fn usage_from_pydantic(usage: &JsonMap) -> JsonMap {
    let mut out = Map::new();
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    if let Some(input) = count("input_tokens") {
        out.insert("input_tokens".into(), input.into());
    }
    if let Some(output) = count("output_tokens") {
        out.insert("output_tokens".into(), output.into());
    }
    if let Some(thinking) = count("output_reasoning_tokens") {
        out.insert("thinking_tokens".into(), thinking.into());
    }
    if let (Some(input), Some(output)) = (count("input_tokens"), count("output_tokens")) {
        out.insert("total_tokens".into(), input.saturating_add(output).into());
    }
    for (key, value) in usage {
        let keep = match value {
            Value::Null => false,
            Value::Number(number) => number.as_f64() != Some(0.0),
            Value::Object(map) => !map.is_empty(),
            _ => true,
        };
        if keep
            && !matches!(
                key.as_str(),
                "input_tokens" | "output_tokens" | "output_reasoning_tokens"
            )
        {
            out.insert(key.clone(), value.clone());
        }
    }
    out
}

/// A part left out of [`to_model_messages`] because Pydantic AI has no form for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedPart {
    /// Index of the turn.
    pub turn: usize,
    /// Index of the message in an agent turn.
    pub message: Option<usize>,
    /// The part's kind (or the system event type).
    pub kind: String,
}

/// `ModelMessages` JSON for one agent, and what could not be expressed.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelMessages {
    /// The messages, ready for `ModelMessagesTypeAdapter.validate_python` / `validate_json`.
    pub messages: Vec<Value>,
    /// Parts and system messages left out.
    pub skipped: Vec<SkippedPart>,
}

/// Rebuilds the model history of `viewing_agent_id` from turns; other agents are named by ID.
pub fn to_model_messages(turns: &[Turn], viewing_agent_id: &str) -> ModelMessages {
    to_model_messages_named(turns, viewing_agent_id, |id| id.to_owned())
}

/// [`to_model_messages`] for a thread, naming other agents by their registry `agent_name`.
pub fn thread_to_model_messages(thread: &Thread, viewing_agent_id: &str) -> ModelMessages {
    to_model_messages_named(&thread.turns, viewing_agent_id, |id| {
        thread
            .agents
            .get(id)
            .map_or_else(|| id.to_owned(), |agent| agent.agent_name.clone())
    })
}

fn to_model_messages_named(
    turns: &[Turn],
    viewing: &str,
    name_of: impl Fn(&str) -> String,
) -> ModelMessages {
    let mut out = ModelMessages {
        messages: Vec::new(),
        skipped: Vec::new(),
    };
    for (turn_index, turn) in turns.iter().enumerate() {
        match turn {
            Turn::User(user) => {
                if repeated_in_next_turn(user, turns.get(turn_index + 1), viewing) {
                    continue;
                }
                let mut request = Map::new();
                request.insert("kind".into(), s("request"));
                let parts = convert_parts(user.parts.iter(), turn_index, None, &mut out.skipped);
                request.insert("parts".into(), Value::Array(parts));
                request.insert("timestamp".into(), s(&user.submitted_at));
                out.messages.push(Value::Object(request));
            }
            Turn::Agent(agent) if agent.agent_id == viewing => {
                for (message_index, message) in agent.messages.iter().enumerate() {
                    match message {
                        TurnMessage::Thread(message) => {
                            let value = serde_json::to_value(message).unwrap_or(Value::Null);
                            let Value::Object(mut map) = value else {
                                continue;
                            };
                            let message_type = map.remove("message_type");
                            map.remove("agent_id");
                            map.remove("parts");
                            let mut pydantic = Map::new();
                            pydantic.insert("kind".into(), message_type.unwrap_or(Value::Null));
                            let parts = convert_parts(
                                message.parts.iter(),
                                turn_index,
                                Some(message_index),
                                &mut out.skipped,
                            );
                            pydantic.insert("parts".into(), Value::Array(parts));
                            if let Some(Value::Object(usage)) = map.remove("usage") {
                                pydantic.insert(
                                    "usage".into(),
                                    Value::Object(usage_to_pydantic(&usage)),
                                );
                            }
                            if let Some(reason) = map.remove("provider_finish_reason") {
                                map.entry("finish_reason").or_insert(reason);
                            }
                            pydantic.extend(map);
                            out.messages.push(Value::Object(pydantic));
                        }
                        TurnMessage::System(system) => out.skipped.push(SkippedPart {
                            turn: turn_index,
                            message: Some(message_index),
                            kind: system.event_type.clone(),
                        }),
                    }
                }
            }
            Turn::Agent(agent) => {
                let label = name_of(&agent.agent_id);
                for message in &agent.messages {
                    let TurnMessage::Thread(message) = message else {
                        continue;
                    };
                    if message.message_type != crate::MessageType::Response {
                        continue;
                    }
                    let mut text = String::new();
                    let mut media = Vec::new();
                    for part in &message.parts {
                        match part {
                            crate::MessagePart::Text(part) => {
                                if !text.is_empty() {
                                    text.push('\n');
                                }
                                text.push_str(&part.content);
                            }
                            crate::MessagePart::File(file) => media
                                .push(serde_json::to_value(&file.content).unwrap_or(Value::Null)),
                            _ => {}
                        }
                    }
                    if text.is_empty() && media.is_empty() {
                        continue;
                    }
                    let prefixed = Value::String(format!("[{label}]: {text}"));
                    let content = if media.is_empty() {
                        prefixed
                    } else {
                        Value::Array(std::iter::once(prefixed).chain(media).collect())
                    };
                    let mut part = Map::new();
                    part.insert("part_kind".into(), s("user-prompt"));
                    part.insert("content".into(), content);
                    part.insert("timestamp".into(), s(&message.timestamp));
                    let mut request = Map::new();
                    request.insert("kind".into(), s("request"));
                    request.insert("parts".into(), Value::Array(vec![Value::Object(part)]));
                    request.insert("timestamp".into(), s(&message.timestamp));
                    out.messages.push(Value::Object(request));
                }
            }
        }
    }
    out
}

fn user_prompts<'a>(
    parts: impl Iterator<Item = &'a crate::MessagePart>,
) -> Vec<&'a crate::UserPromptContent> {
    parts
        .filter_map(|part| match part {
            crate::MessagePart::UserPrompt(prompt) => Some(&prompt.content),
            _ => None,
        })
        .collect()
}

fn repeated_in_next_turn(user: &UserTurn, next: Option<&Turn>, viewing: &str) -> bool {
    let Some(Turn::Agent(next)) = next else {
        return false;
    };
    if next.agent_id != viewing {
        return false;
    }
    let Some(TurnMessage::Thread(first)) = next.messages.first() else {
        return false;
    };
    let mine = user_prompts(user.parts.iter());
    first.message_type == crate::MessageType::Request
        && !mine.is_empty()
        && user_prompts(first.parts.iter()) == mine
}

fn convert_parts<'a>(
    parts: impl Iterator<Item = &'a crate::MessagePart>,
    turn: usize,
    message: Option<usize>,
    skipped: &mut Vec<SkippedPart>,
) -> Vec<Value> {
    let mut out = Vec::new();
    for part in parts {
        let Ok(Value::Object(mut map)) = serde_json::to_value(part) else {
            continue;
        };
        let kind = part.kind().to_owned();
        match kind.as_str() {
            "thinking" => {
                if let Some(id) = map.remove("thinking_id") {
                    map.insert("id".into(), id);
                }
                map.entry("content").or_insert_with(|| s(""));
            }
            "tool-return" => {
                let status = map.remove("status");
                let status = status.as_ref().and_then(Value::as_str).unwrap_or("success");
                if status == "validation_error" && !map.contains_key("outcome") {
                    let mut retry = Map::new();
                    retry.insert("part_kind".into(), s("retry-prompt"));
                    let content = match map.remove("content") {
                        Some(content @ (Value::String(_) | Value::Array(_))) => content,
                        Some(other) => Value::String(other.to_string()),
                        None => s("validation error"),
                    };
                    retry.insert("content".into(), content);
                    for key in ["tool_name", "tool_call_id"] {
                        if let Some(value) = map.remove(key) {
                            retry.insert(key.into(), value);
                        }
                    }
                    out.push(Value::Object(retry));
                    continue;
                }
                if !map.contains_key("outcome") {
                    map.insert(
                        "outcome".into(),
                        s(if status == "success" {
                            "success"
                        } else {
                            "failed"
                        }),
                    );
                }
                map.entry("content").or_insert(Value::Null);
            }
            "user-prompt" | "text" | "tool-call" | "retry-prompt" | "file" => {}
            _ if kind.starts_with(CUSTOM_PREFIX) => {
                map.insert(
                    "part_kind".into(),
                    Value::String(kind[CUSTOM_PREFIX.len()..].to_owned()),
                );
            }
            _ => {
                skipped.push(SkippedPart {
                    turn,
                    message,
                    kind,
                });
                continue;
            }
        }
        out.push(Value::Object(map));
    }
    out
}

fn usage_to_pydantic(usage: &JsonMap) -> JsonMap {
    let mut out = Map::new();
    for (key, value) in usage {
        match key.as_str() {
            "total_tokens" => {}
            "thinking_tokens" => {
                out.insert("output_reasoning_tokens".into(), value.clone());
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out
}
