//! `weft run [PROJECT_DIR] [--agent NAME] [--model REF] "input"`: runs a Standard Agents
//! project's agent, checkpointed in the store (`.weft/weft.db` by default).
//!
//! On a terminal: streamed text, reasoning dimmed, each tool call with its arguments and a
//! result summary, a spinner while the model thinks, and a closing line with steps, tokens,
//! cost and the run id. `--json`: one JSON event per line (schema in
//! docs/architecture/weft-standard.md), `run_start` first. Ctrl-C stops cleanly and prints
//! how to resume. Exit codes: 0 completed, 1 the agent failed, 2 usage or definition error,
//! 130 interrupted.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use serde_json::Value;
use weft_runtime::budget::Budget;
use weft_runtime::event::{AgentPath, EventKind, RunEvent, RunEvents};
use weft_runtime::{RunEnd, RunHandle, Runtime};
use weft_standard::{AgentDefinition, Launch, Project, StandardSessions};
use weft_store::{Durability, Runs as _, Store, Threads as _};

/// `weft run` flags.
#[derive(Debug, Clone, Args)]
#[command(
    after_help = "Examples:\n  weft init demo && weft run demo \"Say hello\"\n  weft run demo --continue RUN \"And now in French\"   go on with RUN's conversation\n  weft run demo --agent review_pair --json \"Write a haiku\"\n\n\
Budgets (--max-steps, --max-total-tokens, --max-cost, --max-time, or weft.toml's [budget]) stop the whole run, failed, when reached; \
a run without one stops after 100 steps.\n\n\
Approvals: tools listed in weft.toml's `requiresApproval` (or an agent's, or a tool marked `requiresApproval = true`) wait for you. \
On a terminal you are asked inline; without one (or with --no-input) the run suspends with exit code 4 and prints each pending \
decision with the commands to take it: `weft approve RUN ID`, `weft deny RUN ID --reason \"…\"`, then `weft resume RUN`.\n\n\
Exit codes: 0 completed, 1 the agent failed (sessionFail, error, a budget reached), 2 usage or definition error, \
3 a resume stopped on an uncertain call, 4 suspended awaiting a decision, 5 another process drives the run, 130 interrupted."
)]
pub(crate) struct RunArgs {
    /// The agent to run (default: the project's `defaultAgent`, or its only agent).
    #[arg(long)]
    agent: Option<String>,
    /// The model for every prompt, as PROVIDER:MODEL (overrides the prompts' models).
    #[arg(long, short = 'm')]
    model: Option<String>,
    /// Print one JSON event per line instead of the live view.
    #[arg(long)]
    json: bool,
    /// `sync`: a tool result is durable before the run goes on (a recorded call never runs
    /// twice); `async`: faster, may lose the last step on a crash.
    #[arg(long, default_value = "sync", value_parser = ["sync", "async"])]
    durability: String,
    /// The store: `sqlite:PATH` or `postgres://…` (default: WEFT_DATABASE_URL, else the
    /// project's `.weft/weft.db`, whatever the working directory).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// The folder the agent's tools work in (default: the project folder), e.g. an existing
    /// repository.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// How commands are sandboxed: `workspace` (read-write workspace, read-only system, no
    /// network), `strict` (a scratch folder only) or `none` (unconfined; announced). Default:
    /// weft.toml's `sandbox`, else `workspace`.
    #[arg(long, value_name = "MODE")]
    sandbox: Option<weft_tools::Mode>,
    /// Run under a profile: `runtime` is the Agent Runtime Spec's (only `complete_task` ends
    /// the task, recovery at the turn limit, the policy stage, the state machine; see
    /// docs/runtime-profile.md). Default: on when weft.toml has a `[runtime]` table.
    #[arg(long, value_name = "PROFILE", value_parser = ["runtime"])]
    profile: Option<String>,
    /// Stop the run (failed, exit 1) before a model call past this many steps. Default:
    /// weft.toml's `[budget] maxSteps`, else 100.
    #[arg(long, value_name = "N")]
    max_steps: Option<u64>,
    /// Stop the run before a model call once it has used this many tokens (input + output).
    #[arg(long, value_name = "N")]
    max_total_tokens: Option<u64>,
    /// Stop the run once it has cost this much (US dollars); needs the price of its models
    /// (a run whose price is unknown is refused, exit 2: see --pricing).
    #[arg(long, value_name = "AMOUNT")]
    max_cost: Option<f64>,
    /// Model prices over Weft's built-in table and the project's `pricing` key: a TOML file
    /// in the table's format (`[openai]` then `"gpt-4o" = { input = 2.5, output = 10 }`, US
    /// dollars per million tokens; `"*"` prices every model of a provider).
    #[arg(long, value_name = "FILE")]
    pricing: Option<PathBuf>,
    /// Stop the run after this long (`90s`, `10m`, `1h30m`), even in the middle of a tool.
    #[arg(long, value_name = "DURATION", value_parser = weft_runtime::budget::parse_duration)]
    max_time: Option<std::time::Duration>,
    /// Continue the conversation of THREAD (a thread id, or a run id or unique prefix of
    /// one: its thread): a new run on the same thread, the input as the next user message,
    /// the agent seeing everything said before.
    #[arg(long = "continue", value_name = "THREAD")]
    continue_thread: Option<String>,
    /// Queue a call of the tool NAME on the `--continue` thread instead of sending a
    /// message (Standard Agents `queueTool()`): a run starts on the thread and its first step
    /// runs the call (through the same checks as the model's calls) before the model is
    /// asked; a call of an `ai_human` agent's tool hands the thread over to it. When another
    /// process drives a run of the thread, the call is only queued (its next run takes it).
    #[arg(long, value_name = "NAME", requires = "continue_thread")]
    queue_tool: Option<String>,
    /// The arguments of the `--queue-tool` call, a JSON object (default `{}`).
    #[arg(long, value_name = "JSON", requires = "queue_tool")]
    tool_args: Option<String>,
    /// Never ask anything on the terminal: a call that needs approval suspends the run
    /// (exit 4) instead of being asked inline.
    #[arg(long)]
    no_input: bool,
    /// The endpoint of the run's model provider (a proxy, a local server), as
    /// `http://…` or `https://…`: overrides weft.toml's `[providers.NAME] baseUrl` and the
    /// environment, and is recorded with the run so `weft resume` uses it too.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// `[PROJECT_DIR] INPUT`: the project folder (default: the working directory) and the
    /// message; without INPUT the message is read from standard input (a lone argument
    /// that is a project folder is the folder: `echo hi | weft run demo`).
    #[arg(value_name = "ARGS", num_args = 0..=2)]
    args: Vec<String>,
}

