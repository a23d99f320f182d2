//! UPP messages, tools and options → a Responses API request body; a `response` object → an
//! [`LlmResponse`]. The stream decoder ends in the same [`decode_response`] with the object of
//! `response.completed`.

use serde_json::{Map, Value, json};

use crate::adapters::accumulate::parse_arguments;
use crate::adapters::driver::merge_params;
use crate::content::{ContentBlock, DocumentSource, ImageBlock, ImageSource, ReasoningBlock};
use crate::error::{ErrorCode, UppError};
use crate::message::{AssistantMessage, Message, MessageOptions, Metadata};
use crate::provider::{LlmRequest, LlmResponse};
use crate::tool::ToolCall;
use crate::tool_choice::ToolChoice;
use crate::turn::{CycleUsage, TokenUsage};

use super::{NAME, finish_reason};

/// The request body. `params` are merged last and win, except `tools` and `include`
/// (appended) and `text` (merged with the structured-output format).
pub(crate) fn request_body(
    model: &str,
    request: &LlmRequest,
    stream: bool,
) -> Result<Value, UppError> {
    let mut input = Vec::new();
    for message in request.messages() {
        encode_message(message, &mut input)?;
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    if let Some(system) = &request.system {
        body.insert("instructions".into(), json!(system));
    }
    body.insert("input".into(), Value::Array(input));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                let mut entry = Map::new();
                entry.insert("type".into(), json!("function"));
                entry.insert("name".into(), json!(tool.name));
                entry.insert("description".into(), json!(tool.description));
                entry.insert("parameters".into(), tool.parameters.clone());
                crate::adapters::driver::merge_tool_metadata(tool, &[NAME], &mut entry);
                Value::Object(entry)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = tool_choice(&request.tool_choice) {
            body.insert("tool_choice".into(), choice);
        }
    }
    if let Some(schema) = &request.structure {
        body.insert(
            "text".into(),
            json!({"format": {"type": "json_schema", "name": "response", "schema": schema, "strict": true}}),
        );
    }
    body.insert("stream".into(), json!(stream));
    merge_params(
        &mut body,
        request.params.as_ref(),
        &["tools", "include"],
        &["text"],
    );
    Ok(Value::Object(body))
}

/// The typed tool choice as the Responses API's `tool_choice` (`None` for `Auto`: the API's
/// default). A `tool_choice` in `params` replaces it (params are merged last).
fn tool_choice(choice: &ToolChoice) -> Option<Value> {
    match choice {
        ToolChoice::Auto => None,
        ToolChoice::Required => Some(json!("required")),
        ToolChoice::None => Some(json!("none")),
        ToolChoice::Tool(name) => Some(json!({"type": "function", "name": name})),
    }
}

fn invalid(message: impl Into<String>) -> UppError {
    UppError::llm(ErrorCode::InvalidRequest, NAME, message)
}

