//! SOP roles (runtime spec §7): a role is a named workflow of **phases**, each with the tools
//! the model is offered in it, **quality gates** that must pass before the workflow leaves a
//! phase, and `maxReactLoop`, the most steps (model calls) one phase may take.
//!
//! The four roles of the spec are data here ([`SopRole::builtin`]); a project adds its own
//! under `[runtime.roles.NAME]` in `weft.toml` (the same keys, checked when the project
//! loads), and an agent takes one with `role = "coder"` in its `runtime` table (or the
//! project's `[runtime]`).
//!
//! The executor ([`SopExecutor`]) holds the workflow of one agent task:
//!
//! * the model is offered only the current phase's tools, plus `complete_task` and
//!   [`ADVANCE_PHASE`] (not in the last phase); a call of another tool anyway is refused by
//!   the profile's policy stage with the phase it belongs to;
//! * the model moves on by calling `advance_phase`: the gates guarding the current phase
//!   (`after` = the phase) run first, and a failure is the call's error result — the model
//!   stays in the phase and reads why;
//! * a phase that takes `maxReactLoop` steps without advancing is advanced by the executor
//!   (its gates still run first); when that is not possible — a gate fails or it is the last
//!   phase — the task ends in ERROR (the partial output kept);
//! * `complete_task` is accepted in the last phase once that phase's gates pass; in recovery
//!   (§5.2, the turn limit) it is accepted in any phase once the gates of the current phase
//!   and of every later one pass, so no gate is ever skipped.
//!
//! Gates are checked by a [`GateChecker`] (the project's: `tests_exist` looks for test files,
//! `tests_pass` runs `[project] testCommand` in the sandbox, `diagram_exists` looks for a
//! diagram). Each check is a `sop_gate` event, each phase entered a `sop_phase` event.
//!
//! # Examples
//!
//! ```
//! use weft_runtime::profile::sop::{GateCheck, SopRole};
//!
//! let coder = SopRole::builtin("coder").expect("a built-in role");
//! assert_eq!(coder.max_react_loop, 15);
//! let phases: Vec<&str> = coder.phases.iter().map(|p| p.name.as_str()).collect();
//! assert_eq!(phases, ["understand", "plan", "implement", "verify"]);
//! assert_eq!(coder.gates_after("verify"), [GateCheck::TestsPass]);
//! assert_eq!(
//!     coder.all_tools(),
//!     ["read_file", "search_code", "list_dir", "write_file", "run_command"]
//! );
//! assert!(SopRole::builtin("astronaut").is_none());
//! ```

use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_provider::{Message, Tool, ToolContext, ToolError, Turn};

use super::COMPLETE_TASK;
use crate::event::{EventKind, Side};
use crate::ledger::RunContext;

/// The tool that moves an SOP workflow to its next phase (after the phase's gates pass).
pub const ADVANCE_PHASE: &str = "advance_phase";

/// The names [`SopRole::builtin`] knows (lower case; the lookup ignores case).
pub const BUILTIN_ROLES: [&str; 4] = ["coder", "researcher", "reviewer", "architect"];

/// A quality gate's check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateCheck {
    /// The workspace has test files.
    TestsExist,
    /// The project's test command (`[project] testCommand`) exits 0, run in the sandbox.
    TestsPass,
    /// The workspace has a diagram (Mermaid, PlantUML, Graphviz, D2, draw.io, SVG).
    DiagramExists,
}

impl GateCheck {
    /// The spec's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            GateCheck::TestsExist => "tests_exist",
            GateCheck::TestsPass => "tests_pass",
            GateCheck::DiagramExists => "diagram_exists",
        }
    }
}

impl fmt::Display for GateCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A quality gate: `check` must pass before the workflow leaves the phase `after`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QualityGate {
    /// The phase it guards.
    pub after: String,
    /// What must pass.
    pub check: GateCheck,
}

/// One phase of a role: its name and the tools offered in it (none: the model only thinks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Phase {
    /// The phase's name.
    pub name: String,
    /// The tools offered in it: tool names, or `mcp:SERVER` for every tool of an MCP server
    /// (those the server has when the phase's step runs).
    #[serde(default)]
    pub allowed_tools: Vec<String>,
}

/// The prefix of a phase's entry that names every tool of an MCP server (`mcp:SERVER`).
pub const MCP_ENTRY_PREFIX: &str = "mcp:";

