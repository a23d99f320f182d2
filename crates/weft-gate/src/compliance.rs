//! `weft compliance check`: the conformance items of the protocol's §6 for a repository,
//! each checked from the hook registration, the gate settings and — for the hooks — by
//! running Weft's own hook once in-process on a sample payload.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::config::GateConfig;
use crate::hook::{Harness, HookEvent, run_hook};
use crate::install::{Coverage, doctor};
use crate::process;

/// The outcome of one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Conforms.
    Pass,
    /// Does not conform.
    Fail,
    /// Cannot be checked (yet).
    Unknown,
}

impl Status {
    /// `pass`, `FAIL`, `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "FAIL",
            Status::Unknown => "unknown",
        }
    }
}

/// One §6 item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The item, as §6 words it.
    pub title: &'static str,
    /// The outcome.
    pub status: Status,
    /// Why.
    pub detail: String,
}

fn wired(coverage: &[Coverage], claude: &str, cursor: &str) -> Vec<&'static str> {
    coverage
        .iter()
        .filter(|c| {
            c.wired(if c.harness == "claude" {
                claude
            } else {
                cursor
            })
        })
        .map(|c| c.harness)
        .collect()
}

/// Checks the repository at `root`.
pub fn check(root: &Path) -> Vec<Item> {
    let coverage = doctor(root);
    let config = GateConfig::load(root);
    let mut items = Vec::new();

    let starts = wired(&coverage, "SessionStart", "sessionStart");
    // The hooks' self-tests run in a scratch folder, so they leave nothing in the project's
    // audit trail (a test denial would show up in the next session's context).
    let scratch = std::env::temp_dir().join(format!(
        "weft-compliance-{}-{}",
        std::process::id(),
        crate::db::now_ms()
    ));
    let _ = std::fs::create_dir_all(&scratch);
    let answer = run_hook(
        HookEvent::SessionStart,
        Some(Harness::Claude),
        json!({"session_id": "weft-compliance-check", "hook_event_name": "SessionStart", "cwd": scratch, "source": "startup"})
            .to_string()
            .as_bytes(),
        &scratch,
    );
    let injects = answer.exit_code == 0 && answer.stdout.contains("<uap-context>");
    items.push(Item {
        title: "Session-start hook injects <uap-context> memory and is fail-open",
        status: if !starts.is_empty() && injects {
            Status::Pass
        } else {
            Status::Fail
        },
        detail: format!(
            "wired for: {}; weft hook session-start {}",
            if starts.is_empty() {
                "no harness".to_owned()
            } else {
                starts.join(", ")
            },
            if injects {
                "prints the block and exits 0"
            } else {
                "did not print the block"
            }
        ),
    });

    let pre = wired(&coverage, "PreToolUse", "preToolUse");
    let gaps: Vec<String> = coverage
        .iter()
        .filter(|c| c.present)
        .flat_map(|c| {
            c.uncovered_tools
                .iter()
                .map(move |t| format!("{} {t}", c.harness))
        })
        .collect();
    let gates_on = config
        .as_ref()
        .map(|c| c.worktree && c.dangerous_commands)
        .unwrap_or(false);
    items.push(Item {
        title: "Pre-tool-use hook runs worktree, command-safety, and policy gates",
        status: if !pre.is_empty() && gaps.is_empty() && gates_on {
            Status::Pass
        } else {
            Status::Fail
        },
        detail: match (&config, pre.is_empty(), gaps.is_empty()) {
            (Err(e), _, _) => format!("weft.toml: {e}"),
            (_, true, _) => {
                "no harness runs a pre-tool-use gate (weft hooks install --harness claude|cursor)"
                    .into()
            }
            (_, false, false) => format!("tools no gate covers: {}", gaps.join(", ")),
            (Ok(_), false, true) if !gates_on => {
                "[gates] turns the worktree gate or the command guard off".into()
            }
            _ => format!("wired for: {}", pre.join(", ")),
        },
    });

    let denial = run_hook(
        HookEvent::PreToolUse,
        Some(Harness::Claude),
        json!({"session_id": "weft-compliance-check", "hook_event_name": "PreToolUse", "cwd": root,
               "tool_name": "Bash", "tool_input": {"command": "git push --force origin main"}})
        .to_string()
        .as_bytes(),
        root,
    );
    items.push(Item {
        title: "A REQUIRED policy denial aborts the tool call (exit 2)",
        status: if denial.exit_code == 2 && !pre.is_empty() {
            Status::Pass
        } else {
            Status::Fail
        },
        detail: format!(
            "a force push to main through weft hook pre-tool-use exits {}{}",
            denial.exit_code,
            if pre.is_empty() {
                "; but no harness runs the hook"
            } else {
                ""
            }
        ),
    });

    // The loop is the agent's to follow; what can be checked is that every wired harness is
    // told it: Claude Code at each prompt (the task classified, the loop planned), Cursor at
    // session start (its prompt event cannot add context).
    let plans = wired(&coverage, "UserPromptSubmit", "sessionStart");
    let plan = run_hook(
        HookEvent::UserPromptSubmit,
        Some(Harness::Claude),
        json!({"session_id": "weft-compliance-check", "hook_event_name": "UserPromptSubmit", "cwd": scratch,
               "prompt": "Fix the failing parser test"})
        .to_string()
        .as_bytes(),
        &scratch,
    );
    let planned = plan.exit_code == 0
        && plan.stdout.contains("Loop: READ")
        && plan.stdout.contains("Task class: ");
    let unplanned: Vec<&str> = coverage
        .iter()
        .filter(|c| c.present && !plans.contains(&c.harness))
        .map(|c| c.harness)
        .collect();
    items.push(Item {
        title: "The agent follows the READ → QUERY → ACT → RECORD → PROMOTE loop",
        status: if !plans.is_empty() && unplanned.is_empty() && planned {
            Status::Pass
        } else {
            Status::Fail
        },
        detail: if plans.is_empty() || !unplanned.is_empty() {
            format!(
                "the loop's plan reaches no agent of: {} (Claude Code needs the UserPromptSubmit hook: weft hooks install)",
                if unplanned.is_empty() {
                    "any harness".to_owned()
                } else {
                    unplanned.join(", ")
                }
            )
        } else if !planned {
            "weft hook user-prompt-submit did not print the plan".into()
        } else {
            format!(
                "each task is classified and planned for: {} (following the loop is the agent's part)",
                plans.join(", ")
            )
        },
    });

    let root_changes = process::run(
        "git",
        &["status".to_owned(), "--porcelain".to_owned()],
        root,
        &[],
        Duration::from_secs(60),
    )
    .ok()
    .filter(|d| d.code == Some(0))
    .map(|d| {
        d.stdout
            .lines()
            .map(|l| l.get(3..).unwrap_or(l).to_owned())
            .filter(|p| {
                !(p.starts_with(".weft/")
                    || p.starts_with(".claude/")
                    || p.starts_with(".cursor/")
                    || p.starts_with(".worktrees/")
                    || p == "weft.toml")
            })
            .collect::<Vec<_>>()
    });
    let worktree_on = config.as_ref().map(|c| c.worktree).unwrap_or(false);
    items.push(Item {
        title: "All edits occur inside .worktrees/NNN-<slug>/",
        status: match (&root_changes, worktree_on) {
            (Some(changes), true) if changes.is_empty() => Status::Pass,
            (None, _) => Status::Unknown,
            _ => Status::Fail,
        },
        detail: match (&root_changes, worktree_on) {
            (_, false) => "the worktree gate is off ([gates] worktree = false)".into(),
            (None, _) => "not a git repository".into(),
            (Some(c), true) if c.is_empty() => {
                "the worktree gate is on and the project root has no uncommitted edits".into()
            }
            (Some(c), true) => format!("uncommitted edits at the project root: {}", c.join(", ")),
        },
    });

    let stops = wired(&coverage, "Stop", "stop");
    let required = config
        .as_ref()
        .map(|c| c.completion.checks.iter().filter(|k| k.required).count())
        .unwrap_or(0);
    items.push(Item {
        title: "Completion gates pass before any DONE claim",
        status: if !stops.is_empty() && required > 0 {
            Status::Pass
        } else {
            Status::Fail
        },
        detail: if stops.is_empty() {
            "no harness runs the stop hook".into()
        } else if required == 0 {
            "no required completion check is configured ([project] testCommand, [completion])"
                .into()
        } else {
            format!(
                "the stop hook runs {required} required check(s) for: {}",
                stops.join(", ")
            )
        },
    });
    let _ = std::fs::remove_dir_all(&scratch);
    items
}
