//! Property tests: typed parse/serialize, thread → stream → thread, thread → Pydantic AI →
//! thread (representable subset), hash invariance, JCS against an independent implementation.
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
