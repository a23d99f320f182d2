//! The `anthropic:` adapter over real HTTP against the local replay server: every recorded
//! exchange of `cassettes/test_anthropic/` (request bodies compared field by field with the
//! recording, decoded responses asserted, streaming and not), a thinking + tool multi-turn
//! round trip, crafted failures, and request encoding of media, caching and native tools.
//!
//! Pydantic-specific fields of the recordings are passed as `params` so the bodies compare
//! whole: `thinking`, `tool_choice`, `output_config`. Nothing is excluded from the comparison.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adapter_support;

use std::time::Duration;

use adapter_support::*;
use serde_json::{Value, json};
use weft_provider::adapters::anthropic;
use weft_provider::{
    ContentBlock, DocumentBlock, DocumentSource, ErrorCode, ImageBlock, ImageSource, LlmOptions,
    LlmStreamPart, Message, MessageOptions, ProviderConfig, ProviderRegistry, RetryAfterStrategy,
    UserMessage, llm,
};
use weft_testkit::{ReplayServer, Reply};

const DIR: &str = "test_anthropic";

fn user(text: &str) -> Message {
    Message::user(text)
}

fn empty_schema() -> Value {
    json!({"additionalProperties": false, "properties": {}, "type": "object"})
}

#[tokio::test]
async fn tool_with_thinking_round_trip_matches_the_recording() {
    let tape = cassette(&format!("{DIR}/test_anthropic_tool_with_thinking.yaml"));
    let server = ReplayServer::start(tape.iter().map(|i| i.reply(4096)).collect()).await;
    let model = bind("anthropic:claude-sonnet-4-0");
    let mut call = Call {
        messages: vec![user("What is the largest city in the user country?")],
        params: params(
            json!({"thinking": {"budget_tokens": 3000, "type": "enabled"},
                              "tool_choice": {"type": "auto"}}),
        ),
        tools: vec![tool("get_user_country", "", empty_schema())],
        ..Call::default()
    };
    let first = model
        .complete(call.request(config(&server, "/v1")))
        .await
        .unwrap();
    let reasoning: Vec<_> = first.message.reasoning().collect();
    assert_eq!(reasoning.len(), 1);
    assert!(
        reasoning[0]
            .text
            .starts_with("The user is asking about the largest city")
    );
    assert!(
        reasoning[0]
            .signature
            .as_deref()
            .unwrap()
            .starts_with("EqEECkYICxgCKkAo3UA4")
    );
    assert_eq!(
        first.message.text_content(),
        "I'll help you find the largest city in your country. First, let me determine which country you're from."
    );
    assert_eq!(first.message.tool_calls.len(), 1);
    assert_eq!(
        first.message.tool_calls[0].tool_call_id,
        "toolu_01YGzqpRE16Vricda3Aqcejo"
    );
    assert_eq!(first.message.tool_calls[0].arguments, json!({}));
    assert_eq!(first.stop_reason, "tool_use");
    assert_eq!(
        (first.usage.input_tokens, first.usage.output_tokens),
        (398, 155)
    );
    let meta = first.message.provider_metadata("anthropic").unwrap();
    assert_eq!(meta["id"], "msg_01WvueFjZVbHcj4H4zUzeGv2");
    assert_eq!(meta["stop_reason"], "tool_use");

    // Turn 2: the history is built from turn 1's decoded response.
    let calls = first.message.tool_calls.clone();
    call.messages.push(Message::Assistant(first.message));
    call.messages.push(results(&calls, &[("Mexico", false)]));
    let second = model
        .complete(call.request(config(&server, "/v1")))
        .await
        .unwrap();
    assert!(second.message.text_content().contains("**Mexico City**"));
    assert_eq!(second.stop_reason, "end_turn");
    assert_eq!(
        (second.usage.input_tokens, second.usage.output_tokens),
        (566, 126)
    );

    let received = server.received();
    assert_eq!(received.len(), 2);
    for (sent, recorded) in received.iter().zip(&tape) {
        assert_eq!(sent.path, "/v1/messages");
        assert_eq!(sent.header("x-api-key"), Some(KEY));
        assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
        assert_same_body(&sent.json(), &recorded.request_body);
    }
    // The thinking block went back byte for byte, signature included.
    let sent = received[1].json();
    assert_eq!(
        sent["messages"][1]["content"][0],
        tape[0].response_json.as_ref().unwrap()["content"][0]
    );
}

