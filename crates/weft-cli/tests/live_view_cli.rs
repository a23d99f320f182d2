//! The live view while a run works (issue 17 item 10): on a terminal, a status line says
//! what the run waits for (the model, or a running tool by name), for how long, and the
//! run's tokens and cost so far; replies of consecutive steps start on their own lines.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::json;

/// Runs `weft ARGS` under a pseudo-terminal (util-linux `script`), so stdout and stderr are
/// terminals.
fn on_a_terminal(cwd: &Path, args: &str) -> Output {
    Command::new("script")
        .args([
            "-qec",
            &format!("{} {args}", env!("CARGO_BIN_EXE_weft")),
            "/dev/null",
        ])
        .current_dir(cwd)
        .env_remove("WEFT_DATABASE_URL")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("util-linux `script` runs commands under a pseudo-terminal")
}

#[test]
fn the_status_line_names_a_running_tool_and_the_tokens_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "run_command", "arguments": {"command": "sleep 1"}}],
         "usage": {"inputTokens": 40, "outputTokens": 2}},
        {"text": "slept", "delayMs": 500, "usage": {"inputTokens": 50, "outputTokens": 1}}
    ]});
    common::scripted_project(&p, "", &["run_command"], &script);
    // $1,000 / $10,000 per million tokens: 40 in and 2 out cost $0.06.
    std::fs::write(
        p.join("prices.toml"),
        "[scripted-turns]\n\"*\" = { input = 1000, output = 10000 }\n",
    )
    .unwrap();
    let out = on_a_terminal(&p, "run --pricing prices.toml go");
    let all = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("run_command running…"), "{all}");
    assert!(all.contains("waiting for the model…"), "{all}");
    assert!(all.contains("42 tokens so far · $0.0600"), "{all}");
}

#[test]
fn replies_of_consecutive_steps_are_on_separate_lines() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [{"text": "first reply"}, {"text": "second reply"}]});
    common::scripted_project(&p, "", &[], &script);
    // A side that goes on after a text reply, for two steps.
    std::fs::write(
        p.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\nstopOnResponse = false\nmaxSteps = 2\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["run", "go"])
        .current_dir(&p)
        .env_remove("WEFT_DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l == "first reply") && stdout.lines().any(|l| l == "second reply"),
        "{stdout}"
    );
}
