//! SOP roles (runtime spec §7, issue 22 item 9) through `weft run`: an agent with `role =
//! "…"` is offered only its current phase's tools (the requests a model server receives show
//! it), a call of another phase's tool is refused with the phase it belongs to, a quality
//! gate holds the workflow in its phase until it passes (`tests_pass` runs the project's
//! `testCommand`), a phase that uses its `maxReactLoop` moves on or fails, custom roles come
//! from `[runtime.roles.NAME]`, and the roles' web tools `read_url` and `search_web` (the
//! Brave Search API's wire format) work against local servers under the network policy.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use weft_testkit::{ReplayServer, Reply};

/// Runs `weft` off the async runtime (the local servers live on it), with `env` added.
async fn weft(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let cwd = cwd.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
        command
            .args(&args)
            .current_dir(&cwd)
            .env_remove("WEFT_DATABASE_URL")
            .env_remove("WEFT_SEARCH_WEB_URL")
            .env_remove("BRAVE_SEARCH_API_KEY")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        for (k, v) in &env {
            command.env(k, v);
        }
        command.output().expect("weft runs")
    })
    .await
    .expect("join")
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"toolCalls": [{"id": id, "name": name, "arguments": arguments}]})
}

fn events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == kind)
        .map(|e| &e["payload"])
        .collect()
}

/// The result of the call `id` (its `tool_call_end`): whether it failed, and its text.
fn result_of(events: &[Value], id: &str) -> (bool, String) {
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_call_end" && e["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no tool_call_end for {id}"));
    let result = &end["payload"]["result"];
    (
        end["payload"]["isError"].as_bool().unwrap(),
        result
            .as_str()
            .map_or_else(|| result.to_string(), str::to_owned),
    )
}

fn run_end(events: &[Value]) -> &Value {
    of_type(events, "run_end").pop().expect("run_end")
}

/// A Chat Completions answer calling `name` with `arguments`, streamed.
fn tool_call_reply(id: &str, name: &str, arguments: &Value) -> Reply {
    let chunk = json!({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0, "id": id,
            "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]},
            "finish_reason": null}]});
    let end = json!({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}});
    Reply::sse(
        &format!("data: {chunk}\n\ndata: {end}\n\ndata: [DONE]\n\n"),
        256,
    )
}

