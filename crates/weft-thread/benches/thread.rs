//! Benchmarks: canonicalize + hash throughput (target ≥ 200 MB/s) and stream assembly
//! (target ≥ 1 million chunks/s). Run with `cargo bench -p weft-thread`.
#![allow(missing_docs, clippy::unwrap_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::hint::black_box;
use weft_thread::clock::FixedClock;
use weft_thread::ui_stream::{self, Assembler, AssemblerOptions, EncodeOptions, UiChunk};
use weft_thread::{HashOptions, Thread, Timestamp, hash_thread, validate};

const AGENT: &str = "550e8400-e29b-41d4-a716-446655440001";

/// A realistic thread of about 2 MB: 200 agent turns with thinking, text, tool calls and results.
fn big_thread() -> Value {
    let mut turns = Vec::new();
    let lorem = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore. ".repeat(20);
    for index in 0..200 {
        let time = |offset: u32| {
            format!(
                "2025-01-20T{:02}:{:02}:{:02}Z",
                index / 60 % 24,
                index % 60,
                offset
            )
        };
        turns.push(json!({"turn_type": "user", "submitted_at": time(0), "parts": [{"part_kind": "user-prompt", "content": format!("question {index}")}],
            "client_metadata": {"ui:mode": "creative", "session_id": index}}));
        turns.push(json!({"turn_type": "agent", "agent_id": AGENT, "started_at": time(1), "completed_at": time(4), "messages": [
            {"message_type": "response", "timestamp": time(2), "agent_id": AGENT, "model_name": "gpt-4", "usage": {"input_tokens": 1200, "output_tokens": 340, "total_tokens": 1540},
             "finish_reason": "tool_call", "parts": [
                {"part_kind": "thinking", "content": lorem, "signature": "c2lnbmF0dXJl", "provider_name": "anthropic"},
                {"part_kind": "text", "content": lorem},
                {"part_kind": "tool-call", "tool_name": "search", "tool_call_id": format!("call_{index}"), "args": {"query": "weather in Paris", "limit": 10, "score": 0.75}}]},
            {"message_type": "request", "timestamp": time(3), "agent_id": AGENT, "parts": [
                {"part_kind": "tool-return", "tool_name": "search", "tool_call_id": format!("call_{index}"), "status": "success",
                 "content": {"results": [{"title": "Météo Paris ☀", "score": 0.9123, "url": "https://example.com/a"}, {"title": "Forecast", "score": 1.5e-3, "url": "https://example.com/b"}]}}]},
            {"message_type": "system", "timestamp": time(3), "event_type": "meta:performance", "event_data": {"ttfb": 150}},
            {"message_type": "response", "timestamp": time(4), "agent_id": AGENT, "finish_reason": "stop", "parts": [{"part_kind": "text", "content": lorem}]}
        ]}));
    }
    json!({"version": "0.0.3", "thread_id": "550e8400-e29b-41d4-a716-446655440000", "created_at": "2025-01-20T00:00:00Z", "updated_at": "2025-01-20T23:59:59Z",
        "agents": {AGENT: {"agent_id": AGENT, "agent_name": "bench", "created_at": "2025-01-01T00:00:00Z"}}, "turns": turns})
}

/// One streamed turn: 100 000 text deltas of a few characters, as a model streams.
fn delta_chunks(count: usize) -> Vec<UiChunk> {
    let mut chunks = vec![
        UiChunk::Start {
            message_id: None,
            message_metadata: None,
        },
        UiChunk::StartStep,
    ];
    chunks.push(UiChunk::TextStart {
        id: "t".into(),
        provider_metadata: None,
    });
    for index in 0..count {
        chunks.push(UiChunk::TextDelta {
            id: "t".into(),
            delta: format!("tok{} ", index % 10),
        });
    }
    chunks.push(UiChunk::TextEnd {
        id: "t".into(),
        provider_metadata: None,
    });
    chunks.push(UiChunk::FinishStep);
    chunks.push(UiChunk::Finish {
        finish_reason: None,
        message_metadata: None,
    });
    chunks
}

fn clock() -> FixedClock {
    FixedClock(Timestamp::parse("2025-01-20T10:00:00Z").unwrap())
}

fn benches(c: &mut Criterion) {
    let thread = big_thread();
    let text = serde_json::to_string(&thread).unwrap();
    assert!(validate(&thread).is_valid());

    let mut group = c.benchmark_group("hash");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("canonicalize_and_hash", |b| {
        b.iter(|| hash_thread(black_box(&thread), HashOptions::default()))
    });
    group.bench_function("canonicalize_only", |b| {
        b.iter(|| {
            weft_thread::canonical::canonicalize(
                black_box(&thread),
                weft_thread::canonical::CanonicalOptions::default(),
            )
        })
    });
    let canonical = weft_thread::canonical::canonicalize(
        &thread,
        weft_thread::canonical::CanonicalOptions::default(),
    );
    group.bench_function("sha256_only", |b| {
        b.iter(|| weft_thread::hash::hash_bytes(black_box(&canonical)))
    });
    group.bench_function("parse_canonicalize_and_hash", |b| {
        b.iter(|| {
            let value: Value = serde_json::from_str(black_box(&text)).unwrap();
            hash_thread(&value, HashOptions::default())
        })
    });
    group.bench_function("validate", |b| b.iter(|| validate(black_box(&thread))));
    group.finish();

    let chunks = delta_chunks(100_000);
    let mut group = c.benchmark_group("assemble");
    group.throughput(Throughput::Elements(chunks.len() as u64));
    group.bench_function("text_deltas", |b| {
        b.iter_batched(
            || chunks.clone(),
            |chunks| {
                let mut assembler = Assembler::with_clock(AssemblerOptions::default(), clock());
                let mut turns = 0;
                for chunk in chunks {
                    turns += assembler.push(chunk).len();
                }
                turns
            },
            criterion::BatchSize::LargeInput,
        )
    });
    let typed = Thread::from_value(thread.clone()).unwrap();
    let encoded = ui_stream::encode_thread(&typed, &EncodeOptions::default());
    group.throughput(Throughput::Elements(encoded.len() as u64));
    group.bench_function("encoded_thread", |b| {
        b.iter_batched(
            || encoded.clone(),
            |chunks| {
                ui_stream::assemble_thread(
                    chunks,
                    AssemblerOptions::default(),
                    &ui_stream::ThreadDefaults::default(),
                    clock(),
                )
                .unwrap()
            },
            criterion::BatchSize::LargeInput,
        )
    });
    let sse = ui_stream::to_sse(&chunks);
    group.throughput(Throughput::Elements(chunks.len() as u64));
    group.bench_function("sse_text_deltas_parse_and_assemble", |b| {
        b.iter(|| {
            let parsed = ui_stream::parse_stream(black_box(&sse)).unwrap();
            let mut assembler = Assembler::with_clock(AssemblerOptions::default(), clock());
            parsed
                .into_iter()
                .map(|chunk| assembler.push(chunk).len())
                .sum::<usize>()
        })
    });
    group.finish();
}

criterion_group! {
    name = thread_benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(4));
    targets = benches
}
criterion_main!(thread_benches);
