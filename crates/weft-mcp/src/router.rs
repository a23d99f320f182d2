//! The MCP router (`weft mcp router`): one MCP server in front of a project's MCP servers,
//! as the Universal Agent Protocol describes its router.
//!
//! - **Tool hiding.** Instead of every downstream tool's schema, the client sees two
//!   meta-tools: `discover_tools` (`{"query": "…", "limit": N}` → the matching tools, as
//!   `{"path": "SERVER/TOOL", "description", "inputSchema"}`, best match first) and
//!   `execute_tool` (`{"path": "SERVER/TOOL", "args": {…}}` → the tool's result).
//! - **Gates.** Before a call runs, an optional [`RouterGate`] judges it (the protocol's
//!   in-process gate: `weft mcp router` checks the project's REQUIRED policies for the tool
//!   `mcp__SERVER__TOOL`); a refusal is an error result naming the reason, and the call is not
//!   made.
//! - **Output compression.** Every text block of a result goes through
//!   [`compress_output`](crate::compress_output) — ANSI stripped, JSON minified, blank runs
//!   and repeated lines folded with their count: a smaller view of the same result. Other
//!   blocks (images, resources) pass unchanged; an error result stays an error result.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig as ServerInfo,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::client::{CallFailure, McpHub, ServerTool};
use crate::compress::{compress_output, savings};
use crate::error::McpError;

/// How many tools `discover_tools` returns by default.
const DEFAULT_LIMIT: usize = 10;

/// Judges a routed call before it runs.
///
/// ```
/// use weft_mcp::RouterGate as _;
///
/// struct NoDeletes;
/// impl weft_mcp::RouterGate for NoDeletes {
///     fn check(&self, _server: &str, tool: &str, _args: &serde_json::Value) -> Result<(), String> {
///         if tool.starts_with("delete") { Err("deletes are not allowed".into()) } else { Ok(()) }
///     }
/// }
/// assert!(NoDeletes.check("files", "delete_all", &serde_json::json!({})).is_err());
/// ```
pub trait RouterGate: Send + Sync + 'static {
    /// `Err(reason)` refuses the call of `tool` of `server` with `args`. It may block (it
    /// runs on a blocking thread).
    fn check(&self, server: &str, tool: &str, args: &Value) -> Result<(), String>;
}

/// Serves the router over `(read, write)` until the client closes the connection; the
/// downstream servers are `hub`'s (started on first use, stopped by the caller); `gate`, when
/// given, judges every `execute_tool` before it runs.
///
/// # Errors
/// When the handshake fails.
pub async fn serve_router<R, W>(
    hub: Arc<McpHub>,
    gate: Option<Arc<dyn RouterGate>>,
    read: R,
    write: W,
) -> Result<(), McpError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let running = Router { hub, gate }
        .serve((read, write))
        .await
        .map_err(|e| McpError::Start {
            server: "weft-router".to_owned(),
            message: e.to_string(),
        })?;
    let _ = running.waiting().await;
    Ok(())
}

struct Router {
    hub: Arc<McpHub>,
    gate: Option<Arc<dyn RouterGate>>,
}

fn schema(value: Value) -> Arc<serde_json::Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    }
}

fn text_result(text: String, is_error: bool) -> CallToolResponse {
    CallToolResponse::Complete(if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    })
}

/// How well `tool` matches the words of `query` (0: not at all).
fn score(tool: &ServerTool, words: &[String]) -> usize {
    let name = format!("{}/{}", tool.server, tool.name).to_lowercase();
    let description = tool.description.to_lowercase();
    words
        .iter()
        .map(|w| {
            usize::from(name.contains(w.as_str())) * 3
                + usize::from(description.contains(w.as_str()))
        })
        .sum()
}

impl Router {
    async fn all_tools(&self) -> (Vec<ServerTool>, Vec<String>) {
        let mut tools = Vec::new();
        let mut problems = Vec::new();
        let names: Vec<String> = self.hub.servers().map(|(n, _)| n.to_owned()).collect();
        for name in names {
            match self.hub.list(&name).await {
                Ok(listed) => tools.extend(listed),
                Err(e) => problems.push(format!("{name}: {e}")),
            }
        }
        (tools, problems)
    }

