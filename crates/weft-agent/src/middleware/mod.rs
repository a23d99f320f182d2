//! Middleware (UAP-1.0 §9): code around every run. `before` hooks run in list order, then
//! the strategy, then `after` hooks in reverse order; `on_error` may turn a failure into a
//! result.
//!
//! Shipped: [`logging()`](crate::middleware::logging()) (§9.3) and three context-window
//! middlewares (§6.2): [`prune_tool_outputs`], [`sliding_window`] and [`summarize`].

mod context_window;
mod logging;

use async_trait::async_trait;
use serde_json::{Map, Value};
use weft_provider::Message;

pub use context_window::{
    PruneOptions, PruneToolOutputs, SlidingWindow, Summarize, SummarizeOptions, estimate_tokens,
    prune_tool_outputs, sliding_window, summarize,
};
pub use logging::{LogLevel, Logger, Logging, LoggingOptions, logging};

use crate::agent::{Agent, GenerateResult};
use crate::error::AgentError;
use crate::state::AgentState;

/// What middleware sees (UAP-1.0 §9.1). Changing `state` or `input` in `before` changes what
/// the strategy runs on (UAP-099); `metadata` is scratch space shared by the chain.
#[derive(Debug, Clone)]
pub struct MiddlewareContext {
    /// The agent.
    pub agent: Agent,
    /// The user input.
    pub input: Message,
    /// The state the run starts from.
    pub state: AgentState,
    /// Request metadata, shared by the middleware of one run.
    pub metadata: Map<String, Value>,
}

/// A middleware (UAP-1.0 §9.1). Every method has a default that does nothing.
///
/// # Examples
///
/// ```
/// use async_trait::async_trait;
/// use weft_agent::middleware::{Middleware, MiddlewareContext};
/// use weft_agent::{AgentError, GenerateResult};
///
/// #[derive(Debug)]
/// struct Timing;
///
/// #[async_trait]
/// impl Middleware for Timing {
///     fn name(&self) -> &str { "timing" }
///     async fn before(&self, ctx: &mut MiddlewareContext) -> Result<(), AgentError> {
///         ctx.metadata.insert("start".into(), chrono::Utc::now().timestamp_millis().into());
///         Ok(())
///     }
///     async fn after(&self, ctx: &mut MiddlewareContext, result: GenerateResult)
///         -> Result<GenerateResult, AgentError> {
///         let start = ctx.metadata["start"].as_i64().unwrap_or_default();
///         println!("took {} ms", chrono::Utc::now().timestamp_millis() - start);
///         Ok(result)
///     }
/// }
/// ```
#[async_trait]
pub trait Middleware: Send + Sync + std::fmt::Debug {
    /// The middleware's name.
    fn name(&self) -> &str;

    /// Runs before execution; may replace `ctx.state` / `ctx.input`.
    ///
    /// # Errors
    /// Fails the run (then `on_error` hooks are asked).
    async fn before(&self, ctx: &mut MiddlewareContext) -> Result<(), AgentError> {
        let _ = ctx;
        Ok(())
    }

    /// Runs after execution; the returned result replaces the result.
    ///
    /// # Errors
    /// Fails the run.
    async fn after(
        &self,
        ctx: &mut MiddlewareContext,
        result: GenerateResult,
    ) -> Result<GenerateResult, AgentError> {
        let _ = ctx;
        Ok(result)
    }

    /// Runs when execution failed, in reverse order until one returns a result; that result
    /// then goes through the `after` hooks. `None` lets the error propagate.
    async fn on_error(
        &self,
        ctx: &mut MiddlewareContext,
        error: &AgentError,
    ) -> Option<GenerateResult> {
        let _ = (ctx, error);
        None
    }
}
