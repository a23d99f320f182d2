//! The Agent Runtime Spec's profile through `weft run` (issue 22): a project with a
//! `[runtime]` table (or `weft run --profile runtime`) ends a task only with `complete_task`
//! (§5.1), recovers at the turn limit (§5.2), refuses what its policy forbids (§5.3), and
//! logs every step of the §6 state machine. Driven by scripted models.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{output_text, weft};

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use weft_testkit::{ReplayServer, Reply};

/// A project whose agent `a` (tools `read_file`, `write_file`) answers with `responses`,
/// with `runtime` appended to `weft.toml`.
fn project(dir: &Path, runtime: &str, responses: Value) {
    common::scripted_project(
        dir,
        runtime,
        &["read_file", "write_file"],
        &json!({ "responses": responses }),
    );
    std::fs::write(dir.join("notes.md"), "# notes\n").unwrap();
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments})
}

fn calls(list: &[Value]) -> Value {
    json!({"toolCalls": list})
}

/// The events `weft run --json` printed.
fn events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn events_of(out: &Output) -> Vec<Value> {
    events(out)
}

/// The state machine's transitions, `FROM -trigger-> TO`.
fn transitions(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "state_transition")
        .map(|e| {
            let p = &e["payload"];
            format!(
                "{} -{}-> {}",
                p["from"].as_str().unwrap(),
                p["trigger"].as_str().unwrap(),
                p["to"].as_str().unwrap()
            )
        })
        .collect()
}

