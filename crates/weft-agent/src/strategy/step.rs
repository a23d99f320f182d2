//! The step driver shared by the built-in strategies.
//!
//! `Run` holds the *committed* state (the last step-end state, or the input state) and the
//! *working* state of the step in progress. Model calls of a step see the committed history
//! plus the step's own messages; the step's messages become part of the state only at
//! `end_step`, in one derivation. A failure or abort therefore never leaves a half-applied
//! step anywhere: the error carries the committed state.

use futures_util::StreamExt as _;
use serde_json::json;
use weft_provider::{ErrorCode, InferenceInput, LlmInstance, Message, ToolResult, Turn, UppError};

use super::ExecutionContext;
use crate::agent::GenerateResult;
use crate::error::AgentError;
use crate::state::AgentState;
use crate::stream::{AgentStreamEvent, UapEventType};

/// One execution in progress.
pub(crate) struct Run<'a> {
    pub(crate) ctx: &'a ExecutionContext,
    /// The last step-end state.
    pub(crate) committed: AgentState,
    /// The state of the step in progress (step number, reasoning, plan changes).
    pub(crate) state: AgentState,
    step_messages: Vec<Message>,
    step_turn: Option<Turn>,
    total: Option<Turn>,
    pending_input: Option<Message>,
    rounds: u32,
    /// The history as the provider takes it, kept between model calls so a step costs no
    /// copy of the history: valid while `state`'s message vector is the one it mirrors and
    /// `step_messages` has the recorded length.
    conversation: Option<SharedConversation>,
}

struct SharedConversation {
    messages: std::sync::Arc<Vec<Message>>,
    mirrors: imbl::Vector<std::sync::Arc<Message>>,
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
    turn.response.has_tool_calls() && turn.messages.last().is_some_and(Message::is_tool_result)
}

/// The tool results of the turn's last round.
pub(crate) fn last_results(turn: &Turn) -> &[ToolResult] {
    match turn.messages.last() {
        Some(Message::ToolResult(results)) => &results.results,
        _ => &[],
    }
}

impl<'a> Run<'a> {
    pub(crate) fn new(ctx: &'a ExecutionContext) -> Self {
        Run {
            ctx,
            committed: ctx.state.clone(),
            state: ctx.state.clone(),
            step_messages: Vec::new(),
            step_turn: None,
            total: None,
            pending_input: Some(ctx.input.clone()),
            conversation: None,
            rounds: 0,
        }
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

    /// Starts a step: `with_step`, `on_step_start`, `step_start`.
    pub(crate) fn begin_step(&mut self) -> u64 {
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
        step
    }

    /// One model call (and its tool round) within the current step. The pending user input
    /// goes first, then `extra`.
    pub(crate) async fn call(
        &mut self,
        llm: &LlmInstance,
        extra: Vec<InferenceInput>,
    ) -> Result<Turn, AgentError> {
        if self.ctx.signal.is_cancelled() {
            return Err(self.cancelled());
        }
        let mut inputs = Vec::with_capacity(extra.len() + 1);
        if let Some(input) = &self.pending_input {
            inputs.push(InferenceInput::Message(input.clone()));
        }
        inputs.extend(extra);
        let signal = self.ctx.signal.child_token();
        let conversation = self.shared_history();
        let result = if self.ctx.events.is_streaming() {
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
            llm.generate_step_shared(conversation, inputs, self.rounds, signal)
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
        self.pending_input = None;
        if tools_ran(&turn) {
            self.rounds += 1;
        }
        self.step_messages.extend(turn.messages.iter().cloned());
        let step_turn = match self.step_turn.take() {
            // The first call of a step: keep the turn without its messages (they are in
            // `step_messages`) and hand the caller the full one.
            None => turn.clone_without_messages(),
            Some(acc) => Turn::fold(Some(acc), turn.clone_without_messages()),
        };
        self.step_turn = Some(step_turn);
        Ok(turn)
    }

    /// The history a model call sees: the state's messages, then the step's own.
    fn history(&self) -> Vec<Message> {
        let mut history = Vec::with_capacity(self.state.message_count() + self.step_messages.len());
        history.extend(self.state.messages().cloned());
        history.extend(self.step_messages.iter().cloned());
        history
    }

    /// The kept conversation when it still mirrors the history, else a fresh one.
    fn shared_history(&mut self) -> std::sync::Arc<Vec<Message>> {
        match self.conversation.take() {
            Some(kept)
                if kept.step_len == self.step_messages.len()
                    && kept.mirrors.ptr_eq(self.state.message_vector()) =>
            {
                kept.messages
            }
            _ => std::sync::Arc::new(self.history()),
        }
    }

    /// Fires `on_act` / `on_observe` and the `action` / `observation` events for a turn.
    pub(crate) fn act_and_observe(&self, step: u64, turn: &Turn) {
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
    /// `step_end`, checkpoints.
    pub(crate) async fn end_step(&mut self, step: u64) {
        let traces = self.ctx.events.take_traces();
        let kept = self.conversation.take().filter(|kept| {
            kept.step_len == self.step_messages.len()
                && kept.mirrors.ptr_eq(self.state.message_vector())
        });
        let messages_of_step = std::mem::take(&mut self.step_messages);
        self.state = self
            .state
            .with_step_result(step, messages_of_step.iter().cloned(), traces);
        // The new state's history is the old one plus exactly this step's messages, which the
        // kept conversation already holds.
        self.conversation = kept.map(|kept| SharedConversation {
            messages: kept.messages,
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
        let usage = checkpointing.then(|| {
            let mut usage = self
                .total
                .as_ref()
                .map(|t| t.usage.clone())
                .unwrap_or_default();
            usage.merge(&result.turn.usage);
            usage
        });
        self.ctx
            .end_step_effects(step, &result, completed, usage)
            .await;
        self.total = Some(Turn::fold(self.total.take(), result.turn));
    }

    /// The result of the run.
    pub(crate) fn finish(self) -> Result<GenerateResult, AgentError> {
        match self.total {
            Some(turn) => Ok(GenerateResult {
                turn,
                state: self.committed,
            }),
            None => Err(AgentError::Strategy {
                name: self.ctx.agent.execution_name().to_owned(),
                message: "the run ended before any model call".into(),
            }),
        }
    }
}
