//! `weft llm` end to end, as a subprocess: output, `--json`, `--stream`, exit codes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};
use weft_testkit::{ReplayServer, Reply};

fn weft(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("WEFT_OPENAI_COMPATIBLE_BASE_URL")
        .output()
        .expect("run weft")
}

fn script(name: &str, body: &Value) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-cli-llm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, body.to_string()).unwrap();
    path
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn prints_the_reply_text() {
    let path = script(
        "hello.json",
        &json!({"responses": [{"text": "Hello there!"}]}),
    );
    let out = weft(&[
        "llm",
        "--model",
        &format!("scripted:{}", path.display()),
        "Hi",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Hello there!\n");
}

#[test]
fn json_prints_the_whole_turn() {
    let path = script(
        "turn.json",
        &json!({"responses": [{"reasoning": "hmm", "text": "4", "usage": {"inputTokens": 3, "outputTokens": 1}}]}),
    );
    let out = weft(&[
        "llm",
        "--json",
        "--model",
        &format!("scripted:{}", path.display()),
        "2+2?",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let turn: Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in ["messages", "response", "toolExecutions", "usage", "cycles"] {
        assert!(turn.get(key).is_some(), "{key} missing: {turn}");
    }
    assert_eq!(turn["response"]["content"][1]["text"], "4");
    assert_eq!(turn["usage"]["totalTokens"], 4);
}

#[test]
fn stream_prints_deltas_and_ends_with_a_newline() {
    let path = script(
        "stream.json",
        &json!({"responses": [{"text": "one two three"}]}),
    );
    let out = weft(&[
        "llm",
        "--stream",
        "--model",
        &format!("scripted:{}", path.display()),
        "count",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "one two three\n");
}

#[test]
fn provider_errors_exit_1_with_the_code_on_stderr() {
    let path = script(
        "err.json",
        &json!({"responses": [{"error": {"code": "RATE_LIMITED", "message": "slow down"}}]}),
    );
    let out = weft(&[
        "llm",
        "--model",
        &format!("scripted:{}", path.display()),
        "hi",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("RATE_LIMITED") && stderr.contains("slow down"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn usage_errors_exit_2() {
    let out = weft(&["llm", "--model", "nonsense", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("PROVIDER:MODEL"),
        "{}",
        text(&out.stderr)
    );
    let out = weft(&["llm", "--model", "nosuch:model", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("known providers"));
    let out = weft(&["llm", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    let out = weft(&["llm", "--model", "scripted:/definitely/not/here.json", "hi"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a missing script is reported by the provider"
    );
    assert!(text(&out.stderr).contains("cannot read script"));
}

#[test]
fn missing_api_key_names_the_variable() {
    let out = weft(&[
        "llm",
        "--model",
        "openai:gpt-4o-mini",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "hi",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("AUTHENTICATION_FAILED") && stderr.contains("OPENAI_API_KEY"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_compatible_server_with_base_url() {
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Bonjour\"},\"finish_reason\":null}]}\n\n\
                data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}\n\n\
                data: [DONE]\n\n";
    let server = ReplayServer::start(vec![Reply::sse(body, 9)]).await;
    let url = format!("{}/v1", server.url());
    let out = tokio::task::spawn_blocking(move || {
        weft(&[
            "llm",
            "--stream",
            "--model",
            "openai-compatible:tiny",
            "--base-url",
            &url,
            "--system",
            "Be French.",
            "--param",
            "temperature=0.2",
            "Hello",
        ])
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Bonjour\n");
    let request = server.received()[0].json();
    assert_eq!(request["model"], "tiny");
    assert_eq!(request["temperature"], 0.2);
    assert_eq!(
        request["messages"][0],
        json!({"role": "system", "content": "Be French."})
    );
    assert_eq!(request["stream"], true);
}

#[test]
fn help_teaches_model_references() {
    let out = weft(&["llm", "--help"]);
    let help = text(&out.stdout);
    assert!(
        help.contains("openai-compatible:MODEL") && help.contains("scripted:PATH"),
        "{help}"
    );
    let out = weft(&["--help"]);
    assert!(text(&out.stdout).contains("Exit codes"));
}