/// What separates an MCP server's name from its tool's in the name the model sees
/// (`SERVER__TOOL`: weft-mcp's namespacing).
pub const MCP_SEPARATOR: &str = "__";

impl Phase {
    /// Whether the phase offers `tool`: listed by name, or a tool of an MCP server it lists
    /// as `mcp:SERVER`.
    ///
    /// # Examples
    ///
    /// ```
    /// use weft_runtime::profile::sop::Phase;
    ///
    /// let phase = Phase { name: "look".into(), allowed_tools: vec!["read_file".into(), "mcp:docs".into()] };
    /// assert!(phase.offers("read_file") && phase.offers("docs__search"));
    /// assert!(!phase.offers("write_file") && !phase.offers("docsearch") && !phase.offers("other__search"));
    /// ```
    pub fn offers(&self, tool: &str) -> bool {
        self.allowed_tools.iter().any(|entry| {
            entry == tool
                || entry.strip_prefix(MCP_ENTRY_PREFIX).is_some_and(|server| {
                    tool.strip_prefix(server)
                        .and_then(|rest| rest.strip_prefix(MCP_SEPARATOR))
                        .is_some_and(|name| !name.is_empty())
                })
        })
    }
}

/// A role (the spec's `RoleDefinition`): phases, quality gates and `maxReactLoop`.
///
/// A custom role is the same table in `weft.toml`:
///
/// ```
/// use weft_runtime::profile::sop::SopRole;
///
/// let role: SopRole = serde_json::from_value(serde_json::json!({
///     "goal": "Write the release notes",
///     "phases": [
///         {"name": "collect", "allowedTools": ["read_file", "search_code"]},
///         {"name": "write", "allowedTools": ["write_file"]}
///     ],
///     "maxReactLoop": 6
/// }))?;
/// assert!(role.problems().is_empty());
/// assert_eq!(role.all_tools(), ["read_file", "search_code", "write_file"]);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SopRole {
    /// The role's name (a custom role's defaults to its key under `runtime.roles`).
    #[serde(default)]
    pub name: String,
    /// Who the model acts as.
    #[serde(default)]
    pub profile: String,
    /// What the role is for.
    #[serde(default)]
    pub goal: String,
    /// The phases, in order.
    pub phases: Vec<Phase>,
    /// The gates.
    #[serde(default)]
    pub quality_gates: Vec<QualityGate>,
    /// The most steps one phase may take.
    pub max_react_loop: u32,
}

fn phase(name: &str, tools: &[&str]) -> Phase {
    Phase {
        name: name.to_owned(),
        allowed_tools: tools.iter().map(|t| (*t).to_owned()).collect(),
    }
}

fn gate(after: &str, check: GateCheck) -> QualityGate {
    QualityGate {
        after: after.to_owned(),
        check,
    }
}

impl SopRole {
    /// The built-in role `name` (`coder`, `researcher`, `reviewer`, `architect`; case
    /// ignored), as the spec defines it (§7.1–§7.4).
    pub fn builtin(name: &str) -> Option<SopRole> {
        let role = |name: &str, profile: &str, goal: &str, phases, gates, loops| SopRole {
            name: name.to_owned(),
            profile: profile.to_owned(),
            goal: goal.to_owned(),
            phases,
            quality_gates: gates,
            max_react_loop: loops,
        };
        Some(match name.to_ascii_lowercase().as_str() {
            "coder" => role(
                "Coder",
                "Senior Software Engineer",
                "Write clean, tested, maintainable code",
                vec![
                    phase("understand", &["read_file", "search_code", "list_dir"]),
                    phase("plan", &["read_file", "search_code"]),
                    phase("implement", &["write_file", "read_file"]),
                    phase("verify", &["run_command", "read_file"]),
                ],
                vec![
                    gate("implement", GateCheck::TestsExist),
                    gate("verify", GateCheck::TestsPass),
                ],
                15,
            ),
            "researcher" => role(
                "Researcher",
                "Technical Researcher",
                "Find accurate information and synthesize insights",
                vec![
                    phase("explore", &["search_web", "read_url", "search_code"]),
                    phase("analyze", &["read_file", "search_code"]),
                    phase("synthesize", &[]),
                ],
                Vec::new(),
                10,
            ),
            "reviewer" => role(
                "Reviewer",
                "Code Review Specialist",
                "Identify bugs, security issues, and improvement opportunities",
                vec![
                    phase("explore", &["read_file", "search_code", "list_dir"]),
                    phase("analyze", &["read_file", "search_code"]),
                    phase("report", &[]),
                ],
                Vec::new(),
                8,
            ),
            "architect" => role(
                "Architect",
                "System Design Expert",
                "Design scalable, maintainable system architectures",
                vec![
                    phase(
                        "understand",
                        &["read_file", "search_code", "list_dir", "read_url"],
                    ),
                    phase("design", &["search_web", "read_url"]),
                    phase("document", &["write_file"]),
                ],
                vec![gate("design", GateCheck::DiagramExists)],
                12,
            ),
            _ => return None,
        })
    }

