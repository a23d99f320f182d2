//! Durable tool execution (runtime spec §5.9): what the replay and record stages of the tool
//! pipeline ([`crate::pipeline`]) share within one run. Keyed by the call's **position** in the run — the recorded response that asked for it
//! and its index there (`SCOPE@MESSAGES#INDEX`), checked against the tool name and a hash of
//! the arguments, because call ids alone repeat (`call_0` of id-less models) or change
//! between answers (every real provider):
//!
//! 1. a call whose result is recorded is **not run again**: the recorded result is returned
//!    (a `tool_call_replayed` event says so);
//! 2. otherwise the call is recorded as *pending* before it runs — in `sync` durability the
//!    record is committed first, so a crash leaves evidence of every call that may have had
//!    its side effect;
//! 3. its result is recorded after it runs (committed before the next model call in `sync`),
//!    followed by a tool-result checkpoint and `tool_call_start` / `tool_call_end` events.
//!
//! A pending record without a result after a crash is an *uncertain* call; `run.rs` decides
//! whether it may run again (idempotent tool, or explicit approval). A call that was
//! cancelled or interrupted stays pending (uncertain): its error is never recorded as its
//! result, so a resume cannot replay "the command was cancelled" for a command whose effect
//! may have happened.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tokio_util::sync::CancellationToken;
use weft_provider::{
    AssistantMessage, StreamEventType, StreamTap, TokenUsage, ToolCall, ToolExecution,
};
use weft_store::{
    DecisionRecord, DecisionStatus, RecordedResponse, Store, ToolCallRecord, ToolCallStatus,
};

use crate::approval::Approver;
use crate::event::{AgentPath, Emitter, EventKind, RunEvent, Side};
use weft_provider::pricing::Prices;

use crate::budget::Budget;
use crate::cost::Spent;
use crate::spec::hex;

/// The calls of the step in progress, for the tool-result checkpoint.
#[derive(Debug, Default)]
pub(crate) struct StepCalls {
    pub(crate) pending: Vec<ToolCall>,
    pub(crate) completed: Vec<ToolExecution>,
}

/// How many recent rounds the ledger remembers.
const KEPT_ROUNDS: usize = 16;

/// The calls of the response being acted on: where it was recorded, and which of its calls
/// have been matched to a running tool.
#[derive(Debug, Default)]
struct Round {
    position: String,
    calls: Vec<(String, String, String)>,
    taken: Vec<bool>,
}

/// What every durable tool of one run shares: the store, the ids, the recorded results and
/// responses.
pub struct RunContext {
    store: Store,
    run_id: String,
    thread_id: String,
    agent_id: String,
    recorded: Arc<Mutex<HashMap<String, ToolCallRecord>>>,
    responses: Arc<HashMap<String, RecordedResponse>>,
    turn: AtomicU64,
    step: Mutex<StepCalls>,
    /// The latest rounds, newest last (a few are kept: event consumers may lag a step).
    rounds: Mutex<std::collections::VecDeque<Round>>,
    failure: Arc<Mutex<Option<String>>>,
    stop: CancellationToken,
    budget: Budget,
    prices: Prices,
    spent: Arc<Mutex<Spent>>,
    /// Decisions of earlier processes (approved / denied), by call position.
    decisions: Arc<Mutex<HashMap<String, DecisionRecord>>>,
    /// Decisions raised in this process that nobody could answer: the run suspends.
    raised: Arc<Mutex<Vec<DecisionRecord>>>,
    /// Positions of calls whose child run waits for a decision: they stay pending.
    deferred: Arc<Mutex<HashSet<String>>>,
    approver: Option<Arc<dyn Approver>>,
    events: Emitter,
    agent: AgentPath,
    /// The run's `invoke_agent` span: parent of its `chat` and `execute_tool` spans.
    trace: weft_otel::SpanParent,
    /// The thread's queue: whether something may be queued for this run to take (set when
    /// the run starts and when this process queues a message on its thread), and the ids of
    /// the queued messages the current step took (dequeued once the step is checkpointed).
    inbox: Arc<std::sync::atomic::AtomicBool>,
    taken: Mutex<Vec<String>>,
    /// Queued tool calls (`queueTool()`) the current step took: its next model call is
    /// answered with them instead of asking the model (see [`RunContext::queued_calls`]).
    queued_tools: Mutex<Vec<weft_provider::ToolCall>>,
    /// The run tree's message bus (shared by every child run of the run).
    bus: Arc<crate::bus::RuntimeMessageBus>,
}

