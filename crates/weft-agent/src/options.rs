//! `AgentOptions`: everything `agent()` takes (UAP-1.0 §4.2, §13.2).
//!
//! `AgentOptions` extends `LlmOptions` by containing it: the [`AgentOptions::llm`] field is a
//! UPP `LlmOptions`, handed to `llm()` unchanged, so every current and future `llm()` option
//! works on an agent (UAP-026). The builder methods below mirror the common ones.
//!
//! # Limits
//!
//! UAP is unbounded by default (§2.4). [`AgentOptions::new`] therefore starts from
//! `ToolUseStrategy::unbounded()` (`max_iterations: None`), unlike a bare
//! `LlmOptions::new`, which keeps UPP's 10. A strategy you set yourself is used as is: build it
//! from `ToolUseStrategy::unbounded()` (not `ToolUseStrategy::default()`, which is UPP's 10)
//! when you only want hooks.

use std::any::Any;
use std::sync::Arc;

use serde_json::Value;
use weft_provider::{
    ExecutionMode, LlmOptions, ModelReference, ProviderConfig, Tool, ToolUseStrategy,
};

use crate::agent::Agent;
use crate::checkpoint::{CheckpointMode, CheckpointStore};
use crate::error::AgentError;
use crate::hooks::AgentStrategy;
use crate::middleware::Middleware;
use crate::strategy::{ExecutionStrategy, LoopStrategy};

/// Options of [`crate::agent()`]. Only the model is required.
///
/// # Examples
///
/// ```
/// use weft_agent::{agent, AgentOptions, execution};
/// use weft_provider::adapters::scripted::{self, Script};
///
/// let coder = agent(
///     AgentOptions::new(scripted::model(Script::texts(["Hello!"])))
///         .system("You are a coding assistant.")
///         .execution(execution::react(Default::default())),
/// )?;
/// assert_eq!(coder.system(), Some("You are a coding assistant."));
/// assert_eq!(coder.llm_options().tool_strategy.max_iterations, None); // unbounded
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// The `llm()` options, passed through unchanged: model, config, params, system, tools,
    /// structure, tool strategy, execution mode, tool extensions.
    pub llm: LlmOptions,
    /// The execution strategy (default `loop()`).
    pub execution: Arc<dyn ExecutionStrategy>,
    /// The middleware pipeline, in order.
    pub middleware: Vec<Arc<dyn Middleware>>,
    /// Lifecycle hooks.
    pub strategy: AgentStrategy,
    /// Where checkpoints go after every step.
    pub checkpoints: Option<Arc<dyn CheckpointStore>>,
    /// Fire-and-forget (default) or awaited checkpoint saves.
    pub checkpoint_mode: CheckpointMode,
    /// The session id; generated (UUIDv4) when checkpoints are set and this is not.
    pub session_id: Option<String>,
}

impl From<LlmOptions> for AgentOptions {
    /// Agent options around existing `llm()` options, taken unchanged (their tool strategy
    /// included).
    fn from(llm: LlmOptions) -> Self {
        AgentOptions {
            llm,
            execution: Arc::new(LoopStrategy::default()),
            middleware: Vec::new(),
            strategy: AgentStrategy::default(),
            checkpoints: None,
            checkpoint_mode: CheckpointMode::default(),
            session_id: None,
        }
    }
}

impl AgentOptions {
    /// Options for `model`, unbounded tool loop, `loop()` execution.
    pub fn new(model: ModelReference) -> Self {
        // The agent layer checks tool arguments against their schemas (stage 1 of the tool
        // pipeline): a mismatch is an error result the model can correct.
        AgentOptions::from(
            LlmOptions::new(model)
                .tool_strategy(ToolUseStrategy::unbounded())
                .validate_arguments(true),
        )
    }

    /// Builds the agent (same as [`crate::agent()`]).
    ///
    /// # Errors
    /// As [`crate::agent()`].
    pub fn build(self) -> Result<Agent, AgentError> {
        Agent::from_options(self)
    }

