//! `weft runs list` and `weft runs show RUN`: runs recorded in the store, newest first, with
//! their tokens and cost (`cost unknown` / `"cost": null` when a model without a price took
//! part); `show` also lists the price each model call was charged at and the run's transcript
//! (built by weft-runtime's `transcript`).
//! Also the store options every store command shares (`--store URL`, `--json`).

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use weft_runtime::ownership::effective_status;
use weft_runtime::transcript::{Line, Said, Transcript};
use weft_store::{
    DecisionStatus, Decisions as _, EventLog as _, EventQuery, Lineage, RunRecord, RunStatus, Runs,
    Store, ToolLedger, Usage, event_type,
};

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
    /// Show one run: steps, usage, status, the transcript (what each side said, every tool
    /// call with its arguments and result, handoffs; whole in `--json` under `transcript`),
    /// tool calls, decisions, agents. A run that continued an older thread shows its own part.
    Show {
        #[command(flatten)]
        store: StoreArgs,
        /// The run id (or a unique prefix of it).
        run: String,
        /// Also print the history the runtime profile's context compression replaced,
        /// restored from the checkpoints that hold it (`compressions` in `--json`).
        #[arg(long)]
        expand: bool,
    },
    /// Delete a run and everything recorded for it (events, tool ledger, checkpoints of its
    /// thread when no other run uses it). A run a live process drives is refused (exit 5).
    Delete {
        #[command(flatten)]
        store: StoreArgs,
        /// The run id (or a unique prefix of it).
        run: String,
    },
    /// Delete the runs whose last activity is older than a duration (`7d`, `12h`, `2w`);
    /// running runs are kept. `weft store gc` then gives the space back.
    Prune {
        #[command(flatten)]
        store: StoreArgs,
        /// How old a run's last activity must be: `7d`, `36h`, `2w`, `90m`.
        #[arg(long, value_name = "DURATION", value_parser = weft_runtime::budget::parse_duration)]
        older_than: std::time::Duration,
        /// Only list what would be deleted.
        #[arg(long)]
        dry_run: bool,
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

/// The run `id` names: the run with that id, else the only run whose id starts with it.
/// `Ok(None)` when there is none; an error naming the candidates when the prefix is ambiguous.
///
/// # Errors
/// Database failures; an ambiguous prefix.
pub(crate) async fn find_run(store: &Store, id: &str) -> anyhow::Result<Option<RunRecord>> {
    if let Some(run) = store.run(id).await? {
        return Ok(Some(run));
    }
    if id.is_empty() {
        return Ok(None);
    }
    let matches: Vec<RunRecord> = store
        .runs(None)
        .await?
        .into_iter()
        .filter(|r| r.run_id.starts_with(id))
        .collect();
    match matches.len() {
        0 => Ok(None),
        1 => Ok(matches.into_iter().next()),
        n => {
            let ids: Vec<&str> = matches.iter().take(5).map(|r| r.run_id.as_str()).collect();
            anyhow::bail!(
                "{id:?} is the start of {n} run ids ({}{}); give more of it",
                ids.join(", "),
                if n > 5 { ", …" } else { "" }
            )
        }
    }
}

/// The run `id` names (see [`find_run`]), or an error saying it is not in the store.
///
/// # Errors
/// No such run, an ambiguous prefix, database failures.
pub(crate) async fn resolve_run(store: &Store, id: &str) -> anyhow::Result<RunRecord> {
    find_run(store, id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("run {id:?} not found in {}", store.location()))
}

/// The agent a run drives and the first words of its input.
fn agent_and_input(run: &RunRecord) -> (String, String) {
    match weft_runtime::spec::RunSpec::from_stored(&run.spec) {
        Ok(spec) => {
            let words: Vec<&str> = spec.input.split_whitespace().collect();
            let mut input = words.iter().take(6).copied().collect::<Vec<_>>().join(" ");
            if words.len() > 6 {
                input.push_str(" …");
            }
            (spec.role().to_owned(), input)
        }
        Err(_) => (String::from("?"), String::new()),
    }
}

/// The text view of transcript lines: who said what, tool calls with their arguments and
/// results (clipped; `--json` has them whole), handoffs; the side first in a `dual_ai` run.
fn transcript_text(lines: &[Line], dual: bool) -> Vec<String> {
    use super::run::clip;
    lines
        .iter()
        .map(|line| {
            let who = if dual {
                format!("[{}] {}", line.side.key(), line.agent)
            } else {
                line.agent.clone()
            };
            match &line.said {
                Said::User {
                    text, silent: true, ..
                } => {
                    format!("{who} heard (silent): {}", clip(text, 200))
                }
                Said::User {
                    text, input: true, ..
                } => format!("user: {}", clip(text, 200)),
                Said::User {
                    text, input: false, ..
                } => format!("{who} heard: {}", clip(text, 200)),
                Said::Assistant { text, reasoning } => {
                    let said = format!("{who}: {}", clip(text, 200));
                    match reasoning {
                        Some(r) if text.is_empty() => format!("{who} (thinking): {}", clip(r, 120)),
                        Some(r) => format!("{who} (thinking): {}\n  {said}", clip(r, 120)),
                        None => said,
                    }
                }
                Said::ToolCall {
                    id,
                    name,
                    arguments,
                } => format!(
                    "{who} → {name} {} [{id}]",
                    clip(&arguments.to_string(), 160)
                ),
                Said::ToolResult {
                    name,
                    result,
                    is_error,
                    ..
                } => {
                    let text = result
                        .as_str()
                        .map_or_else(|| result.to_string(), str::to_owned);
                    format!(
                        "{who} ← {name}{}: {}",
                        if *is_error { " (error)" } else { "" },
                        clip(&text, 160)
                    )
                }
                Said::Handoff { from, to, message } => {
                    format!("handoff {from} → {to}: {}", clip(message, 160))
                }
                Said::Spawn { thread, agent } => {
                    format!("subagent {agent}: thread {thread} (weft thread export {thread})")
                }
            }
        })
        .collect()
}

/// How long a run ran (until now while it runs).
fn duration(run: &RunRecord, status: RunStatus) -> String {
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).ok();
    let Some(start) = parse(&run.started_at) else {
        return "?".to_owned();
    };
    let end = match (&run.ended_at, status) {
        (Some(end), _) => parse(end),
        (None, RunStatus::Running) => Some(chrono::Utc::now().fixed_offset()),
        (None, _) => parse(&run.updated_at),
    };
    let Some(end) = end else {
        return "?".to_owned();
    };
    let seconds = (end - start).num_milliseconds().max(0) as f64 / 1000.0;
    if seconds < 60.0 {
        format!("{seconds:.1}s")
    } else {
        weft_runtime::budget::format_duration(std::time::Duration::from_secs_f64(seconds))
    }
}

