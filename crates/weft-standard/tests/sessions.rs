//! Sessions with scripted models: every stop path of agents §5 in order, both binding
//! forms, `maxSessionTurns`, `sessionStatus` events, handoff preserving history, and the
//! `dual_ai` role views.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use weft_provider::adapters::scripted::{Script, ScriptedModel};
use weft_provider::provider::{LlmModel, Provider};
use weft_provider::{Message, ProviderRegistry};
use weft_runtime::event::{Emitter, EventKind, RunEvent};
use weft_standard::{
    Project, SessionOptions, SessionStatus, StandardSessions, StopReason, run_session,
};

const TOOLS: &[(&str, &str)] = &[
    (
        "tools/done.toml",
        "name = \"done\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" }, files = { type = \"array\" } } }\n",
    ),
    (
        "tools/fail.toml",
        "name = \"fail\"\nparameters = { type = \"object\", properties = { reason = { type = \"string\" } } }\n",
    ),
    (
        "tools/finish.toml",
        "name = \"finish\"\nparameters = { type = \"object\", properties = { answer = { type = \"string\" } } }\n",
    ),
    (
        "tools/status.toml",
        "name = \"status\"\nparameters = { type = \"object\", properties = { text = { type = \"string\" } } }\n",
    ),
    ("tools/note.toml", "name = \"note\"\n"),
];

fn project(dir: &Path, files: &[(&str, &str)], scripts: &[(&str, Value)]) -> Project {
    std::fs::write(
        dir.join("weft.toml"),
        "name = \"t\"\nmodel = \"scripted:a.json\"\n",
    )
    .expect("weft.toml");
    for (path, text) in TOOLS.iter().chain(files) {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    for (name, script) in scripts {
        std::fs::write(dir.join(name), script.to_string()).expect("script");
    }
    Project::load(dir).expect("valid project")
}

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"id": id, "name": name, "arguments": args})
}

const PROMPT: &str =
    "name = \"p\"\ntools = [\"done\", \"fail\", \"finish\", \"status\", \"note\"]\n";

async fn run(project: &Project, agent: &str) -> (weft_standard::SessionOutcome, Vec<RunEvent>) {
    let emitter = Emitter::live("session-test");
    let mut rx = emitter.subscribe(0);
    let mut options = SessionOptions::new(project.dir());
    options.events = Some(emitter);
    let outcome = run_session(project, agent, "hello", &options)
        .await
        .expect("session");
    drop(options);
    let mut events = Vec::new();
    let mut seq = 0;
    while let Some(e) = rx.next().await {
        // Numbered 1, 2, 3, … without gaps.
        seq += 1;
        assert_eq!(e.seq, seq);
        events.push(e);
    }
    (outcome, events)
}

fn single(side: &str, responses: Value) -> (tempfile::TempDir, Project) {
    let dir = tempfile::tempdir().expect("tempdir");
    let agent = format!("name = \"a\"\n[sideA]\nprompt = \"p\"\n{side}");
    let p = project(
        dir.path(),
        &[("agents/a.toml", &agent), ("prompts/p.toml", PROMPT)],
        &[("a.json", json!({"responses": responses}))],
    );
    (dir, p)
}

#[tokio::test]
async fn stop_order_1_session_bindings_come_before_the_stop_tool() {
    let (_d, p) = single(
        "stopTool = \"finish\"\nsessionStop = { name = \"done\", messageProperty = \"summary\", attachmentsProperty = \"files\" }\n",
        json!([{"text": "both", "toolCalls": [call("1", "finish", json!({"answer": "x"})), call("2", "done", json!({"summary": "all good", "files": ["a.txt"]}))]}]),
    );
    let (o, _) = run(&p, "a").await;
    assert_eq!(
        (o.status, o.reason),
        (SessionStatus::Completed, StopReason::SessionStop)
    );
    assert_eq!(o.message, "all good");
    assert_eq!(o.attachments, vec!["a.txt".to_owned()]);
}

#[tokio::test]
async fn session_fail_string_form_carries_the_arguments() {
    let (_d, p) = single(
        "sessionFail = \"fail\"\n",
        json!([{"toolCalls": [call("1", "fail", json!({"reason": "no"}))]}]),
    );
    let (o, _) = run(&p, "a").await;
    assert_eq!(
        (o.status, o.reason),
        (SessionStatus::Failed, StopReason::SessionFail)
    );
    assert_eq!(o.message, r#"{"reason":"no"}"#);
}

#[tokio::test]
async fn stop_order_2_stop_tool_comes_before_the_response() {
    let (_d, p) = single(
        "stopTool = \"finish\"\nstopToolResponseProperty = \"answer\"\n",
        json!([{"text": "here", "toolCalls": [call("1", "finish", json!({"answer": "42"}))]}]),
    );
    let (o, _) = run(&p, "a").await;
    assert_eq!(
        (o.status, o.reason, o.message.as_str()),
        (SessionStatus::Completed, StopReason::StopTool, "42")
    );
}

/// Without `stopToolResponseProperty` the turn's output is the stop tool's own result — not
/// another call's of the same step, nor the response's text.
#[tokio::test]
async fn a_stop_tools_output_is_its_own_result() {
    let (_d, p) = single(
        "stopTool = \"finish\"\n",
        json!([{"text": "here", "toolCalls": [
            call("1", "note", json!({"n": 1})),
            call("2", "finish", json!({"answer": "42"}))
        ]}]),
    );
    let (o, _) = run(&p, "a").await;
    assert_eq!(
        (o.status, o.reason, o.message.as_str()),
        (
            SessionStatus::Completed,
            StopReason::StopTool,
            r#"{"answer":"42"}"#
        )
    );
}

/// A session resumed from a checkpoint whose step called the stop tool and has its result
/// ends with that result, asking the model nothing; a state whose last result follows no
/// assistant message is no ended step, and the turn goes on.
#[tokio::test]
async fn a_resumed_turn_ended_by_its_stop_tools_result_asks_the_model_nothing() {
    let (_d, p) = single("stopTool = \"finish\"\n", json!([{"text": "asked again"}]));
    let now = "2026-11-24T00:00:00Z";
    let state = |first: Value| {
        let messages: Vec<Message> = serde_json::from_value(json!([
            {"type": "user", "id": "u1", "timestamp": now, "content": [{"type": "text", "text": "go"}]},
            first,
            {"type": "tool_result", "id": "t1", "timestamp": now,
             "results": [{"toolCallId": "c1", "result": "the answer", "isError": false}]}
        ]))
        .expect("messages");
        weft_agent::AgentState::initial()
            .with_messages(messages)
            .with_step(1)
    };
    let mut options = SessionOptions::new(p.dir());
    options.initial_state = state(json!({"type": "assistant", "id": "a1", "timestamp": now,
        "content": [], "toolCalls": [{"toolCallId": "c1", "toolName": "finish", "arguments": {}}]}));
    let ended = run_session(&p, "a", "", &options).await.expect("session");
    assert_eq!(
        (
            ended.status,
            ended.reason,
            ended.message.as_str(),
            ended.steps
        ),
        (
            SessionStatus::Completed,
            StopReason::StopTool,
            "the answer",
            0
        )
    );
    options.initial_state = state(json!({"type": "user", "id": "u2", "timestamp": now,
        "content": [{"type": "text", "text": "and then"}]}));
    let went_on = run_session(&p, "a", "", &options).await.expect("session");
    assert_eq!(
        (went_on.reason, went_on.message.as_str(), went_on.steps),
        (StopReason::Response, "asked again", 1)
    );
}

#[tokio::test]
async fn stop_order_3_response_stop_and_status_events() {
    let (_d, p) = single(
        "sessionStatus = { name = \"status\", messageProperty = \"text\" }\n",
        json!([{"toolCalls": [call("1", "status", json!({"text": "working"}))]}, {"text": "done!"}]),
    );
    let (o, events) = run(&p, "a").await;
    assert_eq!(
        (o.reason, o.message.as_str(), o.steps),
        (StopReason::Response, "done!", 2)
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::Status { message, .. } if message == "working"))
    );
}

