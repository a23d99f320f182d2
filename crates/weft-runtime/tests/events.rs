//! A run's events (RUNTIME.md §5, RT-031…RT-039): one typed vocabulary, numbered per run
//! without gaps, written to the event log in order, the same objects live and read back;
//! a late or slow subscriber reads back from the log; text deltas are stored coalesced;
//! dropping a run's stream stops the run unless it was detached.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use weft_runtime::approval::ToolPolicy;
use weft_runtime::event::{AgentPath, Emitter, EventKind, RunEvent, RunEvents};
use weft_runtime::spec::{AgentProgram, Program, RunSpec, ToolSpec};
use weft_runtime::{ResumeOptions, RunEnd, Runtime, ToolRegistry};
use weft_store::{EventLog, EventQuery, Store, Verdict};

async fn sqlite(dir: &Path) -> Store {
    Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await
        .unwrap()
}

/// A run of a scripted model that appends `lines` (one call per step), then answers.
fn spec(dir: &Path, lines: &[&str], delay_ms: u64, policy: ToolPolicy) -> RunSpec {
    let mut responses: Vec<Value> = lines
        .iter()
        .enumerate()
        .map(|(i, line)| json!({"toolCalls": [{"id": format!("call-{i:02}"), "name": "append_line", "arguments": {"line": line}}]}))
        .collect();
    responses.push(json!({"text": "finished"}));
    let script = dir.join("script.json");
    std::fs::write(&script, json!({"responses": responses}).to_string()).unwrap();
    let mut program = AgentProgram::new(format!("scripted-turns:{}", script.display()));
    program.tools = vec![ToolSpec {
        name: "append_line".into(),
        config: json!({"out": dir.join("out.txt"), "log": dir.join("log.txt"), "delay_ms": delay_ms}),
    }];
    program.policy = policy;
    RunSpec::new("go", Program::Agent(program))
}

fn runtime(store: &Store) -> Runtime {
    Runtime::new(store.clone()).with_tools(ToolRegistry::with_builtins())
}

async fn drain(mut events: RunEvents) -> Vec<RunEvent> {
    let mut all = Vec::new();
    while let Some(event) = events.next().await {
        all.push(event);
    }
    all
}

