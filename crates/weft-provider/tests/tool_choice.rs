//! The typed `ToolChoice` on the wire: each adapter sends one request to a local server and
//! the test reads the exact `tool_choice` (Gemini: `toolConfig`) of the body it received —
//! every choice, the precedence of an explicit vendor param, Anthropic's refusal of a forced
//! choice with extended thinking, no choice without tools; and `llm()` refusing a forced
//! choice of a tool it does not offer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adapter_support;

use adapter_support::*;
use serde_json::{Value, json};
use weft_provider::adapters::scripted;
use weft_provider::{ErrorCode, LlmOptions, LlmRequest, Message, ToolChoice, llm};
use weft_testkit::{ReplayServer, Reply};

fn object() -> Value {
    json!({"type": "object", "properties": {}})
}

/// The body `reference` sends for one request with `choice` and `extra` params, offering
/// `complete_task` and `read_file` when `with_tools`.
async fn sent(
    reference: &str,
    base_path: &str,
    choice: ToolChoice,
    extra: Value,
    with_tools: bool,
) -> Value {
    // Any answer will do: only the request is read.
    let server = ReplayServer::start(vec![Reply::json(
        400,
        &json!({"error": {"message": "unused", "type": "invalid_request_error"}}),
    )])
    .await;
    let tools = if with_tools {
        vec![
            tool("complete_task", "ends the task", object()),
            tool("read_file", "reads a file", object()),
        ]
    } else {
        Vec::new()
    };
    let call = Call {
        messages: vec![Message::user("hi")],
        params: params(extra),
        tools,
        tool_choice: choice,
        ..Call::default()
    };
    let _ = bind(reference)
        .complete(call.request(config_no_retry(&server, base_path)))
        .await;
    let received = server.received();
    assert_eq!(received.len(), 1, "{reference}: one request");
    received[0].json()
}

/// Every choice as `reference` sends it (`field`: the body's key).
async fn mapped(reference: &str, base_path: &str, field: &str) -> Vec<Option<Value>> {
    let mut out = Vec::new();
    for choice in [
        ToolChoice::Auto,
        ToolChoice::Required,
        ToolChoice::None,
        ToolChoice::tool("complete_task"),
    ] {
        let body = sent(reference, base_path, choice, json!({}), true).await;
        assert_eq!(
            body["tools"].as_array().map(Vec::len),
            Some(reference_tools(reference))
        );
        out.push(body.get(field).cloned());
    }
    out
}

/// How many entries the body's `tools` has (Gemini groups declarations in one entry).
fn reference_tools(reference: &str) -> usize {
    if reference.starts_with("google:") {
        1
    } else {
        2
    }
}

#[tokio::test]
async fn chat_completions_sends_each_choice_in_its_wire_format() {
    assert_eq!(
        mapped("openai:gpt-4o", "/v1", "tool_choice").await,
        [
            None,
            Some(json!("required")),
            Some(json!("none")),
            Some(json!({"type": "function", "function": {"name": "complete_task"}})),
        ]
    );
    // The compatible provider speaks the same dialect.
    let body = sent(
        "openai-compatible:local",
        "/v1",
        ToolChoice::tool("complete_task"),
        json!({}),
        true,
    )
    .await;
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "function": {"name": "complete_task"}})
    );
}

#[tokio::test]
async fn responses_sends_each_choice_in_its_wire_format() {
    assert_eq!(
        mapped("openai-responses:gpt-4o", "/v1", "tool_choice").await,
        [
            None,
            Some(json!("required")),
            Some(json!("none")),
            Some(json!({"type": "function", "name": "complete_task"})),
        ]
    );
}

#[tokio::test]
async fn anthropic_sends_each_choice_in_its_wire_format() {
    assert_eq!(
        mapped("anthropic:claude-sonnet-4-0", "/v1", "tool_choice").await,
        [
            None,
            Some(json!({"type": "any"})),
            Some(json!({"type": "none"})),
            Some(json!({"type": "tool", "name": "complete_task"})),
        ]
    );
}

#[tokio::test]
async fn gemini_sends_each_choice_as_its_function_calling_config() {
    let configs: Vec<Option<Value>> = mapped("google:gemini-2.0-flash", "/v1beta", "toolConfig")
        .await
        .into_iter()
        .map(|c| c.map(|c| c["functionCallingConfig"].clone()))
        .collect();
    assert_eq!(
        configs,
        [
            None,
            Some(json!({"mode": "ANY"})),
            Some(json!({"mode": "NONE"})),
            Some(json!({"mode": "ANY", "allowedFunctionNames": ["complete_task"]})),
        ]
    );
}

