//! `weft init` + `weft run` end to end, as a subprocess: the live view (insta snapshots in
//! `tests/snapshots/`, run ids redacted), the `--json` schema, exit codes, Ctrl-C (SIGINT →
//! 130 and a resume hint), `weft resume` going on with a session, and a sandbox escape
//! refused through `weft run`.

mod common;

use common::weft;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// Sends SIGINT to `child`, as Ctrl-C in a terminal does.
fn ctrl_c(child: &std::process::Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn scaffold() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = weft(dir.path(), &["init", "demo"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    dir
}

/// Replaces the run id (a UUID) with `RUN`.
fn redact(output: &str) -> String {
    let id = output
        .split_whitespace()
        .find(|w| w.len() == 36 && w.matches('-').count() == 4)
        .unwrap_or("RUN")
        .to_owned();
    output.replace(&id, "RUN")
}

#[test]
fn init_then_run_shows_the_live_view() {
    let dir = scaffold();
    let out = weft(dir.path(), &["run", "demo", "Add a greeting file"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    insta::assert_snapshot!("live_view_coder", redact(&text(&out.stdout)));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("demo/hello.txt")).expect("written"),
        "Hello from Weft!\n"
    );
}

#[test]
fn dual_ai_scaffold_runs_to_session_stop() {
    let dir = scaffold();
    let out = weft(
        dir.path(),
        &["run", "demo", "--agent", "review_pair", "Write a blurb"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    insta::assert_snapshot!("live_view_review_pair", redact(&text(&out.stdout)));
}

#[test]
fn json_events_follow_the_schema() {
    let dir = scaffold();
    let out = weft(
        dir.path(),
        &["run", "demo", "--json", "Add a greeting file"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(events[0]["type"], "run_start");
    let run_id = events[0]["runId"].as_str().expect("runId").to_owned();
    assert_eq!(events[1]["type"], "session_start");
    // One envelope for every event: numbered 1, 2, 3, … with the runtime spec's fields.
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"].as_u64(), Some(i as u64 + 1), "{e}");
        assert_eq!(e["runId"], run_id.as_str(), "{e}");
        assert_eq!(e["id"], format!("{run_id}:{}", i + 1), "{e}");
        for key in ["agentId", "agentPath", "timestamp", "type"] {
            assert!(
                e[key].as_str().is_some_and(|v| !v.is_empty()),
                "{key} in {e}"
            );
        }
        assert!(e["turn"].is_u64() && e["payload"].is_object(), "{e}");
    }
    let call = events
        .iter()
        .find(|e| e["type"] == "tool_call_start")
        .expect("a tool call");
    assert_eq!(call["payload"]["tool"], "list_dir");
    assert_eq!(call["payload"]["arguments"]["path"], ".");
    assert!(call["toolCallId"].is_string(), "{call}");
    let last = events.last().expect("events");
    assert_eq!(
        (
            last["type"].as_str(),
            last["runId"].as_str(),
            last["payload"]["exitCode"].as_u64()
        ),
        (Some("run_end"), Some(run_id.as_str()), Some(0))
    );
    let end = events
        .iter()
        .find(|e| e["type"] == "session_end")
        .expect("session_end");
    assert_eq!(
        (
            end["payload"]["status"].as_str(),
            end["payload"]["reason"].as_str()
        ),
        (Some("completed"), Some("response"))
    );
}

fn write_project(dir: &Path, agent: &str, script: &str) {
    std::fs::create_dir_all(dir.join("agents")).expect("mkdir");
    std::fs::create_dir_all(dir.join("prompts")).expect("mkdir");
    std::fs::create_dir_all(dir.join("tools")).expect("mkdir");
    std::fs::write(dir.join("weft.toml"), "model = \"scripted:script.json\"\n").expect("write");
    std::fs::write(dir.join("agents/a.toml"), agent).expect("write");
    std::fs::write(
        dir.join("prompts/p.toml"),
        "name = \"p\"\ntools = [\"give_up\", \"read_file\", \"run_command\"]\n",
    )
    .expect("write");
    std::fs::write(dir.join("tools/give_up.toml"), "name = \"give_up\"\nparameters = { type = \"object\", properties = { reason = { type = \"string\" } } }\n").expect("write");
    std::fs::write(dir.join("script.json"), script).expect("write");
}

#[test]
fn exit_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 2: a definition error.
    let broken = dir.path().join("broken");
    write_project(
        &broken,
        "name = \"a\"\n[sideA]\nprompt = \"missing\"\n",
        "{}",
    );
    let out = weft(dir.path(), &["run", "broken", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("agents/a.toml: sideA.prompt: unknown prompt \"missing\""),
        "{}",
        text(&out.stderr)
    );
    // 1: sessionFail.
    let failing = dir.path().join("failing");
    write_project(
        &failing,
        "name = \"a\"\n[sideA]\nprompt = \"p\"\nsessionFail = { name = \"give_up\", messageProperty = \"reason\" }\n",
        r#"{"responses":[{"toolCalls":[{"id":"1","name":"give_up","arguments":{"reason":"cannot"}}]}]}"#,
    );
    let out = weft(dir.path(), &["run", "failing", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("the agent failed: cannot"));
    // 2: a missing API key, said in one sentence.
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["run", "failing", "--model", "openai:gpt-4o-mini", "hi"])
        .current_dir(dir.path())
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("weft runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("set OPENAI_API_KEY"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn sandbox_escapes_are_refused_through_weft_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("p");
    write_project(
        &project,
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
        r#"{"responses":[{"toolCalls":[{"id":"1","name":"read_file","arguments":{"path":"../../../../etc/passwd"}},
            {"id":"2","name":"read_file","arguments":{"path":"/etc/passwd"}}]},{"text":"ok"}]}"#,
    );
    let out = weft(dir.path(), &["run", "p", "--json", "read it"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let results: Vec<Value> = text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "tool_call_end")
        .collect();
    assert_eq!(results.len(), 2);
    for r in &results {
        assert_eq!(r["payload"]["isError"], true, "{r}");
        assert!(!r["payload"]["result"].to_string().contains("root:"), "{r}");
    }
}

#[test]
fn sigint_stops_with_130_and_a_resume_hint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("slow");
    write_project(
        &project,
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
        r#"{"responses":[{"text":"slow","delayMs":20000}]}"#,
    );
    let child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["run", "slow", "hi"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    ctrl_c(&child);
    let out = child.wait_with_output().expect("wait");
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(130),
        "{stdout}{}",
        text(&out.stderr)
    );
    let run_id = stdout
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("run id first")
        .to_owned();
    assert!(
        stdout.contains(&format!("resume with: weft resume {run_id}")),
        "{stdout}"
    );
    let runs = weft(&project, &["runs", "show", &run_id, "--json"]);
    assert!(
        text(&runs.stdout).contains("interrupted"),
        "{}",
        text(&runs.stdout)
    );
}

#[test]
fn sigint_during_a_side_effect_then_resume_names_the_call_and_finishes_when_approved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("slow");
    write_project(&project, "name = \"a\"\n[sideA]\nprompt = \"p\"\n", "{}");
    // A model that answers by position in the conversation, so a resumed process answers alike.
    std::fs::write(
        project.join("weft.toml"),
        "model = \"scripted-turns:script.json\"\n",
    )
    .expect("write");
    std::fs::write(
        project.join("script.json"),
        r#"{"responses":[{"toolCalls":[{"id":"slow_1","name":"run_command","arguments":{"command":"echo start >> effects.log; sleep 3; echo end >> effects.log"}}]},{"text":"finished"}]}"#,
    )
    .expect("write");
    let child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["run", "slow", "go"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Wait until the command is running, then Ctrl-C.
    let log = project.join("effects.log");
    for _ in 0..100 {
        if log.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    ctrl_c(&child);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let run_id = text(&out.stdout)
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("run id first")
        .to_owned();
    // The hint is the command that works: the call was in flight, so it says
    // --rerun-uncertain and why.
    assert!(
        text(&out.stdout).contains(&format!(
            "resume with: weft resume {run_id} --rerun-uncertain\n(tool call slow_1 (run_command) was running"
        )),
        "{}",
        text(&out.stdout)
    );
    // The call was in flight: a plain resume stops and names it (exit 3) ...
    let out = weft(&project, &["resume", &run_id]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("slow_1"),
        "{}",
        text(&out.stderr)
    );
    // ... and finishes once the user approves re-running it.
    let out = weft(
        &project,
        &["resume", &run_id, "--rerun-uncertain", "--force"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("finished"),
        "{}",
        text(&out.stdout)
    );
    let runs = weft(&project, &["runs", "show", &run_id, "--json"]);
    assert!(
        text(&runs.stdout).contains("completed"),
        "{}",
        text(&runs.stdout)
    );
}

/// A `dual_ai` project whose reviewer (side B) thinks for 3 s before its first answer.
fn write_pair(dir: &Path) {
    for sub in ["agents", "prompts", "tools"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
    }
    let files = [
        ("weft.toml", "model = \"scripted-turns:a.json\"\n"),
        (
            "agents/pair.toml",
            "name = \"pair\"\ntype = \"dual_ai\"\nmaxSessionTurns = 6\n[sideA]\nprompt = \"pa\"\nlabel = \"Worker\"\n[sideB]\nprompt = \"pb\"\nlabel = \"Reviewer\"\nsessionStop = { name = \"done\", messageProperty = \"summary\" }\n",
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
        (
            "a.json",
            r#"{"responses":[{"text":"draft 1","usage":{"inputTokens":10,"outputTokens":3}},{"text":"draft 2","usage":{"inputTokens":20,"outputTokens":3}}]}"#,
        ),
        (
            "b.json",
            r#"{"responses":[{"text":"fix the title","delayMs":3000,"usage":{"inputTokens":12,"outputTokens":4}},{"toolCalls":[{"id":"d1","name":"done","arguments":{"summary":"approved"}}],"usage":{"inputTokens":30,"outputTokens":5}}]}"#,
        ),
    ];
    for (path, body) in files {
        std::fs::write(dir.join(path), body).expect("write");
    }
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

#[test]
fn dual_ai_run_interrupted_mid_session_resumes_with_the_next_side() {
    use std::io::BufRead as _;

    // The uninterrupted run, for reference.
    let whole = tempfile::tempdir().expect("tempdir");
    write_pair(&whole.path().join("pair"));
    let out = weft(whole.path(), &["run", "pair", "--json", "task"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let reference = json_lines(&text(&out.stdout));
    let end_of = |events: &[Value]| {
        events
            .iter()
            .find(|e| e["type"] == "session_end")
            .map(|e| {
                (
                    e["payload"]["status"].clone(),
                    e["payload"]["reason"].clone(),
                    e["payload"]["message"].clone(),
                )
            })
            .expect("session_end")
    };
    assert_eq!(
        end_of(&reference),
        (
            Value::from("completed"),
            Value::from("sessionStop"),
            Value::from("approved")
        )
    );

    // Ctrl-C while the reviewer thinks (turn 2, side B) ...
    let dir = tempfile::tempdir().expect("tempdir");
    write_pair(&dir.path().join("pair"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["run", "pair", "--json", "task"])
        .current_dir(dir.path())
        .env_remove("WEFT_DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut first = Vec::new();
    for line in lines.by_ref() {
        let event: Value = serde_json::from_str(&line.expect("line")).expect("JSON line");
        let reviewer_started = event["type"] == "turn_start" && event["payload"]["side"] == "sideB";
        first.push(event);
        if reviewer_started {
            break;
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    ctrl_c(&child);
    first.extend(lines.map(|l| serde_json::from_str(&l.expect("line")).expect("JSON line")));
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "{first:?}");
    let run_id = first[0]["runId"].as_str().expect("run id").to_owned();

    // ... and resume: the worker's finished turn is not taken again; the reviewer's is.
    let out = weft(&dir.path().join("pair"), &["resume", &run_id, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let resumed = json_lines(&text(&out.stdout));
    // The resumed process's events, numbered on from the first one's.
    assert_eq!(resumed[0]["type"], "recovery");
    assert_eq!(
        resumed[0]["seq"].as_u64(),
        first
            .iter()
            .filter_map(|e| e["seq"].as_u64())
            .max()
            .map(|s| s + 1)
    );
    let turns: Vec<(Value, Value)> = resumed
        .iter()
        .filter(|e| e["type"] == "side_turn_start")
        .map(|e| {
            (
                e["payload"]["side"].clone(),
                e["payload"]["sessionTurn"].clone(),
            )
        })
        .collect();
    assert_eq!(
        turns,
        vec![
            (Value::from("sideB"), Value::from(2)),
            (Value::from("sideA"), Value::from(3)),
            (Value::from("sideB"), Value::from(4)),
        ]
    );
    assert_eq!(end_of(&resumed), end_of(&reference));
    let show = weft(
        &dir.path().join("pair"),
        &["runs", "show", &run_id, "--json"],
    );
    let show: Value = serde_json::from_str(&text(&show.stdout)).expect("runs show JSON");
    assert_eq!(show["status"], "completed", "{show}");
    assert_eq!(show["steps"], 4, "{show}");
    assert_eq!(show["agents"][0]["status"], "completed", "lineage: {show}");
    assert_eq!(
        show["agents"][0]["usage"]["input_tokens"], 72,
        "lineage: {show}"
    );
    // Tokens across both processes: the checkpoints carry the run's usage up to them.
    let run_end = resumed
        .iter()
        .find(|e| e["type"] == "run_end")
        .expect("run_end");
    let reference_end = reference
        .iter()
        .find(|e| e["type"] == "run_end")
        .expect("run_end");
    let (run_end, reference_end) = (&run_end["payload"], &reference_end["payload"]);
    assert_eq!(
        (&run_end["inputTokens"], &run_end["outputTokens"]),
        (&Value::from(72), &Value::from(15)),
        "{run_end}"
    );
    assert_eq!(
        (&run_end["inputTokens"], &run_end["outputTokens"]),
        (
            &reference_end["inputTokens"],
            &reference_end["outputTokens"]
        )
    );
}

#[test]
fn a_project_run_logs_the_runtime_events() {
    let dir = scaffold();
    let out = weft(
        dir.path(),
        &["run", "demo", "--json", "Add a greeting file"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run_id = json_lines(&text(&out.stdout))[0]["runId"]
        .as_str()
        .expect("runId")
        .to_owned();
    let out = weft(&dir.path().join("demo"), &["events", &run_id, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = json_lines(&text(&out.stdout));
    // The runtime spec's events, in order (the session's own — side turns, streamed text —
    // are between them).
    let runtime_types = [
        "run_start",
        "routing",
        "turn_start",
        "tool_call_start",
        "tool_call_end",
        "turn_end",
        "checkpoint",
        "completion",
    ];
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().expect("type"))
        .filter(|t| runtime_types.contains(t))
        .collect();
    let step = [
        "turn_start",
        "tool_call_start",
        "tool_call_end",
        "turn_end",
        "checkpoint",
    ];
    let mut expected = vec!["run_start", "routing"];
    for _ in 0..3 {
        expected.extend(step);
    }
    expected.extend(["turn_start", "turn_end", "checkpoint", "completion"]);
    assert_eq!(types, expected);
    let mut last_turn = 0;
    for e in &events {
        for key in ["runId", "agentId", "timestamp"] {
            assert!(
                e[key].as_str().is_some_and(|v| !v.is_empty()),
                "{key} in {e}"
            );
        }
        let turn = e["turn"].as_u64().expect("turn");
        assert!(turn >= last_turn, "turns go forward: {e}");
        last_turn = turn;
        if e["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("tool_call"))
        {
            assert!(e["toolCallId"].as_str().is_some(), "{e}");
        }
    }
    assert_eq!(last_turn, 4);
    // The text view clips payloads to one short line; --full prints them whole.
    let out = weft(&dir.path().join("demo"), &["events", &run_id]);
    let first = text(&out.stdout).lines().next().expect("a line").to_owned();
    assert!(
        first.contains("run_start") && first.ends_with('…'),
        "{first}"
    );
    assert!(first.chars().count() < 220, "{first}");
    let out = weft(&dir.path().join("demo"), &["events", &run_id, "--full"]);
    let first = text(&out.stdout).lines().next().expect("a line").to_owned();
    assert!(
        first.contains("Look before you change anything."),
        "{first}"
    );
    let routing = events
        .iter()
        .find(|e| e["type"] == "routing")
        .expect("a routing event");
    let agent = routing["agentId"].as_str();
    let routing = &routing["payload"];
    assert_eq!(
        (agent, routing["side"].as_str(), routing["reason"].as_str()),
        (Some("coder"), Some("sideA"), Some("project"))
    );
    assert!(
        routing["requested"]
            .as_str()
            .is_some_and(|m| m.starts_with("scripted-turns:"))
            && routing["resolved"]
                .as_str()
                .is_some_and(|m| m.starts_with("scripted-turns:"))
            && routing["policy"] == "quality",
        "{routing}"
    );
}

#[test]
fn an_unbounded_dual_ai_agent_runs_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("pair");
    write_pair(&project);
    std::fs::write(
        project.join("agents/pair.toml"),
        "name = \"pair\"\ntype = \"dual_ai\"\n[sideA]\nprompt = \"pa\"\n[sideB]\nprompt = \"pb\"\nsessionStop = \"done\"\n",
    )
    .expect("write");
    std::fs::write(
        project.join("b.json"),
        r#"{"responses":[{"toolCalls":[{"id":"d1","name":"done","arguments":{"summary":"ok"}}]}]}"#,
    )
    .expect("write");
    let out = weft(dir.path(), &["run", "pair", "task"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(
            "weft: warning: agents/pair.toml: maxSessionTurns: a dual_ai agent should set maxSessionTurns"
        ),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn weft_events_rebuilds_what_the_live_view_printed_and_rejoins_after_a_seq() {
    use std::io::BufRead as _;

    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("p");
    // Three slow steps, so a second process can join the run while it goes on.
    write_project(
        &project,
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
        r#"{"responses":[
            {"text":"Looking. ","toolCalls":[{"id":"c1","name":"run_command","arguments":{"command":"echo one"}}],"delayMs":300},
            {"text":"Again. ","toolCalls":[{"id":"c2","name":"run_command","arguments":{"command":"echo two"}}],"delayMs":300},
            {"text":"All done: one and two.","delayMs":300}]}"#,
    );
    let mut run = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["run", "p", "--json", "go"])
        .current_dir(dir.path())
        .env_remove("WEFT_DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut lines = std::io::BufReader::new(run.stdout.take().expect("stdout")).lines();
    let first = lines.next().expect("a first event").expect("line");
    let run_id = serde_json::from_str::<Value>(&first).expect("JSON")["runId"]
        .as_str()
        .expect("runId")
        .to_owned();
    // A viewer joins while the run goes on, from the start.
    let follower = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["events", &run_id, "--json", "--follow", "--after", "0"])
        .current_dir(&project)
        .env_remove("WEFT_DATABASE_URL")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the follower");
    let mut live = vec![first];
    live.extend(lines.map(|l| l.expect("line")));
    assert_eq!(run.wait().expect("wait").code(), Some(0), "{live:?}");
    let followed = follower.wait_with_output().expect("follower");
    assert_eq!(followed.status.code(), Some(0));
    // The follower saw exactly what the live view printed, line for line.
    let followed: Vec<String> = text(&followed.stdout).lines().map(str::to_owned).collect();
    assert_eq!(followed, live);
    let types: Vec<String> = json_lines(&live.join("\n"))
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(types.contains(&"text_delta".to_owned()), "{types:?}");
    assert_eq!(types.last().map(String::as_str), Some("run_end"));
    // A step's text comes before the calls it makes, within its own turn.
    let events = json_lines(&live.join("\n"));
    let first_text = types.iter().position(|t| t == "text_delta").expect("text");
    let first_call = types
        .iter()
        .position(|t| t == "tool_call_start")
        .expect("call");
    assert!(first_text < first_call, "{types:?}");
    assert_eq!(events[first_text]["turn"], events[first_call]["turn"]);
    assert_eq!(events[first_text]["payload"]["text"], "Looking. ");

    // Rejoining after the event with seq 5 gives the rest, from seq 6.
    let rest = weft(&project, &["events", &run_id, "--json", "--after", "5"]);
    let rest: Vec<String> = text(&rest.stdout).lines().map(str::to_owned).collect();
    assert_eq!(rest, live[5..]);
    // The streamed text can be rebuilt from the log.
    let answer: String = json_lines(&live.join("\n"))
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["payload"]["text"].as_str().map(str::to_owned))
        .collect();
    assert!(answer.ends_with("All done: one and two."), "{answer}");
}

#[test]
fn a_runs_events_map_to_the_ui_message_stream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("p");
    write_project(
        &project,
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
        r#"{"responses":[
            {"text":"Looking. ","toolCalls":[{"id":"c1","name":"run_command","arguments":{"command":"echo one"}}]},
            {"text":"It says one."}]}"#,
    );
    let out = weft(dir.path(), &["run", "p", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run_id = json_lines(&text(&out.stdout))[0]["runId"]
        .as_str()
        .expect("runId")
        .to_owned();
    let out = weft(&project, &["events", &run_id, "--ui-stream"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stream = text(&out.stdout);
    assert!(stream.ends_with("data: [DONE]\n\n"), "{stream}");
    // Every chunk is one the AI SDK's UI message stream defines (weft-thread's parser).
    let chunks = weft_thread::ui_stream::parse_stream(&stream).expect("a UI message stream");
    let chunks: Vec<Value> = chunks.iter().map(|c| c.to_value()).collect();
    // (A part's text may come in more than one delta.)
    let mut types: Vec<&str> = chunks
        .iter()
        .map(|c| c["type"].as_str().unwrap_or_default())
        .collect();
    types.dedup();
    let text_of = |part: &Value| -> String {
        chunks
            .iter()
            .filter(|c| c["type"] == "text-delta" && c["id"] == *part)
            .filter_map(|c| c["delta"].as_str())
            .collect()
    };
    let parts: Vec<&Value> = chunks
        .iter()
        .filter(|c| c["type"] == "text-start")
        .map(|c| &c["id"])
        .collect();
    assert_eq!(parts.len(), 2, "{stream}");
    assert_eq!(text_of(parts[0]), "Looking. ");
    assert_eq!(text_of(parts[1]), "It says one.");
    assert_eq!(
        types,
        [
            "start",
            "start-step",
            "text-start",
            "text-delta",
            "text-end",
            "tool-input-available",
            "tool-output-available",
            "finish-step",
            "start-step",
            "text-start",
            "text-delta",
            "text-end",
            "finish-step",
            "finish"
        ],
        "{stream}"
    );
    let find = |t: &str| chunks.iter().find(|c| c["type"] == t).expect("a chunk");
    assert_eq!(chunks[0]["messageId"], run_id.as_str());
    let input = find("tool-input-available");
    assert_eq!(
        (&input["toolCallId"], &input["input"]["command"]),
        (&Value::from("c1"), &Value::from("echo one"))
    );
    let output = find("tool-output-available");
    assert_eq!(output["toolCallId"], "c1");
    assert!(output["output"].to_string().contains("one"), "{output}");
    assert_eq!(find("finish")["finishReason"], "stop");
}
