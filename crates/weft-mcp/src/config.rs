//! An MCP server as `weft.toml` declares it (`[mcpServers.NAME]`): a process speaking MCP on
//! stdio (`command`, `args`, `env`) or a streamable HTTP endpoint (`url`, `headers`), plus
//! what Weft grants it (`trusted`, `network`, `readOnly`) and its timeouts.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Separates a server's name from its tool's in the names agents see (`files__read`).
pub const SEPARATOR: &str = "__";

/// Default timeout of one tool call, in seconds.
pub const DEFAULT_CALL_TIMEOUT_SECS: f64 = 300.0;

/// Default time a server has to start and answer `initialize`, in seconds.
pub const DEFAULT_STARTUP_TIMEOUT_SECS: f64 = 30.0;

/// Default number of restarts after crashes before a server is given up on for the run.
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

/// One MCP server of a project.
///
/// # Examples
///
/// ```
/// let config: weft_mcp::ServerConfig = serde_json::from_value(serde_json::json!({
///     "command": "python3", "args": ["server.py"], "trusted": true
/// })).map_err(|e| e.to_string())?;
/// assert!(config.problems("files").is_empty());
/// assert!(matches!(config.transport(), Some(weft_mcp::Transport::Stdio { .. })));
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerConfig {
    /// The program of a stdio server (found on `PATH` inside the sandbox, or absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Its environment, besides `PATH`, `LANG`, `LC_ALL`, `TERM`, `USER` and `SHELL`
    /// (nothing else of Weft's environment is passed; `${NAME}` takes a project variable).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Its working folder, relative to the workspace (default: the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The endpoint of a streamable HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent with every request (`${NAME}` takes a project variable, e.g. a
    /// token from the environment).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Whether the server's own word counts: only then does a tool annotated `readOnlyHint`
    /// run without the durable-call treatment of side-effecting tools (annotations come from
    /// the server, which Weft does not otherwise trust).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trusted: bool,
    /// Lets a stdio server use the network from inside the command sandbox (default: no
    /// network).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
    /// Extra folders a stdio server sees read-only in the sandbox (absolute, or relative to
    /// the project folder): e.g. the Python installation it runs from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<PathBuf>,
    /// Seconds one tool call may take (default 300); the server is told to cancel it then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Seconds the server has to start and initialize (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout: Option<f64>,
    /// Restarts after crashes, with exponential backoff, before the server is given up on
    /// for the run (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<u32>,
}

/// How Weft reaches a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport<'a> {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio {
        /// The program.
        command: &'a str,
        /// Its arguments.
        args: &'a [String],
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The URL.
        url: &'a str,
    },
}

