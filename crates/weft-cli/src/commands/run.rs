//! `weft run [PROJECT_DIR] [--agent NAME] [--model REF] "input"`: runs a Standard Agents
//! project's agent, checkpointed in the store (`.weft/weft.db` by default).
//!
//! On a terminal: streamed text, reasoning dimmed, each tool call with its arguments and a
//! result summary, a spinner while the model thinks, and a closing line with steps, tokens,
//! cost and the run id. `--json`: one JSON event per line (schema in
//! docs/architecture/weft-standard.md), `run_start` first. Ctrl-C stops cleanly and prints
//! how to resume. Exit codes: 0 completed, 1 the agent failed, 2 usage or definition error,
//! 130 interrupted.

use std::collections::HashSet;
use std::io::{IsTerminal as _, Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use weft_agent::checkpoint::CheckpointMode;
use weft_agent::{AgentState, SESSION_ID_KEY};
use weft_provider::{Message, TokenUsage};
use weft_standard::{
    AgentDefinition, Durable, Project, ProjectError, SessionEvent, SessionOptions, SessionStatus,
    run_session,
};
use weft_store::durable::RunContext;
use weft_store::run::{RunSpec, Runner, ToolRegistry, ToolSpec, default_providers};
use weft_store::{Durability, Pricing, RunRecord, RunStatus, Runs, Store, Usage, now_string};

/// `weft run` flags.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  weft init demo && weft run demo \"Say hello\"\n  weft run demo --agent review_pair --json \"Write a haiku\"\n\n\
Exit codes: 0 completed, 1 the agent failed (sessionFail, error), 2 usage or definition error, 130 interrupted."
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
    /// `[PROJECT_DIR] INPUT`: the project folder (default: the working directory) and the
    /// message; without INPUT the message is read from standard input.
    #[arg(value_name = "ARGS", num_args = 0..=2)]
    args: Vec<String>,
}

/// Runs `weft run`.
pub(crate) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let (dir, input) = match args.args.as_slice() {
        [] => (PathBuf::from("."), None),
        [input] => (PathBuf::from("."), Some(input.clone())),
        [dir, input] => (PathBuf::from(dir), Some(input.clone())),
        _ => anyhow::bail!("give at most a project folder and an input"),
    };
    let project = match Project::load(&dir) {
        Ok(project) => project,
        Err(error @ ProjectError::Invalid(_)) => {
            eprintln!("weft: {} is not a valid project: {error}", dir.display());
            return Ok(ExitCode::from(2));
        }
        Err(error) => return Err(error.into()),
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
    for reference in model_references(&project, agent, args.model.as_deref()) {
        if let Some(variable) = missing_key(&reference) {
            eprintln!(
                "weft: the model {reference} needs an API key: set {variable} in the environment."
            );
            return Ok(ExitCode::from(2));
        }
    }
    let input = match input {
        Some(input) => input,
        None => read_input()?,
    };
    anyhow::ensure!(
        !input.trim().is_empty(),
        "the input is empty: give a message to the agent"
    );
    let durability = if args.durability == "async" {
        Durability::Async
    } else {
        Durability::Sync
    };
    let runtime = super::runs::runtime()?;
    runtime.block_on(drive(&project, agent, &args, input, durability))
}

fn names(project: &Project) -> String {
    project
        .agents()
        .map(|a| a.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The model references a run of `agent` uses.
fn model_references(
    project: &Project,
    agent: &AgentDefinition,
    model: Option<&str>,
) -> Vec<String> {
    if let Some(model) = model {
        return vec![model.to_owned()];
    }
    let mut out: Vec<String> = Vec::new();
    for (_, side) in agent.sides() {
        if let Some(m) = project
            .prompt(&side.prompt)
            .and_then(|p| project.model_of(p))
            && !out.iter().any(|o| o == m)
        {
            out.push(m.to_owned());
        }
    }
    out
}

/// The environment variable a provider's key is read from, when it is not set.
fn missing_key(reference: &str) -> Option<&'static str> {
    let provider = reference.split_once(':').map_or(reference, |(p, _)| p);
    let variables: &[&'static str] = match provider {
        "openai" | "openai-responses" => &["OPENAI_API_KEY"],
        "anthropic" => &["ANTHROPIC_API_KEY"],
        "google" | "gemini" => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        _ => return None,
    };
    let set = variables
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|k| !k.trim().is_empty()));
    (!set).then(|| variables[0])
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

/// The model providers of `weft run` and `weft resume`: weft-store's defaults (built-ins and
/// `scripted-turns:`) plus the embedded local model.
pub(crate) fn providers() -> weft_provider::ProviderRegistry {
    let mut providers = default_providers();
    providers.register(weft_local::NAME, weft_local::provider);
    providers
}

