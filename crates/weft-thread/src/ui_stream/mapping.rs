//! The chunk ⇄ part correspondence shared by the assembler and the encoder: what part (or
//! system event) a completed chunk sequence yields. The encoder runs the same functions to find
//! what the chunks alone would reconstruct, and sends a `patch` for the difference.

use serde_json::{Map, Value};

use crate::types::JsonMap;

fn s(text: &str) -> Value {
    Value::String(text.to_owned())
}

/// `text-start` … `text-end` → a text part whose `id` is the chunk ID.
pub(crate) fn text_part(id: &str, content: String) -> JsonMap {
    let mut part = Map::with_capacity(3);
    part.insert("part_kind".into(), s("text"));
    part.insert("content".into(), Value::String(content));
    part.insert("id".into(), s(id));
    part
}

/// The provider of reasoning: the first `providerMetadata` key other than `weft`.
fn provider_of(provider_metadata: Option<&Value>) -> Option<(&str, Option<&Value>)> {
    let metadata = provider_metadata?.as_object()?;
    metadata
        .iter()
        .find(|(key, _)| key.as_str() != "weft")
        .map(|(key, value)| (key.as_str(), Some(value)))
}

/// `reasoning-start` … `reasoning-end` → a thinking part. `provider_name` is the first
/// `providerMetadata` key (else `default_provider`); `signature` is that entry's `signature`.
pub(crate) fn thinking_part(
    id: &str,
    content: String,
    provider_metadata: Option<&Value>,
    default_provider: &str,
) -> JsonMap {
    let mut part = Map::with_capacity(5);
    part.insert("part_kind".into(), s("thinking"));
    part.insert("content".into(), Value::String(content));
    let (provider, entry) = provider_of(provider_metadata).unwrap_or((default_provider, None));
    if let Some(signature) = entry
        .and_then(|entry| entry.get("signature"))
        .and_then(Value::as_str)
    {
        part.insert("signature".into(), s(signature));
    }
    part.insert("provider_name".into(), s(provider));
    part.insert("thinking_id".into(), s(id));
    part
}

/// `tool-input-available` → a tool-call part with the parsed `input` as `args`.
pub(crate) fn tool_call_part(tool_call_id: &str, tool_name: &str, input: Value) -> JsonMap {
    let mut part = Map::with_capacity(4);
    part.insert("part_kind".into(), s("tool-call"));
    part.insert("tool_name".into(), s(tool_name));
    part.insert("tool_call_id".into(), s(tool_call_id));
    part.insert("args".into(), input);
    part
}

/// The tool name used when the call is unknown to the stream.
pub(crate) const UNKNOWN_TOOL: &str = "unknown";

/// `tool-output-*` → a tool-return part; `tool_name` comes from the call seen earlier.
pub(crate) fn tool_return_part(
    tool_call_id: &str,
    tool_name: Option<&str>,
    status: &str,
    content: Value,
) -> JsonMap {
    let mut part = Map::with_capacity(5);
    part.insert("part_kind".into(), s("tool-return"));
    part.insert("tool_name".into(), s(tool_name.unwrap_or(UNKNOWN_TOOL)));
    part.insert("tool_call_id".into(), s(tool_call_id));
    part.insert("status".into(), s(status));
    part.insert("content".into(), content);
    part
}

/// A short content identifier: the first 6 hex digits of SHA-256 of the base64 text.
pub(crate) fn content_identifier(data: &str) -> String {
    crate::hash::hash_bytes(data.as_bytes()).0[..3]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `file` → a file part with binary content when the URL is a base64 `data:` URL
/// (`identifier` from `providerMetadata.weft.identifier`, else [`content_identifier`]);
/// any other URL becomes a `custom:ui-file` part `{url, media_type}`.
pub(crate) fn file_part(url: &str, media_type: &str, provider_metadata: Option<&Value>) -> JsonMap {
    let mut part = Map::with_capacity(3);
    let data = url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
        .map(|(_, data)| data);
    match data {
        Some(data) => {
            let identifier = provider_metadata
                .and_then(|metadata| metadata.get("weft"))
                .and_then(|weft| weft.get("identifier"))
                .and_then(Value::as_str)
                .map_or_else(|| content_identifier(data), str::to_owned);
            let mut content = Map::with_capacity(4);
            content.insert("kind".into(), s("binary"));
            content.insert("data".into(), s(data));
            content.insert("media_type".into(), s(media_type));
            content.insert("identifier".into(), Value::String(identifier));
            part.insert("part_kind".into(), s("file"));
            part.insert("content".into(), Value::Object(content));
        }
        None => {
            part.insert("part_kind".into(), s("custom:ui-file"));
            part.insert("url".into(), s(url));
            part.insert("media_type".into(), s(media_type));
        }
    }
    part
}

/// A system message `{message_type: "system", timestamp, event_type, event_data}`.
pub(crate) fn system_message(timestamp: String, event_type: &str, event_data: Value) -> JsonMap {
    let mut message = Map::with_capacity(4);
    message.insert("message_type".into(), s("system"));
    message.insert("timestamp".into(), Value::String(timestamp));
    message.insert("event_type".into(), s(event_type));
    message.insert("event_data".into(), event_data);
    message
}

/// The members of `actual` that differ from `derived` (`set`) and those `derived` has in
/// excess (`unset`), as a `patch` payload; `None` when they are equal.
pub(crate) fn diff(actual: &JsonMap, derived: &JsonMap) -> Option<JsonMap> {
    let set: JsonMap = actual
        .iter()
        .filter(|(key, value)| derived.get(key.as_str()) != Some(value))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let unset: Vec<Value> = derived
        .keys()
        .filter(|key| !actual.contains_key(key.as_str()))
        .map(|key| s(key))
        .collect();
    if set.is_empty() && unset.is_empty() {
        return None;
    }
    let mut patch = Map::new();
    patch.insert("kind".into(), s("patch"));
    if !set.is_empty() {
        patch.insert("set".into(), Value::Object(set));
    }
    if !unset.is_empty() {
        patch.insert("unset".into(), Value::Array(unset));
    }
    Some(patch)
}

/// Applies a `patch` payload (see [`diff`]).
pub(crate) fn apply_patch(target: &mut JsonMap, patch: &JsonMap) {
    if let Some(Value::Array(unset)) = patch.get("unset") {
        for key in unset.iter().filter_map(Value::as_str) {
            target.remove(key);
        }
    }
    if let Some(Value::Object(set)) = patch.get("set") {
        for (key, value) in set {
            target.insert(key.clone(), value.clone());
        }
    }
}

/// Maps an AI SDK `finishReason` to a ThreadProtocol finish reason.
pub(crate) fn finish_reason_from_ui(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "stop" => "stop",
        "length" => "length",
        "content-filter" => "content_filter",
        "tool-calls" => "tool_call",
        "error" => "error",
        _ => return None,
    })
}

/// Maps a ThreadProtocol finish reason to an AI SDK `finishReason`.
pub(crate) fn finish_reason_to_ui(reason: &str) -> &'static str {
    match reason {
        "stop" => "stop",
        "length" => "length",
        "content_filter" => "content-filter",
        "tool_call" => "tool-calls",
        "error" => "error",
        _ => "other",
    }
}
