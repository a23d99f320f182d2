//! Plumbing shared by the HTTP adapters that is not vendor JSON: reading a JSON body,
//! merging `params` into a request body, and turning an SSE response into an [`LlmStream`]
//! driven by a per-dialect [`StreamDecoder`].
//!
//! Nothing here knows a vendor's wire format; each adapter brings its own decoder.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::error::{ErrorCode, Modality, UppError};
use crate::http::sse_events;
use crate::provider::{LlmStream, LlmStreamPart};
use crate::sse::{SseDecoder, SseEvent};

/// A dialect's stream decoder: SSE events in, UPP stream parts out.
pub(crate) trait StreamDecoder: Send + 'static {
    /// Handles one SSE event, appending what to emit.
    fn push(&mut self, event: &SseEvent, out: &mut Vec<LlmStreamPart>) -> Result<(), UppError>;

    /// The body ended: appends the closing events and the final response, or fails when the
    /// stream was cut before its stop event.
    fn finish(&mut self, out: &mut Vec<LlmStreamPart>) -> Result<(), UppError>;
}

/// Runs `decoder` over the SSE events of `response`. After the first error the stream ends.
pub(crate) fn llm_stream<D: StreamDecoder>(
    response: reqwest::Response,
    provider: &str,
    idle_timeout: Option<Duration>,
    signal: CancellationToken,
    decoder: D,
) -> LlmStream {
    let events = sse_events(
        response,
        provider.to_owned(),
        Modality::Llm,
        idle_timeout,
        signal,
    );
    let state = (Box::pin(events), Some(decoder), VecDeque::new());
    let stream =
        futures_util::stream::unfold(state, |(mut events, mut decoder, mut ready)| async move {
            loop {
                if let Some(part) = ready.pop_front() {
                    return Some((Ok(part), (events, decoder, ready)));
                }
                let current = decoder.as_mut()?;
                let mut out = Vec::new();
                let result = match events.next().await {
                    Some(Ok(event)) => current.push(&event, &mut out),
                    Some(Err(error)) => Err(error),
                    None => {
                        let result = current.finish(&mut out);
                        decoder = None;
                        result
                    }
                };
                if let Err(error) = result {
                    return Some((Err(error), (events, None, VecDeque::new())));
                }
                ready.extend(out);
            }
        });
    Box::pin(stream)
}

/// Decodes a whole recorded SSE body offline with `decoder` (tests, benchmarks, replay).
pub(crate) fn decode_sse_bytes<D: StreamDecoder>(
    decoder: D,
    body: &[u8],
) -> Result<Vec<LlmStreamPart>, UppError> {
    decode_sse_chunks(decoder, &[body])
}

/// Decodes a recorded SSE body offline, delivered in `chunks` as a network would split it.
pub(crate) fn decode_sse_chunks<D: StreamDecoder>(
    mut decoder: D,
    chunks: &[&[u8]],
) -> Result<Vec<LlmStreamPart>, UppError> {
    let mut sse = SseDecoder::new();
    let mut events = Vec::new();
    for chunk in chunks {
        sse.push(chunk, &mut events);
    }
    // A body without the final blank line still counts as whole when replayed offline.
    if sse.has_partial() {
        sse.push(b"\n\n", &mut events);
    }
    let mut out = Vec::new();
    for event in &events {
        decoder.push(event, &mut out)?;
    }
    decoder.finish(&mut out)?;
    Ok(out)
}

/// Reads a successful response's body as JSON.
pub(crate) async fn read_json(
    response: reqwest::Response,
    provider: &str,
    modality: Modality,
    signal: &CancellationToken,
) -> Result<Value, UppError> {
    let bytes = tokio::select! {
        biased;
        () = signal.cancelled() => return Err(UppError::cancelled(provider, modality)),
        bytes = response.bytes() => bytes.map_err(|e| crate::http::transport_error(&e, provider, modality))?,
    };
    crate::trace::body(provider, &String::from_utf8_lossy(&bytes), None);
    parse_json(&bytes, provider, modality)
}

