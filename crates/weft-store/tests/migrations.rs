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
    EventLog, EventQuery, NewEvent, PgOptions, QueuedTool, Runs, SCHEMA_VERSION,
    ScheduledEffects as _, Store, StoreError, ThreadQueue as _, TokenScope, Tokens as _,
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

/// Regenerates the fixture: `cargo test -p weft-store --test migrations -- --ignored`, with a
/// build of schema 8 or older (since schema 11 the writer needs `checkpoint_items`).
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
        state.messages().next().map(|m| m.text()).as_deref(),
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
    // The version-1 fixture (with its checkpoint) brought to version 6.
    std::fs::copy(fixture(), &path).unwrap();
    let old = Store::open_sqlite_at_version(&path, 6)
        .await
        .unwrap()
        .with_durability(weft_store::Durability::Sync);
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

/// Schema 13 adds `scheduled_effects`: a version-12 database keeps its queue, and an effect
/// scheduled after the upgrade fires into that queue, after what waited there.
async fn check_scheduled_effects_after_upgrade(store: &Store) {
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    let call = QueuedTool {
        name: "remind".into(),
        arguments: json!({"about": "tea"}),
    };
    let effect = store.schedule_effect("t-12", &call, 5).await.unwrap();
    assert_eq!(
        store.scheduled_effects("t-12").await.unwrap(),
        std::slice::from_ref(&effect)
    );
    store.fire_effect(&effect.id).await.unwrap();
    let queued = store.queued("t-12").await.unwrap();
    let ids: Vec<&str> = queued.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(queued[0].text, "queued at version 12");
    assert_eq!(ids[1], effect.id);
    assert_eq!(queued[1].tool.as_ref(), Some(&call));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v12_database_is_upgraded_with_scheduled_effects() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v12.db");
    std::fs::copy(fixture(), &path).unwrap();
    let old = Store::open_sqlite_at_version(&path, 12)
        .await
        .unwrap()
        .with_durability(weft_store::Durability::Sync);
    assert_eq!(old.schema_version().await.unwrap(), 12);
    old.queue_message("t-12", "queued at version 12")
        .await
        .unwrap();
    assert!(
        old.scheduled_effects("t-12").await.is_err(),
        "no scheduled_effects table at version 12"
    );
    drop(old);
    let store = Store::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    check_scheduled_effects_after_upgrade(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v12_postgres_schema_is_upgraded_with_scheduled_effects() {
    let Some(url) = common::postgres_url() else {
        return;
    };
    let schema = common::fresh_schema();
    let old = Store::open_postgres(PgOptions::new(url.clone()).schema(schema.clone()))
        .await
        .unwrap();
    old.queue_message("t-12", "queued at version 12")
        .await
        .unwrap();
    drop(old);
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "SET search_path TO {schema};
             DROP TABLE scheduled_effects;
             DELETE FROM weft_schema_migrations WHERE version >= 13;"
        ))
        .await
        .unwrap();
    let store = Store::open_postgres(PgOptions::new(url.clone()).schema(schema.clone()))
        .await
        .unwrap();
    check_scheduled_effects_after_upgrade(&store).await;
    drop(store);
    weft_store::drop_schema(&url, &schema).await.unwrap();
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

/// The thread of `tests/fixtures/weft-v8.db`: four checkpointed steps of W3's workload
/// (`add` calls), written by the version-8 store (history in `checkpoint_messages`).
const V8_THREAD: &str = "81aab42b-0b23-437e-b1c6-ace57c37a527";

fn v8_fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/weft-v8.db")
}

/// What the version-8 fixture holds, read through a migrated store; then the thread goes on
/// (a new step saved on top of the loaded state) and reads back whole.
async fn check_v8_thread(store: &Store) {
    let latest = store.latest_checkpoint(V8_THREAD).await.unwrap().unwrap();
    let state = &latest.checkpoint.state;
    assert_eq!(latest.summary.step, 4);
    assert_eq!(state.message_count(), 9);
    assert_eq!(state.session_id(), Some(V8_THREAD));
    let first = state.messages().next().unwrap();
    assert_eq!(first.text(), "start");
    assert_eq!(first.id(), "97ddfd49-8354-4abd-b7ac-8e44b52b6424");
    assert_eq!(
        first.timestamp(),
        "2026-11-24T08:38:25.323922910Z"
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap()
    );
    let message_7 = state.message(7);
    let Some(Message::Assistant(last_call)) = message_7.as_deref() else {
        panic!("message 7 is the step's assistant message");
    };
    assert_eq!(last_call.tool_calls[0].arguments, json!({"a": 3, "b": 1}));
    let completed = &latest.checkpoint.completed_tool_calls;
    assert_eq!(completed.len(), 1);
    assert_eq!(
        (completed[0].tool_call_id.as_str(), &completed[0].result),
        ("call_3", &json!(4))
    );
    let second = store.checkpoint_at(V8_THREAD, 2).await.unwrap().unwrap();
    assert_eq!(second.checkpoint.state.message_count(), 5);

    // Resume: the next step extends the loaded state and is stored in the new layout.
    let mut next = latest.checkpoint.clone();
    next.metadata.checkpoint_id = "after-migration".into();
    next.state = state
        .with_message(Message::user("after the migration"))
        .with_step(state.step() + 1);
    next.completed_tool_calls = Vec::new();
    store
        .with_durability(weft_store::Durability::Sync)
        .save_checkpoint(V8_THREAD, &next)
        .await
        .unwrap();
    let resumed = store.latest_checkpoint(V8_THREAD).await.unwrap().unwrap();
    assert_eq!(resumed.summary.id, "after-migration");
    assert!(resumed.checkpoint.state.same_content(&next.state));
    assert_eq!(resumed.checkpoint.state.message_count(), 10);
    assert_eq!(store.gc().await.unwrap().history_rows, 0);
}

