//! MCP from the command line (issue 18 §2), against real MCP servers written with the
//! official Python SDK (`crates/weft-mcp/tests/servers/`): a project's `[mcpServers]` tools
//! in `weft run` go through the tool pipeline (the durable ledger, approval, the command
//! sandbox), a tool a server adds mid-run is offered at the next step, a server crashing
//! mid-call leaves the call uncertain (exit 3); `weft mcp list` shows servers and tools;
//! `weft mcp serve` is called by the Python SDK's client. Without the `mcp` package the tests
//! are skipped with a printed reason — unless `CI` is set, where they fail.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{output_text, weft};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn python() -> Option<(PathBuf, PathBuf)> {
    weft_testkit::mcp_python()
}

fn servers_dir() -> PathBuf {
    weft_testkit::mcp_servers_dir()
}

/// `[mcpServers.demo]` running the demo server over stdio in the command sandbox.
fn demo_server(python: &(PathBuf, PathBuf), extra: &str) -> String {
    demo_server_in(
        python,
        &std::fs::canonicalize(servers_dir()).unwrap(),
        extra,
    )
}

/// The demo server's configuration with its script in `servers` (readable in the sandbox).
fn demo_server_in(python: &(PathBuf, PathBuf), servers: &Path, extra: &str) -> String {
    format!(
        "[mcpServers.demo]\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\nreadOnly = [{:?}, {:?}]\n{extra}",
        python.0.display().to_string(),
        servers.join("demo_server.py").display().to_string(),
        python.1.display().to_string(),
        servers.display().to_string(),
    )
}

fn run_end(out: &Output) -> Value {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(common::flat)
        .rfind(|e| e["type"] == "run_end")
        .unwrap_or_else(|| panic!("no run_end: {}", output_text(out)))
}

fn show(p: &Path, run: &str) -> Value {
    let out = weft(p, &["runs", "show", run, "--json"]);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", output_text(&out)))
}

fn call<'a>(shown: &'a Value, tool: &str) -> &'a Value {
    shown["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool_name"] == tool)
        .unwrap_or_else(|| panic!("no call of {tool}: {shown:#}"))
}

