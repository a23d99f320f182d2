//! Property tests: typed parse/serialize, thread → stream → thread, thread → Pydantic AI →
//! thread (representable subset), any AI SDK stream → thread → stream, hash invariance under
//! equivalent encodings and change under any content change, JCS against an independent
//! implementation.
#![allow(clippy::unwrap_used)]

mod common;

use proptest::prelude::*;
use serde_json::{Value, json};
use weft_thread::canonical::{CanonicalOptions, canonicalize, to_jcs_string};
use weft_thread::clock::FixedClock;
use weft_thread::ui_stream::{
    self, AssemblerOptions, EncodeOptions, ThreadDefaults, UiStreamVersion,
};
use weft_thread::{HashOptions, Thread, Timestamp, Turn, hash_thread, pydantic_ai, validate};

fn clock() -> FixedClock {
    FixedClock(Timestamp::parse("2030-01-01T00:00:00Z").unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn generated_threads_are_valid_and_round_trip_typed(value in common::thread()) {
        let report = validate(&value);
        prop_assert!(report.is_valid(), "{:#?}", report.findings);
        let thread = Thread::from_value(value.clone()).unwrap();
        prop_assert_eq!(thread.to_value().unwrap(), value.clone());
        let text = serde_json::to_string(&thread).unwrap();
        let reparsed = Thread::from_json(&text).unwrap();
        prop_assert_eq!(reparsed, thread);
    }

    #[test]
    fn thread_stream_thread_is_identity(value in common::thread(), v6 in any::<bool>()) {
        let thread = Thread::from_value(value.clone()).unwrap();
        let version = if v6 { UiStreamVersion::V6 } else { UiStreamVersion::V5 };
        let chunks = ui_stream::encode_thread(&thread, &EncodeOptions { version });
        // Through SSE text, as a client receives it.
        let sse = ui_stream::to_sse(&chunks);
        let parsed = ui_stream::parse_stream(&sse).unwrap();
        prop_assert_eq!(&parsed, &chunks);
        let assembled = ui_stream::assemble_thread(parsed, AssemblerOptions::default(), &ThreadDefaults::default(), clock()).unwrap();
        prop_assert!(assembled.interruptions.is_empty(), "{:?}", assembled.interruptions);
        prop_assert_eq!(assembled.thread.to_value().unwrap(), value);
    }

    #[test]
    fn hash_ignores_key_order_and_whitespace(value in common::thread(), include_meta in any::<bool>()) {
        let options = HashOptions { include_meta, ..HashOptions::default() };
        let reordered = common::reorder(&value);
        let pretty: Value = serde_json::from_str(&serde_json::to_string_pretty(&reordered).unwrap()).unwrap();
        let canonical = CanonicalOptions { include_meta };
        prop_assert_eq!(canonicalize(&value, canonical), canonicalize(&pretty, canonical));
        prop_assert_eq!(hash_thread(&value, options), hash_thread(&pretty, options));
        // The canonical form is JSON and canonical: canonicalizing it again changes nothing.
        let bytes = canonicalize(&value, canonical);
        let reparsed: Value = serde_json::from_slice(&bytes).unwrap();
        prop_assert_eq!(canonicalize(&reparsed, canonical), bytes);
    }

    #[test]
    fn jcs_matches_serde_jcs(value in common::json_value()) {
        let ours = to_jcs_string(&value);
        let theirs = serde_jcs::to_string(&value).unwrap();
        prop_assert_eq!(ours, theirs);
    }

    #[test]
    fn jcs_numbers_match_serde_jcs(bits in any::<u64>()) {
        let float = f64::from_bits(bits);
        prop_assume!(float.is_finite());
        let value = json!([float]);
        prop_assert_eq!(to_jcs_string(&value), serde_jcs::to_string(&value).unwrap());
    }

    #[test]
    fn pydantic_round_trip_on_representable_subset(turn in representable_turn()) {
        let agent = "550e8400-e29b-41d4-a716-446655440001";
        let typed = match serde_json::from_value::<Turn>(turn.clone()).unwrap() { Turn::Agent(turn) => turn, Turn::User(_) => unreachable!() };
        let messages = pydantic_ai::to_model_messages(&[Turn::Agent(typed)], agent);
        prop_assert!(messages.skipped.is_empty());
        let back = pydantic_ai::from_agent_run(&Value::Array(messages.messages), agent).unwrap();
        prop_assert_eq!(serde_json::to_value(Turn::Agent(back)).unwrap(), turn);
    }
}

/// Agent turns that Pydantic AI can express exactly: request/response messages of one agent,
/// `started_at` / `completed_at` = first / last message, `total_usage` = the aggregate, full usage
/// with `total = input + output`, thinking with content, tool returns with non-null content and
/// status success or error, no explicit nulls.
fn representable_turn() -> impl Strategy<Value = Value> {
    let text = "[a-zA-Z0-9 ]{0,10}";
    let part = prop_oneof![
        (text, prop::option::of("[a-z0-9_]{1,5}")).prop_map(|(content, id)| {
            let mut part = json!({"part_kind": "text", "content": content});
            if let Some(id) = id { part["id"] = json!(id); }
            part
        }),
        (text, prop::option::of("[a-z=]{1,6}"), prop::option::of("rs_[0-9]")).prop_map(|(content, signature, id)| {
            let mut part = json!({"part_kind": "thinking", "content": content, "provider_name": "anthropic"});
            if let Some(signature) = signature { part["signature"] = json!(signature); }
            if let Some(id) = id { part["thinking_id"] = json!(id); }
            part
        }),
        ("[a-z]{1,6}", "call_[0-9]{1,3}").prop_map(|(name, id)| json!({"part_kind": "tool-call", "tool_name": name, "tool_call_id": id, "args": {"q": name}})),
        ("[a-z]{1,6}", "call_[0-9]{1,3}", prop::bool::ANY, common::json_leaf().prop_filter("non-null", |v| !v.is_null()))
            .prop_map(|(name, id, ok, content)| json!({"part_kind": "tool-return", "tool_name": name, "tool_call_id": id, "status": if ok {"success"} else {"error"}, "content": content})),
        text.prop_map(|content| json!({"part_kind": "retry-prompt", "content": content, "tool_name": "t", "tool_call_id": "c1"})),
        text.prop_map(|content| json!({"part_kind": "user-prompt", "content": content})),
        Just(json!({"part_kind": "file", "content": {"kind": "binary", "data": "R0lGODlh", "media_type": "image/gif", "identifier": "25c9b3"}})),
    ];
    let message = (
        any::<bool>(),
        prop::collection::vec(part, 0..4),
        prop::option::of((0u64..100, 0u64..100, 0u64..10)),
        prop::option::of("[a-z0-9]{1,6}"),
    );
    prop::collection::vec(message, 1..5).prop_map(|messages| {
        let agent = "550e8400-e29b-41d4-a716-446655440001";
        let mut total: Option<(u64, u64, u64)> = None;
        let mut built = Vec::new();
        for (index, (response, parts, usage, model)) in messages.into_iter().enumerate() {
            let timestamp = format!("2025-01-02T03:04:{:02}Z", index);
            let mut message = json!({"message_type": if response {"response"} else {"request"}, "timestamp": timestamp, "parts": parts, "agent_id": agent});
            if response {
                if let Some((input, output, thinking)) = usage {
                    message["usage"] = json!({"input_tokens": input, "output_tokens": output, "thinking_tokens": thinking, "total_tokens": input + output});
                    let sum = total.get_or_insert((0, 0, 0));
                    sum.0 += input; sum.1 += output; sum.2 += thinking;
                }
                if let Some(model) = model {
                    message["model_name"] = json!(model);
                    message["finish_reason"] = json!("stop");
                }
            }
            built.push(message);
        }
        let mut turn = json!({
            "turn_type": "agent", "agent_id": agent,
            "started_at": built.first().unwrap()["timestamp"].clone(),
            "completed_at": built.last().unwrap()["timestamp"].clone(),
            "messages": built,
        });
        if let Some((input, output, thinking)) = total {
            turn["total_usage"] = json!({"input_tokens": input, "output_tokens": output, "thinking_tokens": thinking, "total_tokens": input + output});
        }
        turn
    })
}

#[test]
fn real_pydantic_fixtures_convert_and_round_trip() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/fixtures/pydantic-ai-generated");
    let agent = "550e8400-e29b-41d4-a716-446655440001";
    let mut hashes = Vec::new();
    for name in [
        "pydantic-ai-1.107.10.model-messages.json",
        "pydantic-ai-2.68.0.model-messages.json",
    ] {
        let value: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();
        let turn = pydantic_ai::from_agent_run(&value, agent).unwrap();
        assert_eq!(turn.messages.len(), 4, "{name}");
        // The system prompt is not stored (TP-015); the thinking keeps its signature byte for byte.
        let json = serde_json::to_string(&turn).unwrap();
        assert!(
            !json.contains("system-prompt") && !json.contains("You are helpful."),
            "{name}"
        );
        assert!(json.contains("\"signature\":\"sig==\""));
        assert_eq!(
            turn.total_usage
                .as_ref()
                .and_then(|usage| usage.input_tokens),
            Some(10)
        );
        let thread = ui_stream::default_thread(
            vec![Turn::Agent(turn.clone())],
            &ThreadDefaults::default(),
            &clock(),
        );
        let thread_value = thread.to_value().unwrap();
        assert!(
            validate(&thread_value).is_valid(),
            "{name}: {:#?}",
            validate(&thread_value).findings
        );
        // Pydantic AI -> thread -> Pydantic AI -> thread is stable.
        let messages = pydantic_ai::to_model_messages(&thread.turns, agent);
        assert!(messages.skipped.is_empty());
        let again =
            pydantic_ai::from_agent_run(&Value::Array(messages.messages.clone()), agent).unwrap();
        assert_eq!(again, turn, "{name}");
        // What we emit has the discriminators Pydantic AI needs.
        for message in &messages.messages {
            assert!(matches!(
                message["kind"].as_str(),
                Some("request" | "response")
            ));
            for part in message["parts"].as_array().unwrap() {
                assert!(part["part_kind"].is_string());
            }
        }
        // And the stream round trip holds on real data.
        let chunks = ui_stream::encode_thread(&thread, &EncodeOptions::default());
        let back = ui_stream::assemble_thread(
            chunks,
            AssemblerOptions::default(),
            &ThreadDefaults::default(),
            clock(),
        )
        .unwrap();
        assert_eq!(back.thread, thread);
        hashes.push(hash_thread(&thread_value, HashOptions::default()));
    }
    assert_eq!(hashes.len(), 2);
}