#[tokio::test]
async fn parallel_tool_calls_with_system_prompt_match_the_recording() {
    let tape = cassette(&format!("{DIR}/test_multiple_parallel_tool_calls.yaml"));
    let server = ReplayServer::start(tape.iter().map(|i| i.reply(4096)).collect()).await;
    let model = bind("anthropic:claude-haiku-4-5");
    let system = tape[0].request_body["system"].as_str().unwrap().to_owned();
    let mut call = Call {
        messages: vec![user(
            "Alice, Bob, Charlie and Daisy are a family. Who is the youngest?",
        )],
        system: Some(system),
        params: params(json!({"tool_choice": {"type": "auto"}})),
        tools: vec![tool(
            "retrieve_entity_info",
            "Get the knowledge about the given entity.",
            json!({"additionalProperties": false, "properties": {"name": {"type": "string"}},
                   "required": ["name"], "type": "object"}),
        )],
        ..Call::default()
    };
    let first = model
        .complete(call.request(config(&server, "/v1")))
        .await
        .unwrap();
    let names: Vec<_> = first
        .message
        .tool_calls
        .iter()
        .map(|c| c.arguments["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Alice", "Bob", "Charlie", "Daisy"]);
    assert_eq!(
        first.message.tool_calls[3].tool_call_id,
        "toolu_013mnQZbgtK2oe3Mo3XKJsx3"
    );
    let calls = first.message.tool_calls.clone();
    call.messages.push(Message::Assistant(first.message));
    call.messages.push(results(
        &calls,
        &[
            ("alice is bob's wife", false),
            ("bob is alice's husband", false),
            ("charlie is alice's son", false),
            (
                "daisy is bob's daughter and charlie's younger sister",
                false,
            ),
        ],
    ));
    let second = model
        .complete(call.request(config(&server, "/v1")))
        .await
        .unwrap();
    assert!(
        second
            .message
            .text_content()
            .contains("Daisy is the youngest")
    );
    for (sent, recorded) in server.received().iter().zip(&tape) {
        assert_same_body(&sent.json(), &recorded.request_body);
    }
}

#[tokio::test]
async fn tool_output_exchange_matches_the_recording() {
    let tape = cassette(&format!("{DIR}/test_anthropic_tool_output.yaml"));
    let server = ReplayServer::start(tape.iter().map(|i| i.reply(4096)).collect()).await;
    let model = bind("anthropic:claude-sonnet-4-5");
    let final_schema = tape[0].request_body["tools"][1]["input_schema"].clone();
    let mut call = Call {
        messages: vec![user("What is the largest city in the user country?")],
        params: params(json!({"tool_choice": {"type": "any"}})),
        tools: vec![
            tool("get_user_country", "", empty_schema()),
            tool(
                "final_result",
                "The final response which ends this conversation",
                final_schema,
            ),
        ],
        ..Call::default()
    };
    let first = model
        .complete(call.request(config(&server, "/v1")))
        .await
        .unwrap();
    assert!(first.message.content.is_empty());
    let calls = first.message.tool_calls.clone();
    call.messages.push(Message::Assistant(first.message));
    call.messages.push(results(&calls, &[("Mexico", false)]));
    let second = model
        .complete(call.request(config(&server, "/v1")))
        .await
        .unwrap();
    assert_eq!(second.message.tool_calls[0].tool_name, "final_result");
    assert_eq!(
        second.message.tool_calls[0].arguments,
        json!({"city": "Mexico City", "country": "Mexico"})
    );
    assert_eq!(
        (second.usage.input_tokens, second.usage.output_tokens),
        (497, 56)
    );
    for (sent, recorded) in server.received().iter().zip(&tape) {
        assert_same_body(&sent.json(), &recorded.request_body);
    }
}

