//! `llm()`: the LLM entry point and its tool loop (UPP-1.2 §5).
//!
//! The core owns everything that is not one provider request: input conversion, capability
//! checks, the tool loop (§5.8), usage aggregation, structured-output parsing, streaming event
//! order (§9.6) and abort (§9.5). `generate` and `stream` run the same loop, so the same
//! exchange yields equal turns.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;
use futures_util::StreamExt as _;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::config::ProviderConfig;
use crate::content::ContentBlock;
use crate::error::{ErrorCode, Modality, UppError};
use crate::executor::{ExecutionMode, RoundContext, run_round};
use crate::message::{AssistantMessage, Message, ToolResultMessage, UserMessage};
use crate::pipeline::{Pipeline, ToolLayer};
use crate::provider::{
    LlmCapabilities, LlmModel, LlmRequest, LlmResponse, LlmStreamPart, ModelReference,
};
use crate::strategy::ToolUseStrategy;
use crate::stream::StreamEvent;
use crate::tool::{Extensions, Tool};
use crate::tool_choice::ToolChoice;
use crate::turn::{TokenUsage, Turn, TurnResponse};

/// Options of `llm()` (§5.2). Only `model` is required.
#[derive(Debug, Clone)]
pub struct LlmOptions {
    /// The model to use.
    pub model: ModelReference,
    /// Provider configuration (key, base URL, timeout, retries, headers).
    pub config: ProviderConfig,
    /// Vendor parameters, passed through unchanged (e.g. `max_tokens`, `temperature`).
    pub params: Option<serde_json::Map<String, Value>>,
    /// The system prompt.
    pub system: Option<String>,
    /// Function tools. With none, tool calls the model makes anyway are not run: the turn
    /// ends with them in `Turn::response.tool_calls`, as with `max_iterations: Some(0)`.
    pub tools: Vec<Tool>,
    /// Tool loop limits and hooks (`max_iterations` 10 by default).
    pub tool_strategy: ToolUseStrategy,
    /// JSON Schema (root `type: "object"`) for structured output; parsed into `Turn::data`.
    pub structure: Option<Value>,
    /// How the calls of one round are scheduled (parallel by default).
    pub execution_mode: ExecutionMode,
    /// Values handed to every tool in its [`crate::ToolContext`].
    pub tool_extensions: Extensions,
    /// Check every call's arguments against its tool's JSON Schema before running it; a
    /// call that does not match gets an error result naming what is wrong, which the model
    /// can correct. Off by default (UPP-1.2's `llm()` does not validate); the agent layer
    /// and the runtime turn it on.
    pub validate_arguments: bool,
    /// Extra stages of the tool pipeline (see [`crate::pipeline`]): the runtime's replay,
    /// policy, hooks, approval and record layers. Sorted by stage when the instance is built.
    pub tool_layers: Vec<Arc<dyn ToolLayer>>,
    /// Sees every event of a streamed generation on the task that produces it, before the
    /// event is sent on (and before the tools of its round run).
    pub stream_tap: Option<StreamTap>,
    /// The names of the tools sent to the model (`None`: every tool of `tools`). A tool of
    /// `tools` that is not offered stays callable: a call of it passes the tool pipeline,
    /// whose policy stage can refuse it with a reason the model reads (the runtime profile's
    /// SOP phases offer a phase's tools only and explain why another one may not run).
    pub offered: Option<Vec<String>>,
    /// Whether, and which, offered tools the model must call ([`ToolChoice::Auto`] by
    /// default). Each adapter maps it to its wire format; a `tool_choice` the caller set in
    /// `params` wins (see [`crate::tool_choice`]). `Required` and `Tool(name)` need the
    /// tool(s) offered, or [`llm`] refuses the options.
    pub tool_choice: ToolChoice,
}

/// A function that sees each event of a streamed generation where it is produced: on the
/// generating task, in order with the tool calls of that task (which the stream's reader
/// sees only later). The runtime logs streamed text through it, so a step's text is logged
/// before the calls the step makes.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use weft_provider::{LlmOptions, StreamTap};
/// # fn demo(model: weft_provider::provider::ModelReference) {
/// let options = LlmOptions::new(model).stream_tap(StreamTap::new(|event| println!("{:?}", event.event_type)));
/// # }
/// ```
#[derive(Clone)]
pub struct StreamTap(Arc<dyn Fn(&StreamEvent) + Send + Sync>);

impl StreamTap {
    /// A tap calling `f`.
    pub fn new(f: impl Fn(&StreamEvent) + Send + Sync + 'static) -> Self {
        StreamTap(Arc::new(f))
    }

    /// Shows `event` to the tap.
    pub fn see(&self, event: &StreamEvent) {
        (self.0)(event);
    }
}

impl std::fmt::Debug for StreamTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamTap")
    }
}

impl LlmOptions {
    /// Options with only the model set.
    pub fn new(model: ModelReference) -> Self {
        LlmOptions {
            model,
            config: ProviderConfig::default(),
            params: None,
            system: None,
            tools: Vec::new(),
            tool_strategy: ToolUseStrategy::default(),
            structure: None,
            execution_mode: ExecutionMode::Parallel,
            tool_extensions: Extensions::new(),
            validate_arguments: false,
            tool_layers: Vec::new(),
            stream_tap: None,
            offered: None,
            tool_choice: ToolChoice::Auto,
        }
    }

