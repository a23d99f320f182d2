//! What one side turn offers its model before each step, and how it ends when it is stopped:
//! the tools an MCP server adds mid-turn (offered from the next step, logged once), the SOP
//! phase's tools and instructions and the child registry after the prompt's system text, a run
//! stopped during a context compression's summary call, and a call waiting for a decision
//! under an SOP role. Each on a real runtime with a SQLite store, or `run_session`.

mod common;

use common::{Requests, call, calls, requests};

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use weft_provider::adapters::scripted::ScriptedModel;
use weft_provider::provider::{LlmModel, Provider};
use weft_provider::{ErrorCode, ProviderRegistry, UppError};
use weft_runtime::event::EventKind;
use weft_runtime::{RunEnd, RunOutcome};
use weft_standard::{Project, SessionOptions, SessionStatus, run_session};
use weft_store::{Store, Subagents as _};

/// A project in `dir` whose agent `lead` (`ai_human`) answers from `lead.json` with `prompt`
/// (the lead's prompt's keys) and `extra` added to weft.toml.
fn write_project(dir: &Path, extra: &str, prompt: &str, lead: &[Value]) -> Project {
    let model = format!("recording:{}", dir.join("lead.json").display());
    let files = [
        ("weft.toml", format!("name = \"t\"\nmodel = \"{model}\"\n{extra}")),
        (
            "tools/lookup.toml",
            "name = \"lookup\"\nparameters = { type = \"object\", properties = { term = { type = \"string\" } } }\n".into(),
        ),
        ("agents/lead.toml", "name = \"lead\"\n[sideA]\nprompt = \"lead\"\n".into()),
        ("prompts/lead.toml", format!("name = \"lead\"\n{prompt}")),
        ("lead.json", json!({ "responses": lead }).to_string()),
        ("notes.md", "# notes\n".into()),
    ];
    common::write_files(dir, files);
    Project::load(dir).expect("valid project")
}

/// A run of `lead` with `input` on `thread` (a new one when `None`), to its end.
async fn run_lead(
    project: &Project,
    store: &Store,
    seen: &Requests,
    thread: Option<&str>,
) -> RunOutcome {
    common::runtime(store, seen)
        .start_on(thread, common::session_spec(project, "lead", "go"), false)
        .await
        .expect("start")
        .outcome()
        .await
        .expect("outcome")
}

/// Asserts that each of `names` is among `offered` exactly once.
fn offered_once(offered: &[&str], names: &[&str]) {
    for name in names {
        let count = offered.iter().filter(|n| *n == name).count();
        assert_eq!(count, 1, "{name} in {offered:?}");
    }
}

fn completed(output: &str) -> RunEnd {
    RunEnd::Completed {
        output: output.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_an_mcp_server_adds_mid_turn_is_offered_from_the_next_step_and_logged_once() {
    let Some(python) = weft_testkit::mcp_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // Over streamable HTTP: a stdio server would run in the command sandbox, whose helper is
    // the `weft` binary (this test binary is not one).
    let server = weft_testkit::McpHttpServer::start(&python.0, dir.path()).await;
    let project = write_project(
        dir.path(),
        &format!("[mcpServers.demo]\nurl = {:?}\n", server.url),
        "tools = [\"lookup\", \"mcp:demo\"]\n",
        &[
            calls(&[call("c1", "demo__add_tool", json!({"name": "extra"}))]),
            calls(&[call("c2", "demo__extra", json!({}))]),
            calls(&[call("c3", "demo__echo", json!({"text": "still here"}))]),
            json!({"text": "done"}),
        ],
    );
    let store = common::sqlite_store(dir.path()).await;
    let seen = Requests::default();
    let outcome = run_lead(&project, &store, &seen, None).await;
    assert_eq!(outcome.end, completed("done"));
    let lead = requests(&seen, "lead.json");
    assert_eq!(lead.len(), 4);
    // The first step: the prompt's own tool and the server's tools of the start.
    let first = lead[0].tool_names();
    assert!(
        first.contains(&"lookup") && first.contains(&"demo__add_tool"),
        "{first:?}"
    );
    assert!(!first.contains(&"demo__extra"), "{first:?}");
    // From the step after the server added it: the new tool beside all the others.
    for later in &lead[1..] {
        let names = later.tool_names();
        offered_once(
            &names,
            &["lookup", "demo__add_tool", "demo__echo", "demo__extra"],
        );
    }
    // The call of the new tool ran on the server.
    let received = lead[2]
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            weft_provider::Message::ToolResult(r) => Some(r.results[0].clone()),
            _ => None,
        })
        .expect("c2's result");
    assert_eq!(received.tool_call_id, "c2");
    assert!(!received.is_error, "{received:?}");
    assert!(
        received.result.to_string().contains("added extra"),
        "{received:?}"
    );
    // The change is logged once: at the step that saw it, not at every step.
    let changes: Vec<_> = common::events(&store, &outcome.run_id)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::McpToolsChanged { servers, tools } => Some((servers, tools)),
            _ => None,
        })
        .collect();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].0, ["demo"]);
    assert!(
        changes[0].1.contains(&"demo__extra".to_owned()),
        "{changes:?}"
    );
}

