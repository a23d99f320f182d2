//! `weft runs list` and `weft runs show RUN`: runs recorded in the store, newest first, with
//! their tokens and cost (`cost unknown` / `"cost": null` when a model without a price took
//! part); `show` also lists the price each model call was charged at.
//! Also the store options every store command shares (`--store URL`, `--json`).

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use weft_runtime::ownership::effective_status;
use weft_store::{Lineage, RunRecord, Runs, Store, ToolLedger, Usage};

use super::pricing::{RunCalls, cost_text, current_usage};

/// `--store` and `--json`, shared by the store commands.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// The store: `sqlite:PATH` or `postgres://…` (default: WEFT_DATABASE_URL, else the
    /// project's `.weft/weft.db`, the project being the nearest folder upward with a
    /// `weft.toml`). It must exist: these commands never create one.
    #[arg(long, value_name = "URL")]
    pub(crate) store: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `weft runs` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// List runs, newest first.
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// At most this many.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Show one run: steps, tool calls, usage, status, agents.
    Show {
        #[command(flatten)]
        store: StoreArgs,
        /// The run id.
        run: String,
    },
}

/// A tokio runtime for one command.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Opens the existing store named by `--store` (or the project's: see `location`); never
/// creates one.
pub(crate) async fn open_store(args: &StoreArgs) -> anyhow::Result<Store> {
    let url = super::location::store_url(args.store.as_deref(), None)?;
    super::location::open_existing(&url).await
}

/// The JSON of a run, with its effective status and its usage as it stands (`cost` null
/// when unknown).
pub(crate) fn run_json(store: &Store, run: &RunRecord, usage: Usage) -> Value {
    json!({
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "agent_id": run.agent_id,
        "status": effective_status(store, run),
        "started_at": run.started_at,
        "updated_at": run.updated_at,
        "ended_at": run.ended_at,
        "steps": run.steps,
        "usage": usage,
        "error": run.error,
        "output": run.output,
    })
}

/// Runs `weft runs …`.
pub(crate) fn run(command: RunsCommand) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async move {
        match command {
            RunsCommand::List { store, limit } => {
                let s = open_store(&store).await?;
                let runs = s.runs(limit).await?;
                let mut usages = Vec::with_capacity(runs.len());
                for r in &runs {
                    usages.push(current_usage(&s, r).await?);
                }
                if store.json {
                    let list: Vec<Value> = runs
                        .iter()
                        .zip(&usages)
                        .map(|(r, u)| run_json(&s, r, *u))
                        .collect();
                    println!("{}", Value::Array(list));
                } else {
                    println!(
                        "{:<36}  {:<11}  {:>5}  {:>8}  {:>12}  {:<27}  THREAD",
                        "RUN", "STATUS", "STEPS", "TOKENS", "COST", "STARTED"
                    );
                    for (r, u) in runs.iter().zip(&usages) {
                        let cost = match u.cost {
                            Some(_) => cost_text(u.cost),
                            None => "unknown".to_owned(),
                        };
                        println!(
                            "{:<36}  {:<11}  {:>5}  {:>8}  {:>12}  {:<27}  {}",
                            r.run_id,
                            effective_status(&s, r).as_str(),
                            r.steps,
                            u.input_tokens + u.output_tokens,
                            cost,
                            r.started_at,
                            r.thread_id
                        );
                    }
                }
                Ok(ExitCode::SUCCESS)
            }
            RunsCommand::Show { store, run } => {
                let s = open_store(&store).await?;
                let Some(record) = s.run(&run).await? else {
                    eprintln!("weft: run {run} not found in {}", s.location());
                    return Ok(ExitCode::from(1));
                };
                let calls = s.tool_calls(&run).await?;
                let agents = s.lineage(&run).await?;
                let checkpoints = s.list_checkpoints(&record.thread_id).await?;
                let usage = current_usage(&s, &record).await?;
                let model_calls = RunCalls::of(&s, &run).await?;
                if store.json {
                    let mut v = run_json(&s, &record, usage);
                    v["model_calls"] = model_calls.json();
                    v["spec"] = record.spec.clone();
                    v["tool_calls"] = serde_json::to_value(&calls)?;
                    v["agents"] = serde_json::to_value(&agents)?;
                    v["checkpoints"] = json!(checkpoints.len());
                    println!("{v}");
                } else {
                    println!("run       {}", record.run_id);
                    println!("thread    {}", record.thread_id);
                    println!("status    {}", effective_status(&s, &record).as_str());
                    println!("started   {}", record.started_at);
                    if let Some(end) = &record.ended_at {
                        println!("ended     {end}");
                    }
                    println!("steps     {}", record.steps);
                    println!(
                        "usage     {} in / {} out tokens, {}",
                        usage.input_tokens,
                        usage.output_tokens,
                        cost_text(usage.cost)
                    );
                    for line in model_calls.lines() {
                        println!("  {line}");
                    }
                    println!("checkpoints {}", checkpoints.len());
                    if let Some(e) = &record.error {
                        println!("error     {e}");
                    }
                    if let Some(o) = &record.output {
                        println!("output    {o}");
                    }
                    println!("tool calls:");
                    for c in &calls {
                        println!(
                            "  turn {:>3}  {:<24} {:<16} {:?} attempts={}{}",
                            c.turn,
                            c.tool_call_id,
                            c.tool_name,
                            c.status,
                            c.attempts,
                            if c.is_error { " error" } else { "" }
                        );
                    }
                    println!("agents:");
                    for a in &agents {
                        println!(
                            "  {}{} {} {:?}",
                            "  ".repeat(a.depth as usize),
                            a.id,
                            a.role,
                            a.status
                        );
                    }
                }
                Ok(ExitCode::SUCCESS)
            }
        }
    })
}
