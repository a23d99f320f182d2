//! Property: checkpoints of generated states load back equal from the SQL store, on SQLite
//! and PostgreSQL. The states fork (each is derived from a random earlier one) and replace
//! their history (`with_context`), so the store's incremental writing of what a step added
//! (`AgentState::extends`) is exercised on every shape of lineage.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

#[path = "../../weft-agent/tests/common/states.rs"]
mod states;

use proptest::prelude::*;
use weft_agent::AgentState;
use weft_agent::checkpoint::{Checkpoint, CheckpointStore};
use weft_store::{Durability, Store, StoreOptions, StoreUrl};

/// A tree of states and a checkpoint of each, in the order they are saved.
fn lineage() -> impl Strategy<Value = Vec<Checkpoint>> {
    prop::collection::vec((any::<prop::sample::Index>(), states::op()), 1..12).prop_flat_map(
        |steps| {
            let mut tree = vec![AgentState::initial()];
            for (parent, op) in &steps {
                let next = states::apply(&tree[parent.index(tree.len())], op);
                tree.push(next);
            }
            tree.into_iter()
                .skip(1)
                .map(|state| states::checkpoint_of("thread-p", state))
                .collect::<Vec<_>>()
        },
    )
}

async fn save_and_load(
    store: &Store,
    thread: &str,
    checkpoints: &[Checkpoint],
) -> Result<(), TestCaseError> {
    let mut saved = Vec::new();
    for checkpoint in checkpoints {
        let mut checkpoint = checkpoint.clone();
        // Checkpoint ids are unique (UUIDs) across the database.
        checkpoint.metadata.session_id = thread.to_owned();
        checkpoint.metadata.checkpoint_id = weft_store::new_id();
        store.save_checkpoint(thread, &checkpoint).await.unwrap();
        saved.push(checkpoint);
    }
    // Each one by its position, the latest, and through the `CheckpointStore` interface.
    for (step, expected) in saved.iter().enumerate() {
        let loaded = store
            .checkpoint_at(thread, step as u64 + 1)
            .await
            .unwrap()
            .unwrap();
        prop_assert_eq!(
            &loaded.checkpoint.state,
            &expected.state,
            "checkpoint {}",
            step + 1
        );
        prop_assert_eq!(&loaded.checkpoint, expected, "checkpoint {}", step + 1);
    }
    let latest = CheckpointStore::load(store, thread).await.unwrap().unwrap();
    prop_assert_eq!(Some(&latest), saved.last());
    Ok(())
}

fn check(store: &Store, runtime: &tokio::runtime::Runtime) {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&lineage(), |checkpoints| {
            let thread = format!("thread-{}", fastrand::u64(..));
            runtime.block_on(save_and_load(store, &thread, &checkpoints))
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

/// The store at `url` keeping checkpoint payloads as given (redaction is tested elsewhere;
/// here a generated string that looks like a secret must not count as a difference).
async fn unredacted(url: &str, schema: Option<String>) -> Store {
    Store::open_with(
        &StoreUrl::parse(url).unwrap(),
        StoreOptions {
            keep_checkpoint_secrets: true,
            postgres_schema: schema,
            ..StoreOptions::default()
        },
    )
    .await
    .unwrap()
    // A failed save is an error here, not a log line.
    .with_durability(Durability::Sync)
}

#[test]
fn sqlite_generated_checkpoints_load_back_equal() {
    let runtime = runtime();
    let harness = runtime.block_on(common::sqlite()).unwrap();
    let store = runtime.block_on(unredacted(&harness.url, None));
    check(&store, &runtime);
    drop(store);
    runtime.block_on(harness.finish());
}

#[test]
fn postgres_generated_checkpoints_load_back_equal() {
    let runtime = runtime();
    let Some(harness) = runtime.block_on(common::postgres()) else {
        return;
    };
    let (url, schema) = harness.schema.clone().unwrap();
    let store = runtime.block_on(unredacted(&url, Some(schema)));
    check(&store, &runtime);
    drop(store);
    runtime.block_on(harness.finish());
}