/// weft.toml's `[runtime]` with a project role of two phases: `look` (only `read_file`) and
/// `close`.
const TRIAGE: &str = "[runtime]\nrole = \"triage\"\n[runtime.policy]\nmode = \"batch\"\n\
    [runtime.roles.triage]\ngoal = \"Sort the notes\"\nmaxReactLoop = 3\n\
    phases = [{name = \"look\", allowedTools = [\"read_file\"]}, {name = \"close\"}]\n";

/// The first request of an SOP run of `lead` whose prompt has `system` (none when empty).
async fn first_sop_request(system: &str) -> common::Seen {
    let dir = tempfile::tempdir().expect("tempdir");
    let prompt = if system.is_empty() {
        "tools = [\"read_file\"]\n".to_owned()
    } else {
        format!("system = {system:?}\ntools = [\"read_file\"]\n")
    };
    let project = write_project(
        dir.path(),
        TRIAGE,
        &prompt,
        &[
            calls(&[call("c1", "advance_phase", json!({}))]),
            calls(&[call("c2", "complete_task", json!({"summary": "sorted"}))]),
        ],
    );
    let store = common::sqlite_store(dir.path()).await;
    let seen = Requests::default();
    let outcome = run_lead(&project, &store, &seen, None).await;
    assert_eq!(outcome.end, completed("sorted"));
    requests(&seen, "lead.json").remove(0)
}

#[tokio::test]
async fn an_sop_phase_offers_its_tools_and_instructions_after_the_prompts_system_text() {
    let bare = first_sop_request("").await;
    let instructions = bare.system.clone().expect("the SOP's instructions");
    // The workflow's instructions alone, not after an empty system text.
    assert!(
        instructions.starts_with(|c: char| !c.is_whitespace()),
        "{instructions:?}"
    );
    assert!(
        instructions.contains("Sort the notes") && instructions.contains("look"),
        "{instructions}"
    );
    // The role's tool the prompt lacks is added once; the prompt's own is not repeated.
    let names = bare.tool_names();
    offered_once(&names, &["read_file", "advance_phase", "complete_task"]);
    // With a system text of its own, the prompt's comes first.
    let with_system = first_sop_request("You sort.").await;
    assert_eq!(
        with_system.system,
        Some(format!("You sort.\n\n{instructions}"))
    );
}

