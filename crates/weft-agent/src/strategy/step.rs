//! The step primitive (RUNTIME.md §2): [`Steps`] drives the steps of one execution, and every
//! loop is built on it — the built-in strategies (`loop`, `react`, `plan`), the runtime's
//! durable loop and the Standard Agents side turn. A step owns its events (`step_start`,
//! `step_end`, the provider's stream when streaming), sub-agent traces, the checkpoint after it
//! and the conversation shared with the provider between model calls (no step copies the
//! history).
//!
//! `Steps` holds the *committed* state (the last step-end state, or the input state) and the
//! *working* state of the step in progress. Model calls of a step see the committed history
//! plus the step's own messages; the step's messages become part of the state only at
//! [`Steps::end_step`], in one derivation. A failure, an abort or a suspension (a tool call
//! waiting for a person's decision) therefore never leaves a half-applied step anywhere: the
//! error carries the committed state, and a resumed run takes the step again from its recorded
//! model response.

use std::sync::Arc;

use async_trait::async_trait;
use futures_util::StreamExt as _;
use serde_json::json;
use weft_provider::{
    ErrorCode, InferenceInput, LlmInstance, Message, TokenUsage, ToolResult, Turn, UppError,
};

use super::ExecutionContext;
use crate::agent::GenerateResult;
use crate::error::AgentError;
use crate::state::AgentState;
use crate::stream::{AgentStreamEvent, UapEventType};

/// What a driver of runs hears at step boundaries (the runtime logs them in the run's
/// event log), and whether the step in progress must be given up because a tool call waits
/// for a person's decision.
#[async_trait]
pub trait StepObserver: Send + Sync {
    /// A step begins (after `with_step` and `on_step_start`).
    async fn step_started(&self, step: u64, state: &AgentState) {
        let _ = (step, state);
    }

    /// A step ended and was checkpointed; `usage` is the run's so far.
    async fn step_ended(&self, step: u64, turn: &Turn, state: &AgentState, usage: &TokenUsage) {
        let _ = (step, turn, state, usage);
    }

    /// Messages to add to the conversation before this step's model call (a thread's queue:
    /// messages that arrived while the run worked). They become part of the step, so they
    /// are checkpointed with it; taken once per step, after [`StepObserver::step_started`].
    async fn inbox(&self, step: u64, state: &AgentState) -> Vec<Message> {
        let _ = (step, state);
        Vec::new()
    }

    /// Whether a call of the current step waits for a decision: the step is then not
    /// committed ([`StepOutcome::Suspended`]).
    fn suspended(&self) -> bool {
        false
    }
}

/// A [`StepObserver`] held by an [`ExecutionContext`] (which is `Debug`).
#[derive(Clone)]
pub(crate) struct SharedObserver(pub(crate) Arc<dyn StepObserver>);

impl std::fmt::Debug for SharedObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StepObserver")
    }
}

/// How a step ended.
#[derive(Debug, Clone, PartialEq)]
pub enum StepOutcome {
    /// Tools ran: the model should be asked again.
    Continue(Turn),
    /// The model answered without asking for tools (or asked with no tools to run).
    Final(Turn),
    /// A tool call waits for a person's decision: the step was not committed; the state is
    /// the last committed one.
    Suspended,
}

impl StepOutcome {
    /// How the step whose model call gave `turn` ended: [`StepOutcome::Continue`] when its
    /// tools ran, [`StepOutcome::Final`] otherwise (for a strategy that drives the parts of a
    /// step itself: [`Steps::begin_step`], [`Steps::call`], [`Steps::end_step`]).
    pub fn of(turn: Turn) -> StepOutcome {
        if tools_ran(&turn) {
            StepOutcome::Continue(turn)
        } else {
            StepOutcome::Final(turn)
        }
    }
}

