//! Durable execution in-process: weft-agent checkpointing into the store, the uncertain-call
//! rule, and redaction of a secret passed as a tool argument (events, ledger, checkpoints).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
    resume_on(&runtime(store), run, rerun_uncertain).await
}

/// Resumes `run` with `runtime` and waits for it to stop.
async fn resume_on(runtime: &Runtime, run: &str, rerun_uncertain: bool) -> RunOutcome {
    runtime
        .resume(run, ResumeOptions { rerun_uncertain }, false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap()
}

/// The payloads of the events of type `event_type` of `run`, in log order.
async fn payloads(store: &Store, run: &str, event_type: &str) -> Vec<Value> {
    store
        .events(&EventQuery {
            run_id: Some(run.to_owned()),
            types: vec![event_type.to_owned()],
            ..EventQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.payload)
        .collect()
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
    let RunEnd::NeedsApproval { calls, decisions } = &outcome.end else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        decisions.len(),
        1,
        "an uncertain call is a pending decision"
    );
    assert_eq!(decisions[0].tool_call_id, "call-00");
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

/// A model that answers like a real provider: the first answer of a conversation asks for
/// the `probe` tool with a new call id and new arguments on every ask; after a tool result
/// it answers "done". `asks` counts how often it was asked for the first answer.
fn fickle_providers(asks: Arc<AtomicUsize>) -> weft_provider::ProviderRegistry {
    with_function_model("fickle", move |request| {
        if request.messages.len() > 1 {
            return Ok(ScriptedResponse::text("done"));
        }
        let n = asks.fetch_add(1, Ordering::SeqCst);
        Ok(ScriptedResponse::tool_call(
            format!("call-{n}"),
            "probe",
            json!({"ask": n}),
        ))
    })
}

/// The default providers plus `name`, a model that answers each request with `respond`.
fn with_function_model(
    name: &'static str,
    respond: impl Fn(&weft_provider::LlmRequest) -> Result<ScriptedResponse, weft_provider::UppError>
    + Send
    + Sync
    + 'static,
) -> weft_provider::ProviderRegistry {
    let respond = Arc::new(respond);
    let mut providers = weft_runtime::default_providers();
    providers.register(name, move || {
        let respond = respond.clone();
        Arc::new(weft_provider::Provider::new(name, "1").with_llm(
            move |id: &str, _options: &Value| {
                let respond = respond.clone();
                let model: Arc<dyn weft_provider::LlmModel> =
                    Arc::new(scripted::ScriptedModel::from_fn(id, move |request| {
                        respond(request)
                    }));
                Ok(model)
            },
        ))
    });
    providers
}

/// A reply costing 10 input + 1 output tokens.
fn costing(mut reply: ScriptedResponse) -> ScriptedResponse {
    reply.usage = Some(weft_provider::adapters::scripted::ScriptedUsage {
        input_tokens: 10,
        output_tokens: 1,
        ..Default::default()
    });
    reply
}

/// The `probe` tool: records the call id and arguments it ran with; its first run hangs
/// until cancelled (the process "dies" while it runs).
fn probe_registry(seen: Arc<Mutex<Vec<(String, Value)>>>) -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools.register("probe", move |_config: &Value| {
        let seen = seen.clone();
        Ok(Tool::new(
            "probe",
            "probes",
            json!({"type": "object"}),
            move |args: Value, ctx: weft_provider::ToolContext| {
                let seen = seen.clone();
                async move {
                    let first = {
                        let mut seen = seen.lock().unwrap();
                        seen.push((ctx.tool_call_id.clone(), args));
                        seen.len() == 1
                    };
                    if first {
                        ctx.signal.cancelled().await;
                        return Err(weft_provider::ToolError::new("the probe was cancelled"));
                    }
                    Ok(json!("probed"))
                }
            },
        )
        .with_side_effects(true))
    });
    tools
}

/// A run of the fickle model and the probe tool, aborted while its first call runs.
struct Interrupted {
    store: Store,
    runtime: Runtime,
    run: String,
    asks: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<(String, Value)>>>,
    outcome: RunOutcome,
}

async fn start_and_interrupt(dir: &Path) -> Interrupted {
    let store = sqlite(dir).await;
    let asks = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let runtime = Runtime::new(store.clone())
        .with_providers(fickle_providers(asks.clone()))
        .with_tools(probe_registry(seen.clone()));
    let mut program = AgentProgram::new("fickle:m");
    program.tools = vec![ToolSpec {
        name: "probe".into(),
        config: Value::Null,
    }];
    let handle = runtime
        .start(RunSpec::new("go", Program::Agent(program)), false)
        .await
        .unwrap();
    let run = handle.id().to_owned();
    while seen.lock().unwrap().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    handle.abort();
    let outcome = handle.outcome().await.unwrap();
    Interrupted {
        store,
        runtime,
        run,
        asks,
        seen,
        outcome,
    }
}

/// RT-050 with real providers' habits: a step whose response was recorded is never asked
/// of the model again; the resumed step runs the recorded call (same id, same arguments),
/// and an interrupted call is uncertain, not a recorded result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_step_continues_from_its_recorded_response() {
    let dir = tempfile::tempdir().unwrap();
    let Interrupted {
        store,
        runtime,
        run,
        asks,
        seen,
        outcome,
    } = start_and_interrupt(dir.path()).await;
    assert_eq!(outcome.end, RunEnd::Interrupted);
    let calls = store.tool_calls(&run).await.unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].status,
        ToolCallStatus::Pending,
        "a cancelled call stays uncertain"
    );

    // The interrupted call is uncertain: nothing runs without approval.
    let stopped = resume_on(&runtime, &run, false).await;
    assert_eq!(stopped.exit_code(), 3);
    let done = resume_on(&runtime, &run, true).await;
    assert_eq!(
        done.end,
        RunEnd::Completed {
            output: "done".into()
        }
    );
    assert_eq!(
        asks.load(Ordering::SeqCst),
        1,
        "the recorded step was asked again"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[1], seen[0],
        "the resume ran the recorded call, id and arguments"
    );
}

