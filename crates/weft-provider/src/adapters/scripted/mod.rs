//! The scripted provider: deterministic responses for tests and examples, given in code or a
//! JSON file (like Pydantic AI's `TestModel` / `FunctionModel`).
//!
//! Model references: `scripted:PATH` loads a script file. In code, [`model`] makes a
//! reference from a [`Script`], and [`function_model`] from a function that reads the request
//! (the conversation so far) and answers it.
//!
//! The file format:
//!
//! ```json
//! {"responses": [
//!   {"reasoning": "…", "text": "…",
//!    "toolCalls": [{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}],
//!    "usage": {"inputTokens": 10, "outputTokens": 5},
//!    "error": {"code": "RATE_LIMITED", "message": "…"},
//!    "delayMs": 20}
//! ]}
//! ```
//!
//! Responses are consumed in order, one per model call; running out is a clear error. An
//! unknown key (a typo such as `txt`) is an error naming the file, line and column.
//!
//! The request's [`ToolChoice`](crate::ToolChoice) is ignored: a scripted answer is fixed, so
//! a script can play a provider that does not honour a forced choice. A [`function_model`]
//! reads it in `request.tool_choice` when a test wants to answer by it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::content::{ContentBlock, ReasoningBlock};
use crate::error::{ErrorCode, UppError};
use crate::message::{AssistantMessage, MessageOptions};
use crate::provider::{
    LlmCapabilities, LlmModel, LlmRequest, LlmResponse, LlmStream, ModelReference, Provider,
};
use crate::tool::{BoxFuture, ToolCall};
use crate::turn::{CycleUsage, TokenUsage};

/// The provider's name and model-reference prefix.
pub const NAME: &str = "scripted";

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// Call id (generated as `call_<n>` when absent).
    #[serde(default)]
    pub id: Option<String>,
    /// Tool name.
    pub name: String,
    /// Arguments.
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// Ids of calls that must finish first (UAP-1.0 §8.6).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// Scripted usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptedUsage {
    /// Input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Cache-read tokens.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Cache-write tokens.
    #[serde(default)]
    pub cache_write_tokens: u64,
}

/// A scripted error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedError {
    /// An `ErrorCode` string, e.g. `RATE_LIMITED`.
    pub code: ErrorCode,
    /// The message.
    #[serde(default)]
    pub message: String,
}

/// One scripted model response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptedResponse {
    /// Reply text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Reasoning text (placed before the text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptedToolCall>,
    /// Usage to report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ScriptedUsage>,
    /// Fail this call with this error instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ScriptedError>,
    /// Wait this long before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

impl ScriptedResponse {
    /// A text reply.
    pub fn text(text: impl Into<String>) -> Self {
        ScriptedResponse {
            text: Some(text.into()),
            ..ScriptedResponse::default()
        }
    }

    /// A reply with one tool call.
    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ScriptedResponse {
            tool_calls: vec![ScriptedToolCall {
                id: Some(id.into()),
                name: name.into(),
                arguments,
                after: Vec::new(),
            }],
            ..ScriptedResponse::default()
        }
    }
}

/// A script: responses consumed in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The responses.
    pub responses: Vec<ScriptedResponse>,
    /// Give every answer's tool calls new ids (a random suffix), as real providers do.
    #[serde(
        default,
        rename = "freshIds",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub fresh_ids: bool,
}

/// Why a script file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// Reading failed.
    #[error("cannot read script {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not a valid script.
    #[error("invalid script {path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The JSON error (with line and column).
        source: serde_json::Error,
    },
}

impl Script {
    /// A script of plain text replies.
    pub fn texts(texts: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Script {
            responses: texts.into_iter().map(ScriptedResponse::text).collect(),
            fresh_ids: false,
        }
    }

    /// Loads a script file.
    ///
    /// # Errors
    /// When the file cannot be read or is not a valid script.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| ScriptError::Parse {
            path: path.display().to_string(),
            source,
        })
    }
}

type ResponderFn = dyn Fn(&LlmRequest) -> Result<ScriptedResponse, UppError> + Send + Sync;

enum Source {
    Script { script: Script, cursor: AtomicUsize },
    Function(Box<ResponderFn>),
}

