//! The `openai-compatible:` (and `openai:`) Chat Completions adapter over real HTTP against a
//! local server replaying recorded exchanges (`testdata/fixtures/…/test_openai/`) and crafted
//! failures. Request bodies are compared with the recorded ones field by field.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use weft_provider::{
    ContentBlock, ErrorCode, LinearBackoff, LlmOptions, Message, MessageOptions, NoRetry,
    ProviderConfig, ProviderRegistry, StreamEventType, Tool, ToolResult, ToolResultMessage,
    ToolUseStrategy, UserMessage, llm,
};
use weft_testkit::{ReplayServer, Reply, cassette_path, load_cassette};

fn options(server: &ReplayServer, model: &str) -> LlmOptions {
    let reference = ProviderRegistry::with_builtins()
        .resolve(&format!("openai-compatible:{model}"))
        .unwrap();
    LlmOptions::new(reference).config(
        ProviderConfig::default()
            .base_url(format!("{}/v1", server.url()))
            .api_key("sk-test-key-123456")
            .retry_strategy(LinearBackoff {
                max_attempts: 3,
                delay: Duration::from_millis(5),
            }),
    )
}

fn tool(name: &str, description: &str, parameters: Value, answer: &'static str) -> Tool {
    Tool::new(
        name,
        description,
        parameters,
        move |_args: Value, _ctx| async move { Ok(json!(answer)) },
    )
}

/// Removes `"content": null` from assistant messages (pydantic's streaming path sends it,
/// its non-streaming path omits it; both mean "no text").
fn without_null_content(mut body: Value) -> Value {
    if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
        for m in messages {
            if let Some(obj) = m.as_object_mut()
                && obj.get("content") == Some(&Value::Null)
            {
                obj.remove("content");
            }
        }
    }
    body
}

#[tokio::test]
async fn tool_output_exchange_matches_recorded_requests() {
    let recorded =
        load_cassette(&cassette_path("test_openai/test_openai_tool_output.yaml")).unwrap();
    let server = ReplayServer::start(recorded.iter().map(|i| i.reply(64)).collect()).await;
    let instance = llm(options(&server, "gpt-4o")
        .tool(tool(
            "get_user_country",
            "",
            json!({"additionalProperties": false, "properties": {}, "type": "object"}),
            "Mexico",
        ))
        .tool(tool(
            "final_result",
            "The final response which ends this conversation",
            json!({"properties": {"city": {"type": "string"}, "country": {"type": "string"}},
                   "required": ["city", "country"], "type": "object"}),
            "unused",
        ))
        .param("n", json!(1))
        .param("tool_choice", json!("required"))
        .tool_strategy(ToolUseStrategy::default().max_iterations(Some(0))))
    .unwrap();

    // Cycle 1: the model asks for get_user_country; with maxIterations 0 it is returned to us.
    let first = instance
        .generate(&[], "What is the largest city in the user country?")
        .await
        .unwrap();
    assert_eq!(first.response.tool_calls.len(), 1);
    assert_eq!(
        first.response.tool_calls[0].tool_call_id,
        "call_iXFttys57ap0o16JSlC8yhYo"
    );
    assert_eq!(first.response.tool_calls[0].tool_name, "get_user_country");
    assert_eq!(first.response.tool_calls[0].arguments, json!({}));
    assert_eq!(
        (first.usage.input_tokens, first.usage.output_tokens),
        (68, 12)
    );
    let meta = first
        .response
        .provider_metadata("openai-compatible")
        .unwrap();
    assert_eq!(meta["system_fingerprint"], "fp_f5bdcc3276");
    assert_eq!(meta["finish_reason"], "tool_calls");

    // Cycle 2: we answer the call ourselves.
    let mut history: Vec<Message> = first.messages().cloned().collect();
    history.push(Message::ToolResult(ToolResultMessage::new(vec![
        ToolResult {
            tool_call_id: "call_iXFttys57ap0o16JSlC8yhYo".into(),
            result: json!("Mexico"),
            is_error: false,
        },
    ])));
    let second = instance.generate(&history, ()).await.unwrap();
    assert_eq!(second.response.tool_calls[0].tool_name, "final_result");
    assert_eq!(
        second.response.tool_calls[0].arguments,
        json!({"city": "Mexico City", "country": "Mexico"})
    );

    let sent = server.received();
    assert_eq!(sent.len(), 2);
    for (request, interaction) in sent.iter().zip(&recorded) {
        assert_eq!(request.path, "/v1/chat/completions");
        assert_eq!(
            request.header("authorization"),
            Some("Bearer sk-test-key-123456")
        );
        assert_eq!(request.json(), interaction.request_body);
    }
}

