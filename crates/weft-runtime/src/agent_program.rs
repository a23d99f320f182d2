//! The plain agent program ([`crate::spec::AgentProgram`]): one agent, a model, a system
//! prompt and registry tools, run by the durable loop below from the state its latest
//! checkpoint holds.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use weft_agent::checkpoint::CheckpointMode;
use weft_agent::execution::ExecutionStrategy;
use weft_agent::{
    AgentError, AgentOptions, AgentState, ExecutionContext, ExecutionResult, GenerateResult,
    RunOptions, agent,
};
use weft_provider::{Message, TokenUsage, Tool, Turn};
use weft_store::{Durability, event_type};

use crate::error::RunError;
use crate::ledger::{DurableTool, RunContext};
use crate::run::{ActiveRun, EndStatus, ProgramEnd};
use crate::spec::{AgentProgram, ToolSpec};

type ToolFactory = dyn Fn(&Value) -> Result<Tool, String> + Send + Sync;

/// Tools by name, so a recorded [`AgentProgram`] can rebuild them in any process.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    factories: HashMap<String, Arc<ToolFactory>>,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.factories.keys()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        ToolRegistry::default()
    }

    /// The registry with weft-store's demo tool (`append_line`), for tests and demos.
    pub fn with_builtins() -> Self {
        let mut registry = ToolRegistry::new();
        registry.register(
            weft_store::testing::APPEND_LINE,
            weft_store::testing::append_line_tool,
        );
        registry
    }

    /// Registers a factory under `name`.
    pub fn register(
        &mut self,
        name: impl Into<String>,
        factory: impl Fn(&Value) -> Result<Tool, String> + Send + Sync + 'static,
    ) {
        self.factories.insert(name.into(), Arc::new(factory));
    }

    pub(crate) fn build(&self, spec: &ToolSpec) -> Result<Tool, RunError> {
        let factory = self
            .factories
            .get(&spec.name)
            .ok_or_else(|| RunError::UnknownTool(spec.name.clone()))?;
        factory(&spec.config).map_err(|message| RunError::ToolConfig {
            tool: spec.name.clone(),
            message,
        })
    }
}

/// Runs (or goes on with) an agent program.
pub(crate) async fn run(
    program: &AgentProgram,
    tools: Vec<Tool>,
    active: ActiveRun,
) -> Result<ProgramEnd, RunError> {
    let model = active
        .providers
        .resolve(&program.model)
        .map_err(|e| RunError::Agent(e.to_string()))?;
    let thread = active.record.thread_id.clone();
    let model = active
        .model(&model, &thread)
        .map_err(|e| RunError::Agent(e.to_string()))?;
    let base = active.base_usage.clone();
    let strategy = DurableLoop {
        run: active.ledger.clone(),
        max_steps: program.max_steps,
        base_usage: base.clone(),
    };
    let mut options = AgentOptions::new(model)
        .tools(
            tools
                .into_iter()
                .map(|t| DurableTool::wrap(t, active.ledger.clone())),
        )
        .execution(strategy)
        .checkpoints(active.store.clone())
        .checkpoint_mode(match active.spec.durability {
            Durability::Sync => CheckpointMode::Sync,
            Durability::Async => CheckpointMode::Async,
        })
        .session_id(thread);
    if let Some(system) = &program.system {
        options = options.system(system.clone());
    }
    let agent = agent(options).map_err(|e| RunError::Agent(e.to_string()))?;
    let state = active.state.clone();
    let steps_before = state.step();
    let result = agent
        .generate_with(
            Message::user(""),
            &state,
            RunOptions {
                signal: active.signal.clone(),
                ..RunOptions::default()
            },
        )
        .await;
    agent.flush_checkpoints().await;
    Ok(match result {
        Ok(GenerateResult { turn, state }) => {
            let mut usage = base;
            usage.merge(&turn.usage);
            active
                .ledger
                .event(
                    event_type::COMPLETION,
                    None,
                    json!({"summary": turn.text(), "steps": state.step()}),
                )
                .await;
            ProgramEnd {
                status: EndStatus::Completed,
                message: final_text(&state).unwrap_or_else(|| turn.text()),
                steps: state.step(),
                steps_before,
                usage,
            }
        }
        Err(AgentError::Cancelled { state }) => ProgramEnd {
            status: EndStatus::Interrupted,
            message: String::new(),
            steps: state.step(),
            steps_before,
            usage: base,
        },
        // Stopped from outside (an abort, a lost lease): resumable, not failed.
        Err(_) if active.signal.is_cancelled() => ProgramEnd {
            status: EndStatus::Interrupted,
            message: String::new(),
            steps: steps_before,
            steps_before,
            usage: base,
        },
        Err(error) => {
            let message = error.to_string();
            active
                .ledger
                .event(event_type::ERROR, None, json!({"message": message}))
                .await;
            ProgramEnd {
                status: EndStatus::Failed,
                message,
                steps: steps_before,
                steps_before,
                usage: base,
            }
        }
    })
}