/// Schema 9 moves the version-8 history (`checkpoint_messages`) into `checkpoint_items`: a
/// file written by the version-8 store opens, reads back the same, and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v8_file_moves_its_history_to_compact_rows_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v8.db");
    std::fs::copy(v8_fixture(), &path).unwrap();
    let store = Store::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    check_v8_thread(&store).await;
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let old: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'checkpoint_messages'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(old, 0, "the old table is gone");
    let rows: i64 = conn
        .query_row("SELECT COUNT(*) FROM checkpoint_items", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 10);
}

/// The same migration on PostgreSQL: a schema put back to version 8 (the old table, the
/// fixture's rows) is migrated when the store opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v8_postgres_schema_moves_its_history_to_compact_rows() {
    let Some(url) = common::postgres_url() else {
        return;
    };
    let schema = common::fresh_schema();
    drop(
        Store::open_postgres(PgOptions::new(url.clone()).schema(schema.clone()))
            .await
            .unwrap(),
    );
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "SET search_path TO {schema};
             DROP TABLE checkpoint_items; DROP TABLE checkpoint_threads;
             ALTER TABLE thread_queue DROP COLUMN tool; DROP TABLE scheduled_effects;
             DELETE FROM weft_schema_migrations WHERE version >= 11;
             CREATE TABLE checkpoint_messages (thread_id TEXT NOT NULL, seq BIGINT NOT NULL,
               kind TEXT NOT NULL, item_key TEXT NOT NULL, body TEXT NOT NULL,
               PRIMARY KEY (thread_id, seq));"
        ))
        .await
        .unwrap();
    let fixture = rusqlite::Connection::open(v8_fixture()).unwrap();
    let mut items = fixture
        .prepare("SELECT thread_id, seq, kind, item_key, body FROM checkpoint_messages")
        .unwrap();
    let items = items
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    for (thread, seq, kind, key, body) in &items {
        client
            .execute(
                "INSERT INTO checkpoint_messages VALUES ($1, $2, $3, $4, $5)",
                &[thread, seq, kind, key, body],
            )
            .await
            .unwrap();
    }
    let mut checkpoints = fixture
        .prepare(
            "SELECT id, thread_id, step, timestamp, state_blob, pending_tools, completed_tools, \
             agent_id, agent_step, message_count, min_message_seq FROM checkpoints",
        )
        .unwrap();
    let checkpoints = checkpoints
        .query_map([], |r| {
            Ok((
                [r.get::<_, String>(0)?, r.get(1)?],
                r.get::<_, i64>(2)?,
                [
                    r.get::<_, String>(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                ],
                [r.get::<_, i64>(8)?, r.get(9)?, r.get(10)?],
            ))
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    for ([id, thread], step, [time, blob, pending, completed, agent], [agent_step, count, min]) in
        &checkpoints
    {
        client
            .execute(
                "INSERT INTO checkpoints (id, thread_id, step, timestamp, state_blob, pending_tools, \
                 completed_tools, agent_id, agent_step, message_count, min_message_seq) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                &[id, thread, step, time, blob, pending, completed, agent, agent_step, count, min],
            )
            .await
            .unwrap();
    }
    let store = Store::open_postgres(PgOptions::new(url.clone()).schema(schema.clone()))
        .await
        .unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    check_v8_thread(&store).await;
    drop(store);
    weft_store::drop_schema(&url, &schema).await.unwrap();
}

/// A column of a table of a SQLite file: (name, declared type, NOT NULL, default, primary key).
fn columns(
    conn: &rusqlite::Connection,
    table: &str,
) -> Vec<(String, String, bool, Option<String>, bool)> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('{table}')"
        ))
        .unwrap();
    stmt.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get::<_, i64>(2)? == 1,
            r.get(3)?,
            r.get::<_, i64>(4)? > 0,
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// The indexes of a table, each as (unique, [(column, descending)]), origin `u` (a UNIQUE
/// constraint) and `c` (CREATE INDEX) alike; the primary key's own index is left out.
fn indexes(conn: &rusqlite::Connection, table: &str) -> Vec<(bool, Vec<(String, bool)>)> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT name, \"unique\" FROM pragma_index_list('{table}') WHERE origin != 'pk'"
        ))
        .unwrap();
    let list: Vec<(String, bool)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? == 1)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    list.into_iter()
        .map(|(name, unique)| {
            let mut cols = conn
                .prepare(&format!("SELECT name, \"desc\" FROM pragma_index_xinfo('{name}') WHERE key = 1 ORDER BY seqno"))
                .unwrap();
            let cols = cols
                .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? == 1)))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            (unique, cols)
        })
        .collect()
}

