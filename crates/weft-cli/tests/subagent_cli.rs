//! Subagents through the CLI (issue 21): a `dual_ai` agent called from the run's agent shows
//! nested under the parent's call in `weft run`'s live view, and its events carry the agent
//! path `parent/child` in `weft run --json` and `weft events`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{output_text, weft};

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// `a` calls the `dual_ai` subagent `pair` (its task in `task`); pair's worker writes a file,
/// then ends the session with `finish`, whose `summary` is the result.
fn project(p: &Path) {
    let script = json!({"responses": [
        {"toolCalls": [{"id": "s1", "name": "pair", "arguments": {"task": "write the note"}}],
         "usage": {"inputTokens": 40, "outputTokens": 2}},
        {"text": "the note is written", "usage": {"inputTokens": 50, "outputTokens": 1}}
    ]});
    common::scripted_project(p, "defaultAgent = \"a\"\n", &[], &script);
    let files = [
        (
            "prompts/p.toml",
            "name = \"p\"\ntools = [{ name = \"pair\", initUserMessageProperty = \"task\" }]\n"
                .to_owned(),
        ),
        (
            "agents/pair.toml",
            "name = \"pair\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"Writes notes.\"\n\
             maxSessionTurns = 2\n[sideA]\nprompt = \"w\"\nlabel = \"writer\"\n\
             sessionStop = { name = \"finish\", messageProperty = \"summary\" }\n[sideB]\nprompt = \"b\"\n"
                .to_owned(),
        ),
        (
            "prompts/w.toml",
            "name = \"w\"\nmodel = \"scripted-turns:worker.json\"\ntools = [\"write_file\", \"finish\"]\n"
                .to_owned(),
        ),
        ("prompts/b.toml", "name = \"b\"\n".to_owned()),
        (
            "tools/finish.toml",
            "name = \"finish\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n"
                .to_owned(),
        ),
        (
            "worker.json",
            json!({"responses": [
                {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "one\n"}}],
                 "usage": {"inputTokens": 10, "outputTokens": 1}},
                {"toolCalls": [{"id": "f1", "name": "finish", "arguments": {"summary": "note.txt has one line"}}],
                 "usage": {"inputTokens": 10, "outputTokens": 1}}
            ]})
            .to_string(),
        ),
    ];
    for (path, body) in files {
        let path = p.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
}

#[test]
fn the_live_view_shows_a_subagent_nested_under_the_parents_call() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p);
    let out = weft(&p, &["run", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    // The child wrote in its own folder (agents §7.1), not in the project's.
    assert!(!p.join("note.txt").exists());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("a line starting with {prefix:?} in:\n{stdout}"))
    };
    // The parent's call, then the child's side turn and calls one level in, then the
    // call's result: the spec's canonical text.
    let call = at("→ pair");
    let side = at("  [writer]");
    let write = at("  → write_file");
    let finish = at("  → finish");
    let result = at("  ← \"Subagent (reference: ");
    assert!(
        call < side && side < write && write < finish && finish < result,
        "{stdout}"
    );
    assert!(
        lines[result].contains(") has returned the following result:\\n\\n"),
        "{stdout}"
    );
    let reference = lines[result]
        .split_once("(reference: ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(reference, _)| reference)
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(p.join(".weft/threads").join(reference).join("note.txt")).unwrap(),
        "one\n"
    );
    assert!(stdout.contains("the note is written"), "{stdout}");
    // `weft runs show` draws the child under the run's agent, with its status and tokens.
    let run = lines[0]
        .strip_prefix("run ")
        .and_then(|l| l.split(' ').next())
        .unwrap();
    let show = weft(&p, &["runs", "show", run]);
    let show = String::from_utf8_lossy(&show.stdout).into_owned();
    let agents: Vec<&str> = show
        .lines()
        .skip_while(|l| *l != "agents:")
        .skip(1)
        .collect();
    assert_eq!(agents.len(), 2, "{show}");
    assert!(
        agents[0].starts_with("  ") && agents[0].contains(" a Completed"),
        "{show}"
    );
    assert!(
        agents[1].starts_with("    ")
            && agents[1].contains(" pair Completed · 20 in / 2 out tokens"),
        "{show}"
    );
}

