//! Shared helpers for the conformance suite (scripted provider only).
#![allow(dead_code, clippy::unwrap_used, unreachable_pub)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use weft_agent::AgentState;
use weft_provider::adapters::scripted::{self, Script, ScriptedResponse, ScriptedToolCall};
use weft_provider::{Message, ModelReference, Tool, ToolError};

pub fn texts(texts: &[&str]) -> ModelReference {
    scripted::model(Script::texts(texts.iter().copied()))
}

pub fn script(responses: Vec<ScriptedResponse>) -> ModelReference {
    scripted::model(Script {
        responses,
        fresh_ids: false,
    })
}

pub fn text(t: &str) -> ScriptedResponse {
    ScriptedResponse::text(t)
}

pub fn call(id: &str, name: &str, args: Value) -> ScriptedResponse {
    ScriptedResponse::tool_call(id, name, args)
}

/// One response with several calls: (id, name, after).
pub fn calls(list: &[(&str, &str, &[&str])]) -> ScriptedResponse {
    ScriptedResponse {
        tool_calls: list
            .iter()
            .map(|(id, name, after)| ScriptedToolCall {
                id: Some((*id).to_owned()),
                name: (*name).to_owned(),
                arguments: json!({}),
                after: after.iter().map(|s| (*s).to_owned()).collect(),
            })
            .collect(),
        ..ScriptedResponse::default()
    }
}

pub fn object_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

pub fn add_tool() -> Tool {
    Tool::new(
        "add",
        "Adds two integers.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
        |args: Value, _ctx| async move {
            Ok(json!(
                args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)
            ))
        },
    )
}

pub fn failing_tool(name: &str) -> Tool {
    Tool::new(
        name,
        "Always fails.",
        object_schema(),
        |_a: Value, _c| async { Err::<Value, _>(ToolError::new("boom")) },
    )
}

pub type Log = Arc<Mutex<Vec<String>>>;

pub fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

pub fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

/// A tool that logs `start:NAME` and `end:NAME`, sleeping `ms` in between.
pub fn timed_tool(name: &str, ms: u64, log: &Log) -> Tool {
    let log = log.clone();
    let tool_name = name.to_owned();
    Tool::new(
        name,
        "Logs its run.",
        object_schema(),
        move |_a: Value, _c| {
            let log = log.clone();
            let name = tool_name.clone();
            async move {
                log.lock().unwrap().push(format!("start:{name}"));
                tokio::time::sleep(Duration::from_millis(ms)).await;
                log.lock().unwrap().push(format!("end:{name}"));
                Ok(json!(name))
            }
        },
    )
}

/// A summary of a history that ignores ids and timestamps: (type, text, tool calls, results).
pub fn content(state: &AgentState) -> Vec<String> {
    state.messages().map(|m| message_content(&m)).collect()
}

pub fn message_content(message: &Message) -> String {
    match message {
        Message::User(m) => format!(
            "user:{}",
            m.content
                .iter()
                .map(|b| serde_json::to_string(b).unwrap())
                .collect::<Vec<_>>()
                .join("|")
        ),
        Message::Assistant(m) => format!(
            "assistant:{}:{}",
            m.text_content(),
            m.tool_calls
                .iter()
                .map(|c| format!("{}/{}/{}", c.tool_call_id, c.tool_name, c.arguments))
                .collect::<Vec<_>>()
                .join(",")
        ),
        Message::ToolResult(m) => format!(
            "results:{}",
            m.results
                .iter()
                .map(|r| format!("{}={}/{}", r.tool_call_id, r.result, r.is_error))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

pub fn is_uuid_v4(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok_and(|u| u.get_version_num() == 4)
}
