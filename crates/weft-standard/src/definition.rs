//! The definitions of a Standard Agents project, spelled as the spec spells them
//! (`sideA`, `stopOnResponse`, `maxSessionTurns`, …): [`AgentDefinition`] (agents §1),
//! [`SideConfig`] (§3), [`SessionToolBinding`] (§4), plus Weft's [`PromptDefinition`],
//! [`ToolDefinition`] and [`ProjectConfig`] (`weft.toml`).
//!
//! Every struct rejects unknown keys, so a misspelt key is a load error, not a silent default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use weft_runtime::event::{AgentType, Side};

/// An agent (agents §1): a conversation type, its sides and how it may be called.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentDefinition {
    /// Unique agent identifier (required).
    pub name: String,
    /// Conversation mode; `ai_human` when absent.
    #[serde(default, rename = "type")]
    pub agent_type: AgentType,
    /// Side A (required).
    pub side_a: SideConfig,
    /// Side B, required for `dual_ai`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_b: Option<SideConfig>,
    /// Session turn safety cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_session_turns: Option<u64>,
    /// Human-readable label (legacy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Agent summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Display icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
    /// Expose a callable entrypoint (handoff for `ai_human`, subagent for `dual_ai`).
    #[serde(default)]
    pub expose_as_tool: bool,
    /// The description of the callable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_description: Option<String>,
    /// Weft's extension: the JSON Schema (an object schema) of the callable's arguments,
    /// for a `dual_ai` agent called as a subagent. Without it the callable takes one string
    /// argument, named by the caller's `initUserMessageProperty` (default `message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_parameters: Option<Value>,
    /// Agent-level default variable values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The variables the agent declares (tools §3; see [`crate::variables`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<VariableDefinition>,
    /// Tools that wait for a person's approval before every call by this agent (added to
    /// the project's `requiresApproval`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires_approval: Vec<String>,
    /// Fallback hook IDs (accepted; Weft has no hook registry yet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<String>,
    /// Packaging metadata: package name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_name: Option<String>,
    /// Packaging metadata: version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Packaging metadata: author.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// Packaging metadata: license.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// Weft's extension: this agent's runtime profile settings over the project's
    /// `[runtime]` (its presence turns the profile on for the agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Value>,
}

impl AgentDefinition {
    /// The side configurations that exist: `[("sideA", A)]` or `[("sideA", A), ("sideB", B)]`.
    pub fn sides(&self) -> Vec<(Side, &SideConfig)> {
        let mut sides = vec![(Side::A, &self.side_a)];
        if let Some(b) = &self.side_b {
            sides.push((Side::B, b));
        }
        sides
    }
}

fn default_true() -> bool {
    true
}

/// A side's configuration (agents §3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SideConfig {
    /// Prompt name for this side (required).
    pub prompt: String,
    /// UI/log label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Stop the side's turn on a text response without tool calls (default true).
    #[serde(default = "default_true")]
    pub stop_on_response: bool,
    /// Stop the side's turn when this tool is called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_tool: Option<String>,
    /// The property extracted from the stop tool's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_tool_response_property: Option<String>,
    /// Per-side-turn step safety limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u64>,
    /// Ends the session successfully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_stop: Option<SessionToolBinding>,
    /// Ends the session with failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_fail: Option<SessionToolBinding>,
    /// Publishes status updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_status: Option<SessionToolBinding>,
}

impl SideConfig {
    /// A side running `prompt` with every other field at its default.
    pub fn new(prompt: impl Into<String>) -> Self {
        SideConfig {
            prompt: prompt.into(),
            label: None,
            stop_on_response: true,
            stop_tool: None,
            stop_tool_response_property: None,
            max_steps: None,
            session_stop: None,
            session_fail: None,
            session_status: None,
        }
    }

    /// The session bindings that are set, with their keys.
    pub fn bindings(&self) -> Vec<(&'static str, &SessionToolBinding)> {
        [
            ("sessionStop", &self.session_stop),
            ("sessionFail", &self.session_fail),
            ("sessionStatus", &self.session_status),
        ]
        .into_iter()
        .filter_map(|(key, b)| b.as_ref().map(|b| (key, b)))
        .collect()
    }
}

/// A session lifecycle binding (agents §4): a tool name, or the object form with the
/// argument mapping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SessionToolBinding {
    /// The string form: the tool's name.
    Name(String),
    /// The object form.
    Mapped(MappedBinding),
}

