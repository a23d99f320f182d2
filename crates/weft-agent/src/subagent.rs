//! Sub-agents (UAP-1.0 §8): agents used as tools, always through an explicit [`Tool`] with a
//! schema the developer wrote. Nothing here derives a schema from an agent (UAP-016).
//!
//! * [`ToolExecutionContext`] is what strategies inject into every tool call (through the
//!   UPP `ToolContext::extensions`): parent model and config (for inheritance), agent id,
//!   state id, session id, the event sink, and the parent context for nested runs.
//! * [`SubagentTool`] builds a `Tool` that runs an agent with event propagation
//!   (`subagent_start` / `subagent_event` / `subagent_end`) and trace collection.
//! * [`SubagentEmitter`] is the low-level helper for hand-written sub-agent tools.
//! * [`ChildRunner`] / [`ChildRuns`]: how a runtime that runs the calling agent makes each
//!   sub-agent a **child run** of its run (`weft-runtime` implements it; this crate never
//!   depends on the runtime). When a tool call's `ToolContext::extensions` hold a
//!   [`ChildRuns`], [`SubagentTool`] runs its agent as the child run opens it — its model
//!   calls recorded, its tool calls through the run's whole pipeline, its steps observed —
//!   and ends the child with the outcome. Without one (a bare [`Agent`]) the sub-agent runs
//!   on its own, its tool calls passing the parent's inherited layers
//!   ([`ToolExecutionContext::tool_layers`]).
//!
//! A parent's `stop_condition` is never passed to a sub-agent (UAP-144): the child runs with
//! its own options only.

use std::fmt;
use std::sync::Arc;

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use weft_provider::tool::BoxFuture;
use weft_provider::{
    ModelReference, ProviderConfig, TokenUsage, Tool, ToolContext, ToolError, Turn,
};

use crate::agent::{Agent, RunOptions};
use crate::error::AgentError;
use crate::state::{AgentState, SubagentExecutionTrace, ToolExecutionTrace, new_id};
use crate::strategy::StepObserver;
use crate::stream::{AgentStreamEvent, EventSink, UapEventType};

/// The execution context a strategy hands to tools (UAP-1.0 §3.4, §8.4).
///
/// Read it in a tool with [`ToolExecutionContext::from_tool`].
#[derive(Clone, Debug)]
pub struct ToolExecutionContext {
    /// The calling agent's model (what a model-less sub-agent inherits).
    pub parent_model: ModelReference,
    /// The calling agent's provider configuration.
    pub parent_config: ProviderConfig,
    /// The calling agent's id.
    pub agent_id: String,
    /// The id of the state the run started from.
    pub state_id: String,
    /// The session being checkpointed, if any.
    pub session_id: Option<String>,
    /// The parent's event sink (sub-agent events go here).
    pub events: EventSink,
    /// The context of the tool call that runs the calling agent, for nested runs.
    pub parent: Option<Arc<ToolExecutionContext>>,
    /// Tool-pipeline stages a sub-agent's calls must pass too: the policy of the run the
    /// calling agent belongs to (its hooks, its approvals), at every depth.
    pub tool_layers: Vec<Arc<dyn weft_provider::pipeline::ToolLayer>>,
}

impl ToolExecutionContext {
    /// The context injected into this tool call, if the tool runs under an agent.
    pub fn from_tool(context: &ToolContext) -> Option<&ToolExecutionContext> {
        context.extensions.get::<ToolExecutionContext>()
    }

    /// How deep this call is nested (0 under a top-level agent).
    pub fn depth(&self) -> usize {
        let mut depth = 0;
        let mut current = self.parent.as_deref();
        while let Some(parent) = current {
            depth += 1;
            current = parent.parent.as_deref();
        }
        depth
    }
}

/// How a child run of a sub-agent ended, for [`OpenChild::end`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildOutcome {
    /// The sub-agent's agent returned its result.
    Succeeded,
    /// It failed (or gave up a step whose call waits for a decision: the runner knows
    /// which).
    Failed,
    /// It was stopped from outside (the run's signal): whether its last call had its
    /// effect is unknown, so the child stays open and a resume goes on with it.
    Interrupted,
}

/// A runtime that runs sub-agents as child runs of its run (implemented by `weft-runtime`).
///
/// [`SubagentTool`] finds it in its call's `ToolContext::extensions` (as [`ChildRuns`]) and
/// asks it to [open](ChildRunner::open) the child: the runtime gives back the sub-agent's
/// agent bound to the child run and, once the agent has run, [ends](OpenChild::end) it.
pub trait ChildRunner: Send + Sync {
    /// Opens the child run of the sub-agent `name` (its type) running `agent`, for the tool
    /// call `call` (whose extensions carry the call's position in the run).
    ///
    /// # Errors
    /// When the child cannot be opened (storage, a model that cannot be bound): the call
    /// fails with it.
    fn open<'a>(
        &'a self,
        name: &'a str,
        agent: &'a Agent,
        call: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Box<dyn OpenChild>, ToolError>>;

