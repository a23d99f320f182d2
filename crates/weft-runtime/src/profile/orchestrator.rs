//! [`Orchestrator`]: one agent task under the profile — the spec's state machine driven at
//! step boundaries, the completion contract (§5.1) and the recovery contract (§5.2). A loop
//! that takes steps (the Standard Agents side turn) asks it, in this order:
//!
//! 1. [`Orchestrator::begin`] once (IDLE → THINKING);
//! 2. before every step, [`Orchestrator::before_step`]: OBSERVATION → THINKING, or at
//!    `turns >= maxTurns - graceTurns` OBSERVATION → RECOVERY with the Final Warning to add
//!    to the step's input (and a `recovery` event); during recovery the step is bounded by
//!    [`Orchestrator::grace_deadline`] and its model call is made with
//!    [`Orchestrator::step_llm`] (only `complete_task` offered, and forced);
//! 3. after every step, [`Orchestrator::after_step`]: the response's edges, then what the
//!    task does next ([`Next`]): go on, end DONE with `complete_task`'s summary, or end in
//!    ERROR (stopped without `complete_task`, a grace turn that did not call it, recovery
//!    over) with the partial output kept;
//! 4. [`Orchestrator::suspended`] when a call waits for a person (TOOL_WAIT → IDLE), and
//!    [`Orchestrator::failed`] / [`Orchestrator::timed_out`] when the step failed.
//!
//! Every transition is a `state_transition` event of the run; an impossible one is an
//! [`IllegalTransition`] error, which the loop turns into a failed run (never a silent
//! state).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::time::Instant;
use weft_agent::AgentState;
use weft_agent::execution::StepObserver;
use weft_provider::{LlmInstance, Message, TokenUsage, ToolChoice, ToolResult, Turn, UppError};

use super::COMPLETE_TASK;
use super::RuntimeProfile;
use super::layer::ProfileFlags;
use super::sop::{SopExecutor, StepVerdict};
use super::state::{IllegalTransition, RunState, StateMachine, Transition, Trigger};
use crate::event::{EventKind, Side};
use crate::ledger::RunContext;

/// What the task does after a step.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Take another step.
    Continue,
    /// DONE: `complete_task` was called alone and accepted.
    Done {
        /// The run's output.
        summary: String,
        /// The files it listed.
        artifacts: Vec<String>,
        /// Its recommendations, if any.
        next_steps: Option<String>,
    },
    /// ERROR: the task failed; the message says why and keeps the partial output.
    Error(String),
}

#[derive(Debug)]
struct Progress {
    machine: StateMachine,
    /// When the grace period ends (`graceTimeoutMs` after it began).
    deadline: Option<Instant>,
    /// The last text the model gave (the partial output an ERROR keeps).
    partial: String,
    /// The Final Warning, until the next step's model call takes it.
    warning: Option<Message>,
    /// The steps taken when the Final Warning came (recovery began).
    warned_after: u64,
    /// What the SOP workflow tells the model before the next step (a phase it was moved to).
    notice: Option<Message>,
    /// The SOP workflow's verdict on the step now ending, when it was taken before the
    /// step's checkpoint ([`Orchestrator::count_step`]).
    counted: Option<StepVerdict>,
}

/// One agent task under the profile.
#[derive(Debug)]
pub struct Orchestrator {
    profile: Arc<RuntimeProfile>,
    flags: Arc<ProfileFlags>,
    run: Option<Arc<RunContext>>,
    side: Option<Side>,
    progress: Mutex<Progress>,
    sop: Option<Arc<SopExecutor>>,
}

impl Orchestrator {
    /// A task under `profile`, sharing `flags` with its [`super::layer::ProfileLayer`],
    /// logging to `run` (when durable) with `side` (a `dual_ai` side) in the payloads.
    pub fn new(
        profile: Arc<RuntimeProfile>,
        flags: Arc<ProfileFlags>,
        run: Option<Arc<RunContext>>,
        side: Option<Side>,
    ) -> Self {
        Orchestrator {
            profile,
            flags,
            run,
            side,
            progress: Mutex::new(Progress {
                machine: StateMachine::new(),
                deadline: None,
                partial: String::new(),
                warning: None,
                warned_after: 0,
                notice: None,
                counted: None,
            }),
            sop: None,
        }
    }

    /// The same task following `sop`'s workflow (§7): every step counts against its phase's
    /// `maxReactLoop`, and a phase that cannot be left when its steps are used ends the task
    /// in ERROR.
    #[must_use]
    pub fn with_sop(mut self, sop: Arc<SopExecutor>) -> Self {
        self.sop = Some(sop);
        self
    }