/// The object form of a [`SessionToolBinding`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MappedBinding {
    /// The tool that controls the lifecycle action.
    pub name: String,
    /// The argument that becomes the lifecycle message text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_property: Option<String>,
    /// The argument holding attachment path(s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments_property: Option<String>,
}

impl SessionToolBinding {
    /// The bound tool's name.
    pub fn name(&self) -> &str {
        match self {
            SessionToolBinding::Name(name) => name,
            SessionToolBinding::Mapped(m) => &m.name,
        }
    }

    /// The `messageProperty`, if any.
    pub fn message_property(&self) -> Option<&str> {
        match self {
            SessionToolBinding::Name(_) => None,
            SessionToolBinding::Mapped(m) => m.message_property.as_deref(),
        }
    }

    /// The `attachmentsProperty`, if any.
    pub fn attachments_property(&self) -> Option<&str> {
        match self {
            SessionToolBinding::Name(_) => None,
            SessionToolBinding::Mapped(m) => m.attachments_property.as_deref(),
        }
    }

    /// The lifecycle payload of a call with `arguments` (SA-018): the message is the
    /// `messageProperty` argument (the whole arguments as JSON text without one, or when
    /// it is missing), the attachments the `attachmentsProperty` argument (a string or an
    /// array of strings).
    pub fn payload(&self, arguments: &Value) -> LifecyclePayload {
        let message = match self.message_property() {
            Some(property) => match arguments.get(property) {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            },
            None => match arguments {
                Value::Object(map) if map.is_empty() => String::new(),
                Value::Null => String::new(),
                other => other.to_string(),
            },
        };
        let attachments = match self.attachments_property().and_then(|p| arguments.get(p)) {
            Some(Value::String(path)) => vec![path.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        LifecyclePayload {
            message,
            attachments,
        }
    }
}

/// What a lifecycle binding call carries: the canonical stop/fail/status payload (SA-019).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecyclePayload {
    /// The message text.
    pub message: String,
    /// Attachment paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<String>,
}

/// A prompt: the model, the system text, the tools and the model parameters of one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromptDefinition {
    /// The prompt's name (what `SideConfig.prompt` refers to).
    pub name: String,
    /// The model, `PROVIDER:MODEL`; the project's `model` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The system text; `${NAME}` is replaced by the variable `NAME` (prompt env, then
    /// agent env, then project env, then the process environment).
    #[serde(default)]
    pub system: String,
    /// Tools by name (built-in tools, project tools, agents with `exposeAsTool`,
    /// `mcp:SERVER`), or a subagent tool's configuration (`SubagentToolConfig`).
    #[serde(default)]
    pub tools: Vec<PromptTool>,
    /// Model parameters, passed to the provider unchanged (`temperature`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, Value>,
    /// HTTP headers sent with every model request of this prompt (a vendor's beta features,
    /// a proxy's routing); `${NAME}` in a value is replaced like in `system`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Structured output: a JSON Schema (root `"type" = "object"`) the model's final reply
    /// follows, as the provider's native structured-output mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Prompt-level default variable values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The variables the prompt declares (tools §3; see [`crate::variables`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<VariableDefinition>,
    /// A summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Callable as a *prompt tool* (tools §1): another prompt may list it in its `tools`, by
    /// name or as a [`SubpromptConfig`]; a call runs a nested invocation of this prompt (see
    /// `crate::prompt_tool`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expose_as_tool: bool,
    /// What the calling model is told the prompt tool does (the `description`, else a
    /// generic sentence, when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_description: Option<String>,
    /// The JSON Schema (an object schema) of the prompt tool's arguments. Without it the tool
    /// takes one string argument, named by the caller's `initUserMessageProperty` (default
    /// `message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_schema: Option<Value>,
}

