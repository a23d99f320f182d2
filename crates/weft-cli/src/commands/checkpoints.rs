//! `weft checkpoints list RUN|THREAD`: the checkpoints of a run's thread (both sides of a
//! `dual_ai` run: side B's conversation is the thread `THREAD.sideB`), or of a thread, oldest
//! first.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

use super::runs::{StoreArgs, find_run, open_store, runtime};

/// `weft checkpoints` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum CheckpointsCommand {
    /// List the checkpoints of a run (both sides of a dual_ai run) or of a thread.
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// A run id (or a unique prefix of one), or a thread id (a run's `thread_id`).
        run_or_thread: String,
    },
}

/// Runs `weft checkpoints …`.
pub(crate) fn run(command: CheckpointsCommand) -> anyhow::Result<ExitCode> {
    let CheckpointsCommand::List {
        store,
        run_or_thread,
    } = command;
    runtime()?.block_on(async move {
        let s = open_store(&store).await?;
        let thread = match find_run(&s, &run_or_thread).await {
            Ok(Some(run)) => run.thread_id,
            Ok(None) | Err(_) => run_or_thread.clone(),
        };
        let mut sides = vec![("A", s.list_checkpoints(&thread).await?)];
        let side_b = s.list_checkpoints(&format!("{thread}.sideB")).await?;
        if !side_b.is_empty() {
            sides.push(("B", side_b));
        }
        if sides.iter().all(|(_, list)| list.is_empty()) {
            // An ambiguous run id prefix is said as such.
            find_run(&s, &run_or_thread).await?;
            eprintln!(
                "weft: no run and no thread {run_or_thread} with checkpoints in {}",
                s.location()
            );
            return Ok(ExitCode::from(1));
        }
        if store.json {
            let mut all = Vec::new();
            for (side, list) in &sides {
                for c in list {
                    let mut v = serde_json::to_value(c)?;
                    v["side"] = json!(side);
                    all.push(v);
                }
            }
            println!("{}", serde_json::Value::Array(all));
        } else {
            println!(
                "{:<4}  {:>5}  {:<4}  {:>5}  {:>8}  {:>7}  {:>9}  {:<32}  ID",
                "SIDE", "#", "KIND", "STEP", "MESSAGES", "PENDING", "COMPLETED", "TIME"
            );
            for (side, list) in &sides {
                for c in list {
                    println!(
                        "{:<4}  {:>5}  {:<4}  {:>5}  {:>8}  {:>7}  {:>9}  {:<32}  {}",
                        side,
                        c.step,
                        c.kind,
                        c.agent_step,
                        c.message_count,
                        c.pending_tools,
                        c.completed_tools,
                        c.timestamp,
                        c.id
                    );
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