impl fmt::Debug for RunContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunContext")
            .field("run_id", &self.run_id)
            .field("thread_id", &self.thread_id)
            .finish_non_exhaustive()
    }
}

impl RunContext {
    /// A context for `run_id`; `recorded` holds the calls of earlier attempts (completed
    /// ones are replayed, by position), `responses` the recorded model responses.
    pub fn new(
        store: Store,
        run_id: impl Into<String>,
        thread_id: impl Into<String>,
        agent_id: impl Into<String>,
        recorded: impl IntoIterator<Item = ToolCallRecord>,
        responses: impl IntoIterator<Item = RecordedResponse>,
    ) -> Self {
        let (run_id, thread_id, agent_id) = (run_id.into(), thread_id.into(), agent_id.into());
        RunContext {
            events: Emitter::new(store.clone(), &run_id, &thread_id, Emitter::channel()),
            agent: AgentPath::root(&agent_id),
            store,
            run_id,
            thread_id,
            agent_id,
            recorded: Arc::new(Mutex::new(
                recorded
                    .into_iter()
                    .filter(|r| r.status == ToolCallStatus::Completed)
                    .map(|r| (r.position.clone(), r))
                    .collect(),
            )),
            responses: Arc::new(
                responses
                    .into_iter()
                    .map(|r| (r.position.clone(), r))
                    .collect(),
            ),
            turn: AtomicU64::new(0),
            step: Mutex::new(StepCalls::default()),
            rounds: Mutex::new(std::collections::VecDeque::new()),
            failure: Arc::new(Mutex::new(None)),
            stop: CancellationToken::new(),
            budget: Budget::default(),
            prices: Prices::builtin(),
            spent: Arc::new(Mutex::new(Spent::default())),
            decisions: Arc::new(Mutex::new(HashMap::new())),
            raised: Arc::new(Mutex::new(Vec::new())),
            deferred: Arc::new(Mutex::new(HashSet::new())),
            approver: None,
            trace: weft_otel::SpanParent::none(),
            inbox: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            taken: Mutex::new(Vec::new()),
            queued_tools: Mutex::new(Vec::new()),
            bus: Arc::new(crate::bus::RuntimeMessageBus::new()),
        }
    }

    /// This context taking its thread's queue when `inbox` is set (the flag the runtime sets
    /// when it queues a message on the run's thread).
    #[must_use]
    pub fn with_inbox(mut self, inbox: Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.inbox = inbox;
        self
    }

    /// Tells this context that something was queued on its thread (by this process): its
    /// next model step reads the queue.
    pub fn wake_inbox(&self) {
        self.inbox.store(true, std::sync::atomic::Ordering::Release);
    }