/// Parses a response body, `INVALID_RESPONSE` (with the start of the body) when it is not JSON.
pub(crate) fn parse_json(
    bytes: &[u8],
    provider: &str,
    modality: Modality,
) -> Result<Value, UppError> {
    serde_json::from_slice(bytes).map_err(|error| {
        let end = bytes.len().min(2000);
        UppError::new(
            ErrorCode::InvalidResponse,
            format!("the response is not valid JSON: {error}"),
            provider,
            modality,
        )
        .with_cause(serde_json::json!({ "body": String::from_utf8_lossy(&bytes[..end]) }))
    })
}

/// Parses one SSE event's data as JSON, `INVALID_RESPONSE` when it is not.
pub(crate) fn event_json(event: &SseEvent, provider: &str) -> Result<Value, UppError> {
    serde_json::from_str(&event.data).map_err(|error| {
        UppError::llm(
            ErrorCode::InvalidResponse,
            provider,
            format!("a stream event is not valid JSON: {error}"),
        )
        .with_cause(serde_json::json!({ "event": event.event, "data": event.data }))
    })
}

/// Serializes a request body.
pub(crate) fn encode_body(
    body: &Value,
    provider: &str,
    modality: Modality,
) -> Result<Vec<u8>, UppError> {
    serde_json::to_vec(body).map_err(|e| {
        UppError::new(
            ErrorCode::InvalidRequest,
            format!("cannot encode the request: {e}"),
            provider,
            modality,
        )
    })
}

/// Merges `params` into `body`: every key replaces Weft's own, except the keys in
/// `append_arrays` (arrays are appended after Weft's, e.g. provider-native `tools` after the
/// function tools) and `merge_objects` (objects are merged key by key, the param winning).
pub(crate) fn merge_params(
    body: &mut Map<String, Value>,
    params: Option<&Map<String, Value>>,
    append_arrays: &[&str],
    merge_objects: &[&str],
) {
    let Some(params) = params else {
        return;
    };
    for (key, value) in params {
        match (body.get_mut(key), value) {
            (Some(Value::Array(ours)), Value::Array(theirs))
                if append_arrays.contains(&key.as_str()) =>
            {
                ours.extend(theirs.iter().cloned());
            }
            (Some(Value::Object(ours)), Value::Object(theirs))
                if merge_objects.contains(&key.as_str()) =>
            {
                for (k, v) in theirs {
                    ours.insert(k.clone(), v.clone());
                }
            }
            _ => {
                body.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The base URL from the config, or the provider's default, without a trailing `/`.
pub(crate) fn base_url(configured: Option<&str>, default: &str) -> String {
    configured
        .filter(|u| !u.trim().is_empty())
        .unwrap_or(default)
        .trim_end_matches('/')
        .to_owned()
}

/// A UPP error whose modality is replaced (key resolution reports `llm`).
pub(crate) fn with_modality(mut error: UppError, modality: Modality) -> UppError {
    error.modality = modality;
    error
}

/// Copies a tool's provider-namespaced options (`tool.metadata.{namespace}`, e.g.
/// `{"anthropic": {"cache_control": …}}`) into its wire entry, for each namespace in order.
pub(crate) fn merge_tool_metadata(
    tool: &crate::tool::Tool,
    namespaces: &[&str],
    entry: &mut Map<String, Value>,
) {
    for namespace in namespaces {
        if let Some(Value::Object(extra)) = tool.metadata.as_ref().and_then(|m| m.get(*namespace)) {
            for (key, value) in extra {
                entry.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn params_replace_append_and_merge() {
        let mut body = json!({"tools": [1], "generationConfig": {"a": 1}, "model": "m"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let params = json!({"tools": [2], "generationConfig": {"b": 2}, "model": "x", "n": 1});
        merge_params(
            &mut body,
            params.as_object(),
            &["tools"],
            &["generationConfig"],
        );
        assert_eq!(
            Value::Object(body),
            json!({"tools": [1, 2], "generationConfig": {"a": 1, "b": 2}, "model": "x", "n": 1})
        );
    }
}