    /// Every tool the role names, in the order the phases first name them (the registry an
    /// agent of this role needs; delegation uses it as the role's tool list).
    pub fn all_tools(&self) -> Vec<String> {
        let mut tools: Vec<String> = Vec::new();
        for tool in self.phases.iter().flat_map(|p| &p.allowed_tools) {
            if !tools.contains(tool) {
                tools.push(tool.clone());
            }
        }
        tools
    }

    /// The checks that must pass before the workflow leaves `phase`.
    pub fn gates_after(&self, phase: &str) -> Vec<GateCheck> {
        self.quality_gates
            .iter()
            .filter(|g| g.after == phase)
            .map(|g| g.check)
            .collect()
    }

    /// What is wrong with the role (empty when it can be used), each a key under the role's
    /// table and a message.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        if self.phases.is_empty() {
            problems.push((
                "phases".to_owned(),
                "a role needs at least one phase".into(),
            ));
        }
        for (i, phase) in self.phases.iter().enumerate() {
            if phase.name.trim().is_empty() {
                problems.push((format!("phases[{i}].name"), "must not be empty".into()));
            }
            if self.phases[..i].iter().any(|p| p.name == phase.name) {
                problems.push((
                    format!("phases[{i}].name"),
                    format!("the phase {:?} is defined twice", phase.name),
                ));
            }
            for tool in &phase.allowed_tools {
                if tool.trim().is_empty() {
                    problems.push((
                        format!("phases[{i}].allowedTools"),
                        "a tool name must not be empty".into(),
                    ));
                } else if tool == COMPLETE_TASK || tool == ADVANCE_PHASE {
                    problems.push((
                        format!("phases[{i}].allowedTools"),
                        format!("{tool} is offered in every phase; do not list it"),
                    ));
                }
            }
        }
        for (i, gate) in self.quality_gates.iter().enumerate() {
            if !self.phases.iter().any(|p| p.name == gate.after) {
                let names: Vec<&str> = self.phases.iter().map(|p| p.name.as_str()).collect();
                problems.push((
                    format!("qualityGates[{i}].after"),
                    format!(
                        "{:?} is not a phase of the role (phases: {})",
                        gate.after,
                        names.join(", ")
                    ),
                ));
            }
        }
        if self.max_react_loop == 0 {
            problems.push(("maxReactLoop".to_owned(), "must be at least 1".into()));
        }
        problems
    }

    /// The text that tells the model its role and where it is in the workflow.
    pub fn instructions(&self, current: usize) -> String {
        let mut text = format!("You are acting as the {} role", self.name);
        if !self.profile.is_empty() {
            text.push_str(&format!(" ({})", self.profile));
        }
        text.push('.');
        if !self.goal.is_empty() {
            text.push_str(&format!(" Goal: {}.", self.goal));
        }
        let names: Vec<&str> = self.phases.iter().map(|p| p.name.as_str()).collect();
        text.push_str(&format!(
            "\nYou work in phases: {}. ",
            names.join(" \u{2192} ")
        ));
        if let Some(phase) = self.phases.get(current) {
            let tools = if phase.allowed_tools.is_empty() {
                "none (think and write only)".to_owned()
            } else {
                phase.allowed_tools.join(", ")
            };
            text.push_str(&format!(
                "The current phase is {:?} (phase {} of {}); its tools: {tools}.",
                phase.name,
                current + 1,
                self.phases.len()
            ));
            let gates = self.gates_after(&phase.name);
            if !gates.is_empty() {
                let gates: Vec<&str> = gates.iter().map(|g| g.as_str()).collect();
                text.push_str(&format!(
                    " Before leaving it these checks must pass: {}.",
                    gates.join(", ")
                ));
            }
            if current + 1 < self.phases.len() {
                text.push_str(&format!(
                    " When the phase's work is done, call {ADVANCE_PHASE} (alone) to move to the next phase; \
                     each phase may take at most {} steps.",
                    self.max_react_loop
                ));
            } else {
                text.push_str(&format!(
                    " This is the last phase: finish with {COMPLETE_TASK} (at most {} steps).",
                    self.max_react_loop
                ));
            }
        }
        text
    }
}

