//! `weft compliance check` (the protocol's §6 items) and `weft completion check` (the
//! completion checklist, as the stop hook runs it).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use weft_gate::compliance::{self, Status};
use weft_gate::{GateConfig, GateDb};

/// The project root of the working directory (the main worktree's top).
pub(crate) fn project_root() -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir().context("no working directory")?;
    Ok(weft_gate::project_root(&cwd))
}

/// `weft compliance` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum ComplianceCommand {
    /// Report the protocol's §6 conformance items for this repository. Exits 1 on a failure.
    Check,
}

/// `weft completion` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum CompletionCommand {
    /// Run the completion checklist of weft.toml here. Exits 1 when a required check fails.
    Check,
}

pub(crate) fn run(command: ComplianceCommand) -> anyhow::Result<ExitCode> {
    let ComplianceCommand::Check = command;
    let root = project_root()?;
    let items = compliance::check(&root);
    for item in &items {
        println!(
            "[{}] {}\n        {}",
            item.status.as_str(),
            item.title,
            item.detail
        );
    }
    let failed = items.iter().any(|i| i.status == Status::Fail);
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub(crate) fn run_completion(command: CompletionCommand) -> anyhow::Result<ExitCode> {
    let CompletionCommand::Check = command;
    let cwd = std::env::current_dir().context("no working directory")?;
    let root = weft_gate::project_root(&cwd);
    let config = GateConfig::load(&root)?;
    let db = GateDb::open_healing(&GateDb::path_for(&root))
        .ok()
        .map(|(db, _)| db);
    let checklist = weft_gate::run_checklist(&config, &cwd, db.as_ref(), None);
    if checklist.results.is_empty() {
        println!(
            "no completion checks configured ([project] testCommand, [completion] in weft.toml)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    for r in &checklist.results {
        println!(
            "{} {}{}: {}",
            if r.passed { "pass" } else { "FAIL" },
            r.name,
            if r.required { "" } else { " (optional)" },
            r.detail
        );
    }
    Ok(if checklist.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