#[tokio::test]
async fn multi_turn_history_and_automatic_tool_loop_match_recorded_requests() {
    let recorded = load_cassette(&cassette_path(
        "test_openai/test_multiple_agent_tool_calls.yaml",
    ))
    .unwrap();
    // Interactions 3 and 4 are Chat Completions (1 and 2 are Gemini's native API).
    let chat: Vec<_> = recorded
        .iter()
        .filter(|i| i.uri.ends_with("/chat/completions"))
        .collect();
    assert_eq!(chat.len(), 2);
    let server = ReplayServer::start(chat.iter().map(|i| i.reply(64)).collect()).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let get_capital = Tool::new(
        "get_capital",
        "Get the capital of a country.",
        json!({"additionalProperties": false,
               "properties": {"country": {"description": "The country name.", "type": "string"}},
               "required": ["country"], "type": "object"}),
        move |args: Value, _ctx| {
            seen.fetch_add(1, Ordering::SeqCst);
            async move {
                assert_eq!(args, json!({"country": "England"}));
                Ok(json!("London"))
            }
        },
    );
    let instance = llm(options(&server, "gpt-4o-mini")
        .tool(get_capital)
        .param("n", json!(1))
        .param("tool_choice", json!("auto")))
    .unwrap();
    // The earlier run, with pydantic's own tool-call id.
    let earlier = serde_json::from_value::<Vec<Message>>(json!([
        {"type": "user", "id": "u1", "timestamp": "2025-03-24T18:00:00Z",
         "content": [{"type": "text", "text": "What is the capital of France?"}]},
        {"type": "assistant", "id": "a1", "timestamp": "2025-03-24T18:00:01Z", "content": [],
         "toolCalls": [{"toolCallId": "pyd_ai_504f8147f83f44f3a5f14d87bfd01bda", "toolName": "get_capital",
                        "arguments": {"country": "France"}}]},
        {"type": "tool_result", "id": "t1", "timestamp": "2025-03-24T18:00:02Z",
         "results": [{"toolCallId": "pyd_ai_504f8147f83f44f3a5f14d87bfd01bda", "result": "Paris"}]},
        {"type": "assistant", "id": "a2", "timestamp": "2025-03-24T18:00:03Z",
         "content": [{"type": "text", "text": "The capital of France is Paris.\n"}]}
    ]))
    .unwrap();
    let snapshot = earlier.clone();
    let turn = instance
        .generate(&earlier, "What is the capital of England?")
        .await
        .unwrap();
    assert_eq!(earlier, snapshot, "history must not be mutated");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(turn.text(), "The capital of England is London.");
    assert_eq!(turn.cycles, 2);
    assert_eq!(turn.messages.len(), 4);
    assert!(turn.messages[0].is_user());
    assert!(turn.messages[1].is_assistant());
    assert!(turn.messages[2].is_tool_result());
    assert!(turn.messages[3].is_assistant());
    assert_eq!(
        (
            turn.usage.input_tokens,
            turn.usage.output_tokens,
            turn.usage.total_tokens
        ),
        (233, 25, 258)
    );
    assert_eq!(turn.usage.cycles.as_ref().map(Vec::len), Some(2));
    assert_eq!(
        turn.tool_executions[0].tool_call_id,
        "call_SkEQ3ZGSJC8m6AvaIGNuuKdm"
    );

    let sent = server.received();
    // pydantic keeps `"arguments": "{\"country\":\"France\"}"` compact, as we do.
    for (request, interaction) in sent.iter().zip(&chat) {
        assert_eq!(request.json(), interaction.request_body);
    }
}

