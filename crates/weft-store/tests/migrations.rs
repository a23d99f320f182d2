//! Schema versions: the released version-1 fixture keeps opening (and is upgraded), a newer
//! database is refused with a clear message.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::PathBuf;

use serde_json::json;
use weft_agent::AgentState;
use weft_agent::checkpoint::{Checkpoint, CheckpointMetadata};
use weft_provider::Message;
use weft_store::{
    EventLog, EventQuery, NewEvent, PgOptions, Runs, SCHEMA_VERSION, Store, StoreError, TokenScope,
    Tokens as _,
};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/weft-v1.db")
}

fn sample_checkpoint() -> Checkpoint {
    let state = AgentState::initial()
        .with_message(Message::user("fixture input"))
        .with_metadata("sopPhase", json!("plan"))
        .with_step(1);
    Checkpoint {
        metadata: CheckpointMetadata {
            session_id: "fixture-thread".into(),
            checkpoint_id: "fixture-checkpoint".into(),
            timestamp: "2026-11-22T00:00:00Z".parse().unwrap(),
            step: 1,
            agent_id: "fixture-agent".into(),
        },
        state: state.clone(),
        pending_tool_calls: Vec::new(),
        completed_tool_calls: Vec::new(),
        usage: None,
    }
}

/// Regenerates the fixture: `cargo test -p weft-store --test migrations -- --ignored`.
#[tokio::test]
#[ignore = "writes tests/fixtures/weft-v1.db"]
async fn generate_v1_fixture() {
    let path = fixture();
    let _ = std::fs::remove_file(&path);
    let store = Store::open_sqlite_at_version(&path, 1)
        .await
        .unwrap()
        .with_durability(weft_store::Durability::Sync);
    store
        .save_checkpoint("fixture-thread", &sample_checkpoint())
        .await
        .unwrap();
    store
        .append_event(NewEvent {
            event_type: "turn_start".into(),
            run_id: "fixture-run".into(),
            thread_id: "fixture-thread".into(),
            agent_id: "fixture-agent".into(),
            turn: 1,
            tool_call_id: None,
            payload: json!({}),
            seq: None,
            timestamp: None,
        })
        .await
        .unwrap();
    store.flush().await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), 1);
    drop(store);
    // Fold the WAL into the file so the fixture is one file.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v1_fixture_keeps_opening_and_is_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("old.db");
    std::fs::copy(fixture(), &copy).unwrap();
    let store = Store::open(&format!("sqlite:{}", copy.display()))
        .await
        .unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    let cp = store
        .latest_checkpoint("fixture-thread")
        .await
        .unwrap()
        .unwrap();
    let state = cp.checkpoint.state;
    // The old state blob (format 2 with `version` and `step`) still decodes.
    assert_eq!(state.step(), 1);
    assert_eq!(state.message_count(), 1);
    assert_eq!(
        state.messages().next().map(Message::text).as_deref(),
        Some("fixture input")
    );
    assert_eq!(cp.sop_phase, Some(json!("plan")));
    assert_eq!(cp.summary.id, "fixture-checkpoint");
    let events = store
        .events(&EventQuery {
            run_id: Some("fixture-run".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(events.len(), 1);
    // Version-2 columns work on the upgraded file.
    assert!(store.runs(None).await.unwrap().is_empty());
    // So does the version-7 table.
    assert!(store.tokens().await.unwrap().is_empty());
}

/// Schema 7 adds `api_tokens` to a version-6 database: what it held stays, tokens work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v6_database_is_upgraded_with_api_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v6.db");
    let old = Store::open_sqlite_at_version(&path, 6)
        .await
        .unwrap()
        .with_durability(weft_store::Durability::Sync);
    old.save_checkpoint("fixture-thread", &sample_checkpoint())
        .await
        .unwrap();
    assert_eq!(old.schema_version().await.unwrap(), 6);
    assert!(
        old.tokens().await.is_err(),
        "no api_tokens table at version 6"
    );
    drop(old);
    let store = Store::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    assert!(
        store
            .latest_checkpoint("fixture-thread")
            .await
            .unwrap()
            .is_some()
    );
    let (token, secret) = store.create_token("ci", TokenScope::Read).await.unwrap();
    let checked = store.verify_token(secret.expose()).await.unwrap().unwrap();
    assert_eq!((checked.id, checked.scope), (token.id, TokenScope::Read));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_is_idempotent_and_the_default_path_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = weft_store::default_sqlite_path(dir.path());
    assert!(path.ends_with(".weft/weft.db"));
    let url = format!("sqlite:{}", path.display());
    drop(Store::open(&url).await.unwrap());
    assert!(path.exists());
    let store = Store::open(&url).await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    let mode: String = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_sqlite_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    drop(
        Store::open(&format!("sqlite:{}", path.display()))
            .await
            .unwrap(),
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "INSERT INTO weft_schema_migrations VALUES (99, 'future', 'x')",
        [],
    )
    .unwrap();
    drop(conn);
    let error = Store::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        StoreError::SchemaTooNew {
            found: 99,
            supported: SCHEMA_VERSION
        }
    );
    assert!(error.to_string().contains("newer"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_postgres_schema_is_refused() {
    let Some(url) = common::postgres_url() else {
        return;
    };
    let schema = common::fresh_schema();
    let store = Store::open_postgres(PgOptions::new(url.clone()).schema(schema.clone()))
        .await
        .unwrap();
    drop(store);
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "INSERT INTO {schema}.weft_schema_migrations VALUES (99, 'future', 'x')"
        ))
        .await
        .unwrap();
    let error = Store::open_postgres(PgOptions::new(url.clone()).schema(schema.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::SchemaTooNew { found: 99, .. }),
        "{error}"
    );
    weft_store::drop_schema(&url, &schema).await.unwrap();
}

/// An idle SQLite store leaves no WAL behind: the WAL holds whole pages per commit (its size
/// follows the number of commits, not the data), so once the writer is idle the checkpointer
/// folds it back into the database and truncates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_store_truncates_its_wal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let store = Store::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let mut state = AgentState::initial();
    for i in 0..50 {
        state = state
            .with_message(Message::user(format!("message {i}")))
            .with_step(i + 1);
        let mut checkpoint = sample_checkpoint();
        checkpoint.metadata.checkpoint_id = format!("checkpoint-{i}");
        checkpoint.state = state.clone();
        store
            .save_checkpoint("idle-thread", &checkpoint)
            .await
            .unwrap();
    }
    store.flush().await.unwrap();
    let wal = dir.path().join("weft.db-wal");
    let wal_len = || std::fs::metadata(&wal).map_or(0, |m| m.len());
    assert!(wal_len() > 0, "the commits went to the WAL first");
    // Bounded wait (the checkpointer runs a few hundred milliseconds after the last commit).
    for _ in 0..100 {
        if wal_len() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(wal_len(), 0, "the idle store's WAL was truncated");
    // Everything is in the database file and reads back.
    let latest = store
        .latest_checkpoint("idle-thread")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.checkpoint.state.message_count(), 50);
    assert_eq!(latest.checkpoint.state.step(), 50);
}
