//! Property: the event log numbers a run's events 1, 2, 3, … with no gap and no duplicate,
//! whatever the number of concurrent writers — tasks sharing one store handle and separate
//! handles (separate connections, as separate processes would have) appending to the same
//! run at once, each with its own durability and batch sizes. On SQLite and on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use proptest::prelude::*;
use serde_json::json;
use weft_store::{Durability, EventLog as _, EventQuery, NewEvent, PgOptions, Store};

/// One writer: which handle it uses, its durability, and the sizes of its appends (1: one
/// `append_event`, more: one `append_events` batch).
#[derive(Debug, Clone)]
struct Writer {
    handle: usize,
    sync: bool,
    batches: Vec<usize>,
}

fn writer() -> impl Strategy<Value = Writer> {
    (
        0usize..3,
        any::<bool>(),
        prop::collection::vec(1usize..4, 1..6),
    )
        .prop_map(|(handle, sync, batches)| Writer {
            handle,
            sync,
            batches,
        })
}

fn event(run: &str, writer: usize, index: usize) -> NewEvent {
    NewEvent {
        event_type: "text_delta".into(),
        run_id: run.into(),
        thread_id: "thread-seq".into(),
        agent_id: format!("writer-{writer}"),
        turn: 1,
        tool_call_id: None,
        payload: json!({"writer": writer, "index": index}),
        seq: None,
        timestamp: None,
    }
}

/// Runs `writers` concurrently against `handles` on a fresh run and checks the numbering.
async fn append_concurrently(
    handles: &[Store],
    run: &str,
    writers: &[Writer],
) -> Result<(), TestCaseError> {
    let mut tasks = tokio::task::JoinSet::new();
    for (number, w) in writers.iter().enumerate() {
        let store = handles[w.handle % handles.len()].with_durability(if w.sync {
            Durability::Sync
        } else {
            Durability::Async
        });
        let run = run.to_owned();
        let batches = w.batches.clone();
        tasks.spawn(async move {
            let mut index = 0;
            for size in batches {
                let events: Vec<NewEvent> = (index..index + size)
                    .map(|i| event(&run, number, i))
                    .collect();
                index += size;
                if size == 1 {
                    store
                        .append_event(events.into_iter().next().unwrap())
                        .await?;
                } else {
                    store.append_events(events).await?;
                }
                tokio::task::yield_now().await;
            }
            Ok::<(), weft_store::StoreError>(())
        });
    }
    while let Some(result) = tasks.join_next().await {
        let appended = result.unwrap();
        prop_assert!(appended.is_ok(), "an append failed: {:?}", appended);
    }
    for store in handles {
        store.flush().await.unwrap();
    }
    let logged = handles[0]
        .events(&EventQuery {
            run_id: Some(run.to_owned()),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    let expected: usize = writers
        .iter()
        .map(|w| w.batches.iter().sum::<usize>())
        .sum();
    let seqs: Vec<u64> = logged.iter().map(|e| e.seq).collect();
    prop_assert_eq!(seqs, (1..=expected as u64).collect::<Vec<_>>());
    // Each writer's events keep its order, and a batch is numbered without interleaving.
    for number in 0..writers.len() {
        let agent = format!("writer-{number}");
        let mine: Vec<u64> = logged
            .iter()
            .filter(|e| e.agent_id == agent)
            .map(|e| e.payload["index"].as_u64().unwrap())
            .collect();
        prop_assert_eq!(&mine, &(0..mine.len() as u64).collect::<Vec<_>>());
    }
    prop_assert_eq!(
        handles[0].last_event_seq(run).await.unwrap(),
        expected as u64
    );
    Ok(())
}

fn check(handles: &[Store], runtime: &tokio::runtime::Runtime) {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 12,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&prop::collection::vec(writer(), 2..8), |writers| {
            // A fresh run per case (shrinking replays cases on the same database).
            let run = format!("run-{}", fastrand::u64(..));
            runtime.block_on(append_concurrently(handles, &run, &writers))
        })
        .unwrap();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn sqlite_concurrent_writers_get_dense_run_seq() {
    let runtime = runtime();
    let harness = runtime.block_on(common::sqlite()).unwrap();
    // Two more handles on the same file: separate connections and writer tasks.
    let handles = runtime.block_on(async {
        let mut handles = vec![harness.store.clone()];
        for _ in 0..2 {
            handles.push(Store::open(&harness.url).await.unwrap());
        }
        handles
    });
    check(&handles, &runtime);
    drop(handles);
    runtime.block_on(harness.finish());
}

#[test]
fn postgres_concurrent_writers_get_dense_run_seq() {
    let runtime = runtime();
    let Some(harness) = runtime.block_on(common::postgres()) else {
        return;
    };
    let (url, schema) = harness.schema.clone().unwrap();
    let handles = runtime.block_on(async {
        let mut handles = vec![harness.store.clone()];
        for _ in 0..2 {
            handles.push(
                Store::open_postgres(PgOptions::new(url.clone()).schema(schema.clone()))
                    .await
                    .unwrap(),
            );
        }
        handles
    });
    check(&handles, &runtime);
    drop(handles);
    runtime.block_on(harness.finish());
}