#[tokio::test]
async fn tool_calls_without_ids_get_unique_ids_and_thought_signatures_round_trip() {
    let recorded = load_cassette(&cassette_path(
        "test_openai/test_compatible_api_with_tool_calls_without_id.yaml",
    ))
    .unwrap();
    let server = ReplayServer::start(recorded.iter().map(|i| i.reply(64)).collect()).await;
    let instance = llm(options(&server, "gemini-2.5-pro-preview-05-06")
        .tool(tool(
            "get_current_time",
            "Get the current time.",
            json!({"additionalProperties": false, "properties": {}, "type": "object"}),
            "Noon",
        ))
        .param("tool_choice", json!("auto")))
    .unwrap();
    let turn = instance
        .generate(&[], "What is the current time?")
        .await
        .unwrap();
    assert_eq!(turn.text(), "The current time is Noon.");
    let call = &turn.tool_executions[0];
    assert!(
        call.tool_call_id.starts_with("call_") && call.tool_call_id.len() > 10,
        "{}",
        call.tool_call_id
    );

    let sent = server.received();
    let second = sent[1].json();
    let assistant = &second["messages"][1];
    let sent_id = assistant["tool_calls"][0]["id"].as_str().unwrap();
    assert_eq!(sent_id, call.tool_call_id);
    assert_eq!(second["messages"][2]["tool_call_id"], sent_id);
    // The vendor's thought signature (kept in metadata) is sent back.
    assert_eq!(
        assistant["extra_content"]["google"]["thought_signature"],
        recorded[0].response_json.as_ref().unwrap()["choices"][0]["message"]["extra_content"]["google"]
            ["thought_signature"]
    );
    // Apart from our id and the echoed extra_content, the request is the recorded one.
    let mut normalized = second.clone();
    normalized["messages"][1]
        .as_object_mut()
        .unwrap()
        .remove("extra_content");
    let text = normalized
        .to_string()
        .replace(sent_id, "pyd_ai_cee885c699414386a7e14b7ec43cadbc");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        recorded[1].request_body
    );
    assert_eq!(sent[0].json(), recorded[0].request_body);
}

#[tokio::test]
async fn reasoning_model_request_and_usage() {
    let recorded = load_cassette(&cassette_path(
        "test_openai/test_reasoning_model_with_temperature.yaml",
    ))
    .unwrap();
    let server = ReplayServer::start(vec![recorded[0].reply(64)]).await;
    let instance = llm(options(&server, "o3-mini")).unwrap();
    let turn = instance
        .generate(&[], "What is the capital of Mexico?")
        .await
        .unwrap();
    assert!(
        turn.text()
            .starts_with("The capital of Mexico is Mexico City.")
    );
    assert_eq!(server.received()[0].json(), recorded[0].request_body);
    let meta = turn
        .response
        .provider_metadata("openai-compatible")
        .unwrap();
    assert_eq!(
        meta["usage"]["completion_tokens_details"]["reasoning_tokens"],
        192
    );
    assert_eq!(turn.usage.output_tokens, 238);
}

