//! `agent()` and [`Agent`]: `generate`, `stream`, `ask`, `query` (UAP-1.0 §4).
//!
//! One run goes: middleware `before` (in order) → session id → the execution strategy (model
//! calls, tools, step hooks, checkpoints) → `on_complete` / `on_error` → middleware `after`
//! (in reverse). Nothing is kept between runs: the only carrier of history is the
//! [`AgentState`] passed in and returned (UAP-007).

use std::fmt;
use std::sync::Arc;

use futures_util::StreamExt as _;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use weft_provider::{
    ContentBlock, LlmInstance, LlmOptions, Message, ModelReference, ProviderConfig, Tool, Turn,
    UserMessage, llm,
};

use crate::checkpoint::writer::Checkpointer;
use crate::error::AgentError;
use crate::middleware::MiddlewareContext;
use crate::options::AgentOptions;
use crate::state::{AgentState, SESSION_ID_KEY, new_id};
use crate::strategy::{ExecutionContext, StepObserver};
use crate::stream::{AgentStreamResult, EventSink};
use crate::subagent::ToolExecutionContext;

/// The result of `generate`: the standard UPP [`Turn`] and the new state (UAP-1.0 §4.4).
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateResult {
    /// The UPP turn, unchanged (no agent-specific turn type).
    pub turn: Turn,
    /// The new immutable state.
    pub state: AgentState,
}

/// `ExecutionResult` of UAP-1.0 §5.1: the same pair.
pub type ExecutionResult = GenerateResult;

/// What `generate` accepts: text or a message.
pub trait AgentInput {
    /// The input as a message (text becomes a user message).
    fn into_message(self) -> Message;
}

impl AgentInput for &str {
    fn into_message(self) -> Message {
        Message::user(self)
    }
}
impl AgentInput for String {
    fn into_message(self) -> Message {
        Message::User(UserMessage::new(vec![ContentBlock::text(self)]))
    }
}
impl AgentInput for &String {
    fn into_message(self) -> Message {
        Message::user(self.as_str())
    }
}
impl AgentInput for Message {
    fn into_message(self) -> Message {
        self
    }
}
impl AgentInput for UserMessage {
    fn into_message(self) -> Message {
        Message::User(self)
    }
}

/// Per-call options of [`Agent::generate_with`] / [`Agent::stream_with`].
#[derive(Clone)]
pub struct RunOptions {
    /// Aborts the run when cancelled.
    pub signal: CancellationToken,
    /// The execution context of the tool call running this agent (sub-agents: lineage).
    pub parent_context: Option<Arc<ToolExecutionContext>>,
    /// Whether to save checkpoints (when the agent has a store). `query` turns this off.
    pub checkpoints: bool,
    /// Who hears the run's steps ([`StepObserver`]): the built-in strategies' steps report
    /// to it (a runtime logs them, and gives up a step whose call waits for a decision).
    pub observer: Option<Arc<dyn StepObserver>>,
}

impl fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunOptions")
            .field("signal", &self.signal)
            .field("parent_context", &self.parent_context)
            .field("checkpoints", &self.checkpoints)
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            signal: CancellationToken::new(),
            parent_context: None,
            checkpoints: true,
            observer: None,
        }
    }
}

pub(crate) struct AgentInner {
    id: String,
    options: AgentOptions,
    llm: LlmInstance,
    checkpointer: Option<Checkpointer>,
    generated_session_id: Option<String>,
    /// Whether a conversation took the generated session id already: every later new
    /// conversation gets its own, so conversations of one agent never share checkpoints.
    generated_taken: std::sync::atomic::AtomicBool,
}