    /// The messages queued on the run's thread that the next model step takes (each once:
    /// one the conversation's last messages already hold — a step checkpointed just before a
    /// crash — is skipped and dequeued). Empty, without reading the store, unless something
    /// may have been queued.
    ///
    /// Queued tool calls (`queueTool()`) are taken in queue order too: the messages before
    /// the first of them, then the calls queued one after the other, which become the
    /// step's response ([`RunContext::queued_calls`]: they run through the tool pipeline
    /// like calls of the model, and the model sees them and their results at its next call).
    /// What was queued after them is taken by the next step.
    pub(crate) async fn take_queued(
        &self,
        state: &weft_agent::AgentState,
    ) -> Vec<weft_provider::Message> {
        use std::sync::atomic::Ordering;
        use weft_store::ThreadQueue as _;
        if !self.inbox.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        let queued = match self.store.queued(&self.thread_id).await {
            Ok(queued) => queued,
            Err(error) => {
                // Taken at a later step instead.
                self.inbox.store(true, Ordering::Release);
                tracing::warn!(%error, "reading the thread's queue failed");
                return Vec::new();
            }
        };
        let mut taken = self
            .taken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut calls = self
            .queued_tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut messages = Vec::new();
        for message in queued {
            if holds_queued(state, &message.id) {
                taken.push(message.id.clone());
                continue;
            }
            match message.tool {
                Some(tool) => {
                    taken.push(message.id.clone());
                    calls.push(weft_provider::ToolCall::new(
                        message.id,
                        tool.name,
                        tool.arguments,
                    ));
                }
                None if !calls.is_empty() => {
                    // After the step's queued calls: the next step takes it.
                    self.inbox.store(true, Ordering::Release);
                    break;
                }
                None => {
                    taken.push(message.id.clone());
                    messages.push(queued_message(message));
                }
            }
        }
        messages
    }

    /// Whether something waits in the run's thread's queue (a run for the queue on a thread
    /// whose conversation ended with an answer has a step to take). A failed read says no.
    pub(crate) async fn queue_waiting(&self) -> bool {
        use weft_store::ThreadQueue as _;
        self.store
            .queued(&self.thread_id)
            .await
            .is_ok_and(|queued| !queued.is_empty())
    }