#[tokio::test]
async fn stop_order_4_max_steps_is_last() {
    let note = json!({"toolCalls": [call("n", "note", json!({}))]});
    let (_d, p) = single("maxSteps = 2\n", json!([note, note, note]));
    let (o, _) = run(&p, "a").await;
    assert_eq!((o.reason, o.steps), (StopReason::MaxSteps, 2));
}

#[tokio::test]
async fn stop_on_response_false_keeps_the_turn_going() {
    let (_d, p) = single(
        "stopOnResponse = false\nsessionStop = \"done\"\n",
        json!([{"text": "thinking"}, {"toolCalls": [call("1", "done", json!({}))]}]),
    );
    let (o, _) = run(&p, "a").await;
    assert_eq!((o.reason, o.steps), (StopReason::SessionStop, 2));
}

type Seen = Arc<Mutex<Vec<(String, Vec<Message>)>>>;

fn capture_registry(seen: Seen) -> ProviderRegistry {
    let mut registry = ProviderRegistry::with_builtins();
    registry.register("capture", move || {
        let seen = seen.clone();
        Arc::new(
            Provider::new("capture", "0").with_llm(move |model_id: &str, _: &Value| {
                let script = Script::load(Path::new(model_id)).map_err(|e| {
                    weft_provider::UppError::llm(
                        weft_provider::ErrorCode::InvalidRequest,
                        "capture",
                        e.to_string(),
                    )
                })?;
                let (seen, id) = (seen.clone(), model_id.to_owned());
                let model: Arc<dyn LlmModel> =
                    Arc::new(ScriptedModel::from_fn(model_id, move |request| {
                        let k = request
                            .messages()
                            .filter(|m| matches!(m, Message::Assistant(_)))
                            .count();
                        seen.lock()
                            .expect("lock")
                            .push((id.clone(), request.messages().cloned().collect::<Vec<_>>()));
                        script.responses.get(k).cloned().ok_or_else(|| {
                            weft_provider::UppError::llm(
                                weft_provider::ErrorCode::InvalidRequest,
                                "capture",
                                "out of responses",
                            )
                        })
                    }));
                Ok(model)
            }),
        )
    });
    registry
}

fn roles(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m {
            Message::User(_) => format!("user:{}", m.text()),
            Message::Assistant(a) if a.has_tool_calls() => "assistant:<tools>".to_owned(),
            Message::Assistant(_) => format!("assistant:{}", m.text()),
            Message::ToolResult(_) => "tool".to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn dual_ai_role_views_and_max_session_turns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    let agent = "name = \"pair\"\ntype = \"dual_ai\"\nmaxSessionTurns = 3\n[sideA]\nprompt = \"pa\"\n[sideB]\nprompt = \"pb\"\n";
    let pa = format!(
        "name = \"pa\"\nmodel = \"capture:{}\"\ntools = [\"note\"]\n",
        a.display()
    );
    let pb = format!("name = \"pb\"\nmodel = \"capture:{}\"\n", b.display());
    let p = project(
        dir.path(),
        &[
            ("agents/pair.toml", agent),
            ("prompts/pa.toml", pa.as_str()),
            ("prompts/pb.toml", pb.as_str()),
        ],
        &[
            (
                "a.json",
                json!({"responses": [{"toolCalls": [call("t", "note", json!({}))]}, {"text": "A1"}, {"text": "A2"}]}),
            ),
            ("b.json", json!({"responses": [{"text": "B1"}]})),
        ],
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut options = SessionOptions::new(p.dir());
    options.providers = Arc::new(capture_registry(seen.clone()));
    let o = run_session(&p, "pair", "task", &options)
        .await
        .expect("session");
    assert_eq!(
        (o.status, o.reason, o.turns),
        (SessionStatus::Failed, StopReason::MaxSessionTurns, 3)
    );
    let seen = seen.lock().expect("lock").clone();
    let b_view: Vec<_> = seen
        .iter()
        .filter(|(id, _)| id.ends_with("b.json"))
        .map(|(_, m)| roles(m))
        .collect();
    // Side B sees side A's answer as the user, never A's tool calls.
    assert_eq!(b_view, vec![vec!["user:A1".to_owned()]]);
    let a_last = seen
        .iter()
        .filter(|(id, _)| id.ends_with("a.json"))
        .map(|(_, m)| roles(m))
        .next_back()
        .expect("A called");
    assert_eq!(
        a_last,
        vec![
            "user:task",
            "assistant:<tools>",
            "tool",
            "assistant:A1",
            "user:B1"
        ]
    );
}

#[tokio::test]
async fn handoff_keeps_the_history_and_records_a_thread_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = project(
        dir.path(),
        &[
            (
                "agents/triage.toml",
                "name = \"triage\"\n[sideA]\nprompt = \"triage\"\n",
            ),
            (
                "agents/billing.toml",
                "name = \"billing\"\nexposeAsTool = true\ntoolDescription = \"Billing.\"\n[sideA]\nprompt = \"billing\"\n",
            ),
            (
                "prompts/triage.toml",
                "name = \"triage\"\ntools = [\"billing\"]\n",
            ),
            (
                "prompts/billing.toml",
                "name = \"billing\"\nmodel = \"scripted:b.json\"\n",
            ),
        ],
        &[
            (
                "a.json",
                json!({"responses": [{"toolCalls": [call("h", "billing", json!({"message": "refund"}))]}]}),
            ),
            ("b.json", json!({"responses": [{"text": "Refund issued."}]})),
        ],
    );
    let (o, events) = run(&p, "triage").await;
    assert_eq!(
        (o.status, o.agent.as_str(), o.message.as_str()),
        (SessionStatus::Completed, "billing", "Refund issued.")
    );
    assert_eq!(
        roles(&o.state_a.messages_vec()),
        vec![
            "user:hello",
            "assistant:<tools>",
            "tool",
            "assistant:Refund issued."
        ]
    );
    assert_eq!(o.thread_events.len(), 1);
    assert_eq!(o.thread_events[0].event_type, "agent.handoff");
    assert_eq!(
        o.thread_events[0].target_agents,
        Some(vec!["billing".to_owned()])
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::Handoff { to, .. } if to == "billing"))
    );
}