    /// Sets whether, and which, tools the model must call (see [`LlmOptions::tool_choice`]).
    #[must_use]
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = choice;
        self
    }

    /// Sends only the tools named in `names` to the model (see [`LlmOptions::offered`]).
    #[must_use]
    pub fn offer_only(mut self, names: Vec<String>) -> Self {
        self.offered = Some(names);
        self
    }

    /// Shows every streamed event to `tap` where it is produced (see [`StreamTap`]).
    #[must_use]
    pub fn stream_tap(mut self, tap: StreamTap) -> Self {
        self.stream_tap = Some(tap);
        self
    }

    /// Adds a stage to the tool pipeline (see [`crate::pipeline`]).
    #[must_use]
    pub fn tool_layer(mut self, layer: Arc<dyn ToolLayer>) -> Self {
        self.tool_layers.push(layer);
        self
    }

    /// Validates tool arguments against their schemas (see
    /// [`LlmOptions::validate_arguments`]).
    #[must_use]
    pub fn validate_arguments(mut self, validate: bool) -> Self {
        self.validate_arguments = validate;
        self
    }

    /// Sets the system prompt.
    #[must_use]
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Adds a tool.
    #[must_use]
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Sets the tool strategy.
    #[must_use]
    pub fn tool_strategy(mut self, strategy: ToolUseStrategy) -> Self {
        self.tool_strategy = strategy;
        self
    }

    /// Sets the configuration.
    #[must_use]
    pub fn config(mut self, config: ProviderConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets one vendor parameter.
    #[must_use]
    pub fn param(mut self, key: impl Into<String>, value: Value) -> Self {
        self.params
            .get_or_insert_with(Default::default)
            .insert(key.into(), value);
        self
    }

    /// Sets the structured-output schema.
    #[must_use]
    pub fn structure(mut self, schema: Value) -> Self {
        self.structure = Some(schema);
        self
    }

    /// Sets the execution mode of tool rounds.
    #[must_use]
    pub fn execution_mode(mut self, mode: ExecutionMode) -> Self {
        self.execution_mode = mode;
        self
    }
}

/// One input of `generate`/`stream` (§5.3 `InferenceInput`).
#[derive(Debug, Clone, PartialEq)]
pub enum InferenceInput {
    /// Text, becoming a text block of a user message.
    Text(String),
    /// A whole message, appended as is.
    Message(Message),
    /// A content block of a user message.
    Block(ContentBlock),
}

/// Anything that can be the inputs of one call: a string, a block, a message, or a list.
pub trait IntoInputs {
    /// The inputs, in order.
    fn into_inputs(self) -> Vec<InferenceInput>;
}

impl IntoInputs for InferenceInput {
    fn into_inputs(self) -> Vec<InferenceInput> {
        vec![self]
    }
}
impl IntoInputs for &str {
    fn into_inputs(self) -> Vec<InferenceInput> {
        vec![InferenceInput::Text(self.to_owned())]
    }
}
impl IntoInputs for String {
    fn into_inputs(self) -> Vec<InferenceInput> {
        vec![InferenceInput::Text(self)]
    }
}
impl IntoInputs for &String {
    fn into_inputs(self) -> Vec<InferenceInput> {
        vec![InferenceInput::Text(self.clone())]
    }
}
impl IntoInputs for Message {
    fn into_inputs(self) -> Vec<InferenceInput> {
        vec![InferenceInput::Message(self)]
    }
}
impl IntoInputs for UserMessage {
    fn into_inputs(self) -> Vec<InferenceInput> {
        vec![InferenceInput::Message(Message::User(self))]
    }
}
impl IntoInputs for ContentBlock {
    fn into_inputs(self) -> Vec<InferenceInput> {
        vec![InferenceInput::Block(self)]
    }
}
impl IntoInputs for Vec<InferenceInput> {
    fn into_inputs(self) -> Vec<InferenceInput> {
        self
    }
}
impl IntoInputs for Vec<ContentBlock> {
    fn into_inputs(self) -> Vec<InferenceInput> {
        self.into_iter().map(InferenceInput::Block).collect()
    }
}
impl IntoInputs for () {
    fn into_inputs(self) -> Vec<InferenceInput> {
        Vec::new()
    }
}

/// Converts inputs to messages: consecutive text and blocks form one user message; whole
/// messages are kept as they are.
pub fn inputs_to_messages(inputs: Vec<InferenceInput>) -> Vec<Message> {
    let mut messages = Vec::new();
    let mut blocks = Vec::new();
    for input in inputs {
        match input {
            InferenceInput::Text(text) => blocks.push(ContentBlock::text(text)),
            InferenceInput::Block(block) => blocks.push(block),
            InferenceInput::Message(message) => {
                if !blocks.is_empty() {
                    messages.push(Message::User(UserMessage::new(std::mem::take(&mut blocks))));
                }
                messages.push(message);
            }
        }
    }
    if !blocks.is_empty() {
        messages.push(Message::User(UserMessage::new(blocks)));
    }
    messages
}