/// What a gate check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateVerdict {
    /// Whether the check passed.
    pub passed: bool,
    /// What it found (shown to the model when it fails).
    pub detail: String,
}

/// Checks quality gates against the task's workspace (the project's checker lives in
/// `weft-standard`).
#[async_trait]
pub trait GateChecker: Send + Sync + fmt::Debug {
    /// Runs `check`.
    async fn check(&self, check: GateCheck) -> GateVerdict;
}

#[derive(Debug)]
struct Progress {
    phase: usize,
    /// Steps taken in the current phase.
    steps: u32,
    /// The phase changed during the step now ending (its steps start from the next one).
    advanced: bool,
    /// Whether the `start` event was logged.
    started: bool,
    /// The workflow goes on from a checkpoint's progress ([`SopExecutor::restore`]).
    restored: bool,
}

/// The metadata key under which a checkpoint's state keeps where the task's SOP workflow
/// stands ([`SopProgress`]), so a resumed task goes on in its phase.
pub const SOP_PROGRESS_KEY: &str = "weftSop";

/// Where an SOP workflow stands after a step: its role, the current phase and the steps
/// taken in it. Every checkpoint of the task keeps it (the caller stores it under
/// [`SOP_PROGRESS_KEY`]); [`SopExecutor::restore`] goes on from it.
///
/// ```
/// use std::sync::Arc;
/// use weft_runtime::profile::sop::{GateCheck, GateChecker, GateVerdict, SopExecutor, SopRole};
///
/// #[derive(Debug)]
/// struct Pass;
/// #[async_trait::async_trait]
/// impl GateChecker for Pass {
///     async fn check(&self, _: GateCheck) -> GateVerdict {
///         GateVerdict { passed: true, detail: String::new() }
///     }
/// }
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let coder = SopRole::builtin("coder").expect("a built-in role");
/// let before = SopExecutor::new(coder.clone(), Arc::new(Pass), None, None);
/// before.advance("advance_phase").await.expect("no gate after understand");
/// let saved = before.progress();
/// assert_eq!((saved.phase.as_str(), saved.steps), ("plan", 0));
///
/// // A resumed task: a new executor goes on in the saved phase.
/// let after = SopExecutor::new(coder, Arc::new(Pass), None, None);
/// assert!(after.restore(&saved));
/// assert_eq!(after.phase(), 1);
/// # });
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SopProgress {
    /// The role's name.
    pub role: String,
    /// The current phase's name.
    pub phase: String,
    /// The steps taken in it.
    pub steps: u32,
}

/// The SOP workflow of one agent task (see the module's documentation).
#[derive(Debug)]
pub struct SopExecutor {
    role: SopRole,
    checker: Arc<dyn GateChecker>,
    run: Option<Arc<RunContext>>,
    side: Option<Side>,
    progress: Mutex<Progress>,
}

/// How a step ended for the workflow ([`SopExecutor::after_step`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepVerdict {
    /// Nothing to do.
    Continue,
    /// The phase used its steps and the executor moved on: tell the model (the text).
    Advanced(String),
    /// The phase used its steps and could not be left: the task fails (the reason).
    Failed(String),
}

impl SopExecutor {
    /// The workflow of `role`, checking gates with `checker`, logging to `run`.
    pub fn new(
        role: SopRole,
        checker: Arc<dyn GateChecker>,
        run: Option<Arc<RunContext>>,
        side: Option<Side>,
    ) -> Self {
        SopExecutor {
            role,
            checker,
            run,
            side,
            progress: Mutex::new(Progress {
                phase: 0,
                steps: 0,
                advanced: false,
                started: false,
                restored: false,
            }),
        }
    }

    /// Where the workflow stands (for the step's checkpoint).
    pub fn progress(&self) -> SopProgress {
        let (index, steps) = self.with(|p| (p.phase, p.steps));
        SopProgress {
            role: self.role.name.clone(),
            phase: self
                .phase_def(index)
                .map(|p| p.name.clone())
                .unwrap_or_default(),
            steps,
        }
    }