/// An agent: a model, tools, a system prompt and an execution strategy, with no state of its
/// own (UAP-1.0 §4.3). Cheap to clone; clones share the id.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use weft_agent::{agent, AgentOptions, AgentState};
/// use weft_provider::adapters::scripted::{self, Script};
///
/// let assistant = agent(AgentOptions::new(scripted::model(Script::texts(["Hi Alice!", "Alice."]))))?;
/// let s0 = AgentState::initial();
/// let r1 = assistant.generate("My name is Alice", &s0).await?;
/// let r2 = assistant.generate("What is my name?", &r1.state).await?;
/// assert_eq!(r2.turn.text(), "Alice.");
/// assert_eq!(r2.state.message_count(), 4);   // two inputs, two replies
/// assert_eq!(s0.message_count(), 0);         // the input state never changes
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Agent {
    inner: Arc<AgentInner>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.inner.id)
            .field("model", &self.inner.options.llm.model)
            .field("execution", &self.inner.options.execution.name())
            .field(
                "tools",
                &self
                    .tools()
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Creates an agent (UAP-1.0 §4.1).
///
/// # Errors
/// [`AgentError::Upp`] when `llm()` rejects the options (repeated tool names, a tool schema
/// that is not an object, a capability the provider lacks); [`AgentError::Config`] for an
/// empty session id.
pub fn agent(options: AgentOptions) -> Result<Agent, AgentError> {
    Agent::from_options(options)
}

impl Agent {
    pub(crate) fn from_options(options: AgentOptions) -> Result<Agent, AgentError> {
        if options.session_id.as_deref().is_some_and(str::is_empty) {
            return Err(AgentError::Config("the session id is empty".into()));
        }
        let llm = llm(options.llm.clone())?;
        let checkpointer = options
            .checkpoints
            .clone()
            .map(|store| Checkpointer::new(store, options.checkpoint_mode));
        let generated_session_id = match (&options.checkpoints, &options.session_id) {
            (Some(_), None) => Some(new_id()),
            _ => None,
        };
        Ok(Agent {
            inner: Arc::new(AgentInner {
                id: new_id(),
                options,
                llm,
                checkpointer,
                generated_session_id,
                generated_taken: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// The agent id (UUIDv4).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The bound model.
    pub fn model(&self) -> &ModelReference {
        &self.inner.options.llm.model
    }

    /// The provider configuration.
    pub fn config(&self) -> &ProviderConfig {
        &self.inner.options.llm.config
    }

    /// The tools.
    pub fn tools(&self) -> &[Tool] {
        &self.inner.options.llm.tools
    }

    /// The system prompt.
    pub fn system(&self) -> Option<&str> {
        self.inner.options.llm.system.as_deref()
    }

    /// The `llm()` options the agent was built with.
    pub fn llm_options(&self) -> &LlmOptions {
        &self.inner.options.llm
    }

    /// All the options.
    pub fn options(&self) -> &AgentOptions {
        &self.inner.options
    }

    /// The execution strategy's name.
    pub fn execution_name(&self) -> &str {
        self.inner.options.execution.name()
    }

    /// The session id runs of this agent checkpoint under when `state` carries none: the
    /// configured one, else the generated one (`None` without checkpoints or a configured id).
    /// The generated id belongs to the agent's first conversation; each further conversation
    /// started from a state without a session gets a new one (see [`Agent::session_for`]).
    pub fn session_id(&self) -> Option<&str> {
        self.inner
            .options
            .session_id
            .as_deref()
            .or(self.inner.generated_session_id.as_deref())
    }

    /// The session a run from `state` uses: the configured id, else the one recorded in
    /// `state.metadata.sessionId` (a restored checkpoint keeps its session), else a generated
    /// one — the agent's own for its first new conversation, a fresh UUIDv4 for every other,
    /// so many conversations on one agent never mix their checkpoints.
    pub fn session_for(&self, state: &AgentState) -> Option<String> {
        if let Some(id) = &self.inner.options.session_id {
            return Some(id.clone());
        }
        self.inner.checkpointer.as_ref()?;
        if let Some(id) = state.session_id() {
            return Some(id.to_owned());
        }
        let first = self
            .inner
            .generated_taken
            .compare_exchange(
                false,
                true,
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
            )
            .is_ok();
        match &self.inner.generated_session_id {
            Some(id) if first => Some(id.clone()),
            _ => Some(new_id()),
        }
    }

    pub(crate) fn checkpointer(&self) -> Option<&Checkpointer> {
        self.inner.checkpointer.as_ref()
    }

    /// Waits until every checkpoint save started so far has finished.
    pub async fn flush_checkpoints(&self) {
        if let Some(checkpointer) = &self.inner.checkpointer {
            checkpointer.flush().await;
        }
    }

    /// Runs the agent: `(input, state) -> (turn, new state)` (UAP-1.0 §4.4). The input is
    /// added to the history by the strategy, once.
    ///
    /// # Errors
    /// Whatever the strategy, the provider or a middleware reports, unless `on_error` hooks
    /// recover.
    ///
    /// # Cancel safety
    /// Dropping the future stops the run; `state` is untouched and every checkpoint written
    /// so far holds a step-end state.
    pub async fn generate(
        &self,
        input: impl AgentInput,
        state: &AgentState,
    ) -> Result<GenerateResult, AgentError> {
        self.generate_with(input, state, RunOptions::default())
            .await
    }

    /// [`Agent::generate`] with per-call options.
    ///
    /// # Errors
    /// As [`Agent::generate`]; [`AgentError::Cancelled`] when `options.signal` fires.
    pub async fn generate_with(
        &self,
        input: impl AgentInput,
        state: &AgentState,
        options: RunOptions,
    ) -> Result<GenerateResult, AgentError> {
        let sink = EventSink::silent(self.id());
        self.run(input.into_message(), state.clone(), options, sink, false)
            .await
    }

    /// Streams a run (UAP-1.0 §4.5): events as they happen, then the same result `generate`
    /// gives. Must be called inside a tokio runtime.
    pub fn stream(&self, input: impl AgentInput, state: &AgentState) -> AgentStreamResult {
        self.stream_with(input, state, RunOptions::default())
    }

    /// [`Agent::stream`] with per-call options.
    pub fn stream_with(
        &self,
        input: impl AgentInput,
        state: &AgentState,
        options: RunOptions,
    ) -> AgentStreamResult {
        let agent = self.clone();
        let input = input.into_message();
        let state = state.clone();
        let signal = options.signal.clone();
        AgentStreamResult::spawn(self.id(), signal, state.clone(), move |sink| async move {
            agent.run(input, state, options, sink, true).await
        })
    }

    /// Multi-turn convenience (UAP-1.0 §4.6): the returned state holds the prior messages,
    /// the input and the response, each once. Strategies already add the input to the state,
    /// so this is `generate` (UAP-036).
    ///
    /// # Errors
    /// As [`Agent::generate`].
    pub async fn ask(
        &self,
        input: impl AgentInput,
        state: &AgentState,
    ) -> Result<GenerateResult, AgentError> {
        self.generate(input, state).await
    }

    /// Stateless single turn (UAP-1.0 §4.7): `generate(input, AgentState::initial())`,
    /// returning only the turn. Nothing is left behind: no state, and no checkpoint.
    ///
    /// # Errors
    /// As [`Agent::generate`].
    pub async fn query(&self, input: impl AgentInput) -> Result<Turn, AgentError> {
        let options = RunOptions {
            checkpoints: false,
            ..RunOptions::default()
        };
        self.generate_with(input, &AgentState::initial(), options)
            .await
            .map(|result| result.turn)
    }

    /// The whole pipeline of one run.
    async fn run(
        &self,
        input: Message,
        state: AgentState,
        options: RunOptions,
        sink: EventSink,
        streaming: bool,
    ) -> Result<GenerateResult, AgentError> {
        let middleware = &self.inner.options.middleware;
        let mut mctx = MiddlewareContext {
            agent: self.clone(),
            input,
            state,
            metadata: Map::new(),
        };
        let outcome = self.run_inner(&mut mctx, &options, sink, streaming).await;
        let mut result = match outcome {
            Ok(result) => result,
            Err(error) => {
                let mut recovered = self.inner.options.strategy.error(&error, &mctx.state);
                if recovered.is_none() {
                    for m in middleware.iter().rev() {
                        if let Some(result) = m.on_error(&mut mctx, &error).await {
                            recovered = Some(result);
                            break;
                        }
                    }
                }
                match recovered {
                    Some(result) => result,
                    None => return Err(error),
                }
            }
        };
        for m in middleware.iter().rev() {
            result = m.after(&mut mctx, result).await?;
        }
        Ok(result)
    }

    async fn run_inner(
        &self,
        mctx: &mut MiddlewareContext,
        options: &RunOptions,
        sink: EventSink,
        streaming: bool,
    ) -> Result<GenerateResult, AgentError> {
        for m in &self.inner.options.middleware {
            m.before(mctx).await?;
        }
        let session_id = if options.checkpoints {
            self.session_for(&mctx.state)
        } else {
            None
        };
        let mut state = mctx.state.clone();
        if let Some(session) = &session_id
            && state.session_id() != Some(session.as_str())
        {
            state = state.with_metadata(SESSION_ID_KEY, Value::String(session.clone()));
        }
        let ctx = ExecutionContext::new(
            self.clone(),
            self.inner.llm.clone(),
            mctx.input.clone(),
            state,
            self.inner.options.strategy.clone(),
            options.signal.clone(),
            sink.clone(),
            session_id,
            options.parent_context.clone(),
        )
        .with_observer(options.observer.clone());
        let execution = &self.inner.options.execution;
        let result = if streaming {
            let mut inner = execution.clone().stream(ctx);
            while let Some(event) = inner.next().await {
                sink.emit(event);
            }
            inner.result().await?
        } else {
            execution.execute(ctx).await?
        };
        self.inner.options.strategy.complete(&result);
        Ok(result)
    }
}
