//! `weft checkpoints list THREAD`: a thread's checkpoints, oldest first.

use std::process::ExitCode;

use clap::Subcommand;

use super::runs::{StoreArgs, open_store, runtime};

/// `weft checkpoints` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum CheckpointsCommand {
    /// List the checkpoints of a thread.
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// The thread id (a run's `thread_id`).
        thread: String,
    },
}

/// Runs `weft checkpoints …`.
pub(crate) fn run(command: CheckpointsCommand) -> anyhow::Result<ExitCode> {
    let CheckpointsCommand::List { store, thread } = command;
    runtime()?.block_on(async move {
        let s = open_store(&store).await?;
        let list = s.list_checkpoints(&thread).await?;
        if store.json {
            println!("{}", serde_json::to_string(&list)?);
        } else {
            println!(
                "{:>5}  {:<4}  {:>5}  {:>8}  {:>7}  {:>9}  {:<32}  ID",
                "#", "KIND", "STEP", "MESSAGES", "PENDING", "COMPLETED", "TIME"
            );
            for c in &list {
                println!(
                    "{:>5}  {:<4}  {:>5}  {:>8}  {:>7}  {:>9}  {:<32}  {}",
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
        Ok(ExitCode::SUCCESS)
    })
}