/// How a step ended, for loops that do not look at the step's turn ([`Steps::advance`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepProgress {
    /// Tools ran: the model should be asked again.
    Continue,
    /// The model answered without asking for tools (or asked with no tools to run).
    Final,
    /// A tool call waits for a person's decision: the step was not committed.
    Suspended,
}

/// The steps of one execution in progress: the step primitive every loop is built on.
///
/// # Examples
///
/// A strategy that takes at most three steps:
///
/// ```
/// use async_trait::async_trait;
/// use weft_agent::{AgentError, ExecutionContext, ExecutionResult, ExecutionStrategy};
/// use weft_agent::execution::{StepOutcome, Steps};
///
/// #[derive(Debug)]
/// struct ThreeSteps;
///
/// #[async_trait]
/// impl ExecutionStrategy for ThreeSteps {
///     fn name(&self) -> &str { "three-steps" }
///     async fn execute(&self, ctx: ExecutionContext) -> Result<ExecutionResult, AgentError> {
///         let mut steps = Steps::new(&ctx);
///         for _ in 0..3 {
///             match steps.step().await? {
///                 StepOutcome::Continue(_) => {}
///                 StepOutcome::Final(_) | StepOutcome::Suspended => break,
///             }
///         }
///         steps.finish()
///     }
/// }
/// ```
pub struct Steps<'a> {
    pub(crate) ctx: &'a ExecutionContext,
    /// The last step-end state.
    pub(crate) committed: AgentState,
    /// The state of the step in progress (step number, reasoning, plan changes).
    pub(crate) state: AgentState,
    /// The step's messages, shared with the turns that made them and, at the step's end,
    /// with the new state (never copied).
    step_messages: Vec<Arc<Message>>,
    step_turn: Option<Turn>,
    total: Option<Turn>,
    pending_input: Option<Message>,
    /// Messages the observer's inbox gave for the current step, sent with its model call.
    inbox: Vec<Message>,
    rounds: u32,
    base_usage: TokenUsage,
    /// Usage of model calls the strategy made between steps ([`Steps::add_usage`]).
    extra_usage: TokenUsage,
    observer: Option<Arc<dyn StepObserver>>,
    suspended: bool,
    /// The history as the provider takes it, kept between model calls so a step costs no
    /// copy of the history: valid while `state`'s message vector is the one it mirrors and
    /// `step_messages` has the recorded length.
    conversation: Option<SharedConversation>,
}

struct SharedConversation {
    messages: Arc<Vec<Arc<Message>>>,
    mirrors: crate::state::History,
    step_len: usize,
}

trait TurnExt {
    fn clone_without_messages(&self) -> Turn;
}

impl TurnExt for Turn {
    fn clone_without_messages(&self) -> Turn {
        Turn {
            messages: Vec::new(),
            response: self.response.clone(),
            tool_executions: self.tool_executions.clone(),
            usage: self.usage.clone(),
            cycles: self.cycles,
            data: self.data.clone(),
        }
    }
}

/// Whether the turn's last response asked for tools and they ran (not manual mode).
pub(crate) fn tools_ran(turn: &Turn) -> bool {
    turn.response.has_tool_calls() && turn.messages.last().is_some_and(|m| m.is_tool_result())
}

/// The tool results of the turn's last round.
pub(crate) fn last_results(turn: &Turn) -> &[ToolResult] {
    match turn.messages.last().map(|m| &**m) {
        Some(Message::ToolResult(results)) => &results.results,
        _ => &[],
    }
}

impl std::fmt::Debug for Steps<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steps")
            .field("step", &self.state.step())
            .field("rounds", &self.rounds)
            .finish_non_exhaustive()
    }
}