/// The names of the tools a Chat Completions request offered.
fn offered(request: &weft_testkit::Received) -> Vec<String> {
    let mut names: Vec<String> = request.json()["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phase_offers_only_its_tools_and_a_call_of_another_phases_is_refused() {
    // The reviewer role (§7.3): explore [read_file, search_code, list_dir] → analyze
    // [read_file, search_code] → report []. The model is a local Chat Completions server,
    // so the test sees the tools each request offered.
    let server = ReplayServer::start(vec![
        tool_call_reply("l1", "list_dir", &json!({"path": "."})),
        tool_call_reply("a1", "advance_phase", &json!({})),
        tool_call_reply("l2", "list_dir", &json!({"path": "."})),
        tool_call_reply("a2", "advance_phase", &json!({"summary": "read it"})),
        tool_call_reply(
            "c1",
            "complete_task",
            &json!({"summary": "reviewed: no bugs"}),
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    common::scripted_project(p, "", &[], &json!({"responses": []}));
    std::fs::write(
        p.join("weft.toml"),
        "model = \"openai-compatible:m\"\n[runtime]\nrole = \"reviewer\"\n",
    )
    .unwrap();
    std::fs::write(p.join("main.rs"), "fn main() {}\n").unwrap();
    let url = format!("{}/v1", server.url());
    let out = weft(
        p,
        &["run", "--json", "review main.rs"],
        &[
            ("WEFT_OPENAI_COMPATIBLE_BASE_URL", &url),
            ("WEFT_OPENAI_COMPATIBLE_API_KEY", "sk-test-0000000000000000"),
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let received = server.received();
    assert_eq!(received.len(), 5, "{}", text(&out));
    let explore = [
        "advance_phase",
        "complete_task",
        "list_dir",
        "read_file",
        "search_code",
    ];
    let analyze = ["advance_phase", "complete_task", "read_file", "search_code"];
    assert_eq!(offered(&received[0]), explore);
    assert_eq!(offered(&received[1]), explore);
    assert_eq!(offered(&received[2]), analyze);
    assert_eq!(offered(&received[3]), analyze);
    // The last phase is LLM-only: complete_task alone.
    assert_eq!(offered(&received[4]), ["complete_task"]);
    // The system text tells the model its role and phase.
    let system = received[2].json()["messages"][0]["content"].to_string();
    assert!(
        system.contains("Reviewer") && system.contains("\\\"analyze\\\""),
        "{system}"
    );
    let events = events(&out);
    assert!(!result_of(&events, "l1").0);
    // list_dir belongs to explore: refused in analyze, with the reason the model reads.
    let (failed, reason) = result_of(&events, "l2");
    assert!(failed, "{reason}");
    assert!(
        reason.contains("\"analyze\" phase") && reason.contains("belongs to the phase explore"),
        "{reason}"
    );
    let refused = of_type(&events, "tool_call_refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["tool"], "list_dir");
    assert_eq!(refused[0]["stage"], "policy");
    let phases: Vec<(String, String)> = of_type(&events, "sop_phase")
        .iter()
        .map(|e| {
            (
                e["phase"].as_str().unwrap().to_owned(),
                e["trigger"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        phases,
        [
            ("explore".to_owned(), "start".to_owned()),
            ("analyze".to_owned(), "advance_phase".to_owned()),
            ("report".to_owned(), "advance_phase".to_owned()),
        ]
    );
    assert_eq!(run_end(&events)["output"], "reviewed: no bugs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_holds_the_phase_until_it_passes_and_tests_pass_runs_the_test_command() {
    // The coder role (§7.1): tests_exist after implement, tests_pass after verify. The
    // project's test command logs each run and passes once src/done.txt exists.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let script = json!({"responses": [
        call("a1", "advance_phase", json!({})),
        call("a2", "advance_phase", json!({})),
        // implement → verify: no tests yet.
        call("a3", "advance_phase", json!({})),
        call("w1", "write_file", json!({"path": "tests/check.sh",
            "content": "echo ran >> gate.log\ntest -f src/done.txt\n"})),
        call("a4", "advance_phase", json!({})),
        // verify: the tests fail, so the task may not end.
        call("c1", "complete_task", json!({"summary": "too early"})),
        call("r1", "run_command", json!({"command": "mkdir -p src && echo ok > src/done.txt"})),
        call("c2", "complete_task", json!({"summary": "implemented and tested"})),
    ]});
    common::scripted_project(
        p,
        "[project]\ntestCommand = \"sh tests/check.sh\"\n[runtime]\nrole = \"coder\"\n[runtime.policy]\nmode = \"batch\"\n",
        &["read_file"],
        &script,
    );
    let out = weft(p, &["run", "--json", "build it"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let events = events(&out);
    let (failed, held) = result_of(&events, "a3");
    assert!(failed, "{held}");
    assert!(
        held.contains("stays in the \"implement\" phase") && held.contains("tests_exist"),
        "{held}"
    );
    assert!(!result_of(&events, "a4").0);
    let (failed, refused) = result_of(&events, "c1");
    assert!(failed, "{refused}");
    assert!(
        refused.contains("tests_pass") && refused.contains("sh tests/check.sh"),
        "{refused}"
    );
    let gates: Vec<(String, String, bool)> = of_type(&events, "sop_gate")
        .iter()
        .map(|g| {
            (
                g["phase"].as_str().unwrap().to_owned(),
                g["check"].as_str().unwrap().to_owned(),
                g["passed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        gates,
        [
            ("implement".into(), "tests_exist".into(), false),
            ("implement".into(), "tests_exist".into(), true),
            ("verify".into(), "tests_pass".into(), false),
            ("verify".into(), "tests_pass".into(), true),
        ]
    );
    // The test command really ran, twice, in the workspace.
    let log = std::fs::read_to_string(p.join("gate.log")).unwrap();
    assert_eq!(log, "ran\nran\n");
    let end = run_end(&events);
    assert_eq!(end["status"], "completed");
    assert_eq!(end["output"], "implemented and tested");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phase_that_uses_its_steps_moves_on_and_the_last_one_fails_the_task() {
    // A project's own role, maxReactLoop 2: two steps in "look", then the executor moves
    // to "close"; two more steps there without complete_task end the task in ERROR.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let script = json!({"responses": [
        call("r1", "read_file", json!({"path": "notes.md"})),
        call("r2", "read_file", json!({"path": "notes.md"})),
        call("r3", "read_file", json!({"path": "notes.md"})),
        call("r4", "read_file", json!({"path": "notes.md"})),
    ]});
    common::scripted_project(
        p,
        "[runtime]\nrole = \"triage\"\n[runtime.roles.triage]\ngoal = \"Sort the notes\"\nmaxReactLoop = 2\n\
         phases = [{name = \"look\", allowedTools = [\"read_file\"]}, {name = \"close\"}]\n",
        &["read_file"],
        &script,
    );
    std::fs::write(p.join("notes.md"), "# notes\n").unwrap();
    let out = weft(p, &["run", "--json", "triage"], &[]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let events = events(&out);
    assert!(!result_of(&events, "r2").0);
    // In "close" read_file is not offered any more.
    let (failed, reason) = result_of(&events, "r3");
    assert!(failed && reason.contains("\"close\" phase"), "{reason}");
    let phases: Vec<String> = of_type(&events, "sop_phase")
        .iter()
        .map(|e| format!("{}:{}", e["phase"], e["trigger"]))
        .collect();
    assert_eq!(
        phases,
        ["\"look\":\"start\"", "\"close\":\"max_react_loop\""]
    );
    let end = run_end(&events);
    assert_eq!(end["status"], "failed", "{end}");
    assert!(end.to_string().contains("maxReactLoop of 2 steps"), "{end}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_roles_are_load_errors_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    for (runtime, key, words) in [
        (
            "[runtime]\nrole = \"astronaut\"\n",
            "runtime.role",
            "coder, researcher, reviewer, architect",
        ),
        (
            "[runtime.roles.triage]\nmaxReactLoop = 1\nphases = [{name = \"a\"}]\n\
             qualityGates = [{after = \"b\", check = \"tests_pass\"}]\n",
            "runtime.roles.triage.qualityGates[0].after",
            "not a phase",
        ),
        (
            "[runtime.roles.triage]\nmaxReactLoop = 1\nphases = [{name = \"a\", tools = []}]\n",
            "runtime.roles.triage.phases[0].tools",
            "unknown field",
        ),
        (
            "[runtime.roles.coder]\nmaxReactLoop = 1\nphases = [{name = \"a\"}]\n",
            "runtime.roles.coder",
            "built-in role",
        ),
        (
            "[runtime.roles.triage]\nmaxReactLoop = 1\nphases = [{name = \"a\", allowedTools = [\"raed_file\"]}]\n",
            "runtime.roles.triage.phases[0].allowedTools",
            "unknown tool \"raed_file\"",
        ),
    ] {
        common::scripted_project(p, runtime, &["read_file"], &json!({"responses": []}));
        let out = weft(p, &["run", "go"], &[]).await;
        assert_eq!(out.status.code(), Some(2), "{runtime}: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("weft.toml") && said.contains(key) && said.contains(words),
            "{runtime}: {said}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_url_and_search_web_reach_local_servers_when_the_network_is_allowed() {
    let page = ReplayServer::start(vec![Reply::raw(
        200,
        "text/html; charset=utf-8",
        "<html><head><title>Weft</title><script>track()</script></head>\
         <body><h1>Agents &amp; tools</h1><p>Phase-gated <b>SOPs</b>.</p></body></html>",
    )])
    .await;
    // The Brave Search API's answer (`web.results[]`), served locally.
    let search = ReplayServer::start(vec![Reply::json(
        200,
        &json!({"type": "search", "query": {"original": "agent runtimes"},
        "web": {"type": "search", "results": [
            {"title": "The <strong>Agent</strong> Runtime", "url": "https://example.org/runtime",
             "description": "Phases, gates and <strong>roles</strong>.", "language": "en"},
            {"title": "Second", "url": "https://example.org/2", "description": "More."}
        ]}}),
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let page_url = format!("{}/doc.html", page.url());
    let script = json!({"responses": [
        call("u1", "read_url", json!({"url": page_url})),
        call("s1", "search_web", json!({"query": "agent runtimes", "count": 2})),
        call("a1", "advance_phase", json!({})),
        call("a2", "advance_phase", json!({})),
        call("c1", "complete_task", json!({"summary": "found two sources"})),
    ]});
    common::scripted_project(
        p,
        "sandboxNetwork = true\n[runtime]\nrole = \"researcher\"\n",
        &[],
        &script,
    );
    let search_url = format!("{}/res/v1/web/search", search.url());
    let out = weft(
        p,
        &["run", "--json", "research"],
        &[
            ("WEFT_SEARCH_WEB_URL", &search_url),
            ("BRAVE_SEARCH_API_KEY", "brave-test-key"),
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let events = events(&out);
    let (failed, read) = result_of(&events, "u1");
    assert!(!failed, "{read}");
    let read: Value = serde_json::from_str(&read).unwrap();
    assert_eq!(read["text"], "Weft\nAgents & tools\nPhase-gated SOPs.");
    assert_eq!(read["status"], 200);
    let (failed, found) = result_of(&events, "s1");
    assert!(!failed, "{found}");
    let found: Value = serde_json::from_str(&found).unwrap();
    assert_eq!(
        found["results"][0],
        json!({"title": "The Agent Runtime", "url": "https://example.org/runtime",
               "description": "Phases, gates and roles."})
    );
    assert_eq!(found["results"].as_array().unwrap().len(), 2);
    // The request spoke the Brave Search API: GET, q and count, the key in its header.
    let asked = &search.received()[0];
    assert_eq!(asked.method, "GET");
    assert_eq!(asked.path, "/res/v1/web/search?q=agent+runtimes&count=2");
    assert_eq!(asked.header("x-subscription-token"), Some("brave-test-key"));
    assert_eq!(asked.header("accept"), Some("application/json"));
    assert_eq!(page.received()[0].path, "/doc.html");
    assert_eq!(run_end(&events)["output"], "found two sources");

    // Without network access (the default sandbox), the tools say so and reach nothing.
    let denied = ReplayServer::start(vec![]).await;
    let script = json!({"responses": [
        call("u1", "read_url", json!({"url": format!("{}/x", denied.url())})),
        call("c1", "complete_task", json!({"summary": "no network"})),
    ]});
    common::scripted_project(p, "[runtime]\nrole = \"architect\"\n", &[], &script);
    let out = weft(p, &["run", "--json", "look"], &[]).await;
    let (failed, reason) = result_of(&events_of(&out), "u1");
    assert!(
        failed && reason.contains("cannot reach the network"),
        "{reason}"
    );
    assert!(denied.received().is_empty());
}

fn events_of(out: &Output) -> Vec<Value> {
    events(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_architects_design_phase_is_held_until_a_diagram_exists() {
    // The architect role (§7.4): diagram_exists after design. Without a diagram the model
    // stays in design and reads why; with one (a Mermaid block in a Markdown file) it moves
    // on to document, where write_file is offered.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let script = json!({"responses": [
        call("a1", "advance_phase", json!({})),
        call("a2", "advance_phase", json!({})),
        call("c1", "complete_task", json!({"summary": "designed"})),
    ]});
    let runtime = "[runtime]\nrole = \"architect\"\n[runtime.policy]\nmode = \"batch\"\n";
    common::scripted_project(p, runtime, &[], &script);
    let out = weft(p, &["run", "--json", "design it"], &[]).await;
    let first = events(&out);
    assert!(!result_of(&first, "a1").0, "{}", text(&out));
    let (failed, held) = result_of(&first, "a2");
    assert!(
        failed && held.contains("diagram_exists") && held.contains("\"design\""),
        "{held}"
    );
    // complete_task is not accepted before the last phase.
    let (failed, refused) = result_of(&first, "c1");
    assert!(failed && refused.contains("last phase"), "{refused}");

    std::fs::write(
        p.join("design.md"),
        "# Design\n\n```mermaid\ngraph TD; cli-->runtime\n```\n",
    )
    .unwrap();
    let script = json!({"responses": [
        call("a1", "advance_phase", json!({})),
        call("a2", "advance_phase", json!({})),
        call("w1", "write_file", json!({"path": "ARCH.md", "content": "see design.md"})),
        call("c1", "complete_task", json!({"summary": "designed"})),
    ]});
    common::scripted_project(p, runtime, &[], &script);
    let out = weft(p, &["run", "--json", "design it"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let events = events(&out);
    let (failed, moved) = result_of(&events, "a2");
    assert!(!failed && moved.contains("document"), "{moved}");
    let gate = of_type(&events, "sop_gate");
    assert_eq!(gate.len(), 1);
    assert_eq!(gate[0]["check"], "diagram_exists");
    assert!(gate[0]["detail"].as_str().unwrap().contains("design.md"));
    assert!(p.join("ARCH.md").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_takes_its_own_role_over_the_projects() {
    // The project's agents are coders; agent `a` says it is a reviewer in its runtime table.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let script = json!({"responses": [
        call("w1", "write_file", json!({"path": "x.txt", "content": "x"})),
        call("a1", "advance_phase", json!({})),
        call("a2", "advance_phase", json!({})),
        call("c1", "complete_task", json!({"summary": "reviewed"})),
    ]});
    common::scripted_project(p, "[runtime]\nrole = \"coder\"\n", &[], &script);
    std::fs::write(
        p.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n[runtime]\nrole = \"reviewer\"\n",
    )
    .unwrap();
    let out = weft(p, &["run", "--json", "review"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let events = events(&out);
    let phases = of_type(&events, "sop_phase");
    assert_eq!(phases[0]["role"], "Reviewer");
    assert_eq!(phases.len(), 3);
    // A reviewer never writes: write_file is not one of its tools.
    let (failed, reason) = result_of(&events, "w1");
    assert!(failed && !p.join("x.txt").exists(), "{reason}");
}

/// `weft approve RUN DECISION` for the run's pending decision printed by `--json`, then
/// `weft resume RUN --json`.
async fn approve_and_resume(p: &Path, first: &[Value]) -> Output {
    let run = first[0]["runId"].as_str().unwrap().to_owned();
    let decision = first
        .iter()
        .find(|e| e["type"] == "decision_pending")
        .and_then(|e| e["payload"]["decision"].as_str())
        .expect("a pending decision")
        .to_owned();
    let approved = weft(p, &["approve", &run, &decision], &[]).await;
    assert_eq!(approved.status.code(), Some(0), "{}", text(&approved));
    weft(p, &["resume", &run, "--json"], &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_coder_goes_on_in_the_phase_it_was_paused_in() {
    // Interactive mode: write_file waits for a person. The coder is in its third phase
    // (implement) when the run suspends; the resumed run goes on there — the write runs, the
    // workflow moves on to verify and the task completes.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let script = json!({"responses": [
        call("a1", "advance_phase", json!({})),
        call("a2", "advance_phase", json!({})),
        call("w1", "write_file", json!({"path": "tests/check.sh", "content": "exit 0\n"})),
        call("a3", "advance_phase", json!({})),
        call("c1", "complete_task", json!({"summary": "implemented and verified"})),
    ]});
    common::scripted_project(
        p,
        "[project]\ntestCommand = \"sh tests/check.sh\"\n[runtime]\nrole = \"coder\"\n",
        &["read_file"],
        &script,
    );
    let out = weft(p, &["run", "--json", "build it"], &[]).await;
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let first = events(&out);
    let phases = |events: &[Value]| -> Vec<String> {
        of_type(events, "sop_phase")
            .iter()
            .map(|e| {
                format!(
                    "{}:{}",
                    e["phase"].as_str().unwrap(),
                    e["trigger"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(
        phases(&first),
        [
            "understand:start",
            "plan:advance_phase",
            "implement:advance_phase"
        ]
    );
    let resumed = approve_and_resume(p, &first).await;
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    let events = events(&resumed);
    // The workflow goes on in implement: the write is one of its tools.
    assert_eq!(
        phases(&events),
        ["implement:resume", "verify:advance_phase"]
    );
    assert!(!result_of(&events, "w1").0, "{}", text(&resumed));
    assert_eq!(
        std::fs::read_to_string(p.join("tests/check.sh")).unwrap(),
        "exit 0\n"
    );
    let end = run_end(&events);
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["output"], "implemented and verified");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_phase_keeps_the_steps_it_took() {
    // maxReactLoop 3: one step in "look" before the pause, the paused write is the second,
    // the read after the resume the third — then the executor moves to "close", where the
    // next read is refused. Counted from zero again, "look" would still hold it.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let script = json!({"responses": [
        call("r1", "read_file", json!({"path": "notes.md"})),
        call("w1", "write_file", json!({"path": "sorted.md", "content": "sorted"})),
        call("r2", "read_file", json!({"path": "notes.md"})),
        call("r3", "read_file", json!({"path": "notes.md"})),
        call("c1", "complete_task", json!({"summary": "sorted"})),
    ]});
    common::scripted_project(
        p,
        "[runtime]\nrole = \"triage\"\n[runtime.roles.triage]\nmaxReactLoop = 3\n\
         phases = [{name = \"look\", allowedTools = [\"read_file\", \"write_file\"]}, {name = \"close\"}]\n",
        &["read_file", "write_file"],
        &script,
    );
    std::fs::write(p.join("notes.md"), "# notes\n").unwrap();
    let out = weft(p, &["run", "--json", "triage"], &[]).await;
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let resumed = approve_and_resume(p, &events(&out)).await;
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed));
    let events = events(&resumed);
    assert!(!result_of(&events, "w1").0);
    assert!(!result_of(&events, "r2").0);
    let (failed, reason) = result_of(&events, "r3");
    assert!(failed && reason.contains("\"close\" phase"), "{reason}");
    let phases: Vec<String> = of_type(&events, "sop_phase")
        .iter()
        .map(|e| {
            format!(
                "{}:{}",
                e["phase"].as_str().unwrap(),
                e["trigger"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(phases, ["look:resume", "close:max_react_loop"]);
    assert_eq!(run_end(&events)["status"], "completed");
}
