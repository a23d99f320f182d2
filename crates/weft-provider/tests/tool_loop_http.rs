//! The `llm()` tool loop over real HTTP, one test per loop-level promise, in every wire dialect:
//!
//! - a tool call the model makes when the caller offered no tools is returned in
//!   `response.toolCalls`, not run (one request, not ten "unknown tool" rounds), streamed or not;
//! - every request of a multi-round loop carries the system prompt, the params, the tools and
//!   the structured-output schema, checked on the request bodies the server received.
//!
//! The replies are the fixtures of `testdata/fixtures/weft/` (written from the providers'
//! documented examples) and small bodies built here in each dialect.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adapter_support;

use adapter_support::*;
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use weft_provider::{LlmOptions, ProviderRegistry, StreamEventType, Tool, Turn, llm};
use weft_testkit::{ReplayServer, Reply, weft_fixture};

/// One wire dialect: the model reference and the base path its URLs hang off.
struct Dialect {
    reference: &'static str,
    base_path: &'static str,
}

const OPENAI: Dialect = Dialect {
    reference: "openai:llama-3.3-70b-versatile",
    base_path: "/openai/v1",
};
const ANTHROPIC: Dialect = Dialect {
    reference: "anthropic:claude-sonnet-4-5",
    base_path: "/v1",
};
const GOOGLE: Dialect = Dialect {
    reference: "google:gemini-3-pro-preview",
    base_path: "/v1beta",
};
const RESPONSES: Dialect = Dialect {
    reference: "openai-responses:gpt-4.1",
    base_path: "/v1",
};

fn options(dialect: &Dialect, server: &ReplayServer) -> LlmOptions {
    let reference = ProviderRegistry::with_builtins()
        .resolve(dialect.reference)
        .unwrap();
    LlmOptions::new(reference).config(config_no_retry(server, dialect.base_path))
}

fn json_reply(fixture: &str) -> Reply {
    Reply::json(200, &serde_json::from_str(&weft_fixture(fixture)).unwrap())
}

fn assert_calls_returned(turn: &Turn, server: &ReplayServer, what: &str) {
    assert_eq!(
        server.received().len(),
        1,
        "{what}: one request, no tool loop"
    );
    assert_eq!(turn.cycles, 1, "{what}");
    assert_eq!(turn.messages.len(), 2, "{what}: the input and the reply");
    assert!(turn.tool_executions.is_empty(), "{what}: nothing ran");
    let call = &turn.response.tool_calls[0];
    assert_eq!(call.tool_name, "get_weather", "{what}");
    assert!(
        call.arguments["location"].is_string(),
        "{what}: {}",
        call.arguments
    );
    let request = server.received()[0].json();
    for key in ["tools", "functionDeclarations"] {
        assert!(
            request.get(key).is_none(),
            "{what}: no tools were offered: {request}"
        );
    }
}

#[tokio::test]
async fn a_tool_call_without_tools_is_returned_not_run() {
    let cases = [
        (
            OPENAI,
            "openai-chat-tool-call.json",
            Some("openai-chat-stream-tool-call.sse"),
        ),
        (
            ANTHROPIC,
            "anthropic-tool-use.json",
            Some("anthropic-stream-tool-use.sse"),
        ),
        (
            GOOGLE,
            "gemini-function-call.json",
            Some("gemini-3-stream-function-call-arguments.sse"),
        ),
        (RESPONSES, "openai-responses-function-call.json", None),
    ];
    for (dialect, body, stream) in cases {
        let server = ReplayServer::start(vec![json_reply(body)]).await;
        let instance = llm(options(&dialect, &server)).unwrap();
        let turn = instance
            .generate(&[], "What is the weather in Paris?")
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", dialect.reference));
        assert_calls_returned(&turn, &server, dialect.reference);
        assert_eq!(
            turn.response.tool_calls[0].arguments,
            json!({"location": "Paris"})
        );

        let Some(stream) = stream else { continue };
        let server = ReplayServer::start(vec![Reply::sse(&weft_fixture(stream), 7)]).await;
        let instance = llm(options(&dialect, &server)).unwrap();
        let mut events = instance.stream(&[], "What is the weather?").unwrap();
        let mut types = Vec::new();
        while let Some(event) = events.next().await {
            types.push(event.unwrap().event_type);
        }
        let turn = events.turn().await.unwrap();
        let what = format!("{} (stream)", dialect.reference);
        assert_calls_returned(&turn, &server, &what);
        assert!(types.contains(&StreamEventType::ToolCallDelta), "{what}");
        assert!(
            !types.contains(&StreamEventType::ToolExecutionStart),
            "{what}: no tool ran"
        );
        assert_eq!(
            types
                .iter()
                .filter(|t| **t == StreamEventType::MessageStart)
                .count(),
            1,
            "{what}: one cycle"
        );
    }
}

const SYSTEM: &str = "You are a terse weather bot.";

fn weather_tool() -> Tool {
    Tool::new(
        "get_weather",
        "The weather at a place.",
        json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
        |args: Value, _ctx| async move { Ok(json!({"location": args["location"], "sky": "clear"})) },
    )
}

fn answer_schema() -> Value {
    json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
           "additionalProperties": false})
}

