//! Model Context Protocol for Weft, on the official Rust SDK (`rmcp`).
//!
//! * **Client** ([`McpHub`]): a project lists MCP servers in `weft.toml`
//!   (`[mcpServers.NAME]`, [`ServerConfig`]) — stdio commands, started in the command
//!   sandbox like every process Weft starts, or streamable HTTP URLs with headers. Their
//!   tools become agent [`Tool`](weft_provider::Tool)s named `NAME__TOOL`
//!   ([`McpHub::tools`]), which pass the runtime's tool pipeline like any other. Servers
//!   start on first use, restart after a crash with backoff, and stop with
//!   [`McpHub::shutdown`]; a tool-list change the server announces is seen at the next
//!   listing.
//! * **Server** ([`serve`]): Weft's agents as MCP tools over stdio, so an MCP client (Claude
//!   Code, Cursor) can call them; what running an agent means is given by an
//!   [`AgentRunner`].
//! * **Router** ([`serve_router`]): `weft mcp router` — the project's MCP servers behind two
//!   meta-tools (`discover_tools`, `execute_tool`), their text results compressed without
//!   changing their meaning ([`compress_output`]).
//!
//! # Code map
//!
//! | module | what |
//! |---|---|
//! | `config` | [`ServerConfig`], names (`SERVER__TOOL`) |
//! | `client` | [`McpHub`]: connections, sandboxed processes, restarts, calls |
//! | `tools` | MCP tools as Weft tools: side effects, results |
//! | `serve` | agents as MCP tools ([`serve`], [`AgentRunner`]) |
//! | `router` | the MCP router ([`serve_router`]) |
//! | `compress` | meaning-preserving output compression ([`compress_output`]) |
//! | `error` | [`McpError`] |

mod client;
mod compress;
mod config;
mod error;
mod router;
mod serve;
mod tools;

pub use client::{McpHub, Sandboxing, ServerTool, absolute_against};
pub use compress::{Compressed, compress_output, expand};
pub use config::{
    DEFAULT_CALL_TIMEOUT_SECS, DEFAULT_MAX_RESTARTS, DEFAULT_STARTUP_TIMEOUT_SECS, SEPARATOR,
    ServerConfig, Transport, tool_name, valid_server_name,
};
pub use error::McpError;
pub use router::{RouterGate, serve_router};
pub use serve::{AgentRunner, ServedAgent, serve};
pub use tools::{ServerTools, side_effects};
