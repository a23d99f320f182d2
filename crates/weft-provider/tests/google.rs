//! The `google:` adapter over real HTTP against the local replay server: every recorded
//! exchange of `cassettes/test_google/` (request bodies compared field by field, decoded
//! responses asserted, streaming and not), thought signatures carried across turns, crafted
//! failures (including a 429 whose `RetryInfo` is honoured) and safety blocks.
//!
//! Pydantic-specific request fields are passed as `params` (`generationConfig`,
//! `toolConfig`). Differences normalized before the comparison (and why):
//! - function declarations: Weft sends `parametersJsonSchema` (full JSON Schema); newer
//!   recordings spell it `parameters_json_schema` (the proto field name, which the API also
//!   accepts), older ones used the OpenAPI-subset `parameters` with upper-case types; the
//!   latter are compared by name and description only;
//! - `thoughtSignature`: Weft sends the string it received (standard base64); pydantic
//!   re-encodes the same bytes as URL-safe base64, so the recording is mapped back;
//! - function call / response `id`: the recordings carry pydantic's own ids; Weft's are
//!   checked to pair up instead;
//! - `systemInstruction.role: "user"` and an empty `generationConfig: {}` that pydantic adds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adapter_support;

use std::time::Duration;

use adapter_support::*;
use serde_json::{Value, json};
use weft_provider::adapters::google;
use weft_provider::{
    ErrorCode, LlmOptions, LlmStreamPart, Message, ProviderRegistry, RetryAfterStrategy,
    StreamEvent, StreamEventType, Tool, llm,
};
use weft_testkit::{ReplayServer, Reply, weft_fixture};

const DIR: &str = "test_google";

