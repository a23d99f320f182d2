//! Durable tool execution (runtime spec §5.9): [`DurableTool`] wraps any [`Tool`] so that,
//! keyed by the call's **position** in the run — the recorded response that asked for it
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
use std::time::Instant;

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio_util::sync::CancellationToken;
use weft_provider::{
    AssistantMessage, TokenUsage, Tool, ToolCall, ToolContext, ToolError, ToolExecution,
};
use weft_store::{
    EventLog as _, NewEvent, RecordedResponse, Store, ToolCallRecord, ToolCallStatus,
    ToolLedger as _, event_type, now_string,
};

use weft_provider::pricing::Prices;

use crate::budget::Budget;
use crate::cost::Spent;
use crate::spec::hex;

#[derive(Debug, Default)]
struct StepCalls {
    pending: Vec<ToolCall>,
    completed: Vec<ToolExecution>,
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
    recorded: Mutex<HashMap<String, ToolCallRecord>>,
    responses: HashMap<String, RecordedResponse>,
    approved_reruns: HashSet<String>,
    turn: AtomicU64,
    step: Mutex<StepCalls>,
    /// The latest rounds, newest last (a few are kept: event consumers may lag a step).
    rounds: Mutex<std::collections::VecDeque<Round>>,
    failure: Mutex<Option<String>>,
    stop: CancellationToken,
    budget: Budget,
    prices: Prices,
    spent: Mutex<Spent>,
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
    /// ones are replayed, by position), `responses` the recorded model responses, and
    /// `approved_reruns` the positions of uncertain calls the user allowed to run again.
    pub fn new(
        store: Store,
        run_id: impl Into<String>,
        thread_id: impl Into<String>,
        agent_id: impl Into<String>,
        recorded: impl IntoIterator<Item = ToolCallRecord>,
        responses: impl IntoIterator<Item = RecordedResponse>,
        approved_reruns: HashSet<String>,
    ) -> Self {
        RunContext {
            store,
            run_id: run_id.into(),
            thread_id: thread_id.into(),
            agent_id: agent_id.into(),
            recorded: Mutex::new(
                recorded
                    .into_iter()
                    .filter(|r| r.status == ToolCallStatus::Completed)
                    .map(|r| (r.position.clone(), r))
                    .collect(),
            ),
            responses: responses
                .into_iter()
                .map(|r| (r.position.clone(), r))
                .collect(),
            approved_reruns,
            turn: AtomicU64::new(0),
            step: Mutex::new(StepCalls::default()),
            rounds: Mutex::new(std::collections::VecDeque::new()),
            failure: Mutex::new(None),
            stop: CancellationToken::new(),
            budget: Budget::default(),
            prices: Prices::builtin(),
            spent: Mutex::new(Spent::default()),
        }
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
        self.spent = Mutex::new(spent);
        self
    }