/// The stored cost, or `unknown` when the run recorded none (no price for its models).
/// When a run was last active.
fn last_active(run: &RunRecord) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    let at = run.ended_at.as_deref().unwrap_or(&run.updated_at);
    chrono::DateTime::parse_from_rfc3339(at).ok()
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
                        "{:<36}  {:<14}  {:<19}  {:>8}  {:>5}  {:>8}  {:>9}  {:<11}  INPUT",
                        "RUN", "AGENT", "STARTED", "DURATION", "STEPS", "TOKENS", "COST", "STATUS"
                    );
                    for (r, u) in runs.iter().zip(&usages) {
                        let status = effective_status(&s, r);
                        let (agent, input) = agent_and_input(r);
                        let started = chrono::DateTime::parse_from_rfc3339(&r.started_at)
                            .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
                            .unwrap_or_else(|_| r.started_at.clone());
                        let cost = match u.cost {
                            Some(_) => cost_text(u.cost),
                            None => "unknown".to_owned(),
                        };
                        println!(
                            "{:<36}  {:<14}  {:<19}  {:>8}  {:>5}  {:>8}  {:>9}  {:<11}  {}",
                            r.run_id,
                            agent,
                            started,
                            duration(r, status),
                            r.steps,
                            u.input_tokens + u.output_tokens,
                            cost,
                            status.as_str(),
                            input
                        );
                    }
                }
                Ok(ExitCode::SUCCESS)
            }
            RunsCommand::Delete { store, run } => {
                let s = open_store(&store).await?;
                let record = resolve_run(&s, &run).await?;
                if effective_status(&s, &record) == RunStatus::Running {
                    eprintln!(
                        "weft: run {} is running (another live process drives it); stop it first, then delete it",
                        record.run_id
                    );
                    return Ok(ExitCode::from(5));
                }
                match s.delete_run(&record.run_id).await? {
                    Some(deleted) => {
                        println!(
                            "deleted run {}{}",
                            deleted.run_id,
                            if deleted.thread_deleted {
                                format!(" and its thread {}", deleted.thread_id)
                            } else {
                                format!(" (its thread {} is kept: another run uses it)", deleted.thread_id)
                            }
                        );
                        Ok(ExitCode::SUCCESS)
                    }
                    None => {
                        eprintln!("weft: run {} is already gone", record.run_id);
                        Ok(ExitCode::from(1))
                    }
                }
            }
            RunsCommand::Prune {
                store,
                older_than,
                dry_run,
            } => {
                let s = open_store(&store).await?;
                let cutoff = chrono::Utc::now()
                    - chrono::Duration::from_std(older_than).context("the duration is too long")?;
                let (mut deleted, mut running) = (Vec::new(), 0usize);
                for r in s.runs(None).await? {
                    if last_active(&r).is_none_or(|t| t >= cutoff) {
                        continue;
                    }
                    if effective_status(&s, &r) == RunStatus::Running {
                        running += 1;
                        continue;
                    }
                    if !dry_run {
                        s.delete_run(&r.run_id).await?;
                    }
                    deleted.push(r.run_id);
                }
                let verb = if dry_run { "would delete" } else { "deleted" };
                if store.json {
                    println!(
                        "{}",
                        json!({"deleted": deleted, "dryRun": dry_run, "keptRunning": running})
                    );
                } else {
                    for id in &deleted {
                        println!("{verb} run {id}");
                    }
                    println!(
                        "{verb} {} run{}{}",
                        deleted.len(),
                        if deleted.len() == 1 { "" } else { "s" },
                        if running > 0 {
                            format!("; kept {running} running (a live process drives them)")
                        } else {
                            String::new()
                        }
                    );
                    if !dry_run && !deleted.is_empty() {
                        println!("`weft store gc` gives the space back to the file system");
                    }
                }
                Ok(ExitCode::SUCCESS)
            }
            RunsCommand::Show { store, run, expand } => {
                let s = open_store(&store).await?;
                let record = match find_run(&s, &run).await? {
                    Some(record) => record,
                    None => {
                        eprintln!("weft: run {run} not found in {}", s.location());
                        return Ok(ExitCode::from(1));
                    }
                };
                let run = record.run_id.clone();
                let calls = s.tool_calls(&run).await?;
                let decisions = s.decisions(&run).await?;
                let (refused, retried): (Vec<_>, Vec<_>) = s
                    .events(&EventQuery {
                        run_id: Some(run.clone()),
                        types: vec![
                            event_type::TOOL_CALL_REFUSED.to_owned(),
                            "tool_call_retry".to_owned(),
                        ],
                        ..EventQuery::default()
                    })
                    .await?
                    .into_iter()
                    .partition(|e| e.event_type == event_type::TOOL_CALL_REFUSED);
                let agents = s.lineage(&run).await?;
                let children = thread_tree(&s, &record.thread_id).await?;
                let checkpoints = s.list_checkpoints(&record.thread_id).await?;
                let usage = current_usage(&s, &record).await?;
                let model_calls = RunCalls::of(&s, &run).await?;
                // What was said: this run's part of its thread (a run that continued an
                // older thread shows only what it added, after a line counting the rest).
                let transcript =
                    match Transcript::load(&s, &record.thread_id, Some(&record)).await {
                        Ok(t) => Some(t),
                        Err(weft_runtime::RunError::UnknownThread(_)) => None,
                        Err(e) => return Err(e.into()),
                    };
                let (lines, earlier) = transcript
                    .as_ref()
                    .map(|t| t.lines(Some(&run)))
                    .unwrap_or_default();
                let dual = transcript.as_ref().is_some_and(|t| t.dual);
                if store.json {
                    let mut v = run_json(&s, &record, usage);
                    v["model_calls"] = model_calls.json();
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
                    v["transcript"] = serde_json::to_value(&lines)?;
                    v["transcript_earlier_entries"] = json!(earlier);
                    if expand {
                        let expanded =
                            super::compressed::of_thread(&s, &record.thread_id).await?;
                        v["compressions"] = super::compressed::json(&expanded);
                    }
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
                    if earlier > 0 {
                        println!(
                            "transcript (this run's part; {earlier} earlier entr{} of thread {}: weft thread export {})",
                            if earlier == 1 { "y" } else { "ies" },
                            record.thread_id,
                            record.thread_id
                        );
                    } else {
                        println!("transcript:");
                    }
                    for line in transcript_text(&lines, dual) {
                        println!("  {line}");
                    }
                    if expand {
                        let expanded =
                            super::compressed::of_thread(&s, &record.thread_id).await?;
                        if expanded.is_empty() {
                            println!("compressed history: none");
                        } else {
                            println!("compressed history:");
                        }
                        for line in super::compressed::lines(&expanded) {
                            println!("  {line}");
                        }
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
                    // The lineage as a tree: each child run (a subagent, whose id is its
                    // thread's) under its parent, with its status and its own tokens.
                    println!("agents:");
                    for (depth, a) in lineage_tree(&agents) {
                        println!(
                            "  {}{} {} {:?} · {} in / {} out tokens",
                            "  ".repeat(depth),
                            a.id,
                            a.role,
                            a.status,
                            a.usage.input_tokens,
                            a.usage.output_tokens
                        );
                    }
                    // The thread tree: the subagent instances of the run's thread (its
                    // child registry), theirs under them, each with its status.
                    if !children.is_empty() {
                        println!("threads:");
                        println!("  {} (this run's)", record.thread_id);
                        for (depth, c) in &children {
                            let modes = match (c.resumable, c.blocking) {
                                (Some(true), Some(false)) => "resumable, non-blocking",
                                (Some(true), _) => "resumable",
                                (_, Some(false)) => "non-blocking",
                                _ => "blocking",
                            };
                            println!(
                                "  {}{} {} ({}) · {} · {modes}",
                                "  ".repeat(depth + 1),
                                c.name,
                                c.reference,
                                c.agent,
                                c.status
                            );
                        }
                    }
                }
                Ok(ExitCode::SUCCESS)
            }
        }
    })
}