#[derive(Clone)]
struct Inner {
    model: Arc<dyn LlmModel>,
    config: Arc<ProviderConfig>,
    system: Option<String>,
    params: Option<serde_json::Map<String, Value>>,
    tools: Arc<[Tool]>,
    /// The tools sent to the model, when not all of `tools`.
    offered: Option<Arc<[Tool]>>,
    tool_choice: ToolChoice,
    strategy: ToolUseStrategy,
    structure: Option<Value>,
    mode: ExecutionMode,
    extensions: Extensions,
    pipeline: Pipeline,
    tap: Option<StreamTap>,
}

/// A configured model with `generate` and `stream` (§5.3). Cheap to clone.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use weft_provider::{llm, LlmOptions};
///
/// let script = weft_provider::adapters::scripted::Script::texts(["Hello!"]);
/// let model = weft_provider::adapters::scripted::model(script);
/// let instance = llm(LlmOptions::new(model).system("Be brief."))?;
/// let turn = instance.generate(&[], "Hi").await?;
/// assert_eq!(turn.text(), "Hello!");
/// assert_eq!(turn.messages.len(), 2);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct LlmInstance {
    inner: Arc<Inner>,
}

impl fmt::Debug for LlmInstance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmInstance")
            .field("model", &self.inner.model)
            .field("system", &self.inner.system)
            .field(
                "tools",
                &self.inner.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Binds the model and checks the options (§5.1, §4.6).
///
/// # Errors
/// `INVALID_REQUEST` when the provider has no LLM handler, tool names repeat, a tool's
/// parameters are not an object schema, the structure's root is not an object, the tool
/// choice forces a call of a tool that is not offered, or the provider lacks a capability the
/// options need (tools, structured output).
pub fn llm(options: LlmOptions) -> Result<LlmInstance, UppError> {
    let provider = options.model.provider.clone();
    let handler = provider.llm_handler()?;
    let model = handler.bind(&options.model.model_id, &options.model.options)?;
    let invalid =
        |message: String| UppError::llm(ErrorCode::InvalidRequest, provider.name.clone(), message);
    let mut seen = std::collections::HashSet::new();
    for tool in &options.tools {
        if !seen.insert(tool.name.as_str()) {
            return Err(invalid(format!(
                "tool name {:?} is used by more than one tool",
                tool.name
            )));
        }
        if tool.parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err(invalid(format!(
                "the parameters of tool {:?} must be a JSON Schema with type \"object\"",
                tool.name
            )));
        }
    }
    let capabilities = model.capabilities();
    if !options.tools.is_empty() && !capabilities.tools {
        return Err(invalid(format!("{} does not support tools", provider.name)));
    }
    if let Some(structure) = &options.structure {
        if !capabilities.structured_output {
            return Err(invalid(format!(
                "{} does not support structured output",
                provider.name
            )));
        }
        if structure.get("type").and_then(Value::as_str) != Some("object") {
            return Err(invalid(
                "the structure schema's root must have type \"object\"".into(),
            ));
        }
    }
    check_tool_choice(
        &options.tools,
        options.offered.as_deref(),
        &options.tool_choice,
        &invalid,
    )?;
    let config = merge_config(&provider.default_config, options.config);
    let pipeline = Pipeline::new(
        options.validate_arguments,
        &options.tool_strategy,
        &options.tool_layers,
    );
    Ok(LlmInstance {
        inner: Arc::new(Inner {
            model,
            config: Arc::new(config),
            system: options.system,
            params: options.params,
            offered: options.offered.map(|names| {
                options
                    .tools
                    .iter()
                    .filter(|t| names.contains(&t.name))
                    .cloned()
                    .collect()
            }),
            tools: options.tools.into(),
            tool_choice: options.tool_choice,
            strategy: options.tool_strategy,
            structure: options.structure,
            mode: options.execution_mode,
            extensions: options.tool_extensions,
            pipeline,
            tap: options.stream_tap,
        }),
    })
}

/// A choice that forces a call needs something to call: `Required` at least one offered
/// tool, `Tool(name)` that tool offered (`offered`: the names sent, `None` for all of
/// `tools`).
fn check_tool_choice(
    tools: &[Tool],
    offered: Option<&[String]>,
    choice: &ToolChoice,
    invalid: &dyn Fn(String) -> UppError,
) -> Result<(), UppError> {
    let is_offered = |name: &str| {
        tools.iter().any(|t| t.name == name)
            && offered.is_none_or(|names| names.iter().any(|n| n == name))
    };
    match choice {
        ToolChoice::Required if !tools.iter().any(|t| is_offered(&t.name)) => Err(invalid(
            "tool choice \"required\" needs at least one offered tool".into(),
        )),
        ToolChoice::Tool(name) if !is_offered(name) => Err(invalid(format!(
            "tool choice names {name:?}, which is not an offered tool"
        ))),
        _ => Ok(()),
    }
}

