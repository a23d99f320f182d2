//! Runs started under a run id chosen beforehand (`Runtime::start_on_as`, for runs an API
//! queues), and ThreadProtocol import (`weft_runtime::import`): an exported thread imported
//! back holds the same conversation and goes on like any thread; an invalid document is
//! refused with the validator's problems. `Store::delete_thread` removes a thread whole.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;

use serde_json::json;
use weft_runtime::import::{ImportError, import_thread};
use weft_runtime::spec::{AgentProgram, Program, RunSpec};
use weft_runtime::transcript::Transcript;
use weft_runtime::{RunError, Runtime};
use weft_store::{Runs as _, Store, ThreadRecord, Threads as _};

async fn sqlite(dir: &Path) -> Store {
    Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await
        .unwrap()
}

fn spec(dir: &Path, input: &str) -> RunSpec {
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [{"text": "first answer"}, {"text": "second answer"}]}).to_string(),
    )
    .unwrap();
    RunSpec::new(
        input,
        Program::Agent(AgentProgram::new(format!(
            "scripted-turns:{}",
            script.display()
        ))),
    )
}

fn said(transcript: &Transcript) -> Vec<String> {
    transcript
        .lines(None)
        .0
        .iter()
        .map(|l| {
            serde_json::to_value(l).unwrap()["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_starts_under_the_id_chosen_for_it_and_an_id_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = Runtime::new(store.clone());
    store.put_thread(&ThreadRecord::new("t1")).await.unwrap();
    let handle = runtime
        .start_on_as(
            "chosen-run".into(),
            Some("t1"),
            spec(dir.path(), "hi"),
            false,
        )
        .await
        .unwrap();
    assert_eq!(handle.id(), "chosen-run");
    let outcome = handle.outcome().await.unwrap();
    assert_eq!(outcome.exit_code(), 0);
    let run = store.run("chosen-run").await.unwrap().unwrap();
    assert_eq!(run.thread_id, "t1");
    let again = runtime
        .start_on_as(
            "chosen-run".into(),
            Some("t1"),
            spec(dir.path(), "hi"),
            false,
        )
        .await;
    assert!(matches!(again, Err(RunError::Spec { .. })), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_thread_imports_back_with_its_conversation_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = Runtime::new(store.clone());
    let handle = runtime
        .start(spec(dir.path(), "hello"), false)
        .await
        .unwrap();
    let run_id = handle.id().to_owned();
    handle.outcome().await.unwrap();
    let thread = store.run(&run_id).await.unwrap().unwrap().thread_id;
    let original = Transcript::load(&store, &thread, None).await.unwrap();
    let exported = original.to_thread().to_value().unwrap();

    let imported = import_thread(&store, &exported).await.unwrap();
    assert_ne!(imported.thread_id, thread);
    assert_eq!(imported.source_thread_id, thread);
    assert_eq!(imported.messages, 2);
    let record = store.thread(&imported.thread_id).await.unwrap().unwrap();
    assert_eq!(record.metadata["importedFrom"]["threadId"], thread.as_str());
    let copy = Transcript::load(&store, &imported.thread_id, None)
        .await
        .unwrap();
    assert_eq!(said(&copy), ["hello", "first answer"]);
    assert_eq!(said(&copy), said(&original));

    // It goes on like any thread: the model sees the imported conversation.
    let next = runtime
        .start_on(Some(&imported.thread_id), spec(dir.path(), "more"), false)
        .await
        .unwrap();
    assert_eq!(next.outcome().await.unwrap().exit_code(), 0);
    let after = Transcript::load(&store, &imported.thread_id, None)
        .await
        .unwrap();
    assert_eq!(
        said(&after),
        ["hello", "first answer", "more", "second answer"]
    );

    // Deleting the original removes it with its run; the import stays.
    assert!(store.delete_thread(&thread).await.unwrap());
    assert!(store.thread(&thread).await.unwrap().is_none());
    assert!(store.run(&run_id).await.unwrap().is_none());
    assert!(store.list_checkpoints(&thread).await.unwrap().is_empty());
    assert!(!store.delete_thread(&thread).await.unwrap());
    assert!(store.thread(&imported.thread_id).await.unwrap().is_some());
}

#[tokio::test]
async fn an_invalid_thread_is_refused_with_its_problems() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let refused = import_thread(&store, &json!({"thread_id": "x", "turns": 3})).await;
    match refused {
        Err(ImportError::Invalid(problems)) => assert!(!problems.is_empty()),
        other => panic!("not refused: {other:?}"),
    }
    assert!(store.threads().await.unwrap().is_empty());
}