#[tokio::test]
async fn the_child_registry_is_the_whole_system_text_of_a_prompt_without_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = write_project(
        dir.path(),
        "",
        "tools = [\"lookup\"]\n",
        &[json!({"text": "hello"})],
    );
    let store = common::sqlite_store(dir.path()).await;
    let seen = Requests::default();
    let first = run_lead(&project, &store, &seen, None).await;
    assert_eq!(first.end, completed("hello"));
    // Without children the prompt's (empty) system text is all there is.
    assert_eq!(requests(&seen, "lead.json")[0].system.as_deref(), Some(""));
    let thread = common::thread_of(&store, &first.run_id).await;
    let entry: weft_store::SubagentRegistryEntry = serde_json::from_value(json!({
        "reference": "child-1", "name": "alice", "description": "Writes drafts.",
        "resumable": true, "status": "idle", "agent": "writer"
    }))
    .expect("entry");
    store
        .register_child(&thread, &entry, &json!({}), None)
        .await
        .expect("register");
    let seen = Requests::default();
    // The second run of the thread: its model is asked with a fresh copy of the script.
    std::fs::write(
        dir.path().join("lead.json"),
        json!({"responses": [{"text": "hello"}, {"text": "again"}]}).to_string(),
    )
    .expect("script");
    let second = run_lead(&project, &store, &seen, Some(&thread)).await;
    assert_eq!(second.end, completed("again"));
    assert_eq!(
        requests(&seen, "lead.json")[0].system.as_deref(),
        Some(
            "Subagent instances of this thread (message one with subagent_message, by reference or name):\n\
             - alice (reference: child-1) — agent writer, status: idle, resumable, blocking — Writes drafts."
        )
    );
}

#[tokio::test]
async fn a_call_waiting_for_a_decision_under_an_sop_role_leaves_the_task_waiting_not_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = "requiresApproval = [\"lookup\"]\n[runtime]\nrole = \"triage\"\n\
        [runtime.roles.triage]\ngoal = \"Sort the notes\"\nmaxReactLoop = 3\n\
        phases = [{name = \"look\", allowedTools = [\"lookup\"]}, {name = \"close\"}]\n";
    let project = write_project(
        dir.path(),
        runtime,
        "tools = [\"lookup\"]\n",
        &[calls(&[call("c1", "lookup", json!({"term": "plan"}))])],
    );
    let store = common::sqlite_store(dir.path()).await;
    let seen = Requests::default();
    let outcome = run_lead(&project, &store, &seen, None).await;
    assert!(
        matches!(&outcome.end, RunEnd::AwaitingDecision { decisions } if decisions.len() == 1),
        "{:?}",
        outcome.end
    );
    let transitions: Vec<(String, String, String)> = common::events(&store, &outcome.run_id)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::StateTransition {
                from, to, trigger, ..
            } => Some((from, to, trigger)),
            _ => None,
        })
        .collect();
    // The task waits (TOOL_WAIT → IDLE on the decision it needs); nothing failed.
    assert_eq!(
        transitions.last(),
        Some(&(
            "TOOL_WAIT".to_owned(),
            "IDLE".to_owned(),
            "awaiting_decision".to_owned()
        )),
        "{transitions:?}"
    );
    assert!(
        transitions.iter().all(|(_, to, _)| to != "ERROR"),
        "{transitions:?}"
    );
}

/// The `stopping` provider: a scripted model answering from the script at its model id
/// (answer k for a request with k assistant messages), whose context-compression summary call
/// cancels `signal` (the run is being stopped) and then fails.
fn stopping(signal: tokio_util::sync::CancellationToken) -> ProviderRegistry {
    let mut registry = ProviderRegistry::with_builtins();
    registry.register("stopping", move || {
        let signal = signal.clone();
        Arc::new(
            Provider::new("stopping", "0").with_llm(move |model_id: &str, _: &Value| {
                let script = weft_provider::adapters::scripted::Script::load(Path::new(model_id))
                    .map_err(|e| {
                    UppError::llm(ErrorCode::InvalidRequest, "stopping", e.to_string())
                })?;
                let signal = signal.clone();
                let model: Arc<dyn LlmModel> =
                    Arc::new(ScriptedModel::from_fn(model_id, move |request| {
                        if request.system.as_deref()
                            == Some(weft_runtime::profile::context::SUMMARY_INSTRUCTIONS)
                        {
                            signal.cancel();
                            return Err(UppError::llm(
                                ErrorCode::ProviderError,
                                "stopping",
                                "the summary call was cut off",
                            ));
                        }
                        let k = request.messages().filter(|m| m.is_assistant()).count();
                        script.responses.get(k).cloned().ok_or_else(|| {
                            UppError::llm(ErrorCode::InvalidRequest, "stopping", "out of answers")
                        })
                    }));
                Ok(model)
            }),
        )
    });
    registry
}