/// RT-026…RT-028, RT-049 through the runtime: a run of two tool steps leaves a checkpoint
/// after every tool result (holding its pending and then its completed call, inputs and
/// outputs) and one at every step boundary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_checkpoints_every_tool_result_and_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let model = script(dir.path(), &[json!({"line": "a"}), json!({"line": "b"})]);
    let outcome = runtime(&store)
        .start(spec(dir.path(), model, false), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    let record = store.run(&outcome.run_id).await.unwrap().unwrap();
    let checkpoints = store.list_checkpoints(&record.thread_id).await.unwrap();
    let kinds: Vec<(&str, u64, u64, u64)> = checkpoints
        .iter()
        .map(|c| {
            (
                c.kind.as_str(),
                c.agent_step,
                c.pending_tools,
                c.completed_tools,
            )
        })
        .collect();
    // Initial, then per tool step: pending call, its result, the step end; then the answer.
    let tool = kinds.iter().filter(|k| k.0 == "tool").count();
    let steps = kinds.iter().filter(|k| k.0 == "step").count();
    assert_eq!(tool, 4, "{kinds:?}");
    assert!(
        kinds.iter().any(|k| k.0 == "tool" && k.2 == 1 && k.3 == 0),
        "{kinds:?}"
    );
    assert!(
        kinds.iter().any(|k| k.0 == "tool" && k.2 == 0 && k.3 == 1),
        "{kinds:?}"
    );
    assert_eq!(steps, 4, "initial + 3 model steps: {kinds:?}");
    let calls = store.tool_calls(&outcome.run_id).await.unwrap();
    assert_eq!(calls.len(), 2);
    // Each call is recorded with the step (turn) it was made in.
    assert_eq!(calls.iter().map(|c| c.turn).collect::<Vec<_>>(), [1, 2]);
    assert!(calls.iter().all(|c| c.status == ToolCallStatus::Completed
        && c.arguments["line"].is_string()
        && c.result.is_some()
        && !c.args_hash.is_empty()));
}

/// A resumed request whose conversation is not the one the recorded response answered is a
/// divergence: the run fails with a message naming the position; nothing is replayed and
/// the model is not asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_divergence_from_the_record_stops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let Interrupted {
        store,
        runtime,
        run,
        asks,
        seen,
        ..
    } = start_and_interrupt(dir.path()).await;
    store.flush().await.unwrap();
    // What the record answered is not what the resumed run asks (as after an edited store).
    let db = rusqlite::Connection::open(dir.path().join("weft.db")).unwrap();
    let changed = db
        .execute("UPDATE model_responses SET fingerprint = 'other'", [])
        .unwrap();
    assert_eq!(changed, 1);
    let outcome = resume_on(&runtime, &run, true).await;
    let RunEnd::Failed { error } = &outcome.end else {
        panic!("{outcome:?}")
    };
    assert!(
        error.contains("diverged") && error.contains("@1"),
        "{error}"
    );
    assert_eq!(
        asks.load(Ordering::SeqCst),
        1,
        "the model was asked instead"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "a call ran after the divergence"
    );
}

