//! The client side: [`McpHub`] holds the MCP servers of one project for one run (or one
//! `weft mcp list`). A server is started on first use — a stdio server as a process in the
//! command sandbox, an HTTP server by connecting — and its tools are listed through the
//! SDK's response cache, which a `notifications/tools/list_changed` clears: listing again
//! before every step costs nothing until the server says its tools changed. A server that
//! died is started again on its next use, after a backoff (200 ms, doubling, at most 10 s),
//! at most `maxRestarts` times. [`McpHub::shutdown`] stops them all (a stdio server gets its
//! stdin closed, then its process group is killed).

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientCacheConfig, MAX_CLIENT_CACHE_TTL, ServiceExt as _};
use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;
use tokio_util::sync::CancellationToken;
use weft_sandbox::{Limits, Mode, Protection};

use crate::config::{ServerConfig, Transport};
use crate::error::McpError;

/// Variables of Weft's environment a stdio server gets (the rest of it never reaches it).
const PASSED_VARIABLES: [&str; 6] = ["PATH", "LANG", "LC_ALL", "TERM", "USER", "SHELL"];

/// Passed on only without a sandbox (the sandbox sets its own).
const UNSANDBOXED_VARIABLES: [&str; 2] = ["HOME", "TMPDIR"];

/// Lines of a stdio server's stderr kept for error messages.
const STDERR_LINES: usize = 20;

/// How stdio servers are confined: the command sandbox of the run's tools.
///
/// # Examples
///
/// ```
/// let sandbox = weft_mcp::Sandboxing::new(weft_sandbox::Mode::None, "/tmp");
/// assert_eq!(sandbox.mode, weft_sandbox::Mode::None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandboxing {
    /// `workspace` (default), `strict` or `none`.
    pub mode: Mode,
    /// The workspace (read-write in mode `workspace`; the servers' working folder).
    pub workspace: PathBuf,
    /// Paths under the workspace that stay read-only or hidden (the run store, the
    /// definition files).
    pub protected: Vec<(PathBuf, Protection)>,
    /// Resource limits of each server.
    pub limits: Limits,
    /// The sandbox helper program (default: the running program, which must call
    /// `weft_sandbox::run_helper_if_requested` first thing in `main`, as `weft` does).
    pub helper: Option<PathBuf>,
}

impl Sandboxing {
    /// `mode` over `workspace`, nothing protected, default limits, the running program as
    /// the helper.
    pub fn new(mode: Mode, workspace: impl Into<PathBuf>) -> Self {
        Sandboxing {
            mode,
            workspace: workspace.into(),
            protected: Vec::new(),
            limits: Limits::default(),
            helper: None,
        }
    }
}

/// A tool as a server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTool {
    /// The server.
    pub server: String,
    /// The tool's own name on the server.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// `annotations.readOnlyHint`, as the server says.
    pub read_only_hint: bool,
    /// `annotations.idempotentHint`, as the server says.
    pub idempotent_hint: bool,
}

/// The MCP servers of a project, started on demand.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), weft_mcp::McpError> {
/// use std::collections::BTreeMap;
/// use weft_mcp::{McpHub, Sandboxing, ServerConfig};
///
/// let files = ServerConfig {
///     command: Some("mcp-server-files".into()),
///     ..ServerConfig::default()
/// };
/// let sandboxing = Sandboxing::new(weft_sandbox::Mode::Workspace, "/work/project");
/// let hub = McpHub::new(BTreeMap::from([("files".to_owned(), files)]), sandboxing);
/// let listed = hub.tools("files").await?; // starts the server: tools named files__…
/// for tool in &listed.tools {
///     println!("{} (side effects: {})", tool.name, tool.side_effects);
/// }
/// hub.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct McpHub {
    servers: BTreeMap<String, Arc<Server>>,
}

impl McpHub {
    /// A hub for `servers` (already resolved: variables substituted, `readOnly` absolute),
    /// confining stdio servers with `sandboxing`. Nothing starts yet.
    pub fn new(servers: BTreeMap<String, ServerConfig>, sandboxing: Sandboxing) -> Self {
        let sandboxing = Arc::new(sandboxing);
        McpHub {
            servers: servers
                .into_iter()
                .map(|(name, config)| {
                    let server = Server {
                        name: name.clone(),
                        config,
                        sandboxing: sandboxing.clone(),
                        state: tokio::sync::Mutex::new(State::default()),
                    };
                    (name, Arc::new(server))
                })
                .collect(),
        }
    }

    /// The configured servers, by name.
    pub fn servers(&self) -> impl Iterator<Item = (&str, &ServerConfig)> {
        self.servers
            .iter()
            .map(|(name, server)| (name.as_str(), &server.config))
    }