    /// Checks the budget before a call of a model whose price is known (`priced`) or not:
    /// a reached limit fails the run, and so does a cost limit the call would make
    /// unenforceable.
    pub(crate) fn check_budget(&self, priced: bool) -> Result<(), String> {
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
    fn position_of(&self, id: &str) -> String {
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

    /// Whether the user approved re-running the call at `position`.
    pub fn rerun_approved(&self, position: &str) -> bool {
        self.approved_reruns.contains(position)
    }

    fn recorded(&self, position: &str) -> Option<ToolCallRecord> {
        self.recorded
            .lock()
            .ok()
            .and_then(|r| r.get(position).cloned())
    }

    /// Appends an event of this run; failures are logged (events never fail a run).
    pub async fn event(&self, kind: &str, tool_call_id: Option<&str>, payload: Value) {
        let event = NewEvent {
            event_type: kind.to_owned(),
            run_id: self.run_id.clone(),
            thread_id: self.thread_id.clone(),
            agent_id: self.agent_id.clone(),
            turn: self.turn(),
            tool_call_id: tool_call_id.map(str::to_owned),
            payload,
        };
        if let Err(error) = self.store.append_event(event).await {
            tracing::warn!(%error, kind, "event append failed");
        }
    }

    fn snapshot(&self, update: impl FnOnce(&mut StepCalls)) -> (Vec<ToolCall>, Vec<ToolExecution>) {
        match self.step.lock() {
            Ok(mut step) => {
                update(&mut step);
                (step.pending.clone(), step.completed.clone())
            }
            Err(_) => (Vec::new(), Vec::new()),
        }
    }
}

/// Wraps tools for durable execution.
#[derive(Debug, Clone, Copy)]
pub struct DurableTool;

impl DurableTool {
    /// `tool`, made durable within `run`. Name, schema, flags and approval are kept.
    pub fn wrap(tool: Tool, run: Arc<RunContext>) -> Tool {
        let inner = tool.clone();
        let mut wrapped = Tool::new(
            tool.name.clone(),
            tool.description.clone(),
            tool.parameters.clone(),
            move |arguments: Value, context: ToolContext| {
                let inner = inner.clone();
                let run = run.clone();
                async move { durable_call(&inner, &run, arguments, context).await }
            },
        )
        .with_side_effects(tool.side_effects)
        .with_idempotent(tool.idempotent)
        .with_sequential(tool.sequential)
        .with_depends_on(tool.depends_on.clone());
        if let Some(metadata) = tool.metadata.clone() {
            wrapped = wrapped.with_metadata(metadata);
        }
        if tool.requires_approval() {
            let gate = tool.clone();
            wrapped = wrapped.with_approval(move |arguments: &Value| {
                let gate = gate.clone();
                let arguments = arguments.clone();
                async move { gate.approve(&arguments).await }
            });
        }
        wrapped
    }
}

/// SHA-256 (hex) of a call's arguments as JSON.
pub(crate) fn args_hash(arguments: &Value) -> String {
    hex(&Sha256::digest(arguments.to_string().as_bytes()))
}

fn replay(record: &ToolCallRecord) -> Result<Value, ToolError> {
    let result = record.result.clone().unwrap_or(Value::Null);
    if record.is_error {
        Err(ToolError::new(match result {
            Value::String(s) => s,
            other => other.to_string(),
        }))
    } else {
        Ok(result)
    }
}

async fn durable_call(
    tool: &Tool,
    run: &RunContext,
    arguments: Value,
    context: ToolContext,
) -> Result<Value, ToolError> {
    let id = context.tool_call_id.clone();
    let position = run.position_of(&id);
    let hash = args_hash(&arguments);
    if let Some(record) = run.recorded(&position) {
        if record.tool_name != tool.name
            || (!record.args_hash.is_empty() && record.args_hash != hash)
        {
            let message = format!(
                "the run diverged from its record at call {position}: the record holds {} with other arguments, \
                 now {} was called; nothing was replayed or run",
                record.tool_name, tool.name
            );
            run.fail(message.clone());
            return Err(ToolError::new(message));
        }
        run.event(
            event_type::TOOL_CALL_REPLAYED,
            Some(&id),
            json!({"tool": tool.name, "isError": record.is_error, "position": position}),
        )
        .await;
        return replay(&record);
    }
    let call = ToolCall::new(id.clone(), tool.name.clone(), arguments.clone());
    let (pending, completed) = run.snapshot(|s| s.pending.push(call));
    let record = ToolCallRecord {
        run_id: run.run_id.clone(),
        position: position.clone(),
        tool_call_id: id.clone(),
        args_hash: hash,
        thread_id: run.thread_id.clone(),
        tool_name: tool.name.clone(),
        arguments: arguments.clone(),
        status: ToolCallStatus::Pending,
        result: None,
        is_error: false,
        attempts: 1,
        side_effects: tool.side_effects,
        idempotent: tool.idempotent,
        turn: run.turn(),
        started_at: now_string(),
        ended_at: None,
    };
    // Sync durability: this commit happens before the side effect.
    if let Err(error) = run.store.tool_call_started(&record).await {
        if tool.side_effects {
            return Err(ToolError::transient(format!(
                "the call could not be recorded before running, so it was not run: {error}"
            )));
        }
        tracing::warn!(%error, "recording a pending tool call failed");
    }
    let _ = run
        .store
        .save_tool_checkpoint(&run.thread_id, &pending, &completed)
        .await;
    run.event(
        event_type::TOOL_CALL_START,
        Some(&id),
        json!({"tool": tool.name, "arguments": arguments}),
    )
    .await;
    let started = Instant::now();
    let signal = context.signal.clone();
    let outcome = tool.run(arguments.clone(), context).await;
    if outcome.is_err() && signal.is_cancelled() {
        // Interrupted: whether the effect happened is unknown. The call stays pending
        // (uncertain) — its cancellation error is not its result.
        return outcome;
    }
    let (result, is_error) = match &outcome {
        Ok(v) => (v.clone(), false),
        Err(e) => (Value::String(e.message.clone()), true),
    };
    // Sync durability: committed before the next model call.
    if let Err(error) = run
        .store
        .tool_call_finished(&run.run_id, &position, &result, is_error)
        .await
    {
        tracing::warn!(%error, "recording a tool result failed");
    }
    let execution = ToolExecution {
        tool_name: tool.name.clone(),
        tool_call_id: id.clone(),
        arguments,
        result: result.clone(),
        is_error,
        duration: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        approved: None,
    };
    let (pending, completed) = run.snapshot(|s| {
        s.pending.retain(|c| c.tool_call_id != id);
        s.completed.push(execution);
    });
    if let Err(error) = run
        .store
        .save_tool_checkpoint(&run.thread_id, &pending, &completed)
        .await
    {
        tracing::warn!(%error, "tool-result checkpoint failed");
    }
    // A large result is stored once, in the ledger; the event refers to it.
    let size = serde_json::to_string(&result).map_or(0, |text| text.len());
    let payload = if size > INLINE_RESULT_BYTES {
        json!({"tool": tool.name, "isError": is_error, "resultBytes": size,
               "resultRef": {"toolCall": position}})
    } else {
        json!({"tool": tool.name, "isError": is_error, "result": result})
    };
    run.event(event_type::TOOL_CALL_END, Some(&id), payload)
        .await;
    outcome
}

/// Tool results larger than this (as JSON) are not copied into the event log: the
/// `tool_call_end` event refers to the ledger's record (`resultRef.toolCall`, the call's
/// position) instead.
pub const INLINE_RESULT_BYTES: usize = 16 * 1024;
