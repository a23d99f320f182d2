//! UPP messages, tools and options → a Messages API request body; a Messages API `message`
//! object → an [`LlmResponse`]. The stream decoder rebuilds that same `message` object from
//! the events, so both paths end in [`decode_message`].

use serde_json::{Map, Value, json};

use crate::adapters::accumulate::parse_arguments;
use crate::adapters::driver::merge_params;
use crate::content::{ContentBlock, DocumentSource, ImageSource, ReasoningBlock};
use crate::error::{ErrorCode, UppError};
use crate::message::{AssistantMessage, Message, MessageOptions, Metadata};
use crate::provider::{LlmRequest, LlmResponse};
use crate::tool::ToolCall;
use crate::tool_choice::ToolChoice;
use crate::turn::{CycleUsage, TokenUsage};

use super::{DEFAULT_MAX_TOKENS, NAME, finish_reason};

/// The request body. `params` are merged last and win, except `tools` (appended after the
/// function tools) and `output_config` (merged with the structured-output format).
pub(crate) fn request_body(
    model: &str,
    request: &LlmRequest,
    stream: bool,
) -> Result<Value, UppError> {
    let mut messages: Vec<Value> = Vec::with_capacity(request.messages.len());
    for message in request.messages() {
        let (role, content) = encode_message(message)?;
        if content.is_empty() {
            continue;
        }
        // Anthropic wants alternating roles: a user message after tool results joins them.
        if let Some(last) = messages.last_mut()
            && last.get("role").and_then(Value::as_str) == Some(role)
            && let Some(Value::Array(existing)) = last.get_mut("content")
        {
            existing.extend(content);
            continue;
        }
        messages.push(json!({"role": role, "content": content}));
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(DEFAULT_MAX_TOKENS));
    if let Some(system) = request.system.as_ref().filter(|s| !s.is_empty()) {
        body.insert("system".into(), json!(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                let mut entry = Map::new();
                entry.insert("name".into(), json!(tool.name));
                entry.insert("description".into(), json!(tool.description));
                entry.insert("input_schema".into(), tool.parameters.clone());
                crate::adapters::driver::merge_tool_metadata(tool, &[NAME], &mut entry);
                Value::Object(entry)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = tool_choice(&request.tool_choice, request.params.as_ref()) {
            body.insert("tool_choice".into(), choice);
        }
    }
    if let Some(schema) = &request.structure {
        body.insert(
            "output_config".into(),
            json!({"format": {"type": "json_schema", "schema": schema}}),
        );
    }
    body.insert("stream".into(), json!(stream));
    merge_params(
        &mut body,
        request.params.as_ref(),
        &["tools"],
        &["output_config"],
    );
    Ok(Value::Object(body))
}

/// The typed tool choice as the Messages API's `tool_choice` (`None` for `Auto`: the API's
/// default). A `tool_choice` in `params` replaces it (params are merged last).
///
/// With extended thinking on (`params.thinking.type` other than `disabled`) the API refuses a
/// forced choice (`any`, `tool`): none is sent then, so the request is the API's `auto`, and
/// the caller checks the reply (see [`crate::tool_choice`]).
fn tool_choice(choice: &ToolChoice, params: Option<&Map<String, Value>>) -> Option<Value> {
    let thinking = params
        .and_then(|p| p.get("thinking"))
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|kind| kind != "disabled");
    if thinking && choice.forces_a_call() {
        tracing::debug!(
            ?choice,
            "extended thinking is on: Anthropic refuses a forced tool choice, sending none (auto)"
        );
        return None;
    }
    match choice {
        ToolChoice::Auto => None,
        ToolChoice::Required => Some(json!({"type": "any"})),
        ToolChoice::None => Some(json!({"type": "none"})),
        ToolChoice::Tool(name) => Some(json!({"type": "tool", "name": name})),
    }
}

fn invalid(message: impl Into<String>) -> UppError {
    UppError::llm(ErrorCode::InvalidRequest, NAME, message)
}

fn encode_message(message: &Message) -> Result<(&'static str, Vec<Value>), UppError> {
    let (role, mut content) = match message {
        Message::User(user) => {
            let mut parts = Vec::with_capacity(user.content.len());
            for block in &user.content {
                if let Some(part) = encode_user_block(block)? {
                    parts.push(part);
                }
            }
            ("user", parts)
        }
        Message::Assistant(assistant) => ("assistant", encode_assistant(assistant)),
        Message::ToolResult(results) => {
            let parts = results
                .results
                .iter()
                .map(|result| {
                    let content = match &result.result {
                        Value::String(text) => json!(text),
                        // Content blocks given as is (e.g. text plus image results).
                        Value::Array(items)
                            if items
                                .iter()
                                .all(|i| i.get("type").is_some_and(Value::is_string)) =>
                        {
                            Value::Array(items.clone())
                        }
                        other => json!(other.to_string()),
                    };
                    json!({"type": "tool_result", "tool_use_id": result.tool_call_id,
                           "content": content, "is_error": result.is_error})
                })
                .collect();
            ("user", parts)
        }
    };
    // Prompt caching: `metadata.anthropic.cache_control` marks the message's last block.
    if let Some(cache_control) = message
        .metadata()
        .and_then(|m| m.get(NAME))
        .and_then(|m| m.get("cache_control"))
        && let Some(Value::Object(last)) = content.last_mut()
    {
        last.insert("cache_control".into(), cache_control.clone());
    }
    Ok((role, content))
}

fn encode_user_block(block: &ContentBlock) -> Result<Option<Value>, UppError> {
    Ok(Some(match block {
        ContentBlock::Text(text) if text.text.is_empty() => return Ok(None),
        ContentBlock::Text(text) => json!({"type": "text", "text": text.text}),
        ContentBlock::Image(image) => {
            let source = match &image.source {
                ImageSource::Url { url } => json!({"type": "url", "url": url}),
                ImageSource::Base64 { data } => {
                    json!({"type": "base64", "media_type": image.mime_type, "data": data})
                }
                ImageSource::Bytes { data } => {
                    json!({"type": "base64", "media_type": image.mime_type, "data": data.to_base64()})
                }
            };
            json!({"type": "image", "source": source})
        }
        ContentBlock::Document(document) => {
            let source = match &document.source {
                DocumentSource::Base64 { data } => {
                    json!({"type": "base64", "media_type": document.mime_type, "data": data})
                }
                DocumentSource::Url { url } => json!({"type": "url", "url": url}),
                DocumentSource::Text { data } => {
                    json!({"type": "text", "media_type": "text/plain", "data": data})
                }
            };
            let mut part = json!({"type": "document", "source": source});
            if let (Some(title), Some(object)) = (&document.title, part.as_object_mut()) {
                object.insert("title".into(), json!(title));
            }
            part
        }
        ContentBlock::Binary(binary) if binary.mime_type == "application/pdf" => {
            json!({"type": "document", "source": {"type": "base64",
                   "media_type": "application/pdf", "data": binary.data.to_base64()}})
        }
        ContentBlock::Binary(binary) if binary.mime_type.starts_with("image/") => {
            json!({"type": "image", "source": {"type": "base64",
                   "media_type": binary.mime_type, "data": binary.data.to_base64()}})
        }
        other => {
            return Err(invalid(format!(
                "the Anthropic Messages API cannot take {:?} content in a user message",
                other.block_type()
            )));
        }
    }))
}

fn encode_assistant(assistant: &AssistantMessage) -> Vec<Value> {
    let namespace = assistant.provider_metadata(NAME);
    let mut parts = Vec::new();
    for block in &assistant.content {
        if let ContentBlock::Reasoning(reasoning) = block
            && let Some(part) = encode_reasoning(reasoning)
        {
            parts.push(part);
        }
    }
    // Server-side tool blocks (server_tool_use, web_search_tool_result, …) go back as received.
    if let Some(extra) = namespace
        .and_then(|n| n.get("extra_blocks"))
        .and_then(Value::as_array)
    {
        parts.extend(extra.iter().cloned());
    }
    for block in &assistant.content {
        if let ContentBlock::Text(text) = block
            && !text.text.is_empty()
        {
            parts.push(json!({"type": "text", "text": text.text}));
        }
    }
    for call in &assistant.tool_calls {
        parts.push(json!({"type": "tool_use", "id": call.tool_call_id,
                          "name": call.tool_name, "input": crate::adapters::accumulate::arguments_object(&call.arguments)}));
    }
    parts
}

/// Anthropic thinking goes back only when it came from Anthropic: a signed `thinking` block
/// or a `redacted_thinking` block (its `data` in `metadata.anthropic`). Reasoning from other
/// providers has no valid signature and is left out.
fn encode_reasoning(reasoning: &ReasoningBlock) -> Option<Value> {
    let namespace = reasoning.metadata.as_ref().and_then(|m| m.get(NAME));
    if let Some(data) = namespace
        .filter(|n| n.get("type").and_then(Value::as_str) == Some("redacted_thinking"))
        .and_then(|n| n.get("data"))
    {
        return Some(json!({"type": "redacted_thinking", "data": data}));
    }
    let signature = reasoning.signature.as_ref()?;
    namespace?;
    Some(json!({"type": "thinking", "thinking": reasoning.text, "signature": signature}))
}

/// Token usage: `inputTokens` counts every input token processed, cached or not
/// (`input_tokens + cache_read_input_tokens + cache_creation_input_tokens`).
pub(crate) fn usage(value: Option<&Value>) -> TokenUsage {
    let get = |key: &str| {
        value
            .and_then(|u| u.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let cache_read = get("cache_read_input_tokens");
    let cache_write = get("cache_creation_input_tokens");
    TokenUsage::from_cycle(CycleUsage {
        input_tokens: get("input_tokens") + cache_read + cache_write,
        output_tokens: get("output_tokens"),
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
    })
}

fn invalid_response(message: impl Into<String>, body: &Value) -> UppError {
    UppError::llm(ErrorCode::InvalidResponse, NAME, message).with_cause(body.clone())
}

/// Decodes a `message` object (the non-streaming body, or the one rebuilt from a stream).
pub(crate) fn decode_message(body: &Value) -> Result<LlmResponse, UppError> {
    if body.get("type").and_then(Value::as_str) == Some("error") {
        return Err(error_from_event(body));
    }
    let blocks = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid_response("the response has no content array", body))?;
    let mut content = Vec::new();
    let mut calls = Vec::new();
    let mut extra_blocks = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                content.push(ContentBlock::text(text));
            }
            Some("thinking") => {
                let mut metadata = Metadata::new();
                metadata.insert(NAME.into(), json!({"type": "thinking"}));
                content.push(ContentBlock::Reasoning(ReasoningBlock {
                    text: block
                        .get("thinking")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    signature: block
                        .get("signature")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    metadata: Some(metadata),
                }));
            }
            Some("redacted_thinking") => {
                let mut metadata = Metadata::new();
                metadata.insert(
                    NAME.into(),
                    json!({"type": "redacted_thinking", "data": block.get("data").cloned().unwrap_or(Value::Null)}),
                );
                content.push(ContentBlock::Reasoning(ReasoningBlock {
                    text: String::new(),
                    signature: None,
                    metadata: Some(metadata),
                }));
            }
            Some("tool_use") => {
                let id = block.get("id").and_then(Value::as_str);
                let name = block.get("name").and_then(Value::as_str);
                let (Some(id), Some(name)) = (id, name) else {
                    return Err(invalid_response(
                        "a tool_use block lacks its id or name",
                        body,
                    ));
                };
                let arguments = match block.get("input") {
                    Some(Value::String(text)) => parse_arguments(text, name, NAME)?,
                    Some(Value::Null) | None => Value::Object(Map::new()),
                    Some(value) => value.clone(),
                };
                calls.push(ToolCall::new(id, name, arguments));
            }
            _ => extra_blocks.push(block.clone()),
        }
    }
    let stop = body.get("stop_reason").and_then(Value::as_str);
    let mut namespace = Map::new();
    if let Some(object) = body.as_object() {
        for (key, value) in object {
            if !matches!(key.as_str(), "content" | "role" | "type") && !value.is_null() {
                namespace.insert(key.clone(), value.clone());
            }
        }
    }
    if !extra_blocks.is_empty() {
        namespace.insert("extra_blocks".into(), Value::Array(extra_blocks));
    }
    let mut metadata = Metadata::new();
    metadata.insert(NAME.into(), Value::Object(namespace));
    let message = AssistantMessage::new(
        content,
        calls,
        MessageOptions {
            id: None,
            metadata: Some(metadata),
        },
    )
    .map_err(|e| invalid_response(e.to_string(), body))?;
    let stop_reason = match stop {
        Some(reason) => finish_reason::map(reason).to_owned(),
        None if message.has_tool_calls() => "tool_use".to_owned(),
        None => "end_turn".to_owned(),
    };
    Ok(LlmResponse {
        message,
        usage: usage(body.get("usage")),
        stop_reason,
        data: None,
    })
}

