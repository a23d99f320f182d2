//! TP-072: resolving a tool return's `content_ref` from a thread document — inline `content`
//! wins, fetched content is checked against `hash`, a mismatch fails ("Content integrity check
//! failed"). The fetcher reads real files (`file://` URIs) and counts its fetches.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use weft_thread::content_ref::{ContentFetcher, ContentRefError, resolve_tool_return};
use weft_thread::hash::hash_bytes;
use weft_thread::{ContentRef, MessagePart, Thread, Turn, TurnMessage, validate};

/// Reads `file://` URIs from disk.
#[derive(Default)]
struct Files {
    fetches: AtomicUsize,
}

impl ContentFetcher for Files {
    type Error = std::io::Error;

    async fn fetch(&self, content_ref: &ContentRef) -> Result<Vec<u8>, std::io::Error> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        let path = content_ref
            .uri
            .strip_prefix("file://")
            .unwrap_or(&content_ref.uri);
        tokio::fs::read(path).await
    }
}

/// A valid thread whose agent turn calls `report` and gets `tool_return` back.
fn thread_with(tool_return: Value) -> Thread {
    let value = thread_value(tool_return);
    let report = validate(&value);
    assert!(report.is_valid(), "{:#?}", report.findings);
    Thread::from_value(value).unwrap()
}

/// The document of [`thread_with`].
fn thread_value(tool_return: Value) -> Value {
    let agent = "550e8400-e29b-41d4-a716-446655440001";
    json!({
        "version": "0.0.3", "thread_id": "550e8400-e29b-41d4-a716-446655440000",
        "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:03Z",
        "agents": {agent: {"agent_id": agent, "agent_name": "reporter", "created_at": "2025-01-01T00:00:00Z"}},
        "turns": [{"turn_type": "agent", "agent_id": agent, "started_at": "2025-01-01T00:00:01Z",
            "completed_at": "2025-01-01T00:00:03Z", "messages": [
            {"message_type": "response", "timestamp": "2025-01-01T00:00:01Z", "agent_id": agent,
             "parts": [{"part_kind": "tool-call", "tool_name": "report", "tool_call_id": "c1", "args": {}}]},
            {"message_type": "request", "timestamp": "2025-01-01T00:00:02Z", "agent_id": agent,
             "parts": [tool_return]}]}]
    })
}

/// Inline content above 100 KB (its JSON text) is valid, with a `content-size` warning that
/// points at it; at 100 KB there is none.
#[test]
fn inline_content_above_100_kb_is_a_warning_and_at_100_kb_none() {
    for (size, warned) in [(100 * 1024, false), (100 * 1024 + 1, true), (2_000, false)] {
        // A JSON string of `size` bytes: the text and its two quotes.
        let content = "x".repeat(size - 2);
        let report = validate(&thread_value(json!({
            "part_kind": "tool-return", "tool_name": "report", "tool_call_id": "c1",
            "status": "success", "content": content
        })));
        assert!(report.is_valid(), "{:#?}", report.findings);
        let warnings: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.rule == weft_thread::Rule::ContentSize)
            .collect();
        assert_eq!(warnings.len(), usize::from(warned), "{size}: {warnings:#?}");
        if let [warning] = warnings.as_slice() {
            assert_eq!(warning.severity, weft_thread::Severity::Warning);
            assert_eq!(warning.pointer, "/turns/0/messages/1/parts/0/content");
            assert!(
                warning.message.contains(&format!("{size} bytes")),
                "{warning:?}"
            );
        }
    }
}

fn tool_return_of(thread: &Thread) -> &weft_thread::ToolReturnPart {
    let Turn::Agent(turn) = &thread.turns[0] else {
        panic!("agent turn")
    };
    let TurnMessage::Thread(message) = &turn.messages[1] else {
        panic!("request")
    };
    match &message.parts[0] {
        MessagePart::ToolReturn(part) => part,
        other => panic!("not a tool return: {other:?}"),
    }
}

fn stored(dir: &Path, name: &str, body: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    format!("file://{}", path.display())
}

