//! The server side: Weft's agents as MCP tools. Each agent is a tool of the same name taking
//! `{"input": "…"}`; a call runs the agent (through an [`AgentRunner`], which the caller
//! provides: `weft mcp serve` starts a durable run of the project's agent) and returns its
//! output as text. A client's `notifications/cancelled` cancels the run's token.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig as ServerInfo,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

use crate::error::McpError;

/// An agent offered as an MCP tool.
///
/// ```
/// let agent = weft_mcp::ServedAgent { name: "helper".into(), description: "Helps.".into() };
/// assert_eq!(agent.name, "helper");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedAgent {
    /// The agent's name (the tool's).
    pub name: String,
    /// What it does, for the calling model.
    pub description: String,
}

/// Runs agents for MCP clients.
#[async_trait]
pub trait AgentRunner: Send + Sync + 'static {
    /// The agents to offer.
    fn agents(&self) -> Vec<ServedAgent>;

    /// Runs `agent` on `input` until it ends; its output, or why it did not complete.
    /// `signal` is cancelled when the client cancels the call.
    async fn run(
        &self,
        agent: &str,
        input: String,
        signal: CancellationToken,
    ) -> Result<String, String>;
}

/// Serves `runner`'s agents over `(read, write)` (stdin and stdout for `weft mcp serve`)
/// until the client closes the connection.
///
/// # Errors
/// When the handshake fails.
pub async fn serve<R, W>(runner: Arc<dyn AgentRunner>, read: R, write: W) -> Result<(), McpError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let handler = AgentTools { runner };
    let running = handler
        .serve((read, write))
        .await
        .map_err(|e| McpError::Start {
            server: "weft".to_owned(),
            message: e.to_string(),
        })?;
    let _ = running.waiting().await;
    Ok(())
}

struct AgentTools {
    runner: Arc<dyn AgentRunner>,
}

fn input_schema() -> Arc<serde_json::Map<String, Value>> {
    let schema = json!({
        "type": "object",
        "properties": {"input": {"type": "string", "description": "The message for the agent: what it should do."}},
        "required": ["input"],
    });
    match schema {
        Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    }
}

impl ServerHandler for AgentTools {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("weft", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Each tool runs an agent of a Weft project on the input it is given and returns the agent's output.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = input_schema();
        let tools = self
            .runner
            .agents()
            .into_iter()
            .map(|agent| rmcp::model::Tool::new(agent.name, agent.description, schema.clone()))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if !self.runner.agents().iter().any(|a| a.name == name) {
            return Err(ErrorData::invalid_params(
                format!("there is no agent {name:?}"),
                None,
            ));
        }
        let input = request
            .arguments
            .as_ref()
            .and_then(|args| args.get("input"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let Some(input) = input else {
            return Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                ContentBlock::text("the argument `input` (a string) is required"),
            ])));
        };
        let result = match self.runner.run(&name, input, context.ct.clone()).await {
            Ok(output) => CallToolResult::success(vec![ContentBlock::text(output)]),
            Err(error) => CallToolResult::error(vec![ContentBlock::text(error)]),
        };
        Ok(CallToolResponse::Complete(result))
    }
}
