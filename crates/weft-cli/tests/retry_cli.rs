//! Retries said on stderr, and quota errors that are final, through `weft llm` against a
//! local server (issue 16 item 5).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use serde_json::json;
use weft_testkit::{ReplayServer, Reply};

fn weft_llm(url: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args([
            "llm",
            "--model",
            "openai-compatible:tiny",
            "--base-url",
            &format!("{url}/v1"),
            "Hello",
        ])
        .env("OPENAI_API_KEY", "sk-test")
        .env_remove("WEFT_OPENAI_COMPATIBLE_BASE_URL")
        .output()
        .expect("run weft")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn a_rate_limit_is_announced_then_retried() {
    let ok = json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "fine"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
    let server = ReplayServer::start(vec![
        Reply::json(429, &json!({"error": {"message": "slow down"}}))
            .header("retry-after-ms", "30"),
        Reply::json(200, &ok),
    ])
    .await;
    let url = server.url();
    let out = tokio::task::spawn_blocking(move || weft_llm(&url))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "fine\n");
    assert!(
        text(&out.stderr)
            .contains("weft: openai-compatible: rate limited; retrying in 30 ms (2/3)"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn insufficient_quota_fails_at_once_as_quota_exceeded() {
    let server = ReplayServer::start(vec![Reply::json(
        429,
        &json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}),
    )])
    .await;
    let url = server.url();
    let out = tokio::task::spawn_blocking(move || weft_llm(&url))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("QUOTA_EXCEEDED"), "{stderr}");
    assert!(!stderr.contains("retrying"), "{stderr}");
    assert_eq!(server.received().len(), 1);
}