#[tokio::test]
async fn streaming_with_tools_matches_recording_and_emits_ordered_events() {
    let recorded = load_cassette(&cassette_path(
        "test_openai/test_run_stream_sync_streams_real_model.yaml",
    ))
    .unwrap();
    // Small chunks: SSE lines are split across reads.
    let server = ReplayServer::start(recorded.iter().map(|i| i.reply(7)).collect()).await;
    let mut strict = serde_json::Map::new();
    strict.insert("openai".into(), json!({"strict": true}));
    let get_capital = tool(
        "get_capital",
        "",
        json!({"additionalProperties": false, "properties": {"country": {"type": "string"}},
               "required": ["country"], "type": "object"}),
        "London",
    )
    .with_metadata(strict);
    let instance = llm(options(&server, "gpt-4o-mini")
        .tool(get_capital)
        .param("tool_choice", json!("auto")))
    .unwrap();
    let mut stream = instance
        .stream(
            &[],
            "What is the capital of the UK? Use the tool, then answer.",
        )
        .unwrap();
    let mut types = Vec::new();
    let mut text = String::new();
    let mut arguments = String::new();
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        match event.event_type {
            StreamEventType::TextDelta => {
                text.push_str(event.delta.text.as_deref().unwrap_or_default())
            }
            StreamEventType::ToolCallDelta => {
                arguments.push_str(event.delta.arguments_json.as_deref().unwrap_or_default());
            }
            _ => {}
        }
        types.push(event.event_type);
    }
    let turn = stream.turn().await.unwrap();
    assert_eq!(turn.text(), text);
    assert_eq!(arguments, r#"{"country":"UK"}"#);
    assert_eq!(turn.tool_executions[0].result, json!("London"));
    assert_eq!(turn.cycles, 2);
    assert!(turn.usage.input_tokens > 0 && turn.usage.output_tokens > 0);
    // §9.6: message_start … blocks … message_stop, tool execution, next message.
    assert_eq!(types.first(), Some(&StreamEventType::MessageStart));
    assert_eq!(types.last(), Some(&StreamEventType::MessageStop));
    let start = types
        .iter()
        .position(|t| *t == StreamEventType::ToolExecutionStart)
        .unwrap();
    assert_eq!(types[start - 1], StreamEventType::MessageStop);
    assert_eq!(types[start + 1], StreamEventType::ToolExecutionEnd);
    assert_eq!(types[start + 2], StreamEventType::MessageStart);
    let sent = server.received();
    for (request, interaction) in sent.iter().zip(&recorded) {
        assert_eq!(
            without_null_content(request.json()),
            without_null_content(interaction.request_body.clone())
        );
        assert_eq!(request.header("accept"), Some("text/event-stream"));
    }
}

async fn error_for(reply: Reply) -> (weft_provider::UppError, usize) {
    let server = ReplayServer::start(vec![reply.clone(), reply.clone(), reply]).await;
    let instance = llm(options(&server, "m")).unwrap();
    let error = instance.generate(&[], "hi").await.unwrap_err();
    (error, server.received().len())
}