    /// The calling agent's model as the runtime binds it for a child (not wrapped for its
    /// own recording): what a sub-agent that inherits its model gets (UAP-073).
    fn model(&self) -> &ModelReference;
}

/// A child run opened by a [`ChildRunner`].
pub trait OpenChild: Send {
    /// The sub-agent's agent bound to the child run.
    fn agent(&self) -> &Agent;

    /// Who hears the child's steps ([`RunOptions::observer`]).
    fn observer(&self) -> Option<Arc<dyn StepObserver>>;

    /// Ends the child run with `outcome`.
    ///
    /// # Errors
    /// When the call must not end now: the child waits for a person's decision (the run
    /// suspends and the call runs again on resume), or it was interrupted. The error is
    /// the call's.
    fn end(self: Box<Self>, outcome: ChildOutcome) -> BoxFuture<'static, Result<(), ToolError>>;
}

/// The [`ChildRunner`] of the run a tool call belongs to, in its `ToolContext::extensions`
/// (a runtime adds it to the tools of every agent it runs, at every depth).
#[derive(Clone)]
pub struct ChildRuns(pub Arc<dyn ChildRunner>);

impl fmt::Debug for ChildRuns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ChildRuns(..)")
    }
}

impl ChildRuns {
    /// The child runner of the tool call `context`, if it runs inside a runtime's run.
    pub fn from_tool(context: &ToolContext) -> Option<&ChildRuns> {
        context.extensions.get::<ChildRuns>()
    }
}

/// `(success, result, error, tool executions, usage)` of one sub-agent run.
type Outcome = (
    bool,
    Option<String>,
    Option<String>,
    Option<Vec<ToolExecutionTrace>>,
    Option<TokenUsage>,
);

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Emits the sub-agent events of one sub-agent run into the parent's sink and records its
/// trace (UAP-1.0 §8.7, §8.8).
#[derive(Debug, Clone)]
pub struct SubagentEmitter {
    sink: EventSink,
    /// This run's sub-agent id (UUIDv4).
    pub subagent_id: String,
    /// The sub-agent's type.
    pub subagent_type: String,
    /// The tool call that spawned it.
    pub parent_tool_call_id: String,
    prompt: String,
    start_time: i64,
}

impl SubagentEmitter {
    /// Emits `subagent_start` and returns the emitter. Call it before the sub-agent starts.
    pub fn start(
        sink: &EventSink,
        subagent_type: impl Into<String>,
        parent_tool_call_id: impl Into<String>,
        prompt: impl Into<String>,
    ) -> Self {
        let emitter = SubagentEmitter {
            sink: sink.clone(),
            subagent_id: new_id(),
            subagent_type: subagent_type.into(),
            parent_tool_call_id: parent_tool_call_id.into(),
            prompt: prompt.into(),
            start_time: now_ms(),
        };
        emitter.emit(
            UapEventType::SubagentStart,
            json!({ "prompt": emitter.prompt, "timestamp": emitter.start_time }),
        );
        emitter
    }

    fn emit(&self, event_type: UapEventType, extra: Value) {
        if !self.sink.is_streaming() {
            return;
        }
        let mut data = json!({
            "subagentId": self.subagent_id,
            "subagentType": self.subagent_type,
            "parentToolCallId": self.parent_tool_call_id,
        });
        if let (Value::Object(data), Value::Object(extra)) = (&mut data, extra) {
            data.extend(extra);
        }
        self.sink
            .emit_uap(event_type, self.sink.current_step(), data);
    }

    /// Forwards one event of the sub-agent as `subagent_event`.
    pub fn forward(&self, inner: &AgentStreamEvent) {
        if self.sink.is_streaming() {
            let inner = serde_json::to_value(inner).unwrap_or(Value::Null);
            self.emit(UapEventType::SubagentEvent, json!({ "innerEvent": inner }));
        }
    }