#[tokio::test]
async fn tp_072_inline_content_wins_over_content_ref() {
    let dir = tempfile::tempdir().unwrap();
    let uri = stored(dir.path(), "report.json", br#"{"from": "the file"}"#);
    for inline in [json!({"from": "inline"}), Value::Null] {
        let thread = thread_with(json!({
            "part_kind": "tool-return", "tool_name": "report", "tool_call_id": "c1", "status": "success",
            "content": inline,
            // A hash the file does not have: fetching would fail the check.
            "content_ref": {"uri": uri, "hash": hash_bytes(b"other").to_string()}
        }));
        let files = Files::default();
        let resolved = resolve_tool_return(tool_return_of(&thread), &files)
            .await
            .unwrap();
        assert_eq!(resolved, Some(inline));
        assert_eq!(
            files.fetches.load(Ordering::SeqCst),
            0,
            "the reference was fetched"
        );
    }
}

#[tokio::test]
async fn tp_072_fetched_content_matching_its_hash_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let body = br#"{"rows": [1, 2, 3], "title": "Q1"}"#;
    let uri = stored(dir.path(), "report.json", body);
    let thread = thread_with(json!({
        "part_kind": "tool-return", "tool_name": "report", "tool_call_id": "c1", "status": "success",
        "content_ref": {"uri": uri, "size_bytes": body.len(), "hash": hash_bytes(body).to_string(),
                        "media_type": "application/json"}
    }));
    let files = Files::default();
    let resolved = resolve_tool_return(tool_return_of(&thread), &files)
        .await
        .unwrap();
    assert_eq!(resolved, Some(json!({"rows": [1, 2, 3], "title": "Q1"})));
    assert_eq!(files.fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tp_072_fetched_content_with_another_hash_fails_the_integrity_check() {
    let dir = tempfile::tempdir().unwrap();
    let body = br#"{"rows": [1, 2, 3]}"#;
    let uri = stored(dir.path(), "report.json", body);
    let thread = thread_with(json!({
        "part_kind": "tool-return", "tool_name": "report", "tool_call_id": "c1", "status": "success",
        "content_ref": {"uri": uri, "hash": hash_bytes(body).to_string()}
    }));
    // The stored file changed after the thread was written: one byte differs.
    std::fs::write(dir.path().join("report.json"), br#"{"rows": [1, 2, 4]}"#).unwrap();
    let error = resolve_tool_return(tool_return_of(&thread), &Files::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ContentRefError::IntegrityCheckFailed { actual, .. } if *actual == hash_bytes(br#"{"rows": [1, 2, 4]}"#).to_string()),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("Content integrity check failed"),
        "{error}"
    );
}

#[tokio::test]
async fn tp_072_a_hash_that_cannot_be_checked_or_a_failed_fetch_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let uri = stored(dir.path(), "report.json", b"{}");
    let thread = thread_with(json!({
        "part_kind": "tool-return", "tool_name": "report", "tool_call_id": "c1", "status": "success",
        "content_ref": {"uri": uri, "hash": "sha256:abcd1234"}
    }));
    let error = resolve_tool_return(tool_return_of(&thread), &Files::default())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ContentRefError::UnsupportedHash { .. }),
        "{error:?}"
    );

    let missing = format!("file://{}", dir.path().join("gone.json").display());
    let thread = thread_with(json!({
        "part_kind": "tool-return", "tool_name": "report", "tool_call_id": "c1", "status": "success",
        "content_ref": {"uri": missing}
    }));
    let error = resolve_tool_return(tool_return_of(&thread), &Files::default())
        .await
        .unwrap_err();
    assert!(matches!(error, ContentRefError::Fetch { .. }), "{error:?}");

    // Without a hash the fetched JSON is taken as is; neither content nor reference: none.
    let uri = stored(dir.path(), "plain.json", b"[true]");
    let thread = thread_with(json!({
        "part_kind": "tool-return", "tool_name": "report", "tool_call_id": "c1", "status": "success",
        "content_ref": {"uri": uri}
    }));
    let resolved = resolve_tool_return(tool_return_of(&thread), &Files::default())
        .await
        .unwrap();
    assert_eq!(resolved, Some(json!([true])));
    let thread = thread_with(json!({
        "part_kind": "tool-return", "tool_name": "report", "tool_call_id": "c1", "status": "error"
    }));
    assert_eq!(
        resolve_tool_return(tool_return_of(&thread), &Files::default())
            .await
            .unwrap(),
        None
    );
}