impl ServerConfig {
    /// The transport: `command` or `url` (`None` when neither or both are set).
    pub fn transport(&self) -> Option<Transport<'_>> {
        match (&self.command, &self.url) {
            (Some(command), None) => Some(Transport::Stdio {
                command,
                args: &self.args,
            }),
            (None, Some(url)) => Some(Transport::Http { url }),
            _ => None,
        }
    }

    /// The call timeout.
    pub fn call_timeout(&self) -> std::time::Duration {
        seconds(self.timeout, DEFAULT_CALL_TIMEOUT_SECS)
    }

    /// The startup timeout.
    pub fn startup_timeout(&self) -> std::time::Duration {
        seconds(self.startup_timeout, DEFAULT_STARTUP_TIMEOUT_SECS)
    }

    /// Restarts allowed after crashes.
    pub fn max_restarts(&self) -> u32 {
        self.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS)
    }

    /// What is wrong with the server `name`'s configuration: `(key, sentence)` pairs, empty
    /// when it is usable.
    pub fn problems(&self, name: &str) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let mut problem = |key: &str, message: String| problems.push((key.to_owned(), message));
        if !valid_server_name(name) {
            problem(
                "",
                format!(
                    "{name:?} is not a usable server name: use 1 to 32 letters, digits or `-`, starting with a letter (its tools are named {name}{SEPARATOR}TOOL)"
                ),
            );
        }
        match (&self.command, &self.url) {
            (None, None) => problem(
                "",
                "set `command` (a stdio server) or `url` (a streamable HTTP server)".to_owned(),
            ),
            (Some(_), Some(_)) => problem("url", "set `command` or `url`, not both".to_owned()),
            (Some(command), None) => {
                if command.trim().is_empty() {
                    problem("command", "the command is empty".to_owned());
                }
                if !self.headers.is_empty() {
                    problem("headers", "headers are for `url` servers".to_owned());
                }
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    problem("url", format!("{url:?} is not an http:// or https:// URL"));
                }
                for (key, what) in [
                    (!self.args.is_empty(), "args"),
                    (!self.env.is_empty(), "env"),
                    (self.cwd.is_some(), "cwd"),
                    (self.network, "network"),
                    (!self.read_only.is_empty(), "readOnly"),
                ] {
                    if key {
                        problem(what, format!("`{what}` is for `command` servers"));
                    }
                }
            }
        }
        for header in self.headers.keys() {
            let valid = !header.is_empty()
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !valid {
                problem(
                    &format!("headers.{header}"),
                    format!("{header:?} is not an HTTP header name"),
                );
            }
        }
        for (key, value) in [
            ("timeout", self.timeout),
            ("startupTimeout", self.startup_timeout),
        ] {
            if let Some(value) = value
                && !(value.is_finite() && value > 0.0)
            {
                problem(key, "must be a positive number of seconds".to_owned());
            }
        }
        problems
    }
}

fn seconds(value: Option<f64>, default: f64) -> std::time::Duration {
    let secs = value
        .filter(|v| v.is_finite() && *v > 0.0)
        .unwrap_or(default)
        .min(86_400.0);
    std::time::Duration::from_secs_f64(secs)
}

/// Whether `name` can name a server: 1 to 32 ASCII letters, digits or `-`, starting with a
/// letter (so `NAME__TOOL` stays a tool name every provider accepts).
///
/// ```
/// assert!(weft_mcp::valid_server_name("files"));
/// assert!(!weft_mcp::valid_server_name("my_files"));
/// assert!(!weft_mcp::valid_server_name("1files"));
/// ```
pub fn valid_server_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=32).contains(&bytes.len())
        && bytes[0].is_ascii_alphabetic()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
}

/// The name agents see for `tool` of `server`: `SERVER__TOOL`, with characters providers do
/// not accept in tool names replaced by `_`; `None` when it would be longer than 64.
///
/// ```
/// assert_eq!(weft_mcp::tool_name("files", "read.file").as_deref(), Some("files__read_file"));
/// ```
pub fn tool_name(server: &str, tool: &str) -> Option<String> {
    let cleaned: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = format!("{server}{SEPARATOR}{cleaned}");
    (!cleaned.is_empty() && name.len() <= 64).then_some(name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_server_needs_exactly_one_transport() {
        let none = ServerConfig::default();
        assert_eq!(none.problems("a").len(), 1);
        let both = ServerConfig {
            command: Some("x".into()),
            url: Some("http://h".into()),
            ..ServerConfig::default()
        };
        assert_eq!(both.problems("a")[0].0, "url");
        let http = ServerConfig {
            url: Some("ftp://h".into()),
            network: true,
            ..ServerConfig::default()
        };
        let keys: Vec<String> = http.problems("a").into_iter().map(|p| p.0).collect();
        assert_eq!(keys, ["url", "network"]);
    }

    #[test]
    fn names_are_namespaced_and_cleaned() {
        assert_eq!(tool_name("s", "a/b c").unwrap(), "s__a_b_c");
        assert!(tool_name("s", &"x".repeat(70)).is_none());
        assert!(!valid_server_name("a__b"));
    }

    #[test]
    fn timeouts_default_and_stay_positive() {
        let config = ServerConfig {
            timeout: Some(-1.0),
            ..ServerConfig::default()
        };
        assert_eq!(config.call_timeout().as_secs(), 300);
        assert_eq!(
            config
                .problems("a")
                .iter()
                .filter(|p| p.0 == "timeout")
                .count(),
            1
        );
    }
}
