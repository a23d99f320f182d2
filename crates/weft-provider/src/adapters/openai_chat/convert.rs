//! UPP messages, tools and options → a Chat Completions request body; a response body → an
//! [`LlmResponse`].

use serde_json::{Map, Value, json};

use crate::content::{ContentBlock, DocumentSource, ImageSource};
use crate::error::{ErrorCode, UppError};
use crate::message::{Message, MessageOptions, Metadata};
use crate::provider::{LlmRequest, LlmResponse};
use crate::tool::ToolCall;
use crate::tool_choice::ToolChoice;
use crate::turn::{CycleUsage, TokenUsage};

use super::finish_reason;

/// The request body. `params` are merged last and win over Weft's own keys.
pub(crate) fn request_body(
    model: &str,
    request: &LlmRequest,
    provider: &str,
    stream: bool,
) -> Result<Value, UppError> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in request.messages() {
        encode_message(message, provider, &mut messages)?;
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                let mut function = json!({
                    "name": tool.name, "description": tool.description, "parameters": tool.parameters});
                // Tool options namespaced `openai` or by this provider's name, e.g.
                // `{"openai": {"strict": true}}`, go into the function definition.
                if let Some(target) = function.as_object_mut() {
                    crate::adapters::driver::merge_tool_metadata(tool, &["openai", provider], target);
                }
                json!({"type": "function", "function": function})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = tool_choice(&request.tool_choice) {
            body.insert("tool_choice".into(), choice);
        }
    }
    if let Some(schema) = &request.structure {
        body.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {"name": "response", "schema": schema, "strict": true}}),
        );
    }
    body.insert("stream".into(), json!(stream));
    if stream {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(params) = &request.params {
        for (key, value) in params {
            body.insert(key.clone(), value.clone());
        }
    }
    Ok(Value::Object(body))
}

/// The typed tool choice as Chat Completions' `tool_choice` (`None` for `Auto`: the API's
/// default). A `tool_choice` in `params` replaces it (params are merged last).
fn tool_choice(choice: &ToolChoice) -> Option<Value> {
    match choice {
        ToolChoice::Auto => None,
        ToolChoice::Required => Some(json!("required")),
        ToolChoice::None => Some(json!("none")),
        ToolChoice::Tool(name) => Some(json!({"type": "function", "function": {"name": name}})),
    }
}

fn encode_message(message: &Message, provider: &str, out: &mut Vec<Value>) -> Result<(), UppError> {
    match message {
        Message::User(user) => {
            let only_text = user
                .content
                .iter()
                .all(|b| matches!(b, ContentBlock::Text(_)));
            let content = if only_text {
                json!(message.text())
            } else {
                let parts: Result<Vec<Value>, UppError> = user
                    .content
                    .iter()
                    .map(|b| encode_user_part(b, provider))
                    .collect();
                Value::Array(parts?)
            };
            out.push(json!({"role": "user", "content": content}));
        }
        Message::Assistant(assistant) => {
            let mut entry = Map::new();
            entry.insert("role".into(), json!("assistant"));
            let text = assistant.text_content();
            if !text.is_empty() || assistant.tool_calls.is_empty() {
                entry.insert("content".into(), json!(text));
            }
            if !assistant.tool_calls.is_empty() {
                let calls: Vec<Value> = assistant
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.tool_call_id, "type": "function",
                               "function": {"name": c.tool_name, "arguments": crate::adapters::accumulate::arguments_text(&c.arguments)}})
                    })
                    .collect();
                entry.insert("tool_calls".into(), Value::Array(calls));
            }
            if let Some(extra) = assistant
                .provider_metadata(provider)
                .and_then(|m| m.get("extra_content"))
            {
                entry.insert("extra_content".into(), extra.clone());
            }
            out.push(Value::Object(entry));
        }
        Message::ToolResult(results) => {
            for result in &results.results {
                let content = match &result.result {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push(json!({"role": "tool", "tool_call_id": result.tool_call_id, "content": content}));
            }
        }
    }
    Ok(())
}

fn encode_user_part(block: &ContentBlock, provider: &str) -> Result<Value, UppError> {
    Ok(match block {
        ContentBlock::Text(t) => json!({"type": "text", "text": t.text}),
        ContentBlock::Image(image) => {
            let url = match &image.source {
                ImageSource::Url { url } => url.clone(),
                ImageSource::Base64 { data } => format!("data:{};base64,{data}", image.mime_type),
                ImageSource::Bytes { data } => {
                    format!("data:{};base64,{}", image.mime_type, data.to_base64())
                }
            };
            json!({"type": "image_url", "image_url": {"url": url}})
        }
        ContentBlock::Document(doc) => match &doc.source {
            DocumentSource::Text { data } => json!({"type": "text", "text": data}),
            DocumentSource::Base64 { data } => json!({"type": "file", "file": {
                "filename": doc.title.clone().unwrap_or_else(|| "document.pdf".into()),
                "file_data": format!("data:{};base64,{data}", doc.mime_type)}}),
            DocumentSource::Url { .. } => {
                return Err(UppError::llm(
                    ErrorCode::InvalidRequest,
                    provider,
                    "Chat Completions cannot take a document by URL; send it as base64",
                ));
            }
        },
        ContentBlock::Audio(audio) => {
            let format = audio
                .mime_type
                .rsplit('/')
                .next()
                .unwrap_or("wav")
                .replace("mpeg", "mp3");
            json!({"type": "input_audio", "input_audio": {"data": audio.data.to_base64(), "format": format}})
        }
        ContentBlock::Binary(binary) => json!({"type": "file", "file": {
            "file_data": format!("data:{};base64,{}", binary.mime_type, binary.data.to_base64())}}),
        ContentBlock::Reasoning(_) | ContentBlock::Video(_) => {
            return Err(UppError::llm(
                ErrorCode::InvalidRequest,
                provider,
                format!(
                    "Chat Completions cannot take {:?} content in a user message",
                    block.block_type()
                ),
            ));
        }
    })
}