#[tokio::test]
async fn tool_calls_run_sequentially_in_model_order() {
    let (_d, p) = single(
        "",
        json!([{"toolCalls": [call("1", "note", json!({"i": 1})), call("2", "note", json!({"i": 2})), call("3", "note", json!({"i": 3}))]}, {"text": "ok"}]),
    );
    let (_, events) = run(&p, "a").await;
    let order: Vec<String> = events
        .iter()
        .filter_map(|e| {
            let id = e.tool_call_id.as_deref().unwrap_or_default();
            match e.kind {
                EventKind::ToolCallStart { .. } => Some(format!("start{id}")),
                EventKind::ToolCallEnd { .. } => Some(format!("end{id}")),
                _ => None,
            }
        })
        .collect();
    assert_eq!(
        order,
        ["start1", "end1", "start2", "end2", "start3", "end3"]
    );
}

/// What a session's end looks like, for comparing an uninterrupted run with resumed ones.
fn ending(
    o: &weft_standard::SessionOutcome,
) -> (
    SessionStatus,
    StopReason,
    String,
    String,
    Vec<String>,
    Vec<String>,
) {
    (
        o.status,
        o.reason,
        o.message.clone(),
        o.agent.clone(),
        roles(&o.state_a.messages_vec()),
        o.state_b
            .as_ref()
            .map(|b| roles(&b.messages_vec()))
            .unwrap_or_default(),
    )
}

/// Runs `agent` durably into a fresh SQLite store, then resumes it from every crash point
/// (each prefix of the checkpoints, in the order they were written: the latest side A and
/// side B states of the prefix) in a new session, and checks that every resume ends exactly
/// as the uninterrupted run did. The models answer from the conversation (`capture`), as a
/// recorded model would.
async fn resumes_from_every_checkpoint(p: &Project, agent: &str, providers: ProviderRegistry) {
    use weft_agent::checkpoint::CheckpointMode;
    use weft_agent::{AgentState, SESSION_ID_KEY};
    use weft_runtime::ledger::RunContext;
    use weft_store::Store;

    let db = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&format!("sqlite:{}", db.path().join("weft.db").display()))
        .await
        .expect("store");
    let providers = Arc::new(providers);
    let thread = "thread-1";
    let mut options = SessionOptions::new(p.dir());
    options.providers = providers.clone();
    options.thread_id = Some(thread.into());
    options.initial_state = AgentState::initial()
        .with_message(Message::user("task"))
        .with_metadata(SESSION_ID_KEY, json!(thread));
    options.durable = Some(weft_standard::Durable {
        run: Arc::new(RunContext::new(
            store.clone(),
            "run-1",
            thread,
            "agent-1",
            [],
            [],
        )),
        store: store.clone(),
        mode: CheckpointMode::Sync,
        base_usage: Default::default(),
    });
    let whole = run_session(p, agent, "", &options).await.expect("session");
    let expected = ending(&whole);

    // Every checkpoint of both sides, in the order they were written.
    let side_b = format!("{thread}.sideB");
    let mut written = Vec::new();
    for (side, id) in [(0, thread), (1, side_b.as_str())] {
        for summary in store.list_checkpoints(id).await.expect("list") {
            let cp = store
                .checkpoint_at(id, summary.step)
                .await
                .expect("load")
                .expect("exists");
            let at = chrono::DateTime::parse_from_rfc3339(&summary.timestamp).expect("timestamp");
            written.push((at, side, cp.checkpoint.state));
        }
    }
    written.sort_by_key(|w| w.0);
    assert!(written.len() >= 4, "{} checkpoints", written.len());
    for crash in 0..=written.len() {
        let mut resumed = SessionOptions::new(p.dir());
        resumed.providers = providers.clone();
        resumed.initial_state = options.initial_state.clone();
        for (_, side, state) in &written[..crash] {
            if *side == 0 {
                resumed.initial_state = state.clone();
            } else {
                resumed.initial_state_b = Some(state.clone());
            }
        }
        let o = run_session(p, agent, "", &resumed)
            .await
            .expect("resumed session");
        assert_eq!(ending(&o), expected, "resumed after checkpoint {crash}");
    }
}

