//! [`Runtime`]: starts and resumes runs, in any process, and hands back a [`RunHandle`].
//!
//! The life of a run, the same for every driver (CLI, server, workers):
//!
//! 1. **start** records the thread, the run with its whole [`RunSpec`] (one write: there is
//!    no run record without its spec), the lineage root and the initial checkpoint;
//! 2. the process **claims** the run ([`Ownership`]: OS lock, lease, fence) — a second
//!    driver is refused with [`RunError::Owned`] (exit code 5);
//! 3. a **resume** applies the uncertain-call rule (runtime spec §5.9, RT-050): a call
//!    recorded as pending without a result was in flight when the run stopped; it runs again
//!    only when its tool has no side effects, is idempotent, or the user approved
//!    (`rerun_uncertain`), else the resume stops before any model call
//!    ([`RunEnd::NeedsApproval`], exit code 3);
//! 4. the program runs from the latest checkpoint with every write fenced, every model
//!    response recorded before its tools run and every tool result in the ledger, so no
//!    recorded step is asked of the model again and no recorded call runs again;
//! 5. the run record gets its end (completed, failed, interrupted), its steps and usage, and
//!    the lease is released so the run can be resumed at once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use weft_agent::AgentState;
use weft_provider::pricing::{Price, PriceSource, PriceTable, Prices};
use weft_provider::{Message, ModelReference, ProviderRegistry, TokenUsage, Tool, UppError};
use weft_store::{
    AgentNode, AgentStatus, DecisionKind, DecisionRecord, DecisionStatus, Decisions as _,
    Durability, EventLog as _, Lineage as _, NewEvent, Pricing, Responses as _, RunRecord,
    RunStatus, Runs as _, Store, StoreError, ThreadRecord, Threads as _, ToolCallRecord,
    ToolCallStatus, ToolLedger as _, Usage, Verdict, new_id, now_string,
};

use crate::agent_program::{self, ToolRegistry};
use crate::approval::Approver;
use crate::error::RunError;
use crate::event::{Emitter, EventKind, RunEvent, RunEvents};
use crate::ledger::RunContext;
use crate::ownership::Ownership;
use crate::recorded::recorded_model;
use crate::spec::{Program, RunSpec, SessionProgram};

/// Runs Standard Agents sessions for the runtime (implemented by `weft-standard`, which
/// sits above this crate).
#[async_trait]
pub trait Sessions: Send + Sync + std::fmt::Debug {
    /// Runs (or goes on with) `program` as the run `run`.
    ///
    /// # Errors
    /// When the session cannot be set up (its project, its agent).
    async fn run(&self, program: &SessionProgram, run: ActiveRun) -> Result<ProgramEnd, RunError>;

    /// Whether a new run of `program` may start on `thread` (`None`: a new thread), asked
    /// before the run is recorded: [`RunError::Refused`] says why not (Standard Agents: a
    /// required variable without a value). The default admits every run.
    ///
    /// # Errors
    /// [`RunError::Refused`]; storage failures.
    async fn admit(
        &self,
        program: &SessionProgram,
        store: &Store,
        thread: Option<&str>,
    ) -> Result<(), RunError> {
        let _ = (program, store, thread);
        Ok(())
    }

    /// What the store must redact from a run of `program` besides its own redactor (e.g. a
    /// project's runtime profile `secretPatterns`), with a key naming it: added to the store
    /// ([`Store::add_redactor`]) before the run records anything, by a new run and by a
    /// resumed one alike. `None` (the default): nothing more.
    fn redactor(
        &self,
        program: &SessionProgram,
    ) -> Option<(String, Arc<dyn weft_store::Redactor>)> {
        let _ = program;
        None
    }

    /// The model references (`PROVIDER:MODEL`) a run of `program` may call, so a cost
    /// budget can be checked against their prices before the run starts. Empty (the
    /// default) when they cannot be known: such a run with a cost budget is refused.
    fn models(&self, program: &SessionProgram) -> Vec<String> {
        let _ = program;
        Vec::new()
    }
}

/// A run this process owns and is about to drive: what a program needs.
#[derive(Debug)]
pub struct ActiveRun {
    /// The run's record.
    pub record: RunRecord,
    /// Its spec.
    pub spec: RunSpec,
    /// The store with the run's durability, scoped to the run and fenced by its lease.
    pub store: Store,
    /// The run's ledger (recorded results and responses).
    pub ledger: Arc<RunContext>,
    /// Stops the run (an abort, a lost lease, a divergence).
    pub signal: CancellationToken,
    /// Whether an earlier process drove the run before.
    pub resumed: bool,
    /// The state to go on from (the latest checkpoint of the run's thread).
    pub state: AgentState,
    /// The run's usage up to that checkpoint.
    pub base_usage: TokenUsage,
    /// Resolves model references.
    pub providers: Arc<ProviderRegistry>,
}

impl ActiveRun {
    /// `model` with its responses recorded (and replayed) at their positions in `scope`
    /// (the checkpoint thread the conversation is saved under).
    ///
    /// # Errors
    /// When the model cannot be bound.
    pub fn model(&self, model: &ModelReference, scope: &str) -> Result<ModelReference, UppError> {
        recorded_model(model, self.ledger.clone(), scope)
    }
}

/// How a program ended in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndStatus {
    /// It reached its end.
    Completed,
    /// It failed.
    Failed,
    /// It was stopped and can be resumed.
    Interrupted,
    /// A call waits for a person's decision; the run resumes once it is taken.
    Suspended,
}

/// What a program reports when it stops.
#[derive(Debug, Clone)]
pub struct ProgramEnd {
    /// How it ended.
    pub status: EndStatus,
    /// The output (completed) or the error (failed).
    pub message: String,
    /// Steps of the whole run so far.
    pub steps: u64,
    /// Steps before this process.
    pub steps_before: u64,
    /// Usage of the whole run so far.
    pub usage: TokenUsage,
}

/// How a run ended this time.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    /// Completed with this output.
    Completed {
        /// The output.
        output: String,
    },
    /// Failed.
    Failed {
        /// Why.
        error: String,
    },
    /// Interrupted: resumable.
    Interrupted,
    /// A resume stopped before any model call: these calls were in flight when the run
    /// stopped and may not run again without approval.
    NeedsApproval {
        /// The uncertain calls.
        calls: Vec<ToolCallRecord>,
        /// Their pending decisions (`weft approve` / `weft deny` take their ids).
        decisions: Vec<DecisionRecord>,
    },
    /// Suspended: these calls wait for a person's decision (the policy asks for approval and
    /// nobody could answer now). `weft approve` / `weft deny`, then `weft resume`.
    AwaitingDecision {
        /// The pending decisions.
        decisions: Vec<DecisionRecord>,
    },
}

