//! The UPP-1.2 provider layer of Weft: messages, turns, tools, the tool loop, streaming,
//! errors, and provider adapters that speak each vendor's HTTP API directly.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use serde_json::json;
//! use weft_provider::adapters::scripted::{self, Script, ScriptedResponse};
//! use weft_provider::{llm, LlmOptions, Tool};
//!
//! // A scripted model: first it calls `add`, then it answers.
//! let model = scripted::model(Script { fresh_ids: false, responses: vec![
//!     ScriptedResponse::tool_call("c1", "add", json!({"a": 2, "b": 3})),
//!     ScriptedResponse::text("2 + 3 = 5"),
//! ]});
//! let add = Tool::new("add", "Adds two integers.",
//!     json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
//!     |args: serde_json::Value, _ctx| async move {
//!         Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
//!     });
//! let instance = llm(LlmOptions::new(model).tool(add))?;
//! let turn = instance.generate(&[], "What is 2 + 3?").await?;
//! assert_eq!(turn.text(), "2 + 3 = 5");
//! assert_eq!(turn.cycles, 2);
//! assert_eq!(turn.tool_executions[0].result, json!(5));
//! # Ok(())
//! # }
//! ```
//!
//! # Map
//!
//! | module | what |
//! |---|---|
//! | [`message`], [`content`] | messages and content blocks (§6) |
//! | [`tool`], [`strategy`] | tools, calls, results, `ToolUseStrategy` (§10) |
//! | [`turn`] | `Turn`, `TokenUsage` (§7) |
//! | [`stream`] | stream events (§9) |
//! | [`llm`](mod@llm) | `llm()`, the tool loop, `StreamResult` (§5) |
//! | [`embedding`](mod@embedding) | `embedding()` (§12) |
//! | [`pricing`] | the dated price table, overrides, the cost of a call |
//! | [`provider`] | the provider contract and the `PROVIDER:MODEL` registry (§4.5, §15) |
//! | [`config`], [`retry`], [`http`], [`sse`], [`redact`] | shared infrastructure (§4, §15.4, §17) |
//! | [`trace`] | what is sent and received over HTTP, secrets redacted (`weft --verbose`) |
//! | [`adapters`] | one module per vendor dialect |

pub mod adapters;
pub mod config;
pub mod content;
pub mod embedding;
pub mod error;
mod executor;
pub mod http;
pub mod llm;
pub mod media;
pub mod message;
pub mod pipeline;
pub mod pricing;
pub mod provider;
pub mod redact;
pub mod retry;
pub mod sse;
pub mod strategy;
pub mod stream;
pub mod thread;
pub mod tool;
pub mod tool_choice;
pub mod trace;
pub mod turn;

pub use config::{
    ApiKey, DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DynamicKey, KeyStrategy, ProviderConfig,
    RoundRobinKeys, WeightedKeys, resolve_api_key,
};
pub use content::{
    AudioBlock, BinaryBlock, Blob, ContentBlock, ContentBlockType, DocumentBlock, DocumentSource,
    DocumentSourceType, ImageBlock, ImageSource, ImageSourceType, ReasoningBlock, TextBlock,
    VideoBlock,
};
pub use embedding::{
    EmbedOptions, Embedding, EmbeddingInput, EmbeddingInputType, EmbeddingInstance, EmbeddingModel,
    EmbeddingOptions, EmbeddingRequest, EmbeddingResponse, EmbeddingResult, EmbeddingUsage,
    embedding,
};
pub use error::{ErrorCode, Modality, UppError};
pub use executor::ExecutionMode;
pub use llm::{InferenceInput, IntoInputs, LlmInstance, LlmOptions, StreamResult, StreamTap, llm};
pub use media::{Audio, Document, Image, MediaError, Video};
pub use message::{
    AssistantMessage, Message, MessageOptions, MessageType, Metadata, ToolResultMessage,
    UserMessage, is_assistant_message, is_tool_result_message, is_user_message,
};
pub use provider::{
    LlmCapabilities, LlmHandler, LlmModel, LlmRequest, LlmResponse, LlmStream, LlmStreamPart,
    ModelRefError, ModelReference, Provider, ProviderRegistry,
};
pub use retry::{
    ExponentialBackoff, LinearBackoff, NoRetry, RetryAfterStrategy, RetryNotice, RetryObserver,
    RetryStrategy, TokenBucket, set_retry_observer,
};
pub use strategy::{AfterCallResult, BeforeCall, BeforeCallResult, ToolUseStrategy};
pub use stream::{EventDelta, StreamEvent, StreamEventType};
pub use thread::{Thread, ThreadJson};
pub use tool::{
    Extensions, Tool, ToolApproval, ToolCall, ToolContext, ToolError, ToolExecution, ToolResult,
    ToolRun,
};
pub use tool_choice::ToolChoice;
pub use turn::{CycleUsage, TokenUsage, Turn, TurnResponse};

/// The `ai` namespace of §3.2: the same entry points under one name (`ai::llm`).
pub mod ai {
    pub use crate::embedding::embedding;
    pub use crate::llm::llm;
}