#[tokio::test]
async fn thinking_stream_decodes_every_event_type() {
    let tape = cassette(&format!(
        "{DIR}/test_anthropic_model_thinking_part_stream.yaml"
    ));
    let server = ReplayServer::start(vec![tape[0].reply(97)]).await;
    let model = bind("anthropic:claude-sonnet-4-0");
    let call = Call {
        messages: vec![user("How do I cross the street?")],
        params: params(json!({"thinking": {"budget_tokens": 1024, "type": "enabled"}})),
        ..Call::default()
    };
    let parts = stream_parts(&*model, call.request(config(&server, "/v1")))
        .await
        .unwrap();
    let response = check_stream(&parts);
    let reasoning: Vec<_> = response.message.reasoning().collect();
    assert_eq!(reasoning.len(), 1);
    assert!(
        reasoning[0]
            .text
            .starts_with("This is a straightforward question about pedestrian safety.")
    );
    assert!(
        reasoning[0]
            .signature
            .as_deref()
            .unwrap()
            .starts_with("EvMCCkYICxgCKkCHP2cS")
    );
    assert!(
        reasoning[0]
            .signature
            .as_deref()
            .unwrap()
            .ends_with("fQYAQ==")
    );
    assert!(
        response
            .message
            .text_content()
            .starts_with("Here are the basic steps for safely crossing the street:")
    );
    assert_eq!(response.stop_reason, "end_turn");
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (43, 282)
    );
    let sent = &server.received()[0];
    assert_eq!(sent.header("accept"), Some("text/event-stream"));
    assert_same_body(&sent.json(), &tape[0].request_body);
    // The offline decoder yields the same parts.
    let offline =
        anthropic::decode_stream(tape[0].response_text.as_deref().unwrap().as_bytes()).unwrap();
    assert_eq!(offline.len(), parts.len());
}

#[tokio::test]
async fn redacted_thinking_is_kept_and_sent_back() {
    let tape = cassette(&format!(
        "{DIR}/test_anthropic_model_thinking_part_redacted_stream.yaml"
    ));
    let follow_up = json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 1}});
    let server = ReplayServer::start(vec![tape[0].reply(64), Reply::json(200, &follow_up)]).await;
    let model = bind("anthropic:claude-sonnet-4-5-20250929");
    let prompt = tape[0].request_body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut call = Call {
        messages: vec![user(&prompt)],
        params: params(json!({"thinking": {"budget_tokens": 1024, "type": "enabled"}})),
        ..Call::default()
    };
    let parts = stream_parts(&*model, call.request(config(&server, "/v1")))
        .await
        .unwrap();
    let response = check_stream(&parts);
    assert_same_body(&server.received()[0].json(), &tape[0].request_body);
    let reasoning: Vec<_> = response.message.reasoning().cloned().collect();
    assert_eq!(reasoning.len(), 2);
    let data: Vec<String> = reasoning
        .iter()
        .map(|r| {
            r.metadata.as_ref().unwrap()["anthropic"]["data"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(data[0].starts_with("EqkECkYIBxgCKkA8AZ4n"));
    assert!(data[1].starts_with("EtgBCkYIBxgCKkDQfGkw"));
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (92, 189)
    );

    // Through JSON (a saved thread) and back: the blocks go back exactly.
    let saved: Message =
        serde_json::from_value(serde_json::to_value(Message::Assistant(response.message)).unwrap())
            .unwrap();
    call.messages.push(saved);
    call.messages.push(user("and now?"));
    model
        .complete(call.request(config(&server, "/v1")))
        .await
        .unwrap();
    let sent = server.received()[1].json();
    let content = &sent["messages"][1]["content"];
    assert_eq!(
        content[0],
        json!({"type": "redacted_thinking", "data": data[0]})
    );
    assert_eq!(
        content[1],
        json!({"type": "redacted_thinking", "data": data[1]})
    );
    assert_eq!(content[2]["type"], "text");
}

#[tokio::test]
async fn unsupported_effort_is_an_invalid_request_with_its_cause() {
    let tape = cassette(&format!(
        "{DIR}/test_anthropic_explicit_effort_xhigh_unsupported_model_errors.yaml"
    ));
    let server = ReplayServer::start(vec![tape[0].reply(4096)]).await;
    let model = bind("anthropic:claude-opus-4-6");
    let call = Call {
        messages: vec![user("What is 2+2?")],
        params: params(json!({"output_config": {"effort": "xhigh"}})),
        ..Call::default()
    };
    let error = model
        .complete(call.request(config(&server, "/v1")))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidRequest);
    assert_eq!(error.status_code, Some(400));
    assert_eq!(error.provider, "anthropic");
    assert!(error.message.contains("effort level 'xhigh'"));
    assert_eq!(
        error.cause.unwrap()["error"]["type"],
        "invalid_request_error"
    );
    assert_same_body(&server.received()[0].json(), &tape[0].request_body);
}

fn message_body(text: &str) -> Value {
    json!({"id": "msg_x", "type": "message", "role": "assistant", "model": "claude-x",
           "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": null,
           "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 100,
                     "cache_creation_input_tokens": 20}})
}

fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