/// An entry of a prompt's `tools`: a tool's name, or the configuration of a subagent tool
/// (a `dual_ai` agent with `exposeAsTool`, agents §7.4).
///
/// # Examples
///
/// ```
/// let prompt: weft_standard::PromptDefinition = toml::from_str(
///     "name = \"lead\"\ntools = [\"read_file\", { name = \"reviewer\", initUserMessageProperty = \"task\" }]\n",
/// )?;
/// assert_eq!(prompt.tools[0].name(), "read_file");
/// let reviewer = prompt.tools[1].subagent().expect("the object form");
/// assert!(reviewer.blocking); // the default
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PromptTool {
    /// A tool by name.
    Name(String),
    /// A subagent tool's configuration.
    Subagent(Box<SubagentToolConfig>),
    /// A prompt tool's configuration, with a key only a prompt tool has (`includeTextResponse`,
    /// `includeToolCalls`, `includeErrors`). An object with only the keys both forms share
    /// (`name`, `initUserMessageProperty`, `initAttachmentsProperty`) reads as
    /// [`PromptTool::Subagent`]; [`PromptTool::subprompt`] gives it as a prompt tool's.
    Subprompt(Box<SubpromptConfig>),
}

impl PromptTool {
    /// The tool's name.
    pub fn name(&self) -> &str {
        match self {
            PromptTool::Name(name) => name,
            PromptTool::Subagent(config) => &config.name,
            PromptTool::Subprompt(config) => &config.name,
        }
    }

    /// The subagent configuration (the object form).
    pub fn subagent(&self) -> Option<&SubagentToolConfig> {
        match self {
            PromptTool::Name(_) | PromptTool::Subprompt(_) => None,
            PromptTool::Subagent(config) => Some(config.as_ref()),
        }
    }

    /// The entry as a prompt tool's configuration: every setting at its default for a name,
    /// the shared keys of a [`SubagentToolConfig`] object (the keys only a subagent has are
    /// listed by [`SubagentToolConfig::subagent_only_keys`]), or the [`SubpromptConfig`].
    ///
    /// # Examples
    ///
    /// ```
    /// let prompt: weft_standard::PromptDefinition = toml::from_str(
    ///     "name = \"lead\"\ntools = [\"summarize\", { name = \"search\", includeToolCalls = true }]\n",
    /// )?;
    /// let summarize = prompt.tools[0].subprompt();
    /// assert!(summarize.include_text_response && !summarize.include_tool_calls);
    /// assert!(prompt.tools[1].subprompt().include_tool_calls);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn subprompt(&self) -> SubpromptConfig {
        match self {
            PromptTool::Name(name) => SubpromptConfig::named(name),
            PromptTool::Subagent(config) => SubpromptConfig {
                init_user_message_property: config.init_user_message_property.clone(),
                init_attachments_property: config.init_attachments_property.clone(),
                ..SubpromptConfig::named(&config.name)
            },
            PromptTool::Subprompt(config) => config.as_ref().clone(),
        }
    }
}

/// How a prompt calls another prompt as a tool (`SubpromptConfig`, tools §4): what the call
/// returns and how its arguments become the nested invocation's first message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubpromptConfig {
    /// The called prompt (one with `exposeAsTool = true`).
    pub name: String,
    /// The result has the nested invocation's final text (default true).
    #[serde(default = "default_true")]
    pub include_text_response: bool,
    /// The result lists the nested invocation's tool calls that succeeded, with their
    /// results (default false).
    #[serde(default)]
    pub include_tool_calls: bool,
    /// The result lists the nested invocation's failed tool calls, with their errors
    /// (default false).
    #[serde(default)]
    pub include_errors: bool,
    /// The argument of the call that becomes the nested invocation's first user message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_user_message_property: Option<String>,
    /// The argument of the call holding the files the nested invocation gets copies of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_attachments_property: Option<String>,
}

impl SubpromptConfig {
    /// The configuration of a prompt tool listed by name: every setting at its default.
    pub fn named(name: impl Into<String>) -> Self {
        SubpromptConfig {
            name: name.into(),
            include_text_response: true,
            include_tool_calls: false,
            include_errors: false,
            init_user_message_property: None,
            init_attachments_property: None,
        }
    }
}

impl PartialEq<str> for PromptTool {
    fn eq(&self, other: &str) -> bool {
        self.name() == other
    }
}

impl PartialEq<&str> for PromptTool {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

/// How a prompt calls a `dual_ai` agent as a subagent (`SubagentToolConfig`, agents §7.4,
/// tools §5). Weft runs all four modes (blocking or not, resumable or not), optional branches
/// and immediate ones included; the other keys are read so a project using them gets a precise
/// load error instead of a silent default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubagentToolConfig {
    /// The callable `dual_ai` agent.
    pub name: String,
    /// The parent waits for the child's result (default true).
    #[serde(default = "default_true")]
    pub blocking: bool,
    /// The argument of the call that becomes the child's first message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_user_message_property: Option<String>,
    /// The argument of the call holding the child's first attachments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_attachments_property: Option<String>,
    /// The argument of the call naming the child instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_agent_name_property: Option<String>,
    /// Run as soon as the prompt becomes active (`true` or `{nameEnv, descriptionEnv, scopedEnv}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immediate: Option<Value>,
    /// The environment variable that enables this branch (`true`, `1`, `yes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<String>,
    /// `false`, or the resumable lifecycle's settings (agents §7.7): the prompt then offers
    /// `subagent_create` and `subagent_message` instead of a tool named after the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumable: Option<Resumable>,
}