fn foreign_keys(conn: &rusqlite::Connection, table: &str) -> Vec<(String, String, String)> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT \"from\", \"table\", \"to\" FROM pragma_foreign_key_list('{table}')"
        ))
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn has_column(
    cols: &[(String, String, bool, Option<String>, bool)],
    name: &str,
    ty: &str,
    not_null: bool,
) -> bool {
    cols.iter()
        .any(|(n, t, nn, _, _)| n == name && t.eq_ignore_ascii_case(ty) && *nn == not_null)
}

/// The runtime spec's storage layout (§8.1–§8.4: RT-089..RT-092) read back from the schema of a
/// freshly migrated database file, not from the migration source: columns, types, NOT NULL,
/// primary keys, UNIQUE constraints, indexes (with their order) and foreign keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_sqlite_database_has_the_spec_tables_constraints_and_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db");
    drop(
        Store::open(&format!("sqlite:{}", path.display()))
            .await
            .unwrap(),
    );
    let conn = rusqlite::Connection::open(&path).unwrap();

    // §8.1 checkpoints
    let c = columns(&conn, "checkpoints");
    assert!(
        c.iter()
            .any(|(n, t, _, _, pk)| n == "id" && t == "TEXT" && *pk),
        "{c:?}"
    );
    for (name, ty, not_null) in [
        ("thread_id", "TEXT", true),
        ("step", "INTEGER", true),
        ("timestamp", "TEXT", true),
        ("state_blob", "TEXT", true),
        ("pending_tools", "TEXT", false),
        ("completed_tools", "TEXT", false),
        ("usage_tokens", "INTEGER", false),
        ("usage_cost", "REAL", false),
    ] {
        assert!(
            has_column(&c, name, ty, not_null),
            "checkpoints.{name}: {c:?}"
        );
    }
    let ix = indexes(&conn, "checkpoints");
    let key = |cols: &[(&str, bool)]| {
        cols.iter()
            .map(|(c, d)| ((*c).to_owned(), *d))
            .collect::<Vec<_>>()
    };
    assert!(
        ix.contains(&(true, key(&[("thread_id", false), ("step", false)]))),
        "UNIQUE(thread_id, step): {ix:?}"
    );
    assert!(
        ix.contains(&(false, key(&[("thread_id", false), ("step", true)]))),
        "index (thread_id, step DESC): {ix:?}"
    );

    // §8.2 events: autoincrement id, the rest NOT NULL
    let e = columns(&conn, "events");
    assert!(
        e.iter()
            .any(|(n, t, _, _, pk)| n == "id" && t == "INTEGER" && *pk),
        "{e:?}"
    );
    for name in ["thread_id", "event_type", "timestamp", "payload"] {
        assert!(has_column(&e, name, "TEXT", true), "events.{name}: {e:?}");
    }
    let sql: String = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(sql.contains("AUTOINCREMENT"), "{sql}");

    // §8.3 artifacts
    let a = columns(&conn, "artifacts");
    for (name, ty, not_null) in [
        ("run_id", "TEXT", true),
        ("agent_id", "TEXT", true),
        ("checkpoint_id", "TEXT", false),
        ("artifact_type", "TEXT", true),
        ("path", "TEXT", false),
        ("content", "TEXT", false),
        ("metadata", "TEXT", false),
        ("created_at", "TEXT", true),
    ] {
        assert!(
            has_column(&a, name, ty, not_null),
            "artifacts.{name}: {a:?}"
        );
    }
    assert!(a.iter().any(|(n, _, _, _, pk)| n == "id" && *pk));
    assert_eq!(
        foreign_keys(&conn, "artifacts"),
        [(
            "checkpoint_id".to_owned(),
            "checkpoints".to_owned(),
            "id".to_owned()
        )]
    );
    let ix = indexes(&conn, "artifacts");
    assert!(ix.contains(&(false, key(&[("run_id", false)]))), "{ix:?}");
    assert!(ix.contains(&(false, key(&[("agent_id", false)]))), "{ix:?}");

    // §8.4 agent_lineage: self-referencing parent, usage columns defaulting to 0
    let l = columns(&conn, "agent_lineage");
    for (name, ty, not_null) in [
        ("run_id", "TEXT", true),
        ("parent_agent_id", "TEXT", false),
        ("role", "TEXT", true),
        ("status", "TEXT", true),
        ("depth", "INTEGER", true),
        ("created_at", "TEXT", true),
        ("completed_at", "TEXT", false),
    ] {
        assert!(
            has_column(&l, name, ty, not_null),
            "agent_lineage.{name}: {l:?}"
        );
    }
    for name in ["usage_input_tokens", "usage_output_tokens", "usage_cost"] {
        let default = l
            .iter()
            .find(|(n, ..)| n == name)
            .and_then(|(_, _, _, d, _)| d.clone());
        assert_eq!(default.as_deref(), Some("0"), "agent_lineage.{name}: {l:?}");
    }
    assert_eq!(
        foreign_keys(&conn, "agent_lineage"),
        [(
            "parent_agent_id".to_owned(),
            "agent_lineage".to_owned(),
            "id".to_owned()
        )]
    );
}