/// A project whose `lead` runs under `[runtime]` with a context of 1,000 tokens (compressed
/// by summary, keeping the last message) and answers from `lead.json` through the `stopping`
/// provider.
fn compressing_project(dir: &Path, lead: &[Value]) -> Project {
    write_project(
        dir,
        "[runtime]\nmaxTurns = 10\n[runtime.policy]\nmode = \"batch\"\n\
         [runtime.context]\nmaxTokens = 1000\npreserveLastN = 1\ncompressionStrategy = \"summarize\"\n",
        "tools = [\"read_file\"]\n",
        lead,
    );
    let toml = std::fs::read_to_string(dir.join("weft.toml"))
        .expect("weft.toml")
        .replace("recording:", "stopping:");
    std::fs::write(dir.join("weft.toml"), toml).expect("weft.toml");
    Project::load(dir).expect("valid project")
}

#[tokio::test]
async fn a_run_stopped_during_a_compressions_summary_call_is_interrupted_not_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let read = |id: &str| {
        json!({"toolCalls": [{"id": id, "name": "read_file", "arguments": {"path": "notes.md"}}],
               "usage": {"inputTokens": 5000, "outputTokens": 10}})
    };
    let project = compressing_project(
        dir.path(),
        &[read("r1"), read("r2"), read("r3"), read("r4")],
    );
    let mut options = SessionOptions::new(dir.path());
    options.providers = Arc::new(stopping(options.signal.clone()));
    let outcome = run_session(&project, "lead", "read the notes", &options)
        .await
        .expect("session");
    assert!(options.signal.is_cancelled(), "a summary call was made");
    assert_eq!(
        outcome.status,
        SessionStatus::Interrupted,
        "{}",
        outcome.message
    );
    // What the steps before committed is kept.
    assert!(outcome.state_a.message_count() >= 3);
}

