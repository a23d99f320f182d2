//! The runtime profile's grace period in time (runtime spec §5.2, `graceTimeoutMs`): a session
//! under tokio's paused clock, so the bound is checked without waiting for it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;

use serde_json::{Value, json};
use weft_standard::{Project, SessionOptions, SessionStatus, run_session};

/// A project whose agent `a` under `[runtime]` (3 turns, 1 of grace, 5 s of grace time)
/// answers with `responses`.
fn project(dir: &Path, responses: Value) -> Project {
    for sub in ["agents", "prompts", "tools"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(
        dir.join("weft.toml"),
        "model = \"scripted:script.json\"\n[runtime]\nmaxTurns = 3\ngraceTurns = 1\ngraceTimeoutMs = 5000\n\
         [runtime.policy]\nmode = \"batch\"\n",
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
    std::fs::write(
        dir.join("script.json"),
        json!({"responses": responses}).to_string(),
    )
    .unwrap();
    Project::load(dir).unwrap()
}

fn note(id: &str) -> Value {
    json!({"toolCalls": [{"id": id, "name": "note", "arguments": {}}]})
}

fn complete_after(delay_ms: u64) -> Value {
    json!({"toolCalls": [{"id": "c", "name": "complete_task", "arguments": {"summary": "done"}}],
        "delayMs": delay_ms})
}

#[tokio::test(start_paused = true)]
async fn a_grace_period_past_grace_timeout_ms_ends_in_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(
        dir.path(),
        json!([note("n1"), note("n2"), complete_after(10_000)]),
    );
    let started = tokio::time::Instant::now();
    let outcome = run_session(&p, "a", "go", &SessionOptions::new(dir.path()))
        .await
        .unwrap();
    assert_eq!(outcome.status, SessionStatus::Failed, "{}", outcome.message);
    assert!(
        outcome.message.contains("graceTimeoutMs (5000 ms)"),
        "{}",
        outcome.message
    );
    // Ended at the bound, not when the model would have answered.
    assert_eq!(started.elapsed().as_millis(), 5000);
}

#[tokio::test(start_paused = true)]
async fn complete_task_within_grace_timeout_ms_ends_done() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(
        dir.path(),
        json!([note("n1"), note("n2"), complete_after(4_000)]),
    );
    let outcome = run_session(&p, "a", "go", &SessionOptions::new(dir.path()))
        .await
        .unwrap();
    assert_eq!(
        outcome.status,
        SessionStatus::Completed,
        "{}",
        outcome.message
    );
    assert_eq!(outcome.message, "done");
}

/// A run stopped after its `complete_task` step was checkpointed (before the run ended): the
/// resume ends it with that summary, asking the model nothing.
#[tokio::test]
async fn a_resume_after_an_accepted_complete_task_ends_done_without_a_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), json!([{"text": "asked again"}]));
    let now = "2026-11-24T00:00:00Z";
    let messages: Vec<weft_provider::Message> = serde_json::from_value(json!([
        {"type": "user", "id": "u1", "timestamp": now, "content": [{"type": "text", "text": "go"}]},
        {"type": "assistant", "id": "a1", "timestamp": now, "content": [],
         "toolCalls": [{"toolCallId": "c1", "toolName": "complete_task",
                        "arguments": {"summary": "done earlier", "artifacts": []}}]},
        {"type": "tool_result", "id": "t1", "timestamp": now,
         "results": [{"toolCallId": "c1", "result": {"status": "completed"}, "isError": false}]}
    ]))
    .unwrap();
    let mut options = SessionOptions::new(dir.path());
    options.initial_state = weft_agent::AgentState::initial()
        .with_messages(messages)
        .with_step(1);
    let outcome = run_session(&p, "a", "", &options).await.unwrap();
    assert_eq!(
        outcome.status,
        SessionStatus::Completed,
        "{}",
        outcome.message
    );
    assert_eq!(outcome.message, "done earlier");
}
