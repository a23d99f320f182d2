//! The `openai:` provider (Chat Completions) with reasoning models: the recorded o3-mini
//! exchange of `cassettes/test_openai/test_reasoning_model_with_temperature.yaml`, and the
//! reasoning parameters (`max_completion_tokens`, `reasoning_effort`) passing through `params`
//! unchanged. The rest of the `test_openai` cassettes are replayed by `openai_compatible.rs`.
//!
//! Nothing is excluded from the comparison.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adapter_support;

use adapter_support::*;
use serde_json::json;
use weft_provider::Message;
use weft_testkit::ReplayServer;

#[tokio::test]
async fn reasoning_model_exchange_matches_the_recording() {
    let tape = cassette("test_openai/test_reasoning_model_with_temperature.yaml");
    let server = ReplayServer::start(vec![tape[0].reply(4096)]).await;
    let model = bind("openai:o3-mini");
    let call = Call {
        messages: vec![Message::user("What is the capital of Mexico?")],
        ..Call::default()
    };
    let response = model
        .complete(call.request(config(&server, "/v1")))
        .await
        .unwrap();
    assert!(
        response
            .message
            .text_content()
            .starts_with("The capital of Mexico is Mexico City.")
    );
    assert_eq!(response.stop_reason, "end_turn");
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (13, 238)
    );
    let meta = response.message.provider_metadata("openai").unwrap();
    assert_eq!(
        meta["usage"]["completion_tokens_details"]["reasoning_tokens"],
        192
    );
    let sent = &server.received()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_same_body(&sent.json(), &tape[0].request_body);
}

#[tokio::test]
async fn reasoning_parameters_pass_through_unchanged() {
    let tape = cassette("test_openai/test_reasoning_model_with_temperature.yaml");
    let server = ReplayServer::start(vec![tape[0].reply(4096)]).await;
    let model = bind("openai:o3-mini");
    let call = Call {
        messages: vec![Message::user("What is the capital of Mexico?")],
        system: Some("Answer briefly.".into()),
        params: params(
            json!({"max_completion_tokens": 1000, "reasoning_effort": "low",
                              "service_tier": "flex"}),
        ),
        ..Call::default()
    };
    model
        .complete(call.request(config(&server, "/v1")))
        .await
        .unwrap();
    let body = server.received()[0].json();
    assert_eq!(body["max_completion_tokens"], 1000);
    assert_eq!(body["reasoning_effort"], "low");
    assert_eq!(body["service_tier"], "flex");
    assert!(body.get("max_tokens").is_none());
    assert!(body.get("temperature").is_none());
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "Answer briefly."})
    );
}
