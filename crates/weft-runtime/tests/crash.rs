//! Crash tests with real processes: a durable run (sync mode, one side-effecting tool per
//! step) is killed with SIGKILL at random points and resumed until done.
//!
//! Checks: the output holds every line exactly once; the execution log repeats a call only
//! when it was in flight at a kill (it is the killed process's last execution), never a call
//! whose result was recorded; the final state equals the uninterrupted run's.
//!
//! The same with the calls made by a UAP-1.0 sub-agent (a child run of the run): the child's
//! side effects are recorded and replayed like the run's own, so a kill mid-child repeats
//! nothing, and the child's conversation ends the same.
//!
//! Seed: `WEFT_CRASH_SEED` (printed); kills: `WEFT_CRASH_KILLS` (default 50; 15 with a
//! sub-agent).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use weft_store::{AgentStatus, Lineage as _, RunStatus, Runs, Store, ToolLedger};

const BIN: &str = env!("CARGO_BIN_EXE_weft-runtime-durable-run");
const CALLS: usize = 20;

fn write_script(dir: &Path) -> PathBuf {
    let mut responses: Vec<Value> = (0..CALLS)
        .map(|i| {
            json!({"toolCalls": [{"id": format!("call-{i:02}"), "name": "append_line",
                   "arguments": {"line": format!("line {i}")}}],
                   "usage": {"inputTokens": 10, "outputTokens": 2}})
        })
        .collect();
    responses.push(
        json!({"text": "all lines written", "usage": {"inputTokens": 10, "outputTokens": 3}}),
    );
    let path = dir.join("script.json");
    std::fs::write(&path, json!({"responses": responses}).to_string()).unwrap();
    path
}

/// The parent's script when a sub-agent makes the calls: one `delegate` call, then the end.
fn write_parent_script(dir: &Path) -> PathBuf {
    let path = dir.join("parent.json");
    std::fs::write(
        &path,
        json!({"responses": [
            {"toolCalls": [{"id": "delegate-1", "name": "delegate", "arguments": {"prompt": "Write the lines."}}]},
            {"text": "delegated"}
        ]})
        .to_string(),
    )
    .unwrap();
    path
}

struct Case {
    store_url: String,
    script: PathBuf,
    /// The sub-agent's script, when a sub-agent makes the calls.
    child_script: Option<PathBuf>,
    out: PathBuf,
    log: PathBuf,
}

impl Case {
    fn new(dir: &Path, db: &Path, name: &str, subagent: bool) -> Case {
        let script = write_script(dir);
        let (script, child_script) = if subagent {
            (write_parent_script(dir), Some(script))
        } else {
            (script, None)
        };
        Case {
            store_url: format!("sqlite:{}", db.display()),
            script,
            child_script,
            out: dir.join(format!("{name}.out")),
            log: dir.join(format!("{name}.log")),
        }
    }

    async fn create(&self) -> String {
        let mut command = tokio::process::Command::new(BIN);
        command
            .args(["start", "--store", &self.store_url, "--script"])
            .arg(&self.script);
        if let Some(child) = &self.child_script {
            command.arg("--child-script").arg(child);
        }
        let out = command
            .arg("--out")
            .arg(&self.out)
            .arg("--log")
            .arg(&self.log)
            .args(["--delay-ms", "3", "--durability", "sync", "--create-only"])
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    fn resume(&self, run: &str, rerun: bool) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(BIN);
        cmd.args(["resume", "--store", &self.store_url, run])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if rerun {
            cmd.arg("--rerun-uncertain");
        }
        cmd
    }
}

/// Messages without ids and times: what must be equal between two runs of one script.
fn normalize(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|k, _| !matches!(k.as_str(), "id" | "timestamp" | "createdAt" | "duration"));
            map.values_mut().for_each(normalize);
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

async fn final_state(store: &Store, run: &str) -> (Value, u64) {
    let record = store.run(run).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Completed, "{record:?}");
    let cp = store
        .latest_checkpoint(&record.thread_id)
        .await
        .unwrap()
        .unwrap();
    let mut messages = serde_json::to_value(&cp.checkpoint.state).unwrap()["messages"].take();
    normalize(&mut messages);
    (messages, cp.checkpoint.state.step())
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_points_then_resume() {
    crash_and_resume(false, 50).await;
}

/// The calls are a sub-agent's (a child run): killed anywhere — mid-child included — and
/// resumed, every line is written once, only a call in flight at a kill runs again, and
/// the run's and the child's final conversations equal the uninterrupted run's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_sub_agent_then_resume() {
    crash_and_resume(true, 15).await;
}

/// The child thread's final conversation (normalized) and its lineage node's status, when
/// the run has a sub-agent.
async fn child_state(store: &Store, run: &str) -> Option<(Value, AgentStatus)> {
    let node = store
        .lineage(run)
        .await
        .unwrap()
        .into_iter()
        .find(|n| n.depth == 1)?;
    let cp = store.latest_checkpoint(&node.id).await.unwrap().unwrap();
    let mut messages = serde_json::to_value(&cp.checkpoint.state).unwrap()["messages"].take();
    normalize(&mut messages);
    Some((messages, node.status))
}