#[test]
fn a_run_calls_mcp_tools_through_the_ledger_and_is_offered_a_tool_added_mid_run() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "demo__add_tool", "arguments": {"name": "extra"}}]},
        {"toolCalls": [{"id": "c2", "name": "demo__extra", "arguments": {}}]},
        {"toolCalls": [{"id": "c3", "name": "demo__read_file", "arguments": {"path": "../outside.txt"}}]},
        {"text": "done"}
    ]});
    common::scripted_project(&p, &demo_server(&python, ""), &["mcp:demo"], &script);
    std::fs::write(dir.path().join("outside.txt"), "SECRET-OUTSIDE").unwrap();
    let out = weft(dir.path(), &["run", "p", "go", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let end = run_end(&out);
    assert_eq!(end["output"], "done");
    let shown = show(&p, end["runId"].as_str().unwrap());
    let add = call(&shown, "demo__add_tool");
    assert_eq!(add["status"], "completed");
    // An untrusted server's tool is side-effecting: made durable before it ran.
    assert_eq!(add["side_effects"], true);
    // The tool the server added during step 1 was offered at step 2, and ran.
    let extra = call(&shown, "demo__extra");
    assert_eq!(extra["status"], "completed");
    assert_eq!(extra["is_error"], false, "{extra:#}");
    assert_eq!(extra["result"]["result"], "added extra");
    // The server runs in the command sandbox: the file beside the workspace is not there.
    let read = call(&shown, "demo__read_file");
    assert_eq!(read["is_error"], true, "{read:#}");
    assert!(!read["result"].to_string().contains("SECRET"), "{read:#}");
    let events = weft(&p, &["events", end["runId"].as_str().unwrap(), "--json"]);
    assert!(
        String::from_utf8_lossy(&events.stdout).contains("mcp_tools_changed"),
        "{}",
        output_text(&events)
    );
}

#[test]
fn an_mcp_server_crashing_mid_call_leaves_the_call_uncertain_and_the_run_stops() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "demo__crash", "arguments": {}}]},
        {"text": "after the crash"}
    ]});
    common::scripted_project(&p, &demo_server(&python, ""), &["mcp:demo"], &script);
    let out = weft(dir.path(), &["run", "p", "go", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", output_text(&out));
    let end = run_end(&out);
    let run = end["runId"].as_str().unwrap().to_owned();
    assert_eq!(
        std::fs::read_to_string(p.join("crash.log")).unwrap(),
        "crash\n"
    );
    let shown = show(&p, &run);
    // Not recorded as done: pending, with an uncertain decision.
    let crash = call(&shown, "demo__crash");
    assert_eq!(crash["status"], "pending", "{crash:#}");
    assert!(crash["result"].is_null());
    let decisions = shown["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 1, "{shown:#}");
    assert_eq!(decisions[0]["kind"], "uncertain");
    let id = decisions[0]["id"].as_str().unwrap().to_owned();
    // A resume stops on it again until someone decides (the same decision, not a new one).
    let again = weft(&p, &["resume", &run]);
    assert_eq!(again.status.code(), Some(3), "{}", output_text(&again));
    assert_eq!(show(&p, &run)["decisions"].as_array().unwrap().len(), 1);
    // Denied: the call is not run again; the model hears why and the run completes.
    let deny = weft(&p, &["deny", &run, &id, "--reason", "do not crash twice"]);
    assert_eq!(deny.status.code(), Some(0), "{}", output_text(&deny));
    let resumed = weft(&p, &["resume", &run, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", output_text(&resumed));
    assert_eq!(run_end(&resumed)["output"], "after the crash");
    assert_eq!(
        std::fs::read_to_string(p.join("crash.log")).unwrap(),
        "crash\n"
    );
}

#[test]
fn an_mcp_tool_needing_approval_suspends_the_run_and_a_trusted_read_only_tool_is_not_durable_work()
{
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "demo__read_note", "arguments": {}}]},
        {"toolCalls": [{"id": "c2", "name": "demo__echo", "arguments": {"text": "approved?"}}]},
        {"text": "echoed"}
    ]});
    let config = format!(
        "requiresApproval = [\"demo__echo\"]\n{}",
        demo_server(&python, "trusted = true\n")
    );
    common::scripted_project(&p, &config, &["mcp:demo"], &script);
    let out = weft(dir.path(), &["run", "p", "go", "--json"]);
    assert_eq!(out.status.code(), Some(4), "{}", output_text(&out));
    let run = run_end(&out)["runId"].as_str().unwrap().to_owned();
    let shown = show(&p, &run);
    let note = call(&shown, "demo__read_note");
    assert_eq!(note["status"], "completed");
    assert_eq!(note["side_effects"], false);
    assert_eq!(note["result"]["result"], "the note");
    let decisions = shown["decisions"].as_array().unwrap();
    assert_eq!(decisions[0]["kind"], "approval");
    assert_eq!(decisions[0]["toolName"], "demo__echo");
    let id = decisions[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(weft(&p, &["approve", &run, &id]).status.code(), Some(0));
    let resumed = weft(&p, &["resume", &run, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", output_text(&resumed));
    let shown = show(&p, &run);
    assert_eq!(call(&shown, "demo__echo")["result"]["result"], "approved?");
}

#[test]
fn a_prompt_naming_an_undeclared_mcp_server_is_a_load_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    common::scripted_project(
        &p,
        "[mcpServers.bad_name]\nurl = \"ftp://x\"\n",
        &["mcp:nothere"],
        &json!({"responses": [{"text": "x"}]}),
    );
    let out = weft(dir.path(), &["run", "p", "go"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let all = output_text(&out);
    assert!(all.contains("there is no MCP server \"nothere\""), "{all}");
    assert!(all.contains("mcpServers.bad_name"), "{all}");
    assert!(all.contains("mcpServers.bad_name.url"), "{all}");
}

#[test]
fn weft_mcp_list_shows_servers_and_their_tools() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    // The server's script in a folder of its own under the temporary folder: a `readOnly`
    // folder under /tmp stays visible beside the sandbox's private /tmp.
    let elsewhere = tempfile::tempdir().unwrap();
    let servers = std::fs::canonicalize(elsewhere.path()).unwrap();
    std::fs::copy(
        servers_dir().join("demo_server.py"),
        servers.join("demo_server.py"),
    )
    .unwrap();
    common::scripted_project(
        &p,
        &demo_server_in(&python, &servers, "trusted = true\n"),
        &["mcp:demo"],
        &json!({"responses": [{"text": "x"}]}),
    );
    let out = weft(dir.path(), &["mcp", "list", "p"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let all = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(all.starts_with("demo (stdio: "), "{all}");
    assert!(all.contains(", trusted)"), "{all}");
    assert!(
        all.contains("  demo__echo  [side-effecting]  Returns the text it is given."),
        "{all}"
    );
    assert!(all.contains("  demo__read_note  [read-only]"), "{all}");
    let json_out = weft(dir.path(), &["mcp", "list", "p", "--json"]);
    let listed: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    let tools = listed["servers"][0]["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "demo__echo").unwrap();
    assert_eq!(echo["parameters"]["required"], json!(["text"]));
    // A server that cannot start is reported, exit 1.
    common::scripted_project(
        &p,
        "[mcpServers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
        &["mcp:broken"],
        &json!({"responses": [{"text": "x"}]}),
    );
    let out = weft(dir.path(), &["mcp", "list", "p"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("broken"),
        "{}",
        output_text(&out)
    );
    assert!(
        output_text(&out).contains("error: "),
        "{}",
        output_text(&out)
    );
}

#[test]
fn weft_mcp_serve_runs_an_agent_for_the_python_mcp_client() {
    let Some((exe, _)) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    common::scripted_project(
        &p,
        "",
        &[],
        &json!({"responses": [{"text": "hello from the agent"}]}),
    );
    std::fs::write(
        p.join("agents/a.toml"),
        "name = \"a\"\ndescription = \"Says hello.\"\n[sideA]\nprompt = \"p\"\n",
    )
    .unwrap();
    let out = Command::new(exe)
        .arg(servers_dir().join("agent_client.py"))
        .args([
            env!("CARGO_BIN_EXE_weft"),
            p.to_str().unwrap(),
            "a",
            "say hello",
        ])
        .current_dir(dir.path())
        .env_remove("WEFT_DATABASE_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    let answer: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", output_text(&out)));
    assert_eq!(answer["tools"][0]["name"], "a");
    assert_eq!(answer["tools"][0]["description"], "Says hello.");
    assert_eq!(
        answer["tools"][0]["inputSchema"]["required"],
        json!(["input"])
    );
    assert_eq!(answer["text"], "hello from the agent");
    assert_eq!(answer["isError"], false);
    // The call was a durable run of the agent, in the project's store.
    let runs = weft(&p, &["runs", "list", "--json"]);
    assert!(
        String::from_utf8_lossy(&runs.stdout).contains("completed"),
        "{}",
        output_text(&runs)
    );
}

/// What `compress_output` may do to text without changing its meaning: terminal sequences
/// gone, a carriage-return rewrite shows its last state, trailing blanks cut, blank runs one.
fn normalized_log(text: &str) -> String {
    let ansi = regex_lite_strip(text);
    let lines: Vec<String> = ansi
        .split('\n')
        .map(|l| l.rsplit('\r').next().unwrap_or(l).trim_end().to_owned())
        .collect();
    let mut out: Vec<String> = Vec::new();
    for line in lines {
        if line.is_empty() && out.last().is_some_and(String::is_empty) {
            continue;
        }
        out.push(line);
    }
    out.join("\n").trim_matches('\n').to_owned()
}

/// Removes `ESC [ … letter` sequences (all the output server uses).
fn regex_lite_strip(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for n in chars.by_ref() {
                if n.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A project whose `[mcpServers.out]` is the output server; `router_client.py` run against
/// it through `weft mcp router`.
fn router_project(python: &(PathBuf, PathBuf), p: &Path) {
    let servers = std::fs::canonicalize(servers_dir()).unwrap();
    common::scripted_project(
        p,
        &format!(
            "[mcpServers.out]\ncommand = {:?}\nargs = [{:?}]\nreadOnly = [{:?}, {:?}]\n",
            python.0.display().to_string(),
            servers.join("output_server.py").display().to_string(),
            python.1.display().to_string(),
            servers.display().to_string(),
        ),
        &[],
        &json!({"responses": []}),
    );
}

fn router_client(python: &(PathBuf, PathBuf), p: &Path) -> Value {
    let servers = std::fs::canonicalize(servers_dir()).unwrap();
    let out = Command::new(&python.0)
        .arg(servers.join("router_client.py"))
        .args([
            env!("CARGO_BIN_EXE_weft"),
            p.to_str().unwrap(),
            servers.join("output_server.py").to_str().unwrap(),
        ])
        .current_dir(p.parent().unwrap())
        .env_remove("WEFT_DATABASE_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", output_text(&out)))
}

#[test]
fn the_mcp_router_refuses_a_call_a_required_policy_denies() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    router_project(&python, &p);
    let added = weft(
        &p,
        &[
            "policy",
            "add",
            "no-build-logs",
            "--tools",
            "mcp__out__build_log",
            "--deny-pattern",
            ".*",
        ],
    );
    assert!(added.status.success(), "{}", output_text(&added));
    let answer = router_client(&python, &p);
    let refused = answer["routed"]["build_log"].as_str().unwrap();
    assert!(
        refused.contains("out/build_log was refused") && refused.contains("no-build-logs"),
        "{refused}"
    );
    // Other tools pass; both checks are in the audit trail.
    assert!(
        answer["routed"]["report"]
            .as_str()
            .unwrap()
            .starts_with('{')
    );
    let audit = weft(&p, &["policy", "audit"]);
    assert!(
        output_text(&audit).contains("mcp__out__build_log")
            && output_text(&audit).contains("mcp__out__report"),
        "{}",
        output_text(&audit)
    );
}

#[test]
fn uni_008_the_mcp_router_compresses_tool_output_without_changing_its_meaning() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    router_project(&python, &p);
    let answer = router_client(&python, &p);
    // Tool hiding: the client sees the two meta-tools; discovery finds the downstream tool.
    assert_eq!(
        answer["meta_tools"],
        json!(["discover_tools", "execute_tool"])
    );
    assert_eq!(answer["discovered"]["tools"][0]["path"], "out/build_log");
    assert_eq!(
        answer["discovered"]["tools"][0]["description"],
        "Returns the log of the last build."
    );
    // JSON: much smaller, the same value.
    let (direct, routed) = (
        answer["direct"]["report"].as_str().unwrap(),
        answer["routed"]["report"].as_str().unwrap(),
    );
    assert!(
        routed.len() * 2 < direct.len(),
        "{} → {}",
        direct.len(),
        routed.len()
    );
    assert_eq!(
        serde_json::from_str::<Value>(routed).unwrap(),
        serde_json::from_str::<Value>(direct).unwrap(),
        "minified JSON is the same value"
    );
    // A log: smaller, and expanding the folded lines gives back every line of the original
    // (minus colours, progress redraws and trailing blanks).
    let (direct, routed) = (
        answer["direct"]["build_log"].as_str().unwrap(),
        answer["routed"]["build_log"].as_str().unwrap(),
    );
    assert!(
        routed.len() * 4 < direct.len(),
        "{} → {}:\n{routed}",
        direct.len(),
        routed.len()
    );
    assert!(
        routed.contains("[previous line repeated 39 more times]") && !routed.contains('\u{1b}'),
        "{routed}"
    );
    assert_eq!(weft_mcp::expand(routed), normalized_log(direct));
    assert!(routed.contains("\n    indented context stays"), "{routed}");
    // A tool the server does not have is an error result, not a crash.
    assert_eq!(answer["unknown"]["isError"], true);
    assert!(
        answer["unknown"]["text"].as_str().unwrap().contains("nope"),
        "{}",
        answer["unknown"]
    );
}
