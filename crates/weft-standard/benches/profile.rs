//! What the runtime profile costs per step: the same 20-step task of a project's agent
//! (one no-op tool call per step, scripted model) with and without `[runtime]` — in memory
//! (the orchestrator, the policy stage, sanitizing, the state machine) and as a durable run
//! on SQLite through `Runtime::start` (plus its `state_transition` events).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use weft_runtime::Runtime;
use weft_standard::{Launch, Project, SessionOptions, StandardSessions, run_session};
use weft_store::{Durability, Store};

const STEPS: usize = 20;

/// A project in `dir` whose agent takes `STEPS` steps; with the profile on, it ends with
/// `complete_task`, else with a text answer.
fn project(dir: &Path, profile: bool) -> Project {
    for sub in ["agents", "prompts", "tools"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let runtime = if profile {
        "[runtime]\nmaxTurns = 100\n[runtime.policy]\nmode = \"batch\"\n"
    } else {
        ""
    };
    std::fs::write(
        dir.join("weft.toml"),
        format!("model = \"scripted:script.json\"\n[budget]\nmaxSteps = 1000\n{runtime}"),
    )
    .unwrap();
    std::fs::write(
        dir.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("prompts/p.toml"),
        "name = \"p\"\ntools = [\"note\"]\n",
    )
    .unwrap();
    std::fs::write(dir.join("tools/note.toml"), "name = \"note\"\n").unwrap();
    let mut responses: Vec<serde_json::Value> = (0..STEPS)
        .map(|i| json!({"toolCalls": [{"id": format!("n{i}"), "name": "note", "arguments": {"text": "a note"}}]}))
        .collect();
    responses.push(if profile {
        json!({"toolCalls": [{"id": "c", "name": "complete_task", "arguments": {"summary": "done"}}]})
    } else {
        json!({"text": "done"})
    });
    std::fs::write(
        dir.join("script.json"),
        json!({"responses": responses}).to_string(),
    )
    .unwrap();
    Project::load(dir).unwrap()
}

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn in_memory(c: &mut Criterion) {
    let rt = tokio();
    let mut group = c.benchmark_group("profile_in_memory");
    for (name, profile) in [("plain", false), ("runtime_profile", true)] {
        let dir = tempfile::tempdir().unwrap();
        let p = project(dir.path(), profile);
        let options = SessionOptions::new(dir.path());
        group.bench_function(format!("{name}, {STEPS} steps"), |b| {
            b.to_async(&rt).iter(|| async {
                let outcome = run_session(&p, "a", "go", &options).await.unwrap();
                assert_eq!(outcome.message, "done");
            });
        });
    }
    group.finish();
}

fn durable(c: &mut Criterion) {
    let rt = tokio();
    let mut group = c.benchmark_group("profile_durable");
    group.sample_size(20);
    for (name, profile) in [("plain", false), ("runtime_profile", true)] {
        let dir = tempfile::tempdir().unwrap();
        let p = project(dir.path(), profile);
        let store = rt.block_on(async {
            Store::open(&format!("sqlite:{}", dir.path().join("weft.db").display()))
                .await
                .unwrap()
                .with_durability(Durability::Async)
        });
        let runtime = Runtime::new(store).with_sessions(Arc::new(StandardSessions));
        let agent = p.agent("a").unwrap().clone();
        group.bench_function(format!("{name}, {STEPS} steps"), |b| {
            b.to_async(&rt).iter(|| async {
                let mut spec = Launch::default().spec(&p, &agent, "go".into()).unwrap();
                spec.durability = Durability::Async;
                let outcome = runtime
                    .start(spec, false)
                    .await
                    .unwrap()
                    .outcome()
                    .await
                    .unwrap();
                assert_eq!(outcome.exit_code(), 0);
            });
        });
    }
    group.finish();
}

criterion_group!(benches, in_memory, durable);
criterion_main!(benches);
