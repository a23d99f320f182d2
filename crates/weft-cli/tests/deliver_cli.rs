//! `weft deliver` (issue 23 item 5, UNI-045/UNI-046) through the built binary: a fixture
//! project whose "test" is a shell script that fails until `answer.txt` holds 42, and a
//! scripted agent that writes it with the built-in file tools. The ladder runs at the
//! baseline, after the agent's changes and after each fix, up to the iteration cap.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::weft;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

const LADDER: &str = "[project]\ntestCommand = \"sh check.sh\"\n\n[completion]\nbuild = \"true\"\nlint = \"false\"\noptional = [\"lint\"]\n";

/// A project whose agent makes `calls` in its first step, then says "done"; the test rung
/// passes when answer.txt holds 42.
fn project(dir: &Path, calls: &[(&str, Value)], extra: &str) {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("c{i}"), "name": name, "arguments": args}))
        .collect();
    let script = json!({"responses": [{"toolCalls": tool_calls}, {"text": "done"}]});
    common::scripted_project(
        dir,
        extra,
        &["write_file", "read_file", "run_command"],
        &script,
    );
    std::fs::write(
        dir.join("check.sh"),
        "answer=$(cat answer.txt 2>/dev/null)\n[ \"$answer\" = 42 ] || { echo \"answer.txt should hold 42, it holds '$answer'\"; exit 1; }\n",
    )
    .unwrap();
}

fn lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn stages(events: &[Value]) -> Vec<(String, bool)> {
    events
        .iter()
        .filter(|e| e["type"] == "verified")
        .map(|e| {
            let ladder = &e["verification"]["ladder"]["rungs"];
            let passed = ladder
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["status"] == "passed" || r["required"] == false);
            (
                e["verification"]["stage"].as_str().unwrap().to_owned(),
                passed,
            )
        })
        .collect()
}

#[test]
fn uni_045_deliver_runs_the_agent_until_the_failing_test_passes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    project(
        &root,
        &[("write_file", json!({"path": "answer.txt", "content": "42"}))],
        LADDER,
    );
    let o = weft(
        dir.path(),
        &["deliver", "proj", "Make check.sh pass", "--json"],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let events = lines(&o);
    assert_eq!(
        stages(&events),
        [("baseline".into(), false), ("afterChanges".into(), true)]
    );
    // The ladder ran as real commands: build passed, tests failed first, the optional lint
    // failed without blocking.
    let baseline = &events[0]["verification"]["ladder"]["rungs"];
    let rung = |i: usize| {
        (
            baseline[i]["name"].as_str().unwrap(),
            baseline[i]["status"].as_str().unwrap(),
        )
    };
    assert_eq!(
        [rung(0), rung(1), rung(2)],
        [
            ("build", "passed"),
            ("tests", "failed"),
            ("lint", "skipped")
        ]
    );
    assert!(
        baseline[1]["detail"]
            .as_str()
            .unwrap()
            .contains("answer.txt should hold 42, it holds ''")
    );
    let after = events
        .iter()
        .rev()
        .find(|e| e["type"] == "verified")
        .unwrap();
    assert_eq!(
        after["verification"]["ladder"]["rungs"][2]["status"],
        "failed"
    );
    let report = &events.last().unwrap()["report"];
    assert_eq!(report["outcome"], "delivered");
    assert_eq!(report["iterations"].as_array().unwrap().len(), 1);
    assert_eq!(report["iterations"][0]["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(root.join("answer.txt")).unwrap(),
        "42"
    );
    // The run is an ordinary Weft run, recorded in the project's store.
    let run = report["iterations"][0]["runId"].as_str().unwrap();
    let shown = weft(&root, &["runs", "show", run, "--json"]);
    assert_eq!(
        shown.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let input = shown["spec"]["input"].as_str().unwrap();
    assert!(input.starts_with("Make check.sh pass"), "{input}");
    assert!(input.contains("- tests: `sh check.sh` exited 1"), "{input}");
}

#[test]
fn uni_046_a_wrong_first_change_is_verified_and_fixed_in_the_next_iteration() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    // Wrong on the first try, right on the second (the state is a file the agent leaves).
    project(
        &root,
        &[(
            "run_command",
            json!({"command": "if [ -f tried ]; then printf 42 > answer.txt; else touch tried; printf 41 > answer.txt; fi"}),
        )],
        LADDER,
    );
    let o = weft(&root, &["deliver", ".", "Make check.sh pass", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let events = lines(&o);
    assert_eq!(
        stages(&events),
        [
            ("baseline".into(), false),
            ("afterChanges".into(), false),
            ("afterFix".into(), true)
        ]
    );
    let report = &events.last().unwrap()["report"];
    assert_eq!(report["iterations"].as_array().unwrap().len(), 2);
    // The second run was told what still failed after the first.
    let run = report["iterations"][1]["runId"].as_str().unwrap();
    let shown: Value =
        serde_json::from_slice(&weft(&root, &["runs", "show", run, "--json"]).stdout).unwrap();
    let input = shown["spec"]["input"].as_str().unwrap();
    assert!(
        input.contains("iteration 2 of 5") && input.contains("it holds '41'"),
        "{input}"
    );
}

#[test]
fn the_iteration_cap_ends_an_agent_that_never_fixes_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    project(
        &root,
        &[("write_file", json!({"path": "answer.txt", "content": "41"}))],
        LADDER,
    );
    let o = weft(
        &root,
        &[
            "deliver",
            ".",
            "Make check.sh pass",
            "--max-iterations",
            "2",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.matches("FAIL tests").count(), 3, "{text}");
    assert!(text.contains("iteration 2/2"), "{text}");
    assert!(
        text.trim_end()
            .ends_with("after 2 iterations (--max-iterations 2)"),
        "{text}"
    );
}

#[test]
fn a_green_baseline_needs_no_agent_and_no_ladder_is_a_definition_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    project(&root, &[], LADDER);
    std::fs::write(root.join("answer.txt"), "42").unwrap();
    let o = weft(&root, &["deliver", "."]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("baseline: pass build, pass tests, FAIL lint (optional)"),
        "{text}"
    );
    assert!(text.contains("no agent run"), "{text}");
    assert!(!root.join(".weft/weft.db").exists() || !text.contains("iteration"));

    let bare = dir.path().join("bare");
    project(&bare, &[], "");
    let o = weft(&bare, &["deliver", ".", "anything"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no verifier ladder"));
}