async fn crash_and_resume(subagent: bool, kills_default: usize) {
    let seed: u64 = std::env::var("WEFT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let kills_wanted: usize = std::env::var("WEFT_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(kills_default);
    eprintln!("crash test seed: {seed} (WEFT_CRASH_SEED={seed} reproduces the kill schedule)");
    let mut rng = fastrand::Rng::with_seed(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("weft.db");

    // The uninterrupted reference run.
    let reference = Case::new(dir.path(), &db, "reference", subagent);
    let run = reference.create().await;
    let output = reference.resume(&run, false).output().await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let store = Store::open(&reference.store_url).await.unwrap();
    let (expected_state, expected_steps) = final_state(&store, &run).await;
    let expected_child = child_state(&store, &run).await;
    assert_eq!(expected_child.is_some(), subagent);
    let expected_lines: Vec<String> = (0..CALLS)
        .map(|i| format!("call-{i:02} line {i}"))
        .collect();
    assert_eq!(lines(&reference.out), expected_lines);
    assert_eq!(lines(&reference.log).len(), CALLS);

    let mut kills = 0usize;
    let mut runs_done = 0usize;
    let mut approvals = 0usize;
    while kills < kills_wanted && runs_done < 40 {
        let case = Case::new(dir.path(), &db, &format!("crash{runs_done}"), subagent);
        let run = case.create().await;
        let mut killed_pids: HashSet<u32> = HashSet::new();
        let mut rerun = false;
        let mut attempts = 0;
        loop {
            attempts += 1;
            assert!(attempts < 200, "run {run} does not finish");
            let mut child = case.resume(&run, rerun).spawn().unwrap();
            let pid = child.id().unwrap();
            let kill = kills < kills_wanted;
            let delay = Duration::from_millis(rng.u64(5..80));
            let exited = if kill {
                tokio::select! {
                    status = child.wait() => Some(status.unwrap()),
                    () = tokio::time::sleep(delay) => None,
                }
            } else {
                Some(child.wait().await.unwrap())
            };
            match exited {
                None => {
                    child.start_kill().unwrap();
                    let _ = child.wait().await;
                    killed_pids.insert(pid);
                    kills += 1;
                    rerun = false;
                }
                Some(status) => {
                    let mut stderr = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        use tokio::io::AsyncReadExt as _;
                        let _ = e.read_to_string(&mut stderr).await;
                    }
                    match status.code() {
                        Some(0) => break,
                        Some(3) => {
                            // An uncertain call: the resume stopped and named it; approve.
                            assert!(
                                stderr.contains("call-"),
                                "the uncertain call is not named: {stderr}"
                            );
                            assert!(stderr.contains("--rerun-uncertain"), "{stderr}");
                            approvals += 1;
                            rerun = true;
                        }
                        other => panic!("resume failed ({other:?}): {stderr}"),
                    }
                }
            }
        }
        runs_done += 1;

        // 1. Every line exactly once.
        let mut out = lines(&case.out);
        out.sort();
        assert_eq!(out, expected_lines, "output of run {run} (seed {seed})");
        // 2. Repeats only for calls in flight at a kill.
        let log = lines(&case.log);
        let mut by_pid: HashMap<u32, Vec<String>> = HashMap::new();
        let mut count: HashMap<String, usize> = HashMap::new();
        for entry in &log {
            let (call, pid) = entry.split_once(' ').unwrap();
            by_pid
                .entry(pid.parse().unwrap())
                .or_default()
                .push(call.to_owned());
            *count.entry(call.to_owned()).or_default() += 1;
        }
        let ledger: HashMap<String, u32> = store
            .tool_calls(&run)
            .await
            .unwrap()
            .into_iter()
            .map(|c| (c.tool_call_id, c.attempts))
            .collect();
        for (call, n) in &count {
            // A start is recorded before every execution (a kill may fall in between).
            let attempts = ledger.get(call).copied().unwrap_or(0);
            assert!(
                u32::try_from(*n).unwrap() <= attempts,
                "{call}: {n} executions, {attempts} recorded starts (seed {seed})"
            );
            if *n > 1 {
                // Every execution but the last was the final act of a killed process.
                let mut executions: Vec<u32> = log
                    .iter()
                    .filter(|e| e.starts_with(&format!("{call} ")))
                    .map(|e| e.split_once(' ').unwrap().1.parse().unwrap())
                    .collect();
                executions.pop();
                for pid in executions {
                    assert!(
                        killed_pids.contains(&pid),
                        "{call} re-ran after process {pid} finished it (seed {seed})"
                    );
                    assert_eq!(
                        by_pid[&pid].last(),
                        Some(call),
                        "{call} re-ran although its result was recorded (seed {seed})"
                    );
                }
            }
        }
        assert_eq!(count.len(), CALLS);
        // 3. Same final state as the uninterrupted run.
        let (state, steps) = final_state(&store, &run).await;
        assert_eq!(steps, expected_steps);
        assert_eq!(
            state, expected_state,
            "final state of run {run} (seed {seed})"
        );
        if let Some((expected, _)) = &expected_child {
            let (state, status) = child_state(&store, &run).await.unwrap();
            assert_eq!(status, AgentStatus::Completed, "run {run} (seed {seed})");
            assert_eq!(
                &state, expected,
                "the sub-agent's final state of run {run} (seed {seed})"
            );
        }
    }
    eprintln!(
        "crash test: {kills} kills over {runs_done} runs, {approvals} uncertain-call approvals (seed {seed})"
    );
    assert!(
        kills >= kills_wanted,
        "only {kills} kills happened (seed {seed})"
    );
}
