//! Execution strategies (UAP-1.0 §5): the [`ExecutionStrategy`] trait, its
//! [`ExecutionContext`], and the built-ins `loop()`, `react()` and `plan()`.
//!
//! A **step** is one model call plus its tool round (ReAct: reason + act + observe; plan: one
//! plan step). Every built-in runs steps through the same driver (`step.rs`), which owns the
//! step invariants: `with_step` at the start, `on_step_start` first and `on_step_end` last,
//! `step_start` / `step_end` events, sub-agent traces folded into the state, and a checkpoint
//! after every step end. Nothing is unbounded-by-accident and nothing is bounded by default:
//! limits exist only when configured (UAP-010).

mod r#loop;
mod plan;
mod react;
mod step;

pub use step::{StepObserver, StepOutcome, StepProgress, Steps};

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use weft_provider::{
    Extensions, LlmInstance, LlmOptions, Message, TokenUsage, Tool, ToolExecution, Turn, llm,
};

pub use r#loop::{LoopOptions, LoopStrategy, r#loop};
pub use plan::{PlanOptions, PlanStrategy, default_plan_schema, plan};
pub use react::{
    DEFAULT_ACTION_PROMPT, DEFAULT_REASONING_PROMPT, ReactOptions, ReactStrategy, react,
};

use crate::agent::{Agent, ExecutionResult, GenerateResult};
use crate::checkpoint::writer::StepRecord;
use crate::error::AgentError;
use crate::hooks::AgentStrategy;
use crate::state::AgentState;
use crate::stream::{AgentStreamResult, EventSink, UapEventType};
use crate::subagent::ToolExecutionContext;

/// How an agent executes (UAP-1.0 §5.1). Implement it for a custom strategy (UAP-060).
///
/// # Contract
///
/// * `execute` adds `ctx.input` to the history exactly once, returns a state derived from
///   `ctx.state` (never mutating it), and returns the UPP turn of the whole run.
/// * Strategies should call the step helpers of [`ExecutionContext`]
///   ([`ExecutionContext::finish_step`]) so hooks, events, traces and checkpoints behave like
///   the built-ins; they must honour `ctx.signal`.
/// * `stream` has a default: `execute` on a new task with a streaming [`EventSink`] in the
///   context. Override it only to stream differently; the result must equal `execute`'s.
///
/// # Examples
///
/// ```
/// use async_trait::async_trait;
/// use weft_agent::{AgentError, ExecutionContext, ExecutionResult, ExecutionStrategy, GenerateResult};
///
/// /// One model call, tools handled by the provider's loop, one step.
/// #[derive(Debug)]
/// struct Single;
///
/// #[async_trait]
/// impl ExecutionStrategy for Single {
///     fn name(&self) -> &str { "single" }
///     async fn execute(&self, ctx: ExecutionContext) -> Result<ExecutionResult, AgentError> {
///         let step = ctx.state.step() + 1;
///         let state = ctx.state.with_step(step);
///         ctx.strategy.step_start(step, &state);
///         let turn = ctx.llm
///             .generate_with_signal(&state.messages_vec(), ctx.input.clone(), ctx.signal.clone())
///             .await?;
///         let state = state.with_messages(turn.messages.iter().cloned());
///         let state = ctx.finish_step(step, &turn, state).await;
///         Ok(GenerateResult { turn, state })
///     }
/// }
/// ```
#[async_trait]
pub trait ExecutionStrategy: Send + Sync + fmt::Debug + 'static {
    /// The strategy's name (`"loop"`, `"react"`, `"plan"`, …).
    fn name(&self) -> &str;

    /// Runs to completion.
    ///
    /// # Errors
    /// Provider errors, [`AgentError::Cancelled`] (with the last step-end state), or the
    /// strategy's own.
    async fn execute(&self, ctx: ExecutionContext) -> Result<ExecutionResult, AgentError>;

    /// Runs with streaming.
    fn stream(self: Arc<Self>, ctx: ExecutionContext) -> AgentStreamResult {
        let agent_id = ctx.agent.id().to_owned();
        let signal = ctx.signal.clone();
        let fallback = ctx.state.clone();
        AgentStreamResult::spawn(&agent_id, signal, fallback, move |sink| {
            let ctx = ctx.with_events(sink);
            async move { self.execute(ctx).await }
        })
    }
}

/// What a strategy gets (UAP-1.0 §5.1): the agent, the bound LLM (with the tool execution
/// context injected), the input, the state, the hooks, the abort signal, and the event sink.
#[derive(Clone, Debug)]
pub struct ExecutionContext {
    /// The agent being executed.
    pub agent: Agent,
    /// The bound LLM instance; its tools receive a [`ToolExecutionContext`].
    pub llm: LlmInstance,
    /// The user input (added to the history by the strategy, once).
    pub input: Message,
    /// The state to start from.
    pub state: AgentState,
    /// Lifecycle hooks.
    pub strategy: AgentStrategy,
    /// Aborts the run.
    pub signal: CancellationToken,
    /// Where events go (silent unless streaming).
    pub events: EventSink,
    /// The session checkpoints are saved under (`None`: no checkpointing in this run).
    pub session_id: Option<String>,
    base_llm: LlmInstance,
    parent: Option<Arc<ToolExecutionContext>>,
    observer: Option<step::SharedObserver>,
}