    /// Emits `subagent_end` for `outcome` and records the trace in the parent's state.
    pub fn end(self, outcome: Result<&Turn, &str>) -> SubagentExecutionTrace {
        let end_time = now_ms();
        let (success, result, error, executions, usage): Outcome = match outcome {
            Ok(turn) => (
                true,
                Some(turn.text()),
                None,
                Some(
                    turn.tool_executions
                        .iter()
                        .map(ToolExecutionTrace::from)
                        .collect(),
                ),
                Some(turn.usage.clone()),
            ),
            Err(message) => (false, None, Some(message.to_owned()), None, None),
        };
        let trace = SubagentExecutionTrace {
            subagent_id: self.subagent_id.clone(),
            subagent_type: self.subagent_type.clone(),
            parent_tool_call_id: self.parent_tool_call_id.clone(),
            prompt: self.prompt.clone(),
            start_time: self.start_time,
            end_time,
            success,
            result,
            error,
            tool_executions: executions,
            usage,
        };
        let mut data = json!({ "success": success, "timestamp": end_time });
        if let Value::Object(map) = &mut data {
            if let Some(result) = &trace.result {
                map.insert("result".into(), json!(result));
            }
            if let Some(error) = &trace.error {
                map.insert("error".into(), json!(error));
            }
            if let Some(executions) = &trace.tool_executions {
                map.insert("toolExecutions".into(), json!(executions));
            }
            if let Some(usage) = &trace.usage {
                map.insert("usage".into(), json!(usage));
            }
        }
        self.emit(UapEventType::SubagentEnd, data);
        self.sink.record_trace(trace.clone());
        trace
    }
}

type PromptFn = dyn Fn(&Value) -> Result<String, ToolError> + Send + Sync;
type AgentFactory =
    dyn Fn(&ModelReference, &ProviderConfig) -> Result<Agent, AgentError> + Send + Sync;

/// Which agent a sub-agent tool runs.
#[derive(Clone)]
pub enum SubagentSource {
    /// This agent, with its own model (UAP-072).
    Agent(Agent),
    /// An agent built at execution time from the parent's model and config (UAP-073).
    Inherit(Arc<AgentFactory>),
}

impl fmt::Debug for SubagentSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubagentSource::Agent(agent) => f.debug_tuple("Agent").field(agent).finish(),
            SubagentSource::Inherit(_) => f.write_str("Inherit(..)"),
        }
    }
}

/// Builds a `Tool` that runs a sub-agent with event propagation and traces (UAP-088).
///
/// The schema is yours: `SubagentTool` never looks at the agent to make one.
///
/// # Examples
///
/// ```
/// use serde_json::json;
/// use weft_agent::{agent, AgentOptions, SubagentTool};
/// use weft_provider::adapters::scripted::{self, Script};
///
/// let explorer = agent(AgentOptions::new(scripted::model(Script::texts(["src/main.rs"])))
///     .system("You explore codebases."))?;
/// let tool = SubagentTool::new(
///     "explore",
///     "Explore the codebase to find relevant files",
///     json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
///     explorer,
/// )
/// .subagent_type("explorer")
/// .prompt_from("query")
/// .build();
/// assert_eq!(tool.name, "explore");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct SubagentTool {
    name: String,
    description: String,
    parameters: Value,
    subagent_type: String,
    source: SubagentSource,
    prompt: Arc<PromptFn>,
}

impl fmt::Debug for SubagentTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubagentTool")
            .field("name", &self.name)
            .field("subagent_type", &self.subagent_type)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl SubagentTool {
    /// A sub-agent tool running `agent` (its own model). The prompt is the `prompt`, `query`
    /// or `task` argument by default.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        agent: Agent,
    ) -> Self {
        SubagentTool::with_source(name, description, parameters, SubagentSource::Agent(agent))
    }

    /// A sub-agent tool whose agent is built when it runs, from the parent's model and
    /// config (inheritance, UAP-1.0 §8.4).
    pub fn inheriting(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        factory: impl Fn(&ModelReference, &ProviderConfig) -> Result<Agent, AgentError>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        SubagentTool::with_source(
            name,
            description,
            parameters,
            SubagentSource::Inherit(Arc::new(factory)),
        )
    }

    fn with_source(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        source: SubagentSource,
    ) -> Self {
        let name = name.into();
        SubagentTool {
            subagent_type: name.clone(),
            name,
            description: description.into(),
            parameters,
            source,
            prompt: Arc::new(default_prompt),
        }
    }

    /// Sets the sub-agent type reported in events and traces (default: the tool name).
    #[must_use]
    pub fn subagent_type(mut self, subagent_type: impl Into<String>) -> Self {
        self.subagent_type = subagent_type.into();
        self
    }

    /// Builds the prompt from the arguments.
    #[must_use]
    pub fn prompt(
        mut self,
        prompt: impl Fn(&Value) -> Result<String, ToolError> + Send + Sync + 'static,
    ) -> Self {
        self.prompt = Arc::new(prompt);
        self
    }

    /// Uses the string argument `field` as the prompt.
    #[must_use]
    pub fn prompt_from(self, field: &str) -> Self {
        let field = field.to_owned();
        self.prompt(move |args| {
            args.get(&field)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| ToolError::new(format!("the argument {field:?} must be a string")))
        })
    }

    /// The tool.
    pub fn build(self) -> Tool {
        let SubagentTool {
            name,
            description,
            parameters,
            subagent_type,
            source,
            prompt,
        } = self;
        Tool::new(
            name,
            description,
            parameters,
            move |args: Value, context: ToolContext| {
                let subagent_type = subagent_type.clone();
                let source = source.clone();
                let prompt = prompt(&args);
                async move {
                    let prompt = prompt?;
                    run_subagent(source, subagent_type, prompt, context).await
                }
            },
        )
    }
}