#[tokio::test]
async fn http_errors_map_to_codes_and_retry_only_when_they_should() {
    let cases = [
        (
            Reply::json(
                400,
                &json!({"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 200000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}),
            ),
            ErrorCode::ContextLengthExceeded,
            1,
        ),
        (
            Reply::json(
                400,
                &json!({"error": {"message": "bad field", "type": "invalid_request_error"}}),
            ),
            ErrorCode::InvalidRequest,
            1,
        ),
        (
            Reply::json(
                401,
                &json!({"error": {"message": "Incorrect API key provided: sk-test-key-123456", "code": "invalid_api_key"}}),
            ),
            ErrorCode::AuthenticationFailed,
            1,
        ),
        (
            Reply::json(
                404,
                &json!({"error": {"message": "The model `m` does not exist"}}),
            ),
            ErrorCode::ModelNotFound,
            1,
        ),
        (
            Reply::json(500, &json!({"error": {"message": "boom"}})),
            ErrorCode::ProviderError,
            3,
        ),
        (
            Reply::raw(503, "text/html", "<html>unavailable</html>"),
            ErrorCode::ProviderError,
            3,
        ),
        (
            Reply::json(429, &json!({"error": {"message": "slow down"}})),
            ErrorCode::RateLimited,
            3,
        ),
    ];
    for (reply, code, attempts) in cases {
        let status = reply.status;
        let (error, received) = error_for(reply).await;
        assert_eq!(error.code, code, "status {status}: {error}");
        assert_eq!(error.status_code, Some(status));
        assert_eq!(error.provider, "openai-compatible");
        assert!(error.cause.is_some());
        assert!(
            !error.to_string().contains("sk-test-key"),
            "key leaked: {error}"
        );
        assert_eq!(received, attempts, "status {status}");
    }
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_retried_then_succeeds() {
    let ok = json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "fine"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
    let server = ReplayServer::start(vec![
        Reply::json(429, &json!({"error": {"message": "rate limited"}}))
            .header("retry-after-ms", "20"),
        Reply::json(429, &json!({"error": {"message": "rate limited"}})).header("retry-after", "0"),
        Reply::json(200, &ok),
    ])
    .await;
    let mut opts = options(&server, "m");
    opts.config.retry_strategy = None; // the default strategy honours Retry-After
    let turn = llm(opts).unwrap().generate(&[], "hi").await.unwrap();
    assert_eq!(turn.text(), "fine");
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn no_retry_strategy_gives_up_at_once() {
    let server = ReplayServer::start(vec![Reply::json(503, &json!({}))]).await;
    let mut opts = options(&server, "m");
    opts.config.retry_strategy = Some(Arc::new(NoRetry));
    let error = llm(opts).unwrap().generate(&[], "hi").await.unwrap_err();
    assert_eq!(error.code, ErrorCode::ProviderError);
    assert_eq!(server.received().len(), 1);
}

async fn stream_error(body: &str) -> weft_provider::UppError {
    let server = ReplayServer::start(vec![Reply::sse(body, 5)]).await;
    let instance = llm(options(&server, "m")).unwrap();
    let stream = instance.stream(&[], "hi").unwrap();
    stream.turn().await.unwrap_err()
}

const CHUNK: &str =
    r#"data: {"id":"x","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}"#;

#[tokio::test]
async fn streams_cut_or_garbled_fail_cleanly() {
    // Cut in the middle of an event.
    let error = stream_error(&format!("{CHUNK}\n\ndata: {{\"id\":\"x\",\"choi")).await;
    assert_eq!(error.code, ErrorCode::InvalidResponse, "{error}");
    // Ends after complete events but without finish_reason or [DONE].
    let error = stream_error(&format!("{CHUNK}\n\n")).await;
    assert_eq!(error.code, ErrorCode::InvalidResponse, "{error}");
    assert!(error.message.contains("ended before"), "{error}");
    // A chunk that is not JSON.
    let error = stream_error(&format!("{CHUNK}\n\ndata: {{not json}}\n\n")).await;
    assert_eq!(error.code, ErrorCode::InvalidResponse);
    assert!(error.message.contains("not valid JSON"));
    // An error object inside the stream.
    let error = stream_error(&format!(
        "{CHUNK}\n\ndata: {{\"error\":{{\"message\":\"Rate limit reached\",\"type\":\"rate_limit_error\"}}}}\n\n"
    ))
    .await;
    assert_eq!(error.code, ErrorCode::RateLimited);
}

#[tokio::test]
async fn stream_ending_with_done_but_no_finish_reason_is_complete() {
    let server =
        ReplayServer::start(vec![Reply::sse(&format!("{CHUNK}\n\ndata: [DONE]\n\n"), 3)]).await;
    let turn = llm(options(&server, "m"))
        .unwrap()
        .stream(&[], "hi")
        .unwrap()
        .turn()
        .await
        .unwrap();
    assert_eq!(turn.text(), "Hel");
}

#[tokio::test]
async fn invalid_json_body_and_empty_choices_are_invalid_response() {
    let (error, _) = error_for(Reply::raw(200, "application/json", "{\"choices\": [")).await;
    assert_eq!(error.code, ErrorCode::InvalidResponse);
    let (error, _) = error_for(Reply::json(200, &json!({"choices": []}))).await;
    assert_eq!(error.code, ErrorCode::InvalidResponse);
    // Argument text that is not JSON is the model's mistake, not a broken response: the
    // call comes back with its text kept (the tool round answers it with an error result).
    let server = ReplayServer::start(vec![Reply::json(
        200,
        &json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
        "function": {"name": "f", "arguments": "{broken"}}]}}]}),
    )])
    .await;
    let turn = llm(options(&server, "m"))
        .unwrap()
        .generate(&[], "hi")
        .await
        .unwrap();
    assert_eq!(turn.response.tool_calls[0].arguments, json!("{broken"));
}

