//! `weft deliver`: the Universal Agent Protocol's convergence loop (UNI-045, UNI-046).
//!
//! [`deliver`] climbs the project's verifier ladder ([`weft_gate::run_ladder`]: build →
//! type-check → test → lint, real commands from `weft.toml`) at the **baseline**, then runs
//! the project's agent as a Weft run (through `weft-runtime`'s [`Runtime`], like `weft run`)
//! and climbs the ladder again **after its changes**; while a required rung fails, it runs the
//! agent again with the failing output (**after each fix**), up to an iteration cap.
//!
//! - A green baseline with no instruction is already delivered: no agent runs.
//! - With an instruction, the agent runs at least once, even on a green baseline.
//! - Each iteration is a new run (its own record, resumable like any `weft run`); its input
//!   is the instruction plus the required rungs that fail, with their output.
//! - A failed run (an error, a budget) does not end the loop: the ladder decides.
//! - Cancelling the token aborts the current run (resumable) and ends the loop `Interrupted`.
//!
//! # Example
//!
//! ```no_run
//! use weft_deliver::{DeliverOptions, deliver};
//! use weft_runtime::Runtime;
//! use weft_standard::{Project, StandardSessions};
//!
//! # async fn demo(store: weft_store::Store) -> Result<(), Box<dyn std::error::Error>> {
//! let project = Project::load("my-project")?;
//! let runtime = Runtime::new(store).with_sessions(std::sync::Arc::new(StandardSessions));
//! let options = DeliverOptions::new("Make the failing test pass").max_iterations(3);
//! let report = deliver(&runtime, &project, &options, |event| println!("{event:?}")).await?;
//! println!("delivered: {}", report.delivered());
//! # Ok(()) }
//! ```

use std::path::PathBuf;

use serde::Serialize;
use tokio_util::sync::CancellationToken;
use weft_gate::{GateConfig, LadderResult, has_ladder, run_ladder};
use weft_runtime::budget::{Budget, DEFAULT_SESSION_MAX_STEPS};
use weft_runtime::spec::{Program, RunSpec, SessionProgram};
use weft_runtime::{RunEnd, Runtime};
use weft_standard::Project;

/// The iteration cap when none is given.
pub const DEFAULT_MAX_ITERATIONS: u32 = 5;

/// What to deliver, and how.
#[derive(Debug, Clone)]
pub struct DeliverOptions {
    /// The task (empty: only make the required rungs pass).
    pub instruction: String,
    /// At most this many agent runs.
    pub max_iterations: u32,
    /// The agent (default: the project's default agent).
    pub agent: Option<String>,
    /// The model for every prompt (`PROVIDER:MODEL`).
    pub model: Option<String>,
    /// The folder the agent and the ladder work in (default: the project folder).
    pub workspace: Option<PathBuf>,
    /// `workspace`, `strict` or `none` (default: the project's `sandbox`).
    pub sandbox: Option<String>,
    /// Each run's budget (defaults: the project's `[budget]`, then 100 steps).
    pub budget: Budget,
    /// Cancelled: abort the current run and stop.
    pub cancel: CancellationToken,
}

impl DeliverOptions {
    /// Deliver `instruction` with the defaults.
    pub fn new(instruction: impl Into<String>) -> Self {
        DeliverOptions {
            instruction: instruction.into(),
            max_iterations: DEFAULT_MAX_ITERATIONS,
            agent: None,
            model: None,
            workspace: None,
            sandbox: None,
            budget: Budget::default(),
            cancel: CancellationToken::new(),
        }
    }

    /// Sets the iteration cap (at least 1).
    #[must_use]
    pub fn max_iterations(mut self, n: u32) -> Self {
        self.max_iterations = n.max(1);
        self
    }
}

/// When the ladder was climbed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Stage {
    /// Before any change.
    Baseline,
    /// After the agent's first run (the change itself).
    AfterChanges,
    /// After a later run (a fix).
    AfterFix,
}

/// One climb of the ladder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// When.
    pub stage: Stage,
    /// The agent run before it (none at the baseline).
    pub iteration: u32,
    /// The rungs.
    pub ladder: LadderResult,
}

/// One agent run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Iteration {
    /// 1, 2, …
    pub number: u32,
    /// The run's id (`weft runs show RUN`).
    pub run_id: String,
    /// `completed`, `failed`, `interrupted` or `stopped`.
    pub status: String,
    /// The run's error, when it failed.
    pub error: Option<String>,
    /// Its steps.
    pub steps: u64,
}

