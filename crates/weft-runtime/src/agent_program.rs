//! The plain agent program ([`crate::spec::AgentProgram`]): one agent, a model, a system
//! prompt and registry tools, run by the durable loop below from the state its latest
//! checkpoint holds.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use weft_agent::checkpoint::CheckpointMode;
use weft_agent::execution::{ExecutionStrategy, StepProgress, Steps};
use weft_agent::{
    AgentError, AgentOptions, AgentState, ExecutionContext, ExecutionResult, GenerateResult,
    RunOptions, agent,
};
use weft_provider::{Message, TokenUsage, Tool, Turn};
use weft_store::Durability;

use crate::error::RunError;
use crate::event::EventKind;
use crate::ledger::RunContext;
use crate::observer::RunObserver;
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
    let mode = match active.spec.durability {
        Durability::Sync => CheckpointMode::Sync,
        Durability::Async => CheckpointMode::Async,
    };
    // Its sub-agent tools run their agents as child runs of the run.
    let child_runs = crate::subagent::SubagentRuns::extension(
        active.ledger.clone(),
        program.policy.clone(),
        active.store.clone(),
        mode,
        model.clone(),
    );
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
        .tools(tools)
        .execution(strategy)
        .checkpoints(active.store.clone())
        .checkpoint_mode(mode)
        .tool_extension(child_runs)
        .session_id(thread);
    for layer in crate::pipeline::layers(&active.ledger, &program.policy) {
        options = options.tool_layer(layer);
    }
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
                .emit(EventKind::Completion {
                    summary: turn.text(),
                    steps: state.step(),
                    reason: None,
                })
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
                .emit(EventKind::Error {
                    message: message.clone(),
                    reason: None,
                })
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
    match state.last_message().as_deref() {
        Some(Message::Assistant(a)) if !a.has_tool_calls() => Some(a.text_content()),
        _ => None,
    }
}

/// The plain agent program's loop: steps ([`Steps`]) until the model stops asking for
/// tools, the stop condition holds or `max_steps` is reached; every step logged in the run
/// ([`RunObserver`]) and given up when a call waits for a decision.
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
        if let Some(Message::Assistant(answer)) = ctx.state.last_message().as_deref()
            && !answer.has_tool_calls()
            && !self.run.queue_waiting().await
        {
            // Finished before the crash: the answer is in the checkpoint. (With work in the
            // thread's queue — a run for the queue, started with no input — a step takes it.)
            let turn = Turn {
                messages: Vec::new(),
                response: answer.clone().into(),
                tool_executions: Vec::new(),
                usage: TokenUsage::default(),
                cycles: 0,
                data: None,
            };
            return Ok(GenerateResult {
                turn,
                state: ctx.state.clone(),
            });
        }
        // The state already ends with the run's input (its initial checkpoint).
        let mut steps = Steps::new(&ctx)
            .input(None)
            .base_usage(self.base_usage.clone())
            .observer(RunObserver::new(self.run.clone(), None));
        loop {
            if self
                .max_steps
                .is_some_and(|max| steps.state().step() >= max)
            {
                break;
            }
            // `advance`: the run never looks at a step's turn (the observer logs it), so the
            // step keeps it without a copy.
            match steps.advance().await? {
                StepProgress::Continue => {
                    if ctx.strategy.should_stop(steps.state()).await {
                        break;
                    }
                }
                StepProgress::Final => break,
                StepProgress::Suspended => {
                    // A call waits for a decision: the resume takes this step again.
                    return Err(AgentError::Cancelled {
                        state: Box::new(steps.committed().clone()),
                    });
                }
            }
        }
        steps.finish().map_err(|_| AgentError::Strategy {
            name: "durable-loop".into(),
            message: "the step limit was reached before any model call".into(),
        })
    }
}
