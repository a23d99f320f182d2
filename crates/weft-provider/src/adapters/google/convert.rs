//! UPP messages, tools and options → a `generateContent` request body; a
//! `GenerateContentResponse` → an [`LlmResponse`]. The stream decoder merges its chunks into
//! one such response and ends in the same [`decode_response`].

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::adapters::driver::merge_params;
use crate::content::{
    AudioBlock, Blob, ContentBlock, DocumentSource, ImageBlock, ImageSource, ReasoningBlock,
    VideoBlock,
};
use crate::error::{ErrorCode, Modality, UppError};
use crate::message::{AssistantMessage, Message, MessageOptions, Metadata};
use crate::provider::{LlmRequest, LlmResponse};
use crate::tool::ToolCall;
use crate::tool_choice::ToolChoice;
use crate::turn::{CycleUsage, TokenUsage};

use super::{NAME, finish_reason};

/// The request body. `params` are merged last and win, except `tools` (appended after the
/// function declarations) and `generationConfig` (merged with the structured-output fields).
pub(crate) fn request_body(request: &LlmRequest) -> Result<Value, UppError> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut contents = Vec::new();
    for message in request.messages() {
        if let Message::Assistant(assistant) = message {
            for call in &assistant.tool_calls {
                names.insert(&call.tool_call_id, &call.tool_name);
            }
        }
        let (role, parts) = encode_message(message, &names)?;
        if parts.is_empty() {
            continue;
        }
        if let Some(last) = contents.last_mut()
            && let Some(Value::Array(existing)) = merge_target(last, role)
        {
            existing.extend(parts);
            continue;
        }
        contents.push(json!({"role": role, "parts": parts}));
    }
    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents));
    if let Some(system) = request.system.as_ref().filter(|s| !s.is_empty()) {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system}]}),
        );
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                let mut entry = Map::new();
                entry.insert("name".into(), json!(tool.name));
                entry.insert("description".into(), json!(tool.description));
                entry.insert("parametersJsonSchema".into(), tool.parameters.clone());
                crate::adapters::driver::merge_tool_metadata(tool, &[NAME], &mut entry);
                Value::Object(entry)
            })
            .collect();
        body.insert(
            "tools".into(),
            json!([{ "functionDeclarations": declarations }]),
        );
        let snake_case_set = request
            .params
            .as_ref()
            .is_some_and(|p| p.contains_key("tool_config"));
        if let Some(config) = function_calling_config(&request.tool_choice)
            && !snake_case_set
        {
            body.insert(
                "toolConfig".into(),
                json!({ "functionCallingConfig": config }),
            );
        }
    }
    if let Some(schema) = &request.structure {
        body.insert(
            "generationConfig".into(),
            json!({"responseMimeType": "application/json", "responseJsonSchema": schema}),
        );
    }
    merge_params(
        &mut body,
        request.params.as_ref(),
        &["tools"],
        &["generationConfig", "toolConfig"],
    );
    Ok(Value::Object(body))
}

/// The typed tool choice as `toolConfig.functionCallingConfig` (`None` for `Auto`: the API's
/// default). A `params.toolConfig.functionCallingConfig` replaces it (`toolConfig` is merged
/// key by key); a `params.tool_config` means it is not sent at all.
fn function_calling_config(choice: &ToolChoice) -> Option<Value> {
    match choice {
        ToolChoice::Auto => None,
        ToolChoice::Required => Some(json!({"mode": "ANY"})),
        ToolChoice::None => Some(json!({"mode": "NONE"})),
        ToolChoice::Tool(name) => Some(json!({"mode": "ANY", "allowedFunctionNames": [name]})),
    }
}

fn merge_target<'a>(last: &'a mut Value, role: &str) -> Option<&'a mut Value> {
    if last.get("role").and_then(Value::as_str) == Some(role) {
        last.get_mut("parts")
    } else {
        None
    }
}

fn invalid(message: impl Into<String>) -> UppError {
    UppError::llm(ErrorCode::InvalidRequest, NAME, message)
}

fn inline(mime: &str, data: String) -> Value {
    json!({"inlineData": {"mimeType": mime, "data": data}})
}

