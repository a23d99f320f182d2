//! Durable execution in-process: weft-agent checkpointing into the store, the uncertain-call
//! rule, and redaction of a secret passed as a tool argument (events, ledger, checkpoints).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;

use serde_json::{Value, json};
use weft_agent::checkpoint::{CheckpointMode, CheckpointStore};
use weft_agent::{AgentOptions, AgentState, agent};
use weft_provider::Tool;
use weft_provider::adapters::scripted::{self, Script, ScriptedResponse};
use weft_runtime::spec::{AgentProgram, Program, RunSpec, ToolSpec};
use weft_runtime::{ResumeOptions, RunEnd, RunOutcome, Runtime, ToolRegistry};
use weft_store::{
    Durability, EventLog, EventQuery, RunStatus, Runs, Store, ToolCallRecord, ToolCallStatus,
    ToolLedger, now_string,
};

async fn sqlite(dir: &Path) -> Store {
    Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_agent_checkpoints_into_the_store_and_restores() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let add = Tool::new(
        "add",
        "adds",
        json!({"type": "object"}),
        |a: Value, _c| async move {
            Ok(json!(
                a["a"].as_i64().unwrap_or(0) + a["b"].as_i64().unwrap_or(0)
            ))
        },
    );
    let model = scripted::model(Script {
        fresh_ids: false,
        responses: vec![
            ScriptedResponse::tool_call("c1", "add", json!({"a": 2, "b": 3})),
            ScriptedResponse::text("5"),
            ScriptedResponse::text("again 5"),
        ],
    });
    let calculator = agent(
        AgentOptions::new(model)
            .tool(add)
            .checkpoints(store.clone())
            .checkpoint_mode(CheckpointMode::Sync)
            .session_id("session-1"),
    )
    .unwrap();
    let result = calculator
        .generate("2 + 3?", &AgentState::initial())
        .await
        .unwrap();
    calculator.flush_checkpoints().await;
    let saved = CheckpointStore::load(&store, "session-1")
        .await
        .unwrap()
        .unwrap();
    let restored = saved.state.clone();
    assert_eq!(restored, result.state);
    assert_eq!(restored.session_id(), Some("session-1"));
    assert_eq!(saved.completed_tool_calls.len(), 0); // the last step ran no tool
    let steps = store.list_checkpoints("session-1").await.unwrap();
    assert_eq!(steps.len(), 2);
    let next = calculator.generate("and again?", &restored).await.unwrap();
    assert_eq!(next.turn.text(), "again 5");
}

fn script(dir: &Path, args: &[Value]) -> String {
    let mut responses: Vec<Value> = args
        .iter()
        .enumerate()
        .map(|(i, a)| json!({"toolCalls": [{"id": format!("call-{i:02}"), "name": "append_line", "arguments": a}]}))
        .collect();
    responses.push(json!({"text": "finished"}));
    let path = dir.join("script.json");
    std::fs::write(&path, json!({"responses": responses}).to_string()).unwrap();
    format!("scripted-turns:{}", path.display())
}

fn spec(dir: &Path, model: String, idempotent: bool) -> RunSpec {
    let mut program = AgentProgram::new(model);
    program.tools = vec![ToolSpec {
        name: "append_line".into(),
        config: json!({"out": dir.join("out.txt"), "log": dir.join("log.txt"), "idempotent": idempotent}),
    }];
    program.role = "coder".into();
    RunSpec::new("go", Program::Agent(program))
}

fn runtime(store: &Store) -> Runtime {
    Runtime::new(store.clone()).with_tools(ToolRegistry::with_builtins())
}