/// The caller's config with the provider's defaults filling what it leaves unset (headers:
/// defaults first, the caller's win).
pub(crate) fn merge_config(
    defaults: &ProviderConfig,
    mut config: ProviderConfig,
) -> ProviderConfig {
    if config.api_key.is_none() {
        config.api_key.clone_from(&defaults.api_key);
    }
    if config.base_url.is_none() {
        config.base_url.clone_from(&defaults.base_url);
    }
    if config.timeout.is_none() {
        config.timeout = defaults.timeout;
    }
    if config.http_client.is_none() {
        config.http_client.clone_from(&defaults.http_client);
    }
    if config.api_version.is_none() {
        config.api_version.clone_from(&defaults.api_version);
    }
    if config.retry_strategy.is_none() {
        config.retry_strategy.clone_from(&defaults.retry_strategy);
    }
    let mut headers = defaults.headers.clone();
    headers.extend(config.headers);
    config.headers = headers;
    config
}

impl LlmInstance {
    /// The bound model (§5.5).
    pub fn model(&self) -> &Arc<dyn LlmModel> {
        &self.inner.model
    }

    /// The system prompt.
    pub fn system(&self) -> Option<&str> {
        self.inner.system.as_deref()
    }

    /// The vendor parameters.
    pub fn params(&self) -> Option<&serde_json::Map<String, Value>> {
        self.inner.params.as_ref()
    }

    /// The provider's capabilities.
    pub fn capabilities(&self) -> LlmCapabilities {
        self.inner.model.capabilities()
    }

    /// The tools.
    pub fn tools(&self) -> &[Tool] {
        &self.inner.tools
    }