/// A tool call id for a provider that sent none (some compatible servers).
pub(crate) fn fresh_call_id() -> String {
    format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..24])
}

pub(crate) fn usage(value: Option<&Value>) -> TokenUsage {
    let Some(usage) = value.filter(|v| v.is_object()) else {
        return TokenUsage::from_cycle(CycleUsage::default());
    };
    let get = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    TokenUsage::from_cycle(CycleUsage {
        input_tokens: get("/prompt_tokens"),
        output_tokens: get("/completion_tokens"),
        cache_read_tokens: get("/prompt_tokens_details/cached_tokens"),
        cache_write_tokens: 0,
    })
}

/// Response metadata kept under the provider's namespace.
pub(crate) fn response_metadata(
    body: &Value,
    message: Option<&Value>,
    finish: Option<&str>,
) -> Value {
    let mut meta = Map::new();
    for key in [
        "id",
        "model",
        "system_fingerprint",
        "service_tier",
        "created",
    ] {
        if let Some(v) = body.get(key).filter(|v| !v.is_null()) {
            meta.insert(key.into(), v.clone());
        }
    }
    if let Some(finish) = finish {
        meta.insert("finish_reason".into(), json!(finish));
    }
    if let Some(usage) = body.get("usage").filter(|v| v.is_object()) {
        meta.insert("usage".into(), usage.clone());
    }
    if let Some(message) = message.and_then(Value::as_object) {
        for (key, value) in message {
            let known = matches!(
                key.as_str(),
                "role"
                    | "content"
                    | "tool_calls"
                    | "reasoning_content"
                    | "reasoning"
                    | "function_call"
            );
            if !known && !value.is_null() {
                meta.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(meta)
}

pub(crate) fn decode_response(body: &Value, provider: &str) -> Result<LlmResponse, UppError> {
    if let Some(error) = body.get("error").filter(|e| !e.is_null()) {
        return Err(stream_error(error, provider));
    }
    let invalid = |what: &str| {
        UppError::llm(
            ErrorCode::InvalidResponse,
            provider,
            format!("invalid Chat Completions response: {what}"),
        )
        .with_cause(body.clone())
    };
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| invalid("no choices"))?;
    let message = choice
        .get("message")
        .ok_or_else(|| invalid("choice without message"))?;
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    let mut content = Vec::new();
    for key in ["reasoning_content", "reasoning"] {
        if let Some(text) = message
            .get(key)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            content.push(ContentBlock::reasoning(text));
            break;
        }
    }
    if let Some(text) = message
        .get("content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        content.push(ContentBlock::text(text));
    }
    let mut calls = Vec::new();
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = call
            .pointer("/function/name")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("tool call without a function name"))?;
        let arguments = call
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("");
        let arguments = super::super::accumulate::parse_arguments(arguments, name, provider)?;
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map_or_else(fresh_call_id, str::to_owned);
        calls.push(ToolCall::new(id, name, arguments));
    }
    if content.is_empty()
        && calls.is_empty()
        && let Some(refusal) = message.get("refusal").and_then(Value::as_str)
    {
        content.push(ContentBlock::text(refusal));
    }
    let mut metadata = Metadata::new();
    metadata.insert(
        provider.to_owned(),
        response_metadata(body, Some(message), finish),
    );
    let message = crate::message::AssistantMessage::new(
        content,
        calls,
        MessageOptions {
            id: None,
            metadata: Some(metadata),
        },
    )
    .map_err(|e| invalid(&e.to_string()))?;
    let stop_reason = match finish {
        Some(f) => finish_reason::map(f).to_owned(),
        None if message.has_tool_calls() => "tool_use".to_owned(),
        None => "end_turn".to_owned(),
    };
    if finish == Some("content_filter")
        && message.content.is_empty()
        && message.tool_calls.is_empty()
    {
        return Err(UppError::llm(
            ErrorCode::ContentFiltered,
            provider,
            "the response was blocked by the content filter",
        ));
    }
    Ok(LlmResponse {
        message,
        usage: usage(body.get("usage")),
        stop_reason,
        data: None,
    })
}

/// An `error` object inside a 200 response or a stream chunk.
pub(crate) fn stream_error(error: &Value, provider: &str) -> UppError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the provider reported an error")
        .to_owned();
    let kind = [error.get("code"), error.get("type")]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase();
    let lower = format!("{} {kind}", message.to_ascii_lowercase());
    let code = if crate::http::is_context_overflow(&lower) {
        ErrorCode::ContextLengthExceeded
    } else if lower.contains("rate_limit") || lower.contains("rate limit") {
        ErrorCode::RateLimited
    } else if lower.contains("content_filter") {
        ErrorCode::ContentFiltered
    } else if lower.contains("invalid_request") {
        ErrorCode::InvalidRequest
    } else {
        ErrorCode::ProviderError
    };
    UppError::llm(code, provider, message).with_cause(error.clone())
}