#[tokio::test]
async fn dual_ai_resumes_from_every_checkpoint_to_the_same_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    // Side A's turns end by `maxSteps` (2 steps: a note, then a text that does not stop
    // it), so a resume in the middle of one must count the step taken before.
    let agent = "name = \"pair\"\ntype = \"dual_ai\"\nmaxSessionTurns = 8\n[sideA]\nprompt = \"pa\"\nstopOnResponse = false\nmaxSteps = 2\n[sideB]\nprompt = \"pb\"\nsessionStop = { name = \"done\", messageProperty = \"summary\" }\n";
    let pa = format!(
        "name = \"pa\"\nmodel = \"capture:{}\"\ntools = [\"note\"]\n",
        a.display()
    );
    let pb = format!(
        "name = \"pb\"\nmodel = \"capture:{}\"\ntools = [\"note\", \"done\"]\n",
        b.display()
    );
    let p = project(
        dir.path(),
        &[
            ("agents/pair.toml", agent),
            ("prompts/pa.toml", pa.as_str()),
            ("prompts/pb.toml", pb.as_str()),
        ],
        &[
            (
                "a.json",
                json!({"responses": [
                    {"toolCalls": [call("a1", "note", json!({}))]}, {"text": "draft 1"},
                    {"toolCalls": [call("a2", "note", json!({}))]}, {"text": "draft 2"}]}),
            ),
            (
                "b.json",
                json!({"responses": [
                    {"toolCalls": [call("b1", "note", json!({}))]}, {"text": "fix the title"},
                    {"toolCalls": [call("b2", "done", json!({"summary": "approved"}))]}]}),
            ),
        ],
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    resumes_from_every_checkpoint(&p, "pair", capture_registry(seen)).await;
}

/// Triage notes, then hands off to billing, which notes and finishes with its stop tool.
fn handoff_project(dir: &Path) -> Project {
    let a = dir.join("a.json");
    let b = dir.join("b.json");
    project(
        dir,
        &[
            (
                "agents/triage.toml",
                "name = \"triage\"\n[sideA]\nprompt = \"triage\"\nstopTool = \"finish\"\n",
            ),
            (
                "agents/billing.toml",
                "name = \"billing\"\nexposeAsTool = true\ntoolDescription = \"Billing.\"\n[sideA]\nprompt = \"billing\"\nstopTool = \"finish\"\nstopToolResponseProperty = \"answer\"\n",
            ),
            (
                "prompts/triage.toml",
                format!(
                    "name = \"triage\"\nmodel = \"capture:{}\"\ntools = [\"note\", \"billing\", \"finish\"]\n",
                    a.display()
                )
                .as_str(),
            ),
            (
                "prompts/billing.toml",
                format!(
                    "name = \"billing\"\nmodel = \"capture:{}\"\ntools = [\"note\", \"finish\"]\n",
                    b.display()
                )
                .as_str(),
            ),
        ],
        &[
            (
                "a.json",
                json!({"responses": [
                    {"toolCalls": [call("t1", "note", json!({}))]},
                    {"toolCalls": [call("t2", "billing", json!({"message": "refund"}))]}]}),
            ),
            (
                // Billing sees triage's two assistant messages too (the history is shared).
                "b.json",
                json!({"responses": [{}, {}, {"toolCalls": [call("b1", "note", json!({}))]},
                    {"text": "checking", "toolCalls": [call("b2", "finish", json!({"answer": "refund issued"}))]}]}),
            ),
        ],
    )
}

#[tokio::test]
async fn handoff_session_resumes_from_every_checkpoint_to_the_same_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = handoff_project(dir.path());
    let seen = Arc::new(Mutex::new(Vec::new()));
    resumes_from_every_checkpoint(&p, "triage", capture_registry(seen)).await;
}

/// Durable options for run `run` of thread `thread-1` in `store`, starting from `state`.
fn durable_options(
    p: &Project,
    store: &weft_store::Store,
    run: &str,
    state: weft_agent::AgentState,
) -> SessionOptions {
    let mut options = SessionOptions::new(p.dir());
    options.providers = Arc::new(capture_registry(Arc::new(Mutex::new(Vec::new()))));
    options.thread_id = Some("thread-1".into());
    options.initial_state = state;
    options.durable = Some(weft_standard::Durable {
        run: Arc::new(weft_runtime::ledger::RunContext::new(
            store.clone(),
            run,
            "thread-1",
            "agent-1",
            [],
            [],
        )),
        store: store.clone(),
        mode: weft_agent::checkpoint::CheckpointMode::Sync,
        base_usage: Default::default(),
    });
    options
}

async fn handoffs_logged(store: &weft_store::Store, run: &str) -> usize {
    use weft_store::EventLog as _;
    let query = weft_store::EventQuery {
        run_id: Some(run.into()),
        types: vec!["handoff".into()],
        ..weft_store::EventQuery::default()
    };
    store.events(&query).await.expect("events").len()
}

#[tokio::test]
async fn a_resumed_handoff_is_logged_exactly_once() {
    use weft_agent::{AgentState, SESSION_ID_KEY};
    let dir = tempfile::tempdir().expect("tempdir");
    let p = handoff_project(dir.path());
    let db = tempfile::tempdir().expect("tempdir");
    let store = weft_store::Store::open(&format!("sqlite:{}", db.path().join("weft.db").display()))
        .await
        .expect("store");
    let start = AgentState::initial()
        .with_message(Message::user("task"))
        .with_metadata(SESSION_ID_KEY, json!("thread-1"));
    let whole = run_session(
        &p,
        "triage",
        "",
        &durable_options(&p, &store, "run-1", start),
    )
    .await
    .expect("session");
    assert_eq!(whole.agent, "billing");
    assert_eq!(handoffs_logged(&store, "run-1").await, 1);
    // The checkpoint whose last step is the handoff call: triage's last one.
    let mut handed_off = None;
    for summary in store.list_checkpoints("thread-1").await.expect("list") {
        let cp = store
            .checkpoint_at("thread-1", summary.step)
            .await
            .expect("load")
            .expect("exists");
        if cp.checkpoint.state.metadata()[weft_standard::SESSION_MARK_KEY]["agent"] == "triage" {
            handed_off = Some(cp.checkpoint.state);
        }
    }
    let handed_off = handed_off.expect("a triage checkpoint");
    // Resumed after the handoff was logged: not logged again.
    let again = run_session(
        &p,
        "triage",
        "",
        &durable_options(&p, &store, "run-1", handed_off.clone()),
    )
    .await
    .expect("resumed");
    assert_eq!(ending(&again), ending(&whole));
    assert_eq!(handoffs_logged(&store, "run-1").await, 1);
    // Resumed where the crash came before the log write (a run whose log lacks it): logged.
    // An event of another type in that log carrying the handoff's turn number (one a newer
    // Weft wrote, say) is not taken for it.
    use weft_store::EventLog as _;
    let handoff = store
        .events(&weft_store::EventQuery {
            run_id: Some("run-1".into()),
            types: vec!["handoff".into()],
            ..weft_store::EventQuery::default()
        })
        .await
        .expect("events");
    let turn = handoff[0].payload["turn"].clone();
    assert!(turn.is_u64(), "{turn}");
    store
        .append_event(weft_store::NewEvent::new(
            "turn_note",
            "run-2",
            "thread-1",
            "agent-1",
            json!({ "turn": turn }),
        ))
        .await
        .expect("append");
    let again = run_session(
        &p,
        "triage",
        "",
        &durable_options(&p, &store, "run-2", handed_off),
    )
    .await
    .expect("resumed");
    assert_eq!(ending(&again), ending(&whole));
    assert_eq!(handoffs_logged(&store, "run-2").await, 1);
}