fn walk(value: &mut Value, f: &mut dyn FnMut(&mut serde_json::Map<String, Value>)) {
    match value {
        Value::Object(map) => {
            f(map);
            for child in map.values_mut() {
                walk(child, f);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| walk(i, f)),
        _ => {}
    }
}

/// The recording, normalized as the module docs say.
fn recorded(body: &Value) -> Value {
    let mut body = body.clone();
    walk(&mut body, &mut |map| {
        if let Some(schema) = map.remove("parameters_json_schema") {
            map.insert("parametersJsonSchema".into(), schema);
        }
        if let Some(Value::String(signature)) = map.get_mut("thoughtSignature") {
            *signature = signature.replace('-', "+").replace('_', "/");
        }
    });
    if body["generationConfig"] == json!({}) {
        body = strip(body, &["/generationConfig"]);
    }
    without_ids(strip(body, &["/systemInstruction/role"]))
}

/// Checks that every functionResponse id answers a functionCall id, then drops the ids.
fn sent(body: &Value) -> Value {
    let mut body = body.clone();
    let mut calls = Vec::new();
    let mut answers = Vec::new();
    walk(&mut body, &mut |map| {
        if let Some(id) = map.get("functionCall").and_then(|c| c.get("id")) {
            calls.push(id.clone());
        }
        if let Some(id) = map.get("functionResponse").and_then(|c| c.get("id")) {
            answers.push(id.clone());
        }
    });
    assert_eq!(calls, answers, "each function response answers its call");
    without_ids(body)
}

fn without_ids(mut body: Value) -> Value {
    walk(&mut body, &mut |map| {
        for key in ["functionCall", "functionResponse"] {
            if let Some(Value::Object(inner)) = map.get_mut(key) {
                inner.remove("id");
            }
        }
    });
    body
}

/// Tools in the OpenAPI-subset form are compared by name and description.
fn without_tools(body: Value) -> (Value, Vec<(String, String)>) {
    let names = body["tools"][0]
        .get("functionDeclarations")
        .or_else(|| body["tools"][0].get("function_declarations"))
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|d| {
                    (
                        d["name"].as_str().unwrap_or("").to_owned(),
                        d["description"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (strip(body, &["/tools"]), names)
}

fn object_schema() -> Value {
    json!({"additionalProperties": false, "properties": {}, "type": "object"})
}

#[tokio::test]
async fn tool_output_exchange_matches_the_recording() {
    let tape = cassette(&format!("{DIR}/test_google_tool_output.yaml"));
    let server = ReplayServer::start(tape.iter().map(|i| i.reply(4096)).collect()).await;
    let model = bind("google:gemini-2.0-flash");
    let mut call = Call {
        messages: vec![Message::user(
            "What is the largest city in the user country?",
        )],
        params: params(json!({"toolConfig": tape[0].request_body["toolConfig"]})),
        tools: vec![
            tool(
                "get_user_country",
                "",
                json!({"type": "object", "properties": {}}),
            ),
            tool(
                "final_result",
                "The final response which ends this conversation",
                json!({"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
                       "required": ["city", "country"]}),
            ),
        ],
        ..Call::default()
    };
    let first = model
        .complete(call.request(config(&server, "/v1beta")))
        .await
        .unwrap();
    assert_eq!(first.message.tool_calls[0].tool_name, "get_user_country");
    assert!(
        first.message.tool_calls[0]
            .tool_call_id
            .starts_with("call_")
    );
    assert_eq!(first.stop_reason, "tool_use");
    assert_eq!(
        (first.usage.input_tokens, first.usage.output_tokens),
        (33, 5)
    );
    let calls = first.message.tool_calls.clone();
    call.messages.push(Message::Assistant(first.message));
    call.messages.push(results(&calls, &[("Mexico", false)]));
    let second = model
        .complete(call.request(config(&server, "/v1beta")))
        .await
        .unwrap();
    assert_eq!(
        second.message.tool_calls[0].arguments,
        json!({"city": "Mexico City", "country": "Mexico"})
    );
    let received = server.received();
    assert_eq!(
        received[0].path,
        "/v1beta/models/gemini-2.0-flash:generateContent"
    );
    assert_eq!(received[0].header("x-goog-api-key"), Some(KEY));
    for (sent_request, recording) in received.iter().zip(&tape) {
        let (ours, our_tools) = without_tools(sent(&sent_request.json()));
        let (theirs, their_tools) = without_tools(recorded(&recording.request_body));
        assert_same_body(&ours, &theirs);
        assert_eq!(our_tools, their_tools);
    }
}

#[tokio::test]
async fn text_stream_matches_the_recording() {
    let tape = cassette(&format!("{DIR}/test_google_model_stream.yaml"));
    let server = ReplayServer::start(vec![tape[0].reply(77)]).await;
    let model = bind("google:gemini-2.0-flash-exp");
    let call = Call {
        messages: vec![Message::user("What is the capital of France?")],
        system: Some("You are a helpful chatbot.".into()),
        params: params(json!({"generationConfig": {"temperature": 0.0}})),
        ..Call::default()
    };
    let parts = stream_parts(&*model, call.request(config(&server, "/v1beta")))
        .await
        .unwrap();
    let response = check_stream(&parts);
    assert_eq!(
        response.message.text_content(),
        "The capital of France is Paris.\n"
    );
    assert_eq!(response.stop_reason, "end_turn");
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (13, 8)
    );
    let received = &server.received()[0];
    assert_eq!(
        received.path,
        "/v1beta/models/gemini-2.0-flash-exp:streamGenerateContent?alt=sse"
    );
    assert_same_body(&sent(&received.json()), &recorded(&tape[0].request_body));
}

#[tokio::test]
async fn streamed_tool_call_carries_its_thought_signature_back() {
    let tape = cassette(&format!(
        "{DIR}/test_google_streaming_tool_call_thought_signature.yaml"
    ));
    let server = ReplayServer::start(tape.iter().map(|i| i.reply(128)).collect()).await;
    let model = bind("google:gemini-3-pro-preview");
    let mut call = Call {
        messages: vec![Message::user(
            "What is the capital of the user country? Call the tool",
        )],
        params: params(json!({"generationConfig": {"responseModalities": ["TEXT"]}})),
        tools: vec![tool("get_country", "", object_schema())],
        ..Call::default()
    };
    let parts = stream_parts(&*model, call.request(config(&server, "/v1beta")))
        .await
        .unwrap();
    let first = check_stream(&parts);
    let calls = first.message.tool_calls.clone();
    assert_eq!(calls[0].tool_name, "get_country");
    let meta = first.message.provider_metadata("google").unwrap();
    let signature = meta["functionCallSignatures"][&calls[0].tool_call_id]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(signature.starts_with("EpwICpkIAXLI2nxlU6gsWZaZ"));
    assert_eq!(first.usage.output_tokens, 10 + 202);
    call.messages.push(Message::Assistant(first.message));
    call.messages.push(results(&calls, &[("Mexico", false)]));
    let parts = stream_parts(&*model, call.request(config(&server, "/v1beta")))
        .await
        .unwrap();
    let second = check_stream(&parts);
    assert_eq!(
        second.message.text_content(),
        "The capital of Mexico is Mexico City."
    );
    let received = server.received();
    for (sent_request, recording) in received.iter().zip(&tape) {
        assert_same_body(
            &sent(&sent_request.json()),
            &recorded(&recording.request_body),
        );
    }
    assert_eq!(
        received[1].json()["contents"][1]["parts"][0]["thoughtSignature"],
        json!(signature)
    );
}

#[tokio::test]
async fn thought_parts_stream_as_reasoning() {
    let tape = cassette(&format!("{DIR}/test_google_model_thinking_part_iter.yaml"));
    let server = ReplayServer::start(vec![tape[0].reply(256)]).await;
    let model = bind("google:gemini-2.5-pro");
    let call = Call {
        messages: vec![Message::user("How do I cross the street?")],
        system: Some("You are a helpful assistant.".into()),
        params: params(json!({"generationConfig": {"thinkingConfig": {"includeThoughts": true}}})),
        tools: vec![tool(
            "dummy",
            "",
            json!({"type": "object", "properties": {}}),
        )],
        ..Call::default()
    };
    let parts = stream_parts(&*model, call.request(config(&server, "/v1beta")))
        .await
        .unwrap();
    let response = check_stream(&parts);
    let reasoning: Vec<_> = response.message.reasoning().collect();
    assert_eq!(reasoning.len(), 1, "consecutive thought parts join");
    assert!(reasoning[0].text.starts_with("**Clarifying User Goals**"));
    assert!(reasoning[0].text.contains("**Crafting Safe Instructions**"));
    assert!(
        response
            .message
            .text_content()
            .starts_with("This is a great question!")
    );
    let meta = response.message.provider_metadata("google").unwrap();
    assert!(
        meta["textSignatures"]["0"]
            .as_str()
            .unwrap()
            .starts_with("CiIB0e2Kb6Syj1a961Ef")
    );
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (34, 469 + 787)
    );
    let (ours, _) = without_tools(sent(&server.received()[0].json()));
    let (theirs, _) = without_tools(recorded(&tape[0].request_body));
    assert_same_body(&ours, &theirs);
}

#[tokio::test]
async fn tool_retry_with_error_result_and_signatures_matches_the_recording() {
    let tape = cassette(&format!("{DIR}/test_google_model_retry.yaml"));
    let server = ReplayServer::start(tape.iter().map(|i| i.reply(4096)).collect()).await;
    let model = bind("google:gemini-2.5-pro");
    let schema =
        tape[0].request_body["tools"][0]["functionDeclarations"][0]["parameters_json_schema"]
            .clone();
    let mut call = Call {
        messages: vec![Message::user("What is the capital of France?")],
        system: Some("You are a helpful chatbot.".into()),
        params: params(
            json!({"generationConfig": {"responseModalities": ["TEXT"], "temperature": 0.0}}),
        ),
        tools: vec![tool("get_capital", "Get the capital of a country.", schema)],
        ..Call::default()
    };
    let answers = [
        (
            "The country is not supported. Use \"La France\" instead.\n\nFix the errors and try again.",
            true,
        ),
        ("Paris", false),
    ];
    for (answer, is_error) in answers {
        let response = model
            .complete(call.request(config(&server, "/v1beta")))
            .await
            .unwrap();
        let calls = response.message.tool_calls.clone();
        call.messages.push(Message::Assistant(response.message));
        call.messages.push(results(&calls, &[(answer, is_error)]));
    }
    let last = model
        .complete(call.request(config(&server, "/v1beta")))
        .await
        .unwrap();
    assert_eq!(last.message.text_content(), "Paris");
    assert!(last.message.provider_metadata("google").unwrap()["textSignatures"]["0"].is_string());
    let received = server.received();
    assert_eq!(received.len(), 3);
    for (sent_request, recording) in received.iter().zip(&tape) {
        assert_same_body(
            &sent(&sent_request.json()),
            &recorded(&recording.request_body),
        );
    }
}

fn google_error(code: u16, status: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message, "status": status}})
}