#[tokio::test]
async fn timeout_and_connection_refused() {
    let slow = Reply::json(200, &json!({})).delay(Duration::from_millis(500));
    let server = ReplayServer::start(vec![slow]).await;
    let mut opts = options(&server, "m");
    opts.config.timeout = Some(Duration::from_millis(50));
    opts.config.retry_strategy = Some(Arc::new(NoRetry));
    let error = llm(opts).unwrap().generate(&[], "hi").await.unwrap_err();
    assert_eq!(error.code, ErrorCode::Timeout, "{error}");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let reference = ProviderRegistry::with_builtins()
        .resolve("openai-compatible:m")
        .unwrap();
    let instance = llm(LlmOptions::new(reference).config(
        ProviderConfig::default()
            .base_url(format!("http://127.0.0.1:{port}/v1"))
            .retry_strategy(NoRetry),
    ))
    .unwrap();
    let error = instance.generate(&[], "hi").await.unwrap_err();
    assert_eq!(error.code, ErrorCode::NetworkError, "{error}");
}

#[tokio::test]
async fn abort_during_a_stream_is_cancelled() {
    let body = format!("{CHUNK}\n\n{CHUNK}\n\n{CHUNK}\n\ndata: [DONE]\n\n");
    let server =
        ReplayServer::start(vec![Reply::sse(&body, 4).delay(Duration::from_millis(30))]).await;
    let instance = llm(options(&server, "m")).unwrap();
    let mut stream = instance.stream(&[], "hi").unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first.event_type, StreamEventType::MessageStart);
    stream.abort();
    let error = stream.turn().await.unwrap_err();
    assert_eq!(error.code, ErrorCode::Cancelled);
}

#[tokio::test]
async fn custom_headers_override_required_ones_and_missing_base_url_is_explained() {
    let ok = json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]});
    let server = ReplayServer::start(vec![Reply::json(200, &ok)]).await;
    let mut opts = options(&server, "m");
    opts.config = opts
        .config
        .header("Authorization", "Bearer from-header")
        .header("X-Title", "weft tests");
    llm(opts).unwrap().generate(&[], "hi").await.unwrap();
    let request = &server.received()[0];
    assert_eq!(request.header("authorization"), Some("Bearer from-header"));
    assert_eq!(request.header("x-title"), Some("weft tests"));

    // Without a base URL (and without the environment variable), the error says what to do.
    if std::env::var("WEFT_OPENAI_COMPATIBLE_BASE_URL").is_err() {
        let reference = ProviderRegistry::with_builtins()
            .resolve("openai-compatible:m")
            .unwrap();
        let error = llm(LlmOptions::new(reference))
            .unwrap()
            .generate(&[], "hi")
            .await
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidRequest);
        assert!(error.message.contains("--base-url"), "{error}");
    }
}

#[tokio::test]
async fn multimodal_user_content_is_encoded_as_parts() {
    let ok = json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "a cat"}}]});
    let server = ReplayServer::start(vec![Reply::json(200, &ok)]).await;
    let instance = llm(options(&server, "m").system("You describe images.")).unwrap();
    let image = weft_provider::Image::from_bytes(vec![1, 2, 3], "image/png").to_block();
    let message = UserMessage::with_options(
        vec![ContentBlock::text("What is this?"), image],
        MessageOptions::default(),
    );
    instance.generate(&[], message).await.unwrap();
    let body = server.received()[0].json();
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "You describe images."})
    );
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "text", "text": "What is this?"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,AQID"}}])
    );
}
