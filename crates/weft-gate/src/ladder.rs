//! The verifier ladder of `weft deliver`: the project's build, type-check, test and lint
//! commands (the `[completion]` keys `build`, `typeCheck`, `tests` / `[project] testCommand`,
//! `lint` of `weft.toml`), run in that order as real commands. The first required rung that
//! fails stops the climb (the rungs above it are reported skipped); optional rungs (listed in
//! `[completion] optional`) are run and reported but never block. "Delivered" means every
//! required rung passed.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::config::{CheckSpec, GateConfig};

/// The rungs, bottom to top.
pub const LADDER: &[&str] = &["build", "typeCheck", "tests", "lint"];

/// How a rung went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RungStatus {
    /// Exit 0.
    Passed,
    /// Another exit, a time-out, or no command.
    Failed,
    /// Not run: a required rung below failed.
    Skipped,
}

/// One rung's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RungResult {
    /// `build`, `typeCheck`, `tests` or `lint`.
    pub name: String,
    /// The command line, when there is one.
    pub command: Option<String>,
    /// Whether a failure blocks delivery.
    pub required: bool,
    /// How it went.
    pub status: RungStatus,
    /// What it said (the tail of its output when it failed).
    pub detail: String,
}

/// One climb of the ladder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LadderResult {
    /// The configured rungs, bottom to top.
    pub rungs: Vec<RungResult>,
}

impl LadderResult {
    /// Every required rung passed.
    pub fn passed(&self) -> bool {
        self.rungs
            .iter()
            .all(|r| r.status == RungStatus::Passed || !r.required)
    }

    /// The required rungs that failed, with their output: what an agent must fix.
    pub fn failures(&self) -> String {
        self.rungs
            .iter()
            .filter(|r| r.required && r.status == RungStatus::Failed)
            .map(|r| format!("- {}: {}", r.name, r.detail))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// One word per rung: `pass build, FAIL tests, skip lint`.
    pub fn summary(&self) -> String {
        self.rungs
            .iter()
            .map(|r| {
                let word = match r.status {
                    RungStatus::Passed => "pass",
                    RungStatus::Failed => "FAIL",
                    RungStatus::Skipped => "skip",
                };
                format!(
                    "{word} {}{}",
                    r.name,
                    if r.required { "" } else { " (optional)" }
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Whether the project configures any rung.
pub fn has_ladder(config: &GateConfig) -> bool {
    config
        .completion
        .checks
        .iter()
        .any(|c| LADDER.contains(&c.name.as_str()))
}

/// Climbs the ladder in `dir` (each command through `sh -c`, at most the checklist's
/// `timeoutSeconds`).
///
/// # Examples
///
/// ```
/// use weft_gate::{GateConfig, RungStatus, run_ladder};
///
/// let config = GateConfig::parse(
///     "[project]\ntestCommand = \"false\"\n[completion]\nbuild = \"true\"\nlint = \"true\"\n",
/// )?;
/// let result = run_ladder(&config, &std::env::temp_dir());
/// let statuses: Vec<_> = result.rungs.iter().map(|r| (r.name.as_str(), r.status)).collect();
/// assert_eq!(
///     statuses,
///     [("build", RungStatus::Passed), ("tests", RungStatus::Failed), ("lint", RungStatus::Skipped)]
/// );
/// assert!(!result.passed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run_ladder(config: &GateConfig, dir: &Path) -> LadderResult {
    let limit = Duration::from_secs(config.completion.timeout_seconds);
    let mut rungs = Vec::new();
    let mut blocked = false;
    for name in LADDER {
        let Some(check) = config.completion.checks.iter().find(|c| c.name == *name) else {
            continue;
        };
        let command = match &check.spec {
            CheckSpec::Command(line) => Some(line.clone()),
            _ => None,
        };
        if blocked {
            rungs.push(RungResult {
                name: check.name.clone(),
                command,
                required: check.required,
                status: RungStatus::Skipped,
                detail: "not run: a required rung below failed".into(),
            });
            continue;
        }
        let (passed, detail) = match &check.spec {
            CheckSpec::Command(line) => crate::completion::run_command(line, dir, limit),
            CheckSpec::Missing(why) => (false, why.clone()),
            CheckSpec::Builtin => (false, format!("{} has no command", check.name)),
        };
        blocked |= !passed && check.required;
        rungs.push(RungResult {
            name: check.name.clone(),
            command,
            required: check.required,
            status: if passed {
                RungStatus::Passed
            } else {
                RungStatus::Failed
            },
            detail,
        });
    }
    LadderResult { rungs }
}
