//! The provider contract (UPP-1.2 §4.5–§4.6, §5.4–§5.5, §15).
//!
//! A provider is a named factory that turns a model id into a [`ModelReference`]. The
//! reference's provider binds the id to an [`LlmModel`], which performs exactly one request:
//! [`LlmModel::complete`] or [`LlmModel::stream`]. The tool loop, history handling and
//! capability checks belong to the `llm()` core, never to a provider.

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;

use futures_core::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::ProviderConfig;
use crate::content::ContentBlock;
use crate::error::{ErrorCode, Modality, UppError};
use crate::message::{AssistantMessage, Message};
use crate::stream::StreamEvent;
use crate::tool::{BoxFuture, Tool};
use crate::turn::TokenUsage;

/// What a provider's API supports (§5.4). Static: it never varies per request or per model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmCapabilities {
    /// `stream()` works.
    pub streaming: bool,
    /// Function tools work.
    pub tools: bool,
    /// Native structured output (a JSON schema the API enforces).
    pub structured_output: bool,
    /// Image input.
    pub image_input: bool,
    /// Document input (PDF, text).
    pub document_input: bool,
    /// Video input.
    pub video_input: bool,
    /// Audio input.
    pub audio_input: bool,
}

/// One request to a bound model (§5.5): the whole conversation so far plus options.
#[derive(Debug, Clone)]
pub struct LlmRequest {
    /// History plus the new input, in order. Shared, not copied: each message is the very
    /// one the caller's conversation (an agent's state, a turn) holds, and the list itself is
    /// extended in place between the model calls of a tool loop. [`LlmRequest::messages()`]
    /// iterates them as `&Message`.
    pub messages: Arc<Vec<Arc<Message>>>,
    /// The system prompt.
    pub system: Option<String>,
    /// Vendor parameters, passed through unchanged (merged into the request body).
    pub params: Option<serde_json::Map<String, Value>>,
    /// Function tools offered to the model.
    pub tools: Arc<[Tool]>,
    /// Whether, and which, of `tools` the reply must call (see [`crate::tool_choice`]; an
    /// explicit vendor param in `params` wins).
    pub tool_choice: crate::tool_choice::ToolChoice,
    /// JSON Schema for structured output.
    pub structure: Option<Value>,
    /// Cancelled when the caller aborts.
    pub signal: CancellationToken,
    /// The configuration resolved by the core.
    pub config: Arc<ProviderConfig>,
}

impl LlmRequest {
    /// The conversation's messages as `&Message`, in order (for pattern matches).
    ///
    /// # Examples
    ///
    /// ```
    /// use weft_provider::{LlmRequest, Message};
    ///
    /// fn last_tool_results(request: &LlmRequest) -> usize {
    ///     match request.messages().last() {
    ///         Some(Message::ToolResult(results)) => results.results.len(),
    ///         _ => 0,
    ///     }
    /// }
    /// ```
    pub fn messages(&self) -> impl DoubleEndedIterator<Item = &Message> + ExactSizeIterator + '_ {
        self.messages.iter().map(|m| &**m)
    }
}

/// The result of one request (§5.5).
#[derive(Debug, Clone, PartialEq)]
pub struct LlmResponse {
    /// The model's message.
    pub message: AssistantMessage,
    /// Token usage of this request.
    pub usage: TokenUsage,
    /// Why the model stopped, normalized: `end_turn`, `tool_use`, `max_tokens`,
    /// `stop_sequence`, `content_filter`, or the vendor's own word when none fits. The vendor's
    /// original value is kept in `message.metadata.{provider}`.
    pub stop_reason: String,
    /// Structured output parsed by the provider, if it did so itself.
    pub data: Option<Value>,
}

impl LlmResponse {
    /// The stream events a provider would have sent for this response: text and reasoning
    /// in word-sized deltas, each tool call with its arguments in two pieces. Scripted models
    /// stream this way, and a recorded response is replayed this way.
    pub fn replay_events(&self) -> Vec<StreamEvent> {
        let chunks =
            |text: &str| -> Vec<String> { text.split_inclusive(' ').map(str::to_owned).collect() };
        let mut events = vec![StreamEvent::message_start()];
        let mut index = 0u32;
        for block in &self.message.content {
            events.push(StreamEvent::block_start(index));
            match block {
                ContentBlock::Text(t) => events.extend(
                    chunks(&t.text)
                        .into_iter()
                        .map(|c| StreamEvent::text_delta(index, c)),
                ),
                ContentBlock::Reasoning(r) => events.extend(
                    chunks(&r.text)
                        .into_iter()
                        .map(|c| StreamEvent::reasoning_delta(index, c)),
                ),
                _ => {}
            }
            events.push(StreamEvent::block_stop(index));
            index += 1;
        }
        for call in &self.message.tool_calls {
            events.push(StreamEvent::block_start(index));
            events.push(StreamEvent::tool_call_delta(
                index,
                Some(call.tool_call_id.clone()),
                Some(call.tool_name.clone()),
                None,
            ));
            let json = call.arguments.to_string();
            let middle = (0..=json.len() / 2)
                .rev()
                .find(|&i| json.is_char_boundary(i))
                .unwrap_or(0);
            let (a, b) = json.split_at(middle);
            for part in [a, b].into_iter().filter(|p| !p.is_empty()) {
                events.push(StreamEvent::tool_call_delta(
                    index,
                    None,
                    None,
                    Some(part.to_owned()),
                ));
            }
            events.push(StreamEvent::block_stop(index));
            index += 1;
        }
        events.push(StreamEvent::message_stop());
        events
    }

