//! The Standard Agents step cycle (runtime §3, SA-082–SA-085, SA-087), in order, from the
//! durable store: a step takes the messages queued on its thread, assembles the model's
//! context (the system prompt, the conversation, the queued message last), calls the selected
//! model, and the response is recorded before its tool runs; the tool's result is recorded
//! before the next model call. The order is read from the run's event numbers (`seq`) and from
//! what the SQLite database held at the moment the model was called and the tool ran (read by
//! the model and the tool themselves, on their own connection): no timing.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};
use weft_provider::adapters::scripted::{Script, ScriptedModel};
use weft_provider::provider::{LlmModel, Provider};
use weft_provider::{ErrorCode, Message, Tool, ToolContext, ToolError, UppError};
use weft_runtime::event::{EventKind, RunEvent};
use weft_runtime::spec::{AgentProgram, Program, RunSpec, ToolSpec};
use weft_runtime::{RunEnd, Runtime, ToolRegistry, default_providers};
use weft_store::{Runs as _, Store, ThreadQueue as _};

const SYSTEM: &str = "You are the probe.";
const QUEUED: &str = "and say bye";

/// What the database held at one moment of the run (read on a connection of its own).
#[derive(Debug, Clone)]
struct Snapshot {
    /// The run's last logged event number.
    seq: u64,
    /// The recorded model responses (JSON text).
    responses: Vec<String>,
    /// The tool ledger: (call id, status, result).
    calls: Vec<(String, String, Option<String>)>,
}

fn snapshot(db: &Path) -> Snapshot {
    let db = rusqlite::Connection::open(db).unwrap();
    let seq: i64 = db
        .query_row("SELECT COALESCE(MAX(run_seq), 0) FROM events", [], |r| {
            r.get(0)
        })
        .unwrap();
    let responses = db
        .prepare("SELECT response FROM model_responses")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let calls = db
        .prepare("SELECT tool_call_id, status, result FROM tool_calls")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    Snapshot {
        seq: u64::try_from(seq).unwrap(),
        responses,
        calls,
    }
}

/// One model call: the model asked, its system text and messages, the database then.
#[derive(Debug, Clone)]
struct Seen {
    model: String,
    system: Option<String>,
    messages: Vec<Message>,
    at: Snapshot,
}

/// The `recording:PATH` provider: answer k of the script at `PATH` for a request with k
/// assistant messages, each request recorded in `seen` with the database's state.
fn recording(db: PathBuf, seen: Arc<Mutex<Vec<Seen>>>) -> impl Fn() -> Arc<Provider> + Send + Sync {
    move || {
        let (db, seen) = (db.clone(), seen.clone());
        Arc::new(
            Provider::new("recording", "0").with_llm(move |model_id: &str, _: &Value| {
                let script = Script::load(Path::new(model_id)).map_err(|e| {
                    UppError::llm(ErrorCode::InvalidRequest, "recording", e.to_string())
                })?;
                let (id, db, seen) = (model_id.to_owned(), db.clone(), seen.clone());
                let model: Arc<dyn LlmModel> =
                    Arc::new(ScriptedModel::from_fn(model_id, move |request| {
                        seen.lock().unwrap().push(Seen {
                            model: id.clone(),
                            system: request.system.clone(),
                            messages: request.messages().cloned().collect(),
                            at: snapshot(&db),
                        });
                        let k = request
                            .messages()
                            .filter(|m| matches!(m, Message::Assistant(_)))
                            .count();
                        script.responses.get(k).cloned().ok_or_else(|| {
                            UppError::llm(ErrorCode::InvalidRequest, "recording", "no answer")
                        })
                    }));
                Ok(model)
            }),
        )
    }
}

/// The `probe` tool: notes the database's state when it runs, then queues a message on the
/// run's thread (while the run works).
fn probe(
    db: PathBuf,
    runtime: Arc<OnceLock<Runtime>>,
    ran: Arc<Mutex<Vec<Snapshot>>>,
) -> impl Fn(&Value) -> Result<Tool, String> + Send + Sync {
    move |_config: &Value| {
        let (db, runtime, ran) = (db.clone(), runtime.clone(), ran.clone());
        Ok(Tool::new(
            "probe",
            "Probes.",
            json!({"type": "object", "properties": {}}),
            move |_args: Value, _ctx: ToolContext| {
                let (db, runtime, ran) = (db.clone(), runtime.clone(), ran.clone());
                async move {
                    ran.lock().unwrap().push(snapshot(&db));
                    let thread: String = rusqlite::Connection::open(&db)
                        .unwrap()
                        .query_row("SELECT thread_id FROM runs", [], |r| r.get(0))
                        .unwrap();
                    let runtime = runtime.get().ok_or_else(|| ToolError::new("no runtime"))?;
                    let queued = runtime
                        .queue_message(&thread, QUEUED)
                        .await
                        .map_err(|e| ToolError::new(e.to_string()))?;
                    Ok(json!({"probed": true, "queued": queued.id}))
                }
            },
        ))
    }
}