/// What a checkpoint row holds on disk (issue 19's W3): no empty lists, the state's UUID
/// in 23 characters, a completed call that took no time and needed no approval as its id
/// alone — and every one of them reads back as it was saved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_rows_leave_out_what_reads_back_anyway() {
    use weft_provider::{
        AssistantMessage, MessageOptions, ToolCall, ToolResult, ToolResultMessage,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let store = Store::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let plain = sample_checkpoint();
    store.save_checkpoint("t", &plain).await.unwrap();

    let call = ToolCall::new("c1", "add", json!({"a": 1}));
    let asked = AssistantMessage::new(vec![], vec![call], MessageOptions::default()).unwrap();
    let answered = ToolResultMessage::new(vec![ToolResult {
        tool_call_id: "c1".into(),
        result: json!(2),
        is_error: false,
    }]);
    let mut with_call = sample_checkpoint();
    with_call.metadata.checkpoint_id = "fixture-checkpoint-2".into();
    with_call.state = with_call
        .state
        .with_message(Message::Assistant(asked))
        .with_message(Message::ToolResult(answered));
    with_call.completed_tool_calls = vec![weft_provider::ToolExecution {
        tool_name: "add".into(),
        tool_call_id: "c1".into(),
        arguments: json!({"a": 1}),
        result: json!(2),
        is_error: false,
        duration: 0,
        approved: None,
    }];
    store.save_checkpoint("t", &with_call).await.unwrap();
    store.flush().await.unwrap();

    let conn = rusqlite::Connection::open(&path).unwrap();
    let rows: Vec<(String, Option<String>, Option<String>)> = conn
        .prepare("SELECT state_blob, pending_tools, completed_tools FROM checkpoints ORDER BY step")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let state_id = plain.state.id();
    assert!(!rows[0].0.contains(state_id), "{}", rows[0].0);
    assert!(rows[0].0.contains("\"i\":\"~"), "{}", rows[0].0);
    assert_eq!((rows[0].1.as_deref(), rows[0].2.as_deref()), (None, None));
    assert_eq!(rows[1].1, None);
    assert_eq!(rows[1].2.as_deref(), Some(r#"["c1"]"#));

    // Each reads back as it was saved.
    let listed = store.list_checkpoints("t").await.unwrap();
    assert_eq!(listed.len(), 2);
    let first = store
        .checkpoint_at("t", listed[0].step)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.checkpoint.state.id(), state_id);
    assert!(first.checkpoint.pending_tool_calls.is_empty());
    assert!(first.checkpoint.completed_tool_calls.is_empty());
    let second = store.latest_checkpoint("t").await.unwrap().unwrap();
    assert_eq!(
        second.checkpoint.completed_tool_calls,
        with_call.completed_tool_calls
    );
    assert_eq!(second.checkpoint.state.id(), with_call.state.id());

    // A row the previous release wrote (the state's id itself, empty lists as `[]`) reads
    // as before.
    let blob: serde_json::Value = serde_json::from_str(&rows[0].0).unwrap();
    let encoded = blob["s"]["i"].as_str().unwrap();
    conn.execute(
        "UPDATE checkpoints SET state_blob = replace(state_blob, ?1, ?2), pending_tools = '[]', \
         completed_tools = '[]' WHERE id = 'fixture-checkpoint'",
        [encoded, state_id],
    )
    .unwrap();
    drop(store);
    let store = Store::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let old = store
        .checkpoint_at("t", listed[0].step)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(old.checkpoint.state.id(), state_id);
    assert!(old.checkpoint.pending_tool_calls.is_empty());
}