async fn resume(store: &Store, run: &str, rerun_uncertain: bool) -> RunOutcome {
    runtime(store)
        .resume(run, ResumeOptions { rerun_uncertain }, false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap()
}

/// Records call `call` of the run's first model response as started, as a crash during it
/// leaves it: pending, at its position (the thread's conversation of one message, index 0).
async fn fake_in_flight(store: &Store, run: &str, call: &str) {
    let record = store.run(run).await.unwrap().unwrap();
    store
        .with_durability(Durability::Sync)
        .tool_call_started(&ToolCallRecord {
            run_id: run.into(),
            position: format!("{}@1#0", record.thread_id),
            args_hash: String::new(),
            tool_call_id: call.into(),
            thread_id: record.thread_id,
            tool_name: "append_line".into(),
            arguments: json!({"line": "a"}),
            status: ToolCallStatus::Pending,
            result: None,
            is_error: false,
            attempts: 1,
            side_effects: true,
            idempotent: false,
            turn: 1,
            started_at: now_string(),
            ended_at: None,
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncertain_call_stops_the_resume_until_approved() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let model = script(dir.path(), &[json!({"line": "a"}), json!({"line": "b"})]);
    let run = runtime(&store)
        .create(&spec(dir.path(), model, false))
        .await
        .unwrap();
    fake_in_flight(&store, &run, "call-00").await;

    let outcome = resume(&store, &run, false).await;
    let RunEnd::NeedsApproval { calls } = &outcome.end else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        calls
            .iter()
            .map(|c| c.tool_call_id.as_str())
            .collect::<Vec<_>>(),
        ["call-00"]
    );
    assert_eq!(outcome.exit_code(), 3);
    assert_eq!(
        store.run(&run).await.unwrap().unwrap().status,
        RunStatus::Interrupted
    );
    assert!(
        !dir.path().join("out.txt").exists(),
        "nothing may run before approval"
    );

    let outcome = resume(&store, &run, true).await;
    assert_eq!(
        outcome.end,
        RunEnd::Completed {
            output: "finished".into()
        }
    );
    let calls = store.tool_calls(&run).await.unwrap();
    assert!(calls.iter().all(|c| c.status == ToolCallStatus::Completed));
    assert_eq!(
        calls
            .iter()
            .find(|c| c.tool_call_id == "call-00")
            .unwrap()
            .attempts,
        2
    );
    let kinds: Vec<String> = store
        .events(&EventQuery {
            run_id: Some(run.clone()),
            ..EventQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_type)
        .collect();
    assert!(
        kinds.iter().filter(|k| *k == "recovery").count() == 2,
        "{kinds:?}"
    );
    assert!(kinds.contains(&"completion".to_owned()));
    // Resuming a completed run is a no-op with the same answer.
    let again = resume(&store, &run, false).await;
    assert_eq!(again.exit_code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_tool_reruns_its_uncertain_call_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let model = script(dir.path(), &[json!({"line": "a"})]);
    let run = runtime(&store)
        .create(&spec(dir.path(), model, true))
        .await
        .unwrap();
    fake_in_flight(&store, &run, "call-00").await;
    let outcome = resume(&store, &run, false).await;
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_a_tool_argument_never_reaches_the_store() {
    let secret = "sk-test-0123456789abcdefSECRET";
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let model = script(
        dir.path(),
        &[json!({"line": format!("deploy with {secret}")})],
    );
    let outcome = runtime(&store)
        .start(spec(dir.path(), model, false), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    let run = outcome.run_id.clone();
    // The tool itself got the real argument…
    assert!(
        std::fs::read_to_string(dir.path().join("out.txt"))
            .unwrap()
            .contains(secret)
    );
    // …but nothing stored has it.
    let events = store
        .events(&EventQuery {
            run_id: Some(run.clone()),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    let calls = store.tool_calls(&run).await.unwrap();
    let record = store.run(&run).await.unwrap().unwrap();
    let cp = store
        .latest_checkpoint(&record.thread_id)
        .await
        .unwrap()
        .unwrap();
    for (what, text) in [
        ("events", serde_json::to_string(&events).unwrap()),
        ("tool calls", serde_json::to_string(&calls).unwrap()),
        ("checkpoint", serde_json::to_string(&cp.checkpoint).unwrap()),
    ] {
        assert!(
            !text.contains(secret),
            "the secret leaked into the {what}: {text}"
        );
        assert!(text.contains("[REDACTED]"), "{what}");
    }
    // Raw bytes of the database file too.
    store.flush().await.unwrap();
    let raw = std::fs::read(dir.path().join("weft.db")).unwrap();
    let wal = std::fs::read(dir.path().join("weft.db-wal")).unwrap_or_default();
    let needle = secret.as_bytes();
    assert!(!raw.windows(needle.len()).any(|w| w == needle));
    assert!(!wal.windows(needle.len()).any(|w| w == needle));
}
