//! Approvals from the command line (issue 14 item 3, RT-019): a tool the project lists in
//! `requiresApproval` waits for a person. Without a terminal the run suspends (exit 4) and
//! prints the decision with the exact commands; `weft approve` / `weft deny` decide it from
//! another process; `weft resume` runs the approved call exactly once or hands the model the
//! reason; a resumed run never asks again for a recorded call. On a pseudo-terminal (util-linux
//! `script`) `weft run` asks inline. External pre-tool-use hooks in `weft.toml` deny with
//! exit 2.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{output_text, weft};

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// A project whose agent writes `note.txt` twice (calls w1, w2) and then answers; both
/// `write_file` calls need approval.
fn project(dir: &Path, extra: &str) {
    let script = json!({"responses": [
        {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "one\n"}}]},
        {"toolCalls": [{"id": "w2", "name": "write_file", "arguments": {"path": "other.txt", "content": "two\n"}}]},
        {"text": "written"}
    ]});
    common::scripted_project(
        dir,
        &format!("requiresApproval = [\"write_file\"]\n{extra}"),
        &["write_file"],
        &script,
    );
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .map(common::flat)
        .collect()
}

fn run_end(out: &Output) -> Value {
    json_lines(out)
        .into_iter()
        .rfind(|e| e["type"] == "run_end")
        .unwrap_or_else(|| panic!("no run_end: {}", output_text(out)))
}

#[test]
fn without_a_terminal_the_run_suspends_and_approve_then_resume_runs_the_call_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p, "");
    let out = weft(dir.path(), &["run", "p", "go"]);
    assert_eq!(out.status.code(), Some(4), "{}", output_text(&out));
    let all = output_text(&out);
    let run = all
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .to_owned();
    assert!(all.contains("write_file"), "{all}");
    assert!(all.contains(&format!("weft approve {run} d-")), "{all}");
    assert!(all.contains(&format!("weft deny {run} d-")), "{all}");
    assert!(all.contains(&format!("weft resume {run}")), "{all}");
    assert!(!p.join("note.txt").exists(), "nothing ran before approval");

    // `weft runs show` lists the pending decision.
    let show = weft(&p, &["runs", "show", &run, "--json"]);
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(shown["status"], "suspended");
    let decisions = shown["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0]["status"], "pending");
    assert_eq!(decisions[0]["toolCallId"], "w1");
    let id = decisions[0]["id"].as_str().unwrap().to_owned();
    let human = output_text(&weft(&p, &["runs", "show", &run]));
    assert!(
        human.contains("pending decisions:") && human.contains(&id),
        "{human}"
    );

    // An unknown id is a usage error naming the pending ones.
    let wrong = weft(&p, &["approve", &run, "d-00000000"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(output_text(&wrong).contains(&id), "{}", output_text(&wrong));

    let approve = weft(&p, &["approve", &run, &id]);
    assert_eq!(approve.status.code(), Some(0), "{}", output_text(&approve));
    assert!(output_text(&approve).contains(&format!("weft resume {run}")));

    // The resume runs w1, then suspends on w2 (decided here by call id, with the flags of
    // `weft resume`).
    let second = weft(&p, &["resume", &run, "--json"]);
    assert_eq!(second.status.code(), Some(4), "{}", output_text(&second));
    assert_eq!(
        std::fs::read_to_string(p.join("note.txt")).unwrap(),
        "one\n"
    );
    let end = run_end(&second);
    assert_eq!(end["status"], "suspended");
    assert_eq!(end["decisions"][0]["toolCallId"], "w2");

    let done = weft(&p, &["resume", &run, "--approve", "w2", "--json"]);
    assert_eq!(done.status.code(), Some(0), "{}", output_text(&done));
    assert_eq!(run_end(&done)["output"], "written");
    assert_eq!(
        std::fs::read_to_string(p.join("other.txt")).unwrap(),
        "two\n"
    );
    // w1 was replayed from the ledger, not asked about or run again.
    let shown: Value =
        serde_json::from_slice(&weft(&p, &["runs", "show", &run, "--json"]).stdout).unwrap();
    let calls = shown["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| c["attempts"] == 1), "{calls:?}");
    let statuses: Vec<&str> = shown["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["used", "used"]);
}

#[test]
fn a_denied_call_reaches_the_model_with_the_reason_and_shows_in_runs_show() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [
        {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "one\n"}}]},
        {"text": "ok, I will not"}
    ]});
    common::scripted_project(
        &p,
        "requiresApproval = [\"write_file\"]\n",
        &["write_file"],
        &script,
    );
    let out = weft(&p, &["run", "--no-input", "--json", "go"]);
    assert_eq!(out.status.code(), Some(4), "{}", output_text(&out));
    let run = run_end(&out)["runId"].as_str().unwrap().to_owned();
    let deny = weft(&p, &["deny", &run, "w1", "--reason", "keep the tree clean"]);
    assert_eq!(deny.status.code(), Some(0), "{}", output_text(&deny));
    let done = weft(&p, &["resume", &run, "--json"]);
    assert_eq!(done.status.code(), Some(0), "{}", output_text(&done));
    assert!(!p.join("note.txt").exists(), "a denied call never runs");
    let results: Vec<Value> = json_lines(&done)
        .into_iter()
        .filter(|e| e["type"] == "tool_call_end")
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["isError"], true);
    assert!(
        results[0]["result"]
            .as_str()
            .unwrap()
            .contains("keep the tree clean"),
        "{results:?}"
    );
    let human = output_text(&weft(&p, &["runs", "show", &run]));
    assert!(
        human.contains("refused calls")
            && human.contains("approval")
            && human.contains("keep the tree clean"),
        "{human}"
    );
}

