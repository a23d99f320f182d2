//! [`RunObserver`]: the runtime's [`StepObserver`] — every step of a run, whatever loop takes
//! it (the plain agent program, a Standard Agents side turn), is logged the same way in the
//! run's event log (`turn_start`, `turn_end` with the step's tool calls and tokens,
//! `checkpoint`), moves the ledger to the step, and is given up when a tool call of it waits
//! for a person's decision.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use weft_agent::AgentState;
use weft_agent::execution::StepObserver;
use weft_provider::{TokenUsage, Turn};
use weft_store::event_type;

use crate::ledger::RunContext;

/// Logs a run's steps (see the module docs).
#[derive(Debug, Clone)]
pub struct RunObserver {
    run: Arc<RunContext>,
    side: Option<&'static str>,
}

impl RunObserver {
    /// The observer of `run`'s steps; `side` (a `dual_ai` side's key) goes into every
    /// payload.
    pub fn new(run: Arc<RunContext>, side: Option<&'static str>) -> Arc<Self> {
        Arc::new(RunObserver { run, side })
    }

    fn payload(&self, mut payload: Value) -> Value {
        if let (Some(side), Some(object)) = (self.side, payload.as_object_mut()) {
            object.insert("side".into(), Value::from(side));
        }
        payload
    }
}

#[async_trait]
impl StepObserver for RunObserver {
    async fn step_started(&self, step: u64, state: &AgentState) {
        self.run.begin_turn(step);
        self.run
            .event(
                event_type::TURN_START,
                None,
                self.payload(json!({"messages": state.message_count()})),
            )
            .await;
    }

    async fn step_ended(&self, step: u64, turn: &Turn, state: &AgentState, usage: &TokenUsage) {
        // Calls answered before the pipeline (an unknown tool, argument text that is not
        // JSON) reached no stage that logs: they are logged here, so every refusal is in the
        // run's event log. (Refusals of the pipeline's stages were logged by its replay stage.)
        for execution in turn.tool_executions.iter().filter(|e| e.is_error) {
            if self.run.refused(&execution.tool_call_id) {
                self.run
                    .event(
                        event_type::TOOL_CALL_REFUSED,
                        Some(&execution.tool_call_id),
                        self.payload(json!({"tool": execution.tool_name, "stage": "call",
                            "reason": execution.result, "arguments": execution.arguments})),
                    )
                    .await;
            }
        }
        // The run's cost so far, each call at its recorded price (null: unknown).
        let cost = self.run.spent_cost();
        self.run
            .event(
                event_type::TURN_END,
                None,
                self.payload(json!({"toolCalls": turn.tool_executions.len(),
                    "inputTokens": turn.usage.input_tokens, "outputTokens": turn.usage.output_tokens,
                    "runInputTokens": usage.input_tokens, "runOutputTokens": usage.output_tokens,
                    "cost": cost})),
            )
            .await;
        self.run
            .event(
                event_type::CHECKPOINT,
                None,
                self.payload(json!({"agentStep": step, "messages": state.message_count()})),
            )
            .await;
    }

    fn suspended(&self) -> bool {
        self.run.is_suspended()
    }
}
