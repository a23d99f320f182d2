//! Errors of the MCP client and server.

/// Why an MCP server could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// No server of that name is configured.
    #[error("there is no MCP server {0:?} in weft.toml's [mcpServers]")]
    UnknownServer(String),
    /// The server's configuration is unusable.
    #[error("MCP server {server}: {message}")]
    Config {
        /// The server.
        server: String,
        /// What is wrong.
        message: String,
    },
    /// The server could not be started or connected to.
    #[error("MCP server {server} could not be started: {message}")]
    Start {
        /// The server.
        server: String,
        /// Why (with the tail of its stderr, for a process).
        message: String,
    },
    /// The server crashed too often: it is not started again in this run.
    #[error("MCP server {server} stopped {restarts} times and is not started again: {message}")]
    Down {
        /// The server.
        server: String,
        /// Restarts tried.
        restarts: u32,
        /// The last failure.
        message: String,
    },
    /// A request to the server failed.
    #[error("MCP server {server}: {message}")]
    Request {
        /// The server.
        server: String,
        /// What failed.
        message: String,
    },
}
