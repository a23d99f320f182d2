//! Store benchmarks: SQLite `async` checkpoint throughput, `sync` per-step latency, the
//! bytes-per-checkpoint curve of one 1,000-step run (printed), and PostgreSQL throughput
//! with 16 concurrent runs (when `WEFT_TEST_DATABASE_URL` is set).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use weft_agent::AgentState;
use weft_agent::checkpoint::{Checkpoint, CheckpointMetadata};
use weft_provider::{Message, TokenUsage};
use weft_store::{
    Durability, PgOptions, Store, ToolCallRecord, ToolCallStatus, ToolLedger, new_id, now_string,
};

const STEPS: usize = 100;

fn checkpoints(steps: usize) -> Vec<Checkpoint> {
    let mut state = AgentState::initial().with_message(Message::user("Write the report."));
    let mut out = Vec::with_capacity(steps);
    for step in 1..=steps as u64 {
        state = state
            .with_step(step)
            .with_message(Message::assistant(format!(
                "Step {step}: calling a tool. {}",
                "lorem ipsum ".repeat(20)
            )))
            .with_message(Message::user(format!(
                "tool result {step}: {}",
                "data ".repeat(30)
            )));
        out.push(Checkpoint {
            metadata: CheckpointMetadata {
                session_id: String::new(),
                checkpoint_id: new_id(),
                timestamp: chrono::Utc::now(),
                step,
                agent_id: "bench".into(),
            },
            state: state.clone(),
            pending_tool_calls: Vec::new(),
            completed_tool_calls: Vec::new(),
            usage: Some(TokenUsage {
                input_tokens: step * 100,
                output_tokens: step * 10,
                ..TokenUsage::default()
            }),
        });
    }
    out
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn sqlite(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let store = rt
        .block_on(Store::open(&format!(
            "sqlite:{}",
            dir.path().join("bench.db").display()
        )))
        .unwrap();
    let cps = checkpoints(STEPS);

    // The bytes curve of one long run.
    rt.block_on(async {
        let long = checkpoints(1000);
        let thread = new_id();
        let mut curve = Vec::new();
        for (i, cp) in long.iter().enumerate() {
            let stats = store
                .with_durability(Durability::Async)
                .save_checkpoint(&thread, cp)
                .await
                .unwrap();
            if [1usize, 10, 100, 250, 500, 750, 1000].contains(&(i + 1)) {
                curve.push((i + 1, stats.bytes, cp.state.message_count()));
            }
        }
        store.flush().await.unwrap();
        eprintln!("checkpoint bytes written per step (one 1,000-step run):");
        for (step, bytes, messages) in curve {
            eprintln!("  step {step:>5}: {bytes:>6} bytes  (state holds {messages} messages)");
        }
    });

    let mut group = c.benchmark_group("sqlite");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(6));
    group.throughput(Throughput::Elements(STEPS as u64));
    group.bench_function("async_checkpoints_100_step_run", |b| {
        let fast = store.with_durability(Durability::Async);
        b.to_async(&rt).iter_custom(|iters| {
            let fast = fast.clone();
            let mut cps = cps.clone();
            async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let thread = new_id();
                    for cp in &mut cps {
                        // Each save is a new checkpoint (new id), as the agent makes them.
                        cp.metadata.checkpoint_id = new_id();
                        fast.save_checkpoint(&thread, cp).await.unwrap();
                    }
                }
                fast.flush().await.unwrap();
                start.elapsed()
            }
        });
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("sync_step_pending_result_checkpoints", |b| {
        let durable = store.with_durability(Durability::Sync).for_run("bench-run");
        let thread = new_id();
        let mut first = cps[0].clone();
        first.metadata.checkpoint_id = new_id();
        rt.block_on(durable.save_checkpoint(&thread, &first))
            .unwrap();
        let mut i = 0u64;
        b.to_async(&rt).iter(|| {
            i += 1;
            let durable = durable.clone();
            let thread = thread.clone();
            let mut cp = cps[(i as usize) % STEPS].clone();
            cp.metadata.checkpoint_id = new_id();
            async move {
                // One durable tool step: pending (before the side effect), result, tool
                // checkpoint, step-end checkpoint — each committed before going on.
                let id = format!("call-{i}");
                let record = ToolCallRecord {
                    run_id: "bench-run".into(),
                    position: id.clone(),
                    args_hash: String::new(),
                    tool_call_id: id.clone(),
                    thread_id: thread.clone(),
                    tool_name: "t".into(),
                    arguments: json!({"i": i}),
                    status: ToolCallStatus::Pending,
                    result: None,
                    is_error: false,
                    attempts: 1,
                    side_effects: true,
                    idempotent: false,
                    turn: i,
                    started_at: now_string(),
                    ended_at: None,
                };
                durable.tool_call_started(&record).await.unwrap();
                durable
                    .tool_call_finished("bench-run", &id, &json!({"ok": true}), false)
                    .await
                    .unwrap();
                durable
                    .save_tool_checkpoint(&thread, &[], &[])
                    .await
                    .unwrap();
                durable.save_checkpoint(&thread, &cp).await.unwrap();
            }
        });
    });
    group.finish();
}

fn postgres(c: &mut Criterion) {
    let Ok(url) = std::env::var("WEFT_TEST_DATABASE_URL") else {
        eprintln!("SKIPPED: PostgreSQL bench (set WEFT_TEST_DATABASE_URL)");
        return;
    };
    let rt = runtime();
    let schema = format!("weft_bench_{}", fastrand::u64(..));
    let store = rt
        .block_on(Store::open_postgres(
            PgOptions::new(url.clone()).schema(schema.clone()),
        ))
        .unwrap();
    let cps = checkpoints(STEPS);
    let mut group = c.benchmark_group("postgres");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    for durability in [Durability::Sync, Durability::Async] {
        group.throughput(Throughput::Elements(16 * 25));
        group.bench_function(
            format!("checkpoints_16_concurrent_runs_{durability:?}").to_lowercase(),
            |b| {
                let s = store.with_durability(durability);
                b.to_async(&rt).iter_custom(|iters| {
                    let s = s.clone();
                    let cps = cps.clone();
                    async move {
                        let start = Instant::now();
                        for _ in 0..iters {
                            let mut tasks = Vec::new();
                            for _ in 0..16 {
                                let s = s.clone();
                                let mut cps: Vec<_> = cps.iter().take(25).cloned().collect();
                                tasks.push(tokio::spawn(async move {
                                    let thread = new_id();
                                    for cp in &mut cps {
                                        cp.metadata.checkpoint_id = new_id();
                                        s.save_checkpoint(&thread, cp).await.unwrap();
                                    }
                                }));
                            }
                            for t in tasks {
                                t.await.unwrap();
                            }
                            s.flush().await.unwrap();
                        }
                        start.elapsed()
                    }
                });
            },
        );
    }
    group.finish();
    drop(store);
    rt.block_on(weft_store::drop_schema(&url, &schema)).unwrap();
}

criterion_group!(benches, sqlite, postgres);
criterion_main!(benches);