/// `resumable` of a [`SubagentToolConfig`]: `false`, or the lifecycle's settings.
///
/// # Examples
///
/// ```
/// let config: weft_standard::SubagentToolConfig = toml::from_str(
///     "name = \"writer\"\nresumable = { receives_messages = \"side_b\", maxInstances = 2 }\n",
/// )?;
/// let resumable = config.resumable_config().expect("resumable");
/// assert_eq!(resumable.receives_messages, weft_standard::Side::B);
/// assert_eq!(resumable.max_instances, Some(2));
/// assert!(!resumable.explicit());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Resumable {
    /// `false` (`true` is refused at load: the object form says which side hears messages).
    Flag(bool),
    /// The lifecycle's settings.
    Settings(ResumableConfig),
}

/// The settings of a resumable subagent (agents §7.4, tools §5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResumableConfig {
    /// The side a `subagent_message` goes to: `side_a` (queued as the user's message) or
    /// `side_b` (queued as side A's, which side B answers).
    #[serde(rename = "receives_messages", with = "side_name")]
    pub receives_messages: Side,
    /// How many instances may exist at once per parent thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_instances: Option<u64>,
    /// `implicit` (the default: results and failures queued to the parent) or `explicit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_communication: Option<ParentCommunication>,
}

impl ResumableConfig {
    /// Whether escalation is left to tools (`parentCommunication = "explicit"`).
    pub fn explicit(&self) -> bool {
        self.parent_communication == Some(ParentCommunication::Explicit)
    }
}

/// How a child's results reach its parent (agents §7.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParentCommunication {
    /// Completion and failure are queued to the parent automatically.
    Implicit,
    /// Nothing is queued automatically; tools escalate.
    Explicit,
}

impl ParentCommunication {
    /// `implicit` or `explicit`.
    pub fn as_str(self) -> &'static str {
        match self {
            ParentCommunication::Implicit => "implicit",
            ParentCommunication::Explicit => "explicit",
        }
    }
}

/// `side_a` / `side_b` (the spelling of `receives_messages`).
mod side_name {
    use serde::{Deserialize as _, Deserializer, Serializer};

    use super::Side;

    pub(super) fn serialize<S: Serializer>(side: &Side, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match side {
            Side::A => "side_a",
            Side::B => "side_b",
        })
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Side, D::Error> {
        match String::deserialize(d)?.as_str() {
            "side_a" => Ok(Side::A),
            "side_b" => Ok(Side::B),
            other => Err(serde::de::Error::custom(format!(
                "receives_messages is side_a or side_b, not {other:?}"
            ))),
        }
    }
}

/// The settings of an `immediate` subagent tool (agents §7.6): `immediate = true`, or the
/// object form `{ nameEnv, descriptionEnv, scopedEnv }`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Immediate {
    /// The variable whose value is the child's name: a model-visible hint.
    pub name_env: Option<String>,
    /// The variable whose value describes the child: a model-visible hint.
    pub description_env: Option<String>,
    /// Variables whose values are transferred to the child's env, runtime-only (never in any
    /// model's context unless also a hint).
    pub scoped_env: Vec<String>,
}