/// The outcome of a run's drive in this process.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The run.
    pub run_id: String,
    /// How it ended.
    pub end: RunEnd,
    /// Steps of the whole run.
    pub steps: u64,
    /// Steps taken by this process.
    pub steps_now: u64,
    /// Usage of the whole run.
    pub usage: Usage,
}

impl RunOutcome {
    /// The `run_end` event of this outcome.
    pub fn end_event(&self) -> EventKind {
        let (status, output, error, decisions) = match &self.end {
            RunEnd::Completed { output } => ("completed", Some(output.clone()), None, Vec::new()),
            RunEnd::Failed { error } => ("failed", None, Some(error.clone()), Vec::new()),
            RunEnd::Interrupted => ("interrupted", None, None, Vec::new()),
            RunEnd::NeedsApproval { decisions, .. } => ("stopped", None, None, decisions.clone()),
            RunEnd::AwaitingDecision { decisions } => ("suspended", None, None, decisions.clone()),
        };
        EventKind::RunEnd {
            status: status.to_owned(),
            exit_code: self.exit_code(),
            steps: self.steps,
            input_tokens: self.usage.input_tokens,
            output_tokens: self.usage.output_tokens,
            cost: self.usage.cost,
            output,
            error,
            decisions,
            resume: None,
            resume_note: None,
        }
    }

    /// The exit code: 0 completed, 1 failed, 3 stopped on an uncertain call, 4 awaiting a
    /// decision, 130 interrupted.
    pub fn exit_code(&self) -> u8 {
        match self.end {
            RunEnd::Completed { .. } => 0,
            RunEnd::Failed { .. } => 1,
            RunEnd::NeedsApproval { .. } => 3,
            RunEnd::AwaitingDecision { .. } => 4,
            RunEnd::Interrupted => 130,
        }
    }
}

/// Options of [`Runtime::resume`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResumeOptions {
    /// Re-run uncertain side-effecting calls (the user approves).
    pub rerun_uncertain: bool,
}

/// A run being driven by this process.
#[derive(Debug)]
pub struct RunHandle {
    id: String,
    events: Option<RunEvents>,
    abort: CancellationToken,
    task: JoinHandle<Result<RunOutcome, RunError>>,
}

impl RunHandle {
    /// The run id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The run's events (once; `None` afterwards, or when they were not asked for):
    /// numbered, in order, ending with `run_end`. Dropping the stream stops the run
    /// (resumable) unless it is [detached](RunEvents::detach).
    pub fn take_events(&mut self) -> Option<RunEvents> {
        self.events.take()
    }

    /// Stops the run at the next safe point: in-flight tool calls stay pending (uncertain),
    /// the run ends `interrupted` and can be resumed.
    pub fn abort(&self) {
        self.abort.cancel();
    }

    /// A token that aborts the run when cancelled (for signal handlers).
    pub fn abort_handle(&self) -> CancellationToken {
        self.abort.clone()
    }

    /// Waits for the run to stop.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Fenced`] when another process took the run over.
    pub async fn outcome(self) -> Result<RunOutcome, RunError> {
        self.task
            .await
            .map_err(|e| RunError::Agent(format!("the run's task failed: {e}")))?
    }
}

/// Starts and resumes runs.
///
/// # Examples
///
/// ```no_run
/// use weft_runtime::{Runtime, spec::{AgentProgram, Program, RunSpec}};
/// # async fn demo(store: weft_store::Store) -> Result<(), weft_runtime::RunError> {
/// let runtime = Runtime::new(store);
/// let handle = runtime
///     .start(RunSpec::new("Hi", Program::Agent(AgentProgram::new("scripted:hello.json"))), false)
///     .await?;
/// let outcome = handle.outcome().await?;
/// assert_eq!(outcome.exit_code(), 0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Runtime {
    store: Store,
    providers: Arc<ProviderRegistry>,
    tools: ToolRegistry,
    sessions: Option<Arc<dyn Sessions>>,
    approver: Option<Arc<dyn Approver>>,
    prices: Prices,
    price_override: Option<PriceTable>,
    live: LiveRuns,
    /// Notified when this process schedules an effect (an `EffectScheduler` wakes).
    schedule_changed: Arc<tokio::sync::Notify>,
}

/// The runs this process drives, with their live event channel and abort token (shared by
/// the clones of a [`Runtime`]).
type LiveRuns = Arc<std::sync::Mutex<HashMap<String, LiveRun>>>;

#[derive(Debug, Clone)]
struct LiveRun {
    events: tokio::sync::broadcast::Sender<Arc<RunEvent>>,
    abort: CancellationToken,
    thread: String,
    /// Set when a message is queued on the run's thread: its next step takes the queue.
    inbox: Arc<std::sync::atomic::AtomicBool>,
    /// Cancelled when the drive is over (its lease released, the run no longer live).
    ended: CancellationToken,
}

/// Takes a run out of [`LiveRuns`] when its drive ends.
struct LiveGuard(LiveRuns, String);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        let removed = self.0.lock().ok().and_then(|mut runs| runs.remove(&self.1));
        if let Some(run) = removed {
            run.ended.cancel();
        }
    }
}

/// How often [`Runtime::follow`] reads the log of a run driven by another process.
const FOLLOW_POLL: std::time::Duration = std::time::Duration::from_millis(150);

impl Runtime {
    /// A runtime over `store` with the default providers and no tools.
    pub fn new(store: Store) -> Self {
        Runtime {
            store,
            providers: Arc::new(default_providers()),
            tools: ToolRegistry::new(),
            sessions: None,
            approver: None,
            prices: Prices::builtin(),
            price_override: None,
            live: LiveRuns::default(),
            schedule_changed: Arc::default(),
        }
    }

    /// Notified when this runtime (or a clone) schedules an effect.
    pub(crate) fn schedule_changed(&self) -> &Arc<tokio::sync::Notify> {
        &self.schedule_changed
    }

    /// A run's events from after `after_seq`, as they happen, wherever the run is driven:
    /// live from this process's emitter when this process drives it, otherwise read from the
    /// event log as it grows (another process drives it, or nobody: then the stream ends
    /// with what is logged). The stream ends after `run_end`; dropping it stops nothing.
    ///
    /// # Errors
    /// [`RunError::UnknownRun`]; storage failures.
    pub async fn follow(&self, run_id: &str, after_seq: u64) -> Result<RunEvents, RunError> {
        if let Some(live) = self.live_run(run_id) {
            return Ok(RunEvents::new(
                live.events.subscribe(),
                Some(self.store.clone()),
                run_id,
                after_seq,
            ));
        }
        if self.store.run(run_id).await?.is_none() {
            return Err(RunError::UnknownRun(run_id.to_owned()));
        }
        Ok(RunEvents::polling(
            self.store.clone(),
            run_id,
            after_seq,
            FOLLOW_POLL,
        ))
    }

