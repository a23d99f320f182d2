//! "Never panics" tests standing in for continuous fuzzing on stable (the cargo-fuzz targets in
//! `/fuzz` need nightly): random bytes and mutated valid threads go through the parser,
//! validator, canonicalizer, encoder and assembler. Invariant: whatever validation accepts, the
//! typed model parses and the stream round trip reproduces.
#![allow(clippy::unwrap_used)]

mod common;

use proptest::prelude::*;
use serde_json::Value;
use weft_thread::canonical::{CanonicalOptions, canonicalize};
use weft_thread::clock::FixedClock;
use weft_thread::ui_stream::{
    self, Assembler, AssemblerOptions, EncodeOptions, ThreadDefaults, UiChunk,
};
use weft_thread::{
    HashOptions, Thread, Timestamp, hash_thread, pydantic_ai, validate, validate_json,
};

fn clock() -> FixedClock {
    FixedClock(Timestamp::parse("2030-01-01T00:00:00Z").unwrap())
}

/// Replaces (or, for `None`, removes) the value at a path chosen by `selector`.
fn mutate(value: &mut Value, selector: &[usize], replacement: Option<Value>) {
    let Some((first, rest)) = selector.split_first() else {
        return;
    };
    let stop = rest.is_empty() || *first % 5 == 0;
    match value {
        Value::Object(map) if !map.is_empty() => {
            let key = map.keys().nth(first % map.len()).unwrap().clone();
            if stop {
                match replacement {
                    Some(new) => {
                        map.insert(key, new);
                    }
                    None => {
                        map.remove(&key);
                    }
                }
            } else if let Some(child) = map.get_mut(&key) {
                mutate(child, rest, replacement);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let index = first % items.len();
            if stop {
                match replacement {
                    Some(new) => items[index] = new,
                    None => {
                        items.remove(index);
                    }
                }
            } else {
                mutate(&mut items[index], rest, replacement);
            }
        }
        _ => {}
    }
}

fn exercise_thread_value(value: &Value) {
    let report = validate(value);
    let _ = hash_thread(value, HashOptions::default());
    let _ = canonicalize(value, CanonicalOptions { include_meta: true });
    let typed = Thread::from_value(value.clone());
    if report.is_valid() {
        let thread =
            typed.unwrap_or_else(|error| panic!("valid but not parseable: {error}\n{value:#}"));
        let chunks = ui_stream::encode_thread(&thread, &EncodeOptions::default());
        let back = ui_stream::assemble_thread(
            chunks,
            AssemblerOptions::default(),
            &ThreadDefaults::default(),
            clock(),
        )
        .unwrap();
        assert_eq!(back.thread, thread);
        let messages = pydantic_ai::to_model_messages(&thread.turns, "assistant");
        let _ = pydantic_ai::from_agent_run(&Value::Array(messages.messages), "assistant");
    }
}

fn chunk_value() -> impl Strategy<Value = Value> {
    let types = prop::sample::select(vec![
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-input-error",
        "tool-output-available",
        "tool-output-error",
        "tool-output-denied",
        "source-url",
        "source-document",
        "file",
        "data-x",
        "data-weft",
        "finish-step",
        "reset-step",
        "message-metadata",
        "finish",
        "error",
        "abort",
        "mystery",
    ]);
    let fields = prop::collection::vec(
        (
            prop::sample::select(vec![
                "id",
                "delta",
                "toolCallId",
                "toolName",
                "input",
                "output",
                "errorText",
                "url",
                "mediaType",
                "data",
                "transient",
                "kind",
                "message",
                "part",
                "turn",
            ]),
            prop_oneof![
                prop::sample::select(vec!["1", "2", "x"]).prop_map(|s| Value::String(s.to_owned())),
                common::json_value()
            ],
        ),
        0..6,
    );
    (types, fields).prop_map(|(chunk_type, fields)| {
        let mut map: serde_json::Map<String, Value> = fields
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value))
            .collect();
        map.insert("type".into(), Value::String(chunk_type.to_owned()));
        Value::Object(map)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = validate_json(&text);
        let _ = Thread::from_json(&text);
        let _ = ui_stream::parse_stream(&text);
        let mut decoder = ui_stream::sse::SseDecoder::new();
        let _ = decoder.push(&bytes);
        let _ = decoder.finish();
        if let Ok(value) = serde_json::from_str::<Value>(&text) {
            exercise_thread_value(&value);
            let _ = pydantic_ai::from_agent_run(&value, "a");
        }
    }

    #[test]
    fn mutated_threads_never_panic(
        value in common::thread(),
        selector in prop::collection::vec(any::<usize>(), 1..6),
        replacement in prop::option::of(common::json_value()),
    ) {
        let mut value = value;
        mutate(&mut value, &selector, replacement);
        exercise_thread_value(&value);
    }

    #[test]
    fn random_chunk_sequences_never_panic(values in prop::collection::vec(chunk_value(), 0..40)) {
        let mut assembler = Assembler::with_clock(AssemblerOptions::default(), clock());
        let mut builder = ui_stream::ThreadBuilder::new();
        for value in values {
            if let Ok(chunk) = UiChunk::from_value(value) {
                let _ = UiChunk::from_value(chunk.to_value());
                for event in assembler.push(chunk) {
                    builder.apply(event);
                }
            }
        }
        for event in assembler.finish() {
            builder.apply(event);
        }
        if let Ok(assembled) = builder.build(&ThreadDefaults::default(), &clock()) {
            let _ = validate(&assembled.thread.to_value().unwrap());
        }
    }

    #[test]
    fn truncated_encoded_streams_yield_complete_turns_only(value in common::thread(), cut in any::<usize>()) {
        let thread = Thread::from_value(value).unwrap();
        let chunks = ui_stream::encode_thread(&thread, &EncodeOptions::default());
        let cut = cut % (chunks.len() + 1);
        let assembled = ui_stream::assemble_thread(chunks[..cut].to_vec(), AssemblerOptions::default(), &ThreadDefaults::default(), clock()).unwrap();
        // Every assembled turn is one of the original turns, whole (TP-027, TP-041).
        for turn in &assembled.thread.turns {
            prop_assert!(thread.turns.contains(turn));
        }
        prop_assert!(assembled.thread.turns.len() <= thread.turns.len());
    }
}