    async fn discover(&self, arguments: &serde_json::Map<String, Value>) -> CallToolResponse {
        let query = arguments
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let limit = arguments
            .get("limit")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(DEFAULT_LIMIT)
            .max(1);
        let words: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '-')
            .filter(|w| w.len() > 1)
            .map(str::to_lowercase)
            .collect();
        let (tools, problems) = self.all_tools().await;
        let mut ranked: Vec<(usize, &ServerTool)> = tools
            .iter()
            .map(|t| (score(t, &words), t))
            .filter(|(s, _)| words.is_empty() || *s > 0)
            .collect();
        ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
        let found: Vec<Value> = ranked
            .into_iter()
            .take(limit)
            .map(|(_, t)| {
                json!({"path": format!("{}/{}", t.server, t.name), "description": t.description,
                       "inputSchema": t.input_schema})
            })
            .collect();
        let mut answer = json!({"tools": found});
        if !problems.is_empty() {
            answer["unavailable"] = json!(problems);
        }
        text_result(answer.to_string(), false)
    }

    async fn execute(
        &self,
        arguments: &serde_json::Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let Some(path) = arguments.get("path").and_then(Value::as_str) else {
            return text_result(
                "the argument `path` (\"SERVER/TOOL\", from discover_tools) is required".into(),
                true,
            );
        };
        let Some((server, tool)) = path.split_once('/') else {
            return text_result(
                format!("{path:?} is not a tool path: use \"SERVER/TOOL\" from discover_tools"),
                true,
            );
        };
        let args = arguments.get("args").cloned().unwrap_or_else(|| json!({}));
        if !args.is_object() {
            return text_result("the argument `args` must be an object".into(), true);
        }
        let server = match self.hub.server(server) {
            Ok(s) => s.clone(),
            Err(e) => return text_result(e.to_string(), true),
        };
        if let Some(gate) = &self.gate {
            let (gate, name, remote, checked) = (
                gate.clone(),
                server.name.clone(),
                tool.to_owned(),
                args.clone(),
            );
            let verdict =
                tokio::task::spawn_blocking(move || gate.check(&name, &remote, &checked)).await;
            match verdict {
                Ok(Ok(())) => {}
                Ok(Err(reason)) => {
                    return text_result(format!("{path} was refused: {reason}"), true);
                }
                Err(e) => {
                    return text_result(format!("{path} was refused: the gate failed ({e})"), true);
                }
            }
        }
        let result = match server.call(tool, args, &context.ct).await {
            Ok(result) => result,
            Err(CallFailure::Refused(m) | CallFailure::Lost(m) | CallFailure::Unavailable(m)) => {
                return text_result(format!("{path}: {m}"), true);
            }
            Err(CallFailure::Cancelled) => {
                return text_result(format!("{path}: cancelled"), true);
            }
        };
        CallToolResponse::Complete(compress_result(result))
    }
}

/// The result with every text block compressed (and structured content kept as is).
fn compress_result(mut result: CallToolResult) -> CallToolResult {
    let (mut before, mut after) = (0, 0);
    result.content = result
        .content
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(text) => {
                let out = compress_output(&text.text);
                before += out.original_bytes;
                after += out.compressed_bytes;
                ContentBlock::text(out.text)
            }
            other => other,
        })
        .collect();
    tracing::debug!(
        "mcp router: {}",
        savings(&crate::compress::Compressed {
            text: String::new(),
            original_bytes: before,
            compressed_bytes: after,
        })
    );
    result
}

impl ServerHandler for Router {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("weft-router", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Find a tool with discover_tools (a few words of what you need), then run it with execute_tool {path, args}. Results are compressed without changing their meaning: JSON is minified, terminal colours removed, and a repeated line is shown once with its count.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let discover = rmcp::model::Tool::new(
            "discover_tools",
            "Finds the tools of the project's MCP servers that match a query; returns their paths, descriptions and argument schemas.",
            schema(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What the tool should do (words matched against names and descriptions); empty lists every tool."},
                    "limit": {"type": "integer", "minimum": 1, "description": "At most this many tools (default 10)."}
                }
            })),
        );
        let execute = rmcp::model::Tool::new(
            "execute_tool",
            "Runs a tool found with discover_tools and returns its (compressed) result.",
            schema(json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "SERVER/TOOL, as discover_tools gives it."},
                    "args": {"type": "object", "description": "The tool's arguments."}
                },
                "required": ["path"]
            })),
        );
        Ok(ListToolsResult::with_all_items(vec![discover, execute]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let empty = serde_json::Map::new();
        let arguments = request.arguments.as_ref().unwrap_or(&empty);
        match request.name.as_ref() {
            "discover_tools" => Ok(self.discover(arguments).await),
            "execute_tool" => Ok(self.execute(arguments, &context).await),
            other => Err(ErrorData::invalid_params(
                format!("there is no tool {other:?}: use discover_tools and execute_tool"),
                None,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_blocks_are_compressed_and_errors_stay_errors() {
        let result = CallToolResult::error(vec![ContentBlock::text("{\n  \"a\": 1\n}")]);
        let out = compress_result(result);
        assert_eq!(out.is_error, Some(true));
        match &out.content[0] {
            ContentBlock::Text(t) => assert_eq!(t.text, "{\"a\":1}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn names_weigh_more_than_descriptions() {
        let tool = |name: &str, description: &str| ServerTool {
            server: "s".into(),
            name: name.into(),
            description: description.into(),
            input_schema: json!({}),
            read_only_hint: false,
            idempotent_hint: false,
        };
        let words = vec!["log".to_owned()];
        assert!(score(&tool("build_log", "x"), &words) > score(&tool("x", "a log"), &words));
        assert_eq!(score(&tool("x", "y"), &words), 0);
    }
}