/// A run attached to an existing thread goes on from the thread's conversation, with its
/// input as the next user message; its own usage starts at zero. An unknown thread is an
/// error, not a new thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_an_existing_thread_continues_its_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let providers = with_function_model("counting", |request| {
        let users: Vec<String> = request
            .messages()
            .filter(|m| matches!(m, weft_provider::Message::User(_)))
            .map(weft_provider::Message::text)
            .collect();
        Ok(costing(ScriptedResponse::text(users.join(" + "))))
    });
    let runtime = Runtime::new(store.clone()).with_providers(providers);
    let spec = |input: &str| RunSpec::new(input, Program::Agent(AgentProgram::new("counting:m")));
    let first = runtime.start(spec("seven"), false).await.unwrap();
    let first = first.outcome().await.unwrap();
    let thread = store.run(&first.run_id).await.unwrap().unwrap().thread_id;
    let second = runtime
        .start_on(Some(&thread), spec("and eight"), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(
        second.end,
        RunEnd::Completed {
            output: "seven + and eight".into()
        }
    );
    assert_eq!(second.usage.input_tokens, 10, "only this run's usage");
    let record = store.run(&second.run_id).await.unwrap().unwrap();
    assert_eq!(record.thread_id, thread);
    assert!(matches!(
        runtime
            .start_on(Some("no-such-thread"), spec("x"), false)
            .await,
        Err(weft_runtime::RunError::UnknownThread(_))
    ));
}

/// A program that cannot start (here: a session, on a runtime given no session runner)
/// fails its run with the reason recorded, instead of leaving it `running`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_cannot_start_fails_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let program = weft_runtime::spec::SessionProgram {
        project: None,
        workspace: dir.path().to_path_buf(),
        agent: "a".into(),
        model_override: None,
        project_dir: None,
        sandbox: None,
        base_urls: Default::default(),
        profile: None,
    };
    let outcome = Runtime::new(store.clone())
        .start(RunSpec::new("go", Program::Session(program)), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    let RunEnd::Failed { error } = &outcome.end else {
        panic!("{outcome:?}")
    };
    assert!(error.contains("Standard Agents"), "{error}");
    let record = store.run(&outcome.run_id).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.error.as_deref(), Some(error.as_str()));
}

/// A model that never stops asking for `probe`, each answer costing 10 + 1 tokens; `asks`
/// counts its calls.
fn looping_providers(asks: Arc<AtomicUsize>) -> weft_provider::ProviderRegistry {
    with_function_model("looping", move |_request| {
        let n = asks.fetch_add(1, Ordering::SeqCst);
        Ok(costing(ScriptedResponse::tool_call(
            format!("c{n}"),
            "probe",
            json!({}),
        )))
    })
}

async fn run_with_budget(
    budget: weft_runtime::budget::Budget,
    probe_waits: bool,
) -> (RunOutcome, usize, Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let asks = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::new();
    tools.register("probe", move |_config: &Value| {
        Ok(Tool::new(
            "probe",
            "probes",
            json!({"type": "object"}),
            move |_a: Value, ctx: weft_provider::ToolContext| async move {
                if probe_waits {
                    ctx.signal.cancelled().await;
                    return Err(weft_provider::ToolError::new("cancelled"));
                }
                Ok(json!("ok"))
            },
        ))
    });
    let runtime = Runtime::new(store.clone())
        .with_providers(looping_providers(asks.clone()))
        .with_tools(tools);
    let mut program = AgentProgram::new("looping:m");
    program.tools = vec![ToolSpec {
        name: "probe".into(),
        config: Value::Null,
    }];
    let mut spec = RunSpec::new("go", Program::Agent(program));
    spec.budget = budget;
    let outcome = runtime
        .start(spec, false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    (outcome, asks.load(Ordering::SeqCst), store, dir)
}

/// Budgets end a runaway run, failed, with the limit named: steps and tokens before the
/// next model call, time even in the middle of a tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_stop_a_runaway_run() {
    use weft_runtime::budget::Budget;
    let (outcome, asks, store, _dir) = run_with_budget(
        Budget {
            max_steps: Some(3),
            ..Budget::default()
        },
        false,
    )
    .await;
    assert_eq!(asks, 3, "three model calls, not a fourth");
    let RunEnd::Failed { error } = &outcome.end else {
        panic!("{outcome:?}")
    };
    assert!(error.contains("maxSteps"), "{error}");
    let record = store.run(&outcome.run_id).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(outcome.usage.input_tokens, 30, "what it spent is reported");

    let (outcome, asks, _, _dir) = run_with_budget(
        Budget {
            max_total_tokens: Some(20),
            ..Budget::default()
        },
        false,
    )
    .await;
    // Input and output tokens both count (10 + 1 a call).
    assert_eq!(asks, 2, "11, then 22 ≥ 20 tokens: no third call");
    assert!(matches!(&outcome.end, RunEnd::Failed { error } if error.contains("maxTotalTokens")));

    let (outcome, asks, _, _dir) = run_with_budget(
        Budget {
            max_time: Some(std::time::Duration::from_millis(300)),
            ..Budget::default()
        },
        true,
    )
    .await;
    assert_eq!(asks, 1);
    assert!(
        matches!(&outcome.end, RunEnd::Failed { error } if error.contains("maxTime")),
        "{outcome:?}"
    );
}