async fn fails_with(reply: Reply, code: ErrorCode) -> weft_provider::UppError {
    let server = ReplayServer::start(vec![reply]).await;
    let model = bind("anthropic:claude-x");
    let call = Call {
        messages: vec![user("hi")],
        ..Call::default()
    };
    let error = model
        .complete(call.request(config_no_retry(&server, "/v1")))
        .await
        .unwrap_err();
    assert_eq!(error.code, code, "{error}");
    assert_eq!(error.provider, "anthropic");
    assert!(error.cause.is_some());
    error
}

#[tokio::test]
async fn http_failures_are_normalized() {
    fails_with(
        Reply::json(
            401,
            &error_body("authentication_error", "invalid x-api-key"),
        ),
        ErrorCode::AuthenticationFailed,
    )
    .await;
    fails_with(
        Reply::json(404, &error_body("not_found_error", "model: claude-x")),
        ErrorCode::ModelNotFound,
    )
    .await;
    fails_with(
        Reply::json(500, &error_body("api_error", "Internal server error")),
        ErrorCode::ProviderError,
    )
    .await;
    let e = fails_with(
        Reply::json(529, &error_body("overloaded_error", "Overloaded")),
        ErrorCode::ProviderError,
    )
    .await;
    assert_eq!(e.status_code, Some(529));
    fails_with(
        Reply::json(
            400,
            &error_body(
                "invalid_request_error",
                "prompt is too long: 208310 tokens > 200000 maximum",
            ),
        ),
        ErrorCode::ContextLengthExceeded,
    )
    .await;
}

#[tokio::test]
async fn rate_limit_and_overload_are_retried_then_succeed() {
    let server = ReplayServer::start(vec![
        Reply::json(429, &error_body("rate_limit_error", "slow down"))
            .header("retry-after-ms", "10"),
        Reply::json(529, &error_body("overloaded_error", "Overloaded")).header("retry-after", "0"),
        Reply::json(200, &message_body("finally")),
    ])
    .await;
    let model = bind("anthropic:claude-x");
    let call = Call {
        messages: vec![user("hi")],
        ..Call::default()
    };
    let config =
        config(&server, "/v1").retry_strategy(RetryAfterStrategy::new(Duration::from_millis(5)));
    let response = model.complete(call.request(config)).await.unwrap();
    assert_eq!(response.message.text_content(), "finally");
    assert_eq!(server.received().len(), 3);
    // Usage: input counts cache reads and writes.
    assert_eq!(
        (
            response.usage.input_tokens,
            response.usage.cache_read_tokens,
            response.usage.cache_write_tokens
        ),
        (130, 100, 20)
    );
}

#[tokio::test]
async fn a_cut_stream_and_an_error_event_are_clear_errors() {
    let tape = cassette(&format!(
        "{DIR}/test_anthropic_model_thinking_part_stream.yaml"
    ));
    let body = tape[0].response_text.clone().unwrap();
    let cut = &body[..body.find("event: message_delta").unwrap()];
    let error_event = format!(
        "{}event: error\ndata: {}\n\n",
        &body[..body.find("event: content_block_stop").unwrap()],
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    let server = ReplayServer::start(vec![Reply::sse(cut, 50), Reply::sse(&error_event, 50)]).await;
    let model = bind("anthropic:claude-x");
    let call = Call {
        messages: vec![user("hi")],
        ..Call::default()
    };
    let error = stream_parts(&*model, call.request(config_no_retry(&server, "/v1")))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidResponse);
    assert!(error.message.contains("message_stop"));
    let error = stream_parts(&*model, call.request(config_no_retry(&server, "/v1")))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::ProviderError);
    assert_eq!(error.message, "Overloaded");
    assert!(error.is_retryable());
}