/// The subagent instances under `thread` (its child registry, recursively), depth first,
/// each with its depth below `thread` (0: a child of it).
async fn thread_tree(
    store: &weft_store::Store,
    thread: &str,
) -> anyhow::Result<Vec<(usize, weft_store::SubagentRegistryEntry)>> {
    use weft_store::Subagents as _;
    let mut out = Vec::new();
    let mut stack: Vec<(usize, weft_store::SubagentRegistryEntry)> = store
        .children(thread)
        .await?
        .into_iter()
        .rev()
        .map(|c| (0, c))
        .collect();
    while let Some((depth, child)) = stack.pop() {
        // A registry is a tree; the bound keeps a malformed one (a cycle) finite.
        if out.len() > 10_000 {
            break;
        }
        let grandchildren = store.children(&child.reference).await?;
        stack.extend(grandchildren.into_iter().rev().map(|c| (depth + 1, c)));
        out.push((depth, child));
    }
    Ok(out)
}

/// `agents` in tree order (each node followed by its children, depth first, in the order
/// given), with each node's depth in the tree; a node whose parent is not among them is a
/// root.
fn lineage_tree(agents: &[weft_store::AgentNode]) -> Vec<(usize, &weft_store::AgentNode)> {
    fn visit<'a>(
        node: &'a weft_store::AgentNode,
        depth: usize,
        agents: &'a [weft_store::AgentNode],
        out: &mut Vec<(usize, &'a weft_store::AgentNode)>,
    ) {
        // A lineage is a tree; the depth bound keeps a malformed one (a cycle) finite.
        if depth > agents.len() {
            return;
        }
        out.push((depth, node));
        for child in agents
            .iter()
            .filter(|c| c.parent_agent_id.as_deref() == Some(node.id.as_str()))
        {
            visit(child, depth + 1, agents, out);
        }
    }
    let mut out = Vec::with_capacity(agents.len());
    for root in agents.iter().filter(|a| {
        a.parent_agent_id
            .as_deref()
            .is_none_or(|p| !agents.iter().any(|b| b.id == p))
    }) {
        visit(root, 0, agents, &mut out);
    }
    out
}

#[cfg(test)]
mod lineage_tests {
    use super::lineage_tree;
    use weft_store::{AgentNode, AgentStatus, Usage};

    fn node(id: &str, parent: Option<&str>) -> AgentNode {
        AgentNode {
            id: id.into(),
            run_id: "r".into(),
            parent_agent_id: parent.map(Into::into),
            role: id.into(),
            status: AgentStatus::Completed,
            depth: 0,
            created_at: String::new(),
            completed_at: None,
            usage: Usage::default(),
        }
    }

    #[test]
    fn children_follow_their_parent_depth_first() {
        // By depth then creation, as the store lists them.
        let agents = [
            node("root", None),
            node("a", Some("root")),
            node("b", Some("root")),
            node("a1", Some("a")),
        ];
        let order: Vec<(usize, &str)> = lineage_tree(&agents)
            .into_iter()
            .map(|(d, n)| (d, n.id.as_str()))
            .collect();
        assert_eq!(order, [(0, "root"), (1, "a"), (2, "a1"), (1, "b")]);
    }
}