/// The scripted model.
pub struct ScriptedModel {
    model_id: String,
    source: Source,
    capabilities: LlmCapabilities,
    fresh_ids: bool,
    /// Written into every answer's metadata (`{"scripted": {"script": TAG}}`), so a
    /// conversation shows which script gave which answer.
    answer_tag: Option<String>,
}

/// The metadata key under which a tagged scripted answer names its script.
pub const ANSWER_TAG_KEY: &str = "scripted";

/// The script that gave `message`, when it is a tagged scripted answer (see
/// [`ScriptedModel::with_answer_tag`]).
pub fn answer_tag(message: &AssistantMessage) -> Option<&str> {
    message
        .metadata
        .as_ref()?
        .get(ANSWER_TAG_KEY)?
        .get("script")?
        .as_str()
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("model_id", &self.model_id)
            .finish_non_exhaustive()
    }
}

const CAPABILITIES: LlmCapabilities = LlmCapabilities {
    streaming: true,
    tools: true,
    structured_output: true,
    image_input: true,
    document_input: true,
    video_input: true,
    audio_input: true,
};

impl ScriptedModel {
    /// A model answering from `script`.
    pub fn from_script(model_id: impl Into<String>, script: Script) -> Self {
        ScriptedModel {
            model_id: model_id.into(),
            fresh_ids: script.fresh_ids,
            source: Source::Script {
                script,
                cursor: AtomicUsize::new(0),
            },
            capabilities: CAPABILITIES,
            answer_tag: None,
        }
    }

    /// A model answering with `respond(request)`.
    pub fn from_fn(
        model_id: impl Into<String>,
        respond: impl Fn(&LlmRequest) -> Result<ScriptedResponse, UppError> + Send + Sync + 'static,
    ) -> Self {
        ScriptedModel {
            model_id: model_id.into(),
            source: Source::Function(Box::new(respond)),
            capabilities: CAPABILITIES,
            fresh_ids: false,
            answer_tag: None,
        }
    }

    /// Tags every answer with `tag` in its metadata (see [`answer_tag`]).
    #[must_use]
    pub fn with_answer_tag(mut self, tag: impl Into<String>) -> Self {
        self.answer_tag = Some(tag.into());
        self
    }

    /// Gives every answer's tool calls new ids, as real providers do (see
    /// [`Script::fresh_ids`]).
    #[must_use]
    pub fn with_fresh_ids(mut self, fresh_ids: bool) -> Self {
        self.fresh_ids = fresh_ids;
        self
    }

    fn fresh_ids(&self) -> bool {
        self.fresh_ids
    }

