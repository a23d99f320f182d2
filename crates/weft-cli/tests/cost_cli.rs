//! Usage and cost through the `weft` binary: a priced model's cost in the live view, the
//! `run_end` event, `weft runs show` and `weft runs list` (text and JSON); `cost unknown` (and
//! `"cost": null`), never `$0`, for a model without a price; `--pricing FILE` and the
//! project's `pricing` key; malformed price files as usage errors; failed and interrupted runs
//! reporting what they spent; a resume under other prices keeping earlier calls' price.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::weft;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// `scripted-turns` models priced at `input` / `output` dollars per million tokens: each
/// scripted call (10 input + 1 output tokens) costs `(10 * input + output) / 1e6`.
fn price_file(input: u32, output: u32) -> String {
    format!("[scripted-turns]\n\"*\" = {{ input = {input}, output = {output} }}\n")
}

/// 10 × 1000 + 1 × 10000 per million: $0.02 a call.
const CALL: f64 = 0.02;

fn answer(reply: Value) -> Value {
    let mut reply = reply;
    reply["usage"] = json!({"inputTokens": 10, "outputTokens": 1});
    reply
}

fn command(id: &str, command: &str) -> Value {
    answer(
        json!({"toolCalls": [{"id": id, "name": "run_command", "arguments": {"command": command}}]}),
    )
}