fn ok_body(text: &str) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
           "usageMetadata": {"promptTokenCount": 100, "cachedContentTokenCount": 60,
                             "candidatesTokenCount": 2, "thoughtsTokenCount": 3}})
}

#[tokio::test]
async fn http_failures_are_normalized() {
    let mut bad_key = google_error(
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
    );
    bad_key["error"]["details"] =
        json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]);
    let table = [
        (400, bad_key, ErrorCode::AuthenticationFailed),
        (
            403,
            google_error(403, "PERMISSION_DENIED", "denied"),
            ErrorCode::AuthenticationFailed,
        ),
        (
            404,
            google_error(404, "NOT_FOUND", "models/nope is not found"),
            ErrorCode::ModelNotFound,
        ),
        (
            500,
            google_error(500, "INTERNAL", "internal"),
            ErrorCode::ProviderError,
        ),
        (
            400,
            google_error(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            ),
            ErrorCode::ContextLengthExceeded,
        ),
    ];
    for (status, body, expected) in table {
        let server = ReplayServer::start(vec![Reply::json(status, &body)]).await;
        let call = Call {
            messages: vec![Message::user("hi")],
            ..Call::default()
        };
        let error = bind("google:gemini-x")
            .complete(call.request(config_no_retry(&server, "/v1beta")))
            .await
            .unwrap_err();
        assert_eq!(error.code, expected, "{status} {body}");
        assert_eq!(error.provider, "google");
        assert_eq!(error.cause.unwrap(), body);
    }
}

