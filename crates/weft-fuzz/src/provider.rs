//! `provider_stream` and `provider_body`: every adapter's offline decoders (Anthropic
//! Messages, Gemini `generateContent`, OpenAI Chat Completions and Responses).

use serde_json::Value;
use weft_provider::adapters::{anthropic, google, openai_chat, openai_responses};
use weft_provider::{LlmResponse, LlmStreamPart, StreamEventType, UppError};

type StreamDecode = fn(&[u8]) -> Result<Vec<LlmStreamPart>, UppError>;
type ChunkDecode = fn(&[&[u8]]) -> Result<Vec<LlmStreamPart>, UppError>;
type BodyDecode = fn(&Value) -> Result<LlmResponse, UppError>;

const STREAMS: &[(&str, StreamDecode, ChunkDecode)] = &[
    (
        "anthropic",
        anthropic::decode_stream,
        anthropic::decode_stream_chunks,
    ),
    (
        "google",
        google::decode_stream,
        google::decode_stream_chunks,
    ),
    (
        "openai",
        openai_chat::decode_stream,
        openai_chat::decode_stream_chunks,
    ),
    (
        "openai-responses",
        openai_responses::decode_stream,
        openai_responses::decode_stream_chunks,
    ),
];

const BODIES: &[(&str, BodyDecode)] = &[
    ("anthropic", anthropic::decode_response),
    ("google", google::decode_response),
    ("openai", openai_chat::decode_response),
    ("openai-responses", openai_responses::decode_response),
];

/// The result as text with what is made up per decode replaced by fixed values, so two
/// decodes of the same input compare equal: the message id and timestamp, and the call ids
/// Weft makes up (`call_` and 24 hex digits not in the input) numbered by first appearance.
fn canonical(result: &Result<Vec<LlmStreamPart>, UppError>, input: &[u8]) -> String {
    let mut result = result.clone();
    if let Ok(parts) = &mut result {
        for part in parts {
            if let LlmStreamPart::Response(response) = part {
                normalize_response(response);
            }
        }
    }
    renumber_fresh_ids(&format!("{result:?}"), input)
}

fn normalize_response(response: &mut LlmResponse) {
    response.message.id = String::new();
    response.message.timestamp = chrono::DateTime::UNIX_EPOCH;
}

fn renumber_fresh_ids(text: &str, input: &[u8]) -> String {
    const PREFIX: &str = "call_";
    const HEX: usize = 24;
    let mut seen: Vec<&str> = Vec::new();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        out.push_str(&rest[..at]);
        let candidate = &rest[at..];
        let id_len = PREFIX.len() + HEX;
        let is_fresh = candidate.len() >= id_len
            && candidate.as_bytes()[PREFIX.len()..id_len]
                .iter()
                .all(u8::is_ascii_hexdigit)
            && !input
                .windows(id_len)
                .any(|w| w == &candidate.as_bytes()[..id_len]);
        if is_fresh {
            let id = &candidate[..id_len];
            let n = seen.iter().position(|s| *s == id).unwrap_or_else(|| {
                seen.push(id);
                seen.len() - 1
            });
            out.push_str(&format!("fresh-call-{n}"));
            rest = &candidate[id_len..];
        } else {
            out.push_str(PREFIX);
            rest = &candidate[PREFIX.len()..];
        }
    }
    out.push_str(rest);
    out
}

/// The order of a successful stream: exactly one response, last; at most one
/// `message_start`, before everything else; at most one `message_stop`, directly before the
/// response (nothing after a terminal event); every block event at an index between that
/// block's start and stop.
fn check_order(name: &str, parts: &[LlmStreamPart]) {
    let responses = parts
        .iter()
        .filter(|p| matches!(p, LlmStreamPart::Response(_)))
        .count();
    assert_eq!(responses, 1, "{name}: {responses} responses");
    assert!(
        matches!(parts.last(), Some(LlmStreamPart::Response(_))),
        "{name}: the response is not last"
    );
    let events: Vec<_> = parts
        .iter()
        .filter_map(|p| match p {
            LlmStreamPart::Event(e) => Some(e),
            LlmStreamPart::Response(_) => None,
        })
        .collect();
    let mut open = std::collections::BTreeSet::new();
    let mut closed = std::collections::BTreeSet::new();
    for (i, event) in events.iter().enumerate() {
        match event.event_type {
            StreamEventType::MessageStart => {
                assert_eq!(i, 0, "{name}: message_start at {i}");
            }
            StreamEventType::MessageStop => {
                assert_eq!(i, events.len() - 1, "{name}: an event after message_stop");
            }
            StreamEventType::ContentBlockStart => {
                assert!(
                    open.insert(event.index),
                    "{name}: block {} started twice while open",
                    event.index
                );
                closed.remove(&event.index);
            }
            StreamEventType::ContentBlockStop => {
                assert!(
                    open.remove(&event.index),
                    "{name}: block {} stopped but not open",
                    event.index
                );
                closed.insert(event.index);
            }
            _ => {
                assert!(
                    !closed.contains(&event.index),
                    "{name}: {:?} for block {} after its stop",
                    event.event_type,
                    event.index
                );
            }
        }
    }
}

/// Any bytes as an SSE body, for every adapter: decoding it whole and in two chunks cut
/// anywhere gives the same events, response or error; a successful decode is well ordered
/// (see `check_order`) and its message survives a JSON round trip.
pub fn provider_stream(data: &[u8]) {
    for (name, whole, chunks) in STREAMS {
        let expected = whole(data);
        let expected_text = canonical(&expected, data);
        for point in crate::splits::points(data).into_iter().step_by(3) {
            let (a, b) = data.split_at(point);
            let got = canonical(&chunks(&[a, b]), data);
            assert!(
                got == expected_text,
                "{name}: cut at {point}:\n{got}\n{expected_text}"
            );
        }
        if let Ok(parts) = &expected {
            check_order(name, parts);
            if let Some(LlmStreamPart::Response(response)) = parts.last() {
                check_response(name, response);
            }
        }
    }
}

/// A decoded response's message is what the store keeps: it must serialize and read back
/// equal, and its replayed events must be well ordered.
fn check_response(name: &str, response: &LlmResponse) {
    let json = serde_json::to_value(&response.message).expect("a message serializes");
    let back: weft_provider::AssistantMessage = serde_json::from_value(json.clone())
        .unwrap_or_else(|e| {
            panic!("{name}: the message does not read back: {e}\n{json}");
        });
    assert_eq!(
        back, response.message,
        "{name}: the message changed in a round trip"
    );
    let mut replay: Vec<LlmStreamPart> = response
        .replay_events()
        .into_iter()
        .map(LlmStreamPart::Event)
        .collect();
    replay.push(LlmStreamPart::Response(response.clone()));
    check_order(name, &replay);
}

/// Any bytes as a JSON response body, for every adapter: no panic; a decoded response's
/// message survives a JSON round trip; decoding is deterministic (up to made-up ids).
pub fn provider_body(data: &[u8]) {
    let Ok(body) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    for (name, decode) in BODIES {
        let first = decode(&body);
        if let Ok(response) = &first {
            check_response(name, response);
            let again = decode(&body).map(|r| vec![LlmStreamPart::Response(r)]);
            let first = Ok(vec![LlmStreamPart::Response(response.clone())]);
            assert_eq!(
                canonical(&again, data),
                canonical(&first, data),
                "{name}: not deterministic"
            );
        }
    }
}