    /// Goes on from `progress` (a checkpoint's): its phase and the steps taken in it.
    /// `false` (nothing changed) when it is another role's or names no phase of the role.
    pub fn restore(&self, progress: &SopProgress) -> bool {
        let Some(index) = (progress.role == self.role.name)
            .then(|| {
                self.role
                    .phases
                    .iter()
                    .position(|p| p.name == progress.phase)
            })
            .flatten()
        else {
            return false;
        };
        self.with(|p| {
            p.phase = index;
            p.steps = progress.steps;
            p.advanced = false;
            p.restored = true;
        });
        true
    }

    fn with<T>(&self, f: impl FnOnce(&mut Progress) -> T) -> T {
        let mut guard = match self.progress.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// The role.
    pub fn role(&self) -> &SopRole {
        &self.role
    }

    /// The index of the current phase.
    pub fn phase(&self) -> usize {
        self.with(|p| p.phase)
    }

    fn phase_def(&self, index: usize) -> Option<&Phase> {
        self.role.phases.get(index)
    }

    fn is_last(&self, index: usize) -> bool {
        index + 1 >= self.role.phases.len()
    }

    /// The names of the tools the model is offered now: the phase's, `complete_task`, and
    /// `advance_phase` before the last phase (an `mcp:SERVER` entry as it is written; see
    /// [`SopExecutor::offered_among`] for the server's tools).
    pub fn offered(&self) -> Vec<String> {
        let index = self.phase();
        let mut names: Vec<String> = self
            .phase_def(index)
            .map(|p| p.allowed_tools.clone())
            .unwrap_or_default();
        names.push(COMPLETE_TASK.to_owned());
        if !self.is_last(index) {
            names.push(ADVANCE_PHASE.to_owned());
        }
        names
    }

    /// Which of `tools` (the names of the agent's tools now) the model is offered now: those
    /// the phase offers ([`Phase::offers`]: an `mcp:SERVER` entry takes each of that
    /// server's), then `complete_task`, and `advance_phase` before the last phase.
    pub fn offered_among<'a>(&self, tools: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let index = self.phase();
        let mut names: Vec<String> = match self.phase_def(index) {
            Some(phase) => tools
                .into_iter()
                .filter(|tool| {
                    *tool != COMPLETE_TASK && *tool != ADVANCE_PHASE && phase.offers(tool)
                })
                .map(str::to_owned)
                .collect(),
            None => Vec::new(),
        };
        names.push(COMPLETE_TASK.to_owned());
        if !self.is_last(index) {
            names.push(ADVANCE_PHASE.to_owned());
        }
        names
    }

    /// The role's instructions for the current phase (added to the system text).
    pub fn instructions(&self) -> String {
        self.role.instructions(self.phase())
    }

    /// Logs the phase the task starts in (once): the first (`start`), or the one a
    /// restored workflow goes on in (`resume`).
    pub async fn start(&self) {
        let (started, restored, index) =
            self.with(|p| (std::mem::replace(&mut p.started, true), p.restored, p.phase));
        if started {
            return;
        }
        let trigger = if restored { "resume" } else { "start" };
        self.log_phase(None, index, trigger).await;
    }

    /// Why a call of `tool` may not run in the current phase, if it may not.
    pub fn refusal(&self, tool: &str) -> Option<String> {
        if tool == COMPLETE_TASK {
            return None;
        }
        let index = self.phase();
        let phase = self.phase_def(index)?;
        if tool == ADVANCE_PHASE {
            return self.is_last(index).then(|| {
                format!(
                    "{ADVANCE_PHASE} was not run: {:?} is the last phase of the {} role; finish with {COMPLETE_TASK}",
                    phase.name, self.role.name
                )
            });
        }
        if phase.offers(tool) {
            return None;
        }
        let offered = if phase.allowed_tools.is_empty() {
            "none".to_owned()
        } else {
            phase.allowed_tools.join(", ")
        };
        let home = self
            .role
            .phases
            .iter()
            .filter(|p| p.offers(tool))
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>();
        let belongs = if home.is_empty() {
            format!("it is not a tool of the {} role", self.role.name)
        } else {
            format!("it belongs to the phase {}", home.join(", "))
        };
        Some(format!(
            "{tool} was not run: the {} role is in its {:?} phase, whose tools are: {offered}; {belongs}. \
             Finish this phase's work and call {ADVANCE_PHASE} to move on",
            self.role.name, phase.name
        ))
    }