fn refusals(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_call_refused")
        .map(|e| {
            (
                e["payload"]["tool"].as_str().unwrap().to_owned(),
                e["payload"]["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn run_end(events: &[Value]) -> &Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "run_end")
        .map(|e| &e["payload"])
        .expect("run_end")
}

#[test]
fn a_task_ends_with_complete_task_its_summary_the_output_its_artifacts_registered() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "[runtime]\nmaxTurns = 10\n",
        json!([
            calls(&[call("r1", "read_file", json!({"path": "notes.md"}))]),
            calls(&[call(
                "c1",
                "complete_task",
                json!({"summary": "read the notes", "artifacts": ["notes.md"], "nextSteps": "none"})
            )]),
        ]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events = events(&out);
    assert_eq!(
        transitions(&events),
        [
            "IDLE -user_input-> THINKING",
            "THINKING -llm_response-> TOOL_WAIT",
            "TOOL_WAIT -tool_results-> OBSERVATION",
            "OBSERVATION -more_work-> THINKING",
            "THINKING -llm_response-> TOOL_WAIT",
            "TOOL_WAIT -tool_results-> OBSERVATION",
            "OBSERVATION -complete_task-> DONE",
        ]
    );
    let end = run_end(&events);
    assert_eq!(end["status"], "completed");
    assert_eq!(end["output"], "read the notes");
    // The artifact is in the store's artifacts table, with its size, hash and MIME type.
    let db = rusqlite::Connection::open(p.join(".weft/weft.db")).unwrap();
    let (path, metadata): (String, String) = db
        .query_row("SELECT path, metadata FROM artifacts", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert!(path.ends_with("notes.md"), "{path}");
    let metadata: Value = serde_json::from_str(&metadata).unwrap();
    assert_eq!(metadata["size"], 8);
    assert_eq!(metadata["mimeType"], "text/markdown");
    assert!(metadata["hash"].as_str().unwrap().starts_with("sha256:"));
}

#[test]
fn an_agent_that_stops_without_complete_task_ends_in_error_keeping_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(p, "[runtime]\n", json!([{"text": "half of the answer"}]));
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let events = events(&out);
    assert_eq!(
        transitions(&events),
        [
            "IDLE -user_input-> THINKING",
            "THINKING -llm_response-> OBSERVATION",
            "OBSERVATION -stopped-> ERROR",
        ]
    );
    let end = run_end(&events);
    assert_eq!(end["status"], "failed");
    let error = end["error"].as_str().unwrap();
    assert!(error.contains("without calling complete_task"), "{error}");
    assert!(error.contains("half of the answer"), "{error}");
}

#[test]
fn the_profile_is_off_without_a_table_and_on_with_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(p, "", json!([{"text": "an answer"}]));
    // The plain agent layer: a response ends the turn, completed.
    let out = weft(p, &["run", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    // The profile: a response without complete_task is an error.
    let out = weft(p, &["run", "--profile", "runtime", "go"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("without calling complete_task"),
        "{}",
        output_text(&out)
    );
}

#[test]
fn complete_task_with_other_calls_is_refused_and_the_model_tries_again() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "[runtime.policy]\nmode = \"batch\"\n",
        json!([
            calls(&[
                call("r1", "read_file", json!({"path": "notes.md"})),
                call("c1", "complete_task", json!({"summary": "too soon"})),
            ]),
            calls(&[call("c2", "complete_task", json!({"summary": "done"}))]),
        ]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events = events(&out);
    let refused = refusals(&events);
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(refused[0].0, "read_file");
    assert!(
        refused[0].1.contains("also called complete_task"),
        "{refused:?}"
    );
    assert_eq!(refused[1].0, "complete_task");
    assert!(refused[1].1.contains("must be called alone"), "{refused:?}");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_call_refused" && e["payload"]["stage"] == "policy")
    );
    assert_eq!(run_end(&events)["output"], "done");
}

#[test]
fn interactive_mode_runs_one_call_per_turn_and_refuses_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "[runtime]\n",
        json!([
            calls(&[
                call("r1", "read_file", json!({"path": "notes.md"})),
                call("r2", "read_file", json!({"path": "notes.md"})),
            ]),
            calls(&[call("c1", "complete_task", json!({"summary": "done"}))]),
        ]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events = events(&out);
    let ended: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_end" && e["payload"]["tool"] == "read_file")
        .collect();
    assert_eq!(ended.len(), 2);
    assert_eq!(ended[0]["payload"]["isError"], false);
    assert_eq!(ended[1]["payload"]["isError"], true);
    let refused = refusals(&events);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].1.contains("one tool call per turn"),
        "{refused:?}"
    );
}

#[test]
fn denied_tools_are_not_offered_and_calls_of_them_are_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "[runtime.policy]\ndeniedTools = [\"write_file\"]\n",
        json!([
            calls(&[call(
                "w1",
                "write_file",
                json!({"path": "x.txt", "content": "x"})
            )]),
            calls(&[call("c1", "complete_task", json!({"summary": "done"}))]),
        ]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(!p.join("x.txt").exists());
    let events = events(&out);
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_call_end" && e["payload"]["tool"] == "write_file")
        .unwrap();
    let result = end["payload"]["result"].as_str().unwrap();
    // Not offered: the model's call is of an unknown tool.
    assert!(result.contains("unknown tool"), "{result}");
}

#[test]
fn at_the_turn_limit_a_final_warning_allows_only_complete_task() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let read = |id: &str| calls(&[call(id, "read_file", json!({"path": "notes.md"}))]);
    project(
        p,
        "[runtime]\nmaxTurns = 4\ngraceTurns = 2\nwarningTemplate = \"LAST CALL: {remaining} of {maxTurns}\"\n",
        json!([
            read("r1"),
            read("r2"),
            // The Final Warning turn calls complete_task, but with another tool: both are
            // refused, and the grace turn left lets the model call it alone.
            calls(&[
                call("r3", "read_file", json!({"path": "notes.md"})),
                call("c0", "complete_task", json!({"summary": "too early"})),
            ]),
            calls(&[call(
                "c1",
                "complete_task",
                json!({"summary": "wrapped up"})
            )]),
        ]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events = events(&out);
    let transitions = transitions(&events);
    assert_eq!(
        transitions[transitions.len() - 2..],
        [
            "OBSERVATION -limit_reached-> RECOVERY",
            "RECOVERY -complete_task-> DONE"
        ]
    );
    let recovery = events
        .iter()
        .find(|e| e["type"] == "recovery")
        .expect("a recovery event");
    assert_eq!(recovery["payload"]["grace"]["trigger"], "limit_reached");
    assert_eq!(recovery["payload"]["grace"]["turns"], 2);
    // The third read came during recovery: refused, with why; complete_task beside it too.
    let refused = refusals(&events);
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused
            .iter()
            .any(|(tool, why)| tool == "read_file" && why.contains("only complete_task")),
        "{refused:?}"
    );
    assert!(
        refused
            .iter()
            .any(|(tool, why)| tool == "complete_task" && why.contains("alone")),
        "{refused:?}"
    );
    assert_eq!(run_end(&events)["output"], "wrapped up");
    // The Final Warning is in the conversation the run exported.
    let run = events[0]["runId"].as_str().unwrap();
    let shown = weft(p, &["runs", "show", run, "--json"]);
    assert!(
        output_text(&shown).contains("LAST CALL: 2 of 4"),
        "{}",
        output_text(&shown)
    );
}

#[test]
fn a_failed_recovery_ends_in_error_with_the_partial_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let read = |id: &str| json!({"text": format!("working {id}"), "toolCalls": [call(id, "read_file", json!({"path": "notes.md"}))]});
    project(
        p,
        "[runtime]\nmaxTurns = 3\ngraceTurns = 1\n",
        json!([read("r1"), read("r2"), read("r3")]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let events = events(&out);
    let transitions = transitions(&events);
    assert_eq!(
        transitions[transitions.len() - 2..],
        [
            "OBSERVATION -limit_reached-> RECOVERY",
            "RECOVERY -failed-> ERROR"
        ]
    );
    let error = run_end(&events)["error"].as_str().unwrap().to_owned();
    assert!(error.contains("recovery failed"), "{error}");
    assert!(error.contains("working r3"), "{error}");
}

#[test]
fn refused_complete_task_calls_in_every_grace_turn_end_in_error() {
    // Each grace turn calls complete_task, but beside a read: refused, corrected never.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let both = |n: &str| {
        calls(&[
            call(&format!("r{n}"), "read_file", json!({"path": "notes.md"})),
            call(&format!("c{n}"), "complete_task", json!({"summary": "s"})),
        ])
    };
    project(
        p,
        "[runtime]\nmaxTurns = 3\ngraceTurns = 2\n",
        json!([
            calls(&[call("r0", "read_file", json!({"path": "notes.md"}))]),
            both("1"),
            both("2"),
        ]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let events = events(&out);
    let transitions = transitions(&events);
    assert_eq!(
        transitions[transitions.len() - 2..],
        [
            "OBSERVATION -limit_reached-> RECOVERY",
            "RECOVERY -failed-> ERROR"
        ]
    );
    let error = run_end(&events)["error"].as_str().unwrap().to_owned();
    assert!(error.contains("within its 2 grace turns"), "{error}");
    assert_eq!(refusals(&events).len(), 4);
}

/// `weft run` off the async runtime (the model's server lives on it), with keys unset.
async fn weft_async(cwd: &Path, args: &[&str]) -> Output {
    let cwd = cwd.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(&args)
            .current_dir(&cwd)
            .env_remove("WEFT_DATABASE_URL")
            .env_remove("WEFT_OPENAI_COMPATIBLE_BASE_URL")
            .env("WEFT_OPENAI_COMPATIBLE_API_KEY", "sk-test")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// A project whose agent `a` (tool `read_file`) runs `openai-compatible:m` on `server`, with
/// `runtime` appended to `weft.toml`.
fn http_project(dir: &Path, server: &ReplayServer, runtime: &str) {
    for sub in ["agents", "prompts"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(
        dir.join("weft.toml"),
        format!(
            "model = \"openai-compatible:m\"\n[providers.openai-compatible]\nbaseUrl = \"{}/v1\"\n{runtime}",
            server.url()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("prompts/p.toml"),
        "name = \"p\"\ntools = [\"read_file\"]\n",
    )
    .unwrap();
    std::fs::write(dir.join("notes.md"), "# notes\n").unwrap();
}

/// A streamed Chat Completions answer: `text`, then a call of `tool` when given.
fn sse(text: &str, tool: Option<(&str, Value)>) -> Reply {
    let mut delta = json!({"role": "assistant", "content": text});
    if let Some((name, arguments)) = &tool {
        delta["tool_calls"] = json!([{"index": 0, "id": format!("call_{name}"), "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()}}]);
    }
    let finish = if tool.is_some() { "tool_calls" } else { "stop" };
    let chunk = json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
    let end = json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}});
    Reply::sse(
        &format!("data: {chunk}\n\ndata: {end}\n\ndata: [DONE]\n\n"),
        64,
    )
}

/// The names of the tools a request offered.
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_final_warning_turn_offers_only_complete_task_and_forces_the_call() {
    let server = ReplayServer::start(vec![
        sse("", Some(("read_file", json!({"path": "notes.md"})))),
        sse(
            "",
            Some(("complete_task", json!({"summary": "read the notes"}))),
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    http_project(
        p,
        &server,
        "[runtime]\nmaxTurns = 2\ngraceTurns = 1\nwarningTemplate = \"LAST CALL: {remaining} of {maxTurns}\"\n",
    );
    let out = weft_async(p, &["run", "--json", "go"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_eq!(run_end(&events(&out))["output"], "read the notes");
    let received: Vec<Value> = server.received().iter().map(|r| r.json()).collect();
    assert_eq!(received.len(), 2);
    // A working turn: every tool, the model's own choice.
    let mut first = offered(&received[0]);
    first.sort();
    assert_eq!(first, ["complete_task", "read_file"]);
    assert!(received[0].get("tool_choice").is_none(), "{}", received[0]);
    // The Final Warning turn: the warning, only complete_task, and the call forced.
    assert_eq!(offered(&received[1]), ["complete_task"]);
    assert_eq!(
        received[1]["tool_choice"],
        json!({"type": "function", "function": {"name": "complete_task"}})
    );
    assert!(
        received[1]["messages"]
            .to_string()
            .contains("LAST CALL: 1 of 2"),
        "{}",
        received[1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_reply_to_the_final_warning_ends_in_error_at_once_keeping_the_partial_output() {
    // The server ignores the forced choice and answers the Final Warning with text. Two grace
    // turns: the second is never asked for.
    let server = ReplayServer::start(vec![
        sse(
            "reading first",
            Some(("read_file", json!({"path": "notes.md"}))),
        ),
        sse("the notes have a title and nothing else", None),
        sse("", Some(("complete_task", json!({"summary": "late"})))),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    http_project(p, &server, "[runtime]\nmaxTurns = 3\ngraceTurns = 2\n");
    let out = weft_async(p, &["run", "--json", "go"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let events = events(&out);
    let transitions = transitions(&events);
    assert_eq!(
        transitions[transitions.len() - 2..],
        [
            "OBSERVATION -limit_reached-> RECOVERY",
            "RECOVERY -failed-> ERROR"
        ]
    );
    let end = run_end(&events);
    assert_eq!(end["status"], "failed");
    let error = end["error"].as_str().unwrap();
    assert!(error.contains("recovery failed"), "{error}");
    assert!(error.contains("grace turn 1 of 2"), "{error}");
    assert!(
        error.contains("the notes have a title and nothing else"),
        "{error}"
    );
    let received = server.received();
    assert_eq!(received.len(), 2, "the remaining grace turn is not used");
    assert_eq!(
        received[1].json()["tool_choice"]["function"]["name"],
        "complete_task"
    );
}

#[test]
fn a_bad_runtime_table_is_a_load_error_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(p, "[runtime]\nmaxTurnz = 3\n", json!([]));
    let out = weft(p, &["run", "go"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("weft.toml"),
        "{}",
        output_text(&out)
    );
    assert!(
        output_text(&out).contains("runtime.maxTurnz"),
        "{}",
        output_text(&out)
    );
    std::fs::write(
        p.join("weft.toml"),
        "model = \"scripted-turns:script.json\"\n",
    )
    .unwrap();
    std::fs::write(
        p.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n[runtime.policy]\nmode = \"parallel\"\n",
    )
    .unwrap();
    let out = weft(p, &["run", "go"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("agents/a.toml"),
        "{}",
        output_text(&out)
    );
    assert!(
        output_text(&out).contains("runtime.policy.mode"),
        "{}",
        output_text(&out)
    );
}

#[test]
fn the_runtime_template_runs_end_to_end_without_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = weft(dir.path(), &["init", "--template", "runtime", "demo"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let demo = dir.path().join("demo");
    assert!(
        std::fs::read_to_string(demo.join("weft.toml"))
            .unwrap()
            .contains("[runtime]")
    );
    let out = weft(
        dir.path(),
        &["run", "demo", "--json", "Summarize this folder"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events = events(&out);
    assert_eq!(run_end(&events)["output"], "Wrote SUMMARY.md.");
    assert_eq!(
        transitions(&events).last().map(String::as_str),
        Some("OBSERVATION -complete_task-> DONE")
    );
    assert!(demo.join("SUMMARY.md").is_file());
    let db = rusqlite::Connection::open(demo.join(".weft/weft.db")).unwrap();
    let artifacts: i64 = db
        .query_row("SELECT count(*) FROM artifacts", [], |r| r.get(0))
        .unwrap();
    assert_eq!(artifacts, 1);
}

#[test]
fn interactive_mode_asks_before_write_file_and_waits_for_the_decision() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "[runtime]\n",
        json!([
            calls(&[call(
                "w1",
                "write_file",
                json!({"path": "x.txt", "content": "x"})
            )]),
            calls(&[call("c1", "complete_task", json!({"summary": "done"}))]),
        ]),
    );
    // No terminal: nobody can approve now, so the run suspends (exit 4) before writing.
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(4), "{}", output_text(&out));
    assert!(!p.join("x.txt").exists());
    let events = events(&out);
    assert!(events.iter().any(|e| e["type"] == "decision_pending"));
    assert_eq!(
        transitions(&events),
        [
            "IDLE -user_input-> THINKING",
            "THINKING -llm_response-> TOOL_WAIT",
            "TOOL_WAIT -awaiting_decision-> IDLE",
        ]
    );
    // Approved, the resume goes on from IDLE: the call runs once and the task completes.
    let run = events[0]["runId"].as_str().unwrap().to_owned();
    let decision = events
        .iter()
        .find(|e| e["type"] == "decision_pending")
        .map(|e| e["payload"]["decision"].as_str().unwrap().to_owned())
        .unwrap();
    let approved = weft(p, &["approve", &run, &decision]);
    assert_eq!(
        approved.status.code(),
        Some(0),
        "{}",
        output_text(&approved)
    );
    let resumed = weft(p, &["resume", &run, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", output_text(&resumed));
    assert_eq!(std::fs::read_to_string(p.join("x.txt")).unwrap(), "x");
    assert_eq!(
        transitions(&events_of(&resumed)),
        [
            "IDLE -user_input-> THINKING",
            "THINKING -llm_response-> TOOL_WAIT",
            "TOOL_WAIT -tool_results-> OBSERVATION",
            "OBSERVATION -more_work-> THINKING",
            "THINKING -llm_response-> TOOL_WAIT",
            "TOOL_WAIT -tool_results-> OBSERVATION",
            "OBSERVATION -complete_task-> DONE",
        ]
    );
}

#[test]
fn tool_inputs_are_sanitized_before_the_tool_runs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "[runtime.policy]\nmode = \"batch\"\n",
        json!([
            calls(&[call(
                "w1",
                "write_file",
                json!({"path": "./drafts//old/../x.txt", "content": "bell\u{7} and nul\u{0} gone\n"})
            )]),
            calls(&[call("c1", "complete_task", json!({"summary": "done"}))]),
        ]),
    );
    let out = weft(p, &["run", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_eq!(
        std::fs::read_to_string(p.join("drafts/x.txt")).unwrap(),
        "bell and nul gone\n"
    );
}

#[test]
fn a_sandboxed_agent_has_no_filesystem() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "[runtime.policy]\nsandboxed = true\n",
        json!([
            calls(&[call("r1", "read_file", json!({"path": "notes.md"}))]),
            calls(&[call("c1", "complete_task", json!({"summary": "done"}))]),
        ]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events = events(&out);
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_call_end" && e["payload"]["tool"] == "read_file")
        .unwrap();
    assert_eq!(end["payload"]["isError"], true);
    let result = end["payload"]["result"].as_str().unwrap();
    assert!(result.contains("strict"), "{result}");
}

#[test]
fn the_policy_rules_deny_and_ask_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "[runtime.policy]\nmode = \"batch\"\noutputRoots = [\"out\"]\n\
         [[runtime.policy.rules]]\nid = \"no-env\"\naction = \"file.read\"\nwhen = { matchesPattern = [\"**/.env*\"] }\n\
         decision = \"deny\"\nreason = \"sensitive\"\n\
         [[runtime.policy.rules]]\nid = \"confirm-write\"\naction = \"file.write\"\nwhen = { pathWithinOutputRoot = false }\n\
         decision = \"allow_with_confirm\"\n",
        json!([
            calls(&[call("r1", "read_file", json!({"path": ".env"}))]),
            calls(&[call(
                "w1",
                "write_file",
                json!({"path": "out/a.txt", "content": "a"})
            )]),
            calls(&[call(
                "w2",
                "write_file",
                json!({"path": "b.txt", "content": "b"})
            )]),
            calls(&[call("c1", "complete_task", json!({"summary": "done"}))]),
        ]),
    );
    std::fs::write(p.join(".env"), "TOKEN=abc\n").unwrap();
    let out = weft(p, &["run", "--json", "go"]);
    // The write outside the output root waits for a person: no terminal, so the run suspends.
    assert_eq!(out.status.code(), Some(4), "{}", output_text(&out));
    let events = events(&out);
    let refused = refusals(&events);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].1.contains("rule no-env") && refused[0].1.contains("sensitive"),
        "{refused:?}"
    );
    assert_eq!(std::fs::read_to_string(p.join("out/a.txt")).unwrap(), "a");
    assert!(!p.join("b.txt").exists());
    let pending: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "decision_pending")
        .collect();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["payload"]["tool"], "write_file");
}

#[test]
fn secret_patterns_never_reach_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "[runtime.policy]\nmode = \"batch\"\nsecretPatterns = [\"ACME-[0-9]{6}\"]\n",
        json!([
            calls(&[call(
                "w1",
                "write_file",
                json!({"path": "cfg.txt", "content": "token ACME-424242\n"})
            )]),
            calls(&[call(
                "c1",
                "complete_task",
                json!({"summary": "stored ACME-424242 in cfg.txt"})
            )]),
        ]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    // The tool ran with the real value; the records hold none of it.
    assert_eq!(
        std::fs::read_to_string(p.join("cfg.txt")).unwrap(),
        "token ACME-424242\n"
    );
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(p.join(".weft")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            bytes.extend(std::fs::read(path).unwrap());
        }
    }
    let stored = String::from_utf8_lossy(&bytes);
    assert!(
        !stored.contains("ACME-424242"),
        "a secret reached the store"
    );
    assert!(stored.contains("[REDACTED]"));
    let events = weft(
        p,
        &[
            "events",
            events(&out)[0]["runId"].as_str().unwrap(),
            "--json",
        ],
    );
    assert!(!output_text(&events).contains("ACME-424242"));
}

/// Every byte of the project's store files (the database and its journal).
fn stored_bytes(p: &Path) -> String {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(p.join(".weft")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            bytes.extend(std::fs::read(path).unwrap());
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn secret_patterns_hold_for_a_resumed_run() {
    // The write waits for a person (interactive mode); everything with the secret — the
    // file read, the summary — happens in the resumed process.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "[runtime.policy]\nsecretPatterns = [\"ACME-[0-9]{6}\"]\n",
        json!([
            calls(&[call(
                "w1",
                "write_file",
                json!({"path": "out.txt", "content": "checked"})
            )]),
            calls(&[call("r1", "read_file", json!({"path": "vault.txt"}))]),
            calls(&[call(
                "c1",
                "complete_task",
                json!({"summary": "the key is ACME-424242"})
            )]),
        ]),
    );
    std::fs::write(p.join("vault.txt"), "key ACME-424242\n").unwrap();
    let out = weft(p, &["run", "--json", "check the vault"]);
    assert_eq!(out.status.code(), Some(4), "{}", output_text(&out));
    let events = events(&out);
    let run = events[0]["runId"].as_str().unwrap().to_owned();
    let decision = events
        .iter()
        .find(|e| e["type"] == "decision_pending")
        .and_then(|e| e["payload"]["decision"].as_str())
        .unwrap()
        .to_owned();
    let approved = weft(p, &["approve", &run, &decision]);
    assert_eq!(
        approved.status.code(),
        Some(0),
        "{}",
        output_text(&approved)
    );
    let resumed = weft(p, &["resume", &run, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", output_text(&resumed));
    // The resumed process read the secret and the model said it; the records hold none of it.
    let logged = output_text(&weft(p, &["events", &run, "--json"]));
    assert!(!logged.contains("ACME-424242"), "{logged}");
    assert!(logged.contains("key [REDACTED]"), "{logged}");
    let stored = stored_bytes(p);
    assert!(
        !stored.contains("ACME-424242"),
        "a secret reached the store"
    );
    assert!(stored.contains("the key is [REDACTED]"));
    let shown = weft(p, &["runs", "show", &run, "--json"]);
    assert!(
        !output_text(&shown).contains("ACME-424242"),
        "{}",
        output_text(&shown)
    );
}

#[test]
fn a_subagent_never_has_more_than_its_parents_policy() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "defaultAgent = \"a\"\n[runtime.policy]\nmode = \"batch\"\ndeniedTools = [\"write_file\"]\n",
        json!([
            calls(&[call("s1", "pair", json!({"task": "write the note"}))]),
            calls(&[call("c1", "complete_task", json!({"summary": "delegated"}))]),
        ]),
    );
    let files = [
        (
            "prompts/p.toml",
            "name = \"p\"\ntools = [{ name = \"pair\", initUserMessageProperty = \"task\" }]\n",
        ),
        (
            "agents/pair.toml",
            "name = \"pair\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"Writes notes.\"\n\
             maxSessionTurns = 2\n[sideA]\nprompt = \"w\"\n\
             sessionStop = { name = \"finish\", messageProperty = \"summary\" }\n[sideB]\nprompt = \"b\"\n",
        ),
        (
            "prompts/w.toml",
            "name = \"w\"\nmodel = \"scripted-turns:worker.json\"\ntools = [\"write_file\", \"finish\"]\n",
        ),
        ("prompts/b.toml", "name = \"b\"\n"),
        (
            "tools/finish.toml",
            "name = \"finish\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n",
        ),
    ];
    for (path, body) in files {
        let path = p.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    std::fs::write(
        p.join("worker.json"),
        json!({"responses": [
            calls(&[call("w1", "write_file", json!({"path": "note.txt", "content": "one\n"}))]),
            calls(&[call("f1", "finish", json!({"summary": "could not write"}))]),
        ]})
        .to_string(),
    )
    .unwrap();
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(!p.join("note.txt").exists());
    let events = events(&out);
    let refused: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_refused" && e["payload"]["tool"] == "write_file")
        .collect();
    assert_eq!(refused.len(), 1, "{events:?}");
    assert_eq!(refused[0]["agentPath"], "a/pair", "the subagent's own call");
    assert_eq!(refused[0]["payload"]["stage"], "policy");
    assert_eq!(run_end(&events)["output"], "delegated");
}
