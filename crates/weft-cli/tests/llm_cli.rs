//! `weft llm` and `weft embed` end to end, as subprocesses: output, `--json`, `--stream`,
//! `--stream --json`, `--header`, `--schema`, tool calls without tools, exit codes; against
//! scripted models and the local replay server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};
use weft_testkit::{ReplayServer, Reply, weft_fixture};

fn weft(args: &[&str]) -> Output {
    weft_with_key(args, None)
}

/// `weft ARGS` with a fake key for `(VARIABLE, value)` when given, and no real key either way.
fn weft_with_key(args: &[&str], key: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command.args(args);
    for variable in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "WEFT_OPENAI_COMPATIBLE_BASE_URL",
    ] {
        command.env_remove(variable);
    }
    if let Some(variable) = key {
        command.env(variable, "test-key-0123456789");
    }
    command.output().expect("run weft")
}

/// Runs `weft` off the async runtime (the replay server lives on it).
async fn weft_async(args: Vec<String>, key: &'static str) -> Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        weft_with_key(&args, Some(key))
    })
    .await
    .unwrap()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// The JSON lines of a `--stream --json` output.
fn json_lines(out: &Output) -> Vec<Value> {
    text(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
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
        Some(2),
        "a missing script is a definition error (issue 17 item 1)"
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

#[test]
fn stream_json_prints_each_event_then_the_turn() {
    let path = script(
        "stream-json.json",
        &json!({"responses": [{"text": "one two"}]}),
    );
    let model = format!("scripted:{}", path.display());
    let out = weft(&["llm", "--stream", "--json", "--model", &model, "count"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines = json_lines(&out);
    assert!(lines.len() >= 4, "{lines:?}");
    assert_eq!(lines[0]["type"], "message_start");
    let deltas: String = lines
        .iter()
        .filter(|l| l["type"] == "text_delta")
        .map(|l| l["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "one two");
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "turn");
    assert_eq!(last["turn"]["response"]["content"][0]["text"], "one two");
    assert_eq!(lines[lines.len() - 2]["type"], "message_stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_without_tools_are_printed_not_looped() {
    // Chat Completions, not streamed: the whole turn.
    let body: Value = serde_json::from_str(&weft_fixture("openai-chat-tool-call.json")).unwrap();
    let server = ReplayServer::start(vec![Reply::json(200, &body)]).await;
    let url = format!("{}/openai/v1", server.url());
    let args = [
        "llm",
        "--json",
        "--model",
        "openai:llama-3.3-70b-versatile",
        "--base-url",
        &url,
        "Weather in Paris?",
    ];
    let out = weft_async(strings(&args), "OPENAI_API_KEY").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let turn: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(turn["cycles"], 1);
    assert_eq!(turn["response"]["toolCalls"][0]["toolName"], "get_weather");
    assert_eq!(
        turn["response"]["toolCalls"][0]["arguments"],
        json!({"location": "Paris"})
    );
    assert_eq!(server.received().len(), 1, "one paid request, not ten");

    // Anthropic and Gemini 3 (streamed arguments), streamed: events, then the turn.
    for (reference, path, fixture, key, name) in [
        (
            "anthropic:claude-sonnet-4-5",
            "/v1",
            "anthropic-stream-tool-use.sse",
            "ANTHROPIC_API_KEY",
            "get_weather",
        ),
        (
            "google:gemini-3-pro-preview",
            "/v1beta",
            "gemini-3-stream-function-call-arguments.sse",
            "GEMINI_API_KEY",
            "plan_trip",
        ),
    ] {
        let server = ReplayServer::start(vec![Reply::sse(&weft_fixture(fixture), 40)]).await;
        let url = format!("{}{path}", server.url());
        let args = [
            "llm",
            "--stream",
            "--json",
            "--model",
            reference,
            "--base-url",
            &url,
            "Go",
        ];
        let out = weft_async(strings(&args), key).await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{reference}: {}",
            text(&out.stderr)
        );
        let lines = json_lines(&out);
        assert!(
            lines.iter().any(|l| l["type"] == "tool_call_delta"),
            "{reference}"
        );
        assert!(
            !lines.iter().any(|l| l["type"] == "tool_execution_start"),
            "{reference}"
        );
        let turn = &lines.last().unwrap()["turn"];
        assert_eq!(turn["cycles"], 1, "{reference}");
        let calls = turn["response"]["toolCalls"].as_array().unwrap();
        assert!(
            calls.iter().any(|c| c["toolName"] == name),
            "{reference}: {calls:?}"
        );
        assert_eq!(server.received().len(), 1, "{reference}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_and_schema_reach_the_request_and_the_data_is_printed() {
    let answer = json!({"city": "Paris", "celsius": 18});
    let reply = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": answer.to_string()}], "stop_reason": "end_turn",
        "stop_sequence": null, "usage": {"input_tokens": 20, "output_tokens": 9}});
    let server = ReplayServer::start(vec![Reply::json(200, &reply)]).await;
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"},
        "celsius": {"type": "integer"}}, "required": ["city", "celsius"], "additionalProperties": false});
    let schema_path = script("weather.schema.json", &schema);
    let url = format!("{}/v1", server.url());
    let args = [
        "llm",
        "--model",
        "anthropic:claude-sonnet-4-5",
        "--base-url",
        &url,
        "--header",
        "anthropic-beta:context-1m-2025-08-07",
        "--header",
        "X-Request-Tag: cli test",
        "--schema",
        schema_path.to_str().unwrap(),
        "Weather in Paris as JSON",
    ];
    let out = weft_async(strings(&args), "ANTHROPIC_API_KEY").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, answer, "the parsed data is what is printed");
    let request = &server.received()[0];
    assert_eq!(
        request.header("anthropic-beta"),
        Some("context-1m-2025-08-07")
    );
    assert_eq!(request.header("x-request-tag"), Some("cli test"));
    assert_eq!(request.json()["output_config"]["format"]["schema"], schema);

    // --json carries it as the turn's data.
    let server = ReplayServer::start(vec![Reply::json(200, &reply)]).await;
    let url = format!("{}/v1", server.url());
    let mut json_args = args.to_vec();
    json_args[4] = &url;
    json_args.insert(1, "--json");
    let out = weft_async(strings(&json_args), "ANTHROPIC_API_KEY").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let turn: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(turn["data"], answer);
}

#[test]
fn bad_headers_and_schemas_are_usage_errors() {
    let path = script("h.json", &json!({"responses": [{"text": "x"}]}));
    let model = format!("scripted:{}", path.display());
    let out = weft(&["llm", "--model", &model, "--header", "no-colon", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("NAME:VALUE"),
        "{}",
        text(&out.stderr)
    );
    let out = weft(&[
        "llm",
        "--model",
        &model,
        "--schema",
        "/definitely/not/here.json",
        "hi",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot read the schema"));
    let not_json = script("not-json.schema", &json!("x"));
    std::fs::write(&not_json, "{").unwrap();
    let out = weft(&[
        "llm",
        "--model",
        &model,
        "--schema",
        not_json.to_str().unwrap(),
        "hi",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embed_prints_the_vectors_as_json() {
    let reply = json!({"object": "list", "model": "text-embedding-3-small",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5, 1.0]},
                 {"object": "embedding", "index": 1, "embedding": [0.0, 0.5, -1.0]}],
        "usage": {"prompt_tokens": 4, "total_tokens": 4}});
    let server = ReplayServer::start(vec![Reply::json(200, &reply)]).await;
    let url = format!("{}/v1", server.url());
    let args = [
        "embed",
        "--model",
        "openai:text-embedding-3-small",
        "--base-url",
        &url,
        "--param",
        "dimensions=3",
        "--header",
        "X-Team:search",
        "first text",
        "second text",
    ];
    let out = weft_async(strings(&args), "OPENAI_API_KEY").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["embeddings"][0]["vector"], json!([0.25, -0.5, 1.0]));
    assert_eq!(result["embeddings"][1]["index"], 1);
    assert_eq!(result["embeddings"][1]["dimensions"], 3);
    assert_eq!(result["usage"]["totalTokens"], 4);
    let request = &server.received()[0];
    assert!(request.path.ends_with("/v1/embeddings"), "{}", request.path);
    assert_eq!(request.header("x-team"), Some("search"));
    let body = request.json();
    assert_eq!(body["input"], json!(["first text", "second text"]));
    assert_eq!(body["model"], "text-embedding-3-small");
    assert_eq!(body["dimensions"], 3);

    // A provider error exits 1 with its code.
    let error = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
        "code": "invalid_api_key"}});
    let server = ReplayServer::start(vec![Reply::json(401, &error)]).await;
    let url = format!("{}/v1", server.url());
    let args = [
        "embed",
        "--model",
        "openai:text-embedding-3-small",
        "--base-url",
        &url,
        "x",
    ];
    let out = weft_async(strings(&args), "OPENAI_API_KEY").await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("AUTHENTICATION_FAILED"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn embed_usage_errors_exit_2() {
    let out = weft(&["embed", "--model", "nonsense", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let out = weft(&["embed", "--model", "openai:text-embedding-3-small"]);
    assert_eq!(out.status.code(), Some(2), "no text");
    let out = weft(&["embed", "--model", "openai:m", "--header", "bad", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let out = weft(&["embed", "--model", "anthropic:claude-sonnet-4-5", "x"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "no embedding handler: {}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("no embedding handler"));
}