/// How it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Every required rung passes.
    Delivered,
    /// The iteration cap was reached with a required rung failing.
    NotDelivered,
    /// Cancelled.
    Interrupted,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryReport {
    /// How it ended.
    pub outcome: Outcome,
    /// Every climb, baseline first.
    pub verifications: Vec<Verification>,
    /// Every agent run.
    pub iterations: Vec<Iteration>,
}

impl DeliveryReport {
    /// Every required rung passed at the end.
    pub fn delivered(&self) -> bool {
        self.outcome == Outcome::Delivered
    }

    /// The exit code of `weft deliver`: 0 delivered, 1 not delivered, 130 interrupted.
    pub fn exit_code(&self) -> u8 {
        match self.outcome {
            Outcome::Delivered => 0,
            Outcome::NotDelivered => 1,
            Outcome::Interrupted => 130,
        }
    }
}

/// Progress, as it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliverEvent {
    /// The ladder was climbed.
    Verified(Verification),
    /// An agent run started.
    RunStarted {
        /// Its number.
        iteration: u32,
        /// The run.
        run_id: String,
    },
    /// An agent run ended.
    RunEnded(Iteration),
}

/// Why delivery could not start or go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeliverError {
    /// `weft.toml` configures no rung.
    #[error(
        "no verifier ladder: set [project] testCommand or [completion] build / typeCheck / lint in weft.toml"
    )]
    NoLadder,
    /// The gate settings cannot be read.
    #[error(transparent)]
    Config(#[from] weft_gate::GateError),
    /// The project has no such agent, or no default one.
    #[error("{0}")]
    Agent(String),
    /// The project cannot be snapshotted.
    #[error(transparent)]
    Project(#[from] weft_standard::ProjectError),
    /// A run could not be started or driven (storage, an unknown model, a budget refused).
    #[error(transparent)]
    Run(#[from] weft_runtime::RunError),
    /// A folder cannot be resolved.
    #[error("{path}: {source}")]
    Io {
        /// The folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl DeliverError {
    /// The exit code: 2 for a definition problem, the runtime's code for a run error.
    pub fn exit_code(&self) -> u8 {
        match self {
            DeliverError::Run(e) => e.exit_code(),
            _ => 2,
        }
    }
}

/// The input of iteration `number`.
fn prompt(instruction: &str, last: &LadderResult, number: u32, max: u32) -> String {
    let task = if instruction.trim().is_empty() {
        "Make the project's failing checks pass."
    } else {
        instruction.trim()
    };
    let mut text = format!("{task}\n\n(weft deliver, iteration {number} of {max}.)");
    if last.passed() {
        text.push_str(
            "\nEvery required check passes now; keep it so: they are run again after your changes.",
        );
    } else {
        text.push_str(&format!(
            "\nThese required checks fail and must pass before the work is delivered (they are run again after your changes; do not weaken them):\n{}",
            last.failures()
        ));
    }
    text
}

async fn climb(config: &GateConfig, dir: &std::path::Path) -> LadderResult {
    let (config, dir) = (config.clone(), dir.to_path_buf());
    tokio::task::spawn_blocking(move || run_ladder(&config, &dir))
        .await
        .unwrap_or_else(|e| LadderResult {
            rungs: vec![weft_gate::RungResult {
                name: "ladder".into(),
                command: None,
                required: true,
                status: weft_gate::RungStatus::Failed,
                detail: format!("the ladder could not run: {e}"),
            }],
        })
}

/// Runs the convergence loop (see the crate docs); `observe` sees each step as it happens.
///
/// # Errors
/// [`DeliverError`] when nothing can start (no ladder, no agent, an unresolvable model) or
/// a run cannot be recorded. A loop that ends without delivering is an `Ok` report.
///
/// # Cancel safety
/// Dropping the future leaves the current run's task running to its next safe point; use
/// [`DeliverOptions::cancel`] to stop cleanly.
pub async fn deliver(
    runtime: &Runtime,
    project: &Project,
    options: &DeliverOptions,
    mut observe: impl FnMut(&DeliverEvent),
) -> Result<DeliveryReport, DeliverError> {
    let config = GateConfig::load(project.dir())?;
    if !has_ladder(&config) {
        return Err(DeliverError::NoLadder);
    }
    let agent = match &options.agent {
        Some(name) => project
            .agent(name)
            .ok_or_else(|| DeliverError::Agent(format!("the project has no agent {name:?}")))?,
        None => project.default_agent().ok_or_else(|| {
            DeliverError::Agent(
                "the project has several agents and no defaultAgent; pick one".into(),
            )
        })?,
    };
    let resolve = |p: &std::path::Path| {
        std::fs::canonicalize(p).map_err(|source| DeliverError::Io {
            path: p.to_path_buf(),
            source,
        })
    };
    let project_dir = resolve(project.dir())?;
    let workspace = resolve(options.workspace.as_deref().unwrap_or(project.dir()))?;
    let mut report = DeliveryReport {
        outcome: Outcome::NotDelivered,
        verifications: Vec::new(),
        iterations: Vec::new(),
    };
    let mut last = climb(&config, &workspace).await;
    let baseline = Verification {
        stage: Stage::Baseline,
        iteration: 0,
        ladder: last.clone(),
    };
    observe(&DeliverEvent::Verified(baseline.clone()));
    report.verifications.push(baseline);
    if last.passed() && options.instruction.trim().is_empty() {
        report.outcome = Outcome::Delivered;
        return Ok(report);
    }
    let budget = options
        .budget
        .or(project.config().budget.unwrap_or_default())
        .or(Budget {
            max_steps: Some(DEFAULT_SESSION_MAX_STEPS),
            ..Budget::default()
        });
    for number in 1..=options.max_iterations {
        if options.cancel.is_cancelled() {
            report.outcome = Outcome::Interrupted;
            return Ok(report);
        }
        let program = SessionProgram {
            project: Some(project.snapshot()?),
            project_dir: (project_dir != workspace).then(|| project_dir.clone()),
            workspace: workspace.clone(),
            agent: agent.name.clone(),
            model_override: options.model.clone(),
            sandbox: options.sandbox.clone(),
            // Settled from the project and the environment when the session runs.
            base_urls: Default::default(),
            profile: None,
        };
        let input = prompt(&options.instruction, &last, number, options.max_iterations);
        let mut spec = RunSpec::new(input, Program::Session(program));
        spec.budget = budget;
        // Nobody renders the agent's own events here (they are in the run's log).
        let handle = runtime.start(spec, false).await?;
        let run_id = handle.id().to_owned();
        observe(&DeliverEvent::RunStarted {
            iteration: number,
            run_id: run_id.clone(),
        });
        let abort = handle.abort_handle();
        let cancel = options.cancel.clone();
        let watcher = tokio::spawn(async move {
            cancel.cancelled().await;
            abort.cancel();
        });
        let outcome = handle.outcome().await;
        watcher.abort();
        let outcome = outcome?;
        let (status, error) = match &outcome.end {
            RunEnd::Completed { .. } => ("completed", None),
            RunEnd::Failed { error } => ("failed", Some(error.clone())),
            RunEnd::Interrupted => ("interrupted", None),
            RunEnd::NeedsApproval { .. } => ("stopped", None),
            RunEnd::AwaitingDecision { decisions } => (
                "suspended",
                Some(format!(
                    "the run waits for decisions ({}): weft approve {run_id} ID or weft deny {run_id} ID, then weft resume {run_id}",
                    decisions
                        .iter()
                        .map(|d| format!("{} {}", d.id, d.tool_name))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            ),
        };
        let iteration = Iteration {
            number,
            run_id,
            status: status.to_owned(),
            error,
            steps: outcome.steps,
        };
        observe(&DeliverEvent::RunEnded(iteration.clone()));
        report.iterations.push(iteration);
        if matches!(
            outcome.end,
            RunEnd::Interrupted | RunEnd::NeedsApproval { .. } | RunEnd::AwaitingDecision { .. }
        ) || options.cancel.is_cancelled()
        {
            report.outcome = Outcome::Interrupted;
            return Ok(report);
        }
        last = climb(&config, &workspace).await;
        let verification = Verification {
            stage: if number == 1 {
                Stage::AfterChanges
            } else {
                Stage::AfterFix
            },
            iteration: number,
            ladder: last.clone(),
        };
        observe(&DeliverEvent::Verified(verification.clone()));
        report.verifications.push(verification);
        if last.passed() {
            report.outcome = Outcome::Delivered;
            return Ok(report);
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_gate::{RungResult, RungStatus};

    #[test]
    fn the_prompt_carries_the_failing_rungs() {
        let failing = LadderResult {
            rungs: vec![RungResult {
                name: "tests".into(),
                command: Some("sh check.sh".into()),
                required: true,
                status: RungStatus::Failed,
                detail: "`sh check.sh` exited 1:\nexpected 42".into(),
            }],
        };
        let text = prompt("Fix the answer", &failing, 2, 5);
        assert!(text.starts_with("Fix the answer"));
        assert!(text.contains("iteration 2 of 5"));
        assert!(text.contains("- tests: `sh check.sh` exited 1:\nexpected 42"));
        let green = prompt("", &LadderResult::default(), 1, 3);
        assert!(green.starts_with("Make the project's failing checks pass."));
        assert!(green.contains("Every required check passes now"));
    }
}