impl<'a> Steps<'a> {
    /// The steps of `ctx`'s execution, from `ctx.state`, with `ctx.input` as the first
    /// model call's new message, reporting to the context's observer
    /// ([`ExecutionContext::observer`]) if it has one.
    pub fn new(ctx: &'a ExecutionContext) -> Self {
        Steps {
            ctx,
            committed: ctx.state.clone(),
            state: ctx.state.clone(),
            step_messages: Vec::new(),
            step_turn: None,
            total: None,
            pending_input: Some(ctx.input.clone()),
            inbox: Vec::new(),
            conversation: None,
            rounds: 0,
            base_usage: TokenUsage::default(),
            extra_usage: TokenUsage::default(),
            observer: ctx.observer().cloned(),
            suspended: false,
        }
    }

    /// The first model call's new message instead of `ctx.input` (`None`: the state already
    /// ends with it, e.g. a durable run's initial checkpoint).
    #[must_use]
    pub fn input(mut self, input: Option<Message>) -> Self {
        self.pending_input = input;
        self
    }

    /// The run's usage before this execution: checkpoints record it plus the steps'.
    #[must_use]
    pub fn base_usage(mut self, usage: TokenUsage) -> Self {
        self.base_usage = usage;
        self
    }

    /// Counts `usage` — a model call the strategy made between steps, e.g. a context
    /// compression's summary — in the run's usage: the next checkpoints record it and the
    /// execution's result ([`Steps::finish`]) includes it.
    ///
    /// ```
    /// # use weft_agent::execution::Steps;
    /// # fn demo(steps: &mut Steps<'_>) {
    /// let summary = weft_provider::TokenUsage {
    ///     input_tokens: 120,
    ///     output_tokens: 10,
    ///     ..Default::default()
    /// };
    /// steps.add_usage(&summary);
    /// # }
    /// ```
    pub fn add_usage(&mut self, usage: &TokenUsage) {
        let mut usage = usage.clone();
        // Not a cycle of any step: the per-cycle list is the steps' own.
        usage.cycles = None;
        self.extra_usage.merge(&usage);
    }