    /// The current state.
    pub fn state(&self) -> RunState {
        self.with(|p| p.machine.state())
    }

    /// When the grace period ends, while in recovery with `hardLimit` (steps are bounded by
    /// it).
    pub fn grace_deadline(&self) -> Option<Instant> {
        self.with(|p| p.deadline)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Progress) -> T) -> T {
        let mut guard = match self.progress.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    async fn fire(&self, trigger: Trigger) -> Result<Transition, IllegalTransition> {
        let taken = self.with(|p| p.machine.fire(trigger));
        self.log(taken).await
    }

    async fn log(
        &self,
        taken: Result<Transition, IllegalTransition>,
    ) -> Result<Transition, IllegalTransition> {
        match &taken {
            Ok(t) => {
                if let Some(run) = &self.run {
                    run.emit(EventKind::StateTransition {
                        from: t.from.as_str().to_owned(),
                        to: t.to.as_str().to_owned(),
                        trigger: t.trigger.as_str().to_owned(),
                        side: self.side,
                    })
                    .await;
                }
            }
            Err(error) => {
                tracing::error!(%error, "the runtime profile's state machine refused a transition");
                debug_assert!(false, "{error}");
            }
        }
        taken
    }

    /// The task's input arrived: IDLE → THINKING.
    ///
    /// # Errors
    /// [`IllegalTransition`] outside IDLE.
    pub async fn begin(&self) -> Result<(), IllegalTransition> {
        self.fire(Trigger::UserInput).await.map(drop)
    }

    /// Before the step that follows `turns` steps: OBSERVATION → THINKING, or → RECOVERY at
    /// the turn limit, with the Final Warning added to the step's input (through
    /// [`Orchestrator::observer`]); returns the warning when one was added.
    ///
    /// # Errors
    /// [`IllegalTransition`] (a bug of the loop).
    pub async fn before_step(&self, turns: u64) -> Result<Option<Message>, IllegalTransition> {
        if self.state() != RunState::Observation {
            // The first step (THINKING already), or the next turn of the grace period.
            return Ok(None);
        }
        if turns < self.profile.recovery_at() {
            self.fire(Trigger::MoreWork).await?;
            return Ok(None);
        }
        self.fire(Trigger::LimitReached).await?;
        self.flags.set_recovering(true);
        if self.profile.hard_limit {
            let deadline =
                Instant::now() + std::time::Duration::from_millis(self.profile.grace_timeout_ms);
            self.with(|p| p.deadline = Some(deadline));
        }
        if let Some(run) = &self.run {
            run.emit(EventKind::Recovery {
                from_checkpoint: None,
                agent_step: turns,
                recorded_results: 0,
                rerun_uncertain: Vec::new(),
                uncertain_calls: Vec::new(),
                grace: Some(json!({
                    "trigger": Trigger::LimitReached.as_str(),
                    "turns": turns,
                    "maxTurns": self.profile.max_turns,
                    "graceTurns": self.profile.grace_turns,
                    "graceTimeoutMs": self.profile.grace_timeout_ms,
                    "hardLimit": self.profile.hard_limit,
                })),
            })
            .await;
        }
        let warning = Message::user(self.profile.warning(turns));
        self.with(|p| {
            p.warning = Some(warning.clone());
            p.warned_after = turns;
        });
        Ok(Some(warning))
    }

    /// The instance the next step's model call uses instead of `llm` (the agent's), if any:
    /// during recovery — the Final Warning turn and each grace turn after it —
    /// [`completion_only`], so the spec's "the Final Warning turn MUST call `complete_task`"
    /// (§5.2(2)) is asked of the model itself, not only checked afterwards.
    ///
    /// # Errors
    /// `INVALID_REQUEST` when `llm` has no `complete_task` tool (the profile always adds it).
    pub fn step_llm(&self, llm: &LlmInstance) -> Result<Option<LlmInstance>, UppError> {
        if self.state() != RunState::Recovery {
            return Ok(None);
        }
        completion_only(llm).map(Some)
    }

    /// The step observer of the task: `inner`'s (the run's), with the Final Warning added to
    /// the input of the step it is due for.
    pub fn observer(
        self: &Arc<Self>,
        inner: Option<Arc<dyn StepObserver>>,
    ) -> Arc<dyn StepObserver> {
        Arc::new(ProfileObserver {
            orchestrator: self.clone(),
            inner,
        })
    }

    /// A step ended (it was step number `turns`): its edges, then what comes next.
    ///
    /// # Errors
    /// [`IllegalTransition`] (a bug of the loop).
    pub async fn after_step(&self, turn: &Turn, turns: u64) -> Result<Next, IllegalTransition> {
        let calls = &turn.response.tool_calls;
        let text = turn.response.text_content();
        if !text.trim().is_empty() {
            self.with(|p| p.partial = text.clone());
        }
        if self.state() == RunState::Thinking {
            let responded = self.with(|p| p.machine.respond(!calls.is_empty()));
            self.log(responded).await?;
            if !calls.is_empty() {
                self.fire(Trigger::ToolResults).await?;
            }
        }
        // The completion contract: an accepted complete_task (alone; the policy stage
        // refused it otherwise, so its result is an error).
        if let Some(call) = accepted(turn) {
            self.fire(Trigger::CompleteTask).await?;
            self.flags.set_recovering(false);
            let args = &call.arguments;
            return Ok(Next::Done {
                summary: args
                    .get("summary")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                artifacts: args
                    .get("artifacts")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
                next_steps: args
                    .get("nextSteps")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
        }
        match self.state() {
            RunState::Observation if calls.is_empty() => {
                self.fire(Trigger::Stopped).await?;
                Ok(Next::Error(self.with_partial(
                    "the agent stopped without calling complete_task (the runtime profile's completion \
                     contract: complete_task is the only way a task ends)",
                )))
            }
            // §5.2(2): the Final Warning turn (and each grace turn after it) must call
            // complete_task. Its model call was forced to (`step_llm`); a reply that
            // calls nothing or something else (a provider that ignores the choice, a text
            // answer) fails the recovery at once. A complete_task call that was refused
            // (invalid arguments, not alone) may be corrected in the grace turns left.
            RunState::Recovery
                if self.profile.hard_limit
                    && !calls.iter().any(|call| call.tool_name == COMPLETE_TASK) =>
            {
                let grace_turn = turns.saturating_sub(self.with(|p| p.warned_after));
                self.recovery_failed(format!(
                    "recovery failed: the agent's reply in grace turn {grace_turn} of {} did not \
                     call complete_task (the Final Warning turn must call it; the call was forced)",
                    self.profile.grace_turns
                ))
                .await
            }
            RunState::Recovery if turns >= self.profile.max_turns && self.profile.hard_limit => {
                self.recovery_failed(format!(
                    "recovery failed: the agent did not call complete_task within its {} grace turns \
                     (maxTurns {})",
                    self.profile.grace_turns, self.profile.max_turns
                ))
                .await
            }
            RunState::Observation => match &self.sop {
                Some(sop) => match self.with(|p| p.counted.take()) {
                    Some(verdict) => self.sop_verdict(verdict).await,
                    None => {
                        let verdict = sop.after_step(turn).await;
                        self.sop_verdict(verdict).await
                    }
                },
                None => Ok(Next::Continue),
            },
            _ => Ok(Next::Continue),
        }
    }

    /// Counts the step that produced `turn` in the SOP workflow (the step counted, the
    /// phase moved when it used its `maxReactLoop`) before the step's checkpoint is made, so
    /// the checkpoint holds the workflow's progress after the step
    /// ([`SopExecutor::progress`]); [`Orchestrator::after_step`] then acts on the verdict.
    /// Only a step that goes on in the workflow counts: not one in recovery, one that ended
    /// the task with `complete_task`, or one without calls.
    pub async fn count_step(&self, turn: &Turn) {
        let Some(sop) = &self.sop else {
            return;
        };
        let calls = &turn.response.tool_calls;
        if self.state() != RunState::Thinking || calls.is_empty() || accepted(turn).is_some() {
            return;
        }
        let verdict = sop.after_step(turn).await;
        self.with(|p| p.counted = Some(verdict));
    }

    async fn sop_verdict(&self, verdict: StepVerdict) -> Result<Next, IllegalTransition> {
        match verdict {
            StepVerdict::Continue => Ok(Next::Continue),
            StepVerdict::Advanced(text) => {
                self.with(|p| p.notice = Some(Message::user(text)));
                Ok(Next::Continue)
            }
            StepVerdict::Failed(why) => {
                self.fire(Trigger::Failed).await?;
                Ok(Next::Error(self.with_partial(&why)))
            }
        }
    }

    /// The grace period's time ran out (`graceTimeoutMs`): RECOVERY → ERROR.
    ///
    /// # Errors
    /// [`IllegalTransition`] outside recovery.
    pub async fn timed_out(&self) -> Result<Next, IllegalTransition> {
        self.recovery_failed(format!(
            "recovery failed: the grace period ran past graceTimeoutMs ({} ms) without complete_task",
            self.profile.grace_timeout_ms
        ))
        .await
    }

    async fn recovery_failed(&self, why: String) -> Result<Next, IllegalTransition> {
        self.fire(Trigger::Failed).await?;
        self.flags.set_recovering(false);
        Ok(Next::Error(self.with_partial(&why)))
    }

    /// A call of the step waits for a person's decision: (THINKING → TOOL_WAIT →) IDLE.
    ///
    /// # Errors
    /// [`IllegalTransition`] (a bug of the loop).
    pub async fn suspended(&self) -> Result<(), IllegalTransition> {
        if self.state() == RunState::Thinking {
            let responded = self.with(|p| p.machine.respond(true));
            self.log(responded).await?;
        }
        if self.state() == RunState::ToolWait {
            self.fire(Trigger::AwaitingDecision).await?;
        }
        Ok(())
    }

    /// The step failed (the model or the runtime): → ERROR, unless the task already ended.
    pub async fn failed(&self) {
        if !self.state().is_terminal() && self.state() != RunState::Idle {
            let _ = self.fire(Trigger::Failed).await;
        }
    }

    fn with_partial(&self, why: &str) -> String {
        let partial = self.with(|p| p.partial.clone());
        if partial.trim().is_empty() {
            why.to_owned()
        } else {
            format!("{why}; partial output: {partial}")
        }
    }
}

/// `llm` for a turn that must end the task: only `complete_task` offered, and the model told
/// to call it ([`ToolChoice::Tool`]; each adapter sends it in its wire format, a project's
/// own `tool_choice` param winning). The other tools stay callable, so a call of one (a
/// provider that ignores the choice) is refused by the policy stage with a reason.
///
/// # Errors
/// `INVALID_REQUEST` when `llm` has no `complete_task` tool.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use serde_json::json;
/// use weft_provider::adapters::scripted;
/// use weft_provider::{llm, LlmOptions, Tool, ToolChoice};
/// use weft_runtime::profile::orchestrator::completion_only;
///
/// let model = scripted::function_model(|req| {
///     let offered: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
///     assert_eq!(offered, ["complete_task"]);
///     assert_eq!(req.tool_choice, ToolChoice::tool("complete_task"));
///     Ok(scripted::ScriptedResponse::text("done"))
/// });
/// let tool = |name: &str| Tool::new(name, "", json!({"type": "object"}), |_, _| async { Ok(json!(null)) });
/// let agent = llm(LlmOptions::new(model).tool(tool("read_file")).tool(tool("complete_task")))?;
/// completion_only(&agent)?.generate(&[], "go").await?;
/// # Ok(())
/// # }
/// ```
pub fn completion_only(llm: &LlmInstance) -> Result<LlmInstance, UppError> {
    llm.with_offered(
        vec![COMPLETE_TASK.to_owned()],
        ToolChoice::tool(COMPLETE_TASK),
    )
}

struct ProfileObserver {
    orchestrator: Arc<Orchestrator>,
    inner: Option<Arc<dyn StepObserver>>,
}

#[async_trait]
impl StepObserver for ProfileObserver {
    async fn step_started(&self, step: u64, state: &AgentState) {
        if let Some(inner) = &self.inner {
            inner.step_started(step, state).await;
        }
    }

    async fn step_ended(&self, step: u64, turn: &Turn, state: &AgentState, usage: &TokenUsage) {
        if let Some(inner) = &self.inner {
            inner.step_ended(step, turn, state, usage).await;
        }
    }

    async fn inbox(&self, step: u64, state: &AgentState) -> Vec<Message> {
        let mut messages = match &self.inner {
            Some(inner) => inner.inbox(step, state).await,
            None => Vec::new(),
        };
        if let Some(notice) = self.orchestrator.with(|p| p.notice.take()) {
            messages.push(notice);
        }
        if let Some(warning) = self.orchestrator.with(|p| p.warning.take()) {
            messages.push(warning);
        }
        messages
    }

    fn suspended(&self) -> bool {
        self.inner.as_ref().is_some_and(|inner| inner.suspended())
    }
}

/// The step's `complete_task` call that was accepted (alone; the policy stage refused it
/// otherwise, so its result is an error).
fn accepted(turn: &Turn) -> Option<&weft_provider::ToolCall> {
    let results = last_results(turn);
    turn.response.tool_calls.iter().find(|call| {
        call.tool_name == COMPLETE_TASK
            && results
                .iter()
                .any(|r| r.tool_call_id == call.tool_call_id && !r.is_error)
    })
}

fn last_results(turn: &Turn) -> &[ToolResult] {
    match turn.messages.last().map(|m| &**m) {
        Some(Message::ToolResult(results)) => &results.results,
        _ => &[],
    }
}