#[test]
fn multi_agent_attribution() {
    let a = "550e8400-e29b-41d4-a716-446655440001";
    let b = "550e8400-e29b-41d4-a716-446655440002";
    let thread: Thread = serde_json::from_value(json!({
        "version": "0.0.3", "thread_id": "550e8400-e29b-41d4-a716-446655440000",
        "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:09Z",
        "agents": {
            a: {"agent_id": a, "agent_name": "researcher", "created_at": "2025-01-01T00:00:00Z"},
            b: {"agent_id": b, "agent_name": "writer", "created_at": "2025-01-01T00:00:00Z"}
        },
        "turns": [
            {"turn_type": "user", "submitted_at": "2025-01-01T00:00:01Z", "parts": [{"part_kind": "user-prompt", "content": "Go"}],
             "client_metadata": {"ui:mode": "fast"}},
            {"turn_type": "agent", "agent_id": a, "started_at": "2025-01-01T00:00:02Z", "completed_at": "2025-01-01T00:00:03Z", "messages": [
                {"message_type": "response", "timestamp": "2025-01-01T00:00:02Z", "agent_id": a, "parts": [
                    {"part_kind": "thinking", "content": "private", "provider_name": "anthropic"},
                    {"part_kind": "tool-call", "tool_name": "search", "tool_call_id": "c1", "args": {}}]},
                {"message_type": "request", "timestamp": "2025-01-01T00:00:02Z", "agent_id": a, "parts": [
                    {"part_kind": "tool-return", "tool_name": "search", "tool_call_id": "c1", "status": "success", "content": "r"}]},
                {"message_type": "response", "timestamp": "2025-01-01T00:00:03Z", "agent_id": a, "parts": [{"part_kind": "text", "content": "Found it"}]}]},
            {"turn_type": "agent", "agent_id": b, "started_at": "2025-01-01T00:00:04Z", "completed_at": "2025-01-01T00:00:05Z", "messages": [
                {"message_type": "response", "timestamp": "2025-01-01T00:00:05Z", "agent_id": b, "parts": [{"part_kind": "text", "content": "Draft"}]}]}
        ]
    })).unwrap();
    let for_b = pydantic_ai::thread_to_model_messages(&thread, b);
    let json = serde_json::to_string(&for_b.messages).unwrap();
    assert!(
        !json.contains("ui:mode"),
        "client_metadata is never passed to the model"
    );
    assert!(
        !json.contains("private") && !json.contains("\"c1\""),
        "another agent's thinking and tools stay private"
    );
    assert_eq!(for_b.messages.len(), 3);
    assert_eq!(for_b.messages[1]["kind"], "request");
    assert_eq!(
        for_b.messages[1]["parts"][0]["content"],
        "[researcher]: Found it"
    );
    assert_eq!(for_b.messages[2]["kind"], "response");
    let for_a = pydantic_ai::thread_to_model_messages(&thread, a);
    assert_eq!(for_a.messages.len(), 5);
    assert_eq!(for_a.messages[4]["parts"][0]["content"], "[writer]: Draft");
}

