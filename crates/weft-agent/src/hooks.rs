//! `AgentStrategy`: lifecycle hooks at step boundaries and the stop condition (UAP-1.0 §10).
//!
//! These hooks observe; they fire when a step's model inference and tool round are over.
//! The UPP `ToolUseStrategy` (the agent's `tool_strategy` option, passed to `llm()` unchanged)
//! fires in real time during tool execution (§10.4). Only `stop_condition` and `on_error`
//! change what happens.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use weft_provider::{ToolCall, ToolResult};

use crate::agent::GenerateResult;
use crate::error::AgentError;
use crate::state::AgentState;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

#[derive(Clone)]
enum StopCondition {
    Sync(Arc<dyn Fn(&AgentState) -> bool + Send + Sync>),
    Async(Arc<dyn Fn(AgentState) -> BoxFuture<bool> + Send + Sync>),
}

type OnStepStart = dyn Fn(u64, &AgentState) + Send + Sync;
type OnReason = dyn Fn(u64, &str) + Send + Sync;
type OnAct = dyn Fn(u64, &[ToolCall]) + Send + Sync;
type OnObserve = dyn Fn(u64, &[ToolResult]) + Send + Sync;
type OnStepEnd = dyn Fn(u64, &GenerateResult) + Send + Sync;
type OnComplete = dyn Fn(&GenerateResult) + Send + Sync;
type OnError = dyn Fn(&AgentError, &AgentState) -> Option<GenerateResult> + Send + Sync;

/// Agent lifecycle hooks (UAP-1.0 §10.1). Every hook is optional.
///
/// # Examples
///
/// ```
/// use weft_agent::AgentStrategy;
///
/// let strategy = AgentStrategy::new()
///     .stop_condition(|state| state.metadata().get("taskComplete").is_some() || state.step() > 50)
///     .on_step_start(|step, _state| println!("step {step}"))
///     .on_complete(|result| println!("done: {} tokens", result.turn.usage.total_tokens));
/// assert!(strategy.has_stop_condition());
/// ```
#[derive(Clone, Default)]
pub struct AgentStrategy {
    stop_condition: Option<StopCondition>,
    on_step_start: Option<Arc<OnStepStart>>,
    on_reason: Option<Arc<OnReason>>,
    on_act: Option<Arc<OnAct>>,
    on_observe: Option<Arc<OnObserve>>,
    on_step_end: Option<Arc<OnStepEnd>>,
    on_complete: Option<Arc<OnComplete>>,
    on_error: Option<Arc<OnError>>,
}

impl fmt::Debug for AgentStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentStrategy")
            .field("stop_condition", &self.stop_condition.is_some())
            .field("on_step_start", &self.on_step_start.is_some())
            .field("on_reason", &self.on_reason.is_some())
            .field("on_act", &self.on_act.is_some())
            .field("on_observe", &self.on_observe.is_some())
            .field("on_step_end", &self.on_step_end.is_some())
            .field("on_complete", &self.on_complete.is_some())
            .field("on_error", &self.on_error.is_some())
            .finish()
    }
}

impl AgentStrategy {
    /// No hooks.
    pub fn new() -> Self {
        AgentStrategy::default()
    }

    /// Stops execution when `condition(state)` is true; evaluated after every step.
    #[must_use]
    pub fn stop_condition(
        mut self,
        condition: impl Fn(&AgentState) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.stop_condition = Some(StopCondition::Sync(Arc::new(condition)));
        self
    }

    /// An asynchronous stop condition.
    #[must_use]
    pub fn stop_condition_async<Fut>(
        mut self,
        condition: impl Fn(AgentState) -> Fut + Send + Sync + 'static,
    ) -> Self
    where
        Fut: Future<Output = bool> + Send + 'static,
    {
        self.stop_condition = Some(StopCondition::Async(Arc::new(move |state| {
            Box::pin(condition(state))
        })));
        self
    }

    /// Called when a step begins, with the step number and the state at its start.
    #[must_use]
    pub fn on_step_start(
        mut self,
        hook: impl Fn(u64, &AgentState) + Send + Sync + 'static,
    ) -> Self {
        self.on_step_start = Some(Arc::new(hook));
        self
    }

    /// Called after the reasoning phase (ReAct).
    #[must_use]
    pub fn on_reason(mut self, hook: impl Fn(u64, &str) + Send + Sync + 'static) -> Self {
        self.on_reason = Some(Arc::new(hook));
        self
    }

    /// Called when a response asks for tools, with its calls.
    #[must_use]
    pub fn on_act(mut self, hook: impl Fn(u64, &[ToolCall]) + Send + Sync + 'static) -> Self {
        self.on_act = Some(Arc::new(hook));
        self
    }

    /// Called after the tools ran, with their results.
    #[must_use]
    pub fn on_observe(mut self, hook: impl Fn(u64, &[ToolResult]) + Send + Sync + 'static) -> Self {
        self.on_observe = Some(Arc::new(hook));
        self
    }

    /// Called when a step completes, with the step's turn and the state after it.
    #[must_use]
    pub fn on_step_end(
        mut self,
        hook: impl Fn(u64, &GenerateResult) + Send + Sync + 'static,
    ) -> Self {
        self.on_step_end = Some(Arc::new(hook));
        self
    }

    /// Called once when execution completes successfully.
    #[must_use]
    pub fn on_complete(mut self, hook: impl Fn(&GenerateResult) + Send + Sync + 'static) -> Self {
        self.on_complete = Some(Arc::new(hook));
        self
    }

    /// Called when execution fails; a returned result replaces the error.
    #[must_use]
    pub fn on_error(
        mut self,
        hook: impl Fn(&AgentError, &AgentState) -> Option<GenerateResult> + Send + Sync + 'static,
    ) -> Self {
        self.on_error = Some(Arc::new(hook));
        self
    }

    /// Whether a stop condition is set.
    pub fn has_stop_condition(&self) -> bool {
        self.stop_condition.is_some()
    }

    /// Evaluates the stop condition (`false` when there is none).
    pub async fn should_stop(&self, state: &AgentState) -> bool {
        match &self.stop_condition {
            None => false,
            Some(StopCondition::Sync(f)) => f(state),
            Some(StopCondition::Async(f)) => f(state.clone()).await,
        }
    }

    /// Fires `on_step_start`.
    pub fn step_start(&self, step: u64, state: &AgentState) {
        if let Some(hook) = &self.on_step_start {
            hook(step, state);
        }
    }

    /// Fires `on_reason`.
    pub fn reason(&self, step: u64, reasoning: &str) {
        if let Some(hook) = &self.on_reason {
            hook(step, reasoning);
        }
    }

    /// Fires `on_act`.
    pub fn act(&self, step: u64, calls: &[ToolCall]) {
        if let Some(hook) = &self.on_act {
            hook(step, calls);
        }
    }

    /// Fires `on_observe`.
    pub fn observe(&self, step: u64, results: &[ToolResult]) {
        if let Some(hook) = &self.on_observe {
            hook(step, results);
        }
    }

    /// Fires `on_step_end`.
    pub fn step_end(&self, step: u64, result: &GenerateResult) {
        if let Some(hook) = &self.on_step_end {
            hook(step, result);
        }
    }

    /// Fires `on_complete`.
    pub fn complete(&self, result: &GenerateResult) {
        if let Some(hook) = &self.on_complete {
            hook(result);
        }
    }

    /// Fires `on_error`; returns its recovery, if any.
    pub fn error(&self, error: &AgentError, state: &AgentState) -> Option<GenerateResult> {
        self.on_error.as_ref().and_then(|hook| hook(error, state))
    }
}