/// What one run of `weft run` left behind (for `weft chat`'s next message).
#[derive(Debug, Default)]
struct Started {
    /// The run's thread.
    thread: Option<String>,
    /// The run's error, when it failed.
    error: Option<String>,
}

/// Runs `weft run`.
pub(crate) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    run_once(args, &mut Started::default())
}

/// `weft chat [PROJECT_DIR]`: one run per message read from standard input, each on the
/// previous one's thread (`--continue`), until end of input or `/exit`.
pub(crate) fn chat(mut args: RunArgs) -> anyhow::Result<ExitCode> {
    let dir = match args.args.as_slice() {
        [] => ".".to_owned(),
        [dir] => dir.clone(),
        _ => anyhow::bail!("weft chat takes a project folder only; type the messages"),
    };
    let terminal = std::io::stdin().is_terminal();
    if terminal {
        eprintln!("weft chat: one message per line; /exit or Ctrl-D ends the chat");
    }
    let mut code = ExitCode::SUCCESS;
    let mut started = Started::default();
    loop {
        if terminal {
            eprint!("you> ");
            let _ = std::io::stderr().flush();
        }
        let mut line = String::new();
        if std::io::stdin()
            .read_line(&mut line)
            .context("cannot read the next message")?
            == 0
        {
            break;
        }
        let message = line.trim();
        if message == "/exit" {
            break;
        }
        if message.is_empty() {
            continue;
        }
        args.args = vec![dir.clone(), message.to_owned()];
        code = run_once(args.clone(), &mut started)?;
        if let Some(thread) = &started.thread {
            args.continue_thread = Some(thread.clone());
        }
        if started
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("CONTEXT_LENGTH_EXCEEDED"))
        {
            let thread = started.thread.as_deref().unwrap_or("THREAD");
            eprintln!(
                "weft: the conversation no longer fits the model's context window. Go on from an earlier point: \
                 weft checkpoints list {thread}, then weft fork {thread} --at N and weft chat {dir} --continue NEW_THREAD; \
                 or start a new chat: weft chat {dir}"
            );
            return Ok(code);
        }
    }
    Ok(code)
}