#[test]
fn meta_is_excluded_from_the_default_hash_only() {
    let base = json!({"version": "0.0.3", "turns": [], "metadata": {"a": 1}});
    let mut with_meta = base.clone();
    with_meta["metadata"]["meta:retry-count"] = json!(3);
    with_meta["meta:x"] = json!(true);
    assert_eq!(
        hash_thread(&base, HashOptions::default()),
        hash_thread(&with_meta, HashOptions::default())
    );
    let include = HashOptions {
        include_meta: true,
        ..HashOptions::default()
    };
    assert_ne!(
        hash_thread(&base, include),
        hash_thread(&with_meta, include)
    );
    // The hash is sha256 over the JCS bytes, nothing else.
    let expected =
        weft_thread::hash::hash_bytes(br#"{"metadata":{"a":1},"turns":[],"version":"0.0.3"}"#);
    assert_eq!(hash_thread(&base, HashOptions::default()), expected);
}

#[test]
fn turns_scope_hashes_version_and_turns_only() {
    let thread = json!({"version": "0.0.3", "title": "a", "turns": [{"turn_type": "user"}]});
    let mut retitled = thread.clone();
    retitled["title"] = json!("b");
    let scope = HashOptions {
        scope: weft_thread::HashScope::Turns,
        ..HashOptions::default()
    };
    assert_eq!(hash_thread(&thread, scope), hash_thread(&retitled, scope));
    assert_ne!(
        hash_thread(&thread, HashOptions::default()),
        hash_thread(&retitled, HashOptions::default())
    );
}

// ----- the canonical hash: equivalent encodings hash equal, any content change does not -----

/// A path from the root to a node of a JSON document.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// Whether an array element is a `meta:*` part or event (left out of the default hash).
fn is_meta_element(value: &Value) -> bool {
    ["part_kind", "event_type"].iter().any(|tag| {
        value
            .get(*tag)
            .and_then(Value::as_str)
            .is_some_and(|kind| kind.starts_with("meta:"))
    })
}

/// Every node's path; with `skip_meta`, nothing under a `meta:*` member, part or event (the
/// default hash leaves those out, so changing them must not count as a content change).
fn paths(value: &Value, skip_meta: bool, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if skip_meta && key.starts_with("meta:") {
                    continue;
                }
                at.push(Step::Key(key.clone()));
                paths(child, skip_meta, at, out);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                if skip_meta && is_meta_element(child) {
                    continue;
                }
                at.push(Step::Index(index));
                paths(child, skip_meta, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn node_mut<'a>(value: &'a mut Value, path: &[Step]) -> &'a mut Value {
    path.iter().fold(value, |node, step| match step {
        Step::Key(key) => &mut node[key.as_str()],
        Step::Index(index) => &mut node[*index],
    })
}

/// One content change at `path` (`variant` picks among the changes the node allows): a
/// scalar replaced by a different one, a member added, removed or renamed, an element added
/// or removed. Never touches `meta:*` data when `skip_meta`.
fn mutate(document: &mut Value, path: &[Step], variant: u8, skip_meta: bool) {
    let node = node_mut(document, path);
    match node {
        Value::Null => *node = json!(false),
        Value::Bool(flag) => *flag = !*flag,
        Value::Number(number) => {
            let other = if number.as_f64() == Some(1.5) {
                2.5
            } else {
                1.5
            };
            *node = json!(other);
        }
        Value::String(text) => text.push('x'),
        Value::Object(map) => {
            let keys: Vec<String> = map
                .keys()
                .filter(|key| !(skip_meta && key.starts_with("meta:")))
                .cloned()
                .collect();
            match (variant % 3, keys.first()) {
                (1, Some(key)) => {
                    map.shift_remove(key);
                }
                (2, Some(key)) if !map.contains_key(&format!("{key}x")) => {
                    let child = map.shift_remove(key).unwrap_or(Value::Null);
                    map.insert(format!("{key}x"), child);
                }
                _ => {
                    let mut name = "added".to_owned();
                    while map.contains_key(&name) {
                        name.push('_');
                    }
                    map.insert(name, json!(0));
                }
            }
        }
        Value::Array(items) => {
            let removable = items
                .iter()
                .position(|item| !(skip_meta && is_meta_element(item)));
            match (variant % 2, removable) {
                (1, Some(index)) => {
                    items.remove(index);
                }
                _ => items.push(Value::Null),
            }
        }
    }
}

/// A text encoding of `value` that means the same JSON: members in a shuffled order, random
/// whitespace, characters of strings written as `\u` escapes (surrogate pairs beyond the
/// BMP), `\/`, and integers written as `N.0` or `Ne0`.
fn encode_equivalently(value: &Value, seed: &mut u64, out: &mut String) {
    fn next(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *seed >> 33
    }
    fn space(seed: &mut u64, out: &mut String) {
        out.push_str(["", " ", "\n  ", "\t"][(next(seed) % 4) as usize]);
    }
    fn string(text: &str, seed: &mut u64, out: &mut String) {
        out.push('"');
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '/' if next(seed).is_multiple_of(2) => out.push_str("\\/"),
                c if (c as u32) < 0x20 || next(seed).is_multiple_of(3) => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
    space(seed, out);
    match value {
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            // Fisher–Yates with the seed.
            for index in (1..members.len()).rev() {
                members.swap(index, (next(seed) % (index as u64 + 1)) as usize);
            }
            out.push('{');
            for (index, (key, child)) in members.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                space(seed, out);
                string(key, seed, out);
                space(seed, out);
                out.push(':');
                encode_equivalently(child, seed, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, child) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                encode_equivalently(child, seed, out);
            }
            out.push(']');
        }
        Value::String(text) => string(text, seed, out),
        Value::Number(number) => match number.as_i64() {
            Some(integer) if integer.unsigned_abs() < (1 << 53) => {
                let forms = [
                    format!("{integer}"),
                    format!("{integer}.0"),
                    format!("{integer}e0"),
                ];
                out.push_str(&forms[(next(seed) % 3) as usize]);
            }
            _ => out.push_str(&number.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
    space(seed, out);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, .. ProptestConfig::default() })]

    #[test]
    fn hash_is_equal_for_equivalent_encodings(value in common::thread(), seed in any::<u64>(), include_meta in any::<bool>(), turns in any::<bool>()) {
        let mut text = String::new();
        encode_equivalently(&value, &mut seed.clone(), &mut text);
        let reread: Value = serde_json::from_str(&text).unwrap();
        let scope = if turns { weft_thread::HashScope::Turns } else { weft_thread::HashScope::Thread };
        let options = HashOptions { include_meta, scope };
        prop_assert_eq!(hash_thread(&value, options), hash_thread(&reread, options), "{}", text);
    }

}

