//! `loop()`: call the model, run its tools, repeat until it stops asking (UAP-1.0 §5.2).

use async_trait::async_trait;

use super::step::{StepProgress, Steps};
use super::{ExecutionContext, ExecutionStrategy};
use crate::agent::ExecutionResult;
use crate::error::AgentError;

/// Options of `loop()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopOptions {
    /// Maximum tool rounds; `None` (the default) is unbounded.
    pub max_iterations: Option<u32>,
}

/// The `loop()` strategy. Each step is one model call and its tool round.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoopStrategy {
    options: LoopOptions,
}

/// `loop(options)` (UAP-1.0 §5.2). Written `r#loop` because `loop` is a Rust keyword.
///
/// # Examples
///
/// ```
/// use weft_agent::execution::{r#loop, LoopOptions};
/// use weft_agent::ExecutionStrategy;
///
/// let unbounded = r#loop(LoopOptions::default());
/// let limited = r#loop(LoopOptions { max_iterations: Some(5) });
/// assert_eq!(unbounded.name(), "loop");
/// assert_eq!(limited.options().max_iterations, Some(5));
/// ```
pub fn r#loop(options: LoopOptions) -> LoopStrategy {
    LoopStrategy { options }
}

impl LoopStrategy {
    /// The options.
    pub fn options(&self) -> LoopOptions {
        self.options
    }
}

#[async_trait]
impl ExecutionStrategy for LoopStrategy {
    fn name(&self) -> &str {
        "loop"
    }

    async fn execute(&self, ctx: ExecutionContext) -> Result<ExecutionResult, AgentError> {
        let mut steps = Steps::new(&ctx);
        let mut rounds = 0u32;
        loop {
            // `advance`: this loop never looks at a step's turn, so the step keeps it
            // without a copy.
            match steps.advance().await? {
                StepProgress::Final | StepProgress::Suspended => break,
                StepProgress::Continue => {}
            }
            if ctx.strategy.should_stop(steps.state()).await {
                break;
            }
            rounds += 1;
            if self.options.max_iterations.is_some_and(|max| rounds >= max) {
                break;
            }
        }
        steps.finish()
    }
}