    /// This response as a provider stream: [`LlmResponse::replay_events`], then the response.
    pub fn into_stream(self) -> LlmStream {
        let mut parts: Vec<Result<LlmStreamPart, UppError>> = self
            .replay_events()
            .into_iter()
            .map(|e| Ok(LlmStreamPart::Event(e)))
            .collect();
        parts.push(Ok(LlmStreamPart::Response(self)));
        Box::pin(futures_util::stream::iter(parts))
    }
}

/// An item of a provider stream: events as they arrive, then exactly one response.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmStreamPart {
    /// A stream event.
    Event(StreamEvent),
    /// The final response (the last item).
    Response(LlmResponse),
}

/// A provider's stream for one request (§5.5 `LLMStreamResult`).
pub type LlmStream = Pin<Box<dyn Stream<Item = Result<LlmStreamPart, UppError>> + Send>>;

/// A model bound to a provider (§5.5 `BoundLLMModel`).
pub trait LlmModel: Send + Sync + fmt::Debug {
    /// The model id, e.g. `gpt-4o`.
    fn model_id(&self) -> &str;

    /// The provider name, e.g. `openai`.
    fn provider(&self) -> &str;

    /// What the provider's API supports.
    fn capabilities(&self) -> LlmCapabilities;

    /// One non-streaming request.
    fn complete(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmResponse, UppError>>;

    /// One streaming request. The stream ends with one [`LlmStreamPart::Response`].
    fn stream(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmStream, UppError>>;
}

/// The LLM handler of a provider (§4.5): binds model ids.
pub trait LlmHandler: Send + Sync {
    /// Binds `model_id` with the given provider options.
    ///
    /// # Errors
    /// When the id or options are invalid for this provider.
    fn bind(&self, model_id: &str, options: &Value) -> Result<Arc<dyn LlmModel>, UppError>;
}

impl<F> LlmHandler for F
where
    F: Fn(&str, &Value) -> Result<Arc<dyn LlmModel>, UppError> + Send + Sync,
{
    fn bind(&self, model_id: &str, options: &Value) -> Result<Arc<dyn LlmModel>, UppError> {
        self(model_id, options)
    }
}

/// A provider: a name, a version and one handler per modality it supports (§3.3, §15.2).
#[derive(Clone)]
pub struct Provider {
    /// e.g. `anthropic`.
    pub name: String,
    /// The adapter's version.
    pub version: String,
    /// Default configuration merged under the caller's (e.g. a base URL from the environment).
    pub default_config: ProviderConfig,
    llm: Option<Arc<dyn LlmHandler>>,
    embedding: Option<Arc<dyn crate::embedding::EmbeddingHandler>>,
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("llm", &self.llm.is_some())
            .field("embedding", &self.embedding.is_some())
            .finish()
    }
}

impl Provider {
    /// `createProvider({name, version, handlers})` (§15.2), without handlers yet.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Provider {
            name: name.into(),
            version: version.into(),
            default_config: ProviderConfig::default(),
            llm: None,
            embedding: None,
        }
    }

    /// Adds the LLM handler.
    #[must_use]
    pub fn with_llm(mut self, handler: impl LlmHandler + 'static) -> Self {
        self.llm = Some(Arc::new(handler));
        self
    }

    /// Adds the embedding handler.
    #[must_use]
    pub fn with_embedding(
        mut self,
        handler: impl crate::embedding::EmbeddingHandler + 'static,
    ) -> Self {
        self.embedding = Some(Arc::new(handler));
        self
    }

    /// Calls the factory: a reference to `model_id` on this provider.
    pub fn model(self: &Arc<Self>, model_id: impl Into<String>) -> ModelReference {
        ModelReference {
            model_id: model_id.into(),
            provider: self.clone(),
            options: Value::Null,
        }
    }

    /// The LLM handler, or `INVALID_REQUEST` when this provider has none (§4.6).
    ///
    /// # Errors
    /// When the provider has no LLM handler.
    pub fn llm_handler(&self) -> Result<&Arc<dyn LlmHandler>, UppError> {
        self.llm.as_ref().ok_or_else(|| {
            UppError::new(
                ErrorCode::InvalidRequest,
                format!("provider {} has no LLM handler", self.name),
                &self.name,
                Modality::Llm,
            )
        })
    }

    /// The embedding handler, or `INVALID_REQUEST` when this provider has none (§4.6, §15.6).
    ///
    /// # Errors
    /// When the provider has no embedding handler.
    pub fn embedding_handler(
        &self,
    ) -> Result<&Arc<dyn crate::embedding::EmbeddingHandler>, UppError> {
        self.embedding.as_ref().ok_or_else(|| {
            UppError::new(
                ErrorCode::InvalidRequest,
                format!("provider {} has no embedding handler", self.name),
                &self.name,
                Modality::Embedding,
            )
        })
    }
}

