//! The `<uap-context>` block printed at session start.
//!
//! It holds the memory (`weft-memory`: the top memories of the last 24 hours and the open
//! session loops — actions, goals and decisions of importance ≥ 7) and what the gate database
//! knows: where the agent stands (root or worktree), the active worktrees, open loops
//! (sessions whose last "done" was refused), recent gate denials, the REQUIRED policies, the
//! completion checklist and the other live agents with the paths they claim. Advisory only.

use std::fmt::Write as _;
use std::path::Path;

use crate::config::{CheckSpec, GateConfig};
use crate::db::{GateDb, now_ms};
use crate::gates::is_worktree_name;
use crate::project::Repo;
use crate::verdict::Level;
use weft_memory::{Entry, SessionContext};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

pub(crate) fn time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default()
}

/// Builds the block (never fails: a part that cannot be read is left out, with a note).
pub(crate) fn context_block(
    root: &Path,
    cwd: &Path,
    config: &GateConfig,
    db: Option<&GateDb>,
    memory: Option<&SessionContext>,
    session: Option<&str>,
    housekeeping: &[String],
) -> String {
    let mut out = String::from("<uap-context>\n");
    let _ = writeln!(out, "Project: {}", root.display());
    let repo = Repo::discover(cwd);
    let branch = repo.as_ref().and_then(Repo::branch);
    let in_worktree = cwd
        .strip_prefix(root.join(".worktrees"))
        .ok()
        .and_then(|rest| rest.components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|n| is_worktree_name(n));
    match (&in_worktree, config.worktree) {
        (Some(name), _) => {
            let _ = writeln!(
                out,
                "You are in worktree .worktrees/{name}/ (branch {}). Edit only here.",
                branch.as_deref().unwrap_or("?")
            );
        }
        (None, true) => {
            let _ = writeln!(
                out,
                "You are at the project root (branch {}). Edits here are refused: run `weft worktree create <slug>` and edit under .worktrees/NNN-<slug>/ (read-only work needs no worktree).",
                branch.as_deref().unwrap_or("?")
            );
        }
        (None, false) => {
            let _ = writeln!(out, "The worktree gate is off for this project.");
        }
    }
    if let Ok(entries) = std::fs::read_dir(root.join(".worktrees")) {
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| is_worktree_name(n))
            .collect();
        names.sort();
        if !names.is_empty() {
            let _ = writeln!(out, "Worktrees: {}", names.join(", "));
        }
    }
    if let Some(memory) = memory {
        let line = |e: &Entry| {
            format!(
                "- #{} [{} · {} · {}] {}",
                e.id,
                e.tier.as_str(),
                e.kind.as_str(),
                e.importance,
                crate::invocation::clip(&e.content.replace('\n', " "), 240)
            )
        };
        if !memory.top.is_empty() {
            out.push_str("Memories (last 24h, most important first):\n");
            for e in &memory.top {
                let _ = writeln!(out, "{}", line(e));
            }
        }
        if !memory.loops.is_empty() {
            out.push_str(
                "Open session loops (action/goal/decision, importance >= 7; `weft memory close ID` when done):\n",
            );
            for e in &memory.loops {
                let _ = writeln!(out, "{}", line(e));
            }
        }
    }
    if memory.is_some() {
        out.push_str(
            "Memory loop: READ this block; QUERY `weft memory query \"<topic>\"` before you act; RECORD \
             `weft memory store \"<what you learned and why>\" --type lesson|decision|pattern|config --importance N`; \
             PROMOTE `weft memory promote` before you finish (trivia, transient debugging state and secrets are refused).\n",
        );
    }
    if let Some(db) = db {
        let since = now_ms() - DAY_MS;
        match db.open_loops(since) {
            Ok(loops) if !loops.is_empty() => {
                out.push_str("Open loops (refused \"done\", last 24h):\n");
                for (s, at, why) in loops {
                    let mine = if Some(s.as_str()) == session {
                        " (this session)"
                    } else {
                        ""
                    };
                    let first = why.lines().nth(1).unwrap_or(why.as_str()).trim();
                    let _ = writeln!(out, "- {}{mine}: {first}", time(at));
                }
            }
            _ => {}
        }
        if let Ok(denials) = db.recent_audit(since, true, 5)
            && !denials.is_empty()
        {
            out.push_str("Recent gate denials (last 24h):\n");
            for d in denials {
                let first = d.message.lines().next().unwrap_or_default();
                let _ = writeln!(
                    out,
                    "- {} {} [{}] {}",
                    time(d.at),
                    d.tool.as_deref().unwrap_or(&d.event),
                    d.gate,
                    crate::invocation::clip(first, 160)
                );
            }
        }
        if let Ok(policies) = db.policies() {
            let required: Vec<String> = policies
                .iter()
                .filter(|p| p.enabled && p.level == Level::Required)
                .map(|p| {
                    if p.description.is_empty() {
                        p.id.clone()
                    } else {
                        format!("{} ({})", p.id, p.description)
                    }
                })
                .collect();
            if !required.is_empty() {
                let _ = writeln!(out, "REQUIRED policies: {}", required.join("; "));
            }
        }
        if let Ok(agents) = db.other_agents(session)
            && !agents.is_empty()
        {
            out.push_str("Other live agents:\n");
            for a in agents.iter().take(10) {
                let claims = if a.claims.is_empty() {
                    String::new()
                } else {
                    format!(", editing {}", a.claims.join(", "))
                };
                let _ = writeln!(
                    out,
                    "- {} ({}, last seen {}){claims}",
                    a.session_id,
                    a.harness,
                    time(a.last_seen)
                );
            }
        }
    }
    if !config.completion.checks.is_empty() {
        let checks: Vec<String> = config
            .completion
            .checks
            .iter()
            .map(|c| match &c.spec {
                CheckSpec::Command(line) => format!("{} (`{line}`)", c.name),
                _ => c.name.clone(),
            })
            .collect();
        let _ = writeln!(
            out,
            "Completion gates (must pass before you claim done): {}",
            checks.join(", ")
        );
    }
    for note in housekeeping {
        let _ = writeln!(out, "Note: {note}");
    }
    out.push_str("</uap-context>\n");
    out
}

