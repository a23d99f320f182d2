//! End-to-end tests of `weft thread …`: outputs and exit codes 0 (ok), 1 (invalid input),
//! 2 (usage).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn weft(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    // A command that does not read its input may exit first: a broken pipe is fine.
    let _ = input.write_all(stdin.unwrap_or("").as_bytes());
    drop(input);
    child.wait_with_output().unwrap()
}

fn corpus(path: &str) -> String {
    root()
        .join("crates/weft-thread/tests/corpus")
        .join(path)
        .to_string_lossy()
        .into_owned()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn code(output: &Output) -> i32 {
    output.status.code().unwrap()
}

const AGENT: &str = "550e8400-e29b-41d4-a716-446655440001";

#[test]
fn validate_exit_codes() {
    let ok = weft(&["thread", "validate", &corpus("valid/full.json")], None);
    assert_eq!(code(&ok), 0, "{ok:?}");
    assert!(stdout(&ok).starts_with("valid"));

    let bad = weft(
        &[
            "thread",
            "validate",
            &corpus("invalid/rule2-tool-call-id.json"),
        ],
        None,
    );
    assert_eq!(code(&bad), 1);
    let stderr = String::from_utf8(bad.stderr).unwrap();
    assert!(
        stderr.contains("rule 2 (tool-call-id)")
            && stderr.contains("/turns/1/messages/2/parts/0/tool_call_id"),
        "{stderr}"
    );

    let missing = weft(&["thread", "validate", "/nonexistent/thread.json"], None);
    assert_eq!(code(&missing), 2);
    let usage = weft(&["thread", "validate"], None);
    assert_eq!(code(&usage), 2);
    let not_json = weft(&["thread", "validate", "-"], Some("{"));
    assert_eq!(code(&not_json), 1);
}

#[test]
fn validate_json_output() {
    let output = weft(
        &[
            "thread",
            "validate",
            "--json",
            &corpus("invalid/rule8-thread-link-id.json"),
        ],
        None,
    );
    assert_eq!(code(&output), 1);
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["valid"], false);
    let finding = &report["findings"][0];
    assert_eq!(finding["rule"], "thread-link-id");
    assert_eq!(finding["rule_number"], 8);
    assert_eq!(finding["severity"], "error");
    assert_eq!(finding["pointer"], "/relationships/links/0/thread_id");

    let warnings = weft(
        &[
            "thread",
            "validate",
            "--json",
            &corpus("valid/warning-client-metadata.json"),
        ],
        None,
    );
    assert_eq!(code(&warnings), 0);
    let report: serde_json::Value = serde_json::from_str(&stdout(&warnings)).unwrap();
    assert_eq!(report["warnings"], 1);
}

#[test]
fn hash_and_canonicalize() {
    let file = corpus("valid/full.json");
    let hash = weft(&["thread", "hash", &file], None);
    assert_eq!(code(&hash), 0);
    let hash_text = stdout(&hash);
    assert!(
        hash_text.starts_with("sha256:") && hash_text.trim().len() == 7 + 64,
        "{hash_text}"
    );
    // Same hash from stdin with other whitespace.
    let compact: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let again = weft(&["thread", "hash", "-"], Some(&compact.to_string()));
    assert_eq!(stdout(&again), hash_text);
    let with_meta = weft(&["thread", "hash", "--include-meta", &file], None);
    assert_ne!(
        stdout(&with_meta),
        hash_text,
        "the corpus thread has meta:* members"
    );

    let canonical = weft(&["thread", "canonicalize", &file], None);
    assert_eq!(code(&canonical), 0);
    let text = stdout(&canonical);
    assert!(!text.contains("meta:") && !text.contains("\n  "));
    assert!(text.starts_with("{\"agents\":"));

    let invalid = weft(&["thread", "hash", &corpus("invalid/version.json")], None);
    assert_eq!(code(&invalid), 1);
}