#[test]
fn a_project_hook_denies_a_call_with_exit_2_and_the_model_reads_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "run_command", "arguments": {"command": "echo ran >> ran.txt"}}]},
        {"text": "understood"}
    ]});
    common::scripted_project(
        &p,
        "[[hooks.preToolUse]]\nmatcher = \"run_command\"\ncommand = \"echo 'commands are frozen today' >&2; exit 2\"\n",
        &["run_command"],
        &script,
    );
    let out = weft(&p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(!p.join("ran.txt").exists());
    let result = json_lines(&out)
        .into_iter()
        .find(|e| e["type"] == "tool_call_end")
        .unwrap();
    assert_eq!(result["result"], "commands are frozen today");
    assert_eq!(result["isError"], true);
}

/// Runs `weft ARGS` under a pseudo-terminal (util-linux `script`), typing `keys`.
fn on_a_terminal(cwd: &Path, args: &str, keys: &str) -> Output {
    let command = format!("{} {args}", env!("CARGO_BIN_EXE_weft"));
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(cwd)
        .env_remove("WEFT_DATABASE_URL")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("util-linux `script` runs commands under a pseudo-terminal");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(keys.as_bytes()).unwrap();
    // Keep the pty's input open until weft exits (an early end of input would answer
    // "decide later").
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    out
}