#[tokio::test]
async fn rate_limit_retry_info_is_honoured() {
    let mut limited = google_error(429, "RESOURCE_EXHAUSTED", "quota exceeded");
    limited["error"]["details"] =
        json!([{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.01s"}]);
    let server = ReplayServer::start(vec![
        Reply::json(429, &limited),
        Reply::json(200, &ok_body("done")),
    ])
    .await;
    let call = Call {
        messages: vec![Message::user("hi")],
        ..Call::default()
    };
    // The fallback delay is long: only the RetryInfo delay lets this finish quickly.
    let config =
        config(&server, "/v1beta").retry_strategy(RetryAfterStrategy::new(Duration::from_secs(30)));
    let started = std::time::Instant::now();
    let response = tokio::time::timeout(
        Duration::from_secs(10),
        bind("google:gemini-x").complete(call.request(config)),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(response.message.text_content(), "done");
    assert_eq!(
        (
            response.usage.input_tokens,
            response.usage.cache_read_tokens,
            response.usage.output_tokens
        ),
        (100, 60, 5)
    );
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn stream_failures_and_safety_blocks() {
    let chunk = |v: Value| format!("data: {v}\r\n\r\n");
    let text = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]});
    let error = json!({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}});
    let blocked = json!({"candidates": [{"finishReason": "SAFETY", "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true}]}]});
    let partial = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Some"}]}, "finishReason": "SAFETY"}]});
    let server = ReplayServer::start(vec![
        Reply::sse(&chunk(text.clone()), 20),
        Reply::sse(&format!("{}{}", chunk(text), chunk(error)), 20),
        Reply::sse(&chunk(blocked.clone()), 20),
        Reply::sse(&chunk(partial), 20),
        Reply::json(
            200,
            &json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}),
        ),
    ])
    .await;
    let model = bind("google:gemini-x");
    let call = Call {
        messages: vec![Message::user("hi")],
        ..Call::default()
    };
    let request = || call.request(config_no_retry(&server, "/v1beta"));
    let cut = stream_parts(&*model, request()).await.unwrap_err();
    assert_eq!(cut.code, ErrorCode::InvalidResponse);
    assert!(cut.message.contains("finishReason"));
    let overloaded = stream_parts(&*model, request()).await.unwrap_err();
    assert_eq!(overloaded.code, ErrorCode::ProviderError);
    assert_eq!(overloaded.status_code, Some(503));
    let filtered = stream_parts(&*model, request()).await.unwrap_err();
    assert_eq!(filtered.code, ErrorCode::ContentFiltered);
    assert_eq!(
        filtered.cause.unwrap()["candidates"][0]["finishReason"],
        "SAFETY"
    );
    let parts = stream_parts(&*model, request()).await.unwrap();
    let response = check_stream(&parts);
    assert_eq!(response.stop_reason, "content_filter");
    assert_eq!(
        response.message.provider_metadata("google").unwrap()["finishReason"],
        "SAFETY"
    );
    let prompt_blocked = model.complete(request()).await.unwrap_err();
    assert_eq!(prompt_blocked.code, ErrorCode::ContentFiltered);
}

#[tokio::test]
async fn media_native_tools_and_structure_are_encoded() {
    use weft_provider::{Blob, ContentBlock, ImageBlock, ImageSource, UserMessage, VideoBlock};
    let server = ReplayServer::start(vec![Reply::json(200, &ok_body("{\"a\": 1}"))]).await;
    let call = Call {
        messages: vec![Message::User(UserMessage::new(vec![
            ContentBlock::text("look"),
            ContentBlock::Image(ImageBlock {
                source: ImageSource::Base64 {
                    data: "iVBOR".into(),
                },
                mime_type: "image/png".into(),
                width: None,
                height: None,
            }),
            ContentBlock::Image(ImageBlock {
                source: ImageSource::Url {
                    url: "gs://b/a.jpg".into(),
                },
                mime_type: "image/jpeg".into(),
                width: None,
                height: None,
            }),
            ContentBlock::Video(VideoBlock {
                data: Blob(vec![1, 2, 3]),
                mime_type: "video/mp4".into(),
                duration: None,
                width: None,
                height: None,
            }),
        ]))],
        params: params(
            json!({"tools": [{"googleSearch": {}}], "generationConfig": {"temperature": 0.5}}),
        ),
        tools: vec![tool("f", "d", json!({"type": "object"}))],
        structure: Some(json!({"type": "object", "properties": {"a": {"type": "integer"}}})),
        ..Call::default()
    };
    bind("google:gemini-x")
        .complete(call.request(config(&server, "/v1beta")))
        .await
        .unwrap();
    let body = server.received()[0].json();
    let parts = &body["contents"][0]["parts"];
    assert_eq!(
        parts[1],
        json!({"inlineData": {"mimeType": "image/png", "data": "iVBOR"}})
    );
    assert_eq!(
        parts[2],
        json!({"fileData": {"mimeType": "image/jpeg", "fileUri": "gs://b/a.jpg"}})
    );
    assert_eq!(
        parts[3],
        json!({"inlineData": {"mimeType": "video/mp4", "data": "AQID"}})
    );
    assert_eq!(body["tools"][0]["functionDeclarations"][0]["name"], "f");
    assert_eq!(body["tools"][1], json!({"googleSearch": {}}));
    assert_eq!(
        body["generationConfig"],
        json!({"responseMimeType": "application/json", "responseJsonSchema": call.structure.clone().unwrap(), "temperature": 0.5})
    );
}

#[tokio::test]
async fn missing_key_names_both_variables() {
    if std::env::var("GEMINI_API_KEY").is_ok() || std::env::var("GOOGLE_API_KEY").is_ok() {
        return;
    }
    let server = ReplayServer::start(vec![]).await;
    let call = Call {
        messages: vec![Message::user("hi")],
        ..Call::default()
    };
    let config = weft_provider::ProviderConfig::default().base_url(server.url());
    let error = bind("google:gemini-x")
        .complete(call.request(config))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::AuthenticationFailed);
    assert!(
        error.message.contains("GEMINI_API_KEY") && error.message.contains("GOOGLE_API_KEY"),
        "{}",
        error.message
    );
}

#[test]
fn truncated_and_garbled_streams_never_panic() {
    for name in [
        "test_google_model_stream.yaml",
        "test_google_model_thinking_part_iter.yaml",
        "test_google_streaming_tool_call_thought_signature.yaml",
    ] {
        for interaction in cassette(&format!("{DIR}/{name}")) {
            let body = interaction.response_text.clone().unwrap();
            fuzz_decoder(&body, google::decode_stream);
            let parts = google::decode_stream(body.as_bytes()).unwrap();
            assert!(matches!(parts.last(), Some(LlmStreamPart::Response(_))));
        }
    }
    let body = weft_fixture(STREAMED_ARGS);
    fuzz_decoder(&body, google::decode_stream);
    assert!(google::decode_response(&json!({"candidates": []})).is_err());
}

/// Gemini 3 with `streamFunctionCallArguments`: three calls, two of them streamed (a string in
/// pieces with an escaped quote, numbers, a nested array of objects, null, a boolean; one ended
/// by `functionCall: {}`, one by a piece without `willContinue`), then a whole call without
/// arguments. Written from Google's documented `PartialArg` format.
const STREAMED_ARGS: &str = "gemini-3-stream-function-call-arguments.sse";

fn streamed_args_expected() -> [(&'static str, Value); 3] {
    [
        (
            "get_weather",
            json!({"location": "San Francisco, \"CA\"", "days": 3, "unit": "celsius"}),
        ),
        (
            "plan_trip",
            json!({"trip": {"stops": [{"city": "Lyon", "nights": 2}, {"city": "Nice", "nights": 1.5}],
                            "budget": null, "by_train": true}}),
        ),
        ("get_time", json!({})),
    ]
}

/// The `tool_call_delta` argument fragments of each block, joined.
fn argument_texts(events: &[&StreamEvent]) -> std::collections::BTreeMap<u32, String> {
    let mut texts = std::collections::BTreeMap::<u32, String>::new();
    for event in events {
        if event.event_type == StreamEventType::ToolCallDelta {
            let text = texts.entry(event.index).or_default();
            text.push_str(event.delta.arguments_json.as_deref().unwrap_or_default());
        }
    }
    texts
}

#[test]
fn streamed_function_call_arguments_become_whole_calls() {
    let parts = google::decode_stream(weft_fixture(STREAMED_ARGS).as_bytes()).unwrap();
    let response = check_stream(&parts);
    let calls = &response.message.tool_calls;
    let expected = streamed_args_expected();
    assert_eq!(calls.len(), expected.len());
    for (call, (name, args)) in calls.iter().zip(&expected) {
        assert_eq!(call.tool_name, *name);
        assert_eq!(&call.arguments, args, "{name}");
        // Integral numbers stay integers, as in a whole call's `args`.
        assert!(!call.arguments.to_string().contains("3.0"));
    }
    assert_eq!(response.stop_reason, "tool_use");
    let signatures =
        &response.message.provider_metadata("google").unwrap()["functionCallSignatures"];
    assert!(
        signatures[&calls[0].tool_call_id]
            .as_str()
            .unwrap()
            .starts_with("CiQBjz1rX3Jm")
    );
    assert_eq!(
        signatures.as_object().unwrap().len(),
        1,
        "only the first part had one"
    );
    // The argument fragments of each call's events add up to its arguments.
    let events: Vec<_> = parts
        .iter()
        .filter_map(|p| match p {
            LlmStreamPart::Event(e) => Some(e),
            LlmStreamPart::Response(_) => None,
        })
        .collect();
    let texts = argument_texts(&events);
    assert_eq!(texts.len(), 3);
    for ((_, text), (name, args)) in texts.iter().zip(&expected) {
        let parsed: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(&parsed, args, "{name}: {text}");
    }
    let first_delta = events
        .iter()
        .find(|e| e.event_type == StreamEventType::ToolCallDelta)
        .unwrap();
    assert_eq!(first_delta.delta.tool_name.as_deref(), Some("get_weather"));
    assert_eq!(
        first_delta.delta.tool_call_id.as_deref(),
        Some(calls[0].tool_call_id.as_str())
    );
    // Pieces before the first `partialArgs` part: one event per piece, not one at the end.
    let pieces = events
        .iter()
        .filter(|e| e.event_type == StreamEventType::ToolCallDelta && e.index == first_delta.index)
        .count();
    assert!(pieces >= 5, "{pieces}");
}

#[test]
fn broken_streamed_arguments_fail_cleanly() {
    let chunk = |parts: Value| {
        format!(
            "data: {}\r\n\r\n",
            json!({"candidates": [{"content": {"role": "model", "parts": parts}}]})
        )
    };
    let end = format!(
        "data: {}\r\n\r\n",
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}]})
    );
    for (body, says) in [
        (
            chunk(
                json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.a", "stringValue": "x"}]}}]),
            ),
            "before the call's name",
        ),
        (
            chunk(json!([{"functionCall": {"name": "f", "willContinue": true}}]))
                + &chunk(
                    json!([{"functionCall": {"partialArgs": [{"jsonPath": "a", "boolValue": true}], "willContinue": true}}]),
                ),
            "unsupported partial argument path",
        ),
        (
            chunk(json!([{"functionCall": {"name": "f", "willContinue": true}}]))
                + &chunk(
                    json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.a", "stringValue": "x"}], "willContinue": true}}]),
                )
                + &chunk(
                    json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.a.b", "numberValue": 1}]}}]),
                ),
            "contradicts",
        ),
    ] {
        let error = google::decode_stream((body + &end).as_bytes()).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidResponse);
        assert!(error.message.contains(says), "{}", error.message);
    }
    // A call still open when the stream ends is closed with what arrived.
    let body = chunk(json!([{"functionCall": {"name": "f", "willContinue": true}}]))
        + &chunk(
            json!([{"functionCall": {"partialArgs": [{"jsonPath": "$.n", "numberValue": 7}], "willContinue": true}}]),
        )
        + &end;
    let parts = google::decode_stream(body.as_bytes()).unwrap();
    let response = check_stream(&parts);
    assert_eq!(response.message.tool_calls[0].arguments, json!({"n": 7}));
}