/// A cost budget without prices cannot be enforced: the run is refused before it exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_budget_without_prices_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let mut spec = RunSpec::new("go", Program::Agent(AgentProgram::new("scripted:x.json")));
    spec.budget.max_cost = Some(1.0);
    let refused = Runtime::new(store.clone()).start(spec, false).await;
    let Err(error) = refused else {
        panic!("started")
    };
    assert_eq!(error.exit_code(), 2);
    assert!(error.to_string().contains("scripted:x.json"), "{error}");
    assert!(store.runs(None).await.unwrap().is_empty(), "no run record");
}

/// A large tool result is stored once: the ledger holds it, the event log refers to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_tool_result_is_stored_by_reference_in_the_event_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let big = "x".repeat(100_000);
    let model = script(dir.path(), &[json!({"line": big.clone()})]);
    let outcome = runtime(&store)
        .start(spec(dir.path(), model, false), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    let events = store
        .events(&EventQuery {
            run_id: Some(outcome.run_id.clone()),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    let end = events
        .iter()
        .find(|e| e.event_type == "tool_call_end")
        .unwrap();
    assert!(end.payload.get("result").is_none(), "{}", end.payload);
    assert!(end.payload["resultBytes"].as_u64().unwrap() > 100_000);
    let position = end.payload["resultRef"]["toolCall"].as_str().unwrap();
    let calls = store.tool_calls(&outcome.run_id).await.unwrap();
    let call = calls.iter().find(|c| c.position == position).unwrap();
    assert_eq!(call.result.as_ref().unwrap()["line"], json!(big));
}

/// An interrupted call is logged as started and never as ended: whether its effect happened
/// is unknown, so no `tool_call_end` claims a result for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_call_is_logged_as_started_and_never_as_ended() {
    let dir = tempfile::tempdir().unwrap();
    let Interrupted {
        store,
        run,
        outcome,
        ..
    } = start_and_interrupt(dir.path()).await;
    assert_eq!(outcome.end, RunEnd::Interrupted, "{outcome:?}");
    store.flush().await.unwrap();
    let types: Vec<String> = store
        .events(&EventQuery {
            run_id: Some(run),
            ..EventQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_type)
        .collect();
    let count = |t: &str| types.iter().filter(|k| *k == t).count();
    assert_eq!(
        (count("tool_call_start"), count("tool_call_end")),
        (1, 0),
        "{types:?}"
    );
}

/// With retries off (`max_retries = 0`, though a retry policy is set, as the runtime
/// profile sets one), a failed call reaches the model, and the log, with the tool's own
/// error: nothing is retried, and no retry note is added to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_retries_off_a_failed_call_ends_with_the_tools_own_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let providers = with_function_model("once", |request| {
        Ok(if request.messages.len() > 1 {
            ScriptedResponse::text("gave up")
        } else {
            ScriptedResponse::tool_call("call-0", "failing", json!({}))
        })
    });
    let runs = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::new();
    let counter = runs.clone();
    tools.register("failing", move |_config: &Value| {
        let counter = counter.clone();
        Ok(Tool::new(
            "failing",
            "always fails",
            json!({"type": "object"}),
            move |_args: Value, _ctx: weft_provider::ToolContext| {
                counter.fetch_add(1, Ordering::SeqCst);
                async { Err(weft_provider::ToolError::transient("the disk is full")) }
            },
        ))
    });
    let mut program = AgentProgram::new("once:m");
    program.tools = vec![ToolSpec {
        name: "failing".into(),
        config: Value::Null,
    }];
    program.policy.max_retries = 0;
    program.policy.retry = Some(weft_runtime::approval::RetryPolicy::default());
    let outcome = Runtime::new(store.clone())
        .with_providers(providers)
        .with_tools(tools)
        .start(RunSpec::new("go", Program::Agent(program)), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "retried");
    let ends: Vec<Value> = payloads(&store, &outcome.run_id, "tool_call_end").await;
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(
        (&ends[0]["isError"], &ends[0]["result"]),
        (&json!(true), &json!("the disk is full"))
    );
    // The ledger holds it as done, with its error: a resume would not take it for uncertain.
    let calls = store.tool_calls(&outcome.run_id).await.unwrap();
    assert_eq!(
        (calls[0].status, calls[0].is_error, calls[0].result.clone()),
        (
            ToolCallStatus::Completed,
            true,
            Some(json!("the disk is full"))
        )
    );
}

