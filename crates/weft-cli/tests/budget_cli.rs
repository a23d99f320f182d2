//! Budgets through `weft run`: `--max-steps`, `--max-total-tokens`, `--max-time`, the
//! project's `[budget]`, the default step limit of sessions, and `--max-cost` refused when no
//! price is known. A reached budget ends the run failed (exit 1), with the limit named and
//! what it spent reported.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::weft;

use std::path::Path;
use std::process::Output;

/// A project whose model asks for a command on every answer and never stops on its own;
/// each answer costs 10 + 1 tokens.
fn runaway(dir: &Path, budget: &str) {
    let responses: Vec<serde_json::Value> = (0..150)
        .map(|i| {
            serde_json::json!({"toolCalls": [{"id": format!("c{i}"), "name": "run_command",
            "arguments": {"command": "echo x >> calls.txt; sleep 0.01"}}],
            "usage": {"inputTokens": 10, "outputTokens": 1}})
        })
        .collect();
    let script = serde_json::json!({"responses": responses});
    common::scripted_project(dir, budget, &["run_command"], &script);
}

fn calls(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("p/calls.txt"))
        .unwrap_or_default()
        .lines()
        .count()
}

fn end_of(out: &Output) -> serde_json::Value {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(common::flat)
        .find(|e| e["type"] == "run_end")
        .unwrap_or_default()
}

#[test]
fn a_step_budget_stops_the_run_failed_with_what_it_spent() {
    let dir = tempfile::tempdir().unwrap();
    runaway(&dir.path().join("p"), "");
    let out = weft(
        dir.path(),
        &["run", "p", "--max-steps", "3", "--json", "go"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let end = end_of(&out);
    assert_eq!(end["status"], "failed");
    assert_eq!(end["inputTokens"], 30, "{end}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("maxSteps")
            || end.to_string().contains("maxSteps")
    );
    assert_eq!(calls(dir.path()), 3);
}

#[test]
fn the_projects_budget_and_the_default_step_limit_apply() {
    let dir = tempfile::tempdir().unwrap();
    runaway(&dir.path().join("p"), "[budget]\nmaxTotalTokens = 25\n");
    let out = weft(dir.path(), &["run", "p", "go"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("maxTotalTokens"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(calls(dir.path()), 3);

    // No budget anywhere: a runaway session stops at the default 100 steps.
    let dir = tempfile::tempdir().unwrap();
    runaway(&dir.path().join("p"), "");
    let out = weft(dir.path(), &["run", "p", "go"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("100 steps"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(calls(dir.path()), 100);
}

#[test]
fn a_time_budget_stops_a_long_command_and_a_cost_budget_needs_prices() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("p");
    runaway(&root, "");
    std::fs::write(
        root.join("script.json"),
        serde_json::json!({"responses": [{"toolCalls": [{"id": "c", "name": "run_command",
            "arguments": {"command": "sleep 30"}}]}]})
        .to_string(),
    )
    .unwrap();
    let out = weft(dir.path(), &["run", "p", "--max-time", "1s", "go"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("maxTime"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = weft(dir.path(), &["run", "p", "--max-cost", "0.5", "go"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("maxCost") && stderr.contains("price"),
        "{stderr}"
    );
    let bad = weft(dir.path(), &["run", "p", "--max-time", "soon", "go"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// A `dual_ai` pair whose two sides each spend 30 tokens a turn and never stop on their own.
fn chatty_pair(dir: &Path, budget: &str) {
    for sub in ["agents", "prompts"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let answer = |text: &str| serde_json::json!({"text": text, "usage": {"inputTokens": 25, "outputTokens": 5}});
    let script = |text: &str| {
        serde_json::json!({"responses": (0..10).map(|_| answer(text)).collect::<Vec<_>>()})
            .to_string()
    };
    let files = [
        (
            "weft.toml",
            format!("model = \"scripted-turns:a.json\"\n{budget}"),
        ),
        (
            "agents/pair.toml",
            "name = \"pair\"\ntype = \"dual_ai\"\nmaxSessionTurns = 10\n[sideA]\nprompt = \"pa\"\n[sideB]\nprompt = \"pb\"\n"
                .to_owned(),
        ),
        ("prompts/pa.toml", "name = \"pa\"\n".to_owned()),
        (
            "prompts/pb.toml",
            "name = \"pb\"\nmodel = \"scripted-turns:b.json\"\n".to_owned(),
        ),
        ("a.json", script("a says")),
        ("b.json", script("b says")),
    ];
    for (path, body) in files {
        std::fs::write(dir.join(path), body).unwrap();
    }
}

/// A run's budget covers every agent of the run: both sides of a `dual_ai` session count
/// against one limit.
#[test]
fn a_token_budget_counts_both_sides_of_a_session() {
    let dir = tempfile::tempdir().unwrap();
    chatty_pair(dir.path(), "[budget]\nmaxTotalTokens = 100\n");
    let out = weft(dir.path(), &["run", "--json", "go"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let end = end_of(&out);
    assert_eq!(end["status"], "failed");
    assert!(
        end["error"].as_str().unwrap().contains("maxTotalTokens"),
        "{end}"
    );
    // 30 tokens a turn, A and B alternating: the 4th turn reaches 120 ≥ 100, and the 5th
    // model call is never made.
    assert_eq!(
        end["inputTokens"].as_u64().unwrap() + end["outputTokens"].as_u64().unwrap(),
        120,
        "{end}"
    );
}