async fn logged(store: &Store, run: &str) -> Vec<RunEvent> {
    store
        .events(&EventQuery {
            run_id: Some(run.to_owned()),
            ..EventQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(RunEvent::from_record)
        .collect()
}

fn types(events: &[RunEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| e.kind.clone().into_parts().0)
        .collect()
}

fn assert_numbered(events: &[RunEvent], from: u64) {
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (from..from + events.len() as u64).collect();
    assert_eq!(seqs, expected, "numbered without gaps");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_events_are_numbered_logged_and_the_same_live_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = runtime(&store);
    let mut handle = runtime
        .start(
            spec(dir.path(), &["a", "b"], 0, ToolPolicy::default()),
            true,
        )
        .await
        .unwrap();
    let run = handle.id().to_owned();
    let live = drain(handle.take_events().unwrap()).await;
    let outcome = handle.outcome().await.unwrap();
    assert_eq!(outcome.exit_code(), 0);

    assert_numbered(&live, 1);
    let kinds = types(&live);
    assert_eq!(kinds.first().map(String::as_str), Some("run_start"));
    assert_eq!(kinds.last().map(String::as_str), Some("run_end"));
    // RT-031…RT-034, RT-036: every step and call, then the completion.
    let count = |t: &str| kinds.iter().filter(|k| *k == t).count();
    assert_eq!(
        (
            count("turn_start"),
            count("turn_end"),
            count("tool_call_start"),
            count("tool_call_end"),
            count("completion")
        ),
        (3, 3, 2, 2, 1),
        "{kinds:?}"
    );
    let start = kinds.iter().position(|k| k == "tool_call_start").unwrap();
    let end = kinds.iter().position(|k| k == "tool_call_end").unwrap();
    assert!(start < end);
    assert_eq!(live[start].tool_call_id.as_deref(), Some("call-00"));
    assert_eq!(live[start].turn, 1, "the step the call belongs to");
    let EventKind::RunEnd {
        status,
        exit_code,
        steps,
        output,
        ..
    } = &live.last().unwrap().kind
    else {
        panic!("run_end last")
    };
    assert_eq!(
        (status.as_str(), *exit_code, *steps, output.as_deref()),
        ("completed", 0, 3, Some("finished"))
    );

    // RT-038: the runtime spec's RuntimeEvent fields on every event; RT-039: in
    // timestamp order.
    for event in &live {
        let json = serde_json::to_value(event).unwrap();
        for key in [
            "id",
            "runId",
            "agentId",
            "type",
            "turn",
            "timestamp",
            "payload",
            "seq",
        ] {
            assert!(json.get(key).is_some(), "{key} missing in {json}");
        }
        assert_eq!(json["runId"], run.as_str());
        assert_eq!(
            json.get("toolCallId").is_some(),
            event.kind.clone().into_parts().0.starts_with("tool_call"),
            "{json}"
        );
        assert!(
            chrono::DateTime::parse_from_rfc3339(&event.timestamp).is_ok(),
            "{json}"
        );
    }
    assert!(live.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));

    // What the log holds is what the live viewer saw, object for object.
    let stored = logged(&store, &run).await;
    let as_json = |events: &[RunEvent]| serde_json::to_value(events).unwrap();
    assert_eq!(as_json(&stored), as_json(&live));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_numbers_on_and_its_stream_starts_with_the_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = runtime(&store);
    let policy = ToolPolicy {
        requires_approval: ["append_line".to_owned()].into(),
        ..ToolPolicy::default()
    };
    let mut handle = runtime
        .start(spec(dir.path(), &["a"], 0, policy), true)
        .await
        .unwrap();
    let run = handle.id().to_owned();
    let first = drain(handle.take_events().unwrap()).await;
    let outcome = handle.outcome().await.unwrap();
    let RunEnd::AwaitingDecision { decisions } = &outcome.end else {
        panic!("suspended: {:?}", outcome.end)
    };
    assert!(types(&first).contains(&"decision_pending".to_owned()));
    let EventKind::RunEnd {
        status,
        decisions: pending,
        ..
    } = &first.last().unwrap().kind
    else {
        panic!("run_end last")
    };
    assert_eq!((status.as_str(), pending.len()), ("suspended", 1));

    runtime
        .decide(&run, &decisions[0].id, Verdict::Approve)
        .await
        .unwrap();
    let mut handle = runtime
        .resume(&run, ResumeOptions::default(), true)
        .await
        .unwrap();
    let second = drain(handle.take_events().unwrap()).await;
    assert_eq!(handle.outcome().await.unwrap().exit_code(), 0);
    // This process's events only, numbered on from the first process's.
    assert_numbered(&second, first.len() as u64 + 1);
    assert_eq!(
        second.first().map(|e| e.kind.clone().into_parts().0),
        Some("recovery".to_owned())
    );
    let all = logged(&store, &run).await;
    assert_numbered(&all, 1);
    assert_eq!(all.len(), first.len() + second.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_stops_the_run_and_a_detached_one_lets_it_finish() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = runtime(&store);
    let lines = ["a", "b", "c", "d"];

    // Dropped after the first call started: the run stops, resumable.
    let mut handle = runtime
        .start(spec(dir.path(), &lines, 200, ToolPolicy::default()), true)
        .await
        .unwrap();
    let mut events = handle.take_events().unwrap();
    while let Some(event) = events.next().await {
        if matches!(event.kind, EventKind::ToolCallStart { .. }) {
            break;
        }
    }
    drop(events);
    let outcome = handle.outcome().await.unwrap();
    assert_eq!(outcome.end, RunEnd::Interrupted);

    // Detached: the caller stops listening, the run goes on to its end.
    let dir = tempfile::tempdir().unwrap();
    let mut handle = runtime
        .start(spec(dir.path(), &lines, 20, ToolPolicy::default()), true)
        .await
        .unwrap();
    let mut events = handle.take_events().unwrap();
    events.next().await.unwrap();
    events.detach();
    drop(events);
    let outcome = handle.outcome().await.unwrap();
    assert_eq!(outcome.exit_code(), 0, "{:?}", outcome.end);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_falls_behind_reads_back_from_the_log_and_misses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let emitter = Emitter::new(store.clone(), "run-slow", "thread-slow", Emitter::channel());
    let mut slow = emitter.subscribe(0);
    let agent = AgentPath::root("main");
    // Far more than the live channel holds, before the subscriber reads one.
    for i in 0..3000 {
        let kind = EventKind::Status {
            message: format!("m{i}"),
            side: None,
        };
        emitter.emit(&agent, 1, None, kind).await;
    }
    drop(emitter);
    let mut seen = Vec::new();
    while let Some(event) = slow.next().await {
        seen.push(event);
    }
    assert_numbered(&seen, 1);
    assert_eq!(seen.len(), 3000);
    let EventKind::Status { message, .. } = &seen[2999].kind else {
        panic!("a status")
    };
    assert_eq!(message, "m2999");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_subscriber_gets_the_logged_events_before_the_next_one_happens() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let emitter = Emitter::new(store.clone(), "run-late", "thread-late", Emitter::channel());
    let agent = AgentPath::root("main");
    for i in 0..3 {
        let kind = EventKind::Status {
            message: format!("m{i}"),
            side: None,
        };
        emitter.emit(&agent, 1, None, kind).await;
    }
    store.flush().await.unwrap();
    // The run is alive (its emitter is) and quiet: a subscriber joining now (a page reloaded
    // mid-answer) gets what was logged without waiting for the run's next event.
    let mut late = emitter.subscribe(0);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let event = tokio::time::timeout(Duration::from_secs(60), late.next())
            .await
            .expect("the logged events come at once")
            .unwrap();
        seen.push(event);
    }
    assert_numbered(&seen, 1);
    drop(emitter);
}

#[tokio::test(start_paused = true)]
async fn text_deltas_are_published_at_once_after_a_pause_then_coalesced_by_time_and_size() {
    let emitter = Emitter::live("run-text");
    let mut events = emitter.subscribe(0);
    let agent = AgentPath::root("main");
    let delta = |text: &str| EventKind::TextDelta {
        text: text.to_owned(),
        side: None,
    };
    // The first delta goes out at once; the next ones gather.
    for _ in 0..500 {
        emitter.emit(&agent, 1, None, delta("ab")).await;
    }
    let first = events.next().await.unwrap();
    assert_eq!((first.seq, first.kind.delta_text()), (1, Some("ab")));
    // ~100 ms later the timer publishes what gathered, as one event.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let second = events.next().await.unwrap();
    assert_eq!(second.kind.delta_text().map(str::len), Some(998));
    // 4 KB gathered publishes at once, without waiting for the timer.
    for _ in 0..2000 {
        emitter.emit(&agent, 1, None, delta("abcd")).await;
    }
    let third = events.next().await.unwrap();
    assert_eq!(third.kind.delta_text().map(str::len), Some(4096));
    // Any other event publishes the gathered text first, in order.
    emitter
        .emit(
            &agent,
            1,
            Some("c1"),
            EventKind::ToolCallStart {
                tool: "t".into(),
                arguments: json!({}),
                side: None,
            },
        )
        .await;
    let rest = events.next().await.unwrap();
    assert_eq!(rest.kind.delta_text().map(str::len), Some(8000 - 4096));
    let call = events.next().await.unwrap();
    assert_eq!(
        (call.seq, call.tool_call_id.as_deref()),
        (rest.seq + 1, Some("c1"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logged_text_rebuilds_the_streamed_message() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let emitter = Emitter::new(store.clone(), "run-t", "thread-t", Emitter::channel());
    let agent = AgentPath::root("main");
    let mut sent = String::new();
    for i in 0..400 {
        let text = format!("word{i} ");
        sent.push_str(&text);
        emitter
            .emit(&agent, 1, None, EventKind::TextDelta { text, side: None })
            .await;
    }
    emitter.flush_pending().await;
    store.flush().await.unwrap();
    let stored = logged(&store, "run-t").await;
    assert!(
        stored.len() < 10,
        "coalesced, not one row per delta: {}",
        stored.len()
    );
    let rebuilt: String = stored.iter().filter_map(|e| e.kind.delta_text()).collect();
    assert_eq!(rebuilt, sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uap_agent_stream_events_are_a_mapping_of_a_runs_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let mut handle = runtime(&store)
        .start(spec(dir.path(), &["a"], 0, ToolPolicy::default()), true)
        .await
        .unwrap();
    let events = drain(handle.take_events().unwrap()).await;
    handle.outcome().await.unwrap();
    let uap: Vec<Value> = events
        .iter()
        .filter_map(RunEvent::to_agent_stream_event)
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let types: Vec<&str> = uap
        .iter()
        .map(|e| e["uap"]["type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        types,
        [
            "step_start",
            "action",
            "observation",
            "step_end",
            "step_start",
            "step_end"
        ]
    );
    assert_eq!(uap[1]["uap"]["step"], 1);
    assert_eq!(
        uap[1]["uap"]["data"]["toolCalls"][0]["toolCallId"],
        "call-00"
    );
    assert_eq!(
        uap[2]["uap"]["data"]["toolResults"][0]["result"]["line"],
        "a"
    );
    // A sub-agent's event is wrapped, with its path.
    let mut nested = events[1].clone();
    nested.agent = AgentPath::root("main").child("researcher");
    nested.kind = EventKind::TurnStart {
        messages: 1,
        side: None,
    };
    let wrapped = serde_json::to_value(nested.to_agent_stream_event().unwrap()).unwrap();
    assert_eq!(wrapped["uap"]["type"], "subagent_event");
    assert_eq!(
        wrapped["uap"]["data"]["innerEvent"]["uap"]["type"],
        "step_start"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_run_logs_an_error_then_its_failed_end() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    // One step that calls the tool, then the model has nothing more to say: it fails.
    let script = dir.path().join("short.json");
    std::fs::write(
        &script,
        json!({"responses": [{"toolCalls": [{"id": "c1", "name": "append_line", "arguments": {"line": "x"}}]}]})
            .to_string(),
    )
    .unwrap();
    let mut program = AgentProgram::new(format!("scripted-turns:{}", script.display()));
    program.tools = vec![ToolSpec {
        name: "append_line".into(),
        config: json!({"out": dir.path().join("out.txt"), "log": dir.path().join("log.txt")}),
    }];
    let mut handle = runtime(&store)
        .start(RunSpec::new("go", Program::Agent(program)), true)
        .await
        .unwrap();
    let events = drain(handle.take_events().unwrap()).await;
    assert_eq!(handle.outcome().await.unwrap().exit_code(), 1);
    let kinds = types(&events);
    let error = kinds
        .iter()
        .position(|k| k == "error")
        .expect("an error event");
    assert_eq!(kinds[error + 1], "run_end", "{kinds:?}");
    let EventKind::Error { message, .. } = &events[error].kind else {
        panic!("error")
    };
    assert!(message.contains("has 1 responses"), "{message}");
    let EventKind::RunEnd { status, error, .. } = &events.last().unwrap().kind else {
        panic!("run_end")
    };
    assert_eq!(status, "failed");
    assert!(
        error
            .as_deref()
            .is_some_and(|e| e.contains("has 1 responses"))
    );
}

// ----- property: concurrent emitters of one run number its events without gap -----

/// One thing a task emits.
#[derive(Debug, Clone)]
enum Emit {
    Status(String),
    Text(String),
    Reasoning(String),
    /// A text delta gathered without waiting (`push_delta`, as a model's stream does).
    Pushed(String),
}

fn emits() -> impl proptest::strategy::Strategy<Value = Vec<Vec<Emit>>> {
    use proptest::prelude::*;
    let emit = prop_oneof![
        "[a-z]{1,4}".prop_map(Emit::Status),
        "[a-z ]{1,4}".prop_map(Emit::Text),
        "[a-z ]{1,4}".prop_map(Emit::Reasoning),
        "[a-z ]{1,4}".prop_map(Emit::Pushed),
    ];
    prop::collection::vec(prop::collection::vec(emit, 1..12), 2..6)
}

/// What the log says of task `task` (agent `a{task}`): its statuses, its text, its reasoning.
fn of_task(events: &[RunEvent], task: usize) -> (Vec<String>, String, String) {
    let agent = AgentPath::root(&format!("a{task}"));
    let (mut statuses, mut text, mut reasoning) = (Vec::new(), String::new(), String::new());
    for event in events.iter().filter(|e| e.agent == agent) {
        match &event.kind {
            EventKind::Status { message, .. } => statuses.push(message.clone()),
            EventKind::TextDelta { text: t, .. } => text.push_str(t),
            EventKind::ReasoningDelta { text: t, .. } => reasoning.push_str(t),
            other => panic!("unexpected {other:?}"),
        }
    }
    (statuses, text, reasoning)
}

async fn emit_concurrently(store: &Store, run: &str, tasks: &[Vec<Emit>]) {
    let emitter = Emitter::new(store.clone(), run, "thread-concurrent", Emitter::channel());
    let live = emitter.subscribe(0);
    let mut running = tokio::task::JoinSet::new();
    for (task, emits) in tasks.iter().enumerate() {
        let (emitter, emits) = (emitter.clone(), emits.clone());
        running.spawn(async move {
            let agent = AgentPath::root(&format!("a{task}"));
            for emit in emits {
                match emit {
                    Emit::Status(message) => {
                        let kind = EventKind::Status {
                            message,
                            side: None,
                        };
                        emitter.emit(&agent, 1, None, kind).await;
                    }
                    Emit::Text(text) => {
                        let kind = EventKind::TextDelta { text, side: None };
                        emitter.emit(&agent, 1, None, kind).await;
                    }
                    Emit::Reasoning(text) => {
                        let kind = EventKind::ReasoningDelta { text, side: None };
                        emitter.emit(&agent, 1, None, kind).await;
                    }
                    Emit::Pushed(text) => {
                        emitter.push_delta(&agent, 1, EventKind::TextDelta { text, side: None });
                    }
                }
                tokio::task::yield_now().await;
            }
        });
    }
    while let Some(done) = running.join_next().await {
        done.unwrap();
    }
    emitter.flush_pending().await;
    drop(emitter);
    let seen = drain(live).await;
    let log = logged(store, run).await;
    assert_numbered(&log, 1);
    assert_eq!(
        seen.iter()
            .map(|e| (e.seq, &e.agent, &e.kind))
            .collect::<Vec<_>>(),
        log.iter()
            .map(|e| (e.seq, &e.agent, &e.kind))
            .collect::<Vec<_>>(),
        "live and logged differ"
    );
    for (task, emits) in tasks.iter().enumerate() {
        let mut expected = (Vec::new(), String::new(), String::new());
        for emit in emits {
            match emit {
                Emit::Status(message) => expected.0.push(message.clone()),
                Emit::Text(text) | Emit::Pushed(text) => expected.1.push_str(text),
                Emit::Reasoning(text) => expected.2.push_str(text),
            }
        }
        assert_eq!(of_task(&log, task), expected, "task {task}");
    }
}

/// Tasks sharing a run's emitter (parallel tool calls, sub-agents, a model's stream) emit at
/// once: the log numbers the run's events 1, 2, 3, … with no gap or duplicate, live
/// subscribers see exactly the logged events, and each task's events keep their order (its
/// deltas coalesced, never lost or reordered).
#[test]
fn concurrent_emitters_number_a_runs_events_without_gaps() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = runtime.block_on(sqlite(dir.path()));
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: 16,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    });
    // A fresh run per case (shrinking replays cases on the same database).
    let case = std::sync::atomic::AtomicUsize::new(0);
    runner
        .run(&emits(), |tasks| {
            let number = case.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let run = format!("run-concurrent-{number}");
            runtime.block_on(emit_concurrently(&store, &run, &tasks));
            Ok(())
        })
        .unwrap();
}