#[test]
fn a_subagents_events_carry_its_agent_path() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p);
    let out = weft(&p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let run = events[0]["runId"].as_str().unwrap().to_owned();
    let started = |events: &[Value], tool: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["type"] == "tool_call_start" && e["payload"]["tool"] == tool)
            .map(|e| e["agentPath"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(started(&events, "pair"), ["a"]);
    assert_eq!(started(&events, "write_file"), ["a/pair"]);
    assert_eq!(started(&events, "finish"), ["a/pair"]);
    // The log holds the same events.
    let logged = weft(&p, &["events", &run, "--json"]);
    assert_eq!(logged.status.code(), Some(0), "{}", output_text(&logged));
    let logged: Vec<Value> = String::from_utf8_lossy(&logged.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(started(&logged, "write_file"), ["a/pair"]);
    // The text view names the subagent.
    let view = weft(&p, &["events", &run, "--type", "tool_call_start"]);
    let view = String::from_utf8_lossy(&view.stdout).into_owned();
    let lines: Vec<&str> = view.lines().collect();
    assert_eq!(lines.len(), 3, "{view}");
    assert!(!lines[0].contains("[a/pair]"), "{view}");
    assert!(lines[1].contains("[a/pair] tool_call_start"), "{view}");
}

#[test]
fn a_subagents_tokens_and_cost_roll_up_into_the_runs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p);
    // $1,000 / $10,000 per million tokens.
    std::fs::write(
        p.join("prices.toml"),
        "[scripted-turns]\n\"*\" = { input = 1000, output = 10000 }\n",
    )
    .unwrap();
    let out = weft(&p, &["run", "--pricing", "prices.toml", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    // The lead's 90 in / 3 out ($0.12) and the child's 20 in / 2 out ($0.04).
    let all = output_text(&out);
    assert!(
        all.contains("115 tokens (110 in, 5 out) · $0.1600"),
        "{all}"
    );
    let run = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap()
        .to_owned();
    let show = weft(&p, &["runs", "show", &run, "--json"]);
    let show: Value = serde_json::from_slice(&show.stdout).unwrap();
    let agents = show["agents"].as_array().unwrap();
    let usage = |role: &str| {
        let a = agents.iter().find(|a| a["role"] == role).unwrap();
        let u = &a["usage"];
        let cost = (u["cost"].as_f64().unwrap() * 10_000.0).round() / 10_000.0;
        (
            u["input_tokens"].as_u64().unwrap(),
            u["output_tokens"].as_u64().unwrap(),
            cost,
        )
    };
    assert_eq!(usage("a"), (90, 3, 0.12), "the run's agent: its own calls");
    assert_eq!(usage("pair"), (20, 2, 0.04), "the child: its own calls");
}

#[test]
fn a_subagents_thread_exports_as_spawned_from_its_parents() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p);
    let out = weft(&p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let parent = events[0]["payload"]["threadId"]
        .as_str()
        .unwrap()
        .to_owned();
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_call_end" && e["payload"]["tool"] == "pair")
        .and_then(|e| e["payload"]["result"].as_str())
        .unwrap()
        .to_owned();
    let child = result
        .strip_prefix("Subagent (reference: ")
        .and_then(|r| r.split_once(')'))
        .map(|(r, _)| r.to_owned())
        .unwrap();
    let exported = weft(&p, &["thread", "export", &child, "-o", "child.json"]);
    assert_eq!(
        exported.status.code(),
        Some(0),
        "{}",
        output_text(&exported)
    );
    let thread: Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("child.json")).unwrap()).unwrap();
    assert_eq!(
        thread["relationships"]["links"],
        json!([{"thread_id": parent, "relation": "spawned_from"}])
    );
    let names: Vec<&str> = thread["agents"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|a| a["agent_name"].as_str())
        .collect();
    // Named after the subagent (its side B never spoke: one agent).
    assert_eq!(names, ["pair"]);
    // The child's conversation: its task, then its worker's calls.
    assert_eq!(thread["turns"][0]["parts"][0]["content"], "write the note");
    let valid = weft(&p, &["thread", "validate", "child.json"]);
    assert_eq!(valid.status.code(), Some(0), "{}", output_text(&valid));
    // The parent's export records the spawn (`thread.spawn`, after the call's result).
    let exported = weft(&p, &["thread", "export", &parent, "-o", "parent.json"]);
    assert_eq!(
        exported.status.code(),
        Some(0),
        "{}",
        output_text(&exported)
    );
    let thread: Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("parent.json")).unwrap()).unwrap();
    let spawns: Vec<&Value> = thread["turns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["messages"].as_array().into_iter().flatten())
        .filter(|m| m["event_type"] == "thread.spawn")
        .collect();
    assert_eq!(spawns.len(), 1, "{thread:#}");
    assert_eq!(
        spawns[0]["event_data"],
        json!({"threadId": child, "agent": "pair"})
    );
    let valid = weft(&p, &["thread", "validate", "parent.json"]);
    assert_eq!(valid.status.code(), Some(0), "{}", output_text(&valid));
    // `weft runs show` names the child thread in the transcript.
    let run = events[0]["runId"].as_str().unwrap();
    let show = weft(&p, &["runs", "show", run]);
    assert!(
        String::from_utf8_lossy(&show.stdout).contains(&format!("subagent pair: thread {child}")),
        "{}",
        output_text(&show)
    );
}

