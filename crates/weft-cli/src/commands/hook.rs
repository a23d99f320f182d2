//! `weft hook <event>`: a harness's hook. Reads the harness's JSON payload on stdin and
//! answers in that harness's format, with the harness's exit codes (see weft-gate's `hook`).

use std::io::Read as _;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use weft_gate::{Harness, HookEvent, run_hook};

/// The events.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum EventArg {
    /// A session begins: prints the `<uap-context>` block; always exits 0.
    SessionStart,
    /// Before a tool call: runs the gates; exit 2 denies.
    PreToolUse,
    /// After a tool call: post-exec policies.
    PostToolUse,
    /// Before context compaction: saves the session's protocol state.
    PreCompact,
    /// After context compaction (Claude Code `PostCompact`): records it; session start with
    /// `source: compact` injects the saved state.
    PostCompact,
    /// A prompt was submitted: prints the task's class and the loop's plan.
    UserPromptSubmit,
    /// The agent wants to stop: runs the completion checklist; exit 2 refuses.
    Stop,
    /// A sub-agent wants to stop.
    SubagentStop,
}

/// The harnesses.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum HarnessArg {
    /// Detect from the payload (Cursor's fields, else Claude Code's contract).
    Auto,
    /// Claude Code.
    Claude,
    /// Factory (Claude Code's contract).
    Factory,
    /// Cursor.
    Cursor,
    /// OpenAI Codex CLI (Claude Code's contract).
    Codex,
}

/// `weft hook` flags.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes follow the harness's hook contract, not Weft's usual table:\n  0  allow the call / let the agent stop / context printed (session-start always exits 0)\n  2  deny the tool call (reason on stderr) or refuse to stop while a required completion gate fails\nA payload that cannot be read is denied at pre-tool-use (fail-closed)."
)]
pub(crate) struct HookArgs {
    /// The harness event.
    #[arg(value_enum)]
    event: EventArg,
    /// Whose payload and answer format.
    #[arg(long, value_enum, default_value = "auto")]
    harness: HarnessArg,
}

pub(crate) fn run(args: HookArgs) -> anyhow::Result<ExitCode> {
    let event = match args.event {
        EventArg::SessionStart => HookEvent::SessionStart,
        EventArg::PreToolUse => HookEvent::PreToolUse,
        EventArg::PostToolUse => HookEvent::PostToolUse,
        EventArg::PreCompact => HookEvent::PreCompact,
        EventArg::PostCompact => HookEvent::PostCompact,
        EventArg::UserPromptSubmit => HookEvent::UserPromptSubmit,
        EventArg::Stop => HookEvent::Stop,
        EventArg::SubagentStop => HookEvent::SubagentStop,
    };
    let harness = match args.harness {
        HarnessArg::Auto => None,
        HarnessArg::Claude | HarnessArg::Factory => Some(Harness::Claude),
        HarnessArg::Cursor => Some(Harness::Cursor),
        HarnessArg::Codex => Some(Harness::Codex),
    };
    let mut input = Vec::new();
    // An unreadable stdin is an unreadable payload: run_hook answers it (deny / fail-open).
    let _ = std::io::stdin().read_to_end(&mut input);
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    let answer = run_hook(event, harness, &input, &cwd);
    print!("{}", answer.stdout);
    eprint!("{}", answer.stderr);
    Ok(ExitCode::from(answer.exit_code))
}