/// A completed call replayed on resume must be the call the model makes now: a record of
/// another tool at that position (an edited store) with the same arguments is a divergence,
/// not a result to hand back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_of_another_tool_at_a_calls_position_is_a_divergence() {
    let dir = tempfile::tempdir().unwrap();
    let Interrupted {
        store,
        runtime,
        run,
        seen,
        ..
    } = start_and_interrupt(dir.path()).await;
    store.flush().await.unwrap();
    // The interrupted call finished after all (its result is in the ledger), but the ledger
    // names another tool for it; its arguments are the call's own.
    let record = store.tool_calls(&run).await.unwrap().remove(0);
    assert_eq!(record.tool_name, "probe");
    store
        .with_durability(Durability::Sync)
        .tool_call_finished(&run, &record.position, &json!("probed"), false)
        .await
        .unwrap();
    let db = rusqlite::Connection::open(dir.path().join("weft.db")).unwrap();
    let changed = db
        .execute("UPDATE tool_calls SET tool_name = 'other'", [])
        .unwrap();
    assert_eq!(changed, 1);
    let outcome = resume_on(&runtime, &run, false).await;
    let RunEnd::Failed { error } = &outcome.end else {
        panic!("{outcome:?}")
    };
    assert!(
        error.contains("diverged") && error.contains(&record.position),
        "{error}"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "a call ran after the divergence"
    );
    // The divergence stopped the run at once: no step after it asked the model.
    use weft_store::Responses as _;
    assert_eq!(store.recorded_responses(&run).await.unwrap().len(), 1);
}

/// The inline limit is inclusive: a result of exactly `INLINE_RESULT_BYTES` (as JSON) is in
/// its `tool_call_end`; one byte more is referred to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_at_the_inline_limit_is_logged_inline_and_one_byte_more_by_reference() {
    use weft_runtime::ledger::INLINE_RESULT_BYTES;
    assert_eq!(INLINE_RESULT_BYTES, 16 * 1024, "docs/events.md says 16 KiB");
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    // `append_line` answers `{"ok": true, "line": LINE}`.
    let overhead = json!({"ok": true, "line": ""}).to_string().len();
    let line = |bytes: usize| "x".repeat(bytes - overhead);
    let model = script(
        dir.path(),
        &[
            json!({"line": line(INLINE_RESULT_BYTES)}),
            json!({"line": line(INLINE_RESULT_BYTES + 1)}),
        ],
    );
    let outcome = runtime(&store)
        .start(spec(dir.path(), model, false), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    let ends: Vec<Value> = payloads(&store, &outcome.run_id, "tool_call_end").await;
    assert_eq!(ends.len(), 2);
    assert_eq!(
        ends[0]["result"].to_string().len(),
        INLINE_RESULT_BYTES,
        "inline"
    );
    assert!(
        ends[0].get("resultRef").is_none(),
        "{}",
        ends[0]["resultRef"]
    );
    assert!(ends[1].get("result").is_none(), "by reference");
    assert_eq!(
        ends[1]["resultBytes"].as_u64(),
        Some(INLINE_RESULT_BYTES as u64 + 1)
    );
}

