//! Timeouts and retries that say what they do (UPP-246, issue 16): a server that accepts and
//! never answers ends in `TIMEOUT` after the idle timeout (default or configured), with paused
//! time so no test waits on a clock; every retry is announced to the observer before its wait
//! (`rate limited; retrying in 20 ms (2/3)`); OpenAI's `insufficient_quota` is
//! `QUOTA_EXCEEDED` and is not retried.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use weft_provider::{
    DEFAULT_IDLE_TIMEOUT, ErrorCode, LlmOptions, NoRetry, ProviderConfig, ProviderRegistry,
    RetryNotice, llm,
};
use weft_testkit::{ReplayServer, Reply};

fn options(url: &str) -> LlmOptions {
    let reference = ProviderRegistry::with_builtins()
        .resolve("openai-compatible:m")
        .unwrap();
    LlmOptions::new(reference).config(
        ProviderConfig::default()
            .base_url(format!("{url}/v1"))
            .api_key("sk-test-key-123456"),
    )
}

/// A server that accepts connections, reads, and never answers.
async fn silent_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    url
}

#[tokio::test(start_paused = true)]
async fn a_silent_server_times_out_after_the_idle_timeout() {
    let url = silent_server().await;
    // The default idle timeout applies with no configuration at all.
    let mut opts = options(&url);
    opts.config.retry_strategy = Some(Arc::new(NoRetry));
    let started = tokio::time::Instant::now();
    let error = llm(opts).unwrap().generate(&[], "hi").await.unwrap_err();
    assert_eq!(error.code, ErrorCode::Timeout, "{error}");
    assert!(error.message.contains("idle timeout"), "{error}");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= DEFAULT_IDLE_TIMEOUT
            && elapsed < DEFAULT_IDLE_TIMEOUT + Duration::from_millis(50),
        "{elapsed:?}"
    );
    // A configured one, per attempt: three attempts of 5 s, announced in between.
    let notices = Arc::new(Mutex::new(Vec::new()));
    let seen = notices.clone();
    let mut opts = options(&url);
    opts.config = opts
        .config
        .idle_timeout(Duration::from_secs(5))
        .retry_observer(move |n: &RetryNotice| seen.lock().unwrap().push(n.clone()));
    let started = tokio::time::Instant::now();
    let error = llm(opts).unwrap().generate(&[], "hi").await.unwrap_err();
    assert_eq!(error.code, ErrorCode::Timeout, "{error}");
    let notices = notices.lock().unwrap().clone();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert_eq!(notices[0].next_attempt, 2);
    assert_eq!(notices[0].max_attempts, Some(3));
    assert!(
        notices[0].describe().contains("timed out; retrying in"),
        "{}",
        notices[0].describe()
    );
    // Paused time: the elapsed virtual time is the three idle timeouts plus the two waits
    // (the timer wheel rounds each deadline up to the next millisecond).
    let expected = Duration::from_secs(15) + notices.iter().map(|n| n.delay).sum::<Duration>();
    let elapsed = started.elapsed();
    assert!(
        elapsed >= expected && elapsed < expected + Duration::from_millis(50),
        "{elapsed:?} vs {expected:?}"
    );
}

#[tokio::test]
async fn retries_are_announced_before_their_wait() {
    let ok = json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "fine"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
    let server = ReplayServer::start(vec![
        Reply::json(429, &json!({"error": {"message": "rate limited"}}))
            .header("retry-after-ms", "20"),
        Reply::json(503, &json!({"error": {"message": "overloaded"}}))
            .header("retry-after-ms", "10"),
        Reply::json(200, &ok),
    ])
    .await;
    let notices = Arc::new(Mutex::new(Vec::new()));
    let seen = notices.clone();
    let mut opts = options(&server.url());
    opts.config = opts
        .config
        .retry_observer(move |n: &RetryNotice| seen.lock().unwrap().push(n.describe()));
    let turn = llm(opts).unwrap().generate(&[], "hi").await.unwrap();
    assert_eq!(turn.text(), "fine");
    assert_eq!(
        *notices.lock().unwrap(),
        vec![
            "openai-compatible: rate limited; retrying in 20 ms (2/3)".to_owned(),
            "openai-compatible: provider error; retrying in 10 ms (3/3)".to_owned(),
        ]
    );
}

#[tokio::test]
async fn insufficient_quota_is_quota_exceeded_and_final() {
    let server = ReplayServer::start(vec![
        Reply::json(
            429,
            &json!({"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                "type": "insufficient_quota", "code": "insufficient_quota"}}),
        ),
        Reply::json(200, &json!({})),
    ])
    .await;
    let notices = Arc::new(Mutex::new(0usize));
    let seen = notices.clone();
    let mut opts = options(&server.url());
    opts.config = opts
        .config
        .retry_observer(move |_: &RetryNotice| *seen.lock().unwrap() += 1);
    let error = llm(opts).unwrap().generate(&[], "hi").await.unwrap_err();
    assert_eq!(error.code, ErrorCode::QuotaExceeded, "{error}");
    assert!(!error.is_retryable());
    assert_eq!(server.received().len(), 1, "not retried");
    assert_eq!(*notices.lock().unwrap(), 0);
}
