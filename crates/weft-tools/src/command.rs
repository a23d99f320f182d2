//! `run_command`: `sh -c COMMAND` in the OS sandbox (`weft-sandbox`), with a timeout, an
//! output cap and an environment scrubbed of secrets.
//!
//! The environment is cleared and only an allowlist is passed on (`PATH`, `LANG`, `LC_ALL`,
//! `TERM`, `USER`, `SHELL`; in mode `none` also `HOME` and `TMPDIR`, which the sandbox
//! otherwise replaces with a private scratch `/tmp`), so API keys in Weft's own environment
//! never reach the command — except the variables the session declares for its tools
//! ([`ToolEnv`](crate::ToolEnv) in the call's context). The call id is given as `WEFT_TOOL_CALL_ID` (so a command can make
//! itself idempotent) and the root as `WEFT_WORKSPACE`. The sandbox helper runs in its own
//! process group and dies with Weft (parent-death signal); a timeout or an abort kills the
//! group, and the PID namespace takes every process the command started down with it. Where
//! no sandbox can be set up, the tool refuses unless the mode is `none`.

use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use weft_provider::{Tool, ToolContext, ToolError};

use crate::parse_args;
use crate::workspace::{Mode, Workspace};

const PASSED_VARIABLES: [&str; 6] = ["PATH", "LANG", "LC_ALL", "TERM", "USER", "SHELL"];

/// Passed on only in mode `none` (the sandbox gives its own).
const UNSANDBOXED_VARIABLES: [&str; 2] = ["HOME", "TMPDIR"];

/// Limits of `run_command`.
#[derive(Debug, Clone, Copy)]
pub struct CommandLimits {
    /// Timeout when the call gives none.
    pub default_timeout: Duration,
    /// The longest timeout a call may ask for.
    pub max_timeout: Duration,
    /// Bytes kept of stdout and of stderr each; the rest is counted, dropped and marked.
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
    // Mode `strict` has no workspace: the command starts in its scratch folder.
    let cwd = if workspace.confinement().sandbox.mode == Mode::Strict {
        workspace.root().to_path_buf()
    } else {
        workspace
            .resolve(args.cwd.as_deref().unwrap_or("."))
            .map_err(|e| ToolError::new(e.to_string()))?
    };
    let timeout = match args.timeout_secs {
        Some(secs) if secs.is_finite() && secs > 0.0 => {
            Duration::from_secs_f64(secs).min(limits.max_timeout)
        }
        Some(_) => return Err(ToolError::new("timeout_secs must be a positive number")),
        None => limits.default_timeout,
    };
    let sandbox_settings = &workspace.confinement().sandbox;
    let mut env: Vec<(String, String)> = Vec::new();
    let mut names: Vec<&str> = PASSED_VARIABLES.to_vec();
    if sandbox_settings.mode == Mode::None {
        names.extend(UNSANDBOXED_VARIABLES);
    }
    for name in names {
        if let Ok(value) = std::env::var(name) {
            env.push((name.to_owned(), value));
        }
    }
    // The variables the session declares for its tools (Standard Agents `variables`),
    // resolved: the only values beyond the allowlist a command sees.
    if let Some(variables) = ctx.extensions.get::<crate::ToolEnv>() {
        env.extend(
            variables
                .iter()
                .map(|(name, value)| (name.to_owned(), value.to_owned())),
        );
    }
    env.push(("WEFT_TOOL_CALL_ID".into(), ctx.tool_call_id.clone()));
    env.push((
        "WEFT_WORKSPACE".into(),
        workspace.root().display().to_string(),
    ));
    let policy = weft_sandbox::Policy {
        mode: sandbox_settings.mode,
        workspace: Some(workspace.root().to_path_buf()),
        protected: workspace.confinement().protected.clone(),
        network: sandbox_settings.network,
        read_only: Vec::new(),
        limits: sandbox_settings.limits,
    };
    let mut sandbox = weft_sandbox::Sandbox::new(policy);
    if let Some(helper) = &sandbox_settings.helper {
        sandbox = sandbox.with_helper(helper);
    }
    let invocation = weft_sandbox::Invocation {
        argv: vec!["sh".into(), "-c".into(), args.command.clone()],
        env,
        cwd,
    };
    let command = sandbox
        .command(&invocation)
        .map_err(|e| ToolError::new(format!("run_command refused: {e}")))?;
    let mut command = tokio::process::Command::from(command);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
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
            kill_group_and_wait(pid).await;
            return Err(ToolError::transient(format!("the command timed out after {} s and was killed, with every process it started", timeout.as_secs_f64())));
        }
        () = ctx.signal.cancelled() => {
            kill_group(pid);
            let _ = child.wait().await;
            kill_group_and_wait(pid).await;
            return Err(ToolError::new("the command was cancelled and killed, with every process it started; its effects are uncertain"));
        }
    };
    // The call is over: whatever the command left running in its group goes too (inside the
    // sandbox the PID namespace has already taken it down).
    kill_group(pid);
    let (out, out_dropped) = join_output(stdout).await;
    let (err, err_dropped) = join_output(stderr).await;
    if status.code() == Some(weft_sandbox::SETUP_FAILED)
        && let Some(reason) = err.strip_prefix(weft_sandbox::HELPER_ERROR_PREFIX)
    {
        return Err(ToolError::new(format!(
            "the command's sandbox could not be set up: {}",
            reason.trim()
        )));
    }
    let marked = |text: String, dropped: usize| {
        if dropped == 0 {
            text
        } else {
            format!(
                "{text}\n[… truncated by Weft: {} of {} bytes shown …]",
                text.len(),
                text.len() + dropped
            )
        }
    };
    Ok(json!({
        "exit_code": status.code(),
        "stdout": marked(out, out_dropped),
        "stderr": marked(err, err_dropped),
        "truncated": out_dropped + err_dropped > 0,
        "dropped_bytes": out_dropped + err_dropped,
    }))
}

/// Kills the command's process group (the shell and whatever it started).
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid {
        weft_sandbox::kill_process_group(pid);
    }
}

/// Kills the group and waits (at most [`OUTPUT_GRACE`]) until none of it is left, so a
/// cancelled or timed-out call returns only once its processes are gone.
async fn kill_group_and_wait(pid: Option<u32>) {
    kill_group(pid);
    let Some(pid) = pid else { return };
    let deadline = tokio::time::Instant::now() + OUTPUT_GRACE;
    while weft_sandbox::process_group_exists(pid) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
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

/// The captured output of a stream. A process that left the group (mode `none`, `setsid`)
/// may keep the pipe open: the call waits for it at most [`OUTPUT_GRACE`].
async fn join_output(task: Option<tokio::task::JoinHandle<(Vec<u8>, usize)>>) -> (String, usize) {
    let Some(mut task) = task else {
        return (String::new(), 0);
    };
    match tokio::time::timeout(OUTPUT_GRACE, &mut task).await {
        Ok(Ok((bytes, dropped))) => (String::from_utf8_lossy(&bytes).into_owned(), dropped),
        Ok(Err(_)) => (String::new(), 0),
        Err(_) => {
            task.abort();
            (String::new(), 0)
        }
    }
}

/// How long output is awaited after the command ended.
const OUTPUT_GRACE: Duration = Duration::from_secs(5);