impl SubagentToolConfig {
    /// The `immediate` settings, when the tool runs as soon as its prompt becomes active.
    ///
    /// # Examples
    ///
    /// ```
    /// let config: weft_standard::SubagentToolConfig = toml::from_str(
    ///     "name = \"indexer\"\nimmediate = { nameEnv = \"NAME\", scopedEnv = [\"DB_URL\"] }\n",
    /// )?;
    /// let immediate = config.immediate().expect("immediate");
    /// assert_eq!(immediate.name_env.as_deref(), Some("NAME"));
    /// assert_eq!(immediate.scoped_env, ["DB_URL"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn immediate(&self) -> Option<Immediate> {
        match self.immediate.as_ref()? {
            Value::Bool(true) => Some(Immediate::default()),
            Value::Object(map) => {
                let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
                let scoped_env = match map.get("scopedEnv") {
                    Some(Value::String(name)) => vec![name.clone()],
                    Some(Value::Array(names)) => names
                        .iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect(),
                    _ => Vec::new(),
                };
                Some(Immediate {
                    name_env: text("nameEnv"),
                    description_env: text("descriptionEnv"),
                    scoped_env,
                })
            }
            _ => None,
        }
    }

    /// The keys set that only a subagent tool has (`blocking = false`,
    /// `initAgentNameProperty`, `immediate`, `optional`, `resumable`): what a prompt tool's
    /// entry must not set.
    pub fn subagent_only_keys(&self) -> Vec<&'static str> {
        [
            ("blocking", !self.blocking),
            (
                "initAgentNameProperty",
                self.init_agent_name_property.is_some(),
            ),
            ("immediate", self.immediate.is_some()),
            ("optional", self.optional.is_some()),
            ("resumable", self.resumable.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect()
    }

    /// The resumable lifecycle's settings (`None`: a non-resumable subagent).
    pub fn resumable_config(&self) -> Option<&ResumableConfig> {
        match &self.resumable {
            Some(Resumable::Settings(settings)) => Some(settings),
            _ => None,
        }
    }

    /// Whether this branch is enabled (agents §7.5): always without `optional`; with it,
    /// when the variable it names resolves (through `lookup`) to `true`, `1` or `yes`, in
    /// any case.
    ///
    /// # Examples
    ///
    /// ```
    /// let config: weft_standard::SubagentToolConfig =
    ///     toml::from_str("name = \"reviewer\"\noptional = \"REVIEW\"\n")?;
    /// assert!(config.enabled(|_| Some("YES".into())));
    /// assert!(!config.enabled(|_| Some("no".into())));
    /// assert!(!config.enabled(|_| None));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn enabled(&self, lookup: impl Fn(&str) -> Option<String>) -> bool {
        match &self.optional {
            None => true,
            Some(name) => lookup(name).is_some_and(|value| {
                matches!(
                    value.trim().to_ascii_lowercase().as_str(),
                    "true" | "1" | "yes"
                )
            }),
        }
    }
}

/// A project tool: a declared signature whose call returns its arguments. Such tools are
/// what lifecycle bindings, stop tools and status tools are made of: the call *is* the
/// signal, its arguments the payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What the model is told the tool does.
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of the arguments (an object schema; `{"type":"object"}` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Every call waits for a person's approval.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requires_approval: bool,
    /// Tool-level default variable values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The variables the tool declares (tools §3; see [`crate::variables`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<VariableDefinition>,
}

/// A variable declaration (tools §3 `VariableDefinition`) on an agent, a prompt or a tool.
///
/// # Examples
///
/// ```
/// let tool: weft_standard::ToolDefinition = toml::from_str(
///     "name = \"search\"\n[[variables]]\nname = \"VECTOR_STORE_ID\"\ntype = \"secret\"\nrequired = true\ndescription = \"Vector store identifier\"\n",
/// )?;
/// let variable = &tool.variables[0];
/// assert!(variable.required && !variable.scoped);
/// assert_eq!(variable.kind, weft_store::VariableKind::Secret);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VariableDefinition {
    /// The variable's name (an identifier: letters, digits, `_`).
    pub name: String,
    /// `text` (the default) or `secret` (encrypted at rest, never in events or checkpoints).
    #[serde(default, rename = "type")]
    pub kind: weft_store::VariableKind,
    /// Execution cannot start (or continue) until a value resolves.
    #[serde(default)]
    pub required: bool,
    /// Not inherited from the parent thread; values set on the declaring thread still flow
    /// down to its descendants.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scoped: bool,
    /// What the value is, for the person who provides it.
    #[serde(default)]
    pub description: String,
}