    /// The queued tool calls the current step took (`queueTool()`), taken out: the
    /// response its model call gets instead of asking the model. Empty when none.
    pub(crate) fn queued_calls(&self) -> Vec<weft_provider::ToolCall> {
        std::mem::take(
            &mut *self
                .queued_tools
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Takes the queued messages of the step just checkpointed out of the queue. Queued
    /// calls the step took but did not answer with (its model call was a recorded one,
    /// replayed) stay queued, for the next step.
    pub(crate) async fn dequeue_taken(&self) {
        use weft_store::ThreadQueue as _;
        let unserved = self.queued_calls();
        let mut taken = std::mem::take(
            &mut *self
                .taken
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if !unserved.is_empty() {
            taken.retain(|id| !unserved.iter().any(|c| &c.tool_call_id == id));
            self.wake_inbox();
        }
        if taken.is_empty() {
            return;
        }
        if let Err(error) = self.store.dequeue(&self.thread_id, &taken).await {
            tracing::warn!(%error, "taking messages out of the thread's queue failed");
        }
    }

    /// This context with its events published on `live` (the channel the run's handle
    /// subscribed to).
    #[must_use]
    pub fn with_live_events(mut self, live: tokio::sync::broadcast::Sender<Arc<RunEvent>>) -> Self {
        self.events = Emitter::new(self.store.clone(), &self.run_id, &self.thread_id, live);
        self
    }

    /// This context with its events attributed to the agent `name` (the run's root agent:
    /// a Standard Agents agent's name, an agent program's role).
    #[must_use]
    pub fn with_agent_name(mut self, name: &str) -> Self {
        self.agent = AgentPath::root(name);
        self
    }

    /// A child run's view of this run (a subagent, see [`crate::child`]): its own thread
    /// (checkpoints, positions of its responses and calls), agent path (`parent/name`),
    /// step counter and span parent, sharing everything that is the run's — the store, the
    /// run id, the recorded responses and calls (a resume replays the child's too), the
    /// budget and what was spent (the child's model calls count as the run's), the
    /// decisions and approver, the failure and stop token, the event emitter.
    pub fn child(
        &self,
        name: &str,
        thread_id: impl Into<String>,
        agent_id: impl Into<String>,
        trace: weft_otel::SpanParent,
    ) -> RunContext {
        RunContext {
            store: self.store.clone(),
            run_id: self.run_id.clone(),
            thread_id: thread_id.into(),
            agent_id: agent_id.into(),
            recorded: self.recorded.clone(),
            responses: self.responses.clone(),
            turn: AtomicU64::new(0),
            step: Mutex::new(StepCalls::default()),
            rounds: Mutex::new(std::collections::VecDeque::new()),
            failure: self.failure.clone(),
            stop: self.stop.clone(),
            budget: self.budget,
            prices: self.prices.clone(),
            spent: self.spent.clone(),
            decisions: self.decisions.clone(),
            raised: self.raised.clone(),
            deferred: self.deferred.clone(),
            approver: self.approver.clone(),
            events: self.events.clone(),
            agent: self.agent.child(name),
            trace,
            // A child's thread has a queue of its own (nothing queues on it yet): the user's
            // messages are the root's to take.
            inbox: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            taken: Mutex::new(Vec::new()),
            queued_tools: Mutex::new(Vec::new()),
            bus: self.bus.clone(),
        }
    }

    /// The run tree's message bus ([`crate::bus`]): the root run's, shared by its children.
    pub fn bus(&self) -> &Arc<crate::bus::RuntimeMessageBus> {
        &self.bus
    }

    /// The run's event emitter.
    pub fn emitter(&self) -> &Emitter {
        &self.events
    }

    /// The run's root agent.
    pub fn agent(&self) -> &AgentPath {
        &self.agent
    }

    /// This context with the decisions people took on earlier processes' calls (only
    /// approved and denied ones count) and who to ask for new ones (`None`: nobody; an
    /// approval the policy asks for suspends the run).
    #[must_use]
    pub fn with_decisions(
        mut self,
        decisions: impl IntoIterator<Item = DecisionRecord>,
        approver: Option<Arc<dyn Approver>>,
    ) -> Self {
        self.decisions = Arc::new(Mutex::new(
            decisions
                .into_iter()
                .filter(|d| matches!(d.status, DecisionStatus::Approved | DecisionStatus::Denied))
                .map(|d| (d.position.clone(), d))
                .collect(),
        ));
        self.approver = approver;
        self
    }

    /// The decision taken on the call at `position` (approved or denied), taken out: a
    /// decision is single-use.
    pub(crate) fn take_decision(&self, position: &str) -> Option<DecisionRecord> {
        self.decisions.lock().ok()?.remove(position)
    }

    /// Who answers approvals now, if anyone.
    pub(crate) fn approver(&self) -> Option<&Arc<dyn Approver>> {
        self.approver.as_ref()
    }

    /// Notes a decision nobody could take now: the run suspends after the step.
    pub(crate) fn raise(&self, decision: DecisionRecord) {
        if let Ok(mut raised) = self.raised.lock() {
            raised.push(decision);
        }
    }

    /// The decisions raised in this process and not answered: when there are any, the step
    /// that raised them must not be committed, and the run suspends.
    pub fn suspended(&self) -> Vec<DecisionRecord> {
        self.raised.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Marks the call at `position` as waiting on a decision of a child run it started
    /// ([`crate::child::ChildRun::defer`]): whatever its handler returns, the record stage
    /// leaves it pending, and a resume runs it again (the child goes on).
    pub fn defer_call(&self, position: &str) {
        if let Ok(mut deferred) = self.deferred.lock() {
            deferred.insert(position.to_owned());
        }
    }

    /// Whether the call at `position` was deferred ([`RunContext::defer_call`]), taken out.
    pub(crate) fn take_deferred(&self, position: &str) -> bool {
        self.deferred
            .lock()
            .is_ok_and(|mut deferred| deferred.remove(position))
    }

    /// Whether the run must suspend (see [`RunContext::suspended`]).
    pub fn is_suspended(&self) -> bool {
        self.raised.lock().is_ok_and(|r| !r.is_empty())
    }

    /// Makes `trace` the parent of the run's `chat` and `execute_tool` spans
    /// ([`crate::trace`]).
    #[must_use]
    pub fn with_trace(mut self, trace: weft_otel::SpanParent) -> Self {
        self.trace = trace;
        self
    }

    /// The parent of the run's spans ([`weft_otel::SpanParent::none`] when not traced).
    pub fn trace(&self) -> &weft_otel::SpanParent {
        &self.trace
    }

    /// This context with `budget`, new model calls priced with `prices`. What the run spent
    /// before this process is exactly its recorded responses: one per model call, with its
    /// usage and the cost recorded with it at the price of its day (whatever the program:
    /// both sides of a session, a run attached to an older thread).
    #[must_use]
    pub fn with_budget(mut self, budget: Budget, prices: Prices) -> Self {
        let mut spent = Spent::default();
        for response in self.responses.values() {
            let (usage, cost) = crate::cost::recorded_spend(&response.response);
            spent.add(&usage, cost);
        }
        self.budget = budget;
        self.prices = prices;
        self.spent = Arc::new(Mutex::new(spent));
        self
    }

    /// Checks, before a new call of a model whose price is known (`priced`) or not, that
    /// the run may make it: not when it must already end failed (it diverged from its
    /// record, it reached a limit) — the stop that follows a failure is not waited for —
    /// and not past its budget: a reached limit fails the run, and so does a cost limit the
    /// call would make unenforceable.
    pub(crate) fn check_budget(&self, priced: bool) -> Result<(), String> {
        if let Some(reason) = self.failure() {
            return Err(reason);
        }
        let Ok(spent) = self.spent.lock().map(|s| *s) else {
            return Ok(());
        };
        let tokens = spent.input_tokens + spent.output_tokens;
        let reached = self.budget.exceeded(spent.steps, tokens).or_else(|| {
            let max = self.budget.max_cost?;
            let unknown = |what: &str| {
                format!(
                    "the run's cost budget of ${max} (maxCost) cannot be kept: {what} \
                     (give prices with --pricing FILE or the project's pricing key)"
                )
            };
            match spent.cost {
                _ if !priced => Some(unknown("a model without a price was to be called")),
                None => Some(unknown("an earlier model call of the run has no price")),
                Some(cost) => (cost >= max).then(|| {
                    format!("the run reached its budget of ${max} (maxCost): ${cost:.4} spent")
                }),
            }
        });
        match reached {
            Some(reason) => {
                self.fail(reason.clone());
                Err(reason)
            }
            None => Ok(()),
        }
    }

    /// The tokens of every model call of the run so far (recorded responses, and this
    /// process's calls): what a failed or interrupted run reports too.
    pub fn spent_usage(&self) -> TokenUsage {
        let spent = self.spent.lock().map(|s| *s).unwrap_or_default();
        TokenUsage {
            input_tokens: spent.input_tokens,
            output_tokens: spent.output_tokens,
            total_tokens: spent.input_tokens + spent.output_tokens,
            cache_read_tokens: spent.cache_read_tokens,
            cache_write_tokens: spent.cache_write_tokens,
            cycles: None,
        }
    }

    /// What every model call of the run so far cost (in US dollars), each at the price
    /// recorded with it; `None` when a call had no price.
    pub fn spent_cost(&self) -> Option<f64> {
        self.spent.lock().ok().and_then(|s| s.cost)
    }

    /// The run's budget (its limits).
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// The number of model calls of the run so far.
    pub fn spent_calls(&self) -> u64 {
        self.spent.lock().map(|s| s.steps).unwrap_or(0)
    }

    /// The prices new model calls of the run are charged at.
    pub fn prices(&self) -> &Prices {
        &self.prices
    }

    /// Counts a new model call, its tokens and its cost (`None`: no price).
    pub(crate) fn spend(&self, usage: &TokenUsage, cost: Option<f64>) {
        if let Ok(mut spent) = self.spent.lock() {
            spent.add(usage, cost);
        }
    }

    /// The response recorded at `position` by an earlier process of this run.
    pub(crate) fn recorded_response(&self, position: &str) -> Option<&RecordedResponse> {
        self.responses.get(position)
    }

    /// Makes `message`'s calls the round the next tool calls belong to.
    pub(crate) fn begin_round(&self, position: &str, message: &AssistantMessage) {
        if let Ok(mut rounds) = self.rounds.lock() {
            if rounds.len() >= KEPT_ROUNDS {
                rounds.pop_front();
            }
            rounds.push_back(Round {
                position: position.to_owned(),
                calls: message
                    .tool_calls
                    .iter()
                    .map(|c| {
                        (
                            c.tool_call_id.clone(),
                            c.tool_name.clone(),
                            args_hash(&c.arguments),
                        )
                    })
                    .collect(),
                taken: vec![false; message.tool_calls.len()],
            });
        }
    }

    /// The position of the call `id` of the current round (the first not yet taken with
    /// that id), or a turn-and-id position when no response was recorded.
    pub(crate) fn position_of(&self, id: &str) -> String {
        if let Ok(mut rounds) = self.rounds.lock()
            && let Some(round) = rounds.back_mut()
            && let Some(i) = round
                .calls
                .iter()
                .zip(round.taken.iter())
                .position(|((call, _, _), taken)| call == id && !taken)
        {
            round.taken[i] = true;
            return format!("{}#{i}", round.position);
        }
        format!("turn{}:{id}", self.turn())
    }

    /// Whether call `id` of the current round was answered without reaching a durable tool
    /// (refused before its tool ran: unknown tool, bad arguments).
    pub fn refused(&self, id: &str) -> bool {
        self.rounds.lock().is_ok_and(|rounds| {
            rounds.iter().any(|round| {
                round
                    .calls
                    .iter()
                    .zip(round.taken.iter())
                    .any(|((call, _, _), taken)| call == id && !taken)
            })
        })
    }

    /// Stops the run as failed, for `reason` (a divergence from its record, a budget).
    pub fn fail(&self, reason: String) {
        if let Ok(mut failure) = self.failure.lock() {
            failure.get_or_insert(reason);
        }
        self.stop.cancel();
    }

    /// Why the run must end failed (it diverged from its record, it reached its budget).
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|d| d.clone())
    }

    /// Cancelled when the run must stop (a divergence, a budget).
    pub fn stop_token(&self) -> &CancellationToken {
        &self.stop
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The thread id.
    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    /// The agent id.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// The store (with the run's durability).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Sets the current turn (step) and starts a new set of step calls.
    pub fn begin_turn(&self, turn: u64) {
        self.turn.store(turn, Ordering::SeqCst);
        if let Ok(mut step) = self.step.lock() {
            *step = StepCalls::default();
        }
    }

    /// The current turn.
    pub fn turn(&self) -> u64 {
        self.turn.load(Ordering::SeqCst)
    }

    pub(crate) fn recorded(&self, position: &str) -> Option<ToolCallRecord> {
        self.recorded
            .lock()
            .ok()
            .and_then(|r| r.get(position).cloned())
    }

    /// Emits an event of the run's root agent at the current turn (failures are logged:
    /// events never fail a run).
    pub async fn emit(&self, kind: EventKind) {
        self.events.emit(&self.agent, self.turn(), None, kind).await;
    }

    /// A tap that logs the streamed text and reasoning of this run's model calls (of a
    /// `dual_ai` run's `side`) where they are produced: before the calls of the same step,
    /// which the same task runs next.
    pub fn stream_tap(self: &Arc<Self>, side: Option<Side>) -> StreamTap {
        let run = Arc::downgrade(self);
        StreamTap::new(move |event| {
            let kind = match (event.event_type, &event.delta.text) {
                (StreamEventType::TextDelta, Some(text)) => EventKind::TextDelta {
                    text: text.clone(),
                    side,
                },
                (StreamEventType::ReasoningDelta, Some(text)) => EventKind::ReasoningDelta {
                    text: text.clone(),
                    side,
                },
                _ => return,
            };
            if let Some(run) = run.upgrade() {
                run.events.push_delta(&run.agent, run.turn(), kind);
            }
        })
    }

    /// Emits an event about the tool call `tool_call_id`.
    pub async fn emit_call(&self, tool_call_id: &str, kind: EventKind) {
        self.events
            .emit(&self.agent, self.turn(), Some(tool_call_id), kind)
            .await;
    }

    pub(crate) fn snapshot(
        &self,
        update: impl FnOnce(&mut StepCalls),
    ) -> (Vec<ToolCall>, Vec<ToolExecution>) {
        match self.step.lock() {
            Ok(mut step) => {
                update(&mut step);
                (step.pending.clone(), step.completed.clone())
            }
            Err(_) => (Vec::new(), Vec::new()),
        }
    }
}

/// SHA-256 (hex) of a call's arguments as JSON.
pub(crate) fn args_hash(arguments: &Value) -> String {
    hex(&Sha256::digest(arguments.to_string().as_bytes()))
}

/// The metadata key that flags a *silent* user message: one the runtime queued for the
/// model (a child's result or failure, Standard Agents §F), not one the user typed.
/// User-facing views ([`crate::transcript::Transcript::to_ui_messages`]) do not show it as a user message.
pub const SILENT: &str = "silent";

/// The metadata key that flags an assistant message holding queued tool calls
/// (`queueTool()`): the calls a step took from the thread's queue, recorded as that step's
/// response, not an answer of the model. (The conversation-driven scripted test model does
/// not count it among its answers.)
pub const QUEUED: &str = weft_store::testing::QUEUED_CALLS_KEY;

/// `queued` as the user message a run takes into its conversation: its id kept (so a step
/// taken again recognises it), and a silent one ([`weft_store::QueuedMessage::silent`], a
/// child's result) flagged with metadata [`SILENT`] `true` — the model reads it, user-facing
/// views do not show it as the user's.
///
/// ```
/// let queued = weft_store::QueuedMessage {
///     id: "q-1".into(),
///     thread_id: "t".into(),
///     text: "Subagent (reference: u) has returned the following result:\n\nok".into(),
///     created_at: "2026-11-24T10:00:00Z".into(),
///     silent: true,
///     tool: None,
/// };
/// let message = weft_runtime::ledger::queued_message(queued);
/// assert_eq!(message.id(), "q-1");
/// assert!(weft_runtime::ledger::is_silent(&message));
/// ```
pub fn queued_message(queued: weft_store::QueuedMessage) -> weft_provider::Message {
    let metadata = queued.silent.then(|| {
        let mut metadata = weft_provider::Metadata::new();
        metadata.insert(SILENT.into(), Value::Bool(true));
        metadata
    });
    weft_provider::Message::User(weft_provider::UserMessage::with_options(
        vec![weft_provider::ContentBlock::text(queued.text)],
        weft_provider::MessageOptions {
            id: Some(queued.id),
            metadata,
        },
    ))
}

/// Whether `message` is a silent message (metadata [`SILENT`] `true`).
pub fn is_silent(message: &weft_provider::Message) -> bool {
    message
        .metadata()
        .and_then(|m| m.get(SILENT))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Whether the conversation's last messages hold the queue entry `id` (a message with its
/// id, or a call of the queued tool with it): a run took it and was checkpointed, and the
/// process died before taking it out of the queue.
pub(crate) fn holds_queued(state: &weft_agent::AgentState, id: &str) -> bool {
    state.messages().rev().take(QUEUE_LOOKBACK).any(|m| {
        m.id() == id
            || matches!(&*m, weft_provider::Message::Assistant(a)
                if a.tool_calls.iter().any(|c| c.tool_call_id == id))
    })
}

/// How many of a conversation's last messages are searched for a queued message it already
/// holds (the step that took it was checkpointed, the process died before dequeuing it).
const QUEUE_LOOKBACK: usize = 64;

/// Tool results larger than this (as JSON) are not copied into the event log: the
/// `tool_call_end` event refers to the ledger's record (`resultRef.toolCall`, the call's
/// position) instead.
pub const INLINE_RESULT_BYTES: usize = 16 * 1024;

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A context of run `run-1` (thread `thread-1`, agent `agent-1`) in a new SQLite store
    /// in `dir`, with nothing recorded.
    pub(crate) async fn context(dir: &std::path::Path) -> RunContext {
        let store = Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
            .await
            .unwrap();
        RunContext::new(store, "run-1", "thread-1", "agent-1", [], [])
    }

    #[tokio::test]
    async fn a_run_and_its_children_share_one_bus() {
        let dir = tempfile::tempdir().unwrap();
        let run = context(dir.path()).await;
        let child = run.child(
            "coder",
            "thread-2",
            "agent-1/coder",
            weft_otel::SpanParent::none(),
        );
        // What the child publishes reaches a subscriber of the run's bus: one bus per tree.
        let mut seen = run.bus().subscribe("notes");
        let note = crate::bus::BusMessage::Note {
            body: serde_json::json!("hi"),
        };
        assert_eq!(child.bus().publish("notes", "agent-1/coder", note), 1);
        assert_eq!(
            seen.try_recv().map(|e| e.from),
            Some("agent-1/coder".into())
        );
        assert!(Arc::ptr_eq(run.bus(), run.bus()));
    }

    /// What routing sees of the budget: each limit with what is left of it, after every
    /// call and token spent (input and output).
    #[tokio::test]
    async fn what_is_left_of_the_budget_counts_every_call_and_token_spent() {
        use crate::profile::routing::Remaining;
        let dir = tempfile::tempdir().unwrap();
        let budget = Budget {
            max_steps: Some(10),
            max_total_tokens: Some(100),
            max_cost: Some(1.0),
            ..Budget::default()
        };
        let run = context(dir.path())
            .await
            .with_budget(budget, Prices::builtin());
        assert_eq!(run.budget(), budget);
        let call = TokenUsage {
            input_tokens: 10,
            output_tokens: 5,
            ..TokenUsage::default()
        };
        run.spend(&call, Some(0.25));
        run.spend(&call, Some(0.25));
        assert_eq!(run.spent_calls(), 2);
        assert_eq!(
            Remaining::of(&run),
            Remaining {
                tokens: Some((70, 100)),
                cost: Some((0.5, 1.0)),
                steps: Some((8, 10)),
            }
        );
    }

    /// The stream tap logs a model call's streamed text and reasoning (with the side) at
    /// the run's current turn, and nothing else of the stream.
    #[tokio::test]
    async fn the_stream_tap_logs_streamed_text_and_reasoning_only() {
        use weft_provider::stream::{EventDelta, StreamEvent, StreamEventType};
        use weft_store::EventLog as _;
        let dir = tempfile::tempdir().unwrap();
        let run = Arc::new(context(dir.path()).await);
        run.begin_turn(3);
        let tap = run.stream_tap(Some(Side::B));
        for (event_type, text) in [
            (StreamEventType::TextDelta, "Hello"),
            (StreamEventType::ReasoningDelta, "thinking"),
            (StreamEventType::ToolCallDelta, "{\"a\""),
        ] {
            tap.see(&StreamEvent {
                event_type,
                index: 0,
                delta: EventDelta {
                    text: Some(text.to_owned()),
                    ..EventDelta::default()
                },
            });
        }
        run.events.flush_pending().await;
        run.store().flush().await.unwrap();
        let logged: Vec<(String, u64, Value)> = run
            .store()
            .events(&weft_store::EventQuery {
                run_id: Some("run-1".into()),
                ..weft_store::EventQuery::default()
            })
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.event_type, e.turn, e.payload))
            .collect();
        assert_eq!(
            logged,
            [
                (
                    "text_delta".to_owned(),
                    3,
                    serde_json::json!({"text": "Hello", "side": "sideB"})
                ),
                (
                    "reasoning_delta".to_owned(),
                    3,
                    serde_json::json!({"text": "thinking", "side": "sideB"})
                ),
            ]
        );
    }

    #[tokio::test]
    async fn a_run_context_shows_its_run_and_thread() {
        let dir = tempfile::tempdir().unwrap();
        let run = context(dir.path()).await;
        let shown = format!("{run:?}");
        assert_eq!(
            shown,
            "RunContext { run_id: \"run-1\", thread_id: \"thread-1\", .. }"
        );
    }
}