/// The first step of a turn counts its new input, not yet in the history, against the
/// context: a long input on a short history is compressed for (here the summary call stops
/// the run), before the model sees it.
#[tokio::test]
async fn a_turns_new_input_counts_toward_its_first_steps_compression() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Answer k for a request with k assistant messages: the history has three.
    let done = calls(&[call("c1", "complete_task", json!({"summary": "answered"}))]);
    let project = compressing_project(dir.path(), &vec![done; 4]);
    let now = "2026-11-24T00:00:00Z";
    let mut history = Vec::new();
    for i in 0..3 {
        history.push(
            json!({"type": "user", "id": format!("u{i}"), "timestamp": now,
            "content": [{"type": "text", "text": format!("question {i}")}]}),
        );
        history.push(
            json!({"type": "assistant", "id": format!("a{i}"), "timestamp": now,
            "content": [{"type": "text", "text": format!("answer {i}")}]}),
        );
    }
    let messages: Vec<weft_provider::Message> =
        serde_json::from_value(Value::Array(history)).expect("messages");
    // The history alone is far below the trigger (800 tokens): asked without the input, the
    // model would answer.
    let mut options = SessionOptions::new(dir.path());
    options.providers = Arc::new(stopping(options.signal.clone()));
    options.initial_state = weft_agent::AgentState::initial()
        .with_messages(messages.clone())
        .with_step(3);
    let short = run_session(&project, "lead", "and now?", &options)
        .await
        .expect("session");
    assert_eq!(short.status, SessionStatus::Completed, "{}", short.message);
    let mut options = SessionOptions::new(dir.path());
    options.providers = Arc::new(stopping(options.signal.clone()));
    options.initial_state = weft_agent::AgentState::initial()
        .with_messages(messages)
        .with_step(3);
    let long = "the notes say many things ".repeat(300);
    let outcome = run_session(&project, "lead", &long, &options)
        .await
        .expect("session");
    assert!(options.signal.is_cancelled(), "the history was compressed");
    assert_eq!(
        outcome.status,
        SessionStatus::Interrupted,
        "{}",
        outcome.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stopped_mid_step_under_an_sop_role_does_not_wait_for_a_decision() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The model takes a minute to answer: the run is stopped while it thinks.
    let project = write_project(
        dir.path(),
        TRIAGE,
        "tools = [\"read_file\"]\n",
        &[json!({"text": "late", "delayMs": 60_000})],
    );
    let store = common::sqlite_store(dir.path()).await;
    let seen = Requests::default();
    let handle = common::runtime(&store, &seen)
        .start(common::session_spec(&project, "lead", "go"), false)
        .await
        .expect("start");
    while requests(&seen, "lead.json").is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    handle.abort_handle().cancel();
    let outcome = handle.outcome().await.expect("outcome");
    assert_eq!(outcome.end, RunEnd::Interrupted);
    let transitions: Vec<String> = common::events(&store, &outcome.run_id)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::StateTransition { trigger, .. } => Some(trigger),
            _ => None,
        })
        .collect();
    // Stopped, not suspended: no decision is pending, and the task says it failed.
    assert!(
        !transitions.iter().any(|t| t == "awaiting_decision"),
        "{transitions:?}"
    );
    assert_eq!(
        transitions.last().map(String::as_str),
        Some("failed"),
        "{transitions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sop_phase_keeps_its_tools_when_an_mcp_server_changes_its_own() {
    let Some(python) = weft_testkit::mcp_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let server = weft_testkit::McpHttpServer::start(&python.0, dir.path()).await;
    let runtime = format!(
        "[mcpServers.demo]\nurl = {:?}\n[runtime]\nrole = \"triage\"\n[runtime.policy]\nmode = \"batch\"\n\
         [runtime.roles.triage]\ngoal = \"Sort the notes\"\nmaxReactLoop = 3\n\
         phases = [{{name = \"look\", allowedTools = [\"read_file\", \"mcp:demo\"]}}, {{name = \"close\"}}]\n",
        server.url
    );
    let project = write_project(
        dir.path(),
        &runtime,
        "tools = [\"mcp:demo\"]\n",
        &[
            calls(&[call("c1", "demo__add_tool", json!({"name": "extra"}))]),
            calls(&[call("c2", "demo__extra", json!({}))]),
            calls(&[call("c3", "advance_phase", json!({}))]),
            calls(&[call("c4", "complete_task", json!({"summary": "sorted"}))]),
        ],
    );
    let store = common::sqlite_store(dir.path()).await;
    let seen = Requests::default();
    let outcome = run_lead(&project, &store, &seen, None).await;
    assert_eq!(outcome.end, completed("sorted"));
    let lead = requests(&seen, "lead.json");
    // The phase's `mcp:demo` offers the server's tools of the start …
    let names = lead[0].tool_names();
    assert!(names.contains(&"demo__add_tool"), "{names:?}");
    // … and, after the server's change, its new one, beside the phase's own tools, once each.
    let names = lead[1].tool_names();
    offered_once(
        &names,
        &["read_file", "advance_phase", "complete_task", "demo__extra"],
    );
    // The server's tools ran: the phase allows them.
    let added = lead[1]
        .messages
        .iter()
        .find_map(|m| match m {
            weft_provider::Message::ToolResult(r) => {
                r.results.iter().find(|r| r.tool_call_id == "c1").cloned()
            }
            _ => None,
        })
        .expect("c1's result");
    assert!(!added.is_error, "{added:?}");
}

/// Without the runtime profile a side turn logs once which model serves it and why.
#[tokio::test]
async fn a_side_turn_logs_which_model_serves_it_and_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = write_project(
        dir.path(),
        "",
        "tools = [\"lookup\"]\n",
        &[json!({"text": "hi"})],
    );
    let store = common::sqlite_store(dir.path()).await;
    let outcome = run_lead(&project, &store, &Requests::default(), None).await;
    assert_eq!(outcome.end, completed("hi"));
    let routed: Vec<_> = common::events(&store, &outcome.run_id)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Routing {
                requested,
                resolved,
                reason,
                side,
                ..
            } => Some((requested, resolved, reason, side)),
            _ => None,
        })
        .collect();
    let model = format!("recording:{}", dir.path().join("lead.json").display());
    assert_eq!(
        routed,
        [(
            model.clone(),
            model,
            "project".to_owned(),
            Some(weft_runtime::event::Side::A)
        )]
    );
}
