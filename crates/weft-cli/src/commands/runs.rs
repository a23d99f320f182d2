//! `weft runs list` and `weft runs show RUN`: runs recorded in the store, newest first.
//! Also the store options every store command shares (`--store URL`, `--json`).

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use weft_runtime::ownership::effective_status;
use weft_store::{
    DecisionStatus, Decisions as _, EventLog as _, EventQuery, Lineage, RunRecord, Runs, Store,
    ToolLedger, event_type,
};

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

/// The JSON of a run, with its effective status.
pub(crate) fn run_json(store: &Store, run: &RunRecord) -> Value {
    json!({
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "agent_id": run.agent_id,
        "status": effective_status(store, run),
        "started_at": run.started_at,
        "updated_at": run.updated_at,
        "ended_at": run.ended_at,
        "steps": run.steps,
        "usage": run.usage,
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
                if store.json {
                    let list: Vec<Value> = runs.iter().map(|r| run_json(&s, r)).collect();
                    println!("{}", Value::Array(list));
                } else {
                    println!(
                        "{:<36}  {:<11}  {:>5}  {:<27}  THREAD",
                        "RUN", "STATUS", "STEPS", "STARTED"
                    );
                    for r in &runs {
                        println!(
                            "{:<36}  {:<11}  {:>5}  {:<27}  {}",
                            r.run_id,
                            effective_status(&s, r).as_str(),
                            r.steps,
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
                let decisions = s.decisions(&run).await?;
                let (refused, retried): (Vec<_>, Vec<_>) = s
                    .events(&EventQuery {
                        run_id: Some(run.clone()),
                        types: vec![
                            event_type::TOOL_CALL_REFUSED.to_owned(),
                            weft_runtime::pipeline::TOOL_CALL_RETRY.to_owned(),
                        ],
                        ..EventQuery::default()
                    })
                    .await?
                    .into_iter()
                    .partition(|e| e.event_type == event_type::TOOL_CALL_REFUSED);
                let agents = s.lineage(&run).await?;
                let checkpoints = s.list_checkpoints(&record.thread_id).await?;
                if store.json {
                    let mut v = run_json(&s, &record);
                    v["spec"] = record.spec.clone();
                    v["tool_calls"] = serde_json::to_value(&calls)?;
                    v["decisions"] = serde_json::to_value(&decisions)?;
                    v["refused_calls"] = refused
                        .iter()
                        .map(|e| json!({"tool_call_id": e.tool_call_id, "turn": e.turn, "tool": e.payload["tool"],
                                        "stage": e.payload["stage"], "reason": e.payload["reason"]}))
                        .collect();
                    v["retried_calls"] = retried
                        .iter()
                        .map(|e| json!({"tool_call_id": e.tool_call_id, "turn": e.turn, "tool": e.payload["tool"],
                                        "attempt": e.payload["attempt"], "error": e.payload["error"]}))
                        .collect();
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
                        "usage     {} in / {} out tokens, cost {:.6}",
                        record.usage.input_tokens, record.usage.output_tokens, record.usage.cost
                    );
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
                    let pending: Vec<_> = decisions
                        .iter()
                        .filter(|d| d.status == DecisionStatus::Pending)
                        .collect();
                    if !pending.is_empty() {
                        println!("pending decisions:");
                        for d in &pending {
                            println!(
                                "  {}  {:<10} {} {}  (call {})",
                                d.id,
                                d.kind.as_str(),
                                d.tool_name,
                                super::run::clip(&d.arguments.to_string(), 80),
                                d.tool_call_id
                            );
                        }
                        println!(
                            "  decide: weft approve {run} ID | weft deny {run} ID --reason \"…\"; then: weft resume {run}"
                        );
                    }
                    let taken: Vec<_> = decisions
                        .iter()
                        .filter(|d| d.status != DecisionStatus::Pending)
                        .collect();
                    if !taken.is_empty() {
                        println!("decisions:");
                        for d in taken {
                            println!(
                                "  {}  {:<10} {:<16} {}{}",
                                d.id,
                                d.kind.as_str(),
                                d.tool_name,
                                d.status.as_str(),
                                d.reason
                                    .as_deref()
                                    .filter(|r| !r.is_empty())
                                    .map(|r| format!(": {r}"))
                                    .unwrap_or_default()
                            );
                        }
                    }
                    if !refused.is_empty() {
                        println!("refused calls (the model got the reason):");
                        for e in &refused {
                            println!(
                                "  turn {:>3}  {:<24} {:<16} {:<9} {}",
                                e.turn,
                                e.tool_call_id.as_deref().unwrap_or("-"),
                                e.payload["tool"].as_str().unwrap_or("?"),
                                e.payload["stage"].as_str().unwrap_or("-"),
                                super::run::clip(
                                    e.payload["reason"].as_str().unwrap_or_default(),
                                    100
                                )
                            );
                        }
                    }
                    if !retried.is_empty() {
                        println!("retried calls (transient failures):");
                        for e in &retried {
                            println!(
                                "  turn {:>3}  {:<24} {:<16} attempt {} after: {}",
                                e.turn,
                                e.tool_call_id.as_deref().unwrap_or("-"),
                                e.payload["tool"].as_str().unwrap_or("?"),
                                e.payload["attempt"],
                                super::run::clip(e.payload["error"].as_str().unwrap_or_default(), 100)
                            );
                        }
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