fn default_prompt(args: &Value) -> Result<String, ToolError> {
    ["prompt", "query", "task"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map(str::to_owned)
        .ok_or_else(|| ToolError::new("expected a string argument `prompt`, `query` or `task`"))
}

async fn run_subagent(
    source: SubagentSource,
    subagent_type: String,
    prompt: String,
    context: ToolContext,
) -> Result<Value, ToolError> {
    let parent = ToolExecutionContext::from_tool(&context).cloned();
    let runs = ChildRuns::from_tool(&context).cloned();
    let sink = parent
        .as_ref()
        .map(|p| p.events.clone())
        .unwrap_or_else(|| EventSink::silent("none"));
    let emitter = SubagentEmitter::start(&sink, &subagent_type, &context.tool_call_id, &prompt);
    let child = match &source {
        SubagentSource::Agent(agent) => Ok(agent.clone()),
        SubagentSource::Inherit(factory) => {
            // Inside a run, the parent's model as the runtime binds it (the parent's own is
            // wrapped to record under the parent's thread).
            let model = runs.as_ref().map(|r| r.0.model().clone());
            match &parent {
                Some(parent) => factory(
                    model.as_ref().unwrap_or(&parent.parent_model),
                    &parent.parent_config,
                )
                .map_err(|e| e.to_string()),
                None => {
                    Err("this sub-agent inherits its model but runs outside an agent".to_owned())
                }
            }
        }
    };
    let child = match child {
        Ok(child) => child,
        Err(message) => {
            emitter.end(Err(&message));
            return Err(ToolError::new(message));
        }
    };
    // Inside a runtime's run: a child run of it.
    let opened = match &runs {
        Some(runs) => match runs.0.open(&subagent_type, &child, &context).await {
            Ok(opened) => Some(opened),
            Err(error) => {
                emitter.end(Err(&error.message));
                return Err(error);
            }
        },
        None => None,
    };
    let (child, observer, parent) = match &opened {
        Some(opened) => {
            // The child run's agent has the run's layers for its own context already.
            let parent = parent.map(|mut p| {
                p.tool_layers.clear();
                p
            });
            (opened.agent().clone(), opened.observer(), parent)
        }
        None => (child, None, parent),
    };
    let signal = context.signal.child_token();
    let options = RunOptions {
        signal: signal.clone(),
        parent_context: parent.map(Arc::new),
        // A child run's conversation is checkpointed under its thread.
        checkpoints: opened.is_some(),
        observer,
    };
    let initial = AgentState::initial();
    let result = if sink.is_streaming() {
        let mut stream = child.stream_with(prompt.as_str(), &initial, options);
        while let Some(event) = stream.next().await {
            emitter.forward(&event);
        }
        stream.result().await
    } else {
        child
            .generate_with(prompt.as_str(), &initial, options)
            .await
    };
    if let Some(opened) = opened {
        // (A step given up for a decision ends the agent too: the runner knows it by the
        // decision, whatever the agent returned.)
        // A child that finished keeps its result even when the parent is stopped right after.
        let outcome = match &result {
            Ok(_) => ChildOutcome::Succeeded,
            Err(_) if signal.is_cancelled() => ChildOutcome::Interrupted,
            Err(_) => ChildOutcome::Failed,
        };
        if let Err(error) = opened.end(outcome).await {
            emitter.end(Err(&error.message));
            return Err(error);
        }
    }
    match result {
        Ok(result) => {
            let text = result.turn.text();
            emitter.end(Ok(&result.turn));
            Ok(Value::String(text))
        }
        Err(error) => {
            let message = error.to_string();
            emitter.end(Err(&message));
            Err(ToolError::new(format!(
                "sub-agent {subagent_type} failed: {message}"
            )))
        }
    }
}