#[tokio::test]
async fn a_new_input_on_a_finished_session_starts_a_fresh_turn() {
    // Continuing a conversation: the earlier turn's steps do not count against `maxSteps`.
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a.json");
    let p = project(
        dir.path(),
        &[
            (
                "agents/a.toml",
                "name = \"a\"\n[sideA]\nprompt = \"p\"\nmaxSteps = 2\n",
            ),
            (
                "prompts/p.toml",
                format!(
                    "name = \"p\"\nmodel = \"capture:{}\"\ntools = [\"note\"]\n",
                    a.display()
                )
                .as_str(),
            ),
        ],
        &[(
            "a.json",
            json!({"responses": [
                {"toolCalls": [call("n1", "note", json!({}))]}, {"text": "first"},
                {"toolCalls": [call("n2", "note", json!({}))]}, {"text": "second"}]}),
        )],
    );
    let mut options = SessionOptions::new(p.dir());
    options.providers = Arc::new(capture_registry(Arc::new(Mutex::new(Vec::new()))));
    let first = run_session(&p, "a", "one", &options)
        .await
        .expect("session");
    assert_eq!(
        (first.reason, first.message.as_str()),
        (StopReason::Response, "first")
    );
    options.initial_state = first.state_a;
    let second = run_session(&p, "a", "two", &options)
        .await
        .expect("session");
    assert_eq!(
        (second.reason, second.message.as_str(), second.steps),
        (StopReason::Response, "second", 2)
    );
}

#[tokio::test]
async fn a_state_without_session_marks_goes_on_as_side_a_first_turn() {
    // What a run saved before session marks existed looks like: a state that ends with a
    // tool result, no `weftSession` metadata.
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a.json");
    let prompt = format!(
        "name = \"p\"\nmodel = \"capture:{}\"\ntools = [\"note\"]\n",
        a.display()
    );
    let p = project(
        dir.path(),
        &[
            (
                "agents/one_step.toml",
                "name = \"one_step\"\n[sideA]\nprompt = \"p\"\nmaxSteps = 1\n",
            ),
            (
                "agents/helper.toml",
                "name = \"helper\"\n[sideA]\nprompt = \"p\"\n",
            ),
            ("prompts/p.toml", prompt.as_str()),
        ],
        &[(
            "a.json",
            json!({"responses": [{"toolCalls": [call("n1", "note", json!({}))]}, {"text": "done"}]}),
        )],
    );
    let mut options = SessionOptions::new(p.dir());
    options.providers = Arc::new(capture_registry(Arc::new(Mutex::new(Vec::new()))));
    let first = run_session(&p, "one_step", "task", &options)
        .await
        .expect("session");
    assert_eq!(first.reason, StopReason::MaxSteps);
    options.initial_state = first
        .state_a
        .with_metadata(weft_standard::SESSION_MARK_KEY, Value::Null);
    let rest = run_session(&p, "helper", "", &options)
        .await
        .expect("session");
    assert_eq!(
        (rest.reason, rest.message.as_str(), rest.steps),
        (StopReason::Response, "done", 1)
    );
    // An empty state with no input is still refused.
    options.initial_state = weft_agent::AgentState::initial();
    assert!(matches!(
        run_session(&p, "helper", "", &options).await,
        Err(weft_standard::SessionError::NoInput)
    ));
}

