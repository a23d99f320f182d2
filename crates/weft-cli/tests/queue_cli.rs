//! `weft run PROJECT --continue THREAD --queue-tool NAME --tool-args JSON` (Standard Agents
//! `queueTool()`, SA-026/SA-081): a queued tool call on an idle thread starts a run whose
//! first step runs the call before the model is asked; a queued call of an `ai_human`
//! agent's tool hands the thread over; bad arguments are a usage error that records nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::weft;

use std::process::Output;

use serde_json::{Value, json};

fn events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(common::flat)
        .collect()
}

fn run_end(out: &Output) -> Value {
    events(out)
        .into_iter()
        .rfind(|e| e["type"] == "run_end")
        .unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn a_queued_tool_call_starts_a_run_on_the_idle_thread_and_runs_before_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [{"text": "Hi."}, {"text": "The note is written."}]});
    common::scripted_project(&p, "", &["write_file"], &script);
    let first = weft(&p, &["run", "--json", "hello"]);
    assert_eq!(first.status.code(), Some(0));
    let run = run_end(&first)["runId"].as_str().unwrap().to_owned();

    // Arguments that are not a JSON object: a usage error, nothing recorded or queued.
    let runs_before = weft(&p, &["runs", "list", "--json"]).stdout;
    let bad = weft(
        &p,
        &[
            "run",
            "--continue",
            &run,
            "--queue-tool",
            "write_file",
            "--tool-args",
            "[1]",
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("JSON object"));
    assert_eq!(weft(&p, &["runs", "list", "--json"]).stdout, runs_before);

    let queued = weft(
        &p,
        &[
            "run",
            "--json",
            "--continue",
            &run,
            "--queue-tool",
            "write_file",
            "--tool-args",
            r#"{"path": "note.txt", "content": "queued"}"#,
        ],
    );
    assert_eq!(
        queued.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&queued.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(p.join("note.txt")).unwrap(),
        "queued"
    );
    let seen = events(&queued);
    let order: Vec<&str> = seen
        .iter()
        .filter_map(|e| e["type"].as_str())
        .filter(|t| ["tool_call_start", "tool_call_end", "run_end"].contains(t))
        .collect();
    assert_eq!(order, ["tool_call_start", "tool_call_end", "run_end"]);
    // The model answered after the call (its second scripted answer: the call is not one).
    assert_eq!(run_end(&queued)["output"], "The note is written.");
}

#[test]
fn a_queued_call_of_an_ai_human_agent_hands_the_thread_over() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    let script = json!({"responses": [{"text": "Hi."}]});
    common::scripted_project(&p, "defaultAgent = \"a\"\n", &["billing"], &script);
    std::fs::write(
        p.join("agents/billing.toml"),
        "name = \"billing\"\nexposeAsTool = true\ntoolDescription = \"Billing.\"\n[sideA]\nprompt = \"pb\"\n",
    )
    .unwrap();
    std::fs::write(
        p.join("billing.json"),
        json!({"responses": [{"text": "Refund issued."}]}).to_string(),
    )
    .unwrap();
    std::fs::write(
        p.join("prompts/pb.toml"),
        "name = \"pb\"\nmodel = \"scripted-turns:billing.json\"\n",
    )
    .unwrap();
    let first = weft(&p, &["run", "--json", "hello"]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let run = run_end(&first)["runId"].as_str().unwrap().to_owned();
    let handed = weft(
        &p,
        &[
            "run",
            "--json",
            "--continue",
            &run,
            "--queue-tool",
            "billing",
            "--tool-args",
            r#"{"message": "wants a refund"}"#,
        ],
    );
    assert_eq!(
        handed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&handed.stderr)
    );
    let seen = events(&handed);
    let handoff = seen
        .iter()
        .find(|e| e["type"] == "handoff")
        .unwrap_or_else(|| panic!("no handoff: {seen:?}"));
    assert_eq!(handoff["from"], "a");
    assert_eq!(handoff["to"], "billing");
    assert_eq!(run_end(&handed)["output"], "Refund issued.");
}