    /// A copy of this instance that sends only the tools named in `offered` to the model and
    /// asks for `choice` (see [`LlmOptions::offered`], [`LlmOptions::tool_choice`]); its tools,
    /// pipeline (inherited stages included), hooks and extensions are this instance's. The
    /// runtime profile's Final Warning turn offers only `complete_task`, and forces it.
    ///
    /// # Errors
    /// `INVALID_REQUEST` when `choice` forces a tool that `offered` leaves out.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use serde_json::json;
    /// use weft_provider::adapters::scripted;
    /// use weft_provider::{llm, LlmOptions, Tool, ToolChoice};
    ///
    /// let model = scripted::function_model(|req| {
    ///     assert_eq!(req.tools.len(), 1);
    ///     assert_eq!(req.tool_choice, ToolChoice::tool("b"));
    ///     Ok(scripted::ScriptedResponse::text("ok"))
    /// });
    /// let tool = |name: &str| Tool::new(name, "", json!({"type": "object"}), |_, _| async { Ok(json!(null)) });
    /// let instance = llm(LlmOptions::new(model).tool(tool("a")).tool(tool("b")))?;
    /// let forced = instance.with_offered(vec!["b".into()], ToolChoice::tool("b"))?;
    /// forced.generate(&[], "go").await?;
    /// assert!(instance.with_offered(vec!["a".into()], ToolChoice::tool("b")).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_offered(
        &self,
        offered: Vec<String>,
        choice: ToolChoice,
    ) -> Result<LlmInstance, UppError> {
        let provider = self.inner.model.provider();
        check_tool_choice(&self.inner.tools, Some(&offered), &choice, &|message| {
            UppError::llm(ErrorCode::InvalidRequest, provider, message)
        })?;
        let mut inner = (*self.inner).clone();
        inner.offered = Some(
            self.inner
                .tools
                .iter()
                .filter(|t| offered.contains(&t.name))
                .cloned()
                .collect(),
        );
        inner.tool_choice = choice;
        Ok(LlmInstance {
            inner: Arc::new(inner),
        })
    }

    /// Runs one turn: `history` (left untouched; a [`crate::Thread`] derefs to it) followed by
    /// `input`, with the tool loop, and returns every new message in the [`Turn`].
    ///
    /// # Errors
    /// Any [`UppError`]: capability violations (`INVALID_REQUEST`), provider errors, a
    /// structured reply that is not JSON (`INVALID_RESPONSE`), or the tool-round limit reached
    /// while the model still asks for tools (`INVALID_RESPONSE`, the partial turn in `cause`).
    pub async fn generate(
        &self,
        history: &[Message],
        input: impl IntoInputs,
    ) -> Result<Turn, UppError> {
        self.generate_with_signal(history, input, CancellationToken::new())
            .await
    }

    /// [`LlmInstance::generate`] that stops with `CANCELLED` when `signal` fires.
    ///
    /// # Errors
    /// As `generate`, plus `CANCELLED`.
    ///
    /// # Cancel safety
    /// Dropping the future drops in-flight tool futures; nothing is written anywhere.
    pub async fn generate_with_signal(
        &self,
        history: &[Message],
        input: impl IntoInputs,
        signal: CancellationToken,
    ) -> Result<Turn, UppError> {
        let new_messages = inputs_to_messages(input.into_inputs());
        self.check_content(history.iter(), &new_messages)?;
        run_loop(
            self.inner.clone(),
            Arc::new(history.iter().cloned().map(Arc::new).collect()),
            new_messages,
            signal,
            None,
            None,
            false,
        )
        .await
        .map(|(turn, _)| turn)
    }

    /// Runs **one step** of the tool loop: one model call and, when the reply asks for tools,
    /// one tool round. The returned [`Turn`] holds the new input messages, the assistant
    /// message and (after a tool round) the tool results; its `response` still carries the
    /// executed tool calls, so the caller decides whether to go on.
    ///
    /// This is the hook the agent layer (UAP-1.0) uses to observe step boundaries. `history`
    /// is taken by value so the caller's copy is moved, not cloned again. `rounds_done` is the
    /// number of tool rounds the caller already ran in this generation: the
    /// `tool_strategy.max_iterations` limit and its hook apply across steps exactly as in
    /// [`LlmInstance::generate`].
    ///
    /// # Errors
    /// As [`LlmInstance::generate_with_signal`].
    ///
    /// # Cancel safety
    /// As [`LlmInstance::generate_with_signal`].
    pub async fn generate_step(
        &self,
        history: Vec<Message>,
        input: impl IntoInputs,
        rounds_done: u32,
        signal: CancellationToken,
    ) -> Result<Turn, UppError> {
        let new_messages = inputs_to_messages(input.into_inputs());
        self.check_content(history.iter(), &new_messages)?;
        run_loop(
            self.inner.clone(),
            Arc::new(history.into_iter().map(Arc::new).collect()),
            new_messages,
            signal,
            None,
            Some(rounds_done),
            false,
        )
        .await
        .map(|(turn, _)| turn)
    }

    /// [`LlmInstance::generate_step`] over a shared conversation: `conversation` is the
    /// history; the step's messages are appended to it in place (no copy when the caller holds
    /// the only reference) and it is handed back with the turn. A caller that keeps it from
    /// step to step does no work proportional to the history, only to each step's new messages.
    ///
    /// # Errors
    /// As [`LlmInstance::generate`]; the conversation is dropped with the error.
    ///
    /// # Cancel safety
    /// As [`LlmInstance::generate_with_signal`].
    pub async fn generate_step_shared(
        &self,
        conversation: Arc<Vec<Arc<Message>>>,
        input: impl IntoInputs,
        rounds_done: u32,
        signal: CancellationToken,
    ) -> Result<(Turn, Arc<Vec<Arc<Message>>>), UppError> {
        let new_messages = inputs_to_messages(input.into_inputs());
        self.check_content(conversation.iter().map(|m| &**m), &new_messages)?;
        let (turn, kept) = run_loop(
            self.inner.clone(),
            conversation,
            new_messages,
            signal,
            None,
            Some(rounds_done),
            true,
        )
        .await?;
        let conversation = kept.unwrap_or_else(|| Arc::new(Vec::new()));
        Ok((turn, conversation))
    }

    /// The streaming form of [`LlmInstance::generate_step`]: events of the one step, then its
    /// [`Turn`]. `signal` aborts the step (as does [`StreamResult::abort`]).
    ///
    /// # Errors
    /// As [`LlmInstance::stream`].
    pub fn stream_step(
        &self,
        history: Vec<Message>,
        input: impl IntoInputs,
        rounds_done: u32,
        signal: CancellationToken,
    ) -> Result<StreamResult, UppError> {
        self.spawn_stream(
            Arc::new(history.into_iter().map(Arc::new).collect()),
            input,
            signal,
            Some(rounds_done),
            false,
        )
    }

    /// [`LlmInstance::stream_step`] over a shared conversation, as
    /// [`LlmInstance::generate_step_shared`] does it: the step's messages are appended to
    /// `conversation` in place, and [`StreamResult::turn_and_conversation`] hands it back,
    /// so a caller that keeps it between steps copies no history.
    ///
    /// # Errors
    /// As [`LlmInstance::stream`].
    pub fn stream_step_shared(
        &self,
        conversation: Arc<Vec<Arc<Message>>>,
        input: impl IntoInputs,
        rounds_done: u32,
        signal: CancellationToken,
    ) -> Result<StreamResult, UppError> {
        self.spawn_stream(conversation, input, signal, Some(rounds_done), true)
    }

    /// A copy of this instance whose tools receive `extensions` in their
    /// [`crate::ToolContext`] (replacing the ones given at `llm()` time). Cheap: the model,
    /// configuration and tools are shared.
    pub fn with_tool_extensions(&self, extensions: Extensions) -> LlmInstance {
        let mut inner = (*self.inner).clone();
        inner.extensions = extensions;
        LlmInstance {
            inner: Arc::new(inner),
        }
    }

    /// A copy of this instance whose tool calls also pass `inherited` stages: a sub-agent's
    /// instance, bound by its parent's policy (see [`crate::pipeline::ToolLayer::for_child`]).
    pub fn with_inherited_layers(&self, inherited: &[Arc<dyn ToolLayer>]) -> LlmInstance {
        if inherited.is_empty() {
            return self.clone();
        }
        let mut inner = (*self.inner).clone();
        inner.pipeline = self
            .inner
            .pipeline
            .with_inherited(&self.inner.strategy, inherited);
        LlmInstance {
            inner: Arc::new(inner),
        }
    }

    /// The stages a sub-agent run by one of this instance's tools must pass (the policy
    /// stages of its pipeline).
    pub fn child_layers(&self) -> Vec<Arc<dyn ToolLayer>> {
        self.inner.pipeline.child_layers()
    }

    /// Streams one turn (§9): events as they arrive, then the [`Turn`] from
    /// [`StreamResult::turn`]. Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// `INVALID_REQUEST` when the provider cannot stream or the content needs a capability
    /// the provider lacks; other failures arrive through the stream.
    pub fn stream(
        &self,
        history: &[Message],
        input: impl IntoInputs,
    ) -> Result<StreamResult, UppError> {
        self.spawn_stream(
            Arc::new(history.iter().cloned().map(Arc::new).collect()),
            input,
            CancellationToken::new(),
            None,
            false,
        )
    }

    fn spawn_stream(
        &self,
        history: Conversation,
        input: impl IntoInputs,
        signal: CancellationToken,
        one_step: Option<u32>,
        keep_conversation: bool,
    ) -> Result<StreamResult, UppError> {
        if !self.capabilities().streaming {
            return Err(UppError::llm(
                ErrorCode::InvalidRequest,
                self.inner.model.provider(),
                format!("{} does not support streaming", self.inner.model.provider()),
            ));
        }
        let new_messages = inputs_to_messages(input.into_inputs());
        self.check_content(history.iter().map(|m| &**m), &new_messages)?;
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (turn_tx, turn_rx) = oneshot::channel();
        let inner = self.inner.clone();
        let task_signal = signal.clone();
        tokio::spawn(async move {
            let result = run_loop(
                inner,
                history,
                new_messages,
                task_signal,
                Some(events_tx),
                one_step,
                keep_conversation,
            )
            .await;
            let _ = turn_tx.send(result);
        });
        Ok(StreamResult {
            events: events_rx,
            turn: Some(turn_rx),
            finished: None,
            conversation: None,
            signal,
            provider: self.inner.model.provider().to_owned(),
        })
    }

    fn check_content<'m>(
        &self,
        history: impl Iterator<Item = &'m Message>,
        new_messages: &'m [Message],
    ) -> Result<(), UppError> {
        let caps = self.capabilities();
        if caps.image_input && caps.document_input && caps.audio_input && caps.video_input {
            // Nothing to refuse: no walk over the whole history on every step.
            return Ok(());
        }
        let provider = self.inner.model.provider();
        for message in history.chain(new_messages) {
            for block in message.content() {
                let missing = match block {
                    ContentBlock::Image(_) if !caps.image_input => Some("image input"),
                    ContentBlock::Document(_) if !caps.document_input => Some("document input"),
                    ContentBlock::Audio(_) if !caps.audio_input => Some("audio input"),
                    ContentBlock::Video(_) if !caps.video_input => Some("video input"),
                    _ => None,
                };
                if let Some(what) = missing {
                    return Err(UppError::llm(
                        ErrorCode::InvalidRequest,
                        provider,
                        format!(
                            "{provider} does not support {what} (message {})",
                            message.id()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The conversation the tool loop sends, shared with the caller: the list extended in
/// place, each message shared with the turn and the caller's state.
type Conversation = Arc<Vec<Arc<Message>>>;

type EventSink = mpsc::UnboundedSender<Result<StreamEvent, UppError>>;

/// The tool loop. With `one_step = Some(rounds_done)` it stops after one model call and its
/// tool round, counting `rounds_done` earlier rounds against the limit.
async fn run_loop(
    inner: Arc<Inner>,
    conversation: Conversation,
    new_messages: Vec<Message>,
    signal: CancellationToken,
    sink: Option<EventSink>,
    one_step: Option<u32>,
    keep_conversation: bool,
) -> Result<(Turn, Option<Conversation>), UppError> {
    let provider = inner.model.provider().to_owned();
    // The conversation is shared with each request behind an `Arc` and extended in place (no
    // copy while the caller holds no other reference). Its messages are shared too: a new
    // message is made once, as an `Arc<Message>` that the conversation, the turn's messages
    // and the caller (an agent's state) all hold; no message is deep-copied by the loop.
    let mut conversation = conversation;
    let mut made = TurnMessages {
        messages: Vec::with_capacity(new_messages.len() + 2),
        keep: keep_conversation,
    };
    {
        let shared = Arc::make_mut(&mut conversation);
        shared.reserve(new_messages.len() + 4);
        for message in new_messages {
            let message = Arc::new(message);
            shared.push(message.clone());
            made.messages.push(message);
        }
    }
    let mut usage = TokenUsage::default();
    let mut executions = Vec::new();
    let mut cycles = 0u32;
    let mut rounds = one_step.unwrap_or(0);
    let emit = |event: StreamEvent| {
        if let Some(sink) = &sink {
            if let Some(tap) = &inner.tap {
                tap.see(&event);
            }
            let _ = sink.send(Ok(event));
        }
    };
    loop {
        if signal.is_cancelled() {
            return Err(UppError::cancelled(&provider, Modality::Llm));
        }
        cycles += 1;
        let request = LlmRequest {
            messages: conversation.clone(),
            system: inner.system.clone(),
            params: inner.params.clone(),
            tools: inner.offered.clone().unwrap_or_else(|| inner.tools.clone()),
            tool_choice: inner.tool_choice.clone(),
            structure: inner.structure.clone(),
            signal: signal.clone(),
            config: inner.config.clone(),
        };
        let response = tokio::select! {
            biased;
            () = signal.cancelled() => return Err(UppError::cancelled(&provider, Modality::Llm)),
            response = one_request(&*inner.model, request, sink.as_ref(), inner.tap.as_ref()) => response?,
        };
        let LlmResponse {
            message,
            data,
            usage: cycle,
            ..
        } = response;
        add_cycle(&mut usage, cycle);
        // The turn's response and its assistant message in `messages` are one shared message.
        let message = TurnResponse::from(message);
        // The caller handles the calls itself with `maxIterations: 0` (§10.7), and when it
        // offered no tools at all: there is nothing to run, so answering "unknown tool" and
        // asking again would only spend requests (the UPP reference runs the loop only when
        // tools were given). A step of the agent layer keeps answering them, so the agent's
        // conversation stays valid for its next step.
        let manual = inner.strategy.max_iterations == Some(0)
            || (inner.tools.is_empty() && one_step.is_none());
        if !message.has_tool_calls() || manual {
            let data = match &inner.structure {
                Some(_) => Some(match data {
                    Some(data) => data,
                    None => parse_structured(&message, &provider)?,
                }),
                None => None,
            };
            made.last(&mut conversation, message.message().clone());
            let (messages, kept) = made.finish(conversation);
            let turn = Turn {
                messages,
                response: message,
                tool_executions: executions,
                usage,
                cycles,
                data,
            };
            return Ok((turn, kept));
        }
        if let Some(limit) = inner.strategy.max_iterations
            && rounds >= limit
        {
            inner.strategy.fire_max_iterations(rounds);
            made.last(&mut conversation, message.message().clone());
            let partial = Turn {
                messages: made.finish(conversation).0,
                response: message,
                tool_executions: executions,
                usage,
                cycles,
                data: None,
            };
            return Err(UppError::llm(
                ErrorCode::InvalidResponse,
                &provider,
                format!("the tool loop reached maxIterations ({limit}) while the model still requested tools"),
            )
            .with_cause(serde_json::json!({
                "reason": "max_iterations",
                "iterations": rounds,
                "turn": serde_json::to_value(&partial).unwrap_or(Value::Null),
            })));
        }
        rounds += 1;
        let emit_ref: &(dyn Fn(StreamEvent) + Sync) = &emit;
        let round = RoundContext {
            tools: &inner.tools,
            pipeline: &inner.pipeline,
            signal: &signal,
            extensions: &inner.extensions,
            mode: inner.mode,
            provider: &provider,
            events: sink.as_ref().map(|_| emit_ref),
        };
        let outcomes = run_round(&message.tool_calls, &round).await?;
        let mut results = Vec::with_capacity(outcomes.len());
        let mut deferred = false;
        for outcome in outcomes {
            deferred |= outcome.deferred;
            results.push(outcome.result);
            executions.extend(outcome.execution);
        }
        let tool_results = Arc::new(Message::ToolResult(ToolResultMessage::new(results)));
        // A call waits for a decision: the turn ends here, whatever the loop's mode (the
        // caller that deferred it suspends the run).
        if one_step.is_some() || deferred {
            made.last(&mut conversation, message.message().clone());
            made.last(&mut conversation, tool_results);
            let (messages, kept) = made.finish(conversation);
            let turn = Turn {
                messages,
                response: message,
                tool_executions: executions,
                usage,
                cycles,
                data: None,
            };
            return Ok((turn, kept));
        }
        made.push(&mut conversation, message.message().clone());
        made.push(&mut conversation, tool_results);
    }
}

/// Adds one model call's usage to the turn's as one cycle. The first call's usage, when it
/// already is exactly one such cycle (what adapters report), is taken as it is instead of
/// being rebuilt: its per-cycle list is not allocated a second time.
fn add_cycle(usage: &mut TokenUsage, call: TokenUsage) {
    let cycle = call.as_cycle();
    let is_one_cycle = matches!(call.cycles.as_deref(), Some([only]) if *only == cycle);
    if is_one_cycle && usage.cycles.is_none() && *usage == TokenUsage::default() {
        *usage = call;
    } else {
        usage.add_cycle(cycle);
    }
}

/// The messages a turn of the tool loop made, shared with the caller, beside the conversation
/// the next model call reads.
struct TurnMessages {
    messages: Vec<Arc<Message>>,
    /// Whether the caller keeps the conversation (a step of the agent layer).
    keep: bool,
}

impl TurnMessages {
    /// A message of the turn that a later model call of this loop reads.
    fn push(&mut self, conversation: &mut Conversation, message: Arc<Message>) {
        Arc::make_mut(conversation).push(message.clone());
        self.messages.push(message);
    }

    /// A message that ends the loop: added to the conversation only when the caller
    /// keeps it.
    fn last(&mut self, conversation: &mut Conversation, message: Arc<Message>) {
        if self.keep {
            self.push(conversation, message);
        } else {
            self.messages.push(message);
        }
    }

    /// The turn's messages and, when the caller keeps it, the conversation.
    fn finish(self, conversation: Conversation) -> (Vec<Arc<Message>>, Option<Conversation>) {
        (self.messages, self.keep.then_some(conversation))
    }
}

async fn one_request(
    model: &dyn LlmModel,
    request: LlmRequest,
    sink: Option<&EventSink>,
    tap: Option<&StreamTap>,
) -> Result<LlmResponse, UppError> {
    let Some(sink) = sink else {
        return model.complete(request).await;
    };
    let mut stream = model.stream(request).await?;
    let mut response = None;
    while let Some(part) = stream.next().await {
        match part? {
            LlmStreamPart::Event(event) => {
                if let Some(tap) = tap {
                    tap.see(&event);
                }
                let _ = sink.send(Ok(event));
            }
            LlmStreamPart::Response(r) => response = Some(r),
        }
    }
    response.ok_or_else(|| {
        UppError::llm(
            ErrorCode::InvalidResponse,
            model.provider(),
            "the provider's stream ended without a final response",
        )
    })
}

fn parse_structured(message: &AssistantMessage, provider: &str) -> Result<Value, UppError> {
    let text = message.text_content();
    let trimmed = text.trim();
    let body = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
        .unwrap_or(trimmed);
    serde_json::from_str(body).map_err(|error| {
        UppError::llm(
            ErrorCode::InvalidResponse,
            provider,
            format!("the structured output is not valid JSON: {error}"),
        )
        .with_cause(serde_json::json!({ "text": text }))
    })
}

/// A streaming turn (§9.1): a [`Stream`] of events, the final [`Turn`], and `abort`.
///
/// Reading the events is optional: [`StreamResult::turn`] drains what is left.
#[derive(Debug)]
pub struct StreamResult {
    events: mpsc::UnboundedReceiver<Result<StreamEvent, UppError>>,
    turn: Option<oneshot::Receiver<LoopResult>>,
    finished: Option<Result<Turn, UppError>>,
    /// The kept conversation of a `stream_step_shared` turn, once it arrived.
    conversation: Option<Conversation>,
    signal: CancellationToken,
    provider: String,
}

/// What the tool loop hands back: the turn and, when the caller keeps it, the conversation.
type LoopResult = Result<(Turn, Option<Conversation>), UppError>;

impl StreamResult {
    /// Aborts the turn: the in-flight request and tools see the signal, pending tools are
    /// skipped, and the turn fails with `CANCELLED`.
    pub fn abort(&self) {
        self.signal.cancel();
    }

    /// A token that aborts this stream when cancelled.
    pub fn abort_handle(&self) -> CancellationToken {
        self.signal.clone()
    }

    /// Waits for the complete turn.
    ///
    /// # Errors
    /// The turn's error, `CANCELLED` after [`StreamResult::abort`].
    pub async fn turn(self) -> Result<Turn, UppError> {
        self.turn_and_conversation().await.map(|(turn, _)| turn)
    }

    /// Waits for the complete turn and, for a [`LlmInstance::stream_step_shared`] step, the
    /// conversation with the step's messages appended (`None` otherwise).
    ///
    /// # Errors
    /// As [`StreamResult::turn`].
    pub async fn turn_and_conversation(
        mut self,
    ) -> Result<(Turn, Option<Arc<Vec<Arc<Message>>>>), UppError> {
        while self.events.recv().await.is_some() {}
        if let Some(result) = self.finished.take() {
            return result.map(|turn| (turn, self.conversation.take()));
        }
        match self.turn.take() {
            Some(rx) => rx
                .await
                .unwrap_or_else(|_| Err(UppError::cancelled(&self.provider, Modality::Llm))),
            None => Err(UppError::cancelled(&self.provider, Modality::Llm)),
        }
    }
}

impl Stream for StreamResult {
    type Item = Result<StreamEvent, UppError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.events.poll_recv(cx) {
            Poll::Ready(Some(item)) => Poll::Ready(Some(item)),
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                // Events are done: surface the turn's error, if any, as the last item.
                if self.finished.is_none()
                    && let Some(rx) = self.turn.as_mut()
                {
                    match Pin::new(rx).poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(result) => {
                            self.turn = None;
                            let result = result.unwrap_or_else(|_| {
                                Err(UppError::cancelled(&self.provider, Modality::Llm))
                            });
                            let error = result.as_ref().err().cloned();
                            self.finished = Some(result.map(|(turn, conversation)| {
                                self.conversation = conversation;
                                turn
                            }));
                            if let Some(error) = error {
                                return Poll::Ready(Some(Err(error)));
                            }
                        }
                    }
                }
                Poll::Ready(None)
            }
        }
    }
}

use std::future::Future as _;