/// A session outside a durable run passes each step on as a `turn_start` and a `turn_end`
/// with the step's tokens and the run's so far, and nothing else as either.
#[tokio::test]
async fn each_step_outside_a_durable_run_is_a_turn_start_and_a_turn_end_with_its_tokens() {
    let (_d, p) = single(
        "",
        json!([
            {"toolCalls": [call("1", "note", json!({}))], "usage": {"inputTokens": 10, "outputTokens": 1}},
            {"text": "done", "usage": {"inputTokens": 20, "outputTokens": 2}}
        ]),
    );
    let (outcome, events) = run(&p, "a").await;
    assert_eq!(outcome.reason, StopReason::Response);
    let turns: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TurnStart { .. } => Some("start".to_owned()),
            EventKind::TurnEnd {
                input_tokens,
                output_tokens,
                run_input_tokens,
                run_output_tokens,
                ..
            } => Some(format!(
                "end {input_tokens}/{output_tokens} run {run_input_tokens}/{run_output_tokens}"
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        turns,
        ["start", "end 10/1 run 10/1", "start", "end 20/2 run 30/3"]
    );
}

/// Outside a durable run the model's text and reasoning stream as deltas, and each call
/// starts with its own arguments (assembled from the streamed pieces) and ends with its
/// result.
#[tokio::test]
async fn outside_a_durable_run_text_reasoning_and_each_calls_arguments_stream() {
    let (_d, p) = single(
        "",
        json!([
            {"toolCalls": [
                call("1", "status", json!({"text": "first"})),
                call("2", "status", json!({"text": "second"}))
            ]},
            // The next step's call streams at index 1 again (after its reasoning block).
            {"reasoning": "one more", "toolCalls": [call("3", "status", json!({"text": "third"}))]},
            {"text": "all done now"}
        ]),
    );
    let (outcome, events) = run(&p, "a").await;
    assert_eq!(outcome.message, "all done now");
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    for event in &events {
        match &event.kind {
            EventKind::TextDelta { text: t, .. } => text.push_str(t),
            EventKind::ReasoningDelta { text: t, .. } => reasoning.push_str(t),
            EventKind::ToolCallStart {
                tool, arguments, ..
            } => starts.push((event.tool_call_id.clone(), tool.clone(), arguments.clone())),
            EventKind::ToolCallEnd { tool, result, .. } => {
                ends.push((event.tool_call_id.clone(), tool.clone(), result.is_some()))
            }
            _ => {}
        }
    }
    assert_eq!(text, "all done now");
    assert_eq!(reasoning, "one more");
    assert_eq!(
        starts,
        [
            (
                Some("1".to_owned()),
                "status".to_owned(),
                json!({"text": "first"})
            ),
            (
                Some("2".to_owned()),
                "status".to_owned(),
                json!({"text": "second"})
            ),
            (
                Some("3".to_owned()),
                "status".to_owned(),
                json!({"text": "third"})
            )
        ]
    );
    let ended: Vec<&str> = ends
        .iter()
        .filter(|(_, tool, has_result)| tool == "status" && *has_result)
        .filter_map(|(id, _, _)| id.as_deref())
        .collect();
    assert_eq!(ended, ["1", "2", "3"]);
}

/// A new input after a session ended starts a new session on the same conversation: its
/// turns are numbered after the earlier ones, and `maxSessionTurns` counts its own.
#[tokio::test]
async fn a_second_session_on_a_conversation_gets_its_own_max_session_turns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    let agent = "name = \"pair\"\ntype = \"dual_ai\"\nmaxSessionTurns = 2\n[sideA]\nprompt = \"pa\"\n[sideB]\nprompt = \"pb\"\n";
    let pa = format!("name = \"pa\"\nmodel = \"capture:{}\"\n", a.display());
    let pb = format!("name = \"pb\"\nmodel = \"capture:{}\"\n", b.display());
    let p = project(
        dir.path(),
        &[
            ("agents/pair.toml", agent),
            ("prompts/pa.toml", pa.as_str()),
            ("prompts/pb.toml", pb.as_str()),
        ],
        &[
            (
                "a.json",
                json!({"responses": [{"text": "A1"}, {"text": "A2"}, {"text": "A3"}]}),
            ),
            (
                "b.json",
                json!({"responses": [{"text": "B1"}, {"text": "B2"}, {"text": "B3"}]}),
            ),
        ],
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut options = SessionOptions::new(p.dir());
    options.providers = Arc::new(capture_registry(seen.clone()));
    let first = run_session(&p, "pair", "task", &options)
        .await
        .expect("session");
    assert_eq!(
        (first.reason, first.turns),
        (StopReason::MaxSessionTurns, 2)
    );
    options.initial_state = first.state_a.clone();
    options.initial_state_b = first.state_b.clone();
    let second = run_session(&p, "pair", "again", &options)
        .await
        .expect("session");
    // Two turns of its own, numbered 3 and 4.
    assert_eq!(
        (second.reason, second.turns),
        (StopReason::MaxSessionTurns, 4),
        "{second:?}"
    );
    // Each side answered once more, in the conversation it had.
    let answers: Vec<String> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|(id, messages)| {
            let side = if id.ends_with("a.json") { "A" } else { "B" };
            format!("{side}:{}", messages.len())
        })
        .collect();
    assert_eq!(answers, ["A:1", "B:1", "A:3", "B:3"]);
    // A later resume finds the second session's last turn: its marks come after the first's.
    options.initial_state = second.state_a.clone();
    options.initial_state_b = second.state_b.clone();
    let resumed = run_session(&p, "pair", "", &options)
        .await
        .expect("session");
    assert_eq!(resumed.reason, StopReason::MaxSessionTurns, "{resumed:?}");
    assert_eq!(seen.lock().expect("lock").len(), 4, "nothing asked again");
    // A run attached to the finished conversation, its input already in the state (a
    // queued message): a third session of two turns of its own, numbered 5 and 6.
    options.initial_state = second.state_a.with_message(Message::user("and more"));
    options.initial_state_b = second.state_b.clone();
    let third = run_session(&p, "pair", "", &options)
        .await
        .expect("session");
    assert_eq!(
        (third.reason, third.turns),
        (StopReason::MaxSessionTurns, 6),
        "{third:?}"
    );
    assert_eq!(seen.lock().expect("lock").len(), 6);
}

/// The `stopping` provider: its model calls `note` `answers` times, then stops the session
/// (cancels `signal`) at the next call; `calls` counts the calls.
fn stopping_after(
    answers: usize,
    signal: tokio_util::sync::CancellationToken,
    calls: Arc<std::sync::atomic::AtomicUsize>,
) -> ProviderRegistry {
    use std::sync::atomic::Ordering;
    let mut registry = ProviderRegistry::with_builtins();
    registry.register("stopping", move || {
        let (signal, calls) = (signal.clone(), calls.clone());
        Arc::new(
            Provider::new("stopping", "0").with_llm(move |model_id: &str, _: &Value| {
                let (signal, calls) = (signal.clone(), calls.clone());
                let model: Arc<dyn LlmModel> =
                    Arc::new(ScriptedModel::from_fn(model_id, move |_request| {
                        let n = calls.fetch_add(1, Ordering::SeqCst);
                        if n >= answers {
                            signal.cancel();
                            return Err(weft_provider::UppError::llm(
                                weft_provider::ErrorCode::Cancelled,
                                "stopping",
                                "stopped",
                            ));
                        }
                        Ok(serde_json::from_value(json!({"toolCalls": [
                            {"id": format!("n{n}"), "name": "note", "arguments": {}}
                        ]}))
                        .expect("a response"))
                    }));
                Ok(model)
            }),
        )
    });
    registry
}

/// A turn stopped, resumed and stopped again still counts its steps from where it began:
/// `maxSteps` (4) ends it at its fourth step, not four steps after the last resume.
#[tokio::test]
async fn a_turn_resumed_twice_counts_its_steps_from_where_it_began() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().expect("tempdir");
    let p = project(
        dir.path(),
        &[
            (
                "agents/a.toml",
                "name = \"a\"\n[sideA]\nprompt = \"p\"\nmaxSteps = 4\n",
            ),
            (
                "prompts/p.toml",
                "name = \"p\"\nmodel = \"stopping:m\"\ntools = [\"note\"]\n",
            ),
        ],
        &[],
    );
    let mut state = weft_agent::AgentState::initial();
    let mut input = "go";
    // Two steps, stopped; one more, stopped; then the rest.
    for (answers, status) in [
        (2, SessionStatus::Interrupted),
        (1, SessionStatus::Interrupted),
    ] {
        let mut options = SessionOptions::new(p.dir());
        let calls = Arc::new(AtomicUsize::new(0));
        options.providers = Arc::new(stopping_after(answers, options.signal.clone(), calls));
        options.initial_state = state;
        let stopped = run_session(&p, "a", input, &options)
            .await
            .expect("session");
        assert_eq!(stopped.status, status, "{}", stopped.message);
        state = stopped.state_a;
        input = "";
    }
    assert_eq!(state.step(), 3);
    let mut options = SessionOptions::new(p.dir());
    let calls = Arc::new(AtomicUsize::new(0));
    options.providers = Arc::new(stopping_after(10, options.signal.clone(), calls.clone()));
    options.initial_state = state;
    let ended = run_session(&p, "a", "", &options).await.expect("session");
    assert_eq!(ended.reason, StopReason::MaxSteps, "{}", ended.message);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one step was left of four");
}

