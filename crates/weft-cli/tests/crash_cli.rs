//! Crash safety through the CLI: a project whose scripted model makes 20 `run_command`
//! calls (with fixed call ids, and with ids that change on every answer as real providers
//! give them) (each appends to an execution log and idempotently adds its own line to an output
//! file) is started with `weft run`, killed with SIGKILL at random moments, and resumed with
//! `weft resume --rerun-uncertain` until it completes. Every line must be in the output
//! exactly once, and no call whose result was recorded may appear twice in the log.
//! `run_command` runs one call at a time, so each SIGKILL can leave at most one call in
//! flight: the execution log may repeat calls at most as many times as the run was killed.
//!
//! The same holds when the calls are a subagent's: the parent's only call starts a `dual_ai`
//! child whose worker makes the calls, and the parent waits on it (blocking). A resume goes
//! on with the child from its thread's checkpoints, replaying its recorded responses and
//! calls. And when the parent does not wait (`blocking = false`): a resume starts the child
//! again where it stopped, and its result reaches the parent's conversation exactly once.
//! And when the calls are a prompt tool's nested invocation (the same child run).

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const CALLS: usize = 20;

/// Where the calls are made: by the run's agent, or by a subagent it waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    Agent,
    Subagent,
    /// A subagent it does not wait on (`blocking = false`): its result arrives queued.
    Background,
    /// A prompt tool (a prompt with `exposeAsTool`) it calls: the nested invocation makes the
    /// calls.
    Prompt,
}

fn project(dir: &Path, fresh_ids: bool, caller: Caller) {
    for sub in ["agents", "prompts", "tools"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
    }
    std::fs::write(
        dir.join("weft.toml"),
        "model = \"scripted-turns:script.json\"\ndefaultAgent = \"a\"\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
    )
    .expect("write");
    let end = match caller {
        Caller::Agent => serde_json::json!({"text": "all done"}),
        Caller::Prompt => {
            // `a` calls the prompt tool `worker` once; the nested invocation makes the calls.
            std::fs::write(
                dir.join("prompts/p.toml"),
                "name = \"p\"\nmodel = \"scripted-turns:lead.json\"\ntools = [\"worker\"]\n",
            )
            .expect("write");
            let lead = serde_json::json!([
                {"toolCalls": [{"id": "s1", "name": "worker", "arguments": {"message": "go"}}]},
                {"text": "all done"}]);
            std::fs::write(
                dir.join("lead.json"),
                serde_json::json!({"responses": lead}).to_string(),
            )
            .expect("write");
            std::fs::write(
                dir.join("prompts/worker.toml"),
                "name = \"worker\"\nexposeAsTool = true\ntoolDescription = \"Does the work.\"\ntools = [\"run_command\"]\n",
            )
            .expect("write");
            serde_json::json!({"text": "worked"})
        }
        Caller::Subagent | Caller::Background => {
            // `a` calls the subagent `pair` once; pair's worker makes the calls, then `done`.
            let (entry, lead) = match caller {
                Caller::Background => (
                    "{ name = \"pair\", blocking = false }",
                    serde_json::json!([
                        {"toolCalls": [{"id": "s1", "name": "pair", "arguments": {"message": "go"}}]},
                        {"text": "waiting"},
                        {"text": "all done"}]),
                ),
                _ => (
                    "\"pair\"",
                    serde_json::json!([
                        {"toolCalls": [{"id": "s1", "name": "pair", "arguments": {"message": "go"}}]},
                        {"text": "all done"}]),
                ),
            };
            std::fs::write(
                dir.join("prompts/p.toml"),
                format!("name = \"p\"\nmodel = \"scripted-turns:lead.json\"\ntools = [{entry}]\n"),
            )
            .expect("write");
            std::fs::write(
                dir.join("lead.json"),
                serde_json::json!({"responses": lead}).to_string(),
            )
            .expect("write");
            std::fs::write(
                dir.join("agents/pair.toml"),
                "name = \"pair\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"Does the work.\"\n\
                 maxSessionTurns = 2\n[sideA]\nprompt = \"w\"\nsessionStop = \"done\"\n[sideB]\nprompt = \"b\"\n",
            )
            .expect("write");
            std::fs::write(
                dir.join("prompts/w.toml"),
                "name = \"w\"\ntools = [\"run_command\", \"done\"]\n",
            )
            .expect("write");
            std::fs::write(dir.join("prompts/b.toml"), "name = \"b\"\n").expect("write");
            std::fs::write(dir.join("tools/done.toml"), "name = \"done\"\n").expect("write");
            serde_json::json!({"toolCalls": [{"id": "d1", "name": "done", "arguments": {}}]})
        }
    };
    if caller == Caller::Agent {
        std::fs::write(
            dir.join("prompts/p.toml"),
            "name = \"p\"\ntools = [\"run_command\"]\n",
        )
        .expect("write");
    }
    let command = "echo \"$WEFT_TOOL_CALL_ID\" >> exec.log; grep -q \"^$WEFT_TOOL_CALL_ID \" out.txt 2>/dev/null || echo \"$WEFT_TOOL_CALL_ID line\" >> out.txt; sleep 0.01";
    let mut responses: Vec<serde_json::Value> = (0..CALLS)
        .map(|i| serde_json::json!({"delayMs": 5, "toolCalls": [{"id": format!("c{i:02}"), "name": "run_command", "arguments": {"command": command}}]}))
        .collect();
    responses.push(end);
    std::fs::write(
        dir.join("script.json"),
        serde_json::json!({"responses": responses, "freshIds": fresh_ids}).to_string(),
    )
    .expect("write");
}