proptest! {
    // Each case changes every node of its thread in turn (a few hundred hashes).
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    /// Every node of the generated thread, changed one at a time.
    #[test]
    fn hash_changes_with_any_content_change(value in common::thread(), variant in any::<u8>(), include_meta in any::<bool>()) {
        let skip_meta = !include_meta;
        let mut all = Vec::new();
        paths(&value, skip_meta, &mut Vec::new(), &mut all);
        let options = HashOptions { include_meta, ..HashOptions::default() };
        let original = hash_thread(&value, options);
        for (index, path) in all.iter().enumerate() {
            let mut changed = value.clone();
            mutate(&mut changed, path, variant.wrapping_add(index as u8), skip_meta);
            prop_assert_ne!(&changed, &value);
            prop_assert_ne!(original, hash_thread(&changed, options), "change at {:?}", path);
        }
    }
}

// ----- stream → thread → stream: any AI SDK server's stream -----

/// What a `useChat` client shows of a stream, in order.
#[derive(Debug, Clone, PartialEq)]
enum Shown {
    Text(String),
    Reasoning(String),
    Call(String, String, Value),
    Output(String, bool, Value),
}

#[derive(Debug, Clone)]
enum ModelPart {
    Text(Vec<String>),
    Reasoning(Vec<String>),
    Call(String, Value, Option<(bool, Value)>),
}