    /// Runs the gates guarding the phases `from..=to`; `Err` with every failure's detail.
    async fn gates(&self, from: usize, to: usize) -> Result<(), String> {
        let mut failures = Vec::new();
        for index in from..=to {
            let Some(phase) = self.phase_def(index) else {
                continue;
            };
            for check in self.role.gates_after(&phase.name) {
                let verdict = self.checker.check(check).await;
                if let Some(run) = &self.run {
                    run.emit(EventKind::SopGate {
                        role: self.role.name.clone(),
                        phase: phase.name.clone(),
                        check: check.as_str().to_owned(),
                        passed: verdict.passed,
                        detail: verdict.detail.clone(),
                        side: self.side,
                    })
                    .await;
                }
                if !verdict.passed {
                    failures.push(format!(
                        "the quality gate {check} (after {:?}) failed: {}",
                        phase.name, verdict.detail
                    ));
                }
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    }

    async fn log_phase(&self, from: Option<usize>, to: usize, trigger: &str) {
        let (Some(run), Some(phase)) = (&self.run, self.phase_def(to)) else {
            return;
        };
        run.emit(EventKind::SopPhase {
            role: self.role.name.clone(),
            phase: phase.name.clone(),
            from: from.and_then(|i| self.phase_def(i)).map(|p| p.name.clone()),
            tools: phase.allowed_tools.clone(),
            trigger: trigger.to_owned(),
            side: self.side,
        })
        .await;
    }

    /// Leaves the current phase for the next once its gates pass: the text telling the
    /// model where it is now, or why it stays.
    ///
    /// # Errors
    /// The reason the phase cannot be left (a gate failed; the last phase).
    pub async fn advance(&self, trigger: &str) -> Result<String, String> {
        let index = self.phase();
        let Some(phase) = self.phase_def(index) else {
            return Err("the role has no phases".to_owned());
        };
        if self.is_last(index) {
            return Err(format!(
                "{:?} is the last phase of the {} role; finish with {COMPLETE_TASK}",
                phase.name, self.role.name
            ));
        }
        if let Err(failed) = self.gates(index, index).await {
            return Err(format!(
                "the workflow stays in the {:?} phase: {failed}. Fix that, then call {ADVANCE_PHASE} again",
                phase.name
            ));
        }
        self.with(|p| {
            p.phase = index + 1;
            p.steps = 0;
            p.advanced = true;
        });
        self.log_phase(Some(index), index + 1, trigger).await;
        Ok(format!(
            "The {} role moved from the {:?} phase to the next. {}",
            self.role.name,
            phase.name,
            self.role.instructions(index + 1)
        ))
    }

    /// Whether `complete_task` may end the task now (see the module's documentation).
    ///
    /// # Errors
    /// Why not: not the last phase (outside recovery), or a gate failed.
    pub async fn may_complete(&self, recovering: bool) -> Result<(), String> {
        let index = self.phase();
        let last = self.role.phases.len().saturating_sub(1);
        if !recovering && index < last {
            let name = self.phase_def(index).map_or("", |p| p.name.as_str());
            return Err(format!(
                "complete_task was not accepted: the {} role is in its {name:?} phase; the task ends in its last \
                 phase ({:?}). Call {ADVANCE_PHASE} when this phase's work is done",
                self.role.name,
                self.phase_def(last).map_or("", |p| p.name.as_str())
            ));
        }
        self.gates(index, last).await.map_err(|failed| {
            format!(
                "complete_task was not accepted: {failed}. Fix that, then call complete_task again"
            )
        })
    }

    /// A step (`turn`) ended in the workflow: counts it against `maxReactLoop`; at the
    /// limit the executor advances (the gates still run first) or, when it cannot, fails the
    /// task. An `advance_phase` call of the step whose result was replayed from the run's
    /// record (a resumed step: the tool did not run again) moves the phase as it did when it
    /// ran — its gates passed then.
    pub async fn after_step(&self, turn: &Turn) -> StepVerdict {
        let index = self.phase();
        if !self.with(|p| p.advanced) && !self.is_last(index) && advanced_in(turn) {
            self.with(|p| {
                p.phase = index + 1;
                p.steps = 0;
                p.advanced = true;
            });
            self.log_phase(Some(index), index + 1, ADVANCE_PHASE).await;
        }
        let (index, steps) = self.with(|p| {
            if std::mem::take(&mut p.advanced) {
                (p.phase, 0)
            } else {
                p.steps += 1;
                (p.phase, p.steps)
            }
        });
        if steps < self.role.max_react_loop {
            return StepVerdict::Continue;
        }
        let name = self.phase_def(index).map_or("", |p| p.name.as_str());
        if self.is_last(index) {
            return StepVerdict::Failed(format!(
                "the {} role's last phase {name:?} took its maxReactLoop of {} steps without complete_task",
                self.role.name, self.role.max_react_loop
            ));
        }
        match self.advance("max_react_loop").await {
            Ok(text) => {
                // Its steps start with the next step.
                self.with(|p| p.advanced = false);
                StepVerdict::Advanced(format!(
                    "The {name:?} phase took its maxReactLoop of {} steps. {text}",
                    self.role.max_react_loop
                ))
            }
            Err(why) => StepVerdict::Failed(format!(
                "the {} role's {name:?} phase took its maxReactLoop of {} steps and cannot be left: {why}",
                self.role.name, self.role.max_react_loop
            )),
        }
    }

    /// The `advance_phase` tool of this workflow.
    pub fn advance_tool(self: &Arc<Self>) -> Tool {
        let sop = self.clone();
        Tool::new(
            ADVANCE_PHASE,
            "Move the SOP workflow to its next phase once the current phase's work is done. The phase's \
             quality gates run first; when one fails you stay in the phase and the result says why.",
            json!({"type": "object", "properties": {
                "summary": {"type": "string", "description": "What the phase produced (optional)"}},
                "additionalProperties": false}),
            move |_arguments: Value, _ctx: ToolContext| {
                let sop = sop.clone();
                async move {
                    match sop.advance(ADVANCE_PHASE).await {
                        Ok(text) => Ok(json!({
                            "phase": sop.phase_def(sop.phase()).map(|p| p.name.clone()),
                            "tools": sop.offered(),
                            "message": text,
                        })),
                        Err(why) => Err(ToolError::new(why)),
                    }
                }
            },
        )
    }
}

/// Whether `turn` called `advance_phase` and the call succeeded.
fn advanced_in(turn: &Turn) -> bool {
    let Some(Message::ToolResult(results)) = turn.messages.last().map(AsRef::as_ref) else {
        return false;
    };
    turn.response.tool_calls.iter().any(|call| {
        call.tool_name == ADVANCE_PHASE
            && results
                .results
                .iter()
                .any(|r| r.tool_call_id == call.tool_call_id && !r.is_error)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(Debug)]
    struct Fixed(bool);

    #[async_trait]
    impl GateChecker for Fixed {
        async fn check(&self, check: GateCheck) -> GateVerdict {
            GateVerdict {
                passed: self.0,
                detail: format!("{check} fixed"),
            }
        }
    }

    #[test]
    fn the_builtin_roles_are_the_specs() {
        for name in BUILTIN_ROLES {
            let role = SopRole::builtin(name).unwrap();
            assert!(role.problems().is_empty(), "{name}: {:?}", role.problems());
        }
        let architect = SopRole::builtin("Architect").unwrap();
        assert_eq!(architect.gates_after("design"), [GateCheck::DiagramExists]);
        assert_eq!(architect.max_react_loop, 12);
        let researcher = SopRole::builtin("researcher").unwrap();
        assert!(researcher.quality_gates.is_empty());
        assert!(researcher.phases[2].allowed_tools.is_empty());
        assert_eq!(
            researcher.all_tools(),
            ["search_web", "read_url", "search_code", "read_file"]
        );
        assert_eq!(SopRole::builtin("reviewer").unwrap().max_react_loop, 8);
    }

    #[test]
    fn a_bad_custom_role_is_explained() {
        let role: SopRole = serde_json::from_value(json!({
            "phases": [{"name": "a", "allowedTools": ["complete_task"]}, {"name": "a"}],
            "qualityGates": [{"after": "b", "check": "tests_pass"}],
            "maxReactLoop": 0
        }))
        .unwrap();
        let keys: Vec<String> = role.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            [
                "phases[0].allowedTools",
                "phases[1].name",
                "qualityGates[0].after",
                "maxReactLoop"
            ]
        );
        let unknown = serde_json::from_value::<SopRole>(json!({
            "phases": [], "maxReactLoop": 1, "qualityGates": [{"after": "a", "check": "lint"}]
        }))
        .unwrap_err();
        assert!(unknown.to_string().contains("lint"), "{unknown}");
    }

    #[tokio::test]
    async fn phases_offer_their_tools_and_gates_hold_them() {
        let coder = SopRole::builtin("coder").unwrap();
        let failing = SopExecutor::new(coder.clone(), Arc::new(Fixed(false)), None, None);
        assert_eq!(
            failing.offered(),
            [
                "read_file",
                "search_code",
                "list_dir",
                "complete_task",
                "advance_phase"
            ]
        );
        assert!(failing.refusal("write_file").unwrap().contains("implement"));
        assert!(failing.refusal("read_file").is_none());
        assert!(failing.may_complete(false).await.is_err());
        // understand and plan have no gates; implement's tests_exist holds it.
        failing.advance("t").await.unwrap();
        failing.advance("t").await.unwrap();
        let held = failing.advance("t").await.unwrap_err();
        assert!(held.contains("tests_exist"), "{held}");
        assert_eq!(failing.phase(), 2);
        // In recovery complete_task needs every remaining gate.
        assert!(
            failing
                .may_complete(true)
                .await
                .unwrap_err()
                .contains("tests_pass")
        );
        let passing = SopExecutor::new(coder, Arc::new(Fixed(true)), None, None);
        for _ in 0..3 {
            passing.advance("t").await.unwrap();
        }
        assert!(passing.refusal(ADVANCE_PHASE).is_some());
        passing.may_complete(false).await.unwrap();
    }

    #[tokio::test]
    async fn a_phase_that_uses_its_steps_moves_on_or_fails() {
        let mut reviewer = SopRole::builtin("reviewer").unwrap();
        reviewer.max_react_loop = 2;
        let sop = SopExecutor::new(reviewer, Arc::new(Fixed(true)), None, None);
        let read = step("read_file", false);
        assert_eq!(sop.after_step(&read).await, StepVerdict::Continue);
        assert!(matches!(
            sop.after_step(&read).await,
            StepVerdict::Advanced(_)
        ));
        assert_eq!(sop.phase(), 1);
        sop.advance("t").await.unwrap();
        // The step that advanced does not count for the new phase.
        assert_eq!(sop.after_step(&read).await, StepVerdict::Continue);
        assert_eq!(sop.after_step(&read).await, StepVerdict::Continue);
        assert!(matches!(
            sop.after_step(&read).await,
            StepVerdict::Failed(_)
        ));
    }

    /// A step that called `tool`, whose result failed or not.
    fn step(tool: &str, failed: bool) -> Turn {
        use weft_provider::{
            AssistantMessage, MessageOptions, ToolCall, ToolResult, ToolResultMessage,
        };
        let response = AssistantMessage::new(
            Vec::new(),
            vec![ToolCall::new("c1", tool, json!({}))],
            MessageOptions::default(),
        )
        .unwrap();
        Turn {
            messages: vec![
                Message::Assistant(response.clone()).into(),
                Message::ToolResult(ToolResultMessage::new(vec![ToolResult {
                    tool_call_id: "c1".into(),
                    result: json!("ok"),
                    is_error: failed,
                }]))
                .into(),
            ],
            response: response.into(),
            tool_executions: Vec::new(),
            usage: weft_provider::TokenUsage::default(),
            cycles: 0,
            data: None,
        }
    }

    #[tokio::test]
    async fn progress_survives_a_new_executor_and_a_replayed_advance_moves_the_phase() {
        let coder = SopRole::builtin("coder").unwrap();
        let first = SopExecutor::new(coder.clone(), Arc::new(Fixed(true)), None, None);
        first.advance("t").await.unwrap();
        first.after_step(&step(ADVANCE_PHASE, false)).await;
        first.after_step(&step("read_file", false)).await;
        let saved = first.progress();
        assert_eq!(
            saved,
            SopProgress {
                role: "Coder".into(),
                phase: "plan".into(),
                steps: 1
            }
        );
        let resumed = SopExecutor::new(coder.clone(), Arc::new(Fixed(true)), None, None);
        assert!(resumed.restore(&saved));
        assert_eq!(resumed.progress(), saved);
        // Another role's progress is not taken.
        let other = SopExecutor::new(
            SopRole::builtin("reviewer").unwrap(),
            Arc::new(Fixed(true)),
            None,
            None,
        );
        assert!(!other.restore(&saved));
        assert_eq!(other.phase(), 0);
        // The step's advance_phase result came from the record (the tool did not run): the
        // phase moves all the same; a failed one does not move it.
        resumed.after_step(&step(ADVANCE_PHASE, true)).await;
        assert_eq!(resumed.progress().phase, "plan");
        resumed.after_step(&step(ADVANCE_PHASE, false)).await;
        assert_eq!(
            (resumed.progress().phase.as_str(), resumed.progress().steps),
            ("implement", 0)
        );
    }
}