/// Work queued on the thread of a stopped run, taken by its resumed step whose model call is
/// replayed from the record: the recorded response wins; the queued call stays queued for
/// the next step, which runs it (once), and the message queued after it is taken by the
/// step after that — in queue order, each once, the queue empty at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_queued_while_a_run_was_stopped_is_taken_after_its_replayed_step_in_order() {
    // A call alone (the replayed step leaves it queued, and wakes the next step to take
    // it), and a call with a message after it.
    for with_message in [false, true] {
        queued_while_stopped(with_message).await;
    }
}

async fn queued_while_stopped(with_message: bool) {
    use weft_store::ThreadQueue as _;
    let dir = tempfile::tempdir().unwrap();
    let Interrupted {
        store,
        runtime,
        run,
        seen,
        ..
    } = start_and_interrupt(dir.path()).await;
    let thread = store.run(&run).await.unwrap().unwrap().thread_id;
    let call = runtime
        .queue_tool(&thread, "probe", json!({"queued": true}))
        .await
        .unwrap();
    let message = match with_message {
        true => Some(runtime.queue_message(&thread, "and say bye").await.unwrap()),
        false => None,
    };
    let done = resume_on(&runtime, &run, true).await;
    assert_eq!(
        done.end,
        RunEnd::Completed {
            output: "done".into()
        },
        "{done:?}"
    );
    let ran: Vec<(String, Value)> = seen.lock().unwrap().clone();
    assert_eq!(
        ran,
        [
            ("call-0".to_owned(), json!({"ask": 0})),
            ("call-0".to_owned(), json!({"ask": 0})),
            (call.id.clone(), json!({"queued": true})),
        ]
    );
    // The conversation: the replayed step, the queued call as a step of its own (its
    // response and result), then the queued message, answered.
    let latest = store.latest_checkpoint(&thread).await.unwrap().unwrap();
    let kinds: Vec<String> = latest
        .checkpoint
        .state
        .messages()
        .map(|m| match &*m {
            weft_provider::Message::Assistant(a) => match a.tool_calls.first() {
                Some(c) => format!("call {}", c.tool_call_id),
                None => format!("answer {}", m.text()),
            },
            weft_provider::Message::ToolResult(r) => {
                format!("result {}", r.results[0].tool_call_id)
            }
            other => format!("user {}", other.id()),
        })
        .collect();
    let mut expected = vec![
        "call call-0".to_owned(),
        "result call-0".to_owned(),
        format!("call {}", call.id),
        format!("result {}", call.id),
    ];
    expected.extend(message.map(|m| format!("user {}", m.id)));
    expected.push("answer done".to_owned());
    assert_eq!(kinds[1..], expected);
    assert!(store.queued(&thread).await.unwrap().is_empty());
}

/// A run whose answer was checkpointed before its process died (its record never said it
/// ended): the resume ends it with that answer and asks the model nothing — unless work
/// waits in its thread's queue, which a step then takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_answered_before_the_crash_resumes_to_its_answer_without_a_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let asks = Arc::new(AtomicUsize::new(0));
    let counter = asks.clone();
    let providers = with_function_model("counting", move |_request| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        Ok(ScriptedResponse::text(format!("answer {n}")))
    });
    let runtime = Runtime::new(store.clone()).with_providers(providers);
    let spec = RunSpec::new("go", Program::Agent(AgentProgram::new("counting:m")));
    let first = runtime
        .start(spec, false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    let answered = |n: usize| RunEnd::Completed {
        output: format!("answer {n}"),
    };
    assert_eq!(first.end, answered(0));
    // The crash window: the answer is checkpointed, the run's end was never written.
    let crash = || async {
        store.flush().await.unwrap();
        let db = rusqlite::Connection::open(dir.path().join("weft.db")).unwrap();
        db.execute(
            "UPDATE runs SET status = 'interrupted', ended_at = NULL, output = NULL",
            [],
        )
        .unwrap();
    };
    let resume = || async {
        runtime
            .resume(&first.run_id, ResumeOptions::default(), false)
            .await
            .unwrap()
            .outcome()
            .await
            .unwrap()
    };
    crash().await;
    assert_eq!(resume().await.end, answered(0));
    assert_eq!(asks.load(Ordering::SeqCst), 1, "the model was asked again");
    let thread = store.run(&first.run_id).await.unwrap().unwrap().thread_id;
    crash().await;
    runtime.queue_message(&thread, "one more").await.unwrap();
    assert_eq!(resume().await.end, answered(1));
    assert_eq!(asks.load(Ordering::SeqCst), 2);
}