fn seq_of(events: &[RunEvent], what: impl Fn(&RunEvent) -> bool) -> Vec<u64> {
    events.iter().filter(|e| what(e)).map(|e| e.seq).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_takes_the_queue_assembles_calls_records_the_response_then_runs_and_records_the_tool()
 {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("weft.db");
    let store = Store::open(&format!("sqlite:{}", db.display()))
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let cell = Arc::new(OnceLock::new());
    let mut providers = default_providers();
    providers.register("recording", recording(db.clone(), seen.clone()));
    let mut tools = ToolRegistry::new();
    tools.register("probe", probe(db.clone(), cell.clone(), ran.clone()));
    let runtime = Runtime::new(store.clone())
        .with_providers(providers)
        .with_tools(tools);
    cell.set(runtime.clone()).unwrap();

    let script = dir.path().join("probe.json");
    let responses = json!([
        {"toolCalls": [{"id": "call-1", "name": "probe", "arguments": {}}]},
        {"text": "bye"},
    ]);
    std::fs::write(&script, json!({ "responses": responses }).to_string()).unwrap();
    let mut program = AgentProgram::new(format!("recording:{}", script.display()));
    program.system = Some(SYSTEM.into());
    program.tools = vec![ToolSpec {
        name: "probe".into(),
        config: json!({}),
    }];
    let handle = runtime
        .start(RunSpec::new("go", Program::Agent(program)), false)
        .await
        .unwrap();
    let run = handle.id().to_owned();
    let outcome = handle.outcome().await.unwrap();
    assert!(
        matches!(outcome.end, RunEnd::Completed { ref output } if output == "bye"),
        "{:?}",
        outcome.end
    );
    let mut follow = runtime.follow(&run, 0).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = follow.next().await {
        events.push(event);
    }
    let seen = seen.lock().unwrap().clone();
    let ran = ran.lock().unwrap().clone();
    assert_eq!(
        (seen.len(), ran.len()),
        (2, 1),
        "two model calls, one tool run"
    );

    // 3. The selected model is the one called, at every step.
    let selected = script.display().to_string();
    assert!(seen.iter().all(|s| s.model == selected), "{seen:#?}");

    // 1–2. The second step's request: the system prompt and the conversation, the message
    // queued while the tool ran last — taken before the model call, not after it.
    let second = &seen[1];
    assert_eq!(
        second.system.as_deref(),
        Some(SYSTEM),
        "system prompt assembled"
    );
    assert_eq!(seen[0].system.as_deref(), Some(SYSTEM));
    let kinds: Vec<&str> = second
        .messages
        .iter()
        .map(|m| match m {
            Message::User(_) => "user",
            Message::Assistant(_) => "assistant",
            Message::ToolResult(_) => "tool_result",
        })
        .collect();
    assert_eq!(kinds, ["user", "assistant", "tool_result", "user"]);
    assert_eq!(second.messages[0].text(), "go");
    assert_eq!(
        second.messages[3].text(),
        QUEUED,
        "the queue was drained first"
    );

    // The event log's order.
    let turn_starts = seq_of(&events, |e| matches!(e.kind, EventKind::TurnStart { .. }));
    let call_start = seq_of(&events, |e| {
        matches!(e.kind, EventKind::ToolCallStart { .. })
            && e.tool_call_id.as_deref() == Some("call-1")
    });
    let call_end = seq_of(&events, |e| {
        matches!(e.kind, EventKind::ToolCallEnd { .. })
            && e.tool_call_id.as_deref() == Some("call-1")
    });
    let checkpoints = seq_of(&events, |e| matches!(e.kind, EventKind::Checkpoint { .. }));
    assert_eq!(
        (turn_starts.len(), call_start.len(), call_end.len()),
        (2, 1, 1),
        "{events:#?}"
    );
    let (call_start, call_end) = (call_start[0], call_end[0]);

    // 3 → 4 → 5. The first model call comes after its step began and before the tool; when
    // the tool runs, the response that asked for it is already recorded.
    let first = &seen[0];
    assert!(turn_starts[0] <= first.at.seq && first.at.seq < call_start);
    assert!(
        first.at.responses.is_empty(),
        "nothing recorded before the call"
    );
    let tool = &ran[0];
    assert!(
        call_start <= tool.seq && tool.seq < call_end,
        "{tool:?} {events:#?}"
    );
    assert_eq!(
        tool.responses.len(),
        1,
        "the response is recorded before the tool runs"
    );
    assert!(tool.responses[0].contains("call-1"), "{:?}", tool.responses);
    assert_eq!(
        tool.calls,
        [("call-1".to_owned(), "pending".to_owned(), None)],
        "recorded as pending, its result not yet"
    );

    // 6. The tool's result is recorded (ledger, tool_call_end, checkpoint) before the next
    // model call.
    let recorded = second
        .at
        .calls
        .iter()
        .find(|(id, _, _)| id == "call-1")
        .unwrap_or_else(|| panic!("{:?}", second.at.calls));
    assert_eq!(recorded.1, "completed", "{recorded:?}");
    assert!(
        recorded.2.as_deref().is_some_and(|r| r.contains("probed")),
        "{recorded:?}"
    );
    let step_checkpoint = checkpoints
        .iter()
        .copied()
        .find(|&seq| seq > call_end)
        .unwrap();
    assert!(call_end < step_checkpoint && step_checkpoint < turn_starts[1]);
    assert!(
        turn_starts[1] <= second.at.seq,
        "the second call after its step began"
    );
    assert_eq!(
        second.at.responses.len(),
        1,
        "and before its response is recorded"
    );

    // The taken message is in the thread's conversation once, and out of the queue.
    let thread = store.run(&run).await.unwrap().unwrap().thread_id;
    let latest = store.latest_checkpoint(&thread).await.unwrap().unwrap();
    let texts: Vec<String> = latest
        .checkpoint
        .state
        .messages()
        .map(|m| m.text())
        .collect();
    assert_eq!(
        texts.iter().filter(|t| *t == QUEUED).count(),
        1,
        "{texts:?}"
    );
    assert!(store.queued(&thread).await.unwrap().is_empty());
}