/// The tool registry of a project run: every tool of the agent's prompts, by name, so
/// weft-store's `Runner::create` accepts the run spec and `weft resume` can rebuild them.
pub(crate) fn registry(project: &Project, agent: &AgentDefinition) -> ToolRegistry {
    let mut registry = ToolRegistry::with_builtins();
    for (_, side) in agent.sides() {
        for name in project
            .prompt(&side.prompt)
            .map(|p| p.tools.clone())
            .unwrap_or_default()
        {
            let project = project.clone();
            let tool = name.clone();
            registry.register(name, move |config: &Value| {
                let root = config["root"].as_str().unwrap_or(".");
                let workspace = weft_tools::Workspace::new(root).map_err(|e| e.to_string())?;
                let prompt = weft_standard::PromptDefinition {
                    name: String::new(),
                    model: None,
                    system: String::new(),
                    tools: vec![tool.clone()],
                    params: Default::default(),
                    env: Default::default(),
                    description: None,
                };
                weft_standard::tools::prompt_tools(&project, &prompt, &workspace, None)
                    .map_err(|e| e.to_string())?
                    .pop()
                    .ok_or_else(|| format!("no tool {tool:?}"))
            });
        }
    }
    registry
}

async fn drive(
    project: &Project,
    agent: &AgentDefinition,
    args: &RunArgs,
    input: String,
    durability: Durability,
) -> anyhow::Result<ExitCode> {
    let workspace = std::fs::canonicalize(args.workspace.as_deref().unwrap_or(project.dir()))
        .context("cannot resolve the workspace folder")?;
    let store_url = super::location::store_url(args.store.as_deref(), Some(project.dir()))?;
    let store = super::location::open_or_create(&store_url).await?;
    let confinement = super::confine::for_run(project, &store_url, args.sandbox);
    let side_a = &agent.side_a;
    let prompt_a = project.prompt(&side_a.prompt).context("side A's prompt")?;
    let mut model_override = args.model.clone();
    let mut model_a = args
        .model
        .clone()
        .or_else(|| project.model_of(prompt_a).map(str::to_owned))
        .unwrap_or_default();
    if model_a.is_empty() {
        // Neither --model nor the project names a model: the embedded default (issue 6).
        let reference = super::models::default_model()?;
        if reference.provider.name == weft_local::NAME {
            weft_local::configure_threads();
        }
        model_a = reference.to_reference_string();
        model_override = Some(model_a.clone());
    }
    let spec = RunSpec {
        model: project.model_reference(&model_a),
        system: Some(project.system_text(agent, prompt_a)),
        tools: prompt_a
            .tools
            .iter()
            .map(|name| ToolSpec {
                name: name.clone(),
                config: json!({"root": workspace}),
            })
            .collect(),
        input: input.clone(),
        durability,
        max_steps: side_a.max_steps,
        pricing: None,
        role: agent.name.clone(),
    };
    let runner = Runner::new(store.clone(), registry(project, agent)).with_providers(providers());
    let run_id = runner.create(&spec).await?;
    let mut record = store
        .run(&run_id)
        .await?
        .context("the new run is not in the store")?;
    // What a resume needs beyond the run spec: the project, the agent, the model override.
    if let Value::Object(map) = &mut record.spec {
        map.insert(
            "standard".into(),
            json!({"project": std::fs::canonicalize(project.dir())?, "agent": agent.name, "type": agent.agent_type,
                   "model": model_override, "workspace": workspace, "sandbox": args.sandbox}),
        );
    }
    record.owner_pid = Some(std::process::id());
    store.put_run(&record).await?;
    let run_store = store.with_durability(durability).for_run(&run_id);
    let context = Arc::new(RunContext::new(
        run_store.clone(),
        &run_id,
        &record.thread_id,
        &record.agent_id,
        [],
        HashSet::new(),
    ));
    let state_a = AgentState::initial()
        .with_message(Message::user(input.as_str()))
        .with_metadata(SESSION_ID_KEY, Value::String(record.thread_id.clone()));
    execute(
        project,
        agent,
        Execution {
            record,
            store,
            run_store,
            context,
            durability,
            model_override,
            json: args.json,
            workspace,
            confinement,
            state_a,
            state_b: None,
            base_usage: TokenUsage::default(),
            resumed: false,
        },
    )
    .await
}