#[tokio::test]
async fn media_caching_native_tools_and_structure_are_encoded() {
    let server = ReplayServer::start(vec![Reply::json(200, &message_body("{\"a\": 1}"))]).await;
    let model = bind("anthropic:claude-x");
    let mut cache = serde_json::Map::new();
    cache.insert(
        "anthropic".into(),
        json!({"cache_control": {"type": "ephemeral"}}),
    );
    let message = UserMessage::with_options(
        vec![
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
                    url: "https://x/a.jpg".into(),
                },
                mime_type: "image/jpeg".into(),
                width: None,
                height: None,
            }),
            ContentBlock::Document(DocumentBlock {
                source: DocumentSource::Url {
                    url: "https://x/a.pdf".into(),
                },
                mime_type: "application/pdf".into(),
                title: None,
            }),
            ContentBlock::Document(DocumentBlock {
                source: DocumentSource::Text {
                    data: "plain".into(),
                },
                mime_type: "text/plain".into(),
                title: Some("notes".into()),
            }),
            ContentBlock::Document(DocumentBlock {
                source: DocumentSource::Base64 {
                    data: "JVBERi0=".into(),
                },
                mime_type: "application/pdf".into(),
                title: None,
            }),
        ],
        MessageOptions {
            id: None,
            metadata: Some(cache.clone()),
        },
    );
    let call = Call {
        messages: vec![Message::User(message)],
        system: Some("Be brief.".into()),
        params: params(
            json!({"tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 1}],
                              "output_config": {"effort": "low"}, "max_tokens": 100}),
        ),
        tools: vec![tool("t", "d", empty_schema()).with_metadata(cache)],
        structure: Some(json!({"type": "object", "properties": {"a": {"type": "integer"}}})),
        ..Call::default()
    };
    model
        .complete(call.request(config(&server, "/v1").header("anthropic-beta", "x")))
        .await
        .unwrap();
    let sent = &server.received()[0];
    assert_eq!(sent.header("anthropic-beta"), Some("x"));
    let body = sent.json();
    assert_eq!(body["system"], "Be brief.");
    assert_eq!(body["max_tokens"], 100);
    let content = &body["messages"][0]["content"];
    assert_eq!(
        content[1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}})
    );
    assert_eq!(
        content[2],
        json!({"type": "image", "source": {"type": "url", "url": "https://x/a.jpg"}})
    );
    assert_eq!(
        content[3],
        json!({"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}})
    );
    assert_eq!(
        content[4],
        json!({"type": "document", "title": "notes", "source": {"type": "text", "media_type": "text/plain", "data": "plain"}})
    );
    assert_eq!(content[5]["source"]["media_type"], "application/pdf");
    assert_eq!(content[5]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(
        body["tools"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(body["tools"][1]["type"], "web_search_20250305");
    assert_eq!(body["output_config"]["effort"], "low");
    assert_eq!(body["output_config"]["format"]["type"], "json_schema");
}

#[tokio::test]
async fn structured_output_through_llm_and_headers() {
    let server = ReplayServer::start(vec![Reply::json(
        200,
        &message_body("{\"city\": \"Paris\"}"),
    )])
    .await;
    let reference = ProviderRegistry::with_builtins()
        .resolve("anthropic:claude-x")
        .unwrap();
    let mut config = config(&server, "/v1");
    config.api_version = Some("2099-01-01".into());
    let instance = llm(LlmOptions::new(reference)
        .config(config)
        .structure(json!({"type": "object", "properties": {"city": {"type": "string"}}})))
    .unwrap();
    let turn = instance.generate(&[], "Capital of France?").await.unwrap();
    assert_eq!(turn.data, Some(json!({"city": "Paris"})));
    assert_eq!(
        server.received()[0].header("anthropic-version"),
        Some("2099-01-01")
    );
}

#[tokio::test]
async fn missing_key_names_the_variable() {
    if std::env::var("ANTHROPIC_API_KEY").is_ok() {
        return;
    }
    let server = ReplayServer::start(vec![]).await;
    let model = bind("anthropic:claude-x");
    let call = Call {
        messages: vec![user("hi")],
        ..Call::default()
    };
    let config = ProviderConfig::default().base_url(server.url());
    let error = model.complete(call.request(config)).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::AuthenticationFailed);
    assert!(
        error.message.contains("ANTHROPIC_API_KEY"),
        "{}",
        error.message
    );
}

#[test]
fn truncated_and_garbled_streams_never_panic() {
    for name in [
        "test_anthropic_model_thinking_part_stream.yaml",
        "test_anthropic_model_thinking_part_redacted_stream.yaml",
    ] {
        let tape = cassette(&format!("{DIR}/{name}"));
        let body = tape[0].response_text.clone().unwrap();
        fuzz_decoder(&body, anthropic::decode_stream);
        let parts = anthropic::decode_stream(body.as_bytes()).unwrap();
        assert!(matches!(parts.last(), Some(LlmStreamPart::Response(_))));
    }
    for body in [
        json!({}),
        json!({"content": [{"type": "tool_use", "id": 1}]}),
        json!({"type": "error"}),
    ] {
        assert!(anthropic::decode_response(&body).is_err());
    }
}