impl ExecutionContext {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        agent: Agent,
        base_llm: LlmInstance,
        input: Message,
        state: AgentState,
        strategy: AgentStrategy,
        signal: CancellationToken,
        events: EventSink,
        session_id: Option<String>,
        parent: Option<Arc<ToolExecutionContext>>,
    ) -> Self {
        // A sub-agent's tool calls pass its parent run's policy stages too.
        let base_llm = match &parent {
            Some(parent) => base_llm.with_inherited_layers(&parent.tool_layers),
            None => base_llm,
        };
        let mut ctx = ExecutionContext {
            agent,
            llm: base_llm.clone(),
            input,
            state,
            strategy,
            signal,
            events,
            session_id,
            base_llm,
            parent,
            observer: None,
        };
        ctx.llm = ctx.base_llm.with_tool_extensions(ctx.extensions());
        ctx
    }

    /// The same context whose steps report to `observer` ([`Steps::new`] takes it; `None`:
    /// nobody).
    #[must_use]
    pub fn with_observer(mut self, observer: Option<Arc<dyn StepObserver>>) -> Self {
        self.observer = observer.map(step::SharedObserver);
        self
    }

    /// Who hears this execution's steps ([`crate::RunOptions::observer`]).
    pub fn observer(&self) -> Option<&Arc<dyn StepObserver>> {
        self.observer.as_ref().map(|o| &o.0)
    }

    /// The resolved tools.
    pub fn tools(&self) -> &[Tool] {
        self.llm.tools()
    }

    /// The context handed to tools (UAP-1.0 §8.4).
    pub fn tool_context(&self) -> ToolExecutionContext {
        ToolExecutionContext {
            parent_model: self.agent.model().clone(),
            parent_config: self.agent.config().clone(),
            agent_id: self.agent.id().to_owned(),
            state_id: self.state.id().to_owned(),
            session_id: self.session_id.clone(),
            events: self.events.clone(),
            parent: self.parent.clone(),
            tool_layers: self.base_llm.child_layers(),
        }
    }

    fn extensions(&self) -> Extensions {
        let mut extensions = self.agent.llm_options().tool_extensions.clone();
        extensions.insert(self.tool_context());
        extensions
    }

    /// The same context sending events to `events` (tools see the new sink too).
    #[must_use]
    pub fn with_events(mut self, events: EventSink) -> Self {
        self.events = events;
        self.llm = self.base_llm.with_tool_extensions(self.extensions());
        self
    }

    /// An LLM from `options` (derived from the agent's, e.g. without tools or with a
    /// structure) whose tools receive this context.
    ///
    /// # Errors
    /// When `llm()` rejects the options.
    pub fn llm_with(&self, mut options: LlmOptions) -> Result<LlmInstance, AgentError> {
        options.tool_extensions = self.extensions();
        Ok(llm(options)?)
    }

    /// Completes a step the way the built-ins do: folds the sub-agent traces collected
    /// during the step into `state`, fires `on_step_end`, emits `step_end`, and saves a
    /// checkpoint (fire-and-forget unless the agent's mode is `Sync`) whose usage is the
    /// step's. Returns the state.
    pub async fn finish_step(&self, step: u64, turn: &Turn, state: AgentState) -> AgentState {
        self.finish_step_with_usage(step, turn, state, turn.usage.clone())
            .await
    }

    /// [`ExecutionContext::finish_step`] with the usage the checkpoint records: a strategy
    /// that runs inside a longer run passes that run's usage so far (the checkpoint's
    /// `usage` is the run's up to it).
    pub async fn finish_step_with_usage(
        &self,
        step: u64,
        turn: &Turn,
        state: AgentState,
        usage: TokenUsage,
    ) -> AgentState {
        let traces = self.events.take_traces();
        let state = if traces.is_empty() {
            state
        } else {
            state.with_step_result(state.step(), std::iter::empty(), traces)
        };
        let result = GenerateResult {
            turn: turn.clone(),
            state,
        };
        self.end_step_effects(step, &result, turn.tool_executions.clone(), Some(usage))
            .await;
        result.state
    }

    pub(crate) async fn end_step_effects(
        &self,
        step: u64,
        result: &GenerateResult,
        completed: Vec<ToolExecution>,
        usage: Option<TokenUsage>,
    ) {
        self.strategy.step_end(step, result);
        if !self.events.is_streaming() {
            self.save_checkpoint(&result.state, completed, usage).await;
            return;
        }
        let step_usage = &result.turn.usage;
        let mut data = serde_json::json!({
            "stateId": result.state.id(),
            "messageCount": result.state.message_count(),
            "toolExecutions": result.turn.tool_executions.len(),
            // This step's model calls.
            "stepUsage": {"inputTokens": step_usage.input_tokens, "outputTokens": step_usage.output_tokens},
        });
        if let (Some(usage), Some(object)) = (&usage, data.as_object_mut()) {
            // The run's usage so far (what the live view's running total shows).
            object.insert(
                "usage".into(),
                serde_json::json!({"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}),
            );
        }
        self.events.emit_uap(UapEventType::StepEnd, step, data);
        self.save_checkpoint(&result.state, completed, usage).await;
    }

    /// Saves a checkpoint of `state` when this run checkpoints. Never fails; in `Async` mode
    /// it returns at once.
    pub async fn save_checkpoint(
        &self,
        state: &AgentState,
        completed: Vec<ToolExecution>,
        usage: Option<TokenUsage>,
    ) {
        if let (Some(session), Some(checkpointer)) = (&self.session_id, self.agent.checkpointer()) {
            checkpointer
                .save(
                    session,
                    self.agent.id(),
                    state,
                    StepRecord { completed, usage },
                )
                .await;
        }
    }
}
