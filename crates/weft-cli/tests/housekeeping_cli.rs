//! Issue 17 items 8 (part) and 11 through the `weft` binary: `runs list` shows agent, start,
//! duration, steps, tokens, cost, status and the input's first words; unique prefixes of run
//! ids work everywhere a run id does; `checkpoints list RUN` shows both sides of a `dual_ai`
//! run; `events --type` refuses an unknown type; `runs delete`, `runs prune --older-than`
//! (never a running run) and `store gc` keep the store bounded, on SQLite and PostgreSQL
//! (`WEFT_TEST_DATABASE_URL`).

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn weft(cwd: &Path, args: &[&str], store: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .env_remove("WEFT_DATABASE_URL");
    if let Some(url) = store {
        command.env("WEFT_DATABASE_URL", url);
    }
    command.output().expect("weft runs")
}

fn say(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs the project and returns the run id.
fn run(cwd: &Path, input: &str, store: Option<&str>) -> String {
    let out = weft(cwd, &["run", "p", "--json", input], store);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let first: Value = stdout(&out)
        .lines()
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .expect("run_start");
    first["runId"].as_str().expect("run id").to_owned()
}

fn runs(cwd: &Path, store: Option<&str>) -> Vec<Value> {
    let out = weft(cwd, &["runs", "list", "--json"], store);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("json")
}

/// A project whose one agent answers with a tool call, then text.
fn project(dir: &Path) {
    common::scripted_project(
        &dir.join("p"),
        "",
        &["list_dir"],
        &json!({"responses": [
            {"toolCalls": [{"id": "c1", "name": "list_dir", "arguments": {"path": "."}}],
             "usage": {"inputTokens": 10, "outputTokens": 5}},
            {"text": "done", "usage": {"inputTokens": 20, "outputTokens": 3}}
        ]}),
    );
}

#[test]
fn runs_list_shows_what_a_newcomer_asks_for_and_prefixes_name_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    project(dir.path());
    let id = run(
        dir.path(),
        "Please list the files of this project for me today",
        None,
    );
    let p = dir.path().join("p");
    let out = weft(&p, &["runs", "list"], None);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let text = stdout(&out);
    let header = text.lines().next().expect("header");
    for column in [
        "RUN", "AGENT", "STARTED", "DURATION", "STEPS", "TOKENS", "COST", "STATUS", "INPUT",
    ] {
        assert!(header.contains(column), "{text}");
    }
    let row = text.lines().nth(1).expect("row");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[0], id);
    assert_eq!(cells[1], "a", "{row}");
    assert!(cells[4].ends_with('s'), "a duration: {row}");
    assert_eq!(cells[5], "2", "steps: {row}");
    assert_eq!(cells[6], "38", "tokens: {row}");
    assert_eq!(cells[7], "unknown", "no price, so no cost: {row}");
    assert_eq!(cells[8], "completed", "{row}");
    assert!(
        row.ends_with("Please list the files of this …"),
        "the input's first words: {row}"
    );
    // A unique prefix works for show, events, checkpoints and resume.
    let prefix = &id[..8];
    let out = weft(&p, &["runs", "show", prefix, "--json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let shown: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(shown["run_id"], id);
    let out = weft(&p, &["events", prefix, "--type", "tool_call_end"], None);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert_eq!(stdout(&out).lines().count(), 1, "{}", say(&out));
    let out = weft(&p, &["checkpoints", "list", prefix], None);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert!(stdout(&out).lines().count() > 1, "{}", say(&out));
    let out = weft(&p, &["resume", prefix], None);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    // An unknown event type is an error, not an empty list.
    let out = weft(&p, &["events", prefix, "--type", "tool_cal_end"], None);
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown event type \"tool_cal_end\""),
        "{}",
        say(&out)
    );
    // A prefix shared by two runs is refused, naming them.
    let second = run(dir.path(), "again", None);
    let common = id
        .chars()
        .zip(second.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let out = weft(&p, &["runs", "show", &id[..common]], None);
    assert_ne!(out.status.code(), Some(0), "{}", say(&out));
    if common > 0 {
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("give more of it"),
            "{}",
            say(&out)
        );
    }
}

