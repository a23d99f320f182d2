//! Runs that survive crashes with real providers' habits, through the `weft` binary:
//! recorded model responses (call ids that change on every answer), ownership (a killed
//! owner is known dead at once; two resumes never both run; a stopped owner that wakes up
//! after another took over stops at its next write), SIGTERM, and a store written by the
//! previous release resuming after the upgrade.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn weft(cwd: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .args(args)
        .current_dir(cwd)
        .env_remove("WEFT_DATABASE_URL")
        .env_remove("WEFT_HOST_ID")
        .env_remove("WEFT_LEASE_TTL_MS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn spawn(cwd: &Path, args: &[&str]) -> Child {
    weft(cwd, args).spawn().expect("spawn weft")
}

fn output(child: Child) -> (Option<i32>, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("wait");
    (
        status.code(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// A project whose scripted model answers with `responses` (by conversation position) and
/// whose only tool is `run_command`.
fn project(dir: &Path, responses: serde_json::Value, fresh_ids: bool) {
    let script = serde_json::json!({"responses": responses, "freshIds": fresh_ids});
    common::scripted_project(dir, "", &["run_command"], &script);
}

fn command_call(id: &str, command: &str) -> serde_json::Value {
    serde_json::json!({"id": id, "name": "run_command", "arguments": {"command": command}})
}

/// Waits until `path` holds `text` (a tool's side effect happened).
fn wait_for(path: &Path, text: &str) {
    let start = Instant::now();
    while !std::fs::read_to_string(path).is_ok_and(|t| t.contains(text)) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} never held {text:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn run_id_of(child: &mut Child) -> String {
    use std::io::BufRead as _;
    let stdout = child.stdout.take().expect("stdout");
    let mut reader = std::io::BufReader::new(stdout);
    let mut line = String::new();
    reader.read_line(&mut line).expect("first line");
    // Keep reading, so the process never writes into a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    line.split_whitespace()
        .nth(1)
        .expect("`run RUN · agent …`")
        .to_owned()
}

fn kill9(child: &mut Child) {
    child.kill().expect("kill");
    let _ = child.wait();
}

fn status_of(cwd: &Path, run: &str) -> String {
    let out = weft(cwd, &["runs", "show", run, "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["status"].as_str().unwrap_or_default().to_owned()
}

/// The reproduction: one answer with two `run_command` calls, the process killed
/// during the second; the resume must not run the first again although the model (asked
/// again) would give new call ids — it is not asked again: the recorded response is used.
#[test]
fn a_recorded_call_never_runs_twice_when_call_ids_change_on_every_answer() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("p");
    project(
        &root,
        serde_json::json!([
            {"toolCalls": [command_call("a", "echo A >> effects.log"),
                           command_call("b", "sleep 1; echo B >> effects.log")]},
            {"text": "done"}
        ]),
        true,
    );
    let mut child = spawn(dir.path(), &["run", "p", "go"]);
    let run = run_id_of(&mut child);
    wait_for(&root.join("effects.log"), "A");
    std::thread::sleep(Duration::from_millis(200));
    kill9(&mut child);
    // The killed owner is known dead at once: no --force, no waiting for a lease.
    assert_eq!(status_of(&root, &run), "interrupted");
    let (code, stdout, stderr) = output(spawn(&root, &["resume", &run]));
    assert_eq!(
        code,
        Some(3),
        "the in-flight call is uncertain: {stdout}{stderr}"
    );
    assert!(stderr.contains("--rerun-uncertain"), "{stderr}");
    let (code, stdout, stderr) = output(spawn(&root, &["resume", &run, "--rerun-uncertain"]));
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let log = std::fs::read_to_string(root.join("effects.log")).unwrap();
    assert_eq!(log.matches('A').count(), 1, "A ran again:\n{log}");
    assert!(log.contains('B'), "{log}");
}

/// A kill right after the last tool result but before the step's checkpoint: the resume
/// answers from the record and the ledger, and prints the answer it ends with.
#[test]
fn a_resume_after_the_last_step_prints_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("p");
    project(
        &root,
        serde_json::json!([
            {"toolCalls": [command_call("a", "echo A >> effects.log; sleep 0.3")]},
            {"text": "the final answer", "delayMs": 2000}
        ]),
        true,
    );
    let mut child = spawn(dir.path(), &["run", "p", "go"]);
    let run = run_id_of(&mut child);
    wait_for(&root.join("effects.log"), "A");
    std::thread::sleep(Duration::from_millis(700));
    kill9(&mut child);
    let (code, stdout, stderr) = output(spawn(&root, &["resume", &run]));
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("the final answer"), "{stdout}");
    let log = std::fs::read_to_string(root.join("effects.log")).unwrap();
    assert_eq!(log.matches('A').count(), 1, "{log}");
}

fn slow_project(root: &Path, steps: usize) {
    let mut responses: Vec<serde_json::Value> = (0..steps)
        .map(|i| serde_json::json!({"toolCalls": [command_call(&format!("c{i}"), &format!("echo {i} >> out.txt; sleep 0.1"))]}))
        .collect();
    responses.push(serde_json::json!({"text": "finished"}));
    project(root, serde_json::Value::Array(responses), true);
}

/// Two resumes of one run started at the same moment: exactly one drives it, the other
/// exits 5 naming the owner.
#[test]
fn two_resumes_at_once_exactly_one_runs() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("p");
    slow_project(&root, 8);
    let mut child = spawn(dir.path(), &["run", "p", "go"]);
    let run = run_id_of(&mut child);
    wait_for(&root.join("out.txt"), "1");
    kill9(&mut child);
    let first = spawn(&root, &["resume", &run, "--rerun-uncertain"]);
    let second = spawn(&root, &["resume", &run, "--rerun-uncertain"]);
    let (a, b) = (output(first), output(second));
    let mut codes = [a.0, b.0];
    codes.sort();
    assert_eq!(codes, [Some(0), Some(5)], "{a:?}\n{b:?}");
    let refused = if a.0 == Some(5) { &a } else { &b };
    assert!(refused.2.contains("another live process"), "{}", refused.2);
}

/// A stopped owner (SIGSTOP past its lease; another machine takes over; SIGCONT) has its
/// next write rejected and stops with exit 5; the run ends as the new owner drove it.
#[cfg(unix)]
#[test]
fn a_stopped_owner_that_wakes_up_after_a_takeover_stops() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("p");
    slow_project(&root, 12);
    let mut owner = weft(dir.path(), &["run", "p", "go"])
        .env("WEFT_LEASE_TTL_MS", "600")
        .spawn()
        .unwrap();
    let run = run_id_of(&mut owner);
    wait_for(&root.join("out.txt"), "2");
    let pid = owner.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    std::thread::sleep(Duration::from_millis(1_000));
    // Another machine (its own host id) may take over only once the lease lapsed.
    let other = weft(&root, &["resume", &run, "--rerun-uncertain"])
        .env("WEFT_HOST_ID", "another-machine")
        .env("WEFT_LEASE_TTL_MS", "600")
        .output()
        .unwrap();
    let taken = String::from_utf8_lossy(&other.stdout).into_owned()
        + &String::from_utf8_lossy(&other.stderr);
    assert!(
        Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let (code, stdout, stderr) = output(owner);
    assert_eq!(other.status.code(), Some(0), "{taken}");
    assert_eq!(code, Some(5), "the stale owner must stop: {stdout}{stderr}");
    assert!(stderr.contains("owned by another process"), "{stderr}");
    assert_eq!(status_of(&root, &run), "completed");
}

/// SIGTERM stops a run like Ctrl-C: exit 130, `interrupted`, resumable.
#[cfg(unix)]
#[test]
fn sigterm_interrupts_cleanly_and_the_run_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("p");
    slow_project(&root, 6);
    let mut child = spawn(dir.path(), &["run", "p", "go"]);
    let run = run_id_of(&mut child);
    wait_for(&root.join("out.txt"), "1");
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let (code, _, stderr) = output(child);
    assert_eq!(code, Some(130), "{stderr}");
    assert_eq!(status_of(&root, &run), "interrupted");
    let (code, stdout, stderr) = output(spawn(&root, &["resume", &run, "--rerun-uncertain"]));
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let out = std::fs::read_to_string(root.join("out.txt")).unwrap();
    for i in 0..6 {
        assert!(out.lines().any(|l| l == i.to_string()), "{out}");
    }
}

/// A store written by the previous release (schema 2, a run killed during its second
/// command) opens, migrates and resumes to the end.
#[test]
fn a_run_recorded_by_the_previous_release_resumes_after_the_upgrade() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2-interrupted");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::create_dir_all(root.join("prompts")).unwrap();
    for file in [
        "weft.toml",
        "script.json",
        "agents/a.toml",
        "prompts/p.toml",
    ] {
        std::fs::copy(fixture.join("proj").join(file), root.join(file)).unwrap();
    }
    std::fs::write(root.join("out.txt"), "one\n").unwrap();
    std::fs::create_dir_all(dir.path().join(".weft")).unwrap();
    let db = dir.path().join(".weft/weft.db");
    std::fs::copy(fixture.join("weft.db"), &db).unwrap();
    // The old release recorded the project's absolute path: point it at this copy.
    let patch = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import sqlite3; c = sqlite3.connect({db:?}); c.execute(\"UPDATE runs SET spec = replace(spec, '/tmp/fx/proj', ?)\", ({root:?},)); c.commit()",
            db = db.display().to_string(),
            root = root.display().to_string()
        ))
        .status()
        .unwrap();
    assert!(patch.success());
    let run = "ce3f94bf-f4a6-4c62-87ca-c5fac4bb0017";
    let (code, stdout, stderr) = output(spawn(dir.path(), &["resume", run, "--rerun-uncertain"]));
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("all done"), "{stdout}");
    let out = std::fs::read_to_string(root.join("out.txt")).unwrap();
    assert_eq!(
        out, "one\ntwo\n",
        "the recorded first call must not run again"
    );
}

/// The project's tools changed between an interrupt and the resume: the resume says so,
/// naming the file, and goes on with the definitions the run recorded (no call answered
/// "unknown tool", none skipped).
#[test]
fn a_resume_uses_the_recorded_project_and_reports_changes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("p");
    slow_project(&root, 5);
    let mut child = spawn(dir.path(), &["run", "p", "go"]);
    let run = run_id_of(&mut child);
    wait_for(&root.join("out.txt"), "1");
    kill9(&mut child);
    std::fs::write(root.join("prompts/p.toml"), "name = \"p\"\ntools = []\n").unwrap();
    let (code, stdout, stderr) = output(spawn(&root, &["resume", &run, "--rerun-uncertain"]));
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("the project changed") && stderr.contains("prompts/p.toml"),
        "{stderr}"
    );
    assert!(!stdout.contains("unknown tool"), "{stdout}");
    let out = std::fs::read_to_string(root.join("out.txt")).unwrap();
    for i in 0..5 {
        assert!(out.lines().any(|l| l == i.to_string()), "{out}");
    }
}