fn echo_tool(name: &str) -> Tool {
    Tool::new(
        name,
        "echoes its arguments",
        object_schema(),
        |args: Value, _ctx| async move { Ok(args) },
    )
}

#[tokio::test]
async fn streamed_call_arguments_run_and_go_back_with_the_signature() {
    let server = ReplayServer::start(vec![
        Reply::sse(&weft_fixture(STREAMED_ARGS), 61),
        Reply::sse(&weft_fixture("gemini-3-stream-text-after-tools.sse"), 61),
    ])
    .await;
    let reference = ProviderRegistry::with_builtins()
        .resolve("google:gemini-3-pro-preview")
        .unwrap();
    let stream_args =
        json!({"functionCallingConfig": {"mode": "AUTO", "streamFunctionCallArguments": true}});
    let options = LlmOptions::new(reference)
        .config(config_no_retry(&server, "/v1beta"))
        .tool(echo_tool("get_weather"))
        .tool(echo_tool("plan_trip"))
        .tool(echo_tool("get_time"))
        .param("toolConfig", stream_args.clone());
    let mut stream = llm(options)
        .unwrap()
        .stream(
            &[],
            "Weather in San Francisco, plan Lyon and Nice, and the time?",
        )
        .unwrap();
    let mut events = Vec::new();
    while let Some(event) = futures_util::StreamExt::next(&mut stream).await {
        events.push(event.unwrap());
    }
    let turn = stream.turn().await.unwrap();
    assert!(turn.text().starts_with("San Francisco: 18°C, clear skies"));
    let expected = streamed_args_expected();
    assert_eq!(turn.tool_executions.len(), 3);
    for (execution, (name, args)) in turn.tool_executions.iter().zip(&expected) {
        assert_eq!(execution.tool_name, *name);
        assert_eq!(
            &execution.arguments, args,
            "{name} ran with the assembled arguments"
        );
        assert!(!execution.is_error);
    }
    // The first cycle's tool_call_delta fragments are each call's arguments.
    let first_cycle: Vec<&StreamEvent> = events
        .iter()
        .take_while(|e| e.event_type != StreamEventType::MessageStop)
        .collect();
    let texts = argument_texts(&first_cycle);
    for ((_, text), (name, args)) in texts.iter().zip(&expected) {
        assert_eq!(
            &serde_json::from_str::<Value>(text).unwrap(),
            args,
            "{name}"
        );
    }

    let received = server.received();
    assert_eq!(received.len(), 2);
    assert!(received[0].path.ends_with(":streamGenerateContent?alt=sse"));
    assert_eq!(received[0].json()["toolConfig"], stream_args);
    let second = received[1].json();
    let model_parts = second["contents"][1]["parts"].as_array().unwrap().clone();
    assert_eq!(second["contents"][1]["role"], "model");
    assert_eq!(model_parts.len(), 3, "{second}");
    for (part, (name, args)) in model_parts.iter().zip(&expected) {
        assert_eq!(part["functionCall"]["name"], *name);
        assert_eq!(&part["functionCall"]["args"], args);
        assert!(part["functionCall"].get("partialArgs").is_none());
        assert!(part["functionCall"].get("willContinue").is_none());
    }
    assert!(
        model_parts[0]["thoughtSignature"]
            .as_str()
            .unwrap()
            .starts_with("CiQBjz1rX3Jm"),
        "the streamed call's signature goes back with it"
    );
    assert!(model_parts[1].get("thoughtSignature").is_none());
    let answers = second["contents"][2]["parts"].as_array().unwrap();
    for (answer, call) in answers.iter().zip(&model_parts) {
        assert_eq!(answer["functionResponse"]["id"], call["functionCall"]["id"]);
        assert_eq!(
            answer["functionResponse"]["name"],
            call["functionCall"]["name"]
        );
    }
}