#[test]
fn checkpoints_of_a_dual_ai_run_show_both_sides() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = weft(dir.path(), &["init", "demo"], None);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let out = weft(
        dir.path(),
        &[
            "run",
            "demo",
            "--agent",
            "review_pair",
            "--json",
            "Write a blurb",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let first: Value = stdout(&out)
        .lines()
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .expect("run_start");
    let id = first["runId"].as_str().expect("id");
    let demo = dir.path().join("demo");
    let out = weft(&demo, &["checkpoints", "list", id, "--json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
    assert!(list.iter().any(|c| c["side"] == "A"), "{list:?}");
    assert!(list.iter().any(|c| c["side"] == "B"), "{list:?}");
    let out = weft(&demo, &["checkpoints", "list", "no-such-run"], None);
    assert_eq!(out.status.code(), Some(1), "{}", say(&out));
}

/// Deletes and prunes runs, then collects, on the store `store` (`None`: the project's SQLite).
fn delete_prune_and_gc(store: Option<&str>) {
    let dir = tempfile::tempdir().expect("tempdir");
    project(dir.path());
    let p = dir.path().join("p");
    let first = run(dir.path(), "one", store);
    let second = run(dir.path(), "two", store);
    let third = run(dir.path(), "three", store);
    let ids = |list: &[Value]| -> Vec<String> {
        list.iter()
            .filter_map(|r| r["run_id"].as_str().map(str::to_owned))
            .collect()
    };
    // delete: the run, its events and its checkpoints go.
    let thread = runs(&p, store)
        .into_iter()
        .find(|r| r["run_id"] == first.as_str())
        .and_then(|r| r["thread_id"].as_str().map(str::to_owned))
        .expect("thread");
    let out = weft(&p, &["runs", "delete", &first[..12]], store);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert!(stdout(&out).contains(&format!("deleted run {first} and its thread")));
    let left = ids(&runs(&p, store));
    assert!(!left.contains(&first), "{left:?}");
    assert_eq!(left.len(), 2);
    let out = weft(&p, &["events", &first], store);
    assert_eq!(out.status.code(), Some(1), "{}", say(&out));
    let out = weft(&p, &["checkpoints", "list", &thread], store);
    assert_eq!(out.status.code(), Some(1), "{}", say(&out));
    // prune: nothing is older than a week; everything is older than a second ago.
    let out = weft(&p, &["runs", "prune", "--older-than", "7d"], store);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert!(stdout(&out).contains("deleted 0 runs"), "{}", say(&out));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let out = weft(
        &p,
        &["runs", "prune", "--older-than", "1s", "--dry-run"],
        store,
    );
    assert!(
        stdout(&out).contains("would delete 2 runs"),
        "{}",
        say(&out)
    );
    assert_eq!(ids(&runs(&p, store)).len(), 2, "a dry run deletes nothing");
    let out = weft(&p, &["runs", "prune", "--older-than", "1s"], store);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert!(stdout(&out).contains(&format!("deleted run {second}")));
    assert!(stdout(&out).contains(&format!("deleted run {third}")));
    assert!(runs(&p, store).is_empty());
    // gc: compacts, and is idempotent.
    let out = weft(&p, &["store", "gc", "--json"], store);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    if store.is_none() {
        assert!(
            report["bytesAfter"].as_u64() <= report["bytesBefore"].as_u64(),
            "{report}"
        );
    }
    let out = weft(&p, &["store", "gc", "--json"], store);
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["historyRows"], 0, "{report}");
    assert_eq!(report["ledgerRows"], 0, "{report}");
}

#[test]
fn runs_delete_prune_and_store_gc_on_sqlite() {
    delete_prune_and_gc(None);
}

#[test]
fn runs_delete_prune_and_store_gc_on_postgres() {
    let Ok(base) = std::env::var("WEFT_TEST_DATABASE_URL") else {
        eprintln!("skipped: WEFT_TEST_DATABASE_URL is not set");
        return;
    };
    // A schema of its own, made (and migrated) here; the CLI reaches it through the URL's
    // `options`.
    let schema = format!("weft_cli_gc_{}", std::process::id());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let _ = weft_store::drop_schema(&base, &schema).await;
        let store = weft_store::Store::open_postgres(
            weft_store::PgOptions::new(base.clone()).schema(schema.clone()),
        )
        .await
        .expect("postgres");
        store.flush().await.expect("flush");
    });
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}options=-c%20search_path%3D{schema}");
    delete_prune_and_gc(Some(&url));
    let _ = runtime.block_on(weft_store::drop_schema(&base, &schema));
}

#[test]
fn a_running_run_is_not_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("p");
    common::scripted_project(
        &p,
        "",
        &[],
        &json!({"responses": [{"text": "slow", "delayMs": 20000}]}),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["run", "p", "--json", "hi"])
        .current_dir(dir.path())
        .env_remove("WEFT_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut first = String::new();
    {
        use std::io::BufRead as _;
        let out = child.stdout.as_mut().expect("stdout");
        std::io::BufReader::new(out)
            .read_line(&mut first)
            .expect("run_start");
    }
    let start: Value = serde_json::from_str(&first).expect("json");
    let id = start["runId"].as_str().expect("id").to_owned();
    let out = weft(&p, &["runs", "delete", &id], None);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.status.code(), Some(5), "{}", say(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is running"),
        "{}",
        say(&out)
    );
}
