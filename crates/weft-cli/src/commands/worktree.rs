//! `weft worktree create <slug> | ensure [--strict] | pr | finish | list`: the worktree
//! convention (`.worktrees/NNN-<slug>/`, one `git worktree` and branch per piece of work).

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use weft_gate::{GateConfig, GateDb, worktree};

/// `weft worktree` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum WorktreeCommand {
    /// Create `.worktrees/NNN-<slug>/` on a new branch `feature/NNN-<slug>`.
    Create {
        /// Lowercase letters, digits, '-', '_', '.'.
        slug: String,
        /// The branch or commit to start from (default: main, else master, else HEAD).
        #[arg(long)]
        base: Option<String>,
    },
    /// Say whether the working directory is inside a worktree (`--strict`: exit 1 if not).
    Ensure {
        /// Exit 1 when not inside a worktree.
        #[arg(long)]
        strict: bool,
    },
    /// Open a pull request from this worktree's branch against the base branch (with `gh`
    /// when it is installed; otherwise print the exact commands).
    Pr {
        /// Print the commands instead of running them.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove a finished worktree (after its merge) and its merged branch.
    Finish {
        /// `NNN-<slug>` or the slug (default: the worktree you are in).
        name: Option<String>,
        /// Remove it even with uncommitted changes.
        #[arg(long)]
        force: bool,
    },
    /// List the worktrees under `.worktrees/`.
    List,
}

pub(crate) fn run(command: WorktreeCommand) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("no working directory")?;
    let root = weft_gate::project_root(&cwd);
    let config = GateConfig::load(&root)?;
    match command {
        WorktreeCommand::Create { slug, base } => {
            let created = worktree::create(&root, &slug, base.as_deref(), &config)?;
            println!(
                "created {} on branch {}\n{}",
                created.name,
                created.branch.as_deref().unwrap_or("?"),
                created.path.display()
            );
        }
        WorktreeCommand::Ensure { strict } => match worktree::current(&cwd) {
            Some(w) => println!(
                "inside worktree {} ({})",
                w.name,
                w.branch.as_deref().unwrap_or("detached")
            ),
            None => {
                println!(
                    "not inside a worktree: run `weft worktree create <slug>` and work in .worktrees/NNN-<slug>/"
                );
                if strict {
                    return Ok(ExitCode::from(1));
                }
            }
        },
        WorktreeCommand::Pr { dry_run } => {
            let plan = worktree::pr_plan(&cwd, &config)?;
            if dry_run || !worktree::on_path("gh") {
                if !dry_run {
                    println!("gh (the forge CLI) is not installed; run:");
                }
                for line in plan.lines() {
                    println!("{line}");
                }
            } else {
                print!("{}", worktree::run_plan(&plan, &cwd)?);
            }
        }
        WorktreeCommand::Finish { name, force } => {
            let (finished, note) = worktree::finish(&root, &cwd, name.as_deref(), force)?;
            if let Ok((db, _)) = GateDb::open_healing(&GateDb::path_for(&root)) {
                let _ = db.release_claims_under(&finished.path);
            }
            println!("{note}");
        }
        WorktreeCommand::List => {
            let all = worktree::list(&root)?;
            if all.is_empty() {
                println!("no worktrees under .worktrees/");
            }
            for w in all {
                println!(
                    "{:<30} {}",
                    w.name,
                    w.branch.as_deref().unwrap_or("(detached)")
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