    /// Overrides the declared capabilities (to test capability checks).
    #[must_use]
    pub fn with_capabilities(mut self, capabilities: LlmCapabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// How many responses the script has handed out.
    pub fn calls(&self) -> usize {
        match &self.source {
            Source::Script { cursor, .. } => cursor.load(Ordering::SeqCst),
            Source::Function(_) => 0,
        }
    }

    fn next(&self, request: &LlmRequest) -> Result<ScriptedResponse, UppError> {
        match &self.source {
            Source::Function(respond) => respond(request),
            Source::Script { script, cursor } => {
                let i = cursor.fetch_add(1, Ordering::SeqCst);
                script.responses.get(i).cloned().ok_or_else(|| {
                    UppError::llm(
                        ErrorCode::InvalidRequest,
                        NAME,
                        format!(
                            "the script {} has {} responses and all were used; model call {} has no scripted response",
                            self.model_id,
                            script.responses.len(),
                            i + 1
                        ),
                    )
                })
            }
        }
    }

    async fn respond(&self, request: &LlmRequest) -> Result<ScriptedResponse, UppError> {
        let response = self.next(request)?;
        if let Some(ms) = response.delay_ms.filter(|ms| *ms > 0) {
            tokio::select! {
                biased;
                () = request.signal.cancelled() => return Err(UppError::cancelled(NAME, crate::Modality::Llm)),
                () = tokio::time::sleep(Duration::from_millis(ms)) => {}
            }
        }
        if let Some(error) = &response.error {
            return Err(UppError::llm(error.code, NAME, error.message.clone()));
        }
        Ok(response)
    }
}

/// The response as the provider layer takes it. Takes the scripted response by value: its
/// strings and arguments move into the message instead of being copied.
fn to_llm_response(
    scripted: ScriptedResponse,
    fresh_ids: bool,
    tag: Option<&str>,
) -> Result<LlmResponse, UppError> {
    // Real providers give new call ids on every answer; `freshIds` scripts do the same.
    let suffix = if fresh_ids {
        format!("-{:08x}", fastrand::u32(..))
    } else {
        String::new()
    };
    let mut content = Vec::new();
    if let Some(reasoning) = scripted.reasoning {
        content.push(ContentBlock::Reasoning(ReasoningBlock {
            text: reasoning,
            signature: None,
            metadata: None,
        }));
    }
    if let Some(text) = scripted.text {
        content.push(ContentBlock::text(text));
    }
    let calls: Vec<ToolCall> = scripted
        .tool_calls
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let mut id = c.id.unwrap_or_else(|| format!("call_{i}"));
            id.push_str(&suffix);
            ToolCall {
                tool_call_id: id,
                tool_name: c.name,
                arguments: c.arguments,
                after: c.after,
            }
        })
        .collect();
    let stop_reason = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    let usage = scripted.usage.unwrap_or_default();
    let options = MessageOptions {
        metadata: tag.map(|tag| {
            let mut metadata = crate::message::Metadata::new();
            metadata.insert(
                ANSWER_TAG_KEY.to_owned(),
                serde_json::json!({ "script": tag }),
            );
            metadata
        }),
        ..MessageOptions::default()
    };
    let message = AssistantMessage::new(content, calls, options)
        .map_err(|e| UppError::llm(ErrorCode::InvalidResponse, NAME, e.to_string()))?;
    Ok(LlmResponse {
        message,
        usage: TokenUsage::from_cycle(CycleUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_read_tokens: usage.cache_read_tokens,
            cache_write_tokens: usage.cache_write_tokens,
        }),
        stop_reason: stop_reason.to_owned(),
        data: None,
    })
}

impl LlmModel for ScriptedModel {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn provider(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> LlmCapabilities {
        self.capabilities
    }

    fn complete(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmResponse, UppError>> {
        Box::pin(async move {
            let scripted = self.respond(&request).await?;
            to_llm_response(scripted, self.fresh_ids(), self.answer_tag.as_deref())
        })
    }

    fn stream(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmStream, UppError>> {
        Box::pin(async move {
            let scripted = self.respond(&request).await?;
            Ok(
                to_llm_response(scripted, self.fresh_ids(), self.answer_tag.as_deref())?
                    .into_stream(),
            )
        })
    }
}

/// The registry factory: `scripted:PATH` loads the script file at `PATH` when bound.
pub fn provider() -> Arc<Provider> {
    Arc::new(Provider::new(NAME, env!("CARGO_PKG_VERSION")).with_llm(
        |model_id: &str, _options: &Value| {
            let script = Script::load(Path::new(model_id))
                .map_err(|e| UppError::llm(ErrorCode::InvalidRequest, NAME, e.to_string()))?;
            let model: Arc<dyn LlmModel> = Arc::new(ScriptedModel::from_script(model_id, script));
            Ok(model)
        },
    ))
}

/// A reference to an in-memory scripted model.
///
/// Every `llm()` bound from this reference shares the script's cursor.
pub fn model(script: Script) -> ModelReference {
    from_model(ScriptedModel::from_script("inline", script))
}

/// A reference to a model answering with `respond(request)`.
pub fn function_model(
    respond: impl Fn(&LlmRequest) -> Result<ScriptedResponse, UppError> + Send + Sync + 'static,
) -> ModelReference {
    from_model(ScriptedModel::from_fn("function", respond))
}

/// A reference to an existing scripted model (keep an `Arc` to inspect it afterwards).
pub fn from_model(model: ScriptedModel) -> ModelReference {
    let shared: Arc<dyn LlmModel> = Arc::new(model);
    from_shared(shared)
}

/// A reference to any already-bound model (used in tests to count calls).
pub fn from_shared(shared: Arc<dyn LlmModel>) -> ModelReference {
    let id = shared.model_id().to_owned();
    let provider = Provider::new(NAME, env!("CARGO_PKG_VERSION"))
        .with_llm(move |_: &str, _: &Value| Ok(shared.clone()));
    Arc::new(provider).model(id)
}