    /// Who hears step boundaries and says when a step must be given up (see
    /// [`StepObserver`]).
    #[must_use]
    pub fn observer(mut self, observer: Arc<dyn StepObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The state of the step in progress (the committed state between steps).
    pub fn state(&self) -> &AgentState {
        &self.state
    }

    /// The last committed state.
    pub fn committed(&self) -> &AgentState {
        &self.committed
    }

    /// Whether the last model call was given up because a call waits for a decision (the
    /// [`StepOutcome::Suspended`] of [`Steps::step`], for a strategy that drives the parts of
    /// a step itself).
    pub fn is_suspended(&self) -> bool {
        self.suspended
    }

    /// Sets `key` of the metadata of the step in progress: the state [`Steps::end_step`]
    /// commits and checkpoints carries it (a strategy's own progress, restored on resume).
    pub fn set_metadata(&mut self, key: &str, value: serde_json::Value) {
        self.state = self.state.with_metadata(key, value);
    }

    /// Replaces the history between steps (context compression): the committed state and
    /// the state of the next step get `messages` as their history, keeping everything else
    /// (step number, metadata, plan). The next step's checkpoint references the messages the
    /// store already holds.
    ///
    /// Call it between steps only (after [`Steps::end_step`], before the next
    /// [`Steps::begin_step`]).
    pub fn replace_history(&mut self, messages: Vec<Message>) {
        self.committed = self.committed.with_context(messages);
        self.state = self.committed.clone();
        self.conversation = None;
    }

    /// One step with the agent's model: begin, one model call and its tool round, end.
    ///
    /// # Errors
    /// Provider errors; [`AgentError::Cancelled`] with the committed state.
    pub async fn step(&mut self) -> Result<StepOutcome, AgentError> {
        let llm = &self.ctx.llm;
        self.step_with(llm).await
    }

    /// [`Steps::step`] with `llm` in place of the agent's own (built with
    /// [`ExecutionContext::llm_with`]): a step that offers other tools, e.g. after an MCP
    /// server changed its tool list.
    ///
    /// # Errors
    /// Provider errors; [`AgentError::Cancelled`] with the committed state.
    pub async fn step_with(&mut self, llm: &LlmInstance) -> Result<StepOutcome, AgentError> {
        let step = self.begin_step().await;
        let turn = match self.call(llm, Vec::new()).await {
            Ok(turn) => turn,
            Err(AgentError::Cancelled { .. }) if self.suspended => {
                return Ok(StepOutcome::Suspended);
            }
            Err(error) => return Err(error),
        };
        self.act_and_observe(step, &turn);
        self.end_step(step).await;
        Ok(StepOutcome::of(turn))
    }

    /// [`Steps::step`] for a loop that does not look at the step's turn (the `loop()`
    /// strategy): the same step, events, hooks and checkpoint, but the turn's messages, response
    /// and tool executions move into the step instead of being copied for the caller.
    ///
    /// # Errors
    /// As [`Steps::step`].
    pub async fn advance(&mut self) -> Result<StepProgress, AgentError> {
        let step = self.begin_step().await;
        let mut turn = match self.model_call(&self.ctx.llm, Vec::new()).await {
            Ok(turn) => turn,
            Err(AgentError::Cancelled { .. }) if self.suspended => {
                return Ok(StepProgress::Suspended);
            }
            Err(error) => return Err(error),
        };
        self.act_and_observe(step, &turn);
        let ran = tools_ran(&turn);
        if self.step_messages.is_empty() {
            // The step's first model call: its messages vector becomes the step's (no copy
            // into a new one).
            std::mem::swap(&mut self.step_messages, &mut turn.messages);
        } else {
            self.step_messages.append(&mut turn.messages);
        }
        self.keep_turn(turn);
        self.end_step(step).await;
        Ok(if ran {
            StepProgress::Continue
        } else {
            StepProgress::Final
        })
    }

    pub(crate) fn cancelled(&self) -> AgentError {
        AgentError::Cancelled {
            state: Box::new(self.committed.clone()),
        }
    }

    fn map_error(&self, error: UppError) -> AgentError {
        if error.code == ErrorCode::Cancelled || self.ctx.signal.is_cancelled() {
            self.cancelled()
        } else {
            AgentError::Upp(error)
        }
    }

    /// Starts a step: `with_step`, `on_step_start`, `step_start`, the observer.
    pub async fn begin_step(&mut self) -> u64 {
        let step = self.state.step() + 1;
        self.state = self.state.with_step(step);
        self.ctx.events.set_step(step);
        self.ctx.strategy.step_start(step, &self.state);
        if self.ctx.events.is_streaming() {
            self.ctx.events.emit_uap(
                UapEventType::StepStart,
                step,
                json!({ "stateId": self.state.id() }),
            );
        }
        if let Some(observer) = &self.observer {
            observer.step_started(step, &self.state).await;
            self.inbox = observer.inbox(step, &self.state).await;
        }
        step
    }

    /// One model call (and its tool round) within the current step. The pending user input
    /// goes first, then `extra`. When a call of the round waits for a decision, the step is
    /// given up (the state goes back to the committed one) and the result is
    /// [`AgentError::Cancelled`].
    ///
    /// # Errors
    /// Provider errors; [`AgentError::Cancelled`] with the committed state.
    pub async fn call(
        &mut self,
        llm: &LlmInstance,
        extra: Vec<InferenceInput>,
    ) -> Result<Turn, AgentError> {
        let turn = self.model_call(llm, extra).await?;
        // The caller gets the turn; the step keeps its own copy of the messages and the rest.
        self.step_messages.extend(turn.messages.iter().cloned());
        self.keep_turn(turn.clone_without_messages());
        Ok(turn)
    }

    /// Folds a model call's turn (its messages already taken into `step_messages`) into the
    /// step's turn.
    fn keep_turn(&mut self, turn: Turn) {
        let step_turn = match self.step_turn.take() {
            None => turn,
            Some(acc) => Turn::fold(Some(acc), turn),
        };
        self.step_turn = Some(step_turn);
    }

    /// The model call of [`Steps::call`] without the step's bookkeeping of its turn.
    async fn model_call(
        &mut self,
        llm: &LlmInstance,
        extra: Vec<InferenceInput>,
    ) -> Result<Turn, AgentError> {
        if self.ctx.signal.is_cancelled() {
            return Err(self.cancelled());
        }
        // Sized exactly: most steps have no new input, and then nothing is allocated.
        let mut inputs = Vec::with_capacity(
            extra.len() + usize::from(self.pending_input.is_some()) + self.inbox.len(),
        );
        if let Some(input) = &self.pending_input {
            inputs.push(InferenceInput::Message(input.clone()));
        }
        inputs.extend(self.inbox.drain(..).map(InferenceInput::Message));
        inputs.extend(extra);
        let conversation = self.shared_history();
        let result = if self.ctx.events.is_streaming() {
            // A stream's abort handle cancels its token: a child, so only this call stops.
            let signal = self.ctx.signal.child_token();
            match llm.stream_step_shared(conversation, inputs, self.rounds, signal) {
                Ok(mut stream) => {
                    while let Some(event) = stream.next().await {
                        if let Ok(event) = event {
                            self.ctx.events.emit(AgentStreamEvent::Upp(event));
                        }
                    }
                    stream.turn_and_conversation().await
                }
                Err(error) => Err(error),
            }
        } else {
            // Nothing cancels the token of a generated step but the run's own signal (each
            // tool gets a child of it): the run's token itself, no child to register per call.
            llm.generate_step_shared(conversation, inputs, self.rounds, self.ctx.signal.clone())
                .await
                .map(|(turn, kept)| (turn, Some(kept)))
        };
        let result = result.map(|(turn, kept)| {
            self.conversation = kept.map(|messages| SharedConversation {
                messages,
                mirrors: self.state.message_vector().clone(),
                step_len: self.step_messages.len() + turn.messages.len(),
            });
            turn
        });
        let turn = result.map_err(|e| self.map_error(e))?;
        if self.observer.as_ref().is_some_and(|o| o.suspended()) {
            // A call waits for a decision: nothing of this step is kept.
            self.suspended = true;
            self.state = self.committed.clone();
            self.step_messages.clear();
            self.step_turn = None;
            self.conversation = None;
            return Err(self.cancelled());
        }
        self.pending_input = None;
        if tools_ran(&turn) {
            self.rounds += 1;
        }
        Ok(turn)
    }

    /// The history a model call sees: the state's messages, then the step's own (shared,
    /// not copied).
    fn history(&self) -> Vec<Arc<Message>> {
        let mut history = Vec::with_capacity(self.state.message_count() + self.step_messages.len());
        history.extend(self.state.message_vector().shared_iter());
        history.extend(self.step_messages.iter().cloned());
        history
    }

    /// The kept conversation when it still mirrors the history, else a fresh one.
    fn shared_history(&mut self) -> Arc<Vec<Arc<Message>>> {
        match self.conversation.take() {
            Some(kept)
                if kept.step_len == self.step_messages.len()
                    && kept.mirrors.ptr_eq(self.state.message_vector()) =>
            {
                kept.messages
            }
            _ => Arc::new(self.history()),
        }
    }

    /// Fires `on_act` / `on_observe` and the `action` / `observation` events for a turn.
    pub fn act_and_observe(&self, step: u64, turn: &Turn) {
        if !turn.response.has_tool_calls() {
            return;
        }
        let calls = &turn.response.tool_calls;
        self.ctx.strategy.act(step, calls);
        let streaming = self.ctx.events.is_streaming();
        if streaming {
            self.ctx
                .events
                .emit_uap(UapEventType::Action, step, json!({ "toolCalls": calls }));
        }
        if tools_ran(turn) {
            let results = last_results(turn);
            self.ctx.strategy.observe(step, results);
            if !streaming {
                return;
            }
            self.ctx.events.emit_uap(
                UapEventType::Observation,
                step,
                json!({ "toolResults": results, "toolExecutions": turn.tool_executions }),
            );
        }
    }

    /// Ends the step: commits its messages and traces, fires `on_step_end`, emits
    /// `step_end`, checkpoints, tells the observer.
    pub async fn end_step(&mut self, step: u64) {
        let traces = self.ctx.events.take_traces();
        let kept = self
            .conversation
            .take()
            .filter(|kept| {
                kept.step_len == self.step_messages.len()
                    && kept.mirrors.ptr_eq(self.state.message_vector())
            })
            .map(|kept| kept.messages);
        let messages_of_step = std::mem::take(&mut self.step_messages);
        // The committed state is replaced right below: let it (and the working state) go
        // first, so no one else holds the history's tail chunk and the step's messages are
        // appended in place instead of into a copy of the chunk. The stand-in is the
        // execution's input state (a clone is a few reference counts; a new state would
        // generate an id).
        self.committed = self.ctx.state.clone();
        let working = std::mem::replace(&mut self.state, self.ctx.state.clone());
        self.state = working.into_step_result(step, messages_of_step.iter().cloned(), traces);
        // The new state's history is the old one plus exactly this step's messages, which the
        // kept conversation already holds.
        self.conversation = kept.map(|messages| SharedConversation {
            messages,
            mirrors: self.state.message_vector().clone(),
            step_len: 0,
        });
        self.committed = self.state.clone();
        let Some(mut turn) = self.step_turn.take() else {
            return;
        };
        turn.messages = messages_of_step;
        let checkpointing = self.ctx.session_id.is_some();
        let completed = if checkpointing {
            turn.tool_executions.clone()
        } else {
            Vec::new()
        };
        let result = GenerateResult {
            turn,
            state: self.state.clone(),
        };
        // The run's usage so far (before this execution, its earlier steps, this one), for
        // the checkpoint, the observer and the stream's `step_end`: not computed when nobody
        // reads it.
        let usage = (checkpointing || self.observer.is_some() || self.ctx.events.is_streaming())
            .then(|| {
                let parts = [&self.base_usage, &self.extra_usage, &result.turn.usage];
                totals(
                    parts
                        .into_iter()
                        .chain(self.total.as_ref().map(|t| &t.usage)),
                )
            });
        self.ctx
            .end_step_effects(step, &result, completed, usage.clone())
            .await;
        if let (Some(observer), Some(usage)) = (&self.observer, &usage) {
            observer
                .step_ended(step, &result.turn, &result.state, usage)
                .await;
        }
        self.total = Some(Turn::fold(self.total.take(), result.turn));
    }

    /// The result of the execution: every step's turn folded into one, and the committed
    /// state.
    ///
    /// # Errors
    /// [`AgentError::Strategy`] when no model call was made.
    pub fn finish(self) -> Result<GenerateResult, AgentError> {
        match self.total {
            Some(mut turn) => {
                turn.usage.merge(&self.extra_usage);
                Ok(GenerateResult {
                    turn,
                    state: self.committed,
                })
            }
            None => Err(AgentError::Strategy {
                name: self.ctx.agent.execution_name().to_owned(),
                message: "the run ended before any model call".into(),
            }),
        }
    }
}

/// The sum of `parts`' token counts without their per-cycle lists: the run's usage so far,
/// in O(1) per step however many model calls came before (merging would copy every cycle).
fn totals<'a>(parts: impl IntoIterator<Item = &'a TokenUsage>) -> TokenUsage {
    let mut sum = TokenUsage::default();
    for part in parts {
        sum.input_tokens += part.input_tokens;
        sum.output_tokens += part.output_tokens;
        sum.cache_read_tokens += part.cache_read_tokens;
        sum.cache_write_tokens += part.cache_write_tokens;
    }
    sum.total_tokens = sum.input_tokens + sum.output_tokens;
    sum
}
