//! The names Weft's spans use, from the OpenTelemetry GenAI semantic conventions
//! (`open-telemetry/semantic-conventions-genai`, status *Development*), defined here rather
//! than taken from the `opentelemetry-semantic-conventions` crate, which marks the `gen_ai.*`
//! names deprecated since they moved to their own repository.
//!
//! | span | name | kind |
//! | --- | --- | --- |
//! | one agent run in one process | `invoke_agent {gen_ai.agent.name}` | `INTERNAL` |
//! | one model call | `chat {gen_ai.request.model}` | `CLIENT` |
//! | one tool call that ran | `execute_tool {gen_ai.tool.name}` | `INTERNAL` |

/// Required on every GenAI span: `chat`, `invoke_agent`, `execute_tool`.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// The provider as the instrumentation knows it (`openai`, `anthropic`, `gcp.gemini`, …);
/// formerly `gen_ai.system`.
pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
/// The model a request asked for.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
/// The model that answered (as the response names it).
pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
/// The response's id, when the provider gives one.
pub const GEN_AI_RESPONSE_ID: &str = "gen_ai.response.id";
/// Why the model stopped, one entry per choice (string array).
pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// Input (prompt) tokens of a call.
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// Output (completion) tokens of a call.
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// The conversation (session, thread) the call belongs to: Weft's thread id.
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// The agent's human-readable name.
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
/// The agent's unique id.
pub const GEN_AI_AGENT_ID: &str = "gen_ai.agent.id";
/// The tool's name.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// The tool call's id, as the model gave it.
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// The tool's type: `function` for the tools Weft runs itself.
pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
/// The tool's description.
pub const GEN_AI_TOOL_DESCRIPTION: &str = "gen_ai.tool.description";
/// Opt-in (content): the tool call's arguments (JSON).
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// Opt-in (content): the tool call's result (JSON).
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
/// Opt-in (content): the chat history sent to the model (JSON, the conventions' input
/// messages schema).
pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// Opt-in (content): the model's answer (JSON, the conventions' output messages schema).
pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// Opt-in (content): the system prompt (JSON array of parts).
pub const GEN_AI_SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
/// The class of error an operation ended with (stable general convention).
pub const ERROR_TYPE: &str = "error.type";

/// `gen_ai.operation.name` of a model call.
pub const OP_CHAT: &str = "chat";
/// `gen_ai.operation.name` of an agent run.
pub const OP_INVOKE_AGENT: &str = "invoke_agent";
/// `gen_ai.operation.name` of a tool call.
pub const OP_EXECUTE_TOOL: &str = "execute_tool";

/// `error.type` when nothing more specific is known.
pub const ERROR_OTHER: &str = "_OTHER";

/// Weft's own attribute: the run's id.
pub const WEFT_RUN_ID: &str = "weft.run.id";
/// Weft's own attribute: whether this process resumed the run (`true`) or started it.
pub const WEFT_RUN_RESUMED: &str = "weft.run.resumed";
/// Weft's own attribute: how the run ended in this process (`completed`, `failed`,
/// `interrupted`, `suspended`, `needs_approval`).
pub const WEFT_RUN_END: &str = "weft.run.end";

/// The `gen_ai.provider.name` of a Weft provider name: the conventions' well-known value
/// where one applies (`google` → `gcp.gemini`), else the name as it is.
///
/// # Examples
///
/// ```
/// assert_eq!(weft_otel::semconv::provider_name("google"), "gcp.gemini");
/// assert_eq!(weft_otel::semconv::provider_name("anthropic"), "anthropic");
/// ```
pub fn provider_name(weft_provider: &str) -> &str {
    match weft_provider {
        "google" | "gemini" => "gcp.gemini",
        "vertex" | "vertex_ai" => "gcp.vertex_ai",
        "bedrock" => "aws.bedrock",
        "mistral" => "mistral_ai",
        "xai" => "x_ai",
        other => other,
    }
}