#[test]
fn ui_stream_round_trip_through_the_cli() {
    let file = corpus("valid/full.json");
    let sse = weft(&["thread", "to-ui-stream", &file], None);
    assert_eq!(code(&sse), 0);
    let sse_text = stdout(&sse);
    assert!(sse_text.starts_with("data: {") && sse_text.ends_with("data: [DONE]\n\n"));
    let back = weft(&["thread", "from-ui-stream", "-"], Some(&sse_text));
    assert_eq!(code(&back), 0, "{back:?}");
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let rebuilt: serde_json::Value = serde_json::from_str(&stdout(&back)).unwrap();
    assert_eq!(rebuilt, original);
}

#[test]
fn from_ui_stream_foreign_json_lines() {
    let lines = [
        r#"{"type":"start","messageId":"m1"}"#,
        r#"{"type":"text-start","id":"1"}"#,
        r#"{"type":"text-delta","id":"1","delta":"Hi"}"#,
        r#"{"type":"text-end","id":"1"}"#,
        r#"{"type":"finish"}"#,
        r#"{"type":"start"}"#,
        r#"{"type":"text-start","id":"2"}"#,
    ]
    .join("\n");
    let args = [
        "thread",
        "from-ui-stream",
        "--agent-id",
        AGENT,
        "--received-at",
        "2025-01-20T10:00:00Z",
        "-",
    ];
    let output = weft(&args, Some(&lines));
    assert_eq!(code(&output), 0, "{output:?}");
    let thread: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        thread["turns"].as_array().unwrap().len(),
        1,
        "the unfinished turn is discarded"
    );
    assert_eq!(thread["turns"][0]["agent_id"], AGENT);
    assert!(
        String::from_utf8(output.stderr.clone())
            .unwrap()
            .contains("discarded a partial turn")
    );
    // Reproducible with --received-at.
    assert_eq!(stdout(&weft(&args, Some(&lines))), stdout(&output));
    let validated = weft(&["thread", "validate", "-"], Some(&stdout(&output)));
    assert_eq!(code(&validated), 0);

    let garbage = weft(
        &["thread", "from-ui-stream", "-"],
        Some("data: {not json}\n\n"),
    );
    assert_eq!(code(&garbage), 1);
    let bad_flag = weft(
        &[
            "thread",
            "from-ui-stream",
            "--received-at",
            "yesterday",
            "-",
        ],
        Some(""),
    );
    assert_eq!(code(&bad_flag), 2);
}

#[test]
fn pydantic_ai_both_ways() {
    let fixture = root()
        .join("testdata/fixtures/pydantic-ai-generated/pydantic-ai-1.107.10.model-messages.json");
    let thread = weft(
        &[
            "thread",
            "from-pydantic-ai",
            "--agent-id",
            AGENT,
            &fixture.to_string_lossy(),
        ],
        None,
    );
    assert_eq!(code(&thread), 0, "{thread:?}");
    let thread_text = stdout(&thread);
    assert_eq!(
        code(&weft(&["thread", "validate", "-"], Some(&thread_text))),
        0
    );

    let messages = weft(
        &["thread", "to-pydantic-ai", "--agent-id", AGENT, "-"],
        Some(&thread_text),
    );
    assert_eq!(code(&messages), 0);
    let messages_json: serde_json::Value = serde_json::from_str(&stdout(&messages)).unwrap();
    assert_eq!(messages_json.as_array().unwrap().len(), 4);
    assert_eq!(messages_json[1]["parts"][0]["part_kind"], "thinking");

    // Same thread again from our own output.
    let again = weft(
        &["thread", "from-pydantic-ai", "--agent-id", AGENT, "-"],
        Some(&stdout(&messages)),
    );
    let hash = |text: &str| stdout(&weft(&["thread", "hash", "-"], Some(text)));
    assert_eq!(hash(&stdout(&again)), hash(&thread_text));

    assert_eq!(
        code(&weft(
            &["thread", "from-pydantic-ai", "--agent-id", AGENT, "-"],
            Some("{}")
        )),
        1
    );
    assert_eq!(
        code(&weft(&["thread", "to-pydantic-ai", "-"], Some("{}"))),
        2,
        "--agent-id is required"
    );
}
