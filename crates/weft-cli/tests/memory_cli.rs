//! `weft memory …` and the memory injected by `weft hook session-start`, end to end through
//! the built binary (issue 23 item 3): the write gate, secret refusal, promotion, lexical
//! recall (this build has no `minilm` feature, and says so), corrections with their audit
//! trail, maintenance, and what the session-start hook injects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn weft(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(dir)
        .env_remove("WEFT_DATABASE_URL")
        .env_remove("WEFT_MEMORY_EMBEDDER")
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("CURSOR_PROJECT_DIR")
        .env("WEFT_MINILM_PATH", dir.join("no-model-here"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("weft.toml"), "name = \"p\"\n").unwrap();
    (dir, root)
}

fn store(root: &Path, args: &[&str]) -> Value {
    let mut all = vec!["memory", "store", "--json"];
    all.extend_from_slice(args);
    let o = weft(root, &all, "");
    let v = json(&o);
    assert_eq!(
        o.status.code(),
        Some(if v["stored"] == true { 0 } else { 1 }),
        "{}",
        err(&o)
    );
    v
}

#[test]
fn uni_027_the_write_gate_rejects_noise_with_a_reason_and_force_bypasses_it() {
    let (_d, root) = project();
    for (text, reason) in [
        ("", "empty content"),
        ("done", "too short"),
        ("ok thanks, that looks good to me", "noise"),
    ] {
        let v = store(&root, &[text]);
        assert_eq!(v["stored"], false, "{text:?}");
        assert!(
            v["rejectionReason"].as_str().unwrap().starts_with(reason),
            "{v}"
        );
        let plain = weft(&root, &["memory", "store", text], "");
        assert_eq!(plain.status.code(), Some(1));
        assert!(err(&plain).contains(reason), "{}", err(&plain));
    }
    let forced = store(&root, &["done", "--force"]);
    assert_eq!(forced["stored"], true);
    assert_eq!(forced["forced"], true);
}

#[test]
fn uni_029_secrets_are_refused_even_with_force() {
    let (_d, root) = project();
    for text in [
        "Use the key sk-proj-abcdefghijklmnopqrstuvwxyz123 for the staging runs because it has quota",
        "the deploy key: -----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAA",
        "prod db password: Tr0ub4dor&3 for emergencies",
    ] {
        for force in [false, true] {
            let mut args = vec![text, "--type", "decision", "--importance", "9"];
            if force {
                args.push("--force");
            }
            let v = store(&root, &args);
            assert_eq!(v["stored"], false);
            assert!(
                v["rejectionReason"].as_str().unwrap().contains("secret"),
                "{v}"
            );
            assert!(
                !v["rejectionReason"].as_str().unwrap().contains("Tr0ub4dor"),
                "the secret is never echoed"
            );
        }
    }
    let status = weft(&root, &["memory", "status", "--json"], "");
    assert_eq!(json(&status)["counts"], Value::Array(vec![]));
}

