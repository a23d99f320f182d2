//! Every outcome of a tool call is visible and none is fatal, through `weft run`: a call to a
//! tool that does not exist, argument text that is not JSON and arguments that break the
//! tool's schema each reach the model as an error it can correct, show in the live view and
//! the `--json` events, and are logged (`tool_call_refused`) in the run's event log.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::weft;

use std::path::Path;

fn project(dir: &Path) {
    let script = serde_json::json!({"responses": [
        {"toolCalls": [{"id": "c1", "name": "nope", "arguments": {}}]},
        {"toolCalls": [{"id": "c2", "name": "run_command", "arguments": "{\"command\": "}]},
        {"toolCalls": [{"id": "c3", "name": "run_command", "arguments": {"cmd": "ls"}}]},
        {"toolCalls": [{"id": "c4", "name": "run_command", "arguments": {"command": "echo ran >> ran.txt"}}]},
        {"text": "recovered"}
    ]});
    common::scripted_project(dir, "", &["run_command"], &script);
}

#[test]
fn refused_calls_are_errors_the_model_sees_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    project(&dir.path().join("p"));
    let out = weft(dir.path(), &["run", "p", "--json", "go"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| common::flat(serde_json::from_str(l).unwrap()))
        .collect();
    let results: Vec<(&str, bool, &str)> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_end")
        .map(|e| {
            (
                e["toolCallId"].as_str().unwrap(),
                e["isError"].as_bool().unwrap(),
                e["result"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    // Every call, refused or run, starts before it ends (RT-033).
    let starts: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_start")
        .filter_map(|e| e["toolCallId"].as_str())
        .collect();
    let ends: Vec<&str> = results.iter().map(|r| r.0).collect();
    assert_eq!(starts, ends);
    assert!(
        results[0].1 && results[0].2.contains("unknown tool \"nope\""),
        "{results:?}"
    );
    assert!(
        results[1].1 && results[1].2.contains("not valid JSON"),
        "{results:?}"
    );
    assert!(
        results[2].1 && results[2].2.contains("\"command\" is a required property"),
        "{results:?}"
    );
    assert!(!results[3].1, "the corrected call runs: {results:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("p/ran.txt")).unwrap(),
        "ran\n",
        "only the valid call ran"
    );
    let end = events.last().unwrap();
    assert_eq!(end["output"], "recovered");

    let run = events[0]["runId"].as_str().unwrap();
    // The run's store is the project's (`p/.weft/`): ask from the project folder.
    let log = weft(&dir.path().join("p"), &["events", run, "--json"]);
    let refused: Vec<String> = String::from_utf8_lossy(&log.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(common::flat)
        .flat_map(|v| match v {
            serde_json::Value::Array(items) => items,
            other => vec![other],
        })
        .filter(|e| e["event_type"] == "tool_call_refused" || e["type"] == "tool_call_refused")
        .map(|e| {
            e["tool_call_id"]
                .as_str()
                .or(e["toolCallId"].as_str())
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    let mut refused = refused;
    refused.sort();
    assert_eq!(
        refused,
        ["c1", "c2", "c3"],
        "{}",
        String::from_utf8_lossy(&log.stdout)
    );
}