fn encode_message(
    message: &Message,
    names: &HashMap<&str, &str>,
) -> Result<(&'static str, Vec<Value>), UppError> {
    Ok(match message {
        Message::User(user) => {
            let mut parts = Vec::new();
            for block in &user.content {
                parts.push(match block {
                    ContentBlock::Text(text) => json!({"text": text.text}),
                    ContentBlock::Image(image) => match &image.source {
                        ImageSource::Base64 { data } => inline(&image.mime_type, data.clone()),
                        ImageSource::Bytes { data } => inline(&image.mime_type, data.to_base64()),
                        ImageSource::Url { url } => {
                            json!({"fileData": {"mimeType": image.mime_type, "fileUri": url}})
                        }
                    },
                    ContentBlock::Document(document) => match &document.source {
                        DocumentSource::Text { data } => json!({"text": data}),
                        DocumentSource::Base64 { data } => {
                            inline(&document.mime_type, data.clone())
                        }
                        DocumentSource::Url { url } => {
                            json!({"fileData": {"mimeType": document.mime_type, "fileUri": url}})
                        }
                    },
                    ContentBlock::Audio(audio) => inline(&audio.mime_type, audio.data.to_base64()),
                    ContentBlock::Video(video) => inline(&video.mime_type, video.data.to_base64()),
                    ContentBlock::Binary(binary) => {
                        inline(&binary.mime_type, binary.data.to_base64())
                    }
                    ContentBlock::Reasoning(_) => {
                        return Err(invalid("a user message cannot hold reasoning"));
                    }
                });
            }
            ("user", parts)
        }
        Message::Assistant(assistant) => ("model", encode_assistant(assistant)),
        Message::ToolResult(results) => {
            let parts = results
                .results
                .iter()
                .map(|result| {
                    let name = names
                        .get(result.tool_call_id.as_str())
                        .copied()
                        .unwrap_or_default();
                    let key = if result.is_error {
                        "error"
                    } else {
                        "return_value"
                    };
                    json!({"functionResponse": {"id": result.tool_call_id, "name": name,
                           "response": {key: result.result}}})
                })
                .collect();
            ("user", parts)
        }
    })
}

fn with_signature(mut part: Value, signature: Option<&Value>) -> Value {
    if let (Some(signature), Some(object)) = (signature, part.as_object_mut()) {
        object.insert("thoughtSignature".into(), signature.clone());
    }
    part
}

fn encode_assistant(assistant: &AssistantMessage) -> Vec<Value> {
    let namespace = assistant.provider_metadata(NAME);
    let text_signatures = namespace.and_then(|n| n.get("textSignatures"));
    let call_signatures = namespace.and_then(|n| n.get("functionCallSignatures"));
    let mut parts = Vec::new();
    let mut text_ordinal = 0usize;
    for block in &assistant.content {
        match block {
            // Thoughts go back only when they came from Gemini.
            ContentBlock::Reasoning(reasoning)
                if reasoning
                    .metadata
                    .as_ref()
                    .is_some_and(|m| m.contains_key(NAME)) =>
            {
                let mut part = json!({"text": reasoning.text, "thought": true});
                if let (Some(signature), Some(object)) =
                    (&reasoning.signature, part.as_object_mut())
                {
                    object.insert("thoughtSignature".into(), json!(signature));
                }
                parts.push(part);
            }
            ContentBlock::Text(text) => {
                let signature = text_signatures.and_then(|s| s.get(text_ordinal.to_string()));
                text_ordinal += 1;
                if !text.text.is_empty() || signature.is_some() {
                    parts.push(with_signature(json!({"text": text.text}), signature));
                }
            }
            ContentBlock::Image(image) => match &image.source {
                ImageSource::Base64 { data } => parts.push(inline(&image.mime_type, data.clone())),
                ImageSource::Bytes { data } => {
                    parts.push(inline(&image.mime_type, data.to_base64()));
                }
                ImageSource::Url { url } => {
                    parts.push(json!({"fileData": {"mimeType": image.mime_type, "fileUri": url}}))
                }
            },
            ContentBlock::Audio(audio) => {
                parts.push(inline(&audio.mime_type, audio.data.to_base64()))
            }
            ContentBlock::Video(video) => {
                parts.push(inline(&video.mime_type, video.data.to_base64()))
            }
            _ => {}
        }
    }
    for call in &assistant.tool_calls {
        let signature = call_signatures.and_then(|s| s.get(&call.tool_call_id));
        parts.push(with_signature(
            json!({"functionCall": {"id": call.tool_call_id, "name": call.tool_name,
                   "args": crate::adapters::accumulate::arguments_object(&call.arguments)}}),
            signature,
        ));
    }
    parts
}

