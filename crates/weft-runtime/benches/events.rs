//! What a run's events cost: one event through the emitter (numbered, redacted, queued for
//! the log), with and without a live subscriber; and a whole run's step through
//! `Runtime::start` (recorded response, ledger, checkpoint and events) on SQLite.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use weft_runtime::event::{AgentPath, Emitter, EventKind};
use weft_runtime::spec::{AgentProgram, Program, RunSpec, ToolSpec};
use weft_runtime::{Runtime, ToolRegistry};
use weft_store::{Durability, Store};

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn store(dir: &std::path::Path) -> Store {
    Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await
        .unwrap()
        .with_durability(Durability::Async)
}

fn end() -> EventKind {
    EventKind::ToolCallEnd {
        tool: "append_line".into(),
        is_error: false,
        result: Some(json!({"ok": true, "line": "a line"})),
        result_bytes: None,
        result_ref: None,
        side: None,
    }
}

fn emit(c: &mut Criterion) {
    let rt = tokio();
    let dir = tempfile::tempdir().unwrap();
    let store = rt.block_on(store(dir.path()));
    let agent = AgentPath::root("main");
    let mut group = c.benchmark_group("emit");
    group.bench_function("tool_call_end, nobody listening", |b| {
        let emitter = Emitter::new(store.clone(), "bench-1", "t", Emitter::channel());
        b.to_async(&rt)
            .iter(|| async { emitter.emit(&agent, 1, Some("c1"), end()).await });
    });
    group.bench_function("tool_call_end, one subscriber", |b| {
        let emitter = Emitter::new(store.clone(), "bench-2", "t", Emitter::channel());
        let mut events = emitter.subscribe(0);
        rt.spawn(async move { while events.next().await.is_some() {} });
        b.to_async(&rt)
            .iter(|| async { emitter.emit(&agent, 1, Some("c1"), end()).await });
    });
    group.bench_function("text_delta (coalesced)", |b| {
        let emitter = Emitter::new(store.clone(), "bench-3", "t", Emitter::channel());
        b.to_async(&rt).iter(|| async {
            let kind = EventKind::TextDelta {
                text: "a token ".into(),
                side: None,
            };
            emitter.emit(&agent, 1, None, kind).await;
        });
    });
    group.finish();
}

/// A run of `steps` tool steps (one `append_line` call each) and an answer.
fn spec(dir: &std::path::Path, steps: usize) -> RunSpec {
    let mut responses: Vec<serde_json::Value> = (0..steps)
        .map(|i| json!({"toolCalls": [{"id": format!("c{i}"), "name": "append_line", "arguments": {"line": "x"}}]}))
        .collect();
    responses.push(json!({"text": "done"}));
    let script = dir.join("script.json");
    std::fs::write(&script, json!({"responses": responses}).to_string()).unwrap();
    let mut program = AgentProgram::new(format!("scripted-turns:{}", script.display()));
    program.tools = vec![ToolSpec {
        name: "append_line".into(),
        config: json!({"out": dir.join("out.txt"), "log": dir.join("log.txt")}),
    }];
    let mut spec = RunSpec::new("go", Program::Agent(program));
    spec.durability = Durability::Async;
    spec
}

fn run(c: &mut Criterion) {
    const STEPS: usize = 50;
    let rt = tokio();
    let mut group = c.benchmark_group("run");
    group.sample_size(10);
    for (name, events) in [("50 steps, events taken", true), ("50 steps", false)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let dir = tempfile::tempdir().unwrap();
                    let store = rt.block_on(store(dir.path()));
                    let runtime = Runtime::new(store).with_tools(ToolRegistry::with_builtins());
                    let spec = spec(dir.path(), STEPS);
                    let started = Instant::now();
                    rt.block_on(async {
                        let mut handle = runtime.start(spec, events).await.unwrap();
                        if let Some(mut events) = handle.take_events() {
                            while events.next().await.is_some() {}
                        }
                        assert_eq!(handle.outcome().await.unwrap().exit_code(), 0);
                    });
                    total += started.elapsed();
                }
                total
            });
        });
    }
    group.finish();
}

criterion_group!(benches, emit, run);
criterion_main!(benches);