/// A reply asking for `get_weather(location)` with call id `id`, in `dialect`.
fn call_reply(dialect: &Dialect, id: &str, location: &str) -> Value {
    let args = json!({"location": location});
    match dialect.reference.split(':').next() {
        Some("openai") => json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
                "tool_calls": [{"id": id, "type": "function",
                    "function": {"name": "get_weather", "arguments": args.to_string()}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
        Some("anthropic") => json!({"id": "msg_1", "type": "message", "role": "assistant",
            "model": "m", "stop_reason": "tool_use", "stop_sequence": null,
            "content": [{"type": "tool_use", "id": id, "name": "get_weather", "input": args}],
            "usage": {"input_tokens": 10, "output_tokens": 5}}),
        Some("google") => json!({"candidates": [{"index": 0, "finishReason": "STOP",
            "content": {"role": "model", "parts": [{"functionCall": {"id": id, "name": "get_weather", "args": args}}]}}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}}),
        _ => json!({"id": "resp_1", "object": "response", "status": "completed", "model": "m",
            "output": [{"type": "function_call", "id": format!("fc_{id}"), "call_id": id,
                "name": "get_weather", "arguments": args.to_string(), "status": "completed"}],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}),
    }
}

/// The final structured answer, in `dialect`.
fn answer_reply(dialect: &Dialect) -> Value {
    let text = json!({"answer": "clear in Paris and Lyon"}).to_string();
    match dialect.reference.split(':').next() {
        Some("openai") => json!({"id": "chatcmpl-3", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}}),
        Some("anthropic") => json!({"id": "msg_3", "type": "message", "role": "assistant",
            "model": "m", "stop_reason": "end_turn", "stop_sequence": null,
            "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": 30, "output_tokens": 9}}),
        Some("google") => json!({"candidates": [{"index": 0, "finishReason": "STOP",
            "content": {"role": "model", "parts": [{"text": text}]}}],
            "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 9}}),
        _ => json!({"id": "resp_3", "object": "response", "status": "completed", "model": "m",
            "output": [{"type": "message", "id": "msg_3", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": 30, "output_tokens": 9, "total_tokens": 39}}),
    }
}

/// What one request body says about the four settings, read the dialect's way:
/// (system prompt, temperature, tool names, structured-output schema, conversation length).
fn settings(dialect: &Dialect, body: &Value) -> (Value, Value, Vec<String>, Value, usize) {
    let names = |list: &Value, pointer: &str| -> Vec<String> {
        list.as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| {
                t.pointer(pointer)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .collect()
    };
    match dialect.reference.split(':').next() {
        Some("openai") => {
            let messages = body["messages"].as_array().cloned().unwrap_or_default();
            let system = messages
                .iter()
                .find(|m| m["role"] == "system")
                .map_or(Value::Null, |m| m["content"].clone());
            let rest = messages.iter().filter(|m| m["role"] != "system").count();
            (
                system,
                body["temperature"].clone(),
                names(&body["tools"], "/function/name"),
                body["response_format"]["json_schema"]["schema"].clone(),
                rest,
            )
        }
        Some("anthropic") => (
            body["system"].clone(),
            body["temperature"].clone(),
            names(&body["tools"], "/name"),
            body["output_config"]["format"]["schema"].clone(),
            body["messages"].as_array().map_or(0, Vec::len),
        ),
        Some("google") => (
            body["systemInstruction"]["parts"][0]["text"].clone(),
            body["generationConfig"]["temperature"].clone(),
            names(&body["tools"][0]["functionDeclarations"], "/name"),
            body["generationConfig"]["responseJsonSchema"].clone(),
            body["contents"].as_array().map_or(0, Vec::len),
        ),
        _ => (
            body["instructions"].clone(),
            body["temperature"].clone(),
            names(&body["tools"], "/name"),
            body["text"]["format"]["schema"].clone(),
            body["input"].as_array().map_or(0, Vec::len),
        ),
    }
}

#[tokio::test]
async fn every_round_of_the_tool_loop_carries_system_params_tools_and_structure() {
    for dialect in [OPENAI, ANTHROPIC, GOOGLE, RESPONSES] {
        let replies = vec![
            Reply::json(200, &call_reply(&dialect, "call_1", "Paris")),
            Reply::json(200, &call_reply(&dialect, "call_2", "Lyon")),
            Reply::json(200, &answer_reply(&dialect)),
        ];
        let server = ReplayServer::start(replies).await;
        let mut options = options(&dialect, &server)
            .system(SYSTEM)
            .tool(weather_tool())
            .structure(answer_schema());
        options = if dialect.reference.starts_with("google:") {
            options.param("generationConfig", json!({"temperature": 0.3}))
        } else {
            options.param("temperature", json!(0.3))
        };
        let turn = llm(options)
            .unwrap()
            .generate(&[], "Weather in Paris, then Lyon?")
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", dialect.reference));
        assert_eq!(turn.cycles, 3, "{}", dialect.reference);
        assert_eq!(
            turn.data,
            Some(json!({"answer": "clear in Paris and Lyon"}))
        );

        let received = server.received();
        assert_eq!(received.len(), 3, "{}", dialect.reference);
        let mut previous_length = 0;
        for (round, request) in received.iter().enumerate() {
            let what = format!("{} request {}", dialect.reference, round + 1);
            let (system, temperature, tools, structure, length) =
                settings(&dialect, &request.json());
            assert_eq!(system, json!(SYSTEM), "{what}: the system prompt");
            assert_eq!(temperature, json!(0.3), "{what}: the params");
            assert_eq!(tools, ["get_weather"], "{what}: the tools");
            assert_eq!(structure, answer_schema(), "{what}: the structure");
            assert!(length > previous_length, "{what}: the conversation grows");
            previous_length = length;
        }
    }
}