/// A tool call id for a Gemini function call that came without one.
pub(crate) fn fresh_call_id() -> String {
    format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..24])
}

/// Token usage: `inputTokens` = `promptTokenCount` (cached content included) +
/// `toolUsePromptTokenCount`; `outputTokens` = `candidatesTokenCount` + `thoughtsTokenCount`;
/// `cacheReadTokens` = `cachedContentTokenCount`.
pub(crate) fn usage(value: Option<&Value>) -> TokenUsage {
    let get = |key: &str| {
        value
            .and_then(|u| u.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    TokenUsage::from_cycle(CycleUsage {
        input_tokens: get("promptTokenCount") + get("toolUsePromptTokenCount"),
        output_tokens: get("candidatesTokenCount") + get("thoughtsTokenCount"),
        cache_read_tokens: get("cachedContentTokenCount"),
        cache_write_tokens: 0,
    })
}

fn invalid_response(message: impl Into<String>, body: &Value) -> UppError {
    UppError::llm(ErrorCode::InvalidResponse, NAME, message).with_cause(body.clone())
}

fn filtered(message: String, body: &Value) -> UppError {
    UppError::llm(ErrorCode::ContentFiltered, NAME, message).with_cause(body.clone())
}

/// Decodes a `GenerateContentResponse` (the non-streaming body, or the chunks of a stream
/// merged into one).
pub(crate) fn decode_response(body: &Value) -> Result<LlmResponse, UppError> {
    if let Some(error) = body.get("error").filter(|e| e.is_object()) {
        return Err(error_from_body(error, body));
    }
    let candidate = body
        .get("candidates")
        .and_then(Value::as_array)
        .and_then(|c| c.first());
    let Some(candidate) = candidate else {
        if let Some(reason) = body
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
        {
            return Err(filtered(
                format!("Gemini blocked the prompt ({reason})"),
                body,
            ));
        }
        return Err(invalid_response("the response has no candidates", body));
    };
    let finish = candidate
        .get("finishReason")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut content = Vec::new();
    let mut calls = Vec::new();
    let mut text_signatures = Map::new();
    let mut call_signatures = Map::new();
    let mut extra_parts = Vec::new();
    let mut text_ordinal = 0usize;
    for part in candidate
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let signature = part.get("thoughtSignature").filter(|s| s.is_string());
        if let Some(call) = part.get("functionCall") {
            let Some(name) = call.get("name").and_then(Value::as_str) else {
                return Err(invalid_response("a functionCall has no name", body));
            };
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map_or_else(fresh_call_id, str::to_owned);
            let args = match call.get("args") {
                Some(Value::Object(args)) => Value::Object(args.clone()),
                Some(Value::Null) | None => Value::Object(Map::new()),
                Some(_) => {
                    return Err(invalid_response(
                        format!("the arguments of the call to {name:?} are not an object"),
                        body,
                    ));
                }
            };
            if let Some(signature) = signature {
                call_signatures.insert(id.clone(), signature.clone());
            }
            calls.push(ToolCall::new(id, name, args));
        } else if let Some(text) = part.get("text").and_then(Value::as_str) {
            if part.get("thought").and_then(Value::as_bool) == Some(true) {
                let mut metadata = Metadata::new();
                metadata.insert(NAME.into(), json!({"thought": true}));
                content.push(ContentBlock::Reasoning(ReasoningBlock {
                    text: text.to_owned(),
                    signature: signature.and_then(Value::as_str).map(str::to_owned),
                    metadata: Some(metadata),
                }));
            } else {
                if let Some(signature) = signature {
                    text_signatures.insert(text_ordinal.to_string(), signature.clone());
                }
                text_ordinal += 1;
                content.push(ContentBlock::text(text));
            }
        } else if let Some(block) = part.get("inlineData").and_then(decode_inline) {
            content.push(block);
        } else {
            extra_parts.push(part.clone());
        }
    }
    if content.is_empty() && calls.is_empty() && finish_reason::is_filtered(finish) {
        return Err(filtered(
            format!("Gemini stopped the response ({finish})"),
            body,
        ));
    }
    let mut namespace = Map::new();
    for (key, value) in [
        ("responseId", body.get("responseId")),
        ("modelVersion", body.get("modelVersion")),
        ("usageMetadata", body.get("usageMetadata")),
        ("promptFeedback", body.get("promptFeedback")),
        ("finishReason", candidate.get("finishReason")),
        ("finishMessage", candidate.get("finishMessage")),
        ("safetyRatings", candidate.get("safetyRatings")),
        ("citationMetadata", candidate.get("citationMetadata")),
        ("groundingMetadata", candidate.get("groundingMetadata")),
        ("urlContextMetadata", candidate.get("urlContextMetadata")),
        ("avgLogprobs", candidate.get("avgLogprobs")),
    ] {
        if let Some(value) = value.filter(|v| !v.is_null()) {
            namespace.insert(key.into(), value.clone());
        }
    }
    if !text_signatures.is_empty() {
        namespace.insert("textSignatures".into(), Value::Object(text_signatures));
    }
    if !call_signatures.is_empty() {
        namespace.insert(
            "functionCallSignatures".into(),
            Value::Object(call_signatures),
        );
    }
    if !extra_parts.is_empty() {
        namespace.insert("extraParts".into(), Value::Array(extra_parts));
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
    Ok(LlmResponse {
        message,
        usage: usage(body.get("usageMetadata")),
        stop_reason: finish_reason::map(finish, has_calls),
        data: None,
    })
}

fn decode_inline(data: &Value) -> Option<ContentBlock> {
    let mime = data.get("mimeType").and_then(Value::as_str)?.to_owned();
    let text = data.get("data").and_then(Value::as_str)?;
    if mime.starts_with("image/") {
        return Some(ContentBlock::Image(ImageBlock {
            source: ImageSource::Base64 {
                data: text.to_owned(),
            },
            mime_type: mime,
            width: None,
            height: None,
        }));
    }
    let bytes = Blob::from_base64(text).ok()?;
    if mime.starts_with("audio/") {
        Some(ContentBlock::Audio(AudioBlock {
            data: bytes,
            mime_type: mime,
            duration: None,
        }))
    } else if mime.starts_with("video/") {
        Some(ContentBlock::Video(VideoBlock {
            data: bytes,
            mime_type: mime,
            duration: None,
            width: None,
            height: None,
        }))
    } else {
        None
    }
}

/// A Gemini error object (`{"code", "message", "status", "details"}`) met inside a 200 body or
/// a stream chunk → [`UppError`], mapped by its `code` like an HTTP error.
pub(crate) fn error_from_body(error: &Value, body: &Value) -> UppError {
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(500);
    let bytes = serde_json::to_vec(&json!({ "error": error })).unwrap_or_default();
    let mut upp = crate::http::normalize_http_error(
        status,
        &reqwest::header::HeaderMap::new(),
        &bytes,
        NAME,
        Modality::Llm,
        None,
    );
    upp.cause = Some(body.clone());
    upp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safety_without_content_is_content_filtered() {
        let body = json!({"candidates": [{"finishReason": "SAFETY", "safetyRatings": []}]});
        let error = decode_response(&body).err();
        assert_eq!(error.map(|e| e.code), Some(ErrorCode::ContentFiltered));
        let body = json!({"promptFeedback": {"blockReason": "SAFETY"}});
        assert_eq!(
            decode_response(&body).err().map(|e| e.code),
            Some(ErrorCode::ContentFiltered)
        );
    }

    #[test]
    fn garbage_never_panics() {
        for body in [
            json!(null),
            json!({"candidates": "x"}),
            json!({"candidates": [{"content": {"parts": [{"functionCall": {}}]}}]}),
            json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": 3}}]}}]}),
            json!({"candidates": [{"content": {"parts": [{"inlineData": {"mimeType": "audio/x", "data": "!!"}}]}}]}),
            json!({"error": {"code": "x"}}),
        ] {
            let _ = decode_response(&body);
        }
    }
}
