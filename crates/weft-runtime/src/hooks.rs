//! External pre-tool-use hooks: scripts a project lists in `weft.toml`, asked before every
//! call of the tools they match, with the Claude Code hook contract (JSON on stdin, exit 0
//! allows, exit 2 denies with stderr as the reason). Weft fails closed: a hook that cannot
//! start, exits with another code or outlives its timeout denies the call too, saying why.
//!
//! ```toml
//! [[hooks.preToolUse]]
//! matcher = "run_command|write_file"   # tool names separated by |, or "*" (the default)
//! command = "./hooks/check.sh"         # run with `sh -c` in the project folder
//! timeout = "10s"
//! ```
//!
//! The payload: `{"hook_event_name": "PreToolUse", "session_id": RUN, "run_id": RUN,
//! "tool_name": …, "tool_input": {…}, "tool_use_id": …, "cwd": …}`.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::AsyncWriteExt as _;
use weft_provider::pipeline::{Invocation, Next, Stage, ToolLayer, ToolOutcome};
use weft_provider::tool::BoxFuture;

use crate::ledger::RunContext;

/// How long a hook may take when its definition sets no timeout.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// One pre-tool-use hook.
///
/// # Examples
///
/// ```
/// use weft_runtime::hooks::PreToolHook;
///
/// let hook = PreToolHook::new("./hooks/no-deploys.sh").matching("deploy|run_command");
/// assert!(hook.matches("deploy"));
/// assert!(!hook.matches("read_file"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreToolHook {
    /// The command, run with `sh -c`.
    pub command: String,
    /// Tool names separated by `|`, or `*` for every tool.
    #[serde(default = "every_tool")]
    pub matcher: String,
    /// Milliseconds the hook may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The folder the command runs in (the project's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
}

fn every_tool() -> String {
    "*".to_owned()
}

impl PreToolHook {
    /// A hook for every tool.
    pub fn new(command: impl Into<String>) -> Self {
        PreToolHook {
            command: command.into(),
            matcher: every_tool(),
            timeout_ms: None,
            dir: None,
        }
    }

    /// This hook, for the tools `matcher` names (`a|b`, or `*`).
    #[must_use]
    pub fn matching(mut self, matcher: impl Into<String>) -> Self {
        self.matcher = matcher.into();
        self
    }

    /// Whether the hook applies to `tool`.
    pub fn matches(&self, tool: &str) -> bool {
        self.matcher
            .split('|')
            .map(str::trim)
            .any(|m| m == "*" || m.is_empty() || m == tool)
    }

    /// Asks the hook about a call: `Err(reason)` denies it.
    async fn ask(&self, payload: &serde_json::Value) -> Result<(), String> {
        let timeout = self
            .timeout_ms
            .map_or(DEFAULT_HOOK_TIMEOUT, Duration::from_millis);
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        let mut child = command.spawn().map_err(|e| {
            format!(
                "the pre-tool-use hook `{}` could not start: {e}",
                self.command
            )
        })?;
        if let Some(mut stdin) = child.stdin.take() {
            let body = payload.to_string();
            // A hook that does not read its input is fine.
            let _ = stdin.write_all(body.as_bytes()).await;
        }
        let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
            Ok(Ok(output)) => output,
            Ok(Err(e)) => {
                return Err(format!(
                    "the pre-tool-use hook `{}` failed: {e}",
                    self.command
                ));
            }
            Err(_) => {
                return Err(format!(
                    "the pre-tool-use hook `{}` took longer than {} ms, so the call was denied",
                    self.command,
                    timeout.as_millis()
                ));
            }
        };
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        match output.status.code() {
            Some(0) => match deny_reason(&output.stdout) {
                Some(reason) => Err(reason),
                None => Ok(()),
            },
            Some(2) => Err(if stderr.is_empty() {
                format!("denied by the pre-tool-use hook `{}`", self.command)
            } else {
                stderr
            }),
            code => Err(format!(
                "the pre-tool-use hook `{}` failed ({}){}, so the call was denied",
                self.command,
                code.map_or_else(
                    || "killed by a signal".to_owned(),
                    |c| format!("exit code {c}")
                ),
                if stderr.is_empty() {
                    String::new()
                } else {
                    format!(": {stderr}")
                }
            )),
        }
    }
}

/// A JSON decision on a hook's stdout (`hookSpecificOutput.permissionDecision = "deny"`,
/// Claude Code's format), when there is one.
fn deny_reason(stdout: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(stdout).ok()?;
    let output = value.get("hookSpecificOutput")?;
    (output.get("permissionDecision")?.as_str()? == "deny").then(|| {
        output
            .get("permissionDecisionReason")
            .and_then(|r| r.as_str())
            .unwrap_or("denied by a pre-tool-use hook")
            .to_owned()
    })
}

/// The hooks stage of the pipeline (a sub-agent's calls pass the same hooks).
#[derive(Clone)]
pub(crate) struct HooksLayer {
    run: Arc<RunContext>,
    hooks: Arc<[PreToolHook]>,
}

impl HooksLayer {
    pub(crate) fn new(run: Arc<RunContext>, hooks: Vec<PreToolHook>) -> Self {
        HooksLayer {
            run,
            hooks: hooks.into(),
        }
    }
}

impl ToolLayer for HooksLayer {
    fn stage(&self) -> Stage {
        Stage::Hooks
    }

    fn for_child(&self) -> Option<Arc<dyn ToolLayer>> {
        Some(Arc::new(self.clone()))
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        if !self.hooks.iter().any(|h| h.matches(&inv.tool.name)) {
            return next.run(inv);
        }
        Box::pin(async move {
            let payload = json!({
                "hook_event_name": "PreToolUse",
                "session_id": self.run.run_id(),
                "run_id": self.run.run_id(),
                "agent_id": self.run.agent_id(),
                "tool_name": inv.tool.name,
                "tool_input": inv.arguments,
                "tool_use_id": inv.call.tool_call_id,
                "cwd": std::env::current_dir().ok(),
            });
            for hook in self.hooks.iter().filter(|h| h.matches(&inv.tool.name)) {
                if let Err(reason) = hook.ask(&payload).await {
                    return ToolOutcome::Refused {
                        stage: Stage::Hooks,
                        reason,
                    };
                }
            }
            next.run(inv).await
        })
    }
}