fn script_available() -> bool {
    Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn on_a_terminal_weft_run_asks_inline_and_approve_runs_the_call_exactly_once() {
    if !script_available() {
        panic!("util-linux `script` is needed for the pseudo-terminal test");
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p, "");
    let out = on_a_terminal(&p, "run go", "y\ny\n");
    let all = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("approve? [y]es / [n]o"), "{all}");
    assert_eq!(
        std::fs::read_to_string(p.join("note.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("other.txt")).unwrap(),
        "two\n"
    );
}

#[test]
fn on_a_terminal_a_denial_with_a_reason_reaches_the_model_and_a_resume_never_asks_again() {
    if !script_available() {
        panic!("util-linux `script` is needed for the pseudo-terminal test");
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    project(&p, "");
    // Deny the first call with a reason; leave the second undecided (Enter): the run suspends.
    let out = on_a_terminal(&p, "run go", "n\nnot that file\n\n");
    let all = output_text(&out);
    assert_eq!(out.status.code(), Some(4), "{all}");
    assert!(!p.join("note.txt").exists());
    let run = all
        .lines()
        .find_map(|l| l.trim().strip_prefix("run "))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .to_owned();
    // The resume (no terminal) does not ask about w1 again: its denial is recorded; it
    // suspends on w2 only.
    let resumed = weft(&p, &["resume", &run, "--json"]);
    assert_eq!(resumed.status.code(), Some(4), "{}", output_text(&resumed));
    let end = run_end(&resumed);
    let pending: Vec<&str> = end["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(pending, ["w2"]);
    // w1's denial reached the model in the first run (its step was committed) and is in the
    // run's record with the reason.
    let shown: Value =
        serde_json::from_slice(&weft(&p, &["runs", "show", &run, "--json"]).stdout).unwrap();
    let refused = shown["refused_calls"].as_array().unwrap();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["tool_call_id"], "w1");
    assert_eq!(refused[0]["stage"], "approval");
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not that file"),
        "{refused:?}"
    );
}

/// A `dual_ai` pair whose reviewer (side B) ends the session with `done`, which needs
/// approval: the suspension is in side B's first step of its turn.
fn write_pair(dir: &Path) {
    for sub in ["agents", "prompts", "tools"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
    }
    let files = [
        (
            "weft.toml",
            "model = \"scripted-turns:a.json\"\nrequiresApproval = [\"done\"]\n",
        ),
        (
            "agents/pair.toml",
            "name = \"pair\"\ntype = \"dual_ai\"\nmaxSessionTurns = 6\n[sideA]\nprompt = \"pa\"\n[sideB]\nprompt = \"pb\"\nsessionStop = { name = \"done\", messageProperty = \"summary\" }\n",
        ),
        ("prompts/pa.toml", "name = \"pa\"\n"),
        (
            "prompts/pb.toml",
            "name = \"pb\"\nmodel = \"scripted-turns:b.json\"\ntools = [\"done\"]\n",
        ),
        (
            "tools/done.toml",
            "name = \"done\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n",
        ),
        ("a.json", r#"{"responses":[{"text":"draft 1"}]}"#),
        (
            "b.json",
            r#"{"responses":[{"toolCalls":[{"id":"d1","name":"done","arguments":{"summary":"approved"}}]}]}"#,
        ),
    ];
    for (path, body) in files {
        std::fs::write(dir.join(path), body).expect("write");
    }
}

#[test]
fn a_dual_ai_side_b_call_waiting_for_approval_resumes_in_side_b() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pair");
    write_pair(&p);
    let out = weft(&p, &["run", "--json", "task"]);
    assert_eq!(out.status.code(), Some(4), "{}", output_text(&out));
    let end = run_end(&out);
    let run = end["runId"].as_str().unwrap().to_owned();
    assert_eq!(end["decisions"][0]["toolName"], "done");
    let approve = weft(&p, &["approve", &run, "d1"]);
    assert_eq!(approve.status.code(), Some(0), "{}", output_text(&approve));
    let done = weft(&p, &["resume", &run, "--json"]);
    assert_eq!(done.status.code(), Some(0), "{}", output_text(&done));
    let turns: Vec<(Value, Value)> = json_lines(&done)
        .into_iter()
        .filter(|e| e["type"] == "side_turn_start")
        .map(|e| (e["side"].clone(), e["sessionTurn"].clone()))
        .collect();
    assert_eq!(
        turns,
        [(json!("sideB"), json!(2))],
        "side A's turn is not taken again"
    );
    let session_end = json_lines(&done)
        .into_iter()
        .find(|e| e["type"] == "session_end")
        .unwrap();
    assert_eq!(session_end["reason"], "sessionStop");
    assert_eq!(session_end["message"], "approved");
}

/// `[gates] runs = true` (issue 23 item 7): Weft's own run passes the Universal Agent
/// Protocol's gates as a stage of its tool pipeline — here the dangerous-command guard and
/// the worktree gate — and the model reads the denial; allowed calls run.
#[test]
fn with_gates_on_for_runs_a_force_push_and_an_edit_outside_a_worktree_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [
        {"toolCalls": [{"id": "g1", "name": "run_command", "arguments": {"command": "git push --force origin main"}}]},
        {"toolCalls": [{"id": "g2", "name": "write_file", "arguments": {"path": "src.txt", "content": "x"}}]},
        {"toolCalls": [{"id": "g3", "name": "run_command", "arguments": {"command": "echo fine >> ok.txt"}}]},
        {"text": "done"}
    ]});
    common::scripted_project(
        &p,
        "[gates]\nruns = true\n",
        &["run_command", "write_file"],
        &script,
    );
    let out = weft(&p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let results: Vec<(String, bool, String)> = json_lines(&out)
        .into_iter()
        .filter(|e| e["type"] == "tool_call_end")
        .map(|e| {
            (
                e["id"].as_str().unwrap().to_owned(),
                e["isError"].as_bool().unwrap(),
                e["result"].to_string(),
            )
        })
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[0].1 && results[0].2.contains("denied by the project's gates"),
        "{results:?}"
    );
    assert!(
        results[1].1 && results[1].2.contains("worktree"),
        "{results:?}"
    );
    assert!(!results[2].1, "{results:?}");
    assert!(!p.join("src.txt").exists());
    assert_eq!(std::fs::read_to_string(p.join("ok.txt")).unwrap(), "fine\n");
}

/// `[gates] completeRuns = true` (issue 23 item 7): a run ends completed only when the
/// project's completion checklist passes; otherwise it fails, naming the failing checks.
#[test]
fn with_completion_gates_a_run_is_done_only_when_its_checks_pass() {
    let config = "[gates]\ncompleteRuns = true\n[completion]\ntests = \"test -f done.txt\"\n";
    // The agent claims done without doing the work: the run fails with the check named.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let lazy = json!({"responses": [{"text": "all done!"}]});
    common::scripted_project(&p, config, &["write_file"], &lazy);
    let out = weft(&p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let end = run_end(&out);
    let error = end["error"].as_str().unwrap();
    assert!(
        error.contains("completion gates failed") && error.contains("tests"),
        "{end}"
    );

    // The agent does the work: the run completes.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let diligent = json!({"responses": [
        {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "done.txt", "content": "ok\n"}}]},
        {"text": "all done!"}
    ]});
    common::scripted_project(&p, config, &["write_file"], &diligent);
    let out = weft(&p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_eq!(run_end(&out)["output"], "all done!");
}