fn encode_message(message: &Message, out: &mut Vec<Value>) -> Result<(), UppError> {
    match message {
        Message::User(user) => {
            let texts: Vec<&str> = user
                .content
                .iter()
                .filter_map(ContentBlock::as_text)
                .collect();
            if texts.len() == 1 && user.content.len() == 1 {
                out.push(json!({"role": "user", "content": texts[0]}));
            } else {
                let parts: Result<Vec<Value>, UppError> =
                    user.content.iter().map(encode_user_part).collect();
                out.push(json!({"role": "user", "content": parts?}));
            }
        }
        Message::Assistant(assistant) => encode_assistant(assistant, out),
        Message::ToolResult(results) => {
            for result in &results.results {
                let output = match &result.result {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                out.push(json!({"type": "function_call_output", "call_id": result.tool_call_id, "output": output}));
            }
        }
    }
    Ok(())
}

fn data_url(mime: &str, data: &str) -> String {
    format!("data:{mime};base64,{data}")
}

fn encode_user_part(block: &ContentBlock) -> Result<Value, UppError> {
    Ok(match block {
        ContentBlock::Text(text) => json!({"type": "input_text", "text": text.text}),
        ContentBlock::Image(image) => {
            let url = match &image.source {
                ImageSource::Url { url } => url.clone(),
                ImageSource::Base64 { data } => data_url(&image.mime_type, data),
                ImageSource::Bytes { data } => data_url(&image.mime_type, &data.to_base64()),
            };
            json!({"type": "input_image", "image_url": url, "detail": "auto"})
        }
        ContentBlock::Document(document) => match &document.source {
            DocumentSource::Text { data } => json!({"type": "input_text", "text": data}),
            DocumentSource::Base64 { data } => json!({"type": "input_file",
                "filename": document.title.clone().unwrap_or_else(|| "document.pdf".into()),
                "file_data": data_url(&document.mime_type, data)}),
            DocumentSource::Url { url } => json!({"type": "input_file", "file_url": url}),
        },
        ContentBlock::Binary(binary) => json!({"type": "input_file",
            "filename": binary.metadata.as_ref().and_then(|m| m.get("filename")).and_then(Value::as_str).unwrap_or("file"),
            "file_data": data_url(&binary.mime_type, &binary.data.to_base64())}),
        other => {
            return Err(invalid(format!(
                "the Responses API cannot take {:?} content in a user message",
                other.block_type()
            )));
        }
    })
}

fn encode_assistant(assistant: &AssistantMessage, out: &mut Vec<Value>) {
    let namespace = assistant.provider_metadata(NAME);
    for block in &assistant.content {
        if let ContentBlock::Reasoning(reasoning) = block
            && let Some(Value::Object(item)) = reasoning.metadata.as_ref().and_then(|m| m.get(NAME))
            && item.contains_key("id")
        {
            // The reasoning item exactly as received: id, summary, encrypted_content, ….
            let mut item = item.clone();
            item.insert("type".into(), json!("reasoning"));
            out.push(Value::Object(item));
        }
    }
    if let Some(items) = namespace
        .and_then(|n| n.get("extra_items"))
        .and_then(Value::as_array)
    {
        out.extend(items.iter().cloned());
    }
    let text = assistant.text_content();
    if !text.is_empty() {
        out.push(json!({"role": "assistant", "content": text}));
    }
    let ids = namespace.and_then(|n| n.get("function_call_ids"));
    for call in &assistant.tool_calls {
        let mut item = Map::new();
        item.insert("type".into(), json!("function_call"));
        item.insert("call_id".into(), json!(call.tool_call_id));
        item.insert("name".into(), json!(call.tool_name));
        item.insert(
            "arguments".into(),
            json!(crate::adapters::accumulate::arguments_text(&call.arguments)),
        );
        if let Some(id) = ids.and_then(|ids| ids.get(&call.tool_call_id)) {
            item.insert("id".into(), id.clone());
        }
        out.push(Value::Object(item));
    }
}

/// Token usage: `input_tokens` already includes cached tokens
/// (`input_tokens_details.cached_tokens`, the cache-read subset).
pub(crate) fn usage(value: Option<&Value>) -> TokenUsage {
    let get = |pointer: &str| {
        value
            .and_then(|u| u.pointer(pointer))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    TokenUsage::from_cycle(CycleUsage {
        input_tokens: get("/input_tokens"),
        output_tokens: get("/output_tokens"),
        cache_read_tokens: get("/input_tokens_details/cached_tokens"),
        cache_write_tokens: 0,
    })
}

fn invalid_response(message: impl Into<String>, body: &Value) -> UppError {
    UppError::llm(ErrorCode::InvalidResponse, NAME, message).with_cause(body.clone())
}

fn reasoning_text(item: &Value) -> String {
    let collect = |key: &str| -> Vec<&str> {
        item.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect()
    };
    let summary = collect("summary");
    if summary.is_empty() {
        collect("content").join("\n\n")
    } else {
        summary.join("\n\n")
    }
}

/// Decodes a `response` object.
pub(crate) fn decode_response(body: &Value) -> Result<LlmResponse, UppError> {
    if let Some(error) = body.get("error").filter(|e| !e.is_null()) {
        return Err(error_from_object(error, body));
    }
    let status = body
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("completed");
    if status == "failed" {
        return Err(error_from_object(
            &json!({"message": "the response failed"}),
            body,
        ));
    }
    let output = body
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid_response("the response has no output array", body))?;
    let mut content = Vec::new();
    let mut calls = Vec::new();
    let mut call_ids = Map::new();
    let mut message_ids = Vec::new();
    let mut annotations = Vec::new();
    let mut extra_items = Vec::new();
    for item in output {
        match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => {
                let mut raw = item.as_object().cloned().unwrap_or_default();
                raw.remove("type");
                let mut metadata = Metadata::new();
                metadata.insert(NAME.into(), Value::Object(raw));
                content.push(ContentBlock::Reasoning(ReasoningBlock {
                    text: reasoning_text(item),
                    signature: None,
                    metadata: Some(metadata),
                }));
            }
            Some("message") => {
                if let Some(id) = item.get("id") {
                    message_ids.push(id.clone());
                }
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match part.get("type").and_then(Value::as_str) {
                        Some("output_text") => {
                            let text = part.get("text").and_then(Value::as_str).unwrap_or("");
                            content.push(ContentBlock::text(text));
                            if let Some(list) = part
                                .get("annotations")
                                .and_then(Value::as_array)
                                .filter(|a| !a.is_empty())
                            {
                                annotations.extend(list.iter().cloned());
                            }
                        }
                        Some("refusal") => {
                            let text = part.get("refusal").and_then(Value::as_str).unwrap_or("");
                            content.push(ContentBlock::text(text));
                        }
                        _ => {}
                    }
                }
            }
            Some("function_call") => {
                let call_id = item
                    .get("call_id")
                    .and_then(Value::as_str)
                    .or_else(|| item.get("id").and_then(Value::as_str));
                let name = item.get("name").and_then(Value::as_str);
                let (Some(call_id), Some(name)) = (call_id, name) else {
                    return Err(invalid_response(
                        "a function_call item lacks its call_id or name",
                        body,
                    ));
                };
                let arguments = item.get("arguments").and_then(Value::as_str).unwrap_or("");
                let arguments = parse_arguments(arguments, name, NAME)?;
                if let Some(id) = item.get("id").filter(|v| v.is_string()) {
                    call_ids.insert(call_id.to_owned(), id.clone());
                }
                calls.push(ToolCall::new(call_id, name, arguments));
            }
            Some("image_generation_call") => {
                if let Some(result) = item.get("result").and_then(Value::as_str) {
                    let format = item
                        .get("output_format")
                        .and_then(Value::as_str)
                        .unwrap_or("png");
                    content.push(ContentBlock::Image(ImageBlock {
                        source: ImageSource::Base64 {
                            data: result.to_owned(),
                        },
                        mime_type: format!("image/{format}"),
                        width: None,
                        height: None,
                    }));
                }
                let mut kept = item.clone();
                if let Some(object) = kept.as_object_mut() {
                    object.remove("result");
                }
                extra_items.push(kept);
            }
            _ => extra_items.push(item.clone()),
        }
    }
    let mut namespace = Map::new();
    for key in [
        "id",
        "model",
        "status",
        "created_at",
        "service_tier",
        "incomplete_details",
        "usage",
        "previous_response_id",
    ] {
        if let Some(value) = body.get(key).filter(|v| !v.is_null()) {
            namespace.insert(key.into(), value.clone());
        }
    }
    if !call_ids.is_empty() {
        namespace.insert("function_call_ids".into(), Value::Object(call_ids));
    }
    if !message_ids.is_empty() {
        namespace.insert("message_ids".into(), Value::Array(message_ids));
    }
    if !annotations.is_empty() {
        namespace.insert("annotations".into(), Value::Array(annotations));
    }
    if !extra_items.is_empty() {
        namespace.insert("extra_items".into(), Value::Array(extra_items));
    }
    let mut metadata = Metadata::new();
    metadata.insert(NAME.into(), Value::Object(namespace));
    let has_calls = !calls.is_empty();
    let message = AssistantMessage::new(
        content,
        calls,
        MessageOptions {
            id: None,
            metadata: Some(metadata),
        },
    )
    .map_err(|e| invalid_response(e.to_string(), body))?;
    let reason = body
        .pointer("/incomplete_details/reason")
        .and_then(Value::as_str);
    Ok(LlmResponse {
        message,
        usage: usage(body.get("usage")),
        stop_reason: finish_reason::map(status, reason, has_calls).to_owned(),
        data: None,
    })
}