/// A project `p` in `dir` whose model runs `echo hi`, then answers: two calls.
fn two_calls(dir: &Path, extra: &str) {
    let script = json!({"responses": [command("c1", "echo hi"), answer(json!({"text": "done"}))]});
    common::scripted_project(&dir.join("p"), extra, &["run_command"], &script);
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run_end(out: &Output) -> Value {
    text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(common::flat)
        .find(|e| e["type"] == "run_end")
        .unwrap_or_default()
}

fn close(value: &Value, expected: f64) -> bool {
    value.as_f64().is_some_and(|v| (v - expected).abs() < 1e-9)
}

/// `weft runs …` in the project `p` of `dir` (where its store is).
fn runs(dir: &Path, args: &[&str]) -> Output {
    let mut all = vec!["runs"];
    all.extend_from_slice(args);
    weft(&dir.join("p"), &all)
}

fn show_json(dir: &Path, run: &str) -> Value {
    serde_json::from_slice(&runs(dir, &["show", run, "--json"]).stdout).unwrap()
}

#[test]
fn a_priced_run_reports_its_cost_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    two_calls(dir.path(), "");
    std::fs::write(dir.path().join("prices.toml"), price_file(1000, 10_000)).unwrap();

    // The live view's last line.
    let out = weft(dir.path(), &["run", "p", "--pricing", "prices.toml", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let last = stdout.lines().last().unwrap();
    assert!(
        last.contains("22 tokens (20 in, 2 out) · $0.0400"),
        "{stdout}"
    );

    // run_end, then runs show and runs list, as text and JSON.
    let out = weft(
        dir.path(),
        &["run", "p", "--pricing", "prices.toml", "--json", "go"],
    );
    let end = run_end(&out);
    assert!(close(&end["cost"], 2.0 * CALL), "{end}");
    let run = end["runId"].as_str().unwrap();
    let show = text(&runs(dir.path(), &["show", run]).stdout);
    assert!(
        show.contains("usage     20 in / 2 out tokens, $0.0400"),
        "{show}"
    );
    assert!(
        show.contains("scripted-turns:")
            && show.contains("2 calls, $0.0400, at $1000 in / $10000 out"),
        "the price used is named: {show}"
    );
    assert!(show.contains("(override)"), "{show}");
    let shown = show_json(dir.path(), run);
    assert!(close(&shown["usage"]["cost"], 2.0 * CALL), "{shown}");
    assert_eq!(shown["model_calls"][0]["calls"], 2);
    assert_eq!(shown["model_calls"][0]["price"]["input"], 1000.0);
    assert_eq!(shown["model_calls"][0]["price"]["source"], "override");
    let list = text(&runs(dir.path(), &["list"]).stdout);
    assert!(list.contains("COST") && list.contains("$0.0400"), "{list}");
    let listed: Value =
        serde_json::from_slice(&runs(dir.path(), &["list", "--json"]).stdout).unwrap();
    assert!(close(&listed[0]["usage"]["cost"], 2.0 * CALL), "{listed}");
}

#[test]
fn a_model_without_a_price_shows_cost_unknown_never_zero() {
    let dir = tempfile::tempdir().unwrap();
    two_calls(dir.path(), "");
    let out = weft(dir.path(), &["run", "p", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let last = stdout.lines().last().unwrap();
    assert!(last.contains("· cost unknown ·"), "{stdout}");
    assert!(!last.contains('$'), "{stdout}");

    let out = weft(dir.path(), &["run", "p", "--json", "go"]);
    let end = run_end(&out);
    assert_eq!(end["cost"], Value::Null, "{end}");
    assert_eq!(end["inputTokens"], 20);
    let run = end["runId"].as_str().unwrap();
    let show = text(&runs(dir.path(), &["show", run]).stdout);
    assert!(
        show.contains("20 in / 2 out tokens, cost unknown"),
        "{show}"
    );
    assert!(show.contains("no price (cost unknown)"), "{show}");
    assert_eq!(show_json(dir.path(), run)["usage"]["cost"], Value::Null);
    let list = text(&runs(dir.path(), &["list"]).stdout);
    assert!(list.contains("unknown") && !list.contains("$0"), "{list}");
    let listed: Value =
        serde_json::from_slice(&runs(dir.path(), &["list", "--json"]).stdout).unwrap();
    assert_eq!(listed[0]["usage"]["cost"], Value::Null);

    // A cost budget on it is refused, naming the model and the fix.
    let out = weft(dir.path(), &["run", "p", "--max-cost", "1", "go"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("scripted-turns:")
            && stderr.contains("--pricing FILE")
            && stderr.contains("pricing key in weft.toml"),
        "{stderr}"
    );
}

#[test]
fn the_projects_pricing_and_the_pricing_flag_override_the_table() {
    let dir = tempfile::tempdir().unwrap();
    two_calls(dir.path(), "pricing = \"prices.toml\"\n");
    let root = dir.path().join("p");
    std::fs::write(root.join("prices.toml"), price_file(1000, 10_000)).unwrap();
    let end = run_end(&weft(dir.path(), &["run", "p", "--json", "go"]));
    assert!(close(&end["cost"], 2.0 * CALL), "the project's file: {end}");
    // --pricing wins over the project's key.
    std::fs::write(dir.path().join("double.toml"), price_file(2000, 20_000)).unwrap();
    let end = run_end(&weft(
        dir.path(),
        &["run", "p", "--pricing", "double.toml", "--json", "go"],
    ));
    assert!(close(&end["cost"], 4.0 * CALL), "--pricing: {end}");
    // A cost budget starts once the model has a price.
    let out = weft(dir.path(), &["run", "p", "--max-cost", "1", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // The table inline in weft.toml.
    let inline = tempfile::tempdir().unwrap();
    two_calls(
        inline.path(),
        "[pricing.scripted-turns]\n\"*\" = { input = 1000, output = 10000 }\n",
    );
    let end = run_end(&weft(inline.path(), &["run", "p", "--json", "go"]));
    assert!(close(&end["cost"], 2.0 * CALL), "inline: {end}");
}

#[test]
fn malformed_price_files_are_usage_errors_naming_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    two_calls(dir.path(), "pricing = \"prices.toml\"\n");
    let root = dir.path().join("p");
    std::fs::write(
        root.join("prices.toml"),
        "[scripted-turns]\n\"*\" = { input = \"cheap\", output = 1 }\n",
    )
    .unwrap();
    let out = weft(dir.path(), &["run", "p", "go"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("prices.toml") && stderr.contains("scripted-turns.*.input"),
        "{stderr}"
    );

    std::fs::write(root.join("prices.toml"), price_file(1, 1)).unwrap();
    std::fs::write(
        dir.path().join("bad.toml"),
        "[scripted-turns]\n\"*\" = { input = 1 }\n",
    )
    .unwrap();
    let out = weft(dir.path(), &["run", "p", "--pricing", "bad.toml", "go"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("bad.toml") && stderr.contains("scripted-turns.*.output"),
        "{stderr}"
    );
    let out = weft(
        dir.path(),
        &[
            "llm",
            "--model",
            "scripted:x.json",
            "--pricing",
            "bad.toml",
            "hi",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// The failing-turn case: the first model call succeeds (and its tool runs), the second
/// fails; the failed run reports the first call's tokens and cost.
#[test]
fn a_failed_run_reports_what_it_spent() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"responses": [command("c1", "echo hi")]});
    common::scripted_project(&dir.path().join("p"), "", &["run_command"], &script);
    std::fs::write(dir.path().join("prices.toml"), price_file(1000, 10_000)).unwrap();
    let out = weft(
        dir.path(),
        &["run", "p", "--pricing", "prices.toml", "--json", "go"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let end = run_end(&out);
    assert_eq!(end["status"], "failed");
    assert_eq!(
        (end["inputTokens"].as_u64(), end["outputTokens"].as_u64()),
        (Some(10), Some(1))
    );
    assert!(close(&end["cost"], CALL), "{end}");
    let run = end["runId"].as_str().unwrap();
    let shown = show_json(dir.path(), run);
    assert_eq!(shown["status"], "failed");
    assert_eq!(shown["usage"]["input_tokens"], 10);
    assert!(close(&shown["usage"]["cost"], CALL), "{shown}");
    // The live view's last line says it too.
    let out = weft(dir.path(), &["run", "p", "--pricing", "prices.toml", "go"]);
    let stdout = text(&out.stdout);
    // (The closing line, then the resume hint.)
    let closing = stdout
        .lines()
        .find(|l| l.starts_with("failed"))
        .unwrap_or_default();
    assert!(
        closing.contains("11 tokens (10 in, 1 out) · $0.0200"),
        "{stdout}"
    );
}

fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts `weft run --pricing prices.toml --json` on a project whose first command hangs
/// until it is interrupted, interrupts it (SIGINT) once the command started, and returns the
/// project folder and the run's `run_end` event.
#[cfg(unix)]
fn interrupted_run(dir: &Path) -> (std::path::PathBuf, Value) {
    let root = dir.join("p");
    let script = json!({"responses": [
        command("c1", "if [ -f started ]; then echo again; else touch started; sleep 30; fi"),
        answer(json!({"text": "done"}))]});
    common::scripted_project(&root, "", &["run_command"], &script);
    std::fs::write(dir.join("prices.toml"), price_file(1000, 10_000)).unwrap();
    std::fs::write(dir.join("double.toml"), price_file(2000, 20_000)).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["run", "p", "--pricing", "prices.toml", "--json", "go"])
        .current_dir(dir)
        .env_remove("WEFT_DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&root.join("started"));
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    (root, run_end(&out))
}

/// An interrupted run reports its first call's cost; resumed under doubled prices, its new
/// call costs double and the first keeps the price recorded with it.
#[cfg(unix)]
#[test]
fn an_interrupted_run_reports_what_it_spent_and_keeps_its_prices_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let (root, end) = interrupted_run(dir.path());
    assert_eq!(end["status"], "interrupted");
    assert_eq!(end["inputTokens"], 10);
    assert!(close(&end["cost"], CALL), "{end}");
    let run = end["runId"].as_str().unwrap().to_owned();
    let shown = show_json(dir.path(), &run);
    assert!(close(&shown["usage"]["cost"], CALL), "{shown}");
    let show = text(&runs(dir.path(), &["show", &run]).stdout);
    assert!(show.contains("interrupted"), "{show}");

    let out = weft(
        &root,
        &[
            "resume",
            &run,
            "--rerun-uncertain",
            "--pricing",
            "../double.toml",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let end = run_end(&out);
    assert!(close(&end["cost"], CALL + 2.0 * CALL), "{end}");
    let show = text(&runs(dir.path(), &["show", &run]).stdout);
    assert!(
        show.contains("1 call, $0.0200, at $1000 in")
            && show.contains("1 call, $0.0400, at $2000 in"),
        "each call at the price recorded with it: {show}"
    );
}

/// A resume without --pricing keeps charging at the prices the run was started with.
#[cfg(unix)]
#[test]
fn a_resume_keeps_the_runs_own_pricing() {
    let dir = tempfile::tempdir().unwrap();
    let (root, end) = interrupted_run(dir.path());
    let run = end["runId"].as_str().unwrap().to_owned();
    let out = weft(&root, &["resume", &run, "--rerun-uncertain", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let end = run_end(&out);
    assert!(close(&end["cost"], 2.0 * CALL), "{end}");
}

/// `weft llm --cost` prints the call's tokens and cost on stderr; `--pricing` prices it.
#[test]
fn llm_prints_the_calls_cost_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"responses": [answer(json!({"text": "hello"}))]});
    std::fs::write(dir.path().join("s.json"), script.to_string()).unwrap();
    let out = weft(
        dir.path(),
        &["llm", "--model", "scripted:s.json", "--cost", "hi"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "hello");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("10 in / 1 out tokens · cost unknown"),
        "{stderr}"
    );
    std::fs::write(
        dir.path().join("prices.toml"),
        "[scripted]\n\"*\" = { input = 1000, output = 10000 }\n",
    )
    .unwrap();
    let out = weft(
        dir.path(),
        &[
            "llm",
            "--model",
            "scripted:s.json",
            "--pricing",
            "prices.toml",
            "hi",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("10 in / 1 out tokens · $0.0200 (scripted:*, override)"),
        "{stderr}"
    );
}