    pub(crate) fn server(&self, name: &str) -> Result<&Arc<Server>, McpError> {
        self.servers
            .get(name)
            .ok_or_else(|| McpError::UnknownServer(name.to_owned()))
    }

    /// The tools server `name` offers now (starting it if needed).
    ///
    /// # Errors
    /// An unknown server, a server that cannot be started, a failing `tools/list`.
    pub async fn list(&self, name: &str) -> Result<Vec<ServerTool>, McpError> {
        self.server(name)?.list().await
    }

    /// Stops every server started.
    pub async fn shutdown(&self) {
        for server in self.servers.values() {
            server.shutdown().await;
        }
    }
}

/// One server and its connection.
#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) name: String,
    pub(crate) config: ServerConfig,
    sandboxing: Arc<Sandboxing>,
    state: tokio::sync::Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    connection: Option<Connection>,
    /// Starts after the first one (restarts after crashes).
    restarts: u32,
    /// Why the last connection ended, when it died.
    last_failure: Option<String>,
    /// Given up on after too many restarts.
    down: bool,
    stopped: bool,
}

struct Connection {
    service: RunningService<RoleClient, ClientConfig>,
    process: Option<Process>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("process", &self.process.as_ref().and_then(|p| p.child.id()))
            .finish_non_exhaustive()
    }
}

/// A stdio server's process.
struct Process {
    child: tokio::process::Child,
    /// Its process group (the child leads it).
    pid: Option<u32>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Process {
    fn stderr_tail(&self) -> String {
        stderr_tail(&self.stderr)
    }
}

fn stderr_tail(lines: &Mutex<VecDeque<String>>) -> String {
    lines
        .lock()
        .map(|l| l.iter().cloned().collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}

/// The wait before restart `n` (1-based): 200 ms, 400 ms, … at most 10 s.
pub(crate) fn backoff(n: u32) -> Duration {
    Duration::from_millis(200u64.saturating_mul(1 << n.saturating_sub(1).min(6)))
        .min(Duration::from_secs(10))
}

/// How a request to a server ended, when it did not answer.
#[derive(Debug)]
pub(crate) enum CallFailure {
    /// The server answered with an error (the call did not run, or failed cleanly).
    Refused(String),
    /// The connection ended or the call timed out: the effect is unknown.
    Lost(String),
    /// The call was cancelled by the run.
    Cancelled,
    /// The server could not be reached at all (the call was never sent).
    Unavailable(String),
}

impl Server {
    /// The peer of a live connection, starting (or restarting) the server when needed.
    async fn peer(&self) -> Result<Peer<RoleClient>, McpError> {
        let mut state = self.state.lock().await;
        if state.stopped {
            return Err(McpError::Request {
                server: self.name.clone(),
                message: "the server was shut down".to_owned(),
            });
        }
        if state.down {
            return Err(McpError::Down {
                server: self.name.clone(),
                restarts: self.config.max_restarts(),
                message: state.last_failure.clone().unwrap_or_default(),
            });
        }
        if let Some(connection) = &mut state.connection {
            let exited = connection
                .process
                .as_mut()
                .is_some_and(|p| !matches!(p.child.try_wait(), Ok(None)));
            if !exited
                && !connection.service.is_closed()
                && !connection.service.peer().is_transport_closed()
            {
                return Ok(connection.service.peer().clone());
            }
            // It died since its last use: note why, and start it again below.
            let why = match &mut connection.process {
                Some(process) => {
                    let status = process.child.try_wait().ok().flatten();
                    let tail = process.stderr_tail();
                    format!(
                        "its process ended ({}){}",
                        status.map_or_else(|| "still running".to_owned(), |s| s.to_string()),
                        if tail.is_empty() {
                            String::new()
                        } else {
                            format!("; its stderr ends with: {tail}")
                        }
                    )
                }
                None => "the connection closed".to_owned(),
            };
            state.last_failure = Some(why);
            if let Some(old) = state.connection.take() {
                close(old).await;
            }
            state.restarts += 1;
            let max = self.config.max_restarts();
            if state.restarts > max {
                state.down = true;
                return Err(McpError::Down {
                    server: self.name.clone(),
                    restarts: max,
                    message: state.last_failure.clone().unwrap_or_default(),
                });
            }
            let wait = backoff(state.restarts);
            tracing::warn!(server = %self.name, restart = state.restarts, ?wait, "restarting an MCP server that stopped");
            tokio::time::sleep(wait).await;
        }
        let connection = self.connect().await?;
        let peer = connection.service.peer().clone();
        state.connection = Some(connection);
        Ok(peer)
    }

    async fn connect(&self) -> Result<Connection, McpError> {
        let start_error = |message: String| McpError::Start {
            server: self.name.clone(),
            message,
        };
        let transport = self.config.transport().ok_or_else(|| McpError::Config {
            server: self.name.clone(),
            message: "set `command` or `url`, not neither or both".to_owned(),
        })?;
        let handler = client_info();
        let startup = self.config.startup_timeout();
        match transport {
            Transport::Stdio { command, args } => {
                let (mut child, stderr) = self.spawn(command, args)?;
                let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                    return Err(start_error("its stdio could not be opened".to_owned()));
                };
                let served = tokio::time::timeout(startup, handler.serve((stdout, stdin))).await;
                let service = match served {
                    Ok(Ok(service)) => service,
                    Ok(Err(error)) => {
                        kill(&mut child).await;
                        let tail = stderr_tail(&stderr);
                        return Err(start_error(format!(
                            "the MCP handshake failed: {error}{}",
                            if tail.is_empty() {
                                String::new()
                            } else {
                                format!("; its stderr ends with: {tail}")
                            }
                        )));
                    }
                    Err(_) => {
                        kill(&mut child).await;
                        return Err(start_error(format!(
                            "it did not answer `initialize` within {} s",
                            startup.as_secs_f64()
                        )));
                    }
                };
                cache_tool_lists(&service).await;
                Ok(Connection {
                    service,
                    process: Some(Process {
                        pid: child.id(),
                        child,
                        stderr,
                    }),
                })
            }
            Transport::Http { url } => {
                weft_provider::http::install_crypto_provider();
                let mut headers = std::collections::HashMap::new();
                for (name, value) in &self.config.headers {
                    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|e| start_error(format!("header {name:?}: {e}")))?;
                    let value = reqwest::header::HeaderValue::from_str(value)
                        .map_err(|e| start_error(format!("header {name}: {e}")))?;
                    headers.insert(name, value);
                }
                let config =
                    StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
                let transport = StreamableHttpClientTransport::from_config(config);
                let service = match tokio::time::timeout(startup, handler.serve(transport)).await {
                    Ok(Ok(service)) => service,
                    Ok(Err(error)) => {
                        return Err(start_error(format!("the MCP handshake failed: {error}")));
                    }
                    Err(_) => {
                        return Err(start_error(format!(
                            "it did not answer `initialize` within {} s",
                            startup.as_secs_f64()
                        )));
                    }
                };
                cache_tool_lists(&service).await;
                Ok(Connection {
                    service,
                    process: None,
                })
            }
        }
    }