    /// Sets the system prompt.
    #[must_use]
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.llm.system = Some(system.into());
        self
    }

    /// Adds a tool.
    #[must_use]
    pub fn tool(mut self, tool: Tool) -> Self {
        self.llm.tools.push(tool);
        self
    }

    /// Adds tools.
    #[must_use]
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.llm.tools.extend(tools);
        self
    }

    /// Sets one vendor parameter.
    #[must_use]
    pub fn param(mut self, key: impl Into<String>, value: Value) -> Self {
        self.llm = self.llm.param(key, value);
        self
    }

    /// Sets the provider configuration.
    #[must_use]
    pub fn config(mut self, config: ProviderConfig) -> Self {
        self.llm.config = config;
        self
    }

    /// Sets the structured-output schema.
    #[must_use]
    pub fn structure(mut self, schema: Value) -> Self {
        self.llm.structure = Some(schema);
        self
    }

    /// Sets the UPP tool strategy, passed to `llm()` unchanged.
    #[must_use]
    pub fn tool_strategy(mut self, strategy: ToolUseStrategy) -> Self {
        self.llm.tool_strategy = strategy;
        self
    }

    /// Sets how the calls of one tool round are scheduled (parallel by default).
    #[must_use]
    pub fn execution_mode(mut self, mode: ExecutionMode) -> Self {
        self.llm.execution_mode = mode;
        self
    }

    /// Adds a stage to the tool pipeline of every model call of the agent (see
    /// [`weft_provider::pipeline`]): the runtime's replay, policy, hooks, approval and record
    /// layers come in here.
    #[must_use]
    pub fn tool_layer(mut self, layer: Arc<dyn weft_provider::pipeline::ToolLayer>) -> Self {
        self.llm.tool_layers.push(layer);
        self
    }

    /// Shows every streamed event of the agent's model calls to `tap`, on the task that
    /// produces it (see [`weft_provider::StreamTap`]).
    #[must_use]
    pub fn stream_tap(mut self, tap: weft_provider::StreamTap) -> Self {
        self.llm.stream_tap = Some(tap);
        self
    }

    /// Adds a value every tool receives in its `ToolContext::extensions`.
    #[must_use]
    pub fn tool_extension<T: Any + Send + Sync>(mut self, value: T) -> Self {
        self.llm.tool_extensions.insert(value);
        self
    }

    /// Sets the execution strategy.
    #[must_use]
    pub fn execution(mut self, strategy: impl ExecutionStrategy + 'static) -> Self {
        self.execution = Arc::new(strategy);
        self
    }

    /// Sets a shared execution strategy.
    #[must_use]
    pub fn execution_arc(mut self, strategy: Arc<dyn ExecutionStrategy>) -> Self {
        self.execution = strategy;
        self
    }

    /// Appends a middleware.
    #[must_use]
    pub fn middleware(mut self, middleware: impl Middleware + 'static) -> Self {
        self.middleware.push(Arc::new(middleware));
        self
    }

    /// Sets the lifecycle hooks.
    #[must_use]
    pub fn strategy(mut self, strategy: AgentStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Enables checkpointing into `store`.
    #[must_use]
    pub fn checkpoints(mut self, store: impl CheckpointStore + 'static) -> Self {
        self.checkpoints = Some(Arc::new(store));
        self
    }

    /// Enables checkpointing into a shared store.
    #[must_use]
    pub fn checkpoints_arc(mut self, store: Arc<dyn CheckpointStore>) -> Self {
        self.checkpoints = Some(store);
        self
    }

    /// Sets the checkpoint durability.
    #[must_use]
    pub fn checkpoint_mode(mut self, mode: CheckpointMode) -> Self {
        self.checkpoint_mode = mode;
        self
    }

    /// Sets the session id.
    #[must_use]
    pub fn session_id(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }
}
