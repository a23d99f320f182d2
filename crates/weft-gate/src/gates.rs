//! [`Gates`]: the three gates of the protocol, evaluated for one tool call.
//!
//! ```text
//! check(call):
//!     edit  (Edit, Write, MultiEdit, NotebookEdit, StrReplace, write_file, apply_patch, …)
//!         → worktree gate: every target under <root>/.worktrees/NNN-<slug>/
//!     shell (Bash, Shell, run_command, …)
//!         → dangerous-command guard
//!     every tool → policy gate: the policies of the call's stage (+ `always`), and of the
//!         `review` stage too when the call is completion-like (merge, deploy, release, done)
//! ```
//!
//! This is a plain library call with no I/O besides reading `.git` files and running
//! enforcers; recording the verdict in the audit trail is the caller's job (the hook does it,
//! and a runtime tool-pipeline stage can do the same).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::command_guard::{self, GuardContext};
use crate::config::GateConfig;
use crate::invocation::{Stage, ToolInvocation, ToolKind};
use crate::policy::Policy;
use crate::project::normalize;
use crate::verdict::{Finding, Level, Verdict};

/// The environment variable that turns the worktree gate off (honoured and logged).
pub const NO_WORKTREE_ENV: &str = "UAP_NO_WORKTREE";

/// The gates of one project.
#[derive(Debug, Clone)]
pub struct Gates {
    root: PathBuf,
    config: GateConfig,
    policies: Vec<Policy>,
    worktree_override: bool,
}

impl Gates {
    /// The gates of the project at `root` (the main worktree's top), with its settings.
    /// `UAP_NO_WORKTREE=1` in the environment turns the worktree gate off (each skipped
    /// check is still reported as a passing finding that says so).
    pub fn new(root: impl Into<PathBuf>, config: GateConfig) -> Self {
        let worktree_override = std::env::var(NO_WORKTREE_ENV).is_ok_and(|v| v.trim() == "1");
        Gates {
            root: root.into(),
            config,
            policies: Vec::new(),
            worktree_override,
        }
    }

    /// The policies of the policy gate (usually [`crate::GateDb::policies`]).
    pub fn with_policies(mut self, policies: Vec<Policy>) -> Self {
        self.policies = policies;
        self
    }

    /// Sets the worktree override explicitly (instead of reading the environment).
    pub fn with_worktree_override(mut self, on: bool) -> Self {
        self.worktree_override = on;
        self
    }

    /// The project root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The settings.
    pub fn config(&self) -> &GateConfig {
        &self.config
    }

    /// Judges one call. Never fails: a check that cannot be carried out is a failed finding
    /// (which blocks when it is required).
    pub fn check(&self, invocation: &ToolInvocation) -> Verdict {
        let mut verdict = Verdict::default();
        if invocation.stage == Stage::PreExec {
            match &invocation.kind {
                ToolKind::Edit { paths } if self.config.worktree => {
                    verdict.push(self.worktree_gate(invocation, paths));
                }
                ToolKind::Shell { command } if self.config.dangerous_commands => {
                    let ctx = GuardContext {
                        cwd: &invocation.cwd,
                        protected: &self.config.protected_branches,
                    };
                    let reason = command_guard::check(command, &ctx);
                    verdict.push(Finding {
                        gate: "command",
                        policy: None,
                        level: Level::Required,
                        passed: reason.is_none(),
                        message: reason.unwrap_or_default(),
                    });
                }
                _ => {}
            }
        }
        let mut stages = vec![invocation.stage];
        if invocation.completion_operation().is_some() && invocation.stage != Stage::Review {
            stages.push(Stage::Review);
        }
        let mut seen = HashSet::new();
        for stage in stages {
            for policy in &self.policies {
                if policy.applies(invocation, stage) && seen.insert(policy.id.as_str()) {
                    verdict.push(policy.evaluate(invocation, stage, &self.root));
                }
            }
        }
        verdict
    }

    fn worktree_gate(&self, invocation: &ToolInvocation, paths: &[String]) -> Finding {
        let finding = |passed: bool, message: String| Finding {
            gate: "worktree",
            policy: None,
            level: Level::Required,
            passed,
            message,
        };
        if self.worktree_override {
            return finding(
                true,
                format!("worktree gate skipped: {NO_WORKTREE_ENV}=1 is set"),
            );
        }
        if paths.is_empty() {
            return finding(
                false,
                format!(
                    "{} names no file to edit, so the worktree rule cannot be checked",
                    invocation.tool
                ),
            );
        }
        let outside: Vec<String> = paths
            .iter()
            .filter(|p| !self.in_worktree(&normalize(&invocation.cwd, Path::new(p))))
            .cloned()
            .collect();
        if outside.is_empty() {
            return finding(true, String::new());
        }
        finding(
            false,
            format!(
                "edits happen only inside a worktree under {}/.worktrees/NNN-<slug>/, for every file type; {} is outside one. Run `weft worktree create <slug>` and edit there (read-only work needs no worktree)",
                self.root.display(),
                outside.join(", ")
            ),
        )
    }

    /// Whether `path` (absolute, normalized) lies inside `<root>/.worktrees/NNN-<slug>/`.
    fn in_worktree(&self, path: &Path) -> bool {
        let inside = |root: &Path, path: &Path| {
            let Ok(rest) = path.strip_prefix(root.join(".worktrees")) else {
                return false;
            };
            let mut parts = rest.components();
            let Some(first) = parts.next() else {
                return false;
            };
            is_worktree_name(&first.as_os_str().to_string_lossy()) && parts.next().is_some()
        };
        if inside(&self.root, path) {
            return true;
        }
        // The same place spelt through a symbolic link (`/tmp` → `/private/tmp`).
        match (
            self.root.canonicalize(),
            path.parent().and_then(|p| p.canonicalize().ok()),
        ) {
            (Ok(root), Some(parent)) => {
                let file = path.file_name().map(|f| parent.join(f)).unwrap_or(parent);
                inside(&root, &file)
            }
            _ => false,
        }
    }
}

/// `NNN-<slug>`: three or more digits, a dash, a non-empty slug.
pub fn is_worktree_name(name: &str) -> bool {
    let Some((number, slug)) = name.split_once('-') else {
        return false;
    };
    number.len() >= 3
        && number.chars().all(|c| c.is_ascii_digit())
        && !slug.is_empty()
        && slug
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worktree_names() {
        assert!(is_worktree_name("001-fix-login"));
        assert!(is_worktree_name("1234-x"));
        assert!(!is_worktree_name("01-x"));
        assert!(!is_worktree_name("abc-x"));
        assert!(!is_worktree_name("001-"));
        assert!(!is_worktree_name("001"));
    }
}