    /// Starts the stdio server's process in the command sandbox.
    #[allow(clippy::type_complexity)]
    fn spawn(
        &self,
        command: &str,
        args: &[String],
    ) -> Result<(tokio::process::Child, Arc<Mutex<VecDeque<String>>>), McpError> {
        let start_error = |message: String| McpError::Start {
            server: self.name.clone(),
            message,
        };
        let sandboxing = &self.sandboxing;
        let mut env: Vec<(String, String)> = Vec::new();
        let mut names: Vec<&str> = PASSED_VARIABLES.to_vec();
        if sandboxing.mode == Mode::None {
            names.extend(UNSANDBOXED_VARIABLES);
        }
        for name in names {
            if let Ok(value) = std::env::var(name) {
                env.push((name.to_owned(), value));
            }
        }
        for (name, value) in &self.config.env {
            env.retain(|(n, _)| n != name);
            env.push((name.clone(), value.clone()));
        }
        let cwd = match (&self.config.cwd, sandboxing.mode) {
            (_, Mode::Strict) | (None, _) => sandboxing.workspace.clone(),
            (Some(cwd), _) => weft_sandbox::absolute(&sandboxing.workspace, cwd),
        };
        if !cwd.starts_with(&sandboxing.workspace) {
            return Err(start_error(format!(
                "its cwd {} is outside the workspace",
                cwd.display()
            )));
        }
        let policy = weft_sandbox::Policy {
            mode: sandboxing.mode,
            workspace: Some(sandboxing.workspace.clone()),
            protected: sandboxing.protected.clone(),
            network: self.config.network,
            read_only: self.config.read_only.clone(),
            limits: sandboxing.limits,
        };
        let mut sandbox = weft_sandbox::Sandbox::new(policy);
        if let Some(helper) = &sandboxing.helper {
            sandbox = sandbox.with_helper(helper);
        }
        let mut argv = vec![command.to_owned()];
        argv.extend(args.iter().cloned());
        let invocation = weft_sandbox::Invocation { argv, env, cwd };
        let command = sandbox
            .command(&invocation)
            .map_err(|e| start_error(e.to_string()))?;
        let mut command = tokio::process::Command::from(command);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| start_error(format!("cannot start {}: {e}", invocation.argv[0])))?;
        let lines = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(stderr) = child.stderr.take() {
            let lines = lines.clone();
            let name = self.name.clone();
            tokio::spawn(async move {
                let mut reader = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    tracing::debug!(server = %name, "{line}");
                    if let Ok(mut lines) = lines.lock() {
                        if lines.len() >= STDERR_LINES {
                            lines.pop_front();
                        }
                        let line = line
                            .strip_prefix(weft_sandbox::HELPER_ERROR_PREFIX)
                            .map_or(line.clone(), |l| format!("sandbox: {l}"));
                        lines.push_back(line.chars().take(500).collect());
                    }
                }
            });
        }
        Ok((child, lines))
    }

    /// The tools the server offers now.
    pub(crate) async fn list(&self) -> Result<Vec<ServerTool>, McpError> {
        let peer = self.peer().await?;
        let tools = peer.list_all_tools().await.map_err(|e| McpError::Request {
            server: self.name.clone(),
            message: format!("tools/list failed: {e}"),
        })?;
        Ok(tools
            .into_iter()
            .map(|tool| {
                let annotations = tool.annotations.clone().unwrap_or_default();
                ServerTool {
                    server: self.name.clone(),
                    name: tool.name.to_string(),
                    description: tool
                        .description
                        .as_deref()
                        .map(str::to_owned)
                        .or_else(|| tool.title.clone())
                        .unwrap_or_default(),
                    input_schema: Value::Object((*tool.input_schema).clone()),
                    read_only_hint: annotations.read_only_hint == Some(true),
                    idempotent_hint: annotations.idempotent_hint == Some(true),
                }
            })
            .collect())
    }

    /// Calls `tool` with `arguments`; cancelled when `signal` is (the server is told).
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Value,
        signal: &CancellationToken,
    ) -> Result<CallToolResult, CallFailure> {
        let peer = match self.peer().await {
            Ok(peer) => peer,
            Err(error) => return Err(CallFailure::Unavailable(error.to_string())),
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        let timeout = self.config.call_timeout();
        // Dropping the request (timeout, cancellation) sends `notifications/cancelled`.
        let answer = tokio::select! {
            () = signal.cancelled() => return Err(CallFailure::Cancelled),
            answer = tokio::time::timeout(timeout, peer.call_tool(params)) => answer,
        };
        match answer {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(error))) => {
                Err(CallFailure::Refused(error.message.to_string()))
            }
            Ok(Err(error)) => {
                // Give the process a moment to be reaped, so the message can say how it ended.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let detail = self.exit_detail().await;
                Err(CallFailure::Lost(format!("{error}{detail}")))
            }
            Err(_) => Err(CallFailure::Lost(format!(
                "no answer within {} s (the server was told to cancel)",
                timeout.as_secs_f64()
            ))),
        }
    }

    /// How the server's process ended, when it did (for messages).
    async fn exit_detail(&self) -> String {
        let mut state = self.state.lock().await;
        let Some(Connection {
            process: Some(process),
            ..
        }) = &mut state.connection
        else {
            return String::new();
        };
        match process.child.try_wait() {
            Ok(Some(status)) => format!("; the server's process ended ({status})"),
            _ => String::new(),
        }
    }

    async fn shutdown(&self) {
        let mut state = self.state.lock().await;
        state.stopped = true;
        if let Some(connection) = state.connection.take() {
            close(connection).await;
        }
    }
}