fn spawn(cwd: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(cwd)
        .env_remove("WEFT_DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

fn one_crash_cycle(seed: u64, caller: Caller) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("p");
    // Odd seeds: call ids change on every answer, as real providers give them.
    project(&root, seed % 2 == 1, caller);
    let mut rng = fastish(seed);
    let mut child = spawn(dir.path(), &["run", "p", "go"]);
    std::thread::sleep(Duration::from_millis(30 + rng() % 400));
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some(run_id) = stdout
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .map(str::to_owned)
    else {
        return; // killed before the run was recorded: nothing to check
    };
    let mut finished = out.status.success();
    let mut kills = usize::from(!finished);
    let mut attempts = 0;
    while !finished {
        attempts += 1;
        assert!(attempts < 50, "run {run_id} never finished");
        // The store is the project's (`p/.weft`): resume from inside the project.
        let mut child = spawn(&root, &["resume", &run_id, "--rerun-uncertain"]);
        if rng().is_multiple_of(3) {
            std::thread::sleep(Duration::from_millis(rng() % 200));
            let _ = child.kill();
            kills += 1;
        }
        let out = child.wait_with_output().expect("wait");
        finished = out.status.success();
        if !finished && out.status.code().is_some() {
            panic!("resume failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    // A subagent's commands run in its own folder (agents §7.1).
    let work = match caller {
        Caller::Agent => root.clone(),
        Caller::Subagent | Caller::Background | Caller::Prompt => {
            let threads: Vec<_> = std::fs::read_dir(root.join(".weft/threads"))
                .expect("the children's folders")
                .flatten()
                .map(|e| e.path())
                .collect();
            assert_eq!(threads.len(), 1, "one child folder: {threads:?}");
            threads[0].clone()
        }
    };
    assert!(caller == Caller::Agent || !root.join("out.txt").exists());
    let output = std::fs::read_to_string(work.join("out.txt")).expect("out.txt");
    let mut lines: HashMap<&str, usize> = HashMap::new();
    for line in output.lines() {
        *lines.entry(line).or_default() += 1;
    }
    if lines.len() != CALLS {
        // Say which calls went wrong and how (the run's ledger), to tell a crash-safety bug
        // from a command that failed.
        let show = spawn(&root, &["runs", "show", &run_id, "--json"])
            .wait_with_output()
            .expect("runs show");
        let ledger: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap_or_default();
        let odd: Vec<String> = ledger["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| {
                c["is_error"] == true || c["status"] != "completed" || c["result"]["exit_code"] != 0
            })
            .map(|c| format!("{} {} {}", c["position"], c["status"], c["result"]))
            .collect();
        let exec = std::fs::read_to_string(work.join("exec.log")).unwrap_or_default();
        panic!(
            "seed {seed}: {} of {CALLS} lines after {kills} kills\n{output}\nodd calls:\n{}\nexec.log:\n{exec}",
            lines.len(),
            odd.join("\n")
        );
    }
    assert!(lines.values().all(|&n| n == 1), "{output}");
    // A call whose result was recorded never runs again: repeats come only from kills.
    let log = std::fs::read_to_string(work.join("exec.log")).expect("exec.log");
    let executions = log.lines().count();
    assert!(
        executions >= CALLS && executions - CALLS <= kills,
        "seed {seed}: {executions} executions of {CALLS} calls after {kills} kills:\n{log}"
    );
    if caller == Caller::Background {
        // The child's result reached the parent's conversation exactly once.
        let export = spawn(&root, &["thread", "export", &run_id, "-o", "parent.json"])
            .wait_with_output()
            .expect("export");
        assert!(
            export.status.success(),
            "{}",
            String::from_utf8_lossy(&export.stderr)
        );
        let thread = std::fs::read_to_string(root.join("parent.json")).expect("parent.json");
        assert_eq!(
            thread.matches("has returned the following result:").count(),
            1,
            "seed {seed} after {kills} kills: {thread}"
        );
    }
}

/// A tiny deterministic generator (xorshift), so a failure can be replayed by its seed.
fn fastish(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

#[test]
fn sigkill_then_resume_never_repeats_a_recorded_call() {
    for seed in 1..=50 {
        one_crash_cycle(seed, Caller::Agent);
    }
}

#[test]
fn sigkill_then_resume_of_a_parent_waiting_on_a_subagent_never_repeats_a_recorded_call() {
    for seed in 1..=12 {
        one_crash_cycle(seed, Caller::Subagent);
    }
}

#[test]
fn sigkill_then_resume_of_a_parent_waiting_on_a_prompt_tool_never_repeats_a_recorded_call() {
    for seed in 1..=8 {
        one_crash_cycle(seed, Caller::Prompt);
    }
}

#[test]
fn sigkill_then_resume_of_a_parent_with_a_background_subagent_delivers_its_result_once() {
    for seed in 1..=8 {
        one_crash_cycle(seed, Caller::Background);
    }
}