    /// Queues `text` on `thread` (Standard Agents' thread queue): a run of the thread that
    /// this process drives takes it before its next model step, as a user message; otherwise
    /// the thread's next run takes it before its first. Durable when this returns.
    ///
    /// # Errors
    /// [`RunError::UnknownThread`]; storage failures.
    pub async fn queue_message(
        &self,
        thread: &str,
        text: &str,
    ) -> Result<weft_store::QueuedMessage, RunError> {
        use weft_store::ThreadQueue as _;
        if self.store.thread(thread).await?.is_none() {
            return Err(RunError::UnknownThread(thread.to_owned()));
        }
        self.refuse_terminated(thread).await?;
        let queued = self.store.queue_message(thread, text).await?;
        self.wake_inbox(thread);
        Ok(queued)
    }

    /// Queues a call of the tool `tool` with `arguments` on `thread` (Standard Agents
    /// `queueTool()`): taken in queue order with the queued messages by a step of a run of
    /// the thread — this process's run in progress before its next model step, otherwise
    /// the thread's next run (one started with an empty input takes the queue first). The
    /// call runs through the tool pipeline like one of the model's (a tool the agent lacks
    /// or bad arguments are a tool error the model sees); a call of an `ai_human` agent's
    /// handoff tool hands the thread over (manual handoff). Durable when this returns.
    ///
    /// # Errors
    /// [`RunError::UnknownThread`]; [`RunError::Refused`] for a terminated thread or
    /// arguments that are not a JSON object; storage failures.
    pub async fn queue_tool(
        &self,
        thread: &str,
        tool: &str,
        arguments: Value,
    ) -> Result<weft_store::QueuedMessage, RunError> {
        use weft_store::ThreadQueue as _;
        if self.store.thread(thread).await?.is_none() {
            return Err(RunError::UnknownThread(thread.to_owned()));
        }
        self.refuse_terminated(thread).await?;
        if tool.trim().is_empty() {
            return Err(RunError::Refused(
                "a queued tool call needs a tool name".into(),
            ));
        }
        if !arguments.is_object() {
            return Err(RunError::Refused(format!(
                "the arguments of a queued call of {tool} must be a JSON object"
            )));
        }
        let call = weft_store::QueuedTool {
            name: tool.to_owned(),
            arguments,
        };
        let queued = self.store.queue_tool(thread, &call).await?;
        self.wake_inbox(thread);
        Ok(queued)
    }

    /// Tells the runs of `thread` this process drives that something was queued: each takes
    /// the queue before its next model step.
    pub(crate) fn wake_inbox(&self, thread: &str) {
        if let Ok(runs) = self.live.lock() {
            for run in runs.values().filter(|r| r.thread == thread) {
                run.inbox.store(true, std::sync::atomic::Ordering::Release);
            }
        }
    }

    /// Whether this process drives `run_id` now.
    pub fn is_live(&self, run_id: &str) -> bool {
        self.live_run(run_id).is_some()
    }

    /// Waits until this process no longer drives `run_id`: its drive is over, its lease
    /// released, and [`Runtime::is_live`] says `false`. The run's last event is published
    /// just before that, so a caller that saw it and then reads the run's or thread's status
    /// waits here first. Returns at once for a run this process does not drive.
    pub async fn settled(&self, run_id: &str) {
        if let Some(live) = self.live_run(run_id) {
            live.ended.cancelled().await;
        }
    }