#[tokio::test]
async fn an_explicit_vendor_param_wins_over_the_typed_choice() {
    let forced = || ToolChoice::tool("complete_task");
    for (reference, param) in [
        ("openai:gpt-4o", json!("auto")),
        ("openai-responses:gpt-4o", json!("auto")),
        ("anthropic:claude-sonnet-4-0", json!({"type": "auto"})),
    ] {
        let body = sent(
            reference,
            "/v1",
            forced(),
            json!({ "tool_choice": param }),
            true,
        )
        .await;
        assert_eq!(body["tool_choice"], param, "{reference}");
    }
    // Gemini: the project's functionCallingConfig replaces the typed one; its other toolConfig
    // keys sit beside the typed one; a snake_case tool_config means none is added.
    let google = "google:gemini-2.0-flash";
    let body = sent(
        google,
        "/v1beta",
        forced(),
        json!({"toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}}),
        true,
    )
    .await;
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "AUTO"}})
    );
    let body = sent(
        google,
        "/v1beta",
        forced(),
        json!({"toolConfig": {"retrievalConfig": {"languageCode": "en"}}}),
        true,
    )
    .await;
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["complete_task"]},
               "retrievalConfig": {"languageCode": "en"}})
    );
    let body = sent(
        google,
        "/v1beta",
        forced(),
        json!({"tool_config": {"function_calling_config": {"mode": "NONE"}}}),
        true,
    )
    .await;
    assert!(body.get("toolConfig").is_none(), "{body}");
    assert_eq!(
        body["tool_config"],
        json!({"function_calling_config": {"mode": "NONE"}})
    );
}

#[tokio::test]
async fn anthropic_with_extended_thinking_sends_no_forced_choice() {
    let thinking = json!({"thinking": {"type": "enabled", "budget_tokens": 2048}});
    for forced in [ToolChoice::Required, ToolChoice::tool("complete_task")] {
        let body = sent(
            "anthropic:claude-sonnet-4-0",
            "/v1",
            forced,
            thinking.clone(),
            true,
        )
        .await;
        // The API refuses `any`/`tool` with thinking: the request goes out as `auto`.
        assert!(body.get("tool_choice").is_none(), "{body}");
        assert_eq!(body["thinking"]["type"], "enabled");
    }
    // `none` is allowed with thinking, and a forced choice with thinking off is kept.
    let body = sent(
        "anthropic:claude-sonnet-4-0",
        "/v1",
        ToolChoice::None,
        thinking,
        true,
    )
    .await;
    assert_eq!(body["tool_choice"], json!({"type": "none"}));
    let body = sent(
        "anthropic:claude-sonnet-4-0",
        "/v1",
        ToolChoice::Required,
        json!({"thinking": {"type": "disabled"}}),
        true,
    )
    .await;
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
}

#[tokio::test]
async fn without_tools_no_choice_is_sent() {
    for (reference, base, field) in [
        ("openai:gpt-4o", "/v1", "tool_choice"),
        ("openai-responses:gpt-4o", "/v1", "tool_choice"),
        ("anthropic:claude-sonnet-4-0", "/v1", "tool_choice"),
        ("google:gemini-2.0-flash", "/v1beta", "toolConfig"),
    ] {
        let body = sent(reference, base, ToolChoice::None, json!({}), false).await;
        assert!(body.get(field).is_none(), "{reference}: {body}");
    }
}

#[tokio::test]
async fn llm_sends_the_choice_and_refuses_a_forced_tool_it_does_not_offer() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let model = scripted::function_model(move |req: &LlmRequest| {
        log.lock().unwrap().push((
            req.tool_choice.clone(),
            req.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
        ));
        Ok(scripted::ScriptedResponse::text("ok"))
    });
    let options = || {
        LlmOptions::new(model.clone())
            .tool(tool("complete_task", "", object()))
            .tool(tool("read_file", "", object()))
    };
    let instance = llm(options()
        .offer_only(vec!["complete_task".into()])
        .tool_choice(ToolChoice::tool("complete_task")))
    .unwrap();
    instance.generate(&[], "go").await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [(
            ToolChoice::tool("complete_task"),
            vec!["complete_task".to_owned()]
        )]
    );
    // `Required` with a tool offered (only some of them, or all) has something to call.
    for options in [
        options()
            .offer_only(vec!["read_file".into()])
            .tool_choice(ToolChoice::Required),
        options().tool_choice(ToolChoice::Required),
    ] {
        assert!(llm(options).is_ok());
    }
    // A forced tool that is not offered (hidden, or unknown) cannot be called: refused.
    for options in [
        options()
            .offer_only(vec!["complete_task".into()])
            .tool_choice(ToolChoice::tool("read_file")),
        options().tool_choice(ToolChoice::tool("write_file")),
        LlmOptions::new(model.clone()).tool_choice(ToolChoice::Required),
    ] {
        let error = llm(options).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidRequest, "{error}");
        assert!(error.message.contains("tool choice"), "{error}");
    }
    // `None` and `Auto` need nothing.
    assert!(llm(LlmOptions::new(model.clone()).tool_choice(ToolChoice::None)).is_ok());
}
