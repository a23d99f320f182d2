//! `weft hooks install --harness claude|cursor` and `weft hooks doctor`.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Subcommand, ValueEnum};
use serde_json::json;
use weft_gate::{Harness, install};

/// Harnesses whose registration Weft writes.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum InstallHarness {
    /// `.claude/settings.json`.
    Claude,
    /// `.cursor/hooks.json`.
    Cursor,
}

/// `weft hooks` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum HooksCommand {
    /// Register `weft hook …` in a harness's configuration, merging with what is there.
    Install {
        /// The harness.
        #[arg(long, value_enum)]
        harness: InstallHarness,
        /// The `weft` program the harness runs (default: this one, by absolute path).
        #[arg(long, value_name = "PATH")]
        bin: Option<String>,
    },
    /// Report which events and tools each harness has wired to a gate. Exits 1 on a gap.
    Doctor {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(command: HooksCommand) -> anyhow::Result<ExitCode> {
    let root = super::compliance::project_root()?;
    match command {
        HooksCommand::Install { harness, bin } => {
            let bin = match bin {
                Some(b) => b,
                None => std::env::current_exe()
                    .context("cannot find this program's path; pass --bin")?
                    .to_string_lossy()
                    .into_owned(),
            };
            let harness = match harness {
                InstallHarness::Claude => Harness::Claude,
                InstallHarness::Cursor => Harness::Cursor,
            };
            let report = install::install(&root, harness, &bin)?;
            println!(
                "{}: added {} ({}), already there: {}",
                report.file.display(),
                report.added.len(),
                report.added.join(", "),
                if report.already.is_empty() {
                    "none".to_owned()
                } else {
                    report.already.join(", ")
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        HooksCommand::Doctor { json } => {
            let coverage = install::doctor(&root);
            let complete = coverage
                .iter()
                .filter(|c| c.present)
                .all(install::Coverage::complete)
                && coverage.iter().any(|c| c.present);
            if json {
                let value: Vec<_> = coverage
                    .iter()
                    .map(|c| {
                        json!({
                            "harness": c.harness,
                            "present": c.present,
                            "complete": c.complete(),
                            "events": c.events.iter().map(|e| json!({"event": e.event, "commands": e.commands})).collect::<Vec<_>>(),
                            "uncovered_tools": c.uncovered_tools,
                            "problems": c.problems,
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                for c in &coverage {
                    if !c.present {
                        println!("{}: not configured", c.harness);
                        continue;
                    }
                    println!(
                        "{}: {}",
                        c.harness,
                        if c.complete() { "complete" } else { "GAPS" }
                    );
                    for e in &c.events {
                        println!(
                            "  {:<14} {}",
                            e.event,
                            if e.commands.is_empty() {
                                "MISSING".to_owned()
                            } else {
                                e.commands.join(" | ")
                            }
                        );
                    }
                    for t in &c.uncovered_tools {
                        println!("  uncovered tool: {t}");
                    }
                    for p in &c.problems {
                        println!("  problem: {p}");
                    }
                }
            }
            Ok(if complete {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