/// Caches `tools/list` answers until the server says its tools changed (the SDK clears the
/// cache on `notifications/tools/list_changed`, in order with the server's other messages).
async fn cache_tool_lists(service: &RunningService<RoleClient, ClientConfig>) {
    service
        .peer()
        .set_response_cache_config(
            ClientCacheConfig::default()
                .with_default_ttl(MAX_CLIENT_CACHE_TTL)
                .with_serve_stale_on_error(false),
        )
        .await;
}

/// Weft as an MCP client.
fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("weft", env!("CARGO_PKG_VERSION")),
    )
}

/// Ends a connection: the transport closes (a stdio server sees end of input), then the
/// process group goes.
async fn close(mut connection: Connection) {
    let _ = tokio::time::timeout(Duration::from_secs(2), connection.service.close()).await;
    if let Some(mut process) = connection.process.take() {
        let exited = tokio::time::timeout(Duration::from_secs(2), process.child.wait()).await;
        if exited.is_err() {
            kill(&mut process.child).await;
        }
        if let Some(pid) = process.pid {
            weft_sandbox::kill_process_group(pid);
        }
    }
}

async fn kill(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        weft_sandbox::kill_process_group(pid);
    }
    let _ = child.kill().await;
}

/// `path` absolute against `base` (for `readOnly` entries relative to the project folder).
pub fn absolute_against(base: &Path, path: &Path) -> PathBuf {
    weft_sandbox::absolute(base, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_back_off_exponentially_and_are_capped() {
        assert_eq!(backoff(1), Duration::from_millis(200));
        assert_eq!(backoff(2), Duration::from_millis(400));
        assert_eq!(backoff(40), Duration::from_secs(10));
    }
}
