//! [`RunObserver`]: the runtime's [`StepObserver`] — every step of a run, whatever loop takes
//! it (the plain agent program, a Standard Agents side turn), is logged the same way in the
//! run's event log (`turn_start`, `turn_end` with the step's tool calls and tokens,
//! `checkpoint`; streamed text goes through [`RunContext::stream_tap`]), moves the ledger to the step, and is given up when a tool call of it waits
//! for a person's decision. Before each model step of the user's side it takes the messages
//! queued on the run's thread (`Runtime::queue_message`), dequeued once the step is
//! checkpointed.

use std::sync::Arc;

use async_trait::async_trait;
use weft_agent::AgentState;
use weft_agent::execution::StepObserver;
use weft_provider::{Message, TokenUsage, Turn};

use crate::event::{EventKind, Side};
use crate::ledger::RunContext;

/// Logs a run's steps (see the module docs).
#[derive(Debug, Clone)]
pub struct RunObserver {
    run: Arc<RunContext>,
    side: Option<Side>,
}

impl RunObserver {
    /// The observer of `run`'s steps; `side` (a `dual_ai` side) goes into every payload.
    pub fn new(run: Arc<RunContext>, side: Option<Side>) -> Arc<Self> {
        Arc::new(RunObserver { run, side })
    }
}

#[async_trait]
impl StepObserver for RunObserver {
    async fn step_started(&self, step: u64, state: &AgentState) {
        self.run.begin_turn(step);
        self.run
            .emit(EventKind::TurnStart {
                messages: state.message_count() as u64,
                side: self.side,
            })
            .await;
    }

    async fn inbox(&self, _step: u64, state: &AgentState) -> Vec<Message> {
        // The thread's queue is the user's: side B of a `dual_ai` session hears side A.
        if self.side == Some(Side::B) {
            return Vec::new();
        }
        self.run.take_queued(state).await
    }

    async fn step_ended(&self, step: u64, turn: &Turn, state: &AgentState, _usage: &TokenUsage) {
        // The step is checkpointed: the queued messages it took leave the queue.
        self.run.dequeue_taken().await;
        // Calls answered before the pipeline (an unknown tool, argument text that is not
        // JSON) reached no stage that logs: they are logged here, so every refusal is in the
        // run's event log. (Refusals of the pipeline's stages were logged by its replay stage.)
        for execution in turn.tool_executions.iter().filter(|e| e.is_error) {
            if self.run.refused(&execution.tool_call_id) {
                let id = &execution.tool_call_id;
                let tool = &execution.tool_name;
                let call = [
                    EventKind::ToolCallStart {
                        tool: tool.clone(),
                        arguments: execution.arguments.clone(),
                        side: self.side,
                    },
                    EventKind::ToolCallRefused {
                        tool: tool.clone(),
                        stage: "call".into(),
                        reason: execution.result.clone(),
                        arguments: execution.arguments.clone(),
                        sub_agent: false,
                    },
                    EventKind::ToolCallEnd {
                        tool: tool.clone(),
                        is_error: true,
                        result: Some(execution.result.clone()),
                        result_bytes: None,
                        result_ref: None,
                        side: self.side,
                    },
                ];
                for kind in call {
                    self.run.emit_call(id, kind).await;
                }
            }
        }
        let run = self.run.spent_usage();
        self.run
            .emit(EventKind::TurnEnd {
                tool_calls: turn.tool_executions.len() as u64,
                input_tokens: turn.usage.input_tokens,
                output_tokens: turn.usage.output_tokens,
                run_input_tokens: run.input_tokens,
                run_output_tokens: run.output_tokens,
                // The run's cost so far, each call at its recorded price (null: unknown).
                cost: self.run.spent_cost(),
                side: self.side,
            })
            .await;
        self.run
            .emit(EventKind::Checkpoint {
                agent_step: step,
                messages: state.message_count() as u64,
                side: self.side,
            })
            .await;
    }

    fn suspended(&self) -> bool {
        self.run.is_suspended()
    }
}