/// A project run about to go on in this process: a new one (`weft run`) or a resumed one
/// (`weft resume`).
pub(crate) struct Execution {
    /// The run's record (`running`, owned by this process).
    pub(crate) record: RunRecord,
    /// The store.
    pub(crate) store: Store,
    /// The store with the run's durability, scoped to the run.
    pub(crate) run_store: Store,
    /// The run's ledger context.
    pub(crate) context: Arc<RunContext>,
    /// The run's durability.
    pub(crate) durability: Durability,
    /// `--model` of the command that started the run.
    pub(crate) model_override: Option<String>,
    /// JSON lines instead of the live view.
    pub(crate) json: bool,
    /// The tools' workspace (the project folder unless `--workspace`).
    pub(crate) workspace: PathBuf,
    /// What the tools may not touch; how commands are sandboxed.
    pub(crate) confinement: weft_tools::Confinement,
    /// Side A's state to go on from (its latest checkpoint).
    pub(crate) state_a: AgentState,
    /// Side B's (`dual_ai`).
    pub(crate) state_b: Option<AgentState>,
    /// The run's usage before this process (its latest checkpoint's).
    pub(crate) base_usage: TokenUsage,
    /// Whether this goes on from an earlier process.
    pub(crate) resumed: bool,
}

/// Runs (or goes on with) the session of a project run, showing it live or as JSON lines,
/// and records how it ended. Exit codes: 0 completed, 1 failed, 130 interrupted.
pub(crate) async fn execute(
    project: &Project,
    agent: &AgentDefinition,
    run: Execution,
) -> anyhow::Result<ExitCode> {
    let Execution {
        mut record,
        store,
        run_store,
        context,
        durability,
        model_override,
        json,
        workspace,
        confinement,
        state_a,
        state_b,
        base_usage,
        resumed,
    } = run;
    let run_id = record.run_id.clone();
    let colors = !json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    if json {
        println!(
            "{}",
            json!({"type": "run_start", "runId": run_id, "threadId": record.thread_id, "agent": agent.name,
            "durability": if durability == Durability::Sync { "sync" } else { "async" }, "resumed": resumed})
        );
    } else {
        let resumed = if resumed { " · resumed" } else { "" };
        println!(
            "{}",
            paint(
                colors,
                "2",
                &format!("run {run_id} · agent {}{resumed}", agent.name)
            )
        );
    }
    let steps_before = state_a.step() + state_b.as_ref().map_or(0, AgentState::step);
    let signal = CancellationToken::new();
    let (tx, rx) = mpsc::unbounded_channel();
    let mut options = SessionOptions::new(&workspace);
    options.model_override = model_override;
    options.providers = Arc::new(providers());
    options.signal = signal.clone();
    options.events = Some(tx);
    options.thread_id = Some(record.thread_id.clone());
    options.initial_state = state_a;
    options.initial_state_b = state_b;
    options.confinement = confinement;
    options.durable = Some(Durable {
        run: context,
        store: run_store.clone(),
        mode: if durability == Durability::Sync {
            CheckpointMode::Sync
        } else {
            CheckpointMode::Async
        },
        base_usage: base_usage.clone(),
    });
    let renderer = tokio::spawn(render(rx, json, colors));
    let ctrl_c = signal.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            ctrl_c.cancel();
        }
    });
    let outcome = run_session(project, &agent.name, "", &options).await;
    drop(options);
    let _ = renderer.await;
    let outcome = outcome?;
    let _ = run_store.flush().await;

    // Steps are counted from the states, tokens from the latest checkpoint before this
    // process plus this process's: both exact across processes.
    let steps = outcome.state_a.step() + outcome.state_b.as_ref().map_or(0, AgentState::step);
    let input_tokens = base_usage.input_tokens + outcome.usage.input_tokens;
    let output_tokens = base_usage.output_tokens + outcome.usage.output_tokens;
    let cost = Pricing::default().cost(input_tokens, output_tokens);
    let now = now_string();
    record.steps = steps;
    record.usage = Usage {
        input_tokens,
        output_tokens,
        cost,
    };
    record.updated_at = now.clone();
    let (code, word) = match outcome.status {
        SessionStatus::Completed => {
            record.status = RunStatus::Completed;
            record.output = Some(outcome.message.clone());
            record.ended_at = Some(now);
            (0u8, "completed")
        }
        SessionStatus::Failed => {
            record.status = RunStatus::Failed;
            record.error = Some(outcome.message.clone());
            record.ended_at = Some(now);
            (1, "failed")
        }
        SessionStatus::Interrupted => {
            record.status = RunStatus::Interrupted;
            (130, "interrupted")
        }
    };
    store.put_run(&record).await?;
    weft_store::run::record_root_agent(&store, &record, &agent.name).await?;
    let tokens = input_tokens + output_tokens;
    let this_time = steps.saturating_sub(steps_before);
    if json {
        println!(
            "{}",
            json!({"type": "run_end", "runId": run_id, "status": word, "exitCode": code, "steps": steps,
            "inputTokens": input_tokens, "outputTokens": output_tokens, "cost": cost,
            "resume": (code == 130).then(|| format!("weft resume {run_id}"))})
        );
    } else {
        if outcome.status == SessionStatus::Failed {
            eprintln!("weft: the agent failed: {}", outcome.message);
        }
        let mut line = format!(
            "{word} · {} · {tokens} tokens ({input_tokens} in, {output_tokens} out) · ${cost:.4} · run {run_id}",
            count(steps, "step")
        );
        if resumed {
            line.push_str(&format!(" ({} after the resume)", count(this_time, "step")));
        }
        if code == 130 {
            line.push_str(&format!("\nresume with: weft resume {run_id}"));
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

fn clip(text: &str, max: usize) -> String {
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

/// Prints events: JSON lines, or the live view.
async fn render(mut rx: mpsc::UnboundedReceiver<SessionEvent>, json: bool, colors: bool) {
    let spin = !json && std::io::stderr().is_terminal();
    let mut spinner_on = false;
    let mut frame = 0usize;
    let mut at_line_start = true;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut out = std::io::stdout();
    loop {
        let event = tokio::select! {
            event = rx.recv() => event,
            _ = tick.tick(), if spinner_on => {
                const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
                eprint!("\r{} waiting for the model…", FRAMES[frame % FRAMES.len()]);
                frame += 1;
                continue;
            }
        };
        let Some(event) = event else { break };
        if json {
            if let Ok(line) = serde_json::to_string(&event) {
                let _ = writeln!(out, "{line}");
            }
            continue;
        }
        if spinner_on && !matches!(event, SessionEvent::StepStart { .. }) {
            eprint!("\r\x1b[K");
            spinner_on = false;
        }
        let newline = |out: &mut std::io::Stdout, at_line_start: &mut bool| {
            if !*at_line_start {
                let _ = writeln!(out);
                *at_line_start = true;
            }
        };
        match &event {
            SessionEvent::StepStart { .. } => spinner_on = spin,
            SessionEvent::TurnStart {
                label,
                side,
                turn,
                depth,
                ..
            } => {
                if *turn > 1 || *side != weft_standard::Side::A {
                    newline(&mut out, &mut at_line_start);
                }
                let _ = writeln!(
                    out,
                    "{}{}",
                    indent(*depth),
                    paint(colors, "1", &format!("[{label}]"))
                );
            }
            SessionEvent::TextDelta { text, depth, .. } => {
                let _ = write!(out, "{}", indent_text(text, *depth, &mut at_line_start));
            }
            SessionEvent::ReasoningDelta { text, depth, .. } => {
                let text = indent_text(text, *depth, &mut at_line_start);
                let _ = write!(out, "{}", paint(colors, "2", &text));
            }
            SessionEvent::ToolCall {
                name,
                arguments,
                depth,
                ..
            } => {
                newline(&mut out, &mut at_line_start);
                let _ = writeln!(
                    out,
                    "{}{} {}",
                    indent(*depth),
                    paint(colors, "36", &format!("→ {name}")),
                    clip(&arguments.to_string(), 120)
                );
            }
            SessionEvent::ToolResult {
                result,
                is_error,
                depth,
                ..
            } => {
                let line = format!("  ← {}", summary(result, *is_error));
                let _ = writeln!(
                    out,
                    "{}{}",
                    indent(*depth),
                    paint(colors, if *is_error { "31" } else { "2" }, &line)
                );
            }
            SessionEvent::Status { message, .. } => {
                newline(&mut out, &mut at_line_start);
                let _ = writeln!(
                    out,
                    "{}",
                    paint(colors, "35", &format!("• status: {message}"))
                );
            }
            SessionEvent::Handoff { from, to, .. } => {
                newline(&mut out, &mut at_line_start);
                let _ = writeln!(
                    out,
                    "{}",
                    paint(colors, "35", &format!("⇢ handoff: {from} → {to}"))
                );
            }
            SessionEvent::SessionEnd { .. } => newline(&mut out, &mut at_line_start),
            _ => {}
        }
        let _ = out.flush();
    }
    if spinner_on {
        eprint!("\r\x1b[K");
    }
}

fn indent(depth: u32) -> String {
    "  ".repeat(usize::try_from(depth).unwrap_or(0))
}

fn indent_text(text: &str, depth: u32, at_line_start: &mut bool) -> String {
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
