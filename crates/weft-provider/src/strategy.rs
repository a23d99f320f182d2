//! `ToolUseStrategy`: limits and hooks around tool execution (UPP-1.2 §10.5–§10.7).

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::tool::{Tool, ToolError};

/// UPP's default tool-round limit.
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;

/// What `on_before_call` decided.
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeCall {
    /// Run with the original arguments (`true`).
    Proceed,
    /// Skip the call (`false`); the model gets an error result saying it was skipped.
    Skip,
    /// `BeforeCallResult { proceed, params }`: proceed or skip, with replaced arguments.
    Result(BeforeCallResult),
}

/// `BeforeCallResult` of §10.5.
#[derive(Debug, Clone, PartialEq)]
pub struct BeforeCallResult {
    /// Whether to run the tool.
    pub proceed: bool,
    /// Replacement arguments.
    pub params: Option<Value>,
}

/// `AfterCallResult` of §10.5: the result to send to the model instead.
#[derive(Debug, Clone, PartialEq)]
pub struct AfterCallResult {
    /// The replacement result.
    pub result: Value,
}

type OnToolCall = dyn Fn(&Tool, &Value) + Send + Sync;
type OnBeforeCall = dyn Fn(&Tool, &Value) -> BeforeCall + Send + Sync;
type OnAfterCall = dyn Fn(&Tool, &Value, &Value) -> Option<AfterCallResult> + Send + Sync;
type OnError = dyn Fn(&Tool, &Value, &ToolError) + Send + Sync;
type OnMaxIterations = dyn Fn(u32) + Send + Sync;

/// Limits and hooks for the tool loop.
///
/// `max_iterations` is the number of tool rounds: `Some(10)` by default (UPP), `None` for no
/// limit ("Infinity"), `Some(0)` to return tool calls to the caller unexecuted (§10.7).
///
/// # Examples
///
/// ```
/// use weft_provider::{BeforeCall, ToolUseStrategy};
///
/// let strategy = ToolUseStrategy::default()
///     .max_iterations(Some(3))
///     .on_before_call(|tool, _args| {
///         if tool.name == "delete_everything" { BeforeCall::Skip } else { BeforeCall::Proceed }
///     });
/// assert_eq!(strategy.max_iterations, Some(3));
/// ```
#[derive(Clone)]
pub struct ToolUseStrategy {
    /// Maximum tool rounds; `None` means unbounded.
    pub max_iterations: Option<u32>,
    on_tool_call: Option<Arc<OnToolCall>>,
    on_before_call: Option<Arc<OnBeforeCall>>,
    on_after_call: Option<Arc<OnAfterCall>>,
    on_error: Option<Arc<OnError>>,
    on_max_iterations: Option<Arc<OnMaxIterations>>,
}

impl Default for ToolUseStrategy {
    fn default() -> Self {
        ToolUseStrategy {
            max_iterations: Some(DEFAULT_MAX_ITERATIONS),
            on_tool_call: None,
            on_before_call: None,
            on_after_call: None,
            on_error: None,
            on_max_iterations: None,
        }
    }
}

impl fmt::Debug for ToolUseStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolUseStrategy")
            .field("max_iterations", &self.max_iterations)
            .field("on_tool_call", &self.on_tool_call.is_some())
            .field("on_before_call", &self.on_before_call.is_some())
            .field("on_after_call", &self.on_after_call.is_some())
            .field("on_error", &self.on_error.is_some())
            .field("on_max_iterations", &self.on_max_iterations.is_some())
            .finish()
    }
}

impl ToolUseStrategy {
    /// A strategy with no limit and no hooks (the UAP-1.0 default).
    pub fn unbounded() -> Self {
        ToolUseStrategy {
            max_iterations: None,
            ..ToolUseStrategy::default()
        }
    }

    /// Sets the round limit (`None` = unbounded, `Some(0)` = manual execution).
    #[must_use]
    pub fn max_iterations(mut self, limit: Option<u32>) -> Self {
        self.max_iterations = limit;
        self
    }

    /// Called when the model requests a call, before anything else.
    #[must_use]
    pub fn on_tool_call(mut self, hook: impl Fn(&Tool, &Value) + Send + Sync + 'static) -> Self {
        self.on_tool_call = Some(Arc::new(hook));
        self
    }

    /// Called before a call runs; may skip it or replace its arguments.
    #[must_use]
    pub fn on_before_call(
        mut self,
        hook: impl Fn(&Tool, &Value) -> BeforeCall + Send + Sync + 'static,
    ) -> Self {
        self.on_before_call = Some(Arc::new(hook));
        self
    }

    /// Called after a call succeeded; may replace the result sent to the model.
    #[must_use]
    pub fn on_after_call(
        mut self,
        hook: impl Fn(&Tool, &Value, &Value) -> Option<AfterCallResult> + Send + Sync + 'static,
    ) -> Self {
        self.on_after_call = Some(Arc::new(hook));
        self
    }

    /// Called when a call fails.
    #[must_use]
    pub fn on_error(
        mut self,
        hook: impl Fn(&Tool, &Value, &ToolError) + Send + Sync + 'static,
    ) -> Self {
        self.on_error = Some(Arc::new(hook));
        self
    }

    /// Called when the round limit is reached while the model still asks for tools.
    #[must_use]
    pub fn on_max_iterations(mut self, hook: impl Fn(u32) + Send + Sync + 'static) -> Self {
        self.on_max_iterations = Some(Arc::new(hook));
        self
    }

    /// Whether `on_tool_call` or `on_before_call` is set (the pipeline skips the stage
    /// otherwise).
    pub(crate) fn has_before_hooks(&self) -> bool {
        self.on_tool_call.is_some() || self.on_before_call.is_some()
    }

    /// Whether `on_after_call` or `on_error` is set.
    pub(crate) fn has_after_hooks(&self) -> bool {
        self.on_after_call.is_some() || self.on_error.is_some()
    }

    pub(crate) fn fire_tool_call(&self, tool: &Tool, args: &Value) {
        if let Some(hook) = &self.on_tool_call {
            hook(tool, args);
        }
    }

    pub(crate) fn before_call(&self, tool: &Tool, args: &Value) -> BeforeCall {
        match &self.on_before_call {
            Some(hook) => hook(tool, args),
            None => BeforeCall::Proceed,
        }
    }

    pub(crate) fn after_call(
        &self,
        tool: &Tool,
        args: &Value,
        result: &Value,
    ) -> Option<AfterCallResult> {
        self.on_after_call
            .as_ref()
            .and_then(|hook| hook(tool, args, result))
    }

    pub(crate) fn fire_error(&self, tool: &Tool, args: &Value, error: &ToolError) {
        if let Some(hook) = &self.on_error {
            hook(tool, args, error);
        }
    }

    pub(crate) fn fire_max_iterations(&self, iterations: u32) {
        if let Some(hook) = &self.on_max_iterations {
            hook(iterations);
        }
    }
}