/// A session's `base_urls` option (what `weft run` resolves for a provider) points that
/// provider's model calls at the given server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_base_url_points_its_provider_at_that_server() {
    use weft_testkit::{ReplayServer, Reply};
    let chunk = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "tiny",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "from the server"},
            "finish_reason": "stop"}]});
    let server = ReplayServer::start(vec![Reply::sse(
        &format!("data: {chunk}\n\ndata: [DONE]\n\n"),
        64,
    )])
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let p = project(
        dir.path(),
        &[
            ("agents/a.toml", "name = \"a\"\n[sideA]\nprompt = \"p\"\n"),
            (
                "prompts/p.toml",
                "name = \"p\"\nmodel = \"openai-compatible:tiny\"\n",
            ),
        ],
        &[],
    );
    let mut options = SessionOptions::new(p.dir());
    options
        .base_urls
        .insert("openai-compatible".into(), format!("{}/v1", server.url()));
    let outcome = run_session(&p, "a", "hello?", &options)
        .await
        .expect("session");
    assert_eq!(
        (outcome.reason, outcome.message.as_str()),
        (StopReason::Response, "from the server"),
        "{outcome:?}"
    );
    assert_eq!(server.received().len(), 1);
}

/// A prompt's `headers` (with `${NAME}` from its env) and `outputSchema` reach the provider:
/// checked on the HTTP request a Chat Completions server received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_headers_and_output_schema_reach_the_provider() {
    use weft_testkit::{ReplayServer, Reply};
    let answer = json!({"verdict": "ok"});
    // Sessions stream: one Chat Completions chunk with the answer, then the end.
    let chunk = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "tiny",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": answer.to_string()},
            "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}});
    let body = format!("data: {chunk}\n\ndata: [DONE]\n\n");
    let server = ReplayServer::start(vec![Reply::sse(&body, 64)]).await;
    let url = format!("{}/v1", server.url());
    let mut registry = ProviderRegistry::with_builtins();
    registry.register("replay", move || {
        let mut provider =
            Arc::unwrap_or_clone(weft_provider::adapters::openai_chat::compatible_provider());
        provider.default_config = weft_provider::ProviderConfig::default()
            .base_url(url.clone())
            .api_key("test-key");
        Arc::new(provider)
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let prompt = "name = \"p\"\nmodel = \"replay:tiny\"\nsystem = \"Judge.\"\n\
        outputSchema = { type = \"object\", properties = { verdict = { type = \"string\" } }, required = [\"verdict\"] }\n\
        [env]\nBETA = \"context-1m-2025-08-07\"\n\
        [headers]\nanthropic-beta = \"${BETA}\"\nx-team = \"evals\"\n";
    let p = project(
        dir.path(),
        &[
            ("agents/a.toml", "name = \"a\"\n[sideA]\nprompt = \"p\"\n"),
            ("prompts/p.toml", prompt),
        ],
        &[],
    );
    let mut options = SessionOptions::new(p.dir());
    options.providers = Arc::new(registry);
    let outcome = run_session(&p, "a", "Is it fine?", &options)
        .await
        .expect("session");
    assert_eq!(outcome.reason, StopReason::Response, "{outcome:?}");
    let request = &server.received()[0];
    assert_eq!(
        request.header("anthropic-beta"),
        Some("context-1m-2025-08-07")
    );
    assert_eq!(request.header("x-team"), Some("evals"));
    let body = request.json();
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["required"],
        json!(["verdict"])
    );
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "Judge."})
    );
}

/// A run attached to a thread whose session ended (`Runtime::start_on`): the new input is
/// side A's fresh turn, answered, not mistaken for the end of the earlier turn; and a kill
/// right after the attach (before any step) resumes to the same answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_attached_to_a_finished_thread_answers_its_new_input() {
    use weft_runtime::spec::{Program, RunSpec, SessionProgram};
    use weft_runtime::{ResumeOptions, RunEnd, Runtime};
    use weft_store::Runs as _;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("turns.json"),
        json!({"responses": [
            {"toolCalls": [call("n1", "note", json!({}))]}, {"text": "first answer"},
            {"toolCalls": [call("n2", "note", json!({}))]}, {"text": "second answer"},
            {"text": "third answer"}]})
        .to_string(),
    )
    .expect("script");
    let p = project(
        dir.path(),
        &[
            // maxSteps 2: the earlier runs' steps must not count against the new turn.
            (
                "agents/a.toml",
                "name = \"a\"\n[sideA]\nprompt = \"p\"\nmaxSteps = 2\n",
            ),
            (
                "prompts/p.toml",
                "name = \"p\"\nmodel = \"scripted-turns:turns.json\"\ntools = [\"note\"]\n",
            ),
        ],
        &[],
    );
    let store =
        weft_store::Store::open(&format!("sqlite:{}", dir.path().join("weft.db").display()))
            .await
            .expect("store");
    let runtime = Runtime::new(store.clone()).with_sessions(Arc::new(StandardSessions));
    let spec = |input: &str| {
        RunSpec::new(
            input,
            Program::Session(SessionProgram {
                project: Some(p.snapshot().expect("snapshot")),
                workspace: p.dir().to_path_buf(),
                agent: "a".into(),
                model_override: None,
                project_dir: None,
                sandbox: None,
                base_urls: Default::default(),
                profile: None,
            }),
        )
    };
    let first = runtime
        .start(spec("hello"), false)
        .await
        .expect("start")
        .outcome()
        .await
        .expect("outcome");
    assert_eq!(
        first.end,
        RunEnd::Completed {
            output: "first answer".into()
        }
    );
    let thread = store
        .run(&first.run_id)
        .await
        .expect("run")
        .expect("recorded")
        .thread_id;
    let second = runtime
        .start_on(Some(&thread), spec("again"), false)
        .await
        .expect("start on the thread")
        .outcome()
        .await
        .expect("outcome");
    assert_eq!(
        second.end,
        RunEnd::Completed {
            output: "second answer".into()
        }
    );
    // Recorded but not driven (as after a kill before its first step): a resume answers it.
    let third_spec = spec("once more");
    let handle = runtime
        .start_on(Some(&thread), third_spec, false)
        .await
        .expect("start");
    handle.abort();
    let mut third = handle.outcome().await.expect("outcome");
    if third.end == RunEnd::Interrupted {
        third = runtime
            .resume(&third.run_id, ResumeOptions::default(), false)
            .await
            .expect("resume")
            .outcome()
            .await
            .expect("outcome");
    }
    assert_eq!(
        third.end,
        RunEnd::Completed {
            output: "third answer".into()
        }
    );
}