/// An error object (`response.error`, an `error` event, or its `error` field) → [`UppError`],
/// `cause` the whole object it came in.
pub(crate) fn error_from_object(error: &Value, cause: &Value) -> UppError {
    let error = error
        .get("error")
        .filter(|e| e.is_object())
        .unwrap_or(error);
    let code = error.get("code").and_then(Value::as_str).unwrap_or("");
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("");
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the Responses API reported an error")
        .to_owned();
    let lower = format!("{code} {kind} {}", message.to_ascii_lowercase());
    let code = if crate::http::is_context_overflow(&lower) {
        ErrorCode::ContextLengthExceeded
    } else if lower.contains("rate_limit") {
        ErrorCode::RateLimited
    } else if lower.contains("insufficient_quota") {
        ErrorCode::QuotaExceeded
    } else if lower.contains("invalid_api_key") || lower.contains("authentication") {
        ErrorCode::AuthenticationFailed
    } else if lower.contains("model_not_found") {
        ErrorCode::ModelNotFound
    } else if lower.contains("content_filter") || lower.contains("content policy") {
        ErrorCode::ContentFiltered
    } else if lower.contains("invalid_request") || lower.contains("invalid_prompt") {
        ErrorCode::InvalidRequest
    } else {
        ErrorCode::ProviderError
    };
    UppError::llm(code, NAME, message).with_cause(cause.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_never_panics() {
        for body in [
            json!(null),
            json!({"output": 3}),
            json!({"output": [{"type": "function_call"}]}),
            json!({"output": [{"type": "function_call", "call_id": "c", "name": "n", "arguments": "{"}]}),
            json!({"output": [{"type": "message", "content": [{"type": "output_text", "text": 4}]}]}),
            json!({"output": [{"type": "reasoning", "summary": "x"}]}),
            json!({"status": "failed"}),
            json!({"error": {"code": "server_error"}}),
        ] {
            let _ = decode_response(&body);
        }
    }

    #[test]
    fn error_codes() {
        let table = [
            ("rate_limit_exceeded", ErrorCode::RateLimited),
            ("context_length_exceeded", ErrorCode::ContextLengthExceeded),
            ("server_error", ErrorCode::ProviderError),
            ("invalid_prompt", ErrorCode::InvalidRequest),
        ];
        for (code, expected) in table {
            let error = json!({"code": code, "message": "m"});
            assert_eq!(error_from_object(&error, &error).code, expected, "{code}");
        }
    }
}