#[test]
fn the_subagents_template_runs_end_to_end_with_no_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = weft(dir.path(), &["init", "--template", "subagents", "p"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let p = dir.path().join("p");
    // `weft run` returns once the thread is settled: the writer's results arrived and
    // the editor answered them.
    let out = weft(&p, &["run", "--json", "Write a blurb about Weft"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let run = events[0]["runId"].as_str().unwrap().to_owned();
    let thread = events[0]["payload"]["threadId"]
        .as_str()
        .unwrap()
        .to_owned();
    // The thread's state: one writer instance, done.
    let state = weft(&p, &["thread", "state", &thread]);
    assert_eq!(state.status.code(), Some(0), "{}", output_text(&state));
    let state: Value = serde_json::from_slice(&state.stdout).unwrap();
    assert_eq!(state["threadId"], thread.as_str());
    assert_eq!(state["agentId"], "editor");
    assert!(state["terminated"].is_null());
    let children = state["children"].as_array().unwrap();
    assert_eq!(children.len(), 1, "{state:#}");
    assert_eq!(
        (
            &children[0]["name"],
            &children[0]["status"],
            &children[0]["resumable"],
            &children[0]["blocking"]
        ),
        (
            &json!("blurb"),
            &json!("completed"),
            &json!(true),
            &json!(false)
        )
    );
    let child = children[0]["reference"].as_str().unwrap().to_owned();
    // Each result reached the editor's conversation once, with the spec's text.
    let export = weft(&p, &["thread", "export", &run]);
    assert_eq!(export.status.code(), Some(0), "{}", output_text(&export));
    let exported = String::from_utf8_lossy(&export.stdout).into_owned();
    let first = format!(
        "Subagent (reference: {child}) has returned the following result:\\n\\nWeft runs agents durably: every step is recorded, nothing runs twice."
    );
    assert_eq!(exported.matches(&first).count(), 1, "{exported}");
    // `weft runs show` draws the thread tree with the instance's status.
    let show = weft(&p, &["runs", "show", &run]);
    let shown = String::from_utf8_lossy(&show.stdout).into_owned();
    assert!(
        shown.contains(&format!(
            "threads:\n  {thread} (this run's)\n    blurb {child} (writer) · completed · resumable, non-blocking"
        )),
        "{shown}"
    );
    // The child's result is a silent message: the transcript says so (not the user's).
    assert!(
        shown.contains(&format!(
            "editor heard (silent): Subagent (reference: {child}) has returned the following result:"
        )),
        "{shown}"
    );
    assert!(!shown.contains("user: Subagent (reference:"), "{shown}");
    let show_json = weft(&p, &["runs", "show", &run, "--json"]);
    let shown_json: Value = serde_json::from_slice(&show_json.stdout).unwrap();
    let silent: Vec<&Value> = shown_json["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "user" && l["silent"] == true)
        .collect();
    assert!(!silent.is_empty(), "{shown_json:#}");
    // Terminating the instance: its parent's registry says so, and it takes no new run.
    let out = weft(&p, &["thread", "terminate", &child]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let ended: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        ended["terminated"].as_i64().is_some_and(|t| t > 0),
        "{ended:#}"
    );
    let state: Value =
        serde_json::from_slice(&weft(&p, &["thread", "state", &thread]).stdout).unwrap();
    assert_eq!(state["children"][0]["status"], "terminated");
    let out = weft(
        &p,
        &["run", "--continue", &child, "--agent", "writer", "more"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("was terminated"),
        "{}",
        output_text(&out)
    );
}

/// Starts `weft run --json go` in `p`, and reads its events until `until` holds for one;
/// gives the process and that event.
fn run_until(p: &Path, until: impl Fn(&Value) -> bool) -> (std::process::Child, Value) {
    use std::io::BufRead as _;
    let mut run = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["run", "--json", "go"])
        .current_dir(p)
        .env_remove("WEFT_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = run.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines();
    let found = lines
        .by_ref()
        .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
        .find(|e| until(e))
        .expect("the event");
    // The rest of the output is read off as it comes, so the run never blocks on it.
    std::thread::spawn(move || lines.for_each(drop));
    (run, found)
}

#[test]
fn a_background_child_terminated_by_another_process_stops_inside_its_parents_run() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p);
    // `a` starts `pair` in the background; pair's worker takes a minute to answer, so only
    // its termination ends the run soon.
    std::fs::write(
        p.join("prompts/p.toml"),
        "name = \"p\"\ntools = [{ name = \"pair\", initUserMessageProperty = \"task\", blocking = false }]\n",
    )
    .unwrap();
    std::fs::write(
        p.join("script.json"),
        json!({"responses": [
            {"toolCalls": [{"id": "s1", "name": "pair", "arguments": {"task": "write the note"}}]},
            {"text": "waiting"}
        ]})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        p.join("worker.json"),
        json!({"responses": [{"text": "late", "delayMs": 60_000}]}).to_string(),
    )
    .unwrap();
    let (run, started) = run_until(&p, |e| {
        e["type"] == "tool_call_end" && e["payload"]["tool"] == "pair"
    });
    let result = started["payload"]["result"].as_str().unwrap();
    let child = result
        .split_once("(reference: ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(reference, _)| reference.to_owned())
        .unwrap();
    // Another process terminates the child.
    let out = weft(&p, &["thread", "terminate", &child]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    // The parent's run ends: completed, its child stopped in flight, nothing reported.
    let ended = run.wait_with_output().unwrap();
    assert_eq!(
        ended.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ended.stderr)
    );
    let state = weft(&p, &["thread", "state", &child]);
    let state: Value = serde_json::from_slice(&state.stdout).unwrap();
    assert!(state["terminated"].as_i64().is_some(), "{state:#}");
    let run_id = started["runId"].as_str().unwrap();
    let show = weft(&p, &["runs", "show", run_id]);
    let shown = String::from_utf8_lossy(&show.stdout).into_owned();
    assert!(shown.contains("· terminated"), "{shown}");
    assert!(
        !shown.contains("has returned the following result"),
        "{shown}"
    );
    assert!(!shown.contains("has reported a failure"), "{shown}");
}

#[test]
fn a_run_of_a_thread_terminated_by_another_process_stops() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p);
    // The agent's model takes a minute to answer: only the termination ends the run soon.
    std::fs::write(
        p.join("script.json"),
        json!({"responses": [{"text": "late", "delayMs": 60_000}]}).to_string(),
    )
    .unwrap();
    let (run, first) = run_until(&p, |_| true);
    let thread = first["payload"]["threadId"].as_str().unwrap().to_owned();
    let out = weft(&p, &["thread", "terminate", &thread]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    // The run, driven by the first process, stops: interrupted (exit code 130).
    let ended = run.wait_with_output().unwrap();
    assert_eq!(
        ended.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&ended.stderr)
    );
    // And its thread takes no new run.
    let out = weft(&p, &["run", "--continue", &thread, "more"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
}