/// A session resumed in the middle of its second session (a conversation's next message)
/// still counts `maxSessionTurns` from that session's start: the resumed pair takes the one
/// turn it had left, not none.
#[tokio::test]
async fn a_resume_inside_a_later_session_counts_its_turns_from_that_sessions_start() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().expect("tempdir");
    // Each side turn is one step (a `note` call), so each model call is one turn.
    let p = project(
        dir.path(),
        &[
            (
                "agents/pair.toml",
                "name = \"pair\"\ntype = \"dual_ai\"\nmaxSessionTurns = 2\n\
                 [sideA]\nprompt = \"p\"\nmaxSteps = 1\n[sideB]\nprompt = \"p\"\nmaxSteps = 1\n",
            ),
            (
                "prompts/p.toml",
                "name = \"p\"\nmodel = \"stopping:m\"\ntools = [\"note\"]\n",
            ),
        ],
        &[],
    );
    let session = |answers: usize,
                   state: (weft_agent::AgentState, Option<weft_agent::AgentState>),
                   input: &'static str| {
        let p = &p;
        async move {
            let mut options = SessionOptions::new(p.dir());
            let calls = Arc::new(AtomicUsize::new(0));
            options.providers = Arc::new(stopping_after(
                answers,
                options.signal.clone(),
                calls.clone(),
            ));
            (options.initial_state, options.initial_state_b) = state;
            let outcome = run_session(p, "pair", input, &options)
                .await
                .expect("session");
            (outcome, calls.load(Ordering::SeqCst))
        }
    };
    let (first, _) = session(10, (weft_agent::AgentState::initial(), None), "task").await;
    assert_eq!(
        (first.reason, first.turns),
        (StopReason::MaxSessionTurns, 2)
    );
    // The second session: side A answers (turn 3), side B is stopped in turn 4.
    let (second, _) = session(1, (first.state_a, first.state_b), "again").await;
    assert_eq!(second.status, SessionStatus::Interrupted, "{second:?}");
    // Resumed: side B's turn 4 is taken, and the session's two turns are then done.
    let (resumed, calls) = session(10, (second.state_a, second.state_b), "").await;
    assert_eq!(
        (resumed.reason, resumed.turns, calls),
        (StopReason::MaxSessionTurns, 4, 1),
        "{resumed:?}"
    );
}

/// Agents handing a task back and forth: the session follows `MAX_HANDOFFS` handoffs, then
/// fails at the next one, saying so — it neither loops nor completes with a handoff message
/// as its answer.
#[tokio::test]
async fn agents_handing_a_task_back_and_forth_fail_at_the_handoff_limit() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().expect("tempdir");
    let agent = |name: &str| {
        format!(
            "name = \"{name}\"\nexposeAsTool = true\ntoolDescription = \"Takes over.\"\n\
             [sideA]\nprompt = \"{name}\"\n"
        )
    };
    // `pingpong:OTHER`: every answer hands the task to OTHER.
    let prompt = |name: &str, other: &str| {
        format!("name = \"{name}\"\nmodel = \"pingpong:{other}\"\ntools = [\"{other}\"]\n")
    };
    let p = project(
        dir.path(),
        &[
            ("agents/ping.toml", &agent("ping")),
            ("agents/pong.toml", &agent("pong")),
            ("prompts/ping.toml", &prompt("ping", "pong")),
            ("prompts/pong.toml", &prompt("pong", "ping")),
        ],
        &[],
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let mut registry = ProviderRegistry::with_builtins();
    let counter = calls.clone();
    registry.register("pingpong", move || {
        let counter = counter.clone();
        Arc::new(
            Provider::new("pingpong", "0").with_llm(move |other: &str, _: &Value| {
                let (counter, other) = (counter.clone(), other.to_owned());
                let model: Arc<dyn LlmModel> =
                    Arc::new(ScriptedModel::from_fn("pingpong", move |_request| {
                        let n = counter.fetch_add(1, Ordering::SeqCst);
                        Ok(serde_json::from_value(json!({"toolCalls": [
                            call(&format!("h{n}"), &other, json!({"message": "yours"}))
                        ]}))
                        .expect("a response"))
                    }));
                Ok(model)
            }),
        )
    });
    let emitter = Emitter::live("session-test");
    let mut rx = emitter.subscribe(0);
    let mut options = SessionOptions::new(p.dir());
    options.providers = Arc::new(registry);
    options.events = Some(emitter);
    let o = run_session(&p, "ping", "a task", &options)
        .await
        .expect("session");
    drop(options);
    let mut logged = 0;
    while let Some(e) = rx.next().await {
        logged += usize::from(matches!(e.kind, EventKind::Handoff { .. }));
    }
    let limit = weft_standard::MAX_HANDOFFS as usize;
    assert_eq!(
        (o.status, o.reason),
        (SessionStatus::Failed, StopReason::StopTool),
        "{o:?}"
    );
    assert_eq!(
        o.message,
        format!(
            "the session reached its limit of {limit} handoffs: ping handed off to pong once more"
        )
    );
    // Sixteen handoffs followed (logged, and in the thread record), on the seventeenth answer.
    assert_eq!((o.thread_events.len(), logged), (limit, limit));
    assert_eq!(calls.load(Ordering::SeqCst), limit + 1);
    assert_eq!(o.agent, "ping");
}
