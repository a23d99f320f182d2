//! `run_command`: `sh -c COMMAND` inside the workspace, with a timeout, an output cap and an
//! environment scrubbed of secrets.
//!
//! The environment is cleared and only an allowlist is passed on (`PATH`, `HOME`, `LANG`,
//! `LC_ALL`, `TERM`, `TMPDIR`, `USER`, `SHELL`), so API keys in Weft's own environment never
//! reach the command. The call id is given as `WEFT_TOOL_CALL_ID` (so a command can make
//! itself idempotent) and the root as `WEFT_WORKSPACE`. The command runs in its own process
//! group; a timeout or an abort kills the whole group.

use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use weft_provider::{Tool, ToolContext, ToolError};

use crate::parse_args;
use crate::workspace::Workspace;

const PASSED_VARIABLES: [&str; 8] = [
    "PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "SHELL",
];

/// Limits of `run_command`.
#[derive(Debug, Clone, Copy)]
pub struct CommandLimits {
    /// Timeout when the call gives none.
    pub default_timeout: Duration,
    /// The longest timeout a call may ask for.
    pub max_timeout: Duration,
    /// Bytes kept of stdout and of stderr each; the rest is counted and dropped.
    pub output_cap: usize,
}

impl Default for CommandLimits {
    fn default() -> Self {
        CommandLimits {
            default_timeout: Duration::from_secs(60),
            max_timeout: Duration::from_secs(600),
            output_cap: 64 * 1024,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandArgs {
    command: String,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    timeout_secs: Option<f64>,
}

/// `run_command {command, cwd?, timeout_secs?}` → `{exit_code, stdout, stderr, truncated}`.
/// A non-zero exit is a normal result; a timeout or an abort is an error.
pub fn run_command(workspace: &Workspace, limits: CommandLimits) -> Tool {
    let workspace = workspace.clone();
    Tool::new(
        "run_command",
        "Run a shell command (sh -c) in the workspace. Returns exit_code, stdout and stderr (capped). WEFT_TOOL_CALL_ID holds this call's id.",
        json!({"type": "object", "properties": {
            "command": {"type": "string"},
            "cwd": {"type": "string", "description": "Folder relative to the workspace root"},
            "timeout_secs": {"type": "number", "exclusiveMinimum": 0}},
            "required": ["command"], "additionalProperties": false}),
        move |arguments: Value, ctx: ToolContext| {
            let workspace = workspace.clone();
            async move {
                let args: CommandArgs = parse_args("run_command", arguments)?;
                run(&workspace, limits, args, ctx).await
            }
        },
    )
    .with_side_effects(true)
    .with_idempotent(false)
}

async fn run(
    workspace: &Workspace,
    limits: CommandLimits,
    args: CommandArgs,
    ctx: ToolContext,
) -> Result<Value, ToolError> {
    let cwd = workspace
        .resolve(args.cwd.as_deref().unwrap_or("."))
        .map_err(|e| ToolError::new(e.to_string()))?;
    let timeout = match args.timeout_secs {
        Some(secs) if secs.is_finite() && secs > 0.0 => {
            Duration::from_secs_f64(secs).min(limits.max_timeout)
        }
        Some(_) => return Err(ToolError::new("timeout_secs must be a positive number")),
        None => limits.default_timeout,
    };
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(&args.command)
        .current_dir(&cwd)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    for name in PASSED_VARIABLES {
        if let Ok(value) = std::env::var(name) {
            command.env(name, value);
        }
    }
    command.env("WEFT_TOOL_CALL_ID", &ctx.tool_call_id);
    command.env("WEFT_WORKSPACE", workspace.root());
    let mut child = command
        .spawn()
        .map_err(|e| ToolError::new(format!("cannot start the command: {e}")))?;
    let pid = child.id();
    let stdout = child
        .stdout
        .take()
        .map(|s| tokio::spawn(capped(s, limits.output_cap)));
    let stderr = child
        .stderr
        .take()
        .map(|s| tokio::spawn(capped(s, limits.output_cap)));
    let status = tokio::select! {
        status = child.wait() => status.map_err(|e| ToolError::new(format!("the command failed: {e}")))?,
        () = tokio::time::sleep(timeout) => {
            kill_group(pid);
            let _ = child.wait().await;
            return Err(ToolError::transient(format!("the command timed out after {} s and was killed", timeout.as_secs_f64())));
        }
        () = ctx.signal.cancelled() => {
            kill_group(pid);
            let _ = child.wait().await;
            return Err(ToolError::new("the command was cancelled"));
        }
    };
    let (out, out_dropped) = join_output(stdout).await;
    let (err, err_dropped) = join_output(stderr).await;
    Ok(json!({
        "exit_code": status.code(),
        "stdout": out,
        "stderr": err,
        "truncated": out_dropped + err_dropped > 0,
        "dropped_bytes": out_dropped + err_dropped,
    }))
}

/// Kills the command's process group (the shell and whatever it started).
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

async fn capped(mut reader: impl AsyncRead + Unpin, cap: usize) -> (Vec<u8>, usize) {
    let mut kept = Vec::new();
    let mut dropped = 0usize;
    let mut buffer = [0u8; 8192];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
                dropped += n.saturating_sub(room);
            }
        }
    }
    (kept, dropped)
}

async fn join_output(task: Option<tokio::task::JoinHandle<(Vec<u8>, usize)>>) -> (String, usize) {
    match task {
        Some(task) => match task.await {
            Ok((bytes, dropped)) => (String::from_utf8_lossy(&bytes).into_owned(), dropped),
            Err(_) => (String::new(), 0),
        },
        None => (String::new(), 0),
    }
}
