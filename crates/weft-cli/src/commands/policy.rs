//! `weft policy add | list | remove | enable | disable | check | audit`: the policy database
//! (the `gate_policies` table of the project's `.weft/weft.db`) and its audit trail.

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use weft_gate::{GateConfig, GateDb, Gates, Level, Policy, Stage, ToolInvocation};

/// `weft policy` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum PolicyCommand {
    /// Add a policy (or replace the one with the same id).
    Add(AddArgs),
    /// List the policies.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a policy.
    Remove {
        /// The policy's id.
        id: String,
    },
    /// Turn a policy on.
    Enable {
        /// The policy's id.
        id: String,
    },
    /// Turn a policy off (the gate skips it).
    Disable {
        /// The policy's id.
        id: String,
    },
    /// Dry-run the gates on one operation: exits 2 when it would be denied.
    Check {
        /// The tool (`Bash`, `Write`, `Edit`, …).
        #[arg(long)]
        operation: String,
        /// Its arguments as JSON.
        #[arg(long, default_value = "{}")]
        args: String,
        /// The stage: pre-exec, post-exec, review.
        #[arg(long, default_value = "pre-exec")]
        stage: String,
    },
    /// The audit trail, newest first.
    Audit {
        /// At most this many rows.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Only failed checks.
        #[arg(long)]
        failures: bool,
        /// Only this policy.
        #[arg(long)]
        policy: Option<String>,
    },
}

/// `weft policy add` flags.
#[derive(Debug, Args)]
pub(crate) struct AddArgs {
    /// A short slug.
    id: String,
    /// REQUIRED (blocks), RECOMMENDED or OPTIONAL (log only).
    #[arg(long, default_value = "REQUIRED")]
    level: String,
    /// pre-exec, post-exec, review or always.
    #[arg(long, default_value = "pre-exec")]
    stage: String,
    /// The tools: a regex over tool names or kinds (edit, shell, read, other); `*` for all.
    #[arg(long, default_value = "*")]
    tools: String,
    /// Deny calls whose command, paths or arguments match this regex.
    #[arg(long, value_name = "REGEX")]
    deny_pattern: Option<String>,
    /// An external enforcer: run as `<enforcer> --operation OP --args JSON`.
    #[arg(long, value_name = "COMMAND")]
    enforcer: Option<String>,
    /// What the policy is for.
    #[arg(long, default_value = "")]
    description: String,
}

fn open() -> anyhow::Result<GateDb> {
    let root = super::compliance::project_root()?;
    let path = GateDb::path_for(&root);
    Ok(GateDb::open_healing(&path)
        .with_context(|| format!("cannot open {}", path.display()))?
        .0)
}

fn policy_json(p: &Policy) -> Value {
    json!({
        "id": p.id, "description": p.description, "level": p.level.as_str(), "stage": p.stage.as_str(),
        "tools": p.tools, "deny_pattern": p.deny_pattern, "enforcer": p.enforcer, "enabled": p.enabled,
    })
}

