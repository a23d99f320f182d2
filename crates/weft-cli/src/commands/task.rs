//! `weft task classify TEXT`: the ACT step of the protocol's decision loop — the task's
//! category (the reference classifier's eight), whether it changes files, the tool to act
//! with and what to query memory for first.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

/// `weft task` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum TaskCommand {
    /// Classify a task and print the loop's plan (READ → QUERY → ACT → RECORD → PROMOTE).
    #[command(
        after_help = "Categories: sysadmin, security, ml-training, debugging, coding, file-ops, testing, constraint-satisfaction, unknown.\n\nExamples:\n  weft task classify \"Fix the crash in the login handler\"\n  weft task classify \"Why does nginx return 502?\" --json"
    )]
    Classify {
        /// The task's text.
        text: String,
        /// Print JSON: `{"category", "confidence", "keywords", "changesFiles", "act", "memoryQueries"}`.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(command: TaskCommand) -> anyhow::Result<ExitCode> {
    let TaskCommand::Classify { text, json } = command;
    let class = weft_gate::classify_task(&text);
    if json {
        println!(
            "{}",
            json!({
                "category": class.category,
                "confidence": class.confidence,
                "keywords": class.keywords,
                "changesFiles": class.changes_files,
                "act": class.act,
                "memoryQueries": class.memory_queries,
            })
        );
    } else {
        print!("{}", class.plan());
    }
    Ok(ExitCode::SUCCESS)
}
