//! MCP tools as Weft [`Tool`]s: named `SERVER__TOOL`, with the server's JSON Schema as their
//! parameters, so they pass the tool pipeline like any other tool (validation, policy,
//! approval, the durable ledger).
//!
//! Annotations come from the server, which Weft does not trust by default: a tool is
//! side-effect free only when it is annotated `readOnlyHint: true` **and** the project marks
//! its server `trusted`; every other MCP tool is side-effecting (its call is made durable
//! before it runs, and an interrupted call is uncertain).

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};
use weft_provider::{Tool, ToolContext, ToolError};

use crate::client::{CallFailure, McpHub, Server, ServerTool};
use crate::config::tool_name;
use crate::error::McpError;

/// The tools of one server, as agents get them, and a fingerprint of the list (it changes
/// when the server's tools do).
#[derive(Debug, Clone)]
pub struct ServerTools {
    /// The tools, in the server's order.
    pub tools: Vec<Tool>,
    /// Names the server lists that cannot be offered (too long once namespaced, or taken
    /// twice after cleaning).
    pub skipped: Vec<String>,
    /// Changes when the list does.
    pub fingerprint: String,
}

impl McpHub {
    /// The tools of server `name` as agent tools (starting the server if needed). Listing
    /// again is free until the server announces a change.
    ///
    /// # Errors
    /// An unknown server, a server that cannot be started, a failing `tools/list`.
    pub async fn tools(&self, name: &str) -> Result<ServerTools, McpError> {
        let server = self.server(name)?.clone();
        let listed = server.list().await?;
        let mut tools: Vec<Tool> = Vec::with_capacity(listed.len());
        let mut skipped = Vec::new();
        let mut fingerprint = String::new();
        for info in &listed {
            let Some(name) = tool_name(&server.name, &info.name) else {
                skipped.push(info.name.clone());
                continue;
            };
            if tools.iter().any(|t| t.name == name) {
                skipped.push(info.name.clone());
                continue;
            }
            fingerprint.push_str(
                &json!([
                    name,
                    info.description,
                    info.input_schema,
                    info.read_only_hint,
                    info.idempotent_hint
                ])
                .to_string(),
            );
            tools.push(agent_tool(&server, name, info));
        }
        Ok(ServerTools {
            tools,
            skipped,
            fingerprint,
        })
    }
}

/// Whether calls of a tool of a server change the world, as Weft treats them.
///
/// ```
/// assert!(weft_mcp::side_effects(false, true));   // an untrusted server's word is not enough
/// assert!(!weft_mcp::side_effects(true, true));
/// assert!(weft_mcp::side_effects(true, false));
/// ```
pub fn side_effects(trusted: bool, read_only_hint: bool) -> bool {
    !(trusted && read_only_hint)
}

fn agent_tool(server: &Arc<Server>, name: String, info: &ServerTool) -> Tool {
    let trusted = server.config.trusted;
    let side_effects = side_effects(trusted, info.read_only_hint);
    let idempotent = !side_effects || (trusted && info.idempotent_hint);
    let mut parameters = info.input_schema.clone();
    if !parameters.is_object() || parameters.get("type").is_none() {
        parameters = json!({"type": "object"});
    }
    let description = if info.description.is_empty() {
        format!("{} (MCP server {})", info.name, server.name)
    } else {
        info.description.clone()
    };
    let server = server.clone();
    let remote = info.name.clone();
    Tool::new(name, description, parameters, move |arguments: Value, ctx: ToolContext| {
        let server = server.clone();
        let remote = remote.clone();
        async move {
            match server.call(&remote, arguments, &ctx.signal).await {
                Ok(result) => result_value(result),
                Err(CallFailure::Refused(message)) => Err(ToolError::new(format!(
                    "MCP server {} refused the call to {remote}: {message}",
                    server.name
                ))),
                Err(CallFailure::Unavailable(message)) => Err(ToolError::transient(message)),
                Err(CallFailure::Cancelled) => Err(ToolError::new(format!(
                    "the call to {remote} of MCP server {} was cancelled; its effects are uncertain",
                    server.name
                ))),
                Err(CallFailure::Lost(message)) => {
                    let message = format!(
                        "MCP server {} gave no answer to the call to {remote}: {message}",
                        server.name
                    );
                    if side_effects {
                        Err(ToolError::uncertain(message))
                    } else {
                        Err(ToolError::transient(message))
                    }
                }
            }
        }
    })
    .with_side_effects(side_effects)
    .with_idempotent(idempotent)
}

/// What the model sees of a result: the structured content when there is some, else the
/// text of the content blocks (other blocks as JSON). An error result is a tool error.
fn result_value(result: CallToolResult) -> Result<Value, ToolError> {
    let is_error = result.is_error == Some(true);
    let text = || {
        let parts: Vec<String> = result
            .content
            .iter()
            .map(|block| match block {
                ContentBlock::Text(text) => text.text.clone(),
                other => serde_json::to_string(other).unwrap_or_default(),
            })
            .collect();
        parts.join("\n")
    };
    if is_error {
        let message = text();
        return Err(ToolError::new(if message.is_empty() {
            "the MCP tool reported an error".to_owned()
        } else {
            message
        }));
    }
    if let Some(structured) = &result.structured_content {
        return Ok(structured.clone());
    }
    Ok(Value::String(text()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn results_prefer_structured_content_and_errors_become_tool_errors() {
        let text = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert_eq!(result_value(text).unwrap(), json!("a\nb"));
        let mut structured = CallToolResult::success(vec![ContentBlock::text("{\"n\":1}")]);
        structured.structured_content = Some(json!({"n": 1}));
        assert_eq!(result_value(structured).unwrap(), json!({"n": 1}));
        let error = CallToolResult::error(vec![ContentBlock::text("no such file")]);
        assert_eq!(result_value(error).unwrap_err().message, "no such file");
    }
}