fn run_once(args: RunArgs, started: &mut Started) -> anyhow::Result<ExitCode> {
    let (dir, input) = match args.args.as_slice() {
        [] => (PathBuf::from("."), None),
        [dir] if super::location::is_project(std::path::Path::new(dir)) => {
            (PathBuf::from(dir), None)
        }
        [input] => (PathBuf::from("."), Some(input.clone())),
        [dir, input] => (PathBuf::from(dir), Some(input.clone())),
        _ => anyhow::bail!("give at most a project folder and an input"),
    };
    let project = match super::location::load_project(&dir)? {
        Ok(project) => project,
        Err(code) => return Ok(code),
    };
    let agent = match &args.agent {
        Some(name) => project.agent(name).with_context(|| {
            format!(
                "the project has no agent {name:?}; it has: {}",
                names(&project)
            )
        })?,
        None => project.default_agent().with_context(|| {
            format!(
                "the project has several agents and no defaultAgent; pick one with --agent ({})",
                names(&project)
            )
        })?,
    };
    for warning in project.warnings(&agent.name) {
        eprintln!("weft: warning: {warning}");
    }
    super::telemetry::start(&project.telemetry().unwrap_or_default());
    let base_urls = match weft_standard::preflight::check(
        &project,
        agent,
        args.model.as_deref(),
        args.base_url.as_deref(),
        &providers(),
        super::models::local_model_check,
    ) {
        Ok(base_urls) => base_urls,
        Err(problems) => {
            eprintln!("weft: {} cannot run (nothing was recorded):", dir.display());
            for problem in problems {
                eprintln!("  {problem}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    let input = match (input, &args.queue_tool) {
        // A run for the queued call: no new message.
        (None, Some(_)) => String::new(),
        (Some(_), Some(_)) => {
            eprintln!("weft: --queue-tool takes no message: the queued call is the run's work");
            return Ok(ExitCode::from(2));
        }
        (Some(input), None) => input,
        (None, None) => read_input()?,
    };
    anyhow::ensure!(
        args.queue_tool.is_some() || !input.trim().is_empty(),
        "the input is empty: give a message to the agent"
    );
    // The project's prices go to the runtime; --pricing is recorded with the run, so a
    // resume keeps charging at it.
    let prices = super::pricing::project_prices(Some(&project))
        .and_then(|p| Ok((p, super::pricing::pricing_file(args.pricing.as_deref())?)));
    let prices = match prices {
        Ok(prices) => prices,
        Err(message) => {
            eprintln!("weft: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    let runtime = super::runs::runtime()?;
    let code = runtime.block_on(drive(
        &project, agent, &args, input, base_urls, prices, started,
    ));
    // An approval question left unanswered (the run was stopped) must not keep the process.
    runtime.shutdown_background();
    code
}

fn names(project: &Project) -> String {
    project
        .agents()
        .map(|a| a.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn read_input() -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    let mut text = String::new();
    if stdin.is_terminal() {
        eprint!("you> ");
        let _ = std::io::stderr().flush();
        stdin
            .read_line(&mut text)
            .context("cannot read the input")?;
    } else {
        stdin
            .lock()
            .read_to_string(&mut text)
            .context("cannot read the input")?;
    }
    Ok(text.trim_end().to_owned())
}

/// The model providers of `weft run` and `weft resume`: the runtime's defaults (built-ins
/// and `scripted-turns:`) plus the embedded local model.
pub(crate) fn providers() -> weft_provider::ProviderRegistry {
    let mut providers = weft_runtime::default_providers();
    providers.register(weft_local::NAME, weft_local::provider);
    providers
}

async fn drive(
    project: &Project,
    agent: &AgentDefinition,
    args: &RunArgs,
    input: String,
    base_urls: std::collections::BTreeMap<String, String>,
    (prices, pricing): (
        weft_provider::pricing::Prices,
        Option<weft_provider::pricing::PriceTable>,
    ),
    started: &mut Started,
) -> anyhow::Result<ExitCode> {
    let store_url = super::location::store_url(args.store.as_deref(), Some(project.dir()))?;
    // The project's secretPatterns: added by the runtime when the run starts (the
    // sessions' redactor), as for `weft resume` and `weft serve`.
    let store = super::location::open_or_create(&store_url).await?;
    super::confine::announce(project, args.sandbox);
    let side_a = &agent.side_a;
    let prompt_a = project.prompt(&side_a.prompt).context("side A's prompt")?;
    let mut model_override = args.model.clone();
    if model_override.is_none() && project.model_of(prompt_a).is_none() {
        // Neither --model nor the project names a model: the embedded default (issue 6).
        let reference = super::models::default_model()?;
        if reference.provider.name == weft_local::NAME {
            weft_local::configure_threads();
        }
        model_override = Some(reference.to_reference_string());
    }
    let launch = Launch {
        workspace: args.workspace.clone(),
        model: model_override,
        sandbox: args.sandbox.map(|m| m.as_str().to_owned()),
        base_urls,
        durability: if args.durability == "async" {
            Durability::Async
        } else {
            Durability::Sync
        },
        pricing,
        budget: Budget {
            max_steps: args.max_steps,
            max_total_tokens: args.max_total_tokens,
            max_cost: args.max_cost,
            max_time: args.max_time,
        },
        profile: args.profile.clone(),
    };
    let spec = launch.spec(project, agent, input)?;
    let runtime = interactive(runtime(store, prices), args.no_input);
    // `--continue`: a thread id, or a run (id or prefix) whose thread goes on.
    let thread = match &args.continue_thread {
        Some(given) => Some(match runtime.store().thread(given).await? {
            Some(thread) => thread.id,
            None => match super::runs::find_run(runtime.store(), given).await? {
                Some(run) => run.thread_id,
                None => {
                    eprintln!(
                        "weft: --continue {given}: no thread or run with that id in {} (see weft runs list)",
                        runtime.store().location()
                    );
                    return Ok(ExitCode::from(2));
                }
            },
        }),
        None => None,
    };
    if let (Some(tool), Some(thread)) = (&args.queue_tool, &thread) {
        if !queue_tool(&runtime, thread, tool, args.tool_args.as_deref()).await? {
            return Ok(ExitCode::from(2));
        }
        if let Some(run) = runtime
            .store()
            .thread_runs(thread)
            .await?
            .into_iter()
            .next()
            && weft_runtime::ownership::effective_status(runtime.store(), &run)
                == weft_store::RunStatus::Running
        {
            println!(
                "queued on thread {thread}: run {} is in progress there; the thread's next run takes it",
                run.run_id
            );
            return Ok(ExitCode::SUCCESS);
        }
    }
    let handle = match runtime.start_on(thread.as_deref(), spec, true).await {
        Ok(handle) => handle,
        Err(error) => {
            eprintln!("weft: {error}");
            return Ok(ExitCode::from(error.exit_code()));
        }
    };
    let run_id = handle.id().to_owned();
    let code = present(&runtime, handle, &agent.name, args.json, false).await?;
    if let Some(record) = runtime.store().run(&run_id).await? {
        started.thread = Some(record.thread_id);
        started.error = record.error;
    }
    Ok(code)
}

/// Queues the `--queue-tool` call on `thread`; `false` (after saying why) when it cannot be.
async fn queue_tool(
    runtime: &Runtime,
    thread: &str,
    tool: &str,
    arguments: Option<&str>,
) -> anyhow::Result<bool> {
    let arguments = match arguments.map(serde_json::from_str::<serde_json::Value>) {
        None => serde_json::json!({}),
        Some(Ok(value)) if value.is_object() => value,
        Some(Ok(_)) => {
            eprintln!("weft: --tool-args must be a JSON object");
            return Ok(false);
        }
        Some(Err(error)) => {
            eprintln!("weft: --tool-args is not JSON: {error}");
            return Ok(false);
        }
    };
    match runtime.queue_tool(thread, tool, arguments).await {
        Ok(_) => Ok(true),
        Err(error) => {
            eprintln!("weft: {error}");
            Ok(false)
        }
    }
}

/// The runtime of `weft run` and `weft resume`: the store, every provider (the embedded
/// local model included), Standard Agents sessions (whose tools come from the project) and
/// the prices new model calls are charged at.
pub(crate) fn runtime(store: Store, prices: weft_provider::pricing::Prices) -> Runtime {
    Runtime::new(store)
        .with_providers(providers())
        .with_sessions(Arc::new(StandardSessions))
        .with_prices(prices)
}

/// `runtime`, asking approvals inline when standard input is a terminal (and `--no-input`
/// was not given); otherwise such calls suspend the run. The policy is the same either way.
pub(crate) fn interactive(runtime: Runtime, no_input: bool) -> Runtime {
    if !no_input && std::io::stdin().is_terminal() {
        runtime.with_approver(super::approver::TerminalApprover::shared())
    } else {
        runtime
    }
}

/// Shows a run being driven (the live view or JSON lines), stops it cleanly on Ctrl-C,
/// SIGTERM or SIGHUP (a second signal exits at once), and reports how it ended. Exit codes:
/// 0 completed, 1 failed, 3 stopped on an uncertain call, 4 awaiting a decision, 5 owned by
/// another process, 130 interrupted.
pub(crate) async fn present(
    runtime: &Runtime,
    mut handle: RunHandle,
    agent: &str,
    json: bool,
    resumed: bool,
) -> anyhow::Result<ExitCode> {
    let run_id = handle.id().to_owned();
    let colors = !json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    if !json {
        let resumed = if resumed { " · resumed" } else { "" };
        println!(
            "{}",
            paint(
                colors,
                "2",
                &format!("run {run_id} · agent {agent}{resumed}")
            )
        );
    }
    let renderer = handle
        .take_events()
        .map(|rx| tokio::spawn(render(rx, json, colors)));
    let watcher = tokio::spawn(super::signals::stop_on_signals(handle.abort_handle()));
    let outcome = handle.outcome().await;
    watcher.abort();
    let rendered = match renderer {
        Some(renderer) => renderer.await.unwrap_or_default(),
        None => Rendered::default(),
    };
    let text_shown = rendered.text_shown;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => {
            let code = error.exit_code();
            if json {
                // The run's store failed or another process took the run over: this end
                // is not in the log.
                let end = RunEvent {
                    seq: rendered.last_seq + 1,
                    timestamp: weft_store::now_string(),
                    run_id: run_id.clone(),
                    agent: AgentPath::root(agent),
                    turn: 0,
                    tool_call_id: None,
                    kind: EventKind::Error {
                        message: error.to_string(),
                        reason: None,
                    },
                };
                println!("{}", serde_json::to_string(&end)?);
            }
            eprintln!("weft: {error}");
            return Ok(ExitCode::from(code));
        }
    };
    let code = outcome.exit_code();
    let word = match &outcome.end {
        RunEnd::Completed { .. } => "completed",
        RunEnd::Failed { .. } => "failed",
        RunEnd::Interrupted => "interrupted",
        RunEnd::NeedsApproval { .. } => "stopped",
        RunEnd::AwaitingDecision { .. } => "suspended",
    };
    let usage = outcome.usage;
    let (input_tokens, output_tokens, cost) = (usage.input_tokens, usage.output_tokens, usage.cost);
    let resume_hint = super::hint::next_command(runtime.store(), &run_id, &outcome.end).await;
    let pending = match &outcome.end {
        RunEnd::NeedsApproval { decisions, .. } | RunEnd::AwaitingDecision { decisions } => {
            decisions.as_slice()
        }
        _ => &[],
    };
    if !json {
        for d in pending {
            let what = match d.kind {
                weft_store::DecisionKind::Approval => "waits for approval",
                weft_store::DecisionKind::Uncertain => {
                    "was in flight when the run stopped and may have had its effect"
                }
            };
            eprintln!(
                "weft: decision {}: {} {} (call {}) {what}\n  approve: weft approve {run_id} {}\n  deny:    weft deny {run_id} {} --reason \"…\"",
                d.id,
                d.tool_name,
                clip(&d.arguments.to_string(), 200),
                d.tool_call_id,
                d.id,
                d.id
            );
        }
        if !pending.is_empty() {
            eprintln!("  then:    weft resume {run_id}");
        }
        if matches!(outcome.end, RunEnd::NeedsApproval { .. }) {
            eprintln!(
                "  or approve re-running every uncertain call at once: weft resume {run_id} --rerun-uncertain"
            );
        }
    }
    if json {
        // The run's own `run_end` (as logged), with how to go on.
        let mut end = rendered.end.unwrap_or_else(|| RunEvent {
            seq: rendered.last_seq + 1,
            timestamp: weft_store::now_string(),
            run_id: run_id.clone(),
            agent: AgentPath::root(agent),
            turn: 0,
            tool_call_id: None,
            kind: outcome.end_event(),
        });
        if let EventKind::RunEnd {
            resume,
            resume_note,
            ..
        } = &mut end.kind
        {
            *resume = resume_hint.as_ref().map(|h| h.command.clone());
            *resume_note = resume_hint.as_ref().and_then(|h| h.note.clone());
        }
        println!("{}", serde_json::to_string(&end)?);
    } else {
        if let RunEnd::Failed { error } = &outcome.end {
            eprintln!("weft: the agent failed: {error}");
        }
        if let RunEnd::Completed { output } = &outcome.end
            && !text_shown
        {
            // Nothing was streamed (the run had ended before a crash, or its answer was
            // a stop tool's): print the answer.
            println!("{output}");
        }
        let tokens = input_tokens + output_tokens;
        let mut line = format!(
            "{word} · {} · {tokens} tokens ({input_tokens} in, {output_tokens} out) · {} · run {run_id}",
            count(outcome.steps, "step"),
            super::pricing::cost_text(cost)
        );
        if resumed {
            line.push_str(&format!(
                " ({} after the resume)",
                count(outcome.steps_now, "step")
            ));
        }
        if let Some(hint) = resume_hint {
            line.push_str(&format!("\nresume with: {}", hint.command));
            if let Some(note) = hint.note {
                line.push_str(&format!("\n({note})"));
            }
        }
        println!(
            "{}",
            paint(colors, if code == 0 { "32" } else { "33" }, &line)
        );
    }
    Ok(ExitCode::from(code))
}

/// `1 step`, `4 steps`.
fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn paint(colors: bool, code: &str, text: &str) -> String {
    if colors {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

pub(crate) fn clip(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', "⏎");
    if one_line.chars().count() <= max {
        one_line
    } else {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    }
}

/// A one-line summary of a tool result.
fn summary(result: &Value, is_error: bool) -> String {
    if is_error {
        return format!(
            "error: {}",
            clip(result.as_str().unwrap_or(&result.to_string()), 100)
        );
    }
    if let Some(code) = result.get("exit_code") {
        let out = result
            .get("stdout")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return format!(
            "exit {code}{}",
            if out.is_empty() {
                String::new()
            } else {
                format!(", {}", clip(out.trim(), 80))
            }
        );
    }
    clip(&result.to_string(), 100)
}

/// What the live view's status line (stderr, on a terminal) is waiting for.
enum Waiting {
    /// The model's answer to the step that started at this instant.
    Model(std::time::Instant),
    /// A tool call that started at this instant.
    Tool(String, std::time::Instant),
}

/// The status line: what the run waits for, for how long, and what the run spent so far.
fn status_line(
    waiting: &Waiting,
    frame: usize,
    started: std::time::Instant,
    spent: (u64, Option<f64>),
) -> String {
    const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
    let (what, since) = match waiting {
        Waiting::Model(since) => ("waiting for the model".to_owned(), since),
        Waiting::Tool(name, since) => (format!("{name} running"), since),
    };
    let mut line = format!(
        "{} {what}… {:.1}s · run {:.0}s",
        FRAMES[frame % FRAMES.len()],
        since.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let (tokens, cost) = spent;
    if tokens > 0 {
        line.push_str(&format!(" · {tokens} tokens so far"));
        if let Some(cost) = cost {
            line.push_str(&format!(" · ${cost:.4}"));
        }
    }
    line
}

/// What the live view saw of a run.
#[derive(Default)]
struct Rendered {
    /// Whether any answer text was shown.
    text_shown: bool,
    /// The run's `run_end` event (printed by [`present`], with the resume hint).
    end: Option<RunEvent>,
    /// The `seq` of the last event printed.
    last_seq: u64,
}

/// Prints events: JSON lines (the events as they are stored), or the live view.
async fn render(mut events: RunEvents, json: bool, colors: bool) -> Rendered {
    let mut rendered = Rendered::default();
    let spin = !json && std::io::stderr().is_terminal();
    let mut waiting: Option<Waiting> = None;
    let mut frame = 0usize;
    let mut at_line_start = true;
    let started = std::time::Instant::now();
    let mut spent: (u64, Option<f64>) = (0, None);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut out = std::io::stdout();
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            _ = tick.tick(), if spin && waiting.is_some() => {
                // Quiet while a question waits for an answer on the terminal.
                let asking = super::approver::ASKING.load(std::sync::atomic::Ordering::SeqCst);
                if let Some(waiting) = waiting.as_ref().filter(|_| !asking) {
                    eprint!("\r\x1b[K{}", status_line(waiting, frame, started, spent));
                }
                frame += 1;
                continue;
            }
        };
        let Some(event) = event else { break };
        if matches!(event.kind, EventKind::RunEnd { .. }) {
            rendered.end = Some(event);
            break;
        }
        rendered.last_seq = event.seq;
        if json {
            if let Ok(line) = serde_json::to_string(&event)
                && writeln!(out, "{line}").is_err()
            {
                // Nobody reads the output any more (`| head`): let the run go on.
                events.detach();
                break;
            }
            continue;
        }
        if spin && waiting.is_some() {
            eprint!("\r\x1b[K");
        }
        waiting = match &event.kind {
            EventKind::TurnStart { .. } => Some(Waiting::Model(std::time::Instant::now())),
            EventKind::ToolCallStart { tool, .. } => {
                Some(Waiting::Tool(tool.clone(), std::time::Instant::now()))
            }
            EventKind::TurnEnd {
                run_input_tokens,
                run_output_tokens,
                cost,
                ..
            } => {
                spent = (run_input_tokens + run_output_tokens, *cost);
                None
            }
            _ => None,
        };
        let depth = event.agent.depth();
        let newline = |out: &mut std::io::Stdout, at_line_start: &mut bool| {
            if !*at_line_start {
                let _ = writeln!(out);
                *at_line_start = true;
            }
        };
        match &event.kind {
            // Replies of consecutive steps start on their own line.
            EventKind::TurnStart { .. } => newline(&mut out, &mut at_line_start),
            EventKind::SideTurnStart {
                label,
                side,
                session_turn,
            } => {
                if *session_turn > 1 || *side != weft_standard::Side::A {
                    newline(&mut out, &mut at_line_start);
                }
                let _ = writeln!(
                    out,
                    "{}{}",
                    indent(depth),
                    paint(colors, "1", &format!("[{label}]"))
                );
            }
            EventKind::TextDelta { text, .. } => {
                // A subagent's text is not the run's answer.
                rendered.text_shown |= depth == 0 && !text.trim().is_empty();
                let _ = write!(out, "{}", indent_text(text, depth, &mut at_line_start));
            }
            EventKind::ReasoningDelta { text, .. } => {
                let text = indent_text(text, depth, &mut at_line_start);
                let _ = write!(out, "{}", paint(colors, "2", &text));
            }
            EventKind::ToolCallStart {
                tool, arguments, ..
            } => {
                newline(&mut out, &mut at_line_start);
                let _ = writeln!(
                    out,
                    "{}{} {}",
                    indent(depth),
                    paint(colors, "36", &format!("→ {tool}")),
                    clip(&arguments.to_string(), 120)
                );
            }
            EventKind::ToolCallEnd {
                result,
                is_error,
                result_bytes,
                ..
            } => {
                let line = match (result, result_bytes) {
                    (Some(result), _) => format!("  ← {}", summary(result, *is_error)),
                    (None, Some(bytes)) => format!("  ← ({bytes} bytes, kept in the run's ledger)"),
                    (None, None) => "  ←".to_owned(),
                };
                let color = if *is_error { "31" } else { "2" };
                let _ = writeln!(out, "{}{}", indent(depth), paint(colors, color, &line));
            }
            EventKind::ToolCallReplayed { tool, is_error, .. } => {
                newline(&mut out, &mut at_line_start);
                let what = if *is_error {
                    "recorded error"
                } else {
                    "recorded result"
                };
                let line = format!("↺ {tool} ({what}, not run again)");
                let _ = writeln!(out, "{}{}", indent(depth), paint(colors, "2", &line));
            }
            // The call's start was shown; its end shows what the model was told.
            EventKind::DecisionPending { decision, .. } => {
                let line = format!("  ⏸ waiting for approval (decision {decision})");
                let _ = writeln!(out, "{}{}", indent(depth), paint(colors, "33", &line));
            }
            EventKind::Status { message, .. } => {
                newline(&mut out, &mut at_line_start);
                let _ = writeln!(
                    out,
                    "{}",
                    paint(colors, "35", &format!("• status: {message}"))
                );
            }
            EventKind::Handoff { from, to, .. } => {
                newline(&mut out, &mut at_line_start);
                let _ = writeln!(
                    out,
                    "{}",
                    paint(colors, "35", &format!("⇢ handoff: {from} → {to}"))
                );
            }
            EventKind::SessionEnd { .. } => newline(&mut out, &mut at_line_start),
            _ => {}
        }
        let _ = out.flush();
    }
    if spin && waiting.is_some() {
        eprint!("\r\x1b[K");
    }
    rendered.text_shown |= json;
    rendered
}

fn indent(depth: usize) -> String {
    "  ".repeat(depth)
}

fn indent_text(text: &str, depth: usize, at_line_start: &mut bool) -> String {
    let pad = indent(depth);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if *at_line_start && c != '\n' {
            out.push_str(&pad);
            *at_line_start = false;
        }
        out.push(c);
        if c == '\n' {
            *at_line_start = true;
        }
    }
    out
}