    /// The runs this process drives now.
    pub fn live_runs(&self) -> Vec<String> {
        self.live
            .lock()
            .map(|live| live.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Stops `run_id` at the next safe point when this process drives it (as
    /// [`RunHandle::abort`]: in-flight calls stay pending, the run ends `interrupted` and can
    /// be resumed); `false` when it does not drive it.
    pub fn stop(&self, run_id: &str) -> bool {
        match self.live_run(run_id) {
            Some(live) => {
                live.abort.cancel();
                true
            }
            None => false,
        }
    }

    /// Stops every run of `thread` this process drives (as [`Runtime::stop`]).
    pub(crate) fn stop_thread(&self, thread: &str) {
        if let Ok(runs) = self.live.lock() {
            for run in runs.values().filter(|r| r.thread == thread) {
                run.abort.cancel();
            }
        }
    }

    fn live_run(&self, run_id: &str) -> Option<LiveRun> {
        self.live.lock().ok()?.get(run_id).cloned()
    }

    /// Asks `approver` when a call needs a person's approval (a terminal asks inline).
    /// Without one, such a call suspends the run (exit code 4) until it is decided.
    #[must_use]
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// The decisions of `run_id` (pending ones first to act on: `weft runs show` lists them).
    ///
    /// # Errors
    /// Storage failures.
    pub async fn decisions(&self, run_id: &str) -> Result<Vec<DecisionRecord>, RunError> {
        Ok(self.store.decisions(run_id).await?)
    }

    /// Decides a pending decision of `run_id` as a remote client answered it (an approval
    /// coming back inside a chat's replayed message): only by its exact decision id, only
    /// while it is pending (single use: a replayed or stale answer is refused), and only
    /// when the answer is about the same call — `tool_call_id` — with the same arguments
    /// (`arguments`, compared by the hash the decision was recorded with). Nothing the
    /// client replays is trusted beyond naming the decision.
    ///
    /// # Errors
    /// [`RunError::UnknownRun`]; [`RunError::Decision`] for an unknown, decided or
    /// mismatched decision; storage failures.
    pub async fn decide_bound(
        &self,
        run_id: &str,
        decision_id: &str,
        tool_call_id: &str,
        arguments: Option<&Value>,
        verdict: Verdict,
    ) -> Result<DecisionRecord, RunError> {
        if self.store.run(run_id).await?.is_none() {
            return Err(RunError::UnknownRun(run_id.to_owned()));
        }
        let decisions = self.store.decisions(run_id).await?;
        let Some(decision) = decisions.iter().find(|d| d.id == decision_id) else {
            return Err(RunError::Decision(format!(
                "run {run_id} has no decision {decision_id:?}"
            )));
        };
        if decision.status != DecisionStatus::Pending {
            return Err(RunError::Decision(format!(
                "decision {decision_id} of run {run_id} was already taken ({})",
                decision.status.as_str()
            )));
        }
        if decision.tool_call_id != tool_call_id {
            return Err(RunError::Decision(format!(
                "decision {decision_id} of run {run_id} is about another call"
            )));
        }
        if let Some(arguments) = arguments
            && crate::ledger::args_hash(arguments) != decision.args_hash
        {
            return Err(RunError::Decision(format!(
                "decision {decision_id} of run {run_id} was asked for other arguments"
            )));
        }
        self.decide(run_id, decision_id, verdict).await
    }

    /// Decides a pending decision of `run_id`: `id` is the decision's id, or the id of the
    /// call it is about when one pending decision has it. Takes effect when the run resumes.
    ///
    /// # Errors
    /// [`RunError::UnknownRun`]; [`RunError::Decision`] when no pending decision matches (or
    /// several do); storage failures.
    pub async fn decide(
        &self,
        run_id: &str,
        id: &str,
        verdict: Verdict,
    ) -> Result<DecisionRecord, RunError> {
        if self.store.run(run_id).await?.is_none() {
            return Err(RunError::UnknownRun(run_id.to_owned()));
        }
        let decisions = self.store.decisions(run_id).await?;
        let by_id: Vec<&DecisionRecord> = decisions.iter().filter(|d| d.id == id).collect();
        let candidates: Vec<&DecisionRecord> = if by_id.is_empty() {
            decisions
                .iter()
                .filter(|d| d.tool_call_id == id && d.status == DecisionStatus::Pending)
                .collect()
        } else {
            by_id
        };
        let decision = match candidates.as_slice() {
            [one] => (*one).clone(),
            [] => {
                let pending: Vec<&str> = decisions
                    .iter()
                    .filter(|d| d.status == DecisionStatus::Pending)
                    .map(|d| d.id.as_str())
                    .collect();
                return Err(RunError::Decision(if pending.is_empty() {
                    format!("run {run_id} has no pending decision {id:?} (it has none pending)")
                } else {
                    format!(
                        "run {run_id} has no pending decision {id:?}; pending: {}",
                        pending.join(", ")
                    )
                }));
            }
            _ => {
                return Err(RunError::Decision(format!(
                    "{id:?} names several pending decisions of run {run_id}: use a decision id ({})",
                    candidates
                        .iter()
                        .map(|d| d.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        };
        if decision.status != DecisionStatus::Pending {
            return Err(RunError::Decision(format!(
                "decision {} of run {run_id} was already taken ({})",
                decision.id,
                decision.status.as_str()
            )));
        }
        if !self.store.decide(run_id, &decision.id, &verdict).await? {
            return Err(RunError::Decision(format!(
                "decision {} of run {run_id} was taken meanwhile",
                decision.id
            )));
        }
        Ok(self
            .store
            .decisions(run_id)
            .await?
            .into_iter()
            .find(|d| d.id == decision.id)
            .unwrap_or(decision))
    }

    /// Prices new model calls with `prices` (default: Weft's built-in table). Calls recorded
    /// earlier keep the price recorded with them.
    #[must_use]
    pub fn with_prices(mut self, prices: Prices) -> Self {
        self.prices = prices;
        self
    }

    /// Prices new model calls with `table` over everything else — over the runtime's prices
    /// and over the prices a run's spec recorded (`weft resume --pricing FILE`).
    #[must_use]
    pub fn with_price_override(mut self, table: PriceTable) -> Self {
        self.price_override = Some(table);
        self
    }

    /// Uses `providers` to resolve model references.
    #[must_use]
    pub fn with_providers(mut self, providers: ProviderRegistry) -> Self {
        self.providers = Arc::new(providers);
        self
    }

    /// Uses `tools` for agent programs.
    #[must_use]
    pub fn with_tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// Runs Standard Agents sessions with `sessions`.
    #[must_use]
    pub fn with_sessions(mut self, sessions: Arc<dyn Sessions>) -> Self {
        self.sessions = Some(sessions);
        self
    }

    /// The model providers runs resolve their models with.
    pub fn providers(&self) -> &ProviderRegistry {
        &self.providers
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Records a new run of `spec` and starts driving it on a task; `events` asks for its
    /// event stream ([`RunHandle::take_events`]).
    ///
    /// # Errors
    /// Unknown tools or an unresolvable model of an agent program; storage failures.
    pub async fn start(&self, spec: RunSpec, events: bool) -> Result<RunHandle, RunError> {
        self.start_on(None, spec, events).await
    }

    /// [`Runtime::start`] on a thread: `Some(thread)` attaches the new run to an existing
    /// thread — its conversation goes on from the thread's latest checkpoint with the spec's
    /// input as the next user message (a follow-up, a chat's next message) — and `None`
    /// starts a new thread.
    ///
    /// # Errors
    /// As [`Runtime::start`]; [`RunError::UnknownThread`] for a thread that does not exist.
    pub async fn start_on(
        &self,
        thread: Option<&str>,
        spec: RunSpec,
        events: bool,
    ) -> Result<RunHandle, RunError> {
        self.start_on_as(new_id(), thread, spec, events).await
    }

    /// [`Runtime::start_on`] with a run id chosen beforehand — an id an API client was
    /// handed before the run could start (a run queued behind the thread's run in
    /// progress) — instead of a new one.
    ///
    /// # Errors
    /// As [`Runtime::start_on`]; [`RunError::Spec`] when a run with that id exists already.
    pub async fn start_on_as(
        &self,
        run_id: String,
        thread: Option<&str>,
        spec: RunSpec,
        events: bool,
    ) -> Result<RunHandle, RunError> {
        if self.store.run(&run_id).await?.is_some() {
            return Err(RunError::Spec {
                run: run_id,
                message: "a run with this id exists already".to_owned(),
            });
        }
        if let Some(thread) = thread {
            self.refuse_terminated(thread).await?;
        }
        if spec.budget.max_cost.is_some()
            && let Some(model) = self.unpriced_model(&spec)
        {
            let table = Prices::table_date()
                .map(|date| format!("Weft's price table (of {date})"))
                .unwrap_or_else(|| "Weft's price table".to_owned());
            return Err(RunError::Budget(format!(
                "a cost budget (--max-cost, maxCost) needs the price of {model}, and {table} has none: \
                 give it in a file with --pricing FILE or with the project's pricing key in weft.toml \
                 (pricing = \"prices.toml\" or a [pricing] table), or limit tokens with --max-total-tokens; \
                 the run was not started"
            )));
        }
        let tools = self.agent_tools(&spec)?;
        if let Program::Agent(agent) = &spec.program {
            self.providers
                .resolve(&agent.model)
                .map_err(|e| RunError::Agent(e.to_string()))?;
        }
        self.add_redactor(&spec);
        if let (Program::Session(program), Some(sessions)) = (&spec.program, &self.sessions) {
            sessions.admit(program, &self.store, thread).await?;
        }
        let run_id = self.create_on(run_id, thread, &spec).await?;
        let ownership = Ownership::claim(&self.store, &run_id).await?;
        let record = self
            .store
            .run(&run_id)
            .await?
            .ok_or_else(|| RunError::UnknownRun(run_id.clone()))?;
        // The stream starts at the run's first event (`run_start`).
        let events = events.then_some(0);
        let handle = self.spawn(
            record,
            spec,
            tools,
            ownership,
            Vec::new(),
            HashSet::new(),
            false,
            events,
        );
        // A `terminate()` that set its flag after the check above looked for live runs
        // to stop before this one was live: seen now, the run stops at once.
        if let Some(thread) = thread
            && self.refuse_terminated(thread).await.is_err()
        {
            self.stop(handle.id());
        }
        Ok(handle)
    }

    /// Adds the redactor the sessions ask for a run of `spec` ([`Sessions::redactor`]) to
    /// the store, before the run records anything.
    fn add_redactor(&self, spec: &RunSpec) {
        if let (Program::Session(program), Some(sessions)) = (&spec.program, &self.sessions)
            && let Some((key, redactor)) = sessions.redactor(program)
        {
            self.store.add_redactor(&key, redactor);
        }
    }

    /// Goes on with `run_id` from its latest checkpoint, re-using every recorded response
    /// and tool result.
    ///
    /// # Errors
    /// Unknown run, unreadable spec, unknown tools, storage failures; [`RunError::Owned`]
    /// when another live process drives it.
    pub async fn resume(
        &self,
        run_id: &str,
        options: ResumeOptions,
        events: bool,
    ) -> Result<RunHandle, RunError> {
        let record = self
            .store
            .run(run_id)
            .await?
            .ok_or_else(|| RunError::UnknownRun(run_id.to_owned()))?;
        let spec = RunSpec::from_stored(&record.spec).map_err(|e| RunError::Spec {
            run: run_id.to_owned(),
            message: e.to_string(),
        })?;
        self.add_redactor(&spec);
        if record.status == RunStatus::Completed {
            let end = RunEnd::Completed {
                output: record.output.clone().unwrap_or_default(),
            };
            return finished(&self.store, &record, spec.role(), end, events).await;
        }
        self.refuse_terminated(&record.thread_id).await?;
        let tools = self.agent_tools(&spec)?;
        let ownership = Ownership::claim(&self.store, run_id).await?;
        // The uncertain-call rule.
        let mut calls = self.store.tool_calls(run_id).await?;
        let decisions = self.store.decisions(run_id).await?;
        let store = self.store.fenced(ownership.fence().clone());
        let mut approved = HashSet::new();
        let mut blocked = Vec::new();
        let mut raised = Vec::new();
        for call in calls
            .iter_mut()
            .filter(|c| c.status == ToolCallStatus::Pending)
        {
            let tool = tools.iter().find(|t| t.name == call.tool_name);
            let side_effects = tool.map_or(call.side_effects, |t| t.side_effects);
            let idempotent = tool.map_or(call.idempotent, |t| t.idempotent);
            let decided = decisions.iter().rev().find(|d| {
                d.kind == DecisionKind::Uncertain
                    && d.position == call.position
                    && matches!(d.status, DecisionStatus::Approved | DecisionStatus::Denied)
            });
            if !side_effects || idempotent || options.rerun_uncertain {
                approved.insert(call.position.clone());
            } else if let Some(decision) = decided {
                if decision.status == DecisionStatus::Approved {
                    store.use_decision(run_id, &decision.id).await?;
                    approved.insert(call.position.clone());
                } else {
                    // Denied: the call is not run again; the model gets the reason.
                    let reason = format!(
                        "this call was interrupted and the user chose not to run it again{}",
                        decision
                            .reason
                            .as_deref()
                            .filter(|r| !r.is_empty())
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default()
                    );
                    let result = Value::String(reason);
                    store
                        .tool_call_finished(run_id, &call.position, &result, true)
                        .await?;
                    call.status = ToolCallStatus::Completed;
                    call.result = Some(result);
                    call.is_error = true;
                }
            } else if let Some(open) = decisions.iter().find(|d| {
                d.kind == DecisionKind::Uncertain
                    && d.position == call.position
                    && d.status == DecisionStatus::Pending
            }) {
                // Still undecided (raised when the call was lost, or by an earlier resume).
                raised.push(open.clone());
                blocked.push(call.clone());
            } else {
                let decision = DecisionRecord::pending(
                    run_id,
                    call.position.clone(),
                    call.tool_call_id.clone(),
                    call.tool_name.clone(),
                    call.arguments.clone(),
                    call.args_hash.clone(),
                    DecisionKind::Uncertain,
                    record.agent_id.clone(),
                );
                store.raise_decision(&decision).await?;
                raised.push(decision);
                blocked.push(call.clone());
            }
        }
        if !blocked.is_empty() {
            let (kind, payload) = EventKind::Recovery {
                from_checkpoint: None,
                agent_step: 0,
                recorded_results: 0,
                rerun_uncertain: Vec::new(),
                uncertain_calls: blocked
                    .iter()
                    .zip(&raised)
                    .map(|(c, d)| {
                        json!({"toolCallId": c.tool_call_id,
                    "tool": c.tool_name, "position": c.position, "decision": d.id})
                    })
                    .collect(),
                grace: None,
            }
            .into_parts();
            let event = NewEvent::new(kind, run_id, &record.thread_id, spec.role(), payload);
            store.append_event(event).await?;
            let mut record = record;
            record.status = RunStatus::Interrupted;
            record.updated_at = now_string();
            store.put_run(&record).await?;
            ownership.release().await;
            let end = RunEnd::NeedsApproval {
                calls: blocked,
                decisions: raised,
            };
            return finished(&store, &record, spec.role(), end, events).await;
        }
        // The stream starts after what earlier processes logged.
        let events = match events {
            true => Some(self.store.last_event_seq(run_id).await?),
            false => None,
        };
        Ok(self.spawn(
            record, spec, tools, ownership, calls, approved, true, events,
        ))
    }

    /// The prices of `spec`'s run, lowest first: the runtime's, an agent program's own
    /// `pricing` for its model, the spec's `pricing`, the runtime's override.
    fn prices_of(&self, spec: &RunSpec) -> Prices {
        let mut prices = self.program_prices(spec);
        for table in [&spec.pricing, &self.price_override].into_iter().flatten() {
            prices = prices.with_override(table.clone());
        }
        prices
    }

    fn program_prices(&self, spec: &RunSpec) -> Prices {
        match &spec.program {
            Program::Agent(agent) => match (agent.pricing, agent.model.split_once(':')) {
                (Some(flat), Some((provider, model))) if flat != Pricing::default() => self
                    .prices
                    .clone()
                    .with_override(PriceTable::new(PriceSource::Override).with_price(
                        provider,
                        model,
                        Price {
                            input: flat.input_per_mtok,
                            output: flat.output_per_mtok,
                            cache_read: None,
                            cache_write: None,
                        },
                    )),
                _ => self.prices.clone(),
            },
            Program::Session(_) => self.prices.clone(),
        }
    }

    /// A model of `spec` whose price is unknown (or a description of models that cannot be
    /// listed), `None` when every model it may call has a price.
    fn unpriced_model(&self, spec: &RunSpec) -> Option<String> {
        let prices = self.prices_of(spec);
        let models = match &spec.program {
            Program::Agent(agent) => vec![agent.model.clone()],
            Program::Session(session) => {
                let models = self
                    .sessions
                    .as_ref()
                    .map(|s| s.models(session))
                    .unwrap_or_default();
                if models.is_empty() {
                    return Some(format!("the models of agent {}", session.agent));
                }
                models
            }
        };
        models
            .into_iter()
            .find(|model| prices.quote_reference(model).is_none())
    }

    fn agent_tools(&self, spec: &RunSpec) -> Result<Vec<Tool>, RunError> {
        match &spec.program {
            Program::Agent(agent) => agent.tools.iter().map(|t| self.tools.build(t)).collect(),
            Program::Session(_) => Ok(Vec::new()),
        }
    }

    /// Records a new run — thread, run with its spec, lineage root, initial checkpoint —
    /// without driving it ([`Runtime::resume`] drives it later, in any process).
    ///
    /// # Errors
    /// Storage failures.
    pub async fn create(&self, spec: &RunSpec) -> Result<String, RunError> {
        self.create_on(new_id(), None, spec).await
    }

    async fn create_on(
        &self,
        run_id: String,
        thread: Option<&str>,
        spec: &RunSpec,
    ) -> Result<String, RunError> {
        let agent_id = new_id();
        let now = now_string();
        let store = self
            .store
            .with_durability(Durability::Sync)
            .for_run(&run_id);
        // A new thread starts from the input; an existing one goes on from its latest state.
        let (thread_id, state) = match thread {
            Some(thread) => {
                if store.thread(thread).await?.is_none() {
                    return Err(RunError::UnknownThread(thread.to_owned()));
                }
                let state = match store.latest_checkpoint(thread).await? {
                    // An empty input adds no message: the run is for the thread's queue
                    // (a queued tool call or a child's silent result), which its first step
                    // takes.
                    Some(latest) if spec.input.is_empty() => latest.checkpoint.state,
                    // A queued message an earlier run took just before a crash is held
                    // already.
                    Some(latest)
                        if spec.queued_input.as_deref().is_some_and(|id| {
                            crate::ledger::holds_queued(&latest.checkpoint.state, id)
                        }) =>
                    {
                        latest.checkpoint.state
                    }
                    Some(latest) => latest.checkpoint.state.with_message(input_message(spec)),
                    None => initial_state(spec, thread),
                };
                (thread.to_owned(), state)
            }
            None => {
                let thread = new_id();
                store.put_thread(&ThreadRecord::new(&thread)).await?;
                let state = initial_state(spec, &thread);
                (thread, state)
            }
        };
        let record = RunRecord {
            run_id: run_id.clone(),
            thread_id: thread_id.clone(),
            agent_id: agent_id.clone(),
            status: RunStatus::Running,
            spec: serde_json::to_value(spec).map_err(|e| RunError::Spec {
                run: run_id.clone(),
                message: e.to_string(),
            })?,
            started_at: now.clone(),
            updated_at: now.clone(),
            ended_at: None,
            steps: 0,
            usage: Usage::default(),
            owner_pid: Some(std::process::id()),
            owner_host: Some(crate::ownership::host_id()),
            error: None,
            output: None,
            parent_run_id: None,
            lease: weft_store::Lease::default(),
        };
        store.put_run(&record).await?;
        store
            .put_agent(&AgentNode {
                id: agent_id.clone(),
                run_id: run_id.clone(),
                parent_agent_id: None,
                role: spec.role().to_owned(),
                status: AgentStatus::Active,
                depth: 0,
                created_at: now,
                completed_at: None,
                usage: Usage::default(),
            })
            .await?;
        let checkpoint = weft_agent::checkpoint::Checkpoint {
            metadata: weft_agent::checkpoint::CheckpointMetadata {
                session_id: thread_id.clone(),
                checkpoint_id: new_id(),
                timestamp: chrono::Utc::now(),
                step: 0,
                agent_id: agent_id.clone(),
            },
            state,
            pending_tool_calls: Vec::new(),
            completed_tool_calls: Vec::new(),
            usage: Some(TokenUsage::default()),
        };
        store.save_checkpoint(&thread_id, &checkpoint).await?;
        if let Some(entry) = &spec.queued_input {
            // The checkpoint holds the message: it leaves the queue.
            use weft_store::ThreadQueue as _;
            store
                .dequeue(&thread_id, std::slice::from_ref(entry))
                .await?;
        }
        store
            .append_event(NewEvent::new(
                "run_start",
                &run_id,
                &thread_id,
                spec.role(),
                json!({"agent": spec.role(), "threadId": thread_id, "spec": spec}),
            ))
            .await?;
        Ok(run_id)
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn(
        &self,
        record: RunRecord,
        spec: RunSpec,
        tools: Vec<Tool>,
        ownership: Ownership,
        calls: Vec<ToolCallRecord>,
        approved: HashSet<String>,
        resumed: bool,
        events_after: Option<u64>,
    ) -> RunHandle {
        let live = Emitter::channel();
        let abort = CancellationToken::new();
        let events = events_after.map(|after| {
            RunEvents::new(
                live.subscribe(),
                Some(self.store.clone()),
                &record.run_id,
                after,
            )
            .stopping(abort.clone())
        });
        let id = record.run_id.clone();
        let inbox = Arc::new(std::sync::atomic::AtomicBool::new(true));
        if let Ok(mut runs) = self.live.lock() {
            runs.insert(
                id.clone(),
                LiveRun {
                    events: live.clone(),
                    abort: abort.clone(),
                    thread: record.thread_id.clone(),
                    inbox: inbox.clone(),
                    ended: CancellationToken::new(),
                },
            );
        }
        let drive = Drive {
            inbox,
            runtime: self.clone(),
            record,
            spec,
            tools,
            calls,
            approved,
            resumed,
            live,
            abort: abort.clone(),
        };
        let task = tokio::spawn(drive.run(ownership));
        RunHandle {
            id,
            events,
            abort,
            task,
        }
    }
}

/// The handle of a run that ends without being driven (already completed; a resume that
/// stops on uncertain calls): its `run_end` is logged, and its stream holds just that.
async fn finished(
    store: &Store,
    record: &RunRecord,
    agent: &str,
    end: RunEnd,
    events: bool,
) -> Result<RunHandle, RunError> {
    let outcome = RunOutcome {
        run_id: record.run_id.clone(),
        end,
        steps: record.steps,
        steps_now: 0,
        usage: record.usage,
    };
    let after = store.last_event_seq(&record.run_id).await?;
    let (kind, payload) = outcome.end_event().into_parts();
    store
        .append_event(NewEvent::new(
            kind,
            &record.run_id,
            &record.thread_id,
            agent,
            payload,
        ))
        .await?;
    store.flush().await?;
    let events = events.then(|| {
        // Nothing is live: the stream reads the log.
        let live = Emitter::channel();
        RunEvents::new(live.subscribe(), Some(store.clone()), &record.run_id, after)
    });
    Ok(RunHandle {
        id: record.run_id.clone(),
        events,
        abort: CancellationToken::new(),
        task: tokio::spawn(async move { Ok(outcome) }),
    })
}

/// The run's input as a user message (with its queue entry's id when it was queued).
fn input_message(spec: &RunSpec) -> Message {
    match &spec.queued_input {
        Some(id) => Message::User(weft_provider::UserMessage::with_options(
            vec![weft_provider::ContentBlock::text(spec.input.as_str())],
            weft_provider::MessageOptions {
                id: Some(id.clone()),
                metadata: None,
            },
        )),
        None => Message::user(spec.input.as_str()),
    }
}

fn initial_state(spec: &RunSpec, thread_id: &str) -> AgentState {
    AgentState::initial()
        .with_message(input_message(spec))
        .with_metadata(
            weft_agent::SESSION_ID_KEY,
            Value::String(thread_id.to_owned()),
        )
}

struct Drive {
    inbox: Arc<std::sync::atomic::AtomicBool>,
    runtime: Runtime,
    record: RunRecord,
    spec: RunSpec,
    tools: Vec<Tool>,
    calls: Vec<ToolCallRecord>,
    approved: HashSet<String>,
    resumed: bool,
    live: tokio::sync::broadcast::Sender<Arc<RunEvent>>,
    abort: CancellationToken,
}

impl Drive {
    async fn run(self, ownership: Ownership) -> Result<RunOutcome, RunError> {
        let fence = ownership.fence().clone();
        // Whatever way the drive ends (a panic included), the run is no longer live here.
        let _live = LiveGuard(self.runtime.live.clone(), self.record.run_id.clone());
        let result = self.drive(&fence).await;
        match &result {
            // A stale owner writes nothing more; the lease is not its to release.
            Err(RunError::Store(StoreError::Fenced { .. })) => drop(ownership),
            _ => ownership.release().await,
        }
        result
    }

    async fn drive(self, fence: &Arc<weft_store::lease::Fence>) -> Result<RunOutcome, RunError> {
        let Drive {
            inbox,
            runtime,
            mut record,
            spec,
            tools,
            calls,
            approved,
            resumed,
            live,
            abort,
        } = self;
        let run_id = record.run_id.clone();
        let store = runtime
            .store
            .with_durability(spec.durability)
            .for_run(&run_id)
            .fenced(fence.clone());
        let responses = if resumed {
            store.recorded_responses(&run_id).await?
        } else {
            Vec::new()
        };
        let latest = store.latest_checkpoint(&record.thread_id).await?;
        let (state, base_usage) = match &latest {
            Some(c) => (
                c.checkpoint.state.clone(),
                c.checkpoint.usage.clone().unwrap_or_default(),
            ),
            // The initial checkpoint was not written before a crash: start from the input.
            None => (
                initial_state(&spec, &record.thread_id),
                TokenUsage::default(),
            ),
        };
        let run_span = crate::trace::RunSpan::open(&spec, &record, resumed);
        let ledger = Arc::new(
            RunContext::new(
                store.clone(),
                &run_id,
                &record.thread_id,
                &record.agent_id,
                calls.iter().cloned(),
                responses,
            )
            .with_live_events(live)
            .with_inbox(inbox)
            .with_agent_name(spec.role())
            .with_trace(run_span.parent())
            .with_budget(spec.budget, runtime.prices_of(&spec))
            .with_decisions(
                store
                    .decisions(&run_id)
                    .await?
                    .into_iter()
                    .filter(|d| d.kind == DecisionKind::Approval),
                runtime.approver.clone(),
            ),
        );
        if resumed {
            ledger.begin_turn(state.step());
            ledger
                .emit(EventKind::Recovery {
                    from_checkpoint: latest.as_ref().map(|c| c.summary.id.clone()),
                    agent_step: state.step(),
                    recorded_results: calls
                        .iter()
                        .filter(|c| c.status == ToolCallStatus::Completed)
                        .count() as u64,
                    rerun_uncertain: approved.iter().cloned().collect(),
                    uncertain_calls: Vec::new(),
                    grace: None,
                })
                .await;
        }
        record.status = RunStatus::Running;
        record.owner_pid = Some(std::process::id());
        record.owner_host = Some(crate::ownership::host_id());
        record.updated_at = now_string();
        run_span.stamp(&mut record);
        store.put_run(&record).await?;

        // One signal stops the program: an abort, a lost lease, a divergence, the thread's
        // termination (by this process or another one).
        let signal = CancellationToken::new();
        let watch = {
            let (signal, abort, lost, ledger) = (
                signal.clone(),
                abort.clone(),
                fence.lost().clone(),
                ledger.clone(),
            );
            let (watched, thread) = (runtime.store.clone(), record.thread_id.clone());
            let max_time = spec.budget.max_time;
            tokio::spawn(async move {
                let out_of_time = async {
                    match max_time {
                        Some(limit) => tokio::time::sleep(limit).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = abort.cancelled() => {}
                    () = lost.cancelled() => {}
                    () = ledger.stop_token().cancelled() => {}
                    () = crate::thread_state::until_terminated(&watched, &thread) => {}
                    () = out_of_time => ledger.fail(format!(
                        "the run reached its time budget of {} (maxTime)",
                        crate::budget::format_duration(max_time.unwrap_or_default())
                    )),
                }
                signal.cancel();
            })
        };
        let (active_steps, active_usage) = (state.step(), base_usage.clone());
        let active = ActiveRun {
            record: record.clone(),
            spec: spec.clone(),
            store: store.clone(),
            ledger: ledger.clone(),
            signal,
            resumed,
            state,
            base_usage,
            providers: runtime.providers.clone(),
        };
        let end = match &spec.program {
            Program::Agent(program) => agent_program::run(program, tools, active).await,
            Program::Session(program) => match &runtime.sessions {
                Some(sessions) => sessions.run(program, active).await,
                None => Err(RunError::NoSessions),
            },
        };
        watch.abort();
        if fence.lost().is_cancelled() {
            let lease = runtime.store.lease(&run_id).await?.unwrap_or_default();
            return Err(RunError::Store(StoreError::Fenced {
                run_id,
                held: fence.epoch(),
                current: lease.epoch,
            }));
        }
        // A program that could not even start (its project, its model) fails the run, with
        // the reason recorded, rather than leaving it `running`.
        let mut end = match end {
            Ok(end) => end,
            Err(error) => ProgramEnd {
                status: EndStatus::Failed,
                message: error.to_string(),
                steps: active_steps,
                steps_before: active_steps,
                usage: active_usage,
            },
        };
        if let Some(failure) = ledger.failure() {
            end.status = EndStatus::Failed;
            end.message = failure;
        }
        let awaiting = ledger.suspended();
        if !awaiting.is_empty() && end.status != EndStatus::Failed {
            end.status = EndStatus::Suspended;
        }
        // Every model call of the run is recorded with its usage and cost: a run that
        // failed or was stopped mid-step (or whose last step failed after its model call)
        // still reports what it spent, each call at the price recorded with it.
        let spent = ledger.spent_usage();
        let cost = if spent.total_tokens >= end.usage.input_tokens + end.usage.output_tokens {
            end.usage = spent;
            ledger.spent_cost()
        } else {
            // Tokens the run's recorded calls do not account for have no known price.
            None
        };
        let _ = store.flush().await;
        let now = now_string();
        record.steps = end.steps;
        record.usage = Usage {
            input_tokens: end.usage.input_tokens,
            output_tokens: end.usage.output_tokens,
            cost,
        };
        record.updated_at = now.clone();
        let run_end = match end.status {
            EndStatus::Completed => {
                record.status = RunStatus::Completed;
                record.output = Some(end.message.clone());
                record.ended_at = Some(now);
                RunEnd::Completed {
                    output: end.message.clone(),
                }
            }
            EndStatus::Failed => {
                record.status = RunStatus::Failed;
                record.error = Some(end.message.clone());
                record.ended_at = Some(now);
                RunEnd::Failed {
                    error: end.message.clone(),
                }
            }
            EndStatus::Interrupted => {
                record.status = RunStatus::Interrupted;
                RunEnd::Interrupted
            }
            EndStatus::Suspended => {
                record.status = RunStatus::Suspended;
                if awaiting.iter().all(|d| d.kind == DecisionKind::Uncertain) {
                    // A call ended uncertain mid-run (its tool said so): the same stop as a
                    // resume on an uncertain call.
                    let calls = store.tool_calls(&run_id).await?;
                    let calls = calls
                        .into_iter()
                        .filter(|c| awaiting.iter().any(|d| d.position == c.position))
                        .collect();
                    RunEnd::NeedsApproval {
                        calls,
                        decisions: awaiting,
                    }
                } else {
                    RunEnd::AwaitingDecision {
                        decisions: awaiting,
                    }
                }
            }
        };
        let outcome = RunOutcome {
            run_id,
            end: run_end,
            steps: end.steps,
            steps_now: end.steps.saturating_sub(end.steps_before),
            usage: record.usage,
        };
        // The last event of this process, before the record says the run stopped (a
        // follower that sees the status has the whole log).
        ledger.emitter().flush_pending().await;
        ledger.emit(outcome.end_event()).await;
        store.put_run(&record).await?;
        record_root_agent(&store, &record, spec.role()).await?;
        store.flush().await?;
        run_span.end(&outcome.end);
        Ok(outcome)
    }
}

/// Records the root agent of `run` in the lineage as the run stands: completed or failed
/// (with `ended_at`) once the run ended, active before; its usage is the run's less what its
/// child runs' nodes hold (each node holds its own, so the rolled-up usage of the root is
/// the run's).
///
/// # Errors
/// Storage failures.
pub async fn record_root_agent(
    store: &Store,
    run: &RunRecord,
    role: &str,
) -> Result<(), StoreError> {
    let children = store
        .lineage(&run.run_id)
        .await?
        .iter()
        .filter(|node| node.parent_agent_id.is_some())
        .fold(Usage::default(), |total, node| total.plus(node.usage));
    let own = Usage {
        input_tokens: run.usage.input_tokens.saturating_sub(children.input_tokens),
        output_tokens: run
            .usage
            .output_tokens
            .saturating_sub(children.output_tokens),
        cost: run
            .usage
            .cost
            .zip(children.cost)
            .map(|(run, children)| (run - children).max(0.0)),
    };
    store
        .put_agent(&AgentNode {
            id: run.agent_id.clone(),
            run_id: run.run_id.clone(),
            parent_agent_id: None,
            role: role.to_owned(),
            status: match run.status {
                RunStatus::Completed => AgentStatus::Completed,
                RunStatus::Failed => AgentStatus::Failed,
                RunStatus::Running | RunStatus::Interrupted | RunStatus::Suspended => {
                    AgentStatus::Active
                }
            },
            depth: 0,
            created_at: run.started_at.clone(),
            completed_at: run.ended_at.clone(),
            usage: own,
        })
        .await
}

/// The model providers a runtime resolves model references with: the built-ins plus
/// `scripted-turns` (see `weft_store::testing`).
pub fn default_providers() -> ProviderRegistry {
    let mut registry = ProviderRegistry::with_builtins();
    registry.register(
        weft_store::testing::SCRIPTED_TURNS,
        weft_store::testing::scripted_turns_provider,
    );
    registry
}