/// A call that starts after a later call of its response (`after`) still gets its own
/// position in the ledger: positions follow the response's order, not the order the calls
/// started in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_position_is_its_place_in_the_response_whatever_order_the_calls_start_in() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let started = Arc::new(Mutex::new(Vec::new()));
    let mut tools = ToolRegistry::new();
    let order = started.clone();
    tools.register("mark", move |_config: &Value| {
        let order = order.clone();
        Ok(Tool::new(
            "mark",
            "marks",
            json!({"type": "object"}),
            move |_args: Value, ctx: weft_provider::ToolContext| {
                order.lock().unwrap().push(ctx.tool_call_id.clone());
                async { Ok(json!("marked")) }
            },
        ))
    });
    let path = dir.path().join("script.json");
    std::fs::write(
        &path,
        json!({"responses": [
            {"toolCalls": [
                {"id": "first", "name": "mark", "arguments": {}, "after": ["second"]},
                {"id": "second", "name": "mark", "arguments": {}}
            ]},
            {"text": "finished"}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut program = AgentProgram::new(format!("scripted-turns:{}", path.display()));
    program.tools = vec![ToolSpec {
        name: "mark".into(),
        config: Value::Null,
    }];
    let outcome = Runtime::new(store.clone())
        .with_tools(tools)
        .start(RunSpec::new("go", Program::Agent(program)), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert_eq!(*started.lock().unwrap(), ["second", "first"]);
    let mut positions: Vec<(String, String)> = store
        .tool_calls(&outcome.run_id)
        .await
        .unwrap()
        .into_iter()
        .map(|c| {
            let index = c.position.rsplit_once('#').map(|(_, i)| i.to_owned());
            (c.tool_call_id, index.unwrap_or_default())
        })
        .collect();
    positions.sort();
    assert_eq!(
        positions,
        [
            ("first".to_owned(), "0".to_owned()),
            ("second".to_owned(), "1".to_owned())
        ]
    );
}

/// A call answered before the tool pipeline (a tool the agent does not have) is logged all
/// the same — started, refused at stage `call`, ended — and only that call: a call of the
/// same response that ran and failed is logged by the pipeline, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_of_an_unknown_tool_is_logged_as_refused_and_only_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let providers = with_function_model("two", |request| {
        if request.messages.len() > 1 {
            return Ok(ScriptedResponse::text("done"));
        }
        Ok(serde_json::from_value(json!({"toolCalls": [
            {"id": "ghost-1", "name": "no_such_tool", "arguments": {}},
            {"id": "fail-1", "name": "failing", "arguments": {}}
        ]}))
        .unwrap())
    });
    let mut tools = ToolRegistry::new();
    tools.register("failing", |_config: &Value| {
        Ok(Tool::new(
            "failing",
            "always fails",
            json!({"type": "object"}),
            |_args: Value, _ctx: weft_provider::ToolContext| async {
                Err(weft_provider::ToolError::new("it broke"))
            },
        ))
    });
    let mut program = AgentProgram::new("two:m");
    program.tools = vec![ToolSpec {
        name: "failing".into(),
        config: Value::Null,
    }];
    let outcome = Runtime::new(store.clone())
        .with_providers(providers)
        .with_tools(tools)
        .start(RunSpec::new("go", Program::Agent(program)), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    let calls: Vec<(String, String, Value)> = store
        .events(&EventQuery {
            run_id: Some(outcome.run_id.clone()),
            ..EventQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.event_type.starts_with("tool_call"))
        .map(|e| {
            (
                e.event_type,
                e.tool_call_id.unwrap_or_default(),
                e.payload["stage"].clone(),
            )
        })
        .collect();
    let of = |id: &str| -> Vec<(String, Value)> {
        calls
            .iter()
            .filter(|c| c.1 == id)
            .map(|c| (c.0.clone(), c.2.clone()))
            .collect()
    };
    assert_eq!(
        of("ghost-1"),
        [
            ("tool_call_start".to_owned(), Value::Null),
            ("tool_call_refused".to_owned(), json!("call")),
            ("tool_call_end".to_owned(), Value::Null),
        ]
    );
    assert_eq!(
        of("fail-1"),
        [
            ("tool_call_start".to_owned(), Value::Null),
            ("tool_call_end".to_owned(), Value::Null),
        ]
    );
}

/// A completed call replayed on resume must have the arguments the model gives now: when
/// the step's response was not recorded (an older store) and the model asks for the same
/// tool with other arguments, the run has diverged — the recorded result is not handed back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_with_other_arguments_at_a_calls_position_is_a_divergence() {
    let dir = tempfile::tempdir().unwrap();
    let Interrupted {
        store,
        runtime,
        run,
        asks,
        seen,
        ..
    } = start_and_interrupt(dir.path()).await;
    store.flush().await.unwrap();
    let record = store.tool_calls(&run).await.unwrap().remove(0);
    assert_eq!(record.arguments, json!({"ask": 0}));
    store
        .with_durability(Durability::Sync)
        .tool_call_finished(&run, &record.position, &json!("probed"), false)
        .await
        .unwrap();
    let db = rusqlite::Connection::open(dir.path().join("weft.db")).unwrap();
    db.execute("DELETE FROM model_responses", []).unwrap();
    let outcome = resume_on(&runtime, &run, false).await;
    // The model was asked again, and asked for `{"ask": 1}` at the recorded position.
    assert_eq!(asks.load(Ordering::SeqCst), 2);
    let RunEnd::Failed { error } = &outcome.end else {
        panic!("{outcome:?}")
    };
    assert!(
        error.contains("diverged") && error.contains(&record.position),
        "{error}"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "a call ran after the divergence"
    );
}

/// A divergence found while another call of the same response runs stops that call too:
/// the run's stop cancels what is in flight rather than waiting for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_divergence_stops_the_calls_running_beside_it() {
    use std::sync::atomic::AtomicBool;
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let providers = with_function_model("pair", |request| {
        if request.messages.len() > 1 {
            return Ok(ScriptedResponse::text("done"));
        }
        Ok(serde_json::from_value(json!({"toolCalls": [
            {"id": "p-1", "name": "probe", "arguments": {}},
            {"id": "w-1", "name": "wait", "arguments": {}}
        ]}))
        .unwrap())
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let finished = Arc::new(AtomicBool::new(false));
    let mut tools = probe_registry(seen.clone());
    let done = finished.clone();
    tools.register("wait", move |_config: &Value| {
        let done = done.clone();
        Ok(Tool::new(
            "wait",
            "waits half a minute, or until the run stops",
            json!({"type": "object"}),
            move |_args: Value, ctx: weft_provider::ToolContext| {
                let done = done.clone();
                async move {
                    tokio::select! {
                        () = tokio::time::sleep(std::time::Duration::from_secs(30)) => {
                            done.store(true, Ordering::SeqCst);
                            Ok(json!("waited"))
                        }
                        () = ctx.signal.cancelled() => Err(weft_provider::ToolError::new("stopped")),
                    }
                }
            },
        ))
    });
    let runtime = Runtime::new(store.clone())
        .with_providers(providers)
        .with_tools(tools);
    let mut program = AgentProgram::new("pair:m");
    program.tools = ["probe", "wait"]
        .into_iter()
        .map(|name| ToolSpec {
            name: name.into(),
            config: Value::Null,
        })
        .collect();
    let handle = runtime
        .start(RunSpec::new("go", Program::Agent(program)), false)
        .await
        .unwrap();
    let run = handle.id().to_owned();
    while seen.lock().unwrap().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    handle.abort();
    handle.outcome().await.unwrap();
    store.flush().await.unwrap();
    // The probe's call finished after all, but the ledger names another tool for it.
    let probe = store
        .tool_calls(&run)
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.tool_call_id == "p-1")
        .unwrap();
    store
        .with_durability(Durability::Sync)
        .tool_call_finished(&run, &probe.position, &json!("probed"), false)
        .await
        .unwrap();
    let db = rusqlite::Connection::open(dir.path().join("weft.db")).unwrap();
    db.execute(
        "UPDATE tool_calls SET tool_name = 'other' WHERE tool_call_id = 'p-1'",
        [],
    )
    .unwrap();
    let outcome = resume_on(&runtime, &run, true).await;
    let RunEnd::Failed { error } = &outcome.end else {
        panic!("{outcome:?}")
    };
    assert!(error.contains("diverged"), "{error}");
    assert!(
        !finished.load(Ordering::SeqCst),
        "the call beside the divergence ran on to its end"
    );
}
