//! `react()`: Reason → Act → Observe steps (UAP-1.0 §5.3).
//!
//! Each step makes two model calls. **Reason**: the history plus the reasoning prompt, with
//! no tools offered, so the reply is reasoning only; its text is appended to
//! `state.reasoning` and reported through `on_reason` and a `reasoning` event. **Act**: the
//! history (now with the reasoning exchange) plus the action prompt, with the agent's tools;
//! the tool calls run in the same step (`on_act`, `action`), and their results are the
//! **observation** (`on_observe`, `observation`). Both exchanges are part of the history, so
//! later steps see earlier reasoning. The run stops when the action asks for no tools, when
//! `stop_condition` holds after a step, or after `max_steps` steps when that is set.

use async_trait::async_trait;
use serde_json::json;
use weft_provider::InferenceInput;

use super::step::{Steps, tools_ran};
use super::{ExecutionContext, ExecutionStrategy};
use crate::agent::ExecutionResult;
use crate::error::AgentError;
use crate::stream::UapEventType;

/// The default reasoning-phase prompt.
pub const DEFAULT_REASONING_PROMPT: &str = "Think about what to do next.";
/// The default action-phase prompt.
pub const DEFAULT_ACTION_PROMPT: &str = "Based on your reasoning, take action.";

/// Options of `react()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReactOptions {
    /// Maximum reason-act-observe cycles in one run; `None` (the default) is unbounded.
    pub max_steps: Option<u64>,
    /// The reasoning-phase prompt.
    pub reasoning_prompt: String,
    /// The action-phase prompt.
    pub action_prompt: String,
}

impl Default for ReactOptions {
    fn default() -> Self {
        ReactOptions {
            max_steps: None,
            reasoning_prompt: DEFAULT_REASONING_PROMPT.to_owned(),
            action_prompt: DEFAULT_ACTION_PROMPT.to_owned(),
        }
    }
}

/// The `react()` strategy.
#[derive(Debug, Clone, Default)]
pub struct ReactStrategy {
    options: ReactOptions,
}

/// `react(options)` (UAP-1.0 §5.3).
///
/// # Examples
///
/// ```
/// use weft_agent::execution::{react, ReactOptions};
///
/// let strategy = react(ReactOptions { max_steps: Some(20), ..ReactOptions::default() });
/// assert_eq!(strategy.options().reasoning_prompt, "Think about what to do next.");
/// ```
pub fn react(options: ReactOptions) -> ReactStrategy {
    ReactStrategy { options }
}

impl ReactStrategy {
    /// The options.
    pub fn options(&self) -> &ReactOptions {
        &self.options
    }
}

#[async_trait]
impl ExecutionStrategy for ReactStrategy {
    fn name(&self) -> &str {
        "react"
    }

    async fn execute(&self, ctx: ExecutionContext) -> Result<ExecutionResult, AgentError> {
        let mut reason_options = ctx.agent.llm_options().clone();
        reason_options.tools.clear();
        reason_options.structure = None;
        let reasoner = ctx.llm_with(reason_options)?;
        let mut run = Steps::new(&ctx);
        let mut steps = 0u64;
        loop {
            let step = run.begin_step().await;
            steps += 1;
            // Reason
            let reasoning_turn = run
                .call(
                    &reasoner,
                    vec![InferenceInput::Text(self.options.reasoning_prompt.clone())],
                )
                .await?;
            let mut reasoning = reasoning_turn.response.text_content();
            if reasoning.is_empty() {
                reasoning = reasoning_turn
                    .response
                    .reasoning()
                    .map(|r| r.text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
            }
            run.state = run.state.with_reasoning(reasoning.clone());
            ctx.strategy.reason(step, &reasoning);
            ctx.events.emit_uap(
                UapEventType::Reasoning,
                step,
                json!({ "reasoning": reasoning }),
            );
            // Act and observe
            let action_turn = run
                .call(
                    &ctx.llm,
                    vec![InferenceInput::Text(self.options.action_prompt.clone())],
                )
                .await?;
            run.act_and_observe(step, &action_turn);
            run.end_step(step).await;
            if ctx.strategy.should_stop(&run.state).await || !tools_ran(&action_turn) {
                break;
            }
            if self.options.max_steps.is_some_and(|max| steps >= max) {
                break;
            }
        }
        run.finish()
    }
}