#[test]
fn uni_028_promote_query_correct_and_maintain_end_to_end() {
    let (_d, root) = project();
    let decision = store(
        &root,
        &[
            "Chose SQLite for memory because the session-start hook must answer in milliseconds",
            "--type",
            "decision",
            "--importance",
            "8",
            "--tags",
            "architecture,memory",
        ],
    );
    store(
        &root,
        &[
            "Never run the sandbox tests in parallel, they fail on shared cgroups",
            "--type",
            "pattern",
            "--importance",
            "7",
        ],
    );
    store(
        &root,
        &[
            "Currently trying to find why the parser stops at the second line",
            "--importance",
            "8",
        ],
    );
    store(
        &root,
        &[
            "Chose tabs over spaces in the fixtures because nobody minds",
            "--type",
            "decision",
            "--importance",
            "3",
        ],
    );
    let dry = json(&weft(
        &root,
        &["memory", "promote", "--dry-run", "--json"],
        "",
    ));
    assert_eq!(dry["dryRun"], true);
    let promoted = weft(&root, &["memory", "promote", "--json"], "");
    assert_eq!(promoted.status.code(), Some(0), "{}", err(&promoted));
    let reviewed = json(&promoted)["reviewed"].as_array().unwrap().clone();
    let actions: Vec<(String, String)> = reviewed
        .iter()
        .map(|r| {
            (
                r["action"].as_str().unwrap().to_owned(),
                r["tier"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("promote".into(), "semantic".into()),
            ("promote".into(), "semantic".into()),
            ("reject".into(), String::new()),
            ("reject".into(), String::new()),
        ],
        "{reviewed:?}"
    );
    assert!(
        reviewed[2]["reason"]
            .as_str()
            .unwrap()
            .contains("transient debugging state")
    );
    assert!(reviewed[3]["reason"].as_str().unwrap().contains("trivia"));

    // This build has no local model: recall is lexical, and says so and how to get more.
    let q = weft(
        &root,
        &[
            "memory",
            "query",
            "why SQLite for memory?",
            "--tier",
            "semantic",
        ],
        "",
    );
    assert_eq!(q.status.code(), Some(0), "{}", err(&q));
    assert!(out(&q).starts_with("ranking: lexical"), "{}", out(&q));
    assert!(out(&q).contains("Chose SQLite for memory"), "{}", out(&q));
    assert!(
        err(&q).contains("minilm") && err(&q).contains("ranked lexically"),
        "{}",
        err(&q)
    );
    let q = json(&weft(
        &root,
        &["memory", "query", "sandbox tests parallel", "--json"],
        "",
    ));
    assert_eq!(q["ranking"], "lexical");
    assert!(
        q["note"].as_str().unwrap().contains("--features minilm"),
        "{q}"
    );
    assert!(
        q["results"][0]["entry"]["content"]
            .as_str()
            .unwrap()
            .starts_with("Never run the sandbox")
    );
    let q = json(&weft(
        &root,
        &[
            "memory",
            "query",
            "sandbox",
            "--embedder",
            "lexical",
            "--json",
        ],
        "",
    ));
    assert_eq!(q["ranking"], "lexical");

    // Corrections reach every tier that held the stale memory, with an audit trail.
    let c = weft(
        &root,
        &[
            "memory",
            "correct",
            "Chose SQLite for memory",
            "--correction",
            "Chose SQLite for memory because hooks read it without a server",
            "--reason",
            "the latency claim was unmeasured",
            "--json",
        ],
        "",
    );
    assert_eq!(c.status.code(), Some(0), "{}", err(&c));
    let c = json(&c);
    assert_eq!(c["tiersUpdated"], serde_json::json!(["daily", "semantic"]));
    assert_eq!(c["supersededCount"], 2);
    let status = json(&weft(&root, &["memory", "status", "--json"], ""));
    let trail = status["superseded"].as_array().unwrap();
    assert_eq!(trail.len(), 2);
    assert!(
        trail
            .iter()
            .all(|s| s["reason"] == "the latency claim was unmeasured")
    );
    assert!(trail.iter().any(|s| s["entryId"] == decision["id"]));
    let q = json(&weft(
        &root,
        &["memory", "query", "SQLite memory", "--json"],
        "",
    ));
    assert!(q["results"].as_array().unwrap().iter().all(|h| {
        !h["entry"]["content"]
            .as_str()
            .unwrap()
            .contains("milliseconds")
    }));
    let none = weft(
        &root,
        &[
            "memory",
            "correct",
            "no such thing at all",
            "-c",
            "Whatever, it changed because of reasons",
        ],
        "",
    );
    assert_eq!(none.status.code(), Some(1));

    let m = weft(&root, &["memory", "maintain", "--json"], "");
    assert_eq!(m.status.code(), Some(0), "{}", err(&m));
    assert!(json(&m)["duplicates"].as_array().unwrap().is_empty());
}

#[test]
fn uni_009_session_start_injects_recent_memories_and_open_loops() {
    let (_d, root) = project();
    store(
        &root,
        &[
            "Chose WAL mode for weft.db because hooks must never wait for readers",
            "--type",
            "decision",
            "--importance",
            "9",
        ],
    );
    store(
        &root,
        &[
            "Finish the deliver loop and its scripted-agent test",
            "--type",
            "goal",
            "--importance",
            "8",
        ],
    );
    store(
        &root,
        &[
            "Look at the README wording again some day soon",
            "--type",
            "action",
            "--importance",
            "4",
        ],
    );
    weft(&root, &["memory", "promote"], "");
    let payload = serde_json::json!({"session_id": "s1", "cwd": root, "hook_event_name": "SessionStart", "source": "startup"});
    let o = weft(
        &root,
        &["hook", "session-start", "--harness", "claude"],
        &payload.to_string(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let block = out(&o);
    let start = block.find("<uap-context>").unwrap();
    let end = block.find("</uap-context>").unwrap();
    let inside = &block[start..end];
    assert!(inside.contains("Memories (last 24h"), "{block}");
    assert!(
        inside.contains("Memory loop: READ"),
        "the loop is taught: {block}"
    );
    assert!(
        inside.contains("[semantic · decision · 9] Chose WAL mode"),
        "{block}"
    );
    let loops = &inside[inside.find("Open session loops").unwrap()..];
    assert!(loops.contains("Finish the deliver loop"), "{block}");
    assert!(
        !loops.contains("README wording"),
        "importance 4 is not an open loop: {block}"
    );
    // Cursor gets the same block as additional_context.
    let o = weft(
        &root,
        &["hook", "session-start", "--harness", "cursor"],
        &payload.to_string(),
    );
    let answer: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        answer["additional_context"]
            .as_str()
            .unwrap()
            .contains("Finish the deliver loop")
    );
}

#[test]
fn uni_005_memory_never_fails_session_start_and_pre_tool_use_never_touches_it() {
    let (_d, root) = project();
    // A pre-tool-use hook on a fresh project writes the gate's tables, never memory's.
    let payload = serde_json::json!({"session_id": "s1", "cwd": root, "hook_event_name": "PreToolUse",
        "tool_name": "Read", "tool_input": {"file_path": "weft.toml"}});
    let o = weft(
        &root,
        &["hook", "pre-tool-use", "--harness", "claude"],
        &payload.to_string(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let mut bytes = std::fs::read(root.join(".weft/weft.db")).unwrap();
    bytes.extend(std::fs::read(root.join(".weft/weft.db-wal")).unwrap_or_default());
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.contains("gate_policies"),
        "the gate's tables are there"
    );
    assert!(
        !text.contains("memory_entries"),
        "pre-tool-use created the memory tables"
    );
    // A corrupt file: session start moves it aside, recreates it, and still answers.
    std::fs::remove_dir_all(root.join(".weft")).unwrap();
    std::fs::create_dir_all(root.join(".weft")).unwrap();
    std::fs::write(root.join(".weft/weft.db"), vec![9u8; 8192]).unwrap();
    let payload =
        serde_json::json!({"session_id": "s1", "cwd": root, "hook_event_name": "SessionStart"});
    let o = weft(
        &root,
        &["hook", "session-start", "--harness", "claude"],
        &payload.to_string(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        out(&o).contains("<uap-context>") && out(&o).contains("recreated"),
        "{}",
        out(&o)
    );
    let stored = store(
        &root,
        &[
            "After a corrupt file the memory tables are recreated empty",
            "--importance",
            "6",
        ],
    );
    assert_eq!(stored["stored"], true);
}