fn model_part() -> impl Strategy<Value = ModelPart> {
    let deltas = prop::collection::vec("[a-zA-Z0-9 ,.]{1,6}", 1..4);
    prop_oneof![
        3 => deltas.clone().prop_map(ModelPart::Text),
        1 => deltas.prop_map(ModelPart::Reasoning),
        2 => (
            prop::sample::select(vec!["search", "get_weather"]),
            common::json_value(),
            prop::option::of((any::<bool>(), common::json_leaf().prop_filter("non-null", |v| !v.is_null()))),
        )
            .prop_map(|(name, input, output)| {
                let output = output.map(|(ok, value)| if ok { (true, value) } else { (false, json!(format!("failed: {value}"))) });
                ModelPart::Call(name.to_owned(), input, output)
            }),
    ]
}

/// A valid UI message stream without Weft's annotations (what any AI SDK server sends):
/// messages of steps of model parts, tool outputs after the calls of their step; and what a
/// client shows of it.
fn plain_stream() -> impl Strategy<Value = (Vec<ui_stream::UiChunk>, Vec<Vec<Shown>>)> {
    use ui_stream::UiChunk;
    let step = prop::collection::vec(model_part(), 1..4);
    let message = prop::collection::vec(step, 1..4);
    prop::collection::vec(message, 1..3).prop_map(|messages| {
        let (mut chunks, mut shown_turns, mut ids) = (Vec::new(), Vec::new(), 0);
        for (number, steps) in messages.into_iter().enumerate() {
            let mut shown = Vec::new();
            chunks.push(UiChunk::Start {
                message_id: Some(format!("msg-{number}")),
                message_metadata: None,
            });
            for parts in steps {
                chunks.push(UiChunk::StartStep);
                let mut outputs = Vec::new();
                for part in parts {
                    ids += 1;
                    let id = format!("p{ids}");
                    match part {
                        ModelPart::Text(deltas) => {
                            chunks.push(UiChunk::TextStart {
                                id: id.clone(),
                                provider_metadata: None,
                            });
                            chunks.extend(deltas.iter().map(|delta| UiChunk::TextDelta {
                                id: id.clone(),
                                delta: delta.clone(),
                            }));
                            chunks.push(UiChunk::TextEnd {
                                id,
                                provider_metadata: None,
                            });
                            shown.push(Shown::Text(deltas.concat()));
                        }
                        ModelPart::Reasoning(deltas) => {
                            chunks.push(UiChunk::ReasoningStart {
                                id: id.clone(),
                                provider_metadata: None,
                            });
                            chunks.extend(deltas.iter().map(|delta| UiChunk::ReasoningDelta {
                                id: id.clone(),
                                delta: delta.clone(),
                            }));
                            chunks.push(UiChunk::ReasoningEnd {
                                id,
                                provider_metadata: None,
                            });
                            shown.push(Shown::Reasoning(deltas.concat()));
                        }
                        ModelPart::Call(name, input, output) => {
                            let call = format!("call_{ids}");
                            chunks.push(UiChunk::ToolInputStart {
                                tool_call_id: call.clone(),
                                tool_name: name.clone(),
                            });
                            chunks.push(UiChunk::ToolInputAvailable {
                                tool_call_id: call.clone(),
                                tool_name: name.clone(),
                                input: input.clone(),
                            });
                            shown.push(Shown::Call(call.clone(), name, input));
                            if let Some(output) = output {
                                outputs.push((call, output));
                            }
                        }
                    }
                }
                for (call, (ok, value)) in outputs {
                    chunks.push(if ok {
                        UiChunk::ToolOutputAvailable {
                            tool_call_id: call.clone(),
                            output: value.clone(),
                            preliminary: false,
                        }
                    } else {
                        UiChunk::ToolOutputError {
                            tool_call_id: call.clone(),
                            error_text: value.as_str().unwrap_or_default().to_owned(),
                        }
                    });
                    shown.push(Shown::Output(call, ok, value));
                }
                chunks.push(UiChunk::FinishStep);
            }
            chunks.push(UiChunk::Finish {
                finish_reason: Some("stop".into()),
                message_metadata: None,
            });
            shown_turns.push(shown);
        }
        (chunks, shown_turns)
    })
}

