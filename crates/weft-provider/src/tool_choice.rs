//! [`ToolChoice`]: whether, and which, tools the model must call in its reply.
//!
//! UPP-1.2 has no tool-choice option (a caller passes the vendor's own field in `params`);
//! Weft adds this typed one so the runtime can force a call (the runtime profile's Final
//! Warning turn forces `complete_task`) whatever the provider. Each adapter maps it to its
//! wire format:
//!
//! | choice | OpenAI Chat Completions | OpenAI Responses | Anthropic Messages | Google Gemini (`toolConfig.functionCallingConfig`) | local model |
//! |---|---|---|---|---|---|
//! | `Auto` | nothing sent (the API's default) | nothing sent | nothing sent | nothing sent | `auto` |
//! | `Required` | `"required"` | `"required"` | `{"type": "any"}` | `{"mode": "ANY"}` | `required` |
//! | `None` | `"none"` | `"none"` | `{"type": "none"}` | `{"mode": "NONE"}` | `none` (tools not offered) |
//! | `Tool(name)` | `{"type": "function", "function": {"name": name}}` | `{"type": "function", "name": name}` | `{"type": "tool", "name": name}` | `{"mode": "ANY", "allowedFunctionNames": [name]}` | `required`, only `name` offered |
//!
//! The scripted provider ignores the choice (its answers are fixed); a
//! [`function_model`](crate::adapters::scripted::function_model) sees it in
//! [`LlmRequest::tool_choice`](crate::provider::LlmRequest::tool_choice).
//!
//! **Precedence.** A vendor param the caller set explicitly wins: `tool_choice` in `params`
//! (Chat Completions, Responses, Anthropic, the local model's `tool_choice`/`toolChoice`),
//! `toolConfig.functionCallingConfig` or `tool_config` (Gemini). The typed choice is then not
//! sent, so a project's own setting is never silently replaced.
//!
//! **Nothing to choose from.** When a request offers no tools, no choice is sent at all
//! (the APIs refuse a tool choice without tools); [`crate::llm()`] refuses `Required` and
//! `Tool(name)` when the named tool is not offered (`INVALID_REQUEST`).
//!
//! **Anthropic with extended thinking.** The Messages API refuses a forced choice (`any`,
//! `tool`) when `thinking` is on (`params.thinking.type` other than `disabled`). The adapter
//! then sends no choice (the API's `auto`) and logs why at debug level, rather than failing
//! the request: the model still sees only the offered tools, and a caller that needs the call
//! checks the reply (the runtime profile ends a Final Warning turn without `complete_task` in
//! ERROR).
//!
//! # Examples
//!
//! ```
//! use weft_provider::{LlmOptions, ToolChoice};
//! # fn demo(model: weft_provider::provider::ModelReference) {
//! let options = LlmOptions::new(model)
//!     .offer_only(vec!["complete_task".into()])
//!     .tool_choice(ToolChoice::tool("complete_task"));
//! assert_eq!(options.tool_choice, ToolChoice::Tool("complete_task".into()));
//! # }
//! ```

use serde::{Deserialize, Serialize};

/// Whether, and which, tools the model must call in its reply (see the [module
/// documentation](self) for each provider's wire format and the precedence of `params`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides: text, tool calls, or both (the default; nothing is sent).
    #[default]
    Auto,
    /// The reply must call at least one of the offered tools.
    Required,
    /// The reply must not call tools.
    None,
    /// The reply must call the tool of this name.
    Tool(String),
}

impl ToolChoice {
    /// `ToolChoice::Tool(name)`.
    pub fn tool(name: impl Into<String>) -> Self {
        ToolChoice::Tool(name.into())
    }

    /// Whether the choice forces a tool call (`Required` or `Tool`).
    pub fn forces_a_call(&self) -> bool {
        matches!(self, ToolChoice::Required | ToolChoice::Tool(_))
    }
}