/// An error object (`{"type": "error", "error": {"type", "message"}}`, in a stream or a body)
/// → [`UppError`], the whole object as `cause`.
pub(crate) fn error_from_event(event: &Value) -> UppError {
    let error = event.get("error").unwrap_or(event);
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("");
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the Anthropic API reported an error")
        .to_owned();
    let lower = message.to_ascii_lowercase();
    let (code, status) = match kind {
        "overloaded_error" => (ErrorCode::ProviderError, Some(529)),
        "api_error" => (ErrorCode::ProviderError, Some(500)),
        "rate_limit_error" => (ErrorCode::RateLimited, Some(429)),
        "authentication_error" => (ErrorCode::AuthenticationFailed, Some(401)),
        "permission_error" => (ErrorCode::AuthenticationFailed, Some(403)),
        "not_found_error" => (ErrorCode::ModelNotFound, Some(404)),
        "billing_error" => (ErrorCode::QuotaExceeded, Some(402)),
        "timeout_error" => (ErrorCode::Timeout, Some(504)),
        "request_too_large" => (ErrorCode::InvalidRequest, Some(413)),
        "invalid_request_error" if crate::http::is_context_overflow(&lower) => {
            (ErrorCode::ContextLengthExceeded, Some(400))
        }
        "invalid_request_error" => (ErrorCode::InvalidRequest, Some(400)),
        _ => (ErrorCode::ProviderError, None),
    };
    let mut upp = UppError::llm(code, NAME, message).with_cause(event.clone());
    upp.status_code = status;
    upp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_cached_input() {
        let usage = usage(Some(
            &json!({"input_tokens": 10, "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 5, "output_tokens": 7}),
        ));
        assert_eq!(
            (
                usage.input_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                usage.output_tokens
            ),
            (115, 100, 5, 7)
        );
    }

    #[test]
    fn garbage_never_panics() {
        for body in [
            json!(null),
            json!([]),
            json!({"content": "x"}),
            json!({"content": [{"type": "tool_use"}]}),
            json!({"content": [{"type": "tool_use", "id": "a", "name": "b", "input": "{"}]}),
            json!({"content": [{"type": 5}, {"type": "thinking", "thinking": 3}]}),
            json!({"type": "error"}),
        ] {
            let _ = decode_message(&body);
        }
    }

    #[test]
    fn error_types_map_to_codes() {
        let table = [
            ("overloaded_error", ErrorCode::ProviderError),
            ("rate_limit_error", ErrorCode::RateLimited),
            ("authentication_error", ErrorCode::AuthenticationFailed),
            ("not_found_error", ErrorCode::ModelNotFound),
            ("invalid_request_error", ErrorCode::InvalidRequest),
        ];
        for (kind, code) in table {
            let e = error_from_event(
                &json!({"type": "error", "error": {"type": kind, "message": "m"}}),
            );
            assert_eq!(e.code, code, "{kind}");
            assert!(e.cause.is_some());
        }
    }
}