/// A model id plus the provider that made the reference (§4.5), plus provider options.
#[derive(Debug, Clone)]
pub struct ModelReference {
    /// The model id.
    pub model_id: String,
    /// The provider that created this reference.
    pub provider: Arc<Provider>,
    /// Provider-specific options (§4.1), `Null` when none.
    pub options: Value,
}

impl ModelReference {
    /// Sets provider options.
    #[must_use]
    pub fn with_options(mut self, options: Value) -> Self {
        self.options = options;
        self
    }

    /// `PROVIDER:MODEL`.
    pub fn to_reference_string(&self) -> String {
        format!("{}:{}", self.provider.name, self.model_id)
    }
}

/// Why a `PROVIDER:MODEL` string could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelRefError {
    /// No `:` in the string.
    #[error(
        "model reference {0:?} is not of the form PROVIDER:MODEL (for example openai-compatible:llama3.2)"
    )]
    Malformed(String),
    /// The provider is not registered.
    #[error("unknown provider {provider:?} in {reference:?}; known providers: {known}")]
    UnknownProvider {
        /// The provider part.
        provider: String,
        /// The whole string.
        reference: String,
        /// Comma-separated known names.
        known: String,
    },
}

type ProviderFactory = Arc<dyn Fn() -> Arc<Provider> + Send + Sync>;

/// Providers by name, so that `PROVIDER:MODEL` strings resolve and new providers plug in
/// without touching the core.
///
/// # Examples
///
/// ```
/// use weft_provider::ProviderRegistry;
///
/// let registry = ProviderRegistry::with_builtins();
/// let reference = registry.resolve("openai-compatible:llama3.2")?;
/// assert_eq!(reference.provider.name, "openai-compatible");
/// assert_eq!(reference.model_id, "llama3.2");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct ProviderRegistry {
    factories: BTreeMap<String, ProviderFactory>,
}

impl fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.factories.keys()).finish()
    }
}

impl ProviderRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        ProviderRegistry::default()
    }

    /// The providers built into this crate.
    pub fn with_builtins() -> Self {
        let mut registry = ProviderRegistry::new();
        crate::adapters::register_builtins(&mut registry);
        registry
    }

    /// Registers (or replaces) a provider under `name`.
    pub fn register(
        &mut self,
        name: impl Into<String>,
        factory: impl Fn() -> Arc<Provider> + Send + Sync + 'static,
    ) {
        self.factories.insert(name.into(), Arc::new(factory));
    }

    /// Registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }

    /// The provider registered as `name`.
    pub fn provider(&self, name: &str) -> Option<Arc<Provider>> {
        self.factories.get(name).map(|f| f())
    }

    /// Resolves `PROVIDER:MODEL`. The model part may itself contain `:` (`scripted:C:\x.json`,
    /// `openai-compatible:llama3:8b`).
    ///
    /// # Errors
    /// When the string has no `:` or names an unknown provider.
    pub fn resolve(&self, reference: &str) -> Result<ModelReference, ModelRefError> {
        let (name, model) = reference
            .split_once(':')
            .filter(|(p, m)| !p.is_empty() && !m.is_empty())
            .ok_or_else(|| ModelRefError::Malformed(reference.to_owned()))?;
        let provider = self
            .provider(name)
            .ok_or_else(|| ModelRefError::UnknownProvider {
                provider: name.to_owned(),
                reference: reference.to_owned(),
                known: self.names().collect::<Vec<_>>().join(", "),
            })?;
        Ok(provider.model(model))
    }
}