/// `weft.toml` (or `weft.json`): the project's own settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectConfig {
    /// The project's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The agent `weft run` runs without `--agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_agent: Option<String>,
    /// The model of prompts that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Project-level default variable values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// How commands started for an agent are sandboxed: `"workspace"` (the default),
    /// `"strict"` or `"none"` (see `weft-sandbox`); `weft run --sandbox` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<weft_tools::Mode>,
    /// Lets sandboxed commands use the network (default: no network at all).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sandbox_network: bool,
    /// Lets tools edit the project's definition files (`weft.toml`, `agents/`, `prompts/`,
    /// `tools/`), which are otherwise read-only to them. The run store stays out of reach.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tools_may_edit_definitions: bool,
    /// `[budget]`: limits on every run of the project (`maxSteps`, `maxTotalTokens`,
    /// `maxCost`, `maxTime`); `weft run --max-…` flags override them one by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<weft_runtime::budget::Budget>,
    /// Tools (built-in, project and MCP tools alike, by name) that wait for a person's
    /// approval before every call: `weft run` asks on a terminal, and otherwise suspends the
    /// run (exit code 4) until `weft approve` / `weft deny`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires_approval: Vec<String>,
    /// `[hooks]`: external scripts asked before tool calls (`[[hooks.preToolUse]]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<HooksConfig>,
    /// `pricing`: the project's model prices, over Weft's built-in table (`weft run
    /// --pricing FILE` wins over them): a file in the table's format, relative to the project
    /// (`pricing = "prices.toml"`), or the table itself (`[pricing.openai]` with
    /// `"gpt-4o" = { input = 2.5, output = 10 }`; see `Project::prices`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<Value>,
    /// `[project]`: settings shared by several parts of Weft (`testCommand`); read by
    /// `weft-gate` (the completion checklist), kept here as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<Value>,
    /// `[gates]`: the harness gates' settings, read by `weft-gate`; kept here as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates: Option<Value>,
    /// `[completion]`: the completion checklist, read by `weft-gate`; kept here as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<Value>,
    /// `[providers.NAME]`: settings of the model provider `NAME` (`openai`,
    /// `openai-compatible`, …) for every run of the project, e.g. the base URL of a proxy or a
    /// local server. API keys never go here: they stay in the environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, ProviderSettings>,
    /// `[telemetry]`: OpenTelemetry traces of the project's runs (`endpoint`, `headers`,
    /// `serviceName`, `captureContent`), read as [`weft_otel::Settings`] (see
    /// `Project::telemetry`); the standard `OTEL_*` variables win over it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<Value>,
    /// `[mcpServers.NAME]`: Model Context Protocol servers whose tools a prompt offers by
    /// listing `mcp:NAME` in its `tools` (they are named `NAME__TOOL`): a stdio `command`
    /// (with `args`, `env`; run in the command sandbox, `network` and `readOnly` widen it) or
    /// a streamable HTTP `url` (with `headers`); `trusted = true` lets the server's
    /// read-only annotations count. See `weft_mcp::ServerConfig`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, weft_mcp::ServerConfig>,
    /// `[runtime]`: the Agent Runtime Spec's profile for the project's `ai_human` agents
    /// (`completion`, `maxTurns`, `graceTurns`, …, `[runtime.policy]`, `[runtime.retry]`;
    /// see `weft_runtime::profile::RuntimeProfile` and `docs/runtime-profile.md`). Its
    /// presence turns the profile on; an agent's `runtime` table overrides it key by key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Value>,
}

/// `[providers.NAME]` of `weft.toml`: how the project reaches one model provider.
///
/// # Examples
///
/// ```
/// let config: weft_standard::ProjectConfig = toml::from_str(
///     "[providers.openai-compatible]\nbaseUrl = \"http://127.0.0.1:11434/v1\"\n",
/// )?;
/// let settings = &config.providers["openai-compatible"];
/// assert_eq!(settings.base_url.as_deref(), Some("http://127.0.0.1:11434/v1"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderSettings {
    /// The provider's endpoint (`http://…` or `https://…`), instead of its default or its
    /// environment variable; `weft run --base-url` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

/// `[hooks]` of `weft.toml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HooksConfig {
    /// `[[hooks.preToolUse]]`: asked before every call of the tools they match; exit 2
    /// denies the call with stderr as the reason (any other failure denies it too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_tool_use: Vec<HookDefinition>,
}

/// One external hook.
///
/// ```toml
/// [[hooks.preToolUse]]
/// matcher = "run_command|write_file"
/// command = "./hooks/check.sh"
/// timeout = 10
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookDefinition {
    /// Tool names separated by `|`, or `*` (the default) for every tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The command, run with `sh -c` in the project folder; the call is on its stdin as JSON.
    pub command: String,
    /// Seconds the hook may take (default 30); a hook that takes longer denies the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
}