/// The `<uap-context>` block `weft hook session-start` injects, for a run of Weft's own that
/// starts in `root` working in `cwd`: the protocol's rules, the project's state and its
/// memory (the last day's top memories, open loops). It never fails: what could not be read
/// is said in the block.
pub fn start_context(root: &Path, cwd: &Path) -> String {
    let mut housekeeping = Vec::new();
    let config = GateConfig::load(root).unwrap_or_else(|e| {
        housekeeping.push(format!(
            "the project's gate settings could not be read ({e})"
        ));
        GateConfig::default()
    });
    let db = match GateDb::open_healing(&GateDb::path_for(root)) {
        Ok((db, notes)) => {
            housekeeping.extend(notes);
            Some(db)
        }
        Err(e) => {
            housekeeping.push(format!("the gate database is unavailable ({e})"));
            None
        }
    };
    let memory = match weft_memory::MemoryDb::open_healing(&weft_memory::MemoryDb::path_for(root)) {
        Ok((memory, notes)) => {
            housekeeping.extend(notes);
            match weft_memory::Memory::new(memory).session_context(crate::hook::MEMORY_LINES) {
                Ok(context) => Some(context),
                Err(e) => {
                    housekeeping.push(format!("memory not injected: {e}"));
                    None
                }
            }
        }
        Err(e) => {
            housekeeping.push(format!("memory not injected: {e}"));
            None
        }
    };
    context_block(
        root,
        cwd,
        &config,
        db.as_ref(),
        memory.as_ref(),
        None,
        &housekeeping,
    )
}