/// The text of the final assistant message, when the state ends with one.
fn final_text(state: &AgentState) -> Option<String> {
    match state.messages().last() {
        Some(Message::Assistant(a)) if !a.has_tool_calls() => Some(a.text_content()),
        _ => None,
    }
}

#[derive(Debug)]
pub(crate) struct DurableLoop {
    run: Arc<RunContext>,
    max_steps: Option<u64>,
    base_usage: TokenUsage,
}

#[async_trait]
impl ExecutionStrategy for DurableLoop {
    fn name(&self) -> &str {
        "durable-loop"
    }

    async fn execute(&self, ctx: ExecutionContext) -> Result<ExecutionResult, AgentError> {
        let mut state = ctx.state.clone();
        let mut total: Option<Turn> = None;
        let mut usage = self.base_usage.clone();
        let mut rounds = 0u32;
        let mut conversation: Option<Arc<Vec<Message>>> = None;
        if let Some(text) = final_text(&state) {
            // Finished before the crash: the answer is in the checkpoint.
            let turn = Turn {
                messages: Vec::new(),
                response: match state.messages().last() {
                    Some(Message::Assistant(a)) => a.clone(),
                    _ => return Err(AgentError::Config(text)),
                },
                tool_executions: Vec::new(),
                usage: TokenUsage::default(),
                cycles: 0,
                data: None,
            };
            return Ok(GenerateResult { turn, state });
        }
        loop {
            if self.max_steps.is_some_and(|max| state.step() >= max) {
                break;
            }
            let step = state.step() + 1;
            state = state.with_step(step);
            self.run.begin_turn(step);
            self.run
                .event(
                    event_type::TURN_START,
                    None,
                    json!({"messages": state.message_count()}),
                )
                .await;
            ctx.strategy.step_start(step, &state);
            // The provider's conversation is kept between steps (the state only grows by
            // each step's messages here): no step copies the history.
            let history = conversation
                .take()
                .unwrap_or_else(|| Arc::new(state.messages_vec()));
            let (turn, kept) = ctx
                .llm
                .generate_step_shared(history, (), rounds, ctx.signal.child_token())
                .await?;
            conversation = Some(kept);
            state = state.with_messages(turn.messages.iter().cloned());
            usage.merge(&turn.usage);
            usage.cycles = None;
            let result = GenerateResult {
                turn: turn.clone(),
                state: state.clone(),
            };
            ctx.strategy.step_end(step, &result);
            ctx.save_checkpoint(&state, turn.tool_executions.clone(), Some(usage.clone()))
                .await;
            // The run's cost so far, each call at its recorded price (null: unknown).
            let cost = self.run.spent_cost();
            self.run
                .event(
                    event_type::TURN_END,
                    None,
                    json!({"toolCalls": turn.tool_executions.len(), "inputTokens": usage.input_tokens,
                           "outputTokens": usage.output_tokens, "cost": cost}),
                )
                .await;
            self.run
                .event(
                    event_type::CHECKPOINT,
                    None,
                    json!({"agentStep": step, "messages": state.message_count()}),
                )
                .await;
            let tools_ran = turn.response.has_tool_calls()
                && turn.messages.last().is_some_and(Message::is_tool_result);
            total = Some(Turn::fold(total, turn));
            if !tools_ran || ctx.strategy.should_stop(&state).await {
                break;
            }
            rounds += 1;
        }
        match total {
            Some(turn) => Ok(GenerateResult { turn, state }),
            None => Err(AgentError::Strategy {
                name: "durable-loop".into(),
                message: "the step limit was reached before any model call".into(),
            }),
        }
    }
}