pub(crate) fn run(command: PolicyCommand) -> anyhow::Result<ExitCode> {
    match command {
        PolicyCommand::Add(a) => {
            let Some(level) = Level::parse(&a.level) else {
                bail!("--level must be REQUIRED, RECOMMENDED or OPTIONAL");
            };
            let Some(stage) = Stage::parse(&a.stage) else {
                bail!("--stage must be pre-exec, post-exec, review or always");
            };
            if let Some(p) = &a.deny_pattern {
                regex_check(p)?;
            }
            let policy = Policy {
                id: a.id,
                description: a.description,
                level,
                stage,
                tools: a.tools,
                deny_pattern: a.deny_pattern,
                enforcer: a.enforcer,
                enabled: true,
            };
            open()?.put_policy(&policy)?;
            println!("policy {} saved ({}, {})", policy.id, level, stage.as_str());
        }
        PolicyCommand::List { json } => {
            let policies = open()?.policies()?;
            if json {
                let all: Vec<Value> = policies.iter().map(policy_json).collect();
                println!("{}", serde_json::to_string_pretty(&all)?);
            } else if policies.is_empty() {
                println!("no policies (weft policy add ID --deny-pattern REGEX | --enforcer CMD)");
            } else {
                for p in &policies {
                    println!(
                        "{} {:<11} {:<9} tools={} {}{}{}",
                        if p.enabled { "on " } else { "off" },
                        p.level.as_str(),
                        p.stage.as_str(),
                        p.tools,
                        p.id,
                        p.deny_pattern
                            .as_ref()
                            .map(|d| format!(" deny={d:?}"))
                            .unwrap_or_default(),
                        p.enforcer
                            .as_ref()
                            .map(|e| format!(" enforcer={e:?}"))
                            .unwrap_or_default(),
                    );
                }
            }
        }
        PolicyCommand::Remove { id } => {
            if !open()?.remove_policy(&id)? {
                bail!("no policy {id:?}");
            }
            println!("policy {id} removed");
        }
        PolicyCommand::Enable { id } => toggle(&id, true)?,
        PolicyCommand::Disable { id } => toggle(&id, false)?,
        PolicyCommand::Check {
            operation,
            args,
            stage,
        } => {
            let input: Value = serde_json::from_str(&args).context("--args is not JSON")?;
            let Some(stage) = Stage::parse(&stage) else {
                bail!("--stage must be pre-exec, post-exec, review or always");
            };
            let cwd = std::env::current_dir().context("no working directory")?;
            let root = weft_gate::project_root(&cwd);
            let gates =
                Gates::new(&root, GateConfig::load(&root)?).with_policies(open()?.policies()?);
            let verdict = gates.check(&ToolInvocation::new(operation, input, &cwd).at(stage));
            for f in &verdict.findings {
                println!(
                    "{} {}{} {}: {}",
                    if f.passed {
                        "pass"
                    } else if f.blocks() {
                        "DENY"
                    } else {
                        "warn"
                    },
                    f.gate,
                    f.policy
                        .as_ref()
                        .map(|p| format!(" {p}"))
                        .unwrap_or_default(),
                    f.level,
                    if f.message.is_empty() {
                        "ok"
                    } else {
                        &f.message
                    }
                );
            }
            println!(
                "{}",
                if verdict.allowed() {
                    "allowed"
                } else {
                    "denied"
                }
            );
            return Ok(ExitCode::from(if verdict.allowed() { 0 } else { 2 }));
        }
        PolicyCommand::Audit {
            limit,
            failures,
            policy,
        } => {
            let rows = open()?.recent_audit(0, failures, limit.max(1) * 4)?;
            for r in rows
                .iter()
                .filter(|r| {
                    policy
                        .as_ref()
                        .is_none_or(|p| r.policy_id.as_ref() == Some(p))
                })
                .take(limit)
            {
                let at = chrono::DateTime::from_timestamp_millis(r.at)
                    .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
                    .unwrap_or_default();
                println!(
                    "{at} {:<13} {:<5} {:<10} {}{} {}{}",
                    r.event,
                    if r.passed { "pass" } else { "FAIL" },
                    r.gate,
                    r.tool.as_deref().unwrap_or(""),
                    r.policy_id
                        .as_ref()
                        .map(|p| format!(" [{p}]"))
                        .unwrap_or_default(),
                    r.message.lines().next().unwrap_or_default(),
                    r.summary
                        .as_ref()
                        .map(|s| format!(" ({s})"))
                        .unwrap_or_default(),
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn toggle(id: &str, on: bool) -> anyhow::Result<()> {
    if !open()?.set_policy_enabled(id, on)? {
        bail!("no policy {id:?}");
    }
    println!("policy {id} {}", if on { "enabled" } else { "disabled" });
    Ok(())
}

fn regex_check(pattern: &str) -> anyhow::Result<()> {
    weft_gate::check_pattern(pattern)
        .map_err(|e| anyhow::anyhow!("--deny-pattern is not a valid regex: {e}"))
}