/// What the thread's agent turns hold, in the terms of [`Shown`].
fn shown_in(thread: &Thread) -> Vec<Vec<Shown>> {
    let value = thread.to_value().unwrap();
    let mut turns = Vec::new();
    for turn in value["turns"].as_array().unwrap() {
        let mut shown = Vec::new();
        for message in turn["messages"].as_array().into_iter().flatten() {
            for part in message["parts"].as_array().into_iter().flatten() {
                let text = || part["content"].as_str().unwrap_or_default().to_owned();
                match part["part_kind"].as_str() {
                    Some("text") => shown.push(Shown::Text(text())),
                    Some("thinking") => shown.push(Shown::Reasoning(text())),
                    Some("tool-call") => shown.push(Shown::Call(
                        part["tool_call_id"].as_str().unwrap().to_owned(),
                        part["tool_name"].as_str().unwrap().to_owned(),
                        part["args"].clone(),
                    )),
                    Some("tool-return") => shown.push(Shown::Output(
                        part["tool_call_id"].as_str().unwrap().to_owned(),
                        part["status"] == "success",
                        part["content"].clone(),
                    )),
                    _ => {}
                }
            }
        }
        turns.push(shown);
    }
    turns
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, .. ProptestConfig::default() })]

    #[test]
    fn plain_stream_thread_stream_keeps_what_the_client_shows((chunks, shown) in plain_stream(), v6 in any::<bool>()) {
        let sse = ui_stream::to_sse(&chunks);
        let parsed = ui_stream::parse_stream(&sse).unwrap();
        prop_assert_eq!(&parsed, &chunks);
        let assembled = ui_stream::assemble_thread(parsed, AssemblerOptions::default(), &ThreadDefaults::default(), clock()).unwrap();
        prop_assert!(assembled.interruptions.is_empty(), "{:?}", assembled.interruptions);
        let value = assembled.thread.to_value().unwrap();
        let report = validate(&value);
        prop_assert!(report.is_valid(), "{:#?}", report.findings);
        prop_assert_eq!(shown_in(&assembled.thread), shown);
        // The thread re-encoded (now with annotations) assembles to itself.
        let version = if v6 { UiStreamVersion::V6 } else { UiStreamVersion::V5 };
        let again = ui_stream::encode_thread(&assembled.thread, &EncodeOptions { version });
        let back = ui_stream::assemble_thread(again, AssemblerOptions::default(), &ThreadDefaults::default(), clock()).unwrap();
        prop_assert_eq!(back.thread, assembled.thread);
    }
}
