//! A thread's queue (Standard Agents SA-064/SA-065/SA-080): a message queued while a run of
//! the thread works is taken before its next model step, as a user message, once; queued
//! while the thread is idle, the next run takes it before its first step. A taken message
//! leaves the queue when the step that carries it is checkpointed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;

use serde_json::json;
use weft_runtime::event::EventKind;
use weft_runtime::spec::{AgentProgram, Program, RunSpec, ToolSpec};
use weft_runtime::{RunEnd, Runtime, ToolRegistry};
use weft_store::{Runs as _, Store, ThreadQueue as _};

async fn sqlite(dir: &Path) -> Store {
    Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await
        .unwrap()
}

/// A scripted model that appends one line (a tool taking `delay_ms`), then answers.
fn spec(dir: &Path, input: &str, delay_ms: u64) -> RunSpec {
    let responses = json!([
        {"toolCalls": [{"id": "call-1", "name": "append_line", "arguments": {"line": "a"}}]},
        {"text": "finished"},
        {"text": "again"},
        {"text": "and again"},
    ]);
    let script = dir.join("script.json");
    std::fs::write(&script, json!({"responses": responses}).to_string()).unwrap();
    let mut program = AgentProgram::new(format!("scripted-turns:{}", script.display()));
    program.tools = vec![ToolSpec {
        name: "append_line".into(),
        config: json!({"out": dir.join("out.txt"), "log": dir.join("log.txt"), "delay_ms": delay_ms}),
    }];
    RunSpec::new(input, Program::Agent(program))
}

/// The texts of the thread's conversation (its latest checkpoint), with the ids of queued
/// messages.
async fn conversation(store: &Store, thread: &str) -> Vec<(String, String)> {
    let latest = store.latest_checkpoint(thread).await.unwrap().unwrap();
    latest
        .checkpoint
        .state
        .messages()
        .map(|m| (m.id().to_owned(), m.text()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_while_a_run_works_is_taken_before_its_next_model_step() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = Runtime::new(store.clone()).with_tools(ToolRegistry::with_builtins());
    let mut handle = runtime
        .start(spec(dir.path(), "go", 300), true)
        .await
        .unwrap();
    let mut events = handle.take_events().unwrap();
    let run = handle.id().to_owned();
    let thread = store.run(&run).await.unwrap().unwrap().thread_id;
    // While the first step's tool runs, a message is queued on the thread.
    let mut queued = None;
    while let Some(event) = events.next().await {
        if matches!(event.kind, EventKind::ToolCallStart { .. }) && queued.is_none() {
            queued = Some(runtime.queue_message(&thread, "and say bye").await.unwrap());
        }
    }
    let queued = queued.unwrap();
    let outcome = handle.outcome().await.unwrap();
    assert!(
        matches!(outcome.end, RunEnd::Completed { .. }),
        "{:?}",
        outcome.end
    );
    let said = conversation(&store, &thread).await;
    let texts: Vec<&str> = said.iter().map(|(_, t)| t.as_str()).collect();
    let at = texts
        .iter()
        .position(|t| *t == "and say bye")
        .unwrap_or_else(|| panic!("{texts:?}"));
    assert_eq!(said[at].0, queued.id, "the queued message keeps its id");
    assert_eq!(
        texts[at + 1],
        "finished",
        "taken before the next model step: {texts:?}"
    );
    assert_eq!(
        texts.iter().filter(|t| **t == "and say bye").count(),
        1,
        "taken once"
    );
    assert!(
        store.queued(&thread).await.unwrap().is_empty(),
        "dequeued once checkpointed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_on_an_idle_thread_is_taken_by_its_next_run_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = Runtime::new(store.clone()).with_tools(ToolRegistry::with_builtins());
    let first = runtime
        .start(spec(dir.path(), "go", 0), false)
        .await
        .unwrap();
    let run = first.id().to_owned();
    first.outcome().await.unwrap();
    let thread = store.run(&run).await.unwrap().unwrap().thread_id;
    runtime
        .queue_message(&thread, "queued while idle")
        .await
        .unwrap();
    assert_eq!(store.queued(&thread).await.unwrap().len(), 1);
    let next = runtime
        .start_on(Some(&thread), spec(dir.path(), "next", 0), false)
        .await
        .unwrap();
    next.outcome().await.unwrap();
    let said = conversation(&store, &thread).await;
    let texts: Vec<&str> = said.iter().map(|(_, t)| t.as_str()).collect();
    let input = texts.iter().position(|t| *t == "next").unwrap();
    assert_eq!(texts[input + 1], "queued while idle", "{texts:?}");
    assert!(store.queued(&thread).await.unwrap().is_empty());
    assert!(matches!(
        runtime.queue_message("no-such-thread", "x").await,
        Err(weft_runtime::RunError::UnknownThread(_))
    ));
}

/// A process that checkpointed the step carrying a queued message and died before taking it
/// out of the queue: the next run finds the message still queued and already in the
/// conversation, so it does not add it again, and takes it out of the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_message_the_conversation_already_holds_is_not_taken_twice() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = Runtime::new(store.clone()).with_tools(ToolRegistry::with_builtins());
    let first = runtime
        .start(spec(dir.path(), "go", 0), false)
        .await
        .unwrap();
    let run = first.id().to_owned();
    first.outcome().await.unwrap();
    let thread = store.run(&run).await.unwrap().unwrap().thread_id;
    let queued = runtime.queue_message(&thread, "once only").await.unwrap();
    let second = runtime
        .start_on(Some(&thread), spec(dir.path(), "next", 0), false)
        .await
        .unwrap();
    second.outcome().await.unwrap();
    store.flush().await.unwrap();
    // The crash window: the queue row is back, as if the dequeue never happened.
    let db = rusqlite::Connection::open(dir.path().join("weft.db")).unwrap();
    db.execute(
        "INSERT INTO thread_queue (id, thread_id, text, created_at) VALUES (?1, ?2, ?3, ?4)",
        (&queued.id, &thread, &queued.text, &queued.created_at),
    )
    .unwrap();
    drop(db);
    let third = runtime
        .start_on(Some(&thread), spec(dir.path(), "and then", 0), false)
        .await
        .unwrap();
    third.outcome().await.unwrap();
    let said = conversation(&store, &thread).await;
    let held = said.iter().filter(|(id, _)| *id == queued.id).count();
    assert_eq!(held, 1, "{said:?}");
    assert!(
        store.queued(&thread).await.unwrap().is_empty(),
        "taken out of the queue"
    );
}
