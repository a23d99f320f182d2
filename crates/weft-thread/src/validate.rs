//! Validation of a thread given as a JSON value: the eight validation rules of the spec plus the
//! structural checks (required fields, types, `turn_type` / `message_type` / `part_kind` values,
//! version).
//!
//! Validation never fails and never panics: it returns every finding, each with its [`Rule`], a
//! JSON Pointer (RFC 6901) to the offending value and a plain sentence. MUST violations are
//! errors; SHOULD-level findings (rule 6, unknown non-namespaced kinds, large inline tool
//! results, non-UUID agent IDs) are warnings. A thread is valid when it has no error.
//!
//! Interpretations, stated once:
//! - Rule 2: a `tool-return`'s `tool_call_id` must match a `tool-call` earlier in the thread.
//! - Rule 4: a turn's end must not be later than the next turn's start (equal instants touch,
//!   they do not overlap), and an agent turn must not end before it starts. A user turn starts
//!   and ends at `submitted_at`.
//! - Rule 5: message timestamps within a turn are non-decreasing.
//! - Rule 6 conflicts with the SHOULD in the same spec; keys without a separator are warnings.
//! - Rule 7: the recognized schemes are [`RECOGNIZED_URI_SCHEMES`](crate::syntax::RECOGNIZED_URI_SCHEMES)
//!   plus [`ValidateOptions::extra_uri_schemes`]; `file` URIs get a development-only warning.
//! - An explicit `null` is accepted only where the spec type is `any` (`event_data`, `args`,
//!   tool-return `content` and `metadata`, link `metadata`, `vendor_metadata`).

use std::collections::HashSet;
use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::syntax::{UriProblem, check_uri, is_base64, is_uuid};
use crate::timestamp::Timestamp;
use crate::types::PROTOCOL_VERSION;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A MUST is violated: the thread is invalid.
    Error,
    /// A SHOULD is not met: the thread is still valid.
    Warning,
}

/// The rule or structural check a finding comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// Rule 1: every timestamp is a valid ISO 8601 date-time.
    Timestamp,
    /// Rule 2: a tool return's `tool_call_id` matches a tool call.
    ToolCallId,
    /// Rule 3: an `agent_id` references a key of `agents`.
    AgentReference,
    /// Rule 4: turns do not overlap.
    TurnOverlap,
    /// Rule 5: messages within a turn are in chronological order.
    MessageOrder,
    /// Rule 6: `client_metadata` keys contain a namespace separator (warning).
    ClientMetadataNamespace,
    /// Rule 7: `ContentRef.uri` is a valid URI with a recognized scheme.
    ContentRefUri,
    /// Rule 8: `ThreadLink.thread_id` is a valid UUID.
    ThreadLinkId,
    /// The input is not JSON.
    Json,
    /// A required field is missing.
    RequiredField,
    /// A field has the wrong JSON type.
    FieldType,
    /// `version` is not `"0.0.3"`.
    Version,
    /// `thread_id` is not a UUID.
    ThreadId,
    /// A registry key differs from its entry's `agent_id`.
    AgentKey,
    /// An `agent_id` is not a UUID (warning).
    AgentIdFormat,
    /// `turn_type` is not `user` or `agent`.
    TurnType,
    /// `message_type` is not `request`, `response` or `system`.
    MessageType,
    /// A part has no usable `part_kind`.
    PartKind,
    /// A user-content item has an unusable `kind`.
    ContentKind,
    /// A closed enumeration (`status`, `finish_reason`) has another value.
    EnumValue,
    /// A `system-prompt` part is stored (forbidden, TP-015).
    SystemPrompt,
    /// A part kind, content kind or event type outside the normative set and the extension
    /// namespaces (warning; the item is kept).
    UnknownExtension,
    /// Inline tool-return content larger than 100 KB (warning: use `content_ref`).
    ContentSize,
}

impl Rule {
    /// A stable kebab-case code, e.g. `tool-call-id`.
    pub fn code(self) -> &'static str {
        match self {
            Self::Timestamp => "timestamp",
            Self::ToolCallId => "tool-call-id",
            Self::AgentReference => "agent-reference",
            Self::TurnOverlap => "turn-overlap",
            Self::MessageOrder => "message-order",
            Self::ClientMetadataNamespace => "client-metadata-namespace",
            Self::ContentRefUri => "content-ref-uri",
            Self::ThreadLinkId => "thread-link-id",
            Self::Json => "json",
            Self::RequiredField => "required-field",
            Self::FieldType => "field-type",
            Self::Version => "version",
            Self::ThreadId => "thread-id",
            Self::AgentKey => "agent-key",
            Self::AgentIdFormat => "agent-id-format",
            Self::TurnType => "turn-type",
            Self::MessageType => "message-type",
            Self::PartKind => "part-kind",
            Self::ContentKind => "content-kind",
            Self::EnumValue => "enum-value",
            Self::SystemPrompt => "system-prompt",
            Self::UnknownExtension => "unknown-extension",
            Self::ContentSize => "content-size",
        }
    }

    /// The number of the spec's validation rule (1–8), if this is one of them.
    pub fn number(self) -> Option<u8> {
        Some(match self {
            Self::Timestamp => 1,
            Self::ToolCallId => 2,
            Self::AgentReference => 3,
            Self::TurnOverlap => 4,
            Self::MessageOrder => 5,
            Self::ClientMetadataNamespace => 6,
            Self::ContentRefUri => 7,
            Self::ThreadLinkId => 8,
            _ => return None,
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.number() {
            Some(number) => write!(f, "rule {number} ({})", self.code()),
            None => f.write_str(self.code()),
        }
    }
}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.code())
    }
}

/// One problem found in a thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// The rule or check.
    pub rule: Rule,
    /// The spec's rule number (1–8), if any.
    pub rule_number: Option<u8>,
    /// JSON Pointer to the offending value (`""` is the whole document).
    pub pointer: String,
    /// A plain sentence saying what is wrong.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let pointer = if self.pointer.is_empty() {
            "(root)"
        } else {
            &self.pointer
        };
        write!(f, "{severity}[{}] {pointer}: {}", self.rule, self.message)
    }
}

/// Every finding of one validation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Findings in document order.
    pub findings: Vec<Finding>,
}

impl Report {
    /// Whether the thread has no error (warnings allowed).
    pub fn is_valid(&self) -> bool {
        !self
            .findings
            .iter()
            .any(|finding| finding.severity == Severity::Error)
    }

    /// The errors.
    pub fn errors(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|finding| finding.severity == Severity::Error)
    }

    /// The warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|finding| finding.severity == Severity::Warning)
    }
}

/// Options of [`validate_with`].
#[derive(Debug, Clone, Default)]
pub struct ValidateOptions {
    /// Custom `ContentRef.uri` schemes an application documents and accepts (rule 7).
    pub extra_uri_schemes: Vec<String>,
}

/// Validates a thread with default options.
pub fn validate(value: &Value) -> Report {
    validate_with(value, &ValidateOptions::default())
}

/// Parses JSON text and validates it; a syntax error is a [`Rule::Json`] finding.
pub fn validate_json(text: &str) -> Report {
    match serde_json::from_str::<Value>(text) {
        Ok(value) => validate(&value),
        Err(error) => Report {
            findings: vec![Finding {
                severity: Severity::Error,
                rule: Rule::Json,
                rule_number: None,
                pointer: String::new(),
                message: format!("the input is not JSON: {error}"),
            }],
        },
    }
}

/// Validates a thread.
pub fn validate_with(value: &Value, options: &ValidateOptions) -> Report {
    let mut validator = Validator {
        options,
        findings: Vec::new(),
        agents: None,
        tool_calls: HashSet::new(),
    };
    validator.thread(value);
    Report {
        findings: validator.findings,
    }
}

/// Appends a reference token to a JSON Pointer, escaping `~` and `/`.
pub(crate) fn pointer_child(pointer: &str, token: &str) -> String {
    let mut out = String::with_capacity(pointer.len() + token.len() + 1);
    out.push_str(pointer);
    out.push('/');
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

fn index_child(pointer: &str, index: usize) -> String {
    format!("{pointer}/{index}")
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

const NAMESPACE_SEPARATORS: [char; 5] = [':', '.', '/', '_', '-'];
const CONTENT_SIZE_LIMIT: usize = 100 * 1024;
const KNOWN_EVENT_TYPES: [&str; 12] = [
    "agent.handoff",
    "thread.spawn",
    "thread.merge",
    "thread.end",
    "error",
    "tool.grant",
    "tool.revoke",
    "state.update",
    "ui.update",
    "context.switch",
    "stream.interrupted",
    "source.url",
];

struct Validator<'a> {
    options: &'a ValidateOptions,
    findings: Vec<Finding>,
    agents: Option<&'a Map<String, Value>>,
    tool_calls: HashSet<&'a str>,
}

impl<'a> Validator<'a> {
    fn report(&mut self, severity: Severity, rule: Rule, pointer: String, message: String) {
        self.findings.push(Finding {
            severity,
            rule,
            rule_number: rule.number(),
            pointer,
            message,
        });
    }

    fn error(&mut self, rule: Rule, pointer: String, message: impl Into<String>) {
        self.report(Severity::Error, rule, pointer, message.into());
    }

    fn warning(&mut self, rule: Rule, pointer: String, message: impl Into<String>) {
        self.report(Severity::Warning, rule, pointer, message.into());
    }

    fn object(
        &mut self,
        value: &'a Value,
        pointer: &str,
        what: &str,
    ) -> Option<&'a Map<String, Value>> {
        match value {
            Value::Object(map) => Some(map),
            other => {
                self.error(
                    Rule::FieldType,
                    pointer.to_owned(),
                    format!("{what} must be an object, not {}", type_name(other)),
                );
                None
            }
        }
    }

    fn required(
        &mut self,
        map: &'a Map<String, Value>,
        key: &str,
        pointer: &str,
        what: &str,
    ) -> Option<&'a Value> {
        let value = map.get(key);
        if value.is_none() {
            self.error(
                Rule::RequiredField,
                pointer.to_owned(),
                format!("{what} is missing the required field `{key}`"),
            );
        }
        value
    }

    fn required_str(
        &mut self,
        map: &'a Map<String, Value>,
        key: &str,
        pointer: &str,
        what: &str,
    ) -> Option<&'a str> {
        match self.required(map, key, pointer, what)? {
            Value::String(text) => Some(text),
            other => {
                self.error(
                    Rule::FieldType,
                    pointer_child(pointer, key),
                    format!("`{key}` must be a string, not {}", type_name(other)),
                );
                None
            }
        }
    }

    fn optional_str(
        &mut self,
        map: &'a Map<String, Value>,
        key: &str,
        pointer: &str,
    ) -> Option<&'a str> {
        match map.get(key)? {
            Value::String(text) => Some(text),
            other => {
                self.error(
                    Rule::FieldType,
                    pointer_child(pointer, key),
                    format!(
                        "`{key}` must be a string when present, not {}",
                        type_name(other)
                    ),
                );
                None
            }
        }
    }

    fn optional_object(
        &mut self,
        map: &'a Map<String, Value>,
        key: &str,
        pointer: &str,
    ) -> Option<&'a Map<String, Value>> {
        match map.get(key)? {
            Value::Object(inner) => Some(inner),
            other => {
                self.error(
                    Rule::FieldType,
                    pointer_child(pointer, key),
                    format!(
                        "`{key}` must be an object when present, not {}",
                        type_name(other)
                    ),
                );
                None
            }
        }
    }

    fn optional_count(&mut self, map: &'a Map<String, Value>, key: &str, pointer: &str) {
        if let Some(value) = map.get(key)
            && value.as_u64().is_none()
        {
            self.error(
                Rule::FieldType,
                pointer_child(pointer, key),
                format!("`{key}` must be a non-negative integer when present"),
            );
        }
    }

    fn optional_bool(&mut self, map: &'a Map<String, Value>, key: &str, pointer: &str) {
        if let Some(value) = map.get(key)
            && !value.is_boolean()
        {
            self.error(
                Rule::FieldType,
                pointer_child(pointer, key),
                format!(
                    "`{key}` must be a boolean when present, not {}",
                    type_name(value)
                ),
            );
        }
    }

    fn array(
        &mut self,
        map: &'a Map<String, Value>,
        key: &str,
        pointer: &str,
        what: &str,
        required: bool,
    ) -> Option<&'a [Value]> {
        let value = if required {
            self.required(map, key, pointer, what)?
        } else {
            map.get(key)?
        };
        match value {
            Value::Array(items) => Some(items),
            other => {
                self.error(
                    Rule::FieldType,
                    pointer_child(pointer, key),
                    format!("`{key}` must be an array, not {}", type_name(other)),
                );
                None
            }
        }
    }

    fn timestamp(
        &mut self,
        map: &'a Map<String, Value>,
        key: &str,
        pointer: &str,
        what: &str,
    ) -> Option<Timestamp> {
        let text = self.required_str(map, key, pointer, what)?;
        match Timestamp::parse(text) {
            Ok(timestamp) => Some(timestamp),
            Err(error) => {
                self.error(
                    Rule::Timestamp,
                    pointer_child(pointer, key),
                    format!("`{key}` is {error}: {text:?}"),
                );
                None
            }
        }
    }

    fn agent_reference(&mut self, agent_id: &str, pointer: String) {
        if let Some(agents) = self.agents
            && !agents.contains_key(agent_id)
        {
            self.error(
                Rule::AgentReference,
                pointer,
                format!("agent {agent_id:?} is not in the `agents` registry"),
            );
        }
    }

    fn thread(&mut self, value: &'a Value) {
        let Some(map) = self.object(value, "", "a thread") else {
            return;
        };
        if let Some(version) = self.required_str(map, "version", "", "the thread")
            && version != PROTOCOL_VERSION
        {
            self.error(
                Rule::Version,
                "/version".to_owned(),
                format!("`version` must be \"{PROTOCOL_VERSION}\", not {version:?}"),
            );
        }
        if let Some(thread_id) = self.required_str(map, "thread_id", "", "the thread")
            && !is_uuid(thread_id)
        {
            self.error(
                Rule::ThreadId,
                "/thread_id".to_owned(),
                format!("`thread_id` must be a UUID, not {thread_id:?}"),
            );
        }
        self.timestamp(map, "created_at", "", "the thread");
        self.timestamp(map, "updated_at", "", "the thread");
        self.optional_str(map, "title", "");
        self.optional_object(map, "metadata", "");
        if let Some(agents) = self.required(map, "agents", "", "the thread")
            && let Some(agents) = self.object(agents, "/agents", "`agents`")
        {
            self.agents = Some(agents);
            for (key, agent) in agents {
                self.agent(key, agent, &pointer_child("/agents", key));
            }
        }
        if let Some(turns) = self.array(map, "turns", "", "the thread", true) {
            let mut previous_end: Option<Timestamp> = None;
            for (index, turn) in turns.iter().enumerate() {
                let pointer = index_child("/turns", index);
                if let Some((start, end, start_key)) = self.turn(turn, &pointer) {
                    if let (Some(previous), Some(start)) = (previous_end, start)
                        && start < previous
                    {
                        self.error(
                            Rule::TurnOverlap,
                            pointer_child(&pointer, start_key),
                            format!("turn {index} starts before the previous turn ends"),
                        );
                    }
                    if end.is_some() {
                        previous_end = end;
                    }
                }
            }
        }
        if let Some(relationships) = self.optional_object(map, "relationships", "") {
            self.relationships(relationships, "/relationships");
        }
    }

    fn agent(&mut self, key: &str, value: &'a Value, pointer: &str) {
        let Some(map) = self.object(value, pointer, "an agent configuration") else {
            return;
        };
        if let Some(agent_id) =
            self.required_str(map, "agent_id", pointer, "the agent configuration")
        {
            if agent_id != key {
                self.error(
                    Rule::AgentKey,
                    pointer_child(pointer, "agent_id"),
                    format!("`agent_id` {agent_id:?} differs from its registry key {key:?}"),
                );
            }
            if !is_uuid(agent_id) {
                self.warning(
                    Rule::AgentIdFormat,
                    pointer_child(pointer, "agent_id"),
                    format!("`agent_id` {agent_id:?} is not a UUID"),
                );
            }
        }
        self.required_str(map, "agent_name", pointer, "the agent configuration");
        self.timestamp(map, "created_at", pointer, "the agent configuration");
        for key in ["model_name", "provider_name", "config_ref"] {
            self.optional_str(map, key, pointer);
        }
    }

    /// Returns (start, end, name of the start field) when the turn is an object with a known type.
    fn turn(
        &mut self,
        value: &'a Value,
        pointer: &str,
    ) -> Option<(Option<Timestamp>, Option<Timestamp>, &'static str)> {
        let map = self.object(value, pointer, "a turn")?;
        let turn_type = self.required_str(map, "turn_type", pointer, "the turn")?;
        match turn_type {
            "user" => {
                let submitted = self.timestamp(map, "submitted_at", pointer, "the user turn");
                self.parts(map, pointer);
                if let Some(metadata) = self.optional_object(map, "client_metadata", pointer) {
                    let metadata_pointer = pointer_child(pointer, "client_metadata");
                    for key in metadata.keys() {
                        if !key.contains(NAMESPACE_SEPARATORS) {
                            self.warning(
                                Rule::ClientMetadataNamespace,
                                pointer_child(&metadata_pointer, key),
                                format!("client_metadata key {key:?} has no namespace separator (one of : . / _ -)"),
                            );
                        }
                    }
                }
                Some((submitted, submitted, "submitted_at"))
            }
            "agent" => {
                if let Some(agent_id) =
                    self.required_str(map, "agent_id", pointer, "the agent turn")
                {
                    self.agent_reference(agent_id, pointer_child(pointer, "agent_id"));
                }
                let started = self.timestamp(map, "started_at", pointer, "the agent turn");
                let completed = self.timestamp(map, "completed_at", pointer, "the agent turn");
                if let (Some(started), Some(completed)) = (started, completed)
                    && completed < started
                {
                    self.error(
                        Rule::TurnOverlap,
                        pointer_child(pointer, "completed_at"),
                        "the turn completes before it starts",
                    );
                }
                if let Some(messages) = self.array(map, "messages", pointer, "the agent turn", true)
                {
                    let messages_pointer = pointer_child(pointer, "messages");
                    let mut previous: Option<Timestamp> = None;
                    for (index, message) in messages.iter().enumerate() {
                        let message_pointer = index_child(&messages_pointer, index);
                        if let Some(timestamp) = self.message(message, &message_pointer) {
                            if let Some(previous) = previous
                                && timestamp < previous
                            {
                                self.error(
                                    Rule::MessageOrder,
                                    pointer_child(&message_pointer, "timestamp"),
                                    format!(
                                        "message {index} is earlier than the message before it"
                                    ),
                                );
                            }
                            previous = Some(timestamp);
                        }
                    }
                }
                if let Some(usage) = self.optional_object(map, "total_usage", pointer) {
                    self.usage(usage, &pointer_child(pointer, "total_usage"));
                }
                Some((started, completed, "started_at"))
            }
            other => {
                self.error(
                    Rule::TurnType,
                    pointer_child(pointer, "turn_type"),
                    format!("`turn_type` must be \"user\" or \"agent\", not {other:?}"),
                );
                None
            }
        }
    }

    fn usage(&mut self, map: &'a Map<String, Value>, pointer: &str) {
        for key in [
            "input_tokens",
            "output_tokens",
            "thinking_tokens",
            "total_tokens",
        ] {
            self.optional_count(map, key, pointer);
        }
    }

    /// Returns the message's timestamp when valid.
    fn message(&mut self, value: &'a Value, pointer: &str) -> Option<Timestamp> {
        let map = self.object(value, pointer, "a message")?;
        let message_type = self.required_str(map, "message_type", pointer, "the message");
        let timestamp = self.timestamp(map, "timestamp", pointer, "the message");
        match message_type? {
            "request" | "response" => {
                if let Some(agent_id) = self.required_str(map, "agent_id", pointer, "the message") {
                    self.agent_reference(agent_id, pointer_child(pointer, "agent_id"));
                }
                self.parts(map, pointer);
                for key in ["model_name", "provider_name", "provider_response_id"] {
                    self.optional_str(map, key, pointer);
                }
                if let Some(usage) = self.optional_object(map, "usage", pointer) {
                    self.usage(usage, &pointer_child(pointer, "usage"));
                }
                if let Some(reason) = self.optional_str(map, "finish_reason", pointer)
                    && crate::types::FinishReason::parse(reason).is_none()
                {
                    self.error(
                        Rule::EnumValue,
                        pointer_child(pointer, "finish_reason"),
                        format!("`finish_reason` must be stop, length, content_filter, tool_call or error, not {reason:?}"),
                    );
                }
            }
            "system" => {
                if let Some(event_type) =
                    self.required_str(map, "event_type", pointer, "the system message")
                {
                    let known = KNOWN_EVENT_TYPES.contains(&event_type)
                        || event_type.starts_with("data-")
                        || event_type.starts_with("meta:")
                        || event_type.starts_with("custom:")
                        || event_type.starts_with("source.");
                    if !known {
                        self.warning(
                            Rule::UnknownExtension,
                            pointer_child(pointer, "event_type"),
                            format!("unknown event type {event_type:?} (kept unchanged)"),
                        );
                    }
                }
                self.required(map, "event_data", pointer, "the system message");
                if let Some(source) = self.optional_str(map, "source_agent", pointer) {
                    self.agent_reference(source, pointer_child(pointer, "source_agent"));
                }
                if let Some(targets) =
                    self.array(map, "target_agents", pointer, "the system message", false)
                {
                    let targets_pointer = pointer_child(pointer, "target_agents");
                    for (index, target) in targets.iter().enumerate() {
                        match target {
                            Value::String(target) => {
                                self.agent_reference(target, index_child(&targets_pointer, index))
                            }
                            other => self.error(
                                Rule::FieldType,
                                index_child(&targets_pointer, index),
                                format!(
                                    "a target agent must be a string, not {}",
                                    type_name(other)
                                ),
                            ),
                        }
                    }
                }
            }
            other => {
                self.error(
                    Rule::MessageType,
                    pointer_child(pointer, "message_type"),
                    format!("`message_type` must be \"request\", \"response\" or \"system\", not {other:?}"),
                );
            }
        }
        timestamp
    }

    fn parts(&mut self, map: &'a Map<String, Value>, pointer: &str) {
        let Some(parts) = self.array(map, "parts", pointer, "it", true) else {
            return;
        };
        let parts_pointer = pointer_child(pointer, "parts");
        for (index, part) in parts.iter().enumerate() {
            self.part(part, &index_child(&parts_pointer, index));
        }
    }

    fn part(&mut self, value: &'a Value, pointer: &str) {
        let Some(map) = self.object(value, pointer, "a part") else {
            return;
        };
        let Some(kind) = self.required_str(map, "part_kind", pointer, "the part") else {
            return;
        };
        let what = "the part";
        match kind {
            "text" => {
                self.required_str(map, "content", pointer, what);
                self.optional_str(map, "id", pointer);
            }
            "thinking" => {
                self.required_str(map, "provider_name", pointer, what);
                for key in ["content", "signature", "thinking_id"] {
                    self.optional_str(map, key, pointer);
                }
            }
            "tool-call" => {
                self.required_str(map, "tool_name", pointer, what);
                if let Some(id) = self.required_str(map, "tool_call_id", pointer, what) {
                    self.tool_calls.insert(id);
                }
                self.required(map, "args", pointer, what);
            }
            "tool-return" => {
                self.required_str(map, "tool_name", pointer, what);
                if let Some(id) = self.required_str(map, "tool_call_id", pointer, what)
                    && !self.tool_calls.contains(id)
                {
                    self.error(
                        Rule::ToolCallId,
                        pointer_child(pointer, "tool_call_id"),
                        format!("no earlier tool-call has tool_call_id {id:?}"),
                    );
                }
                if let Some(status) = self.required_str(map, "status", pointer, what)
                    && !matches!(status, "success" | "error" | "validation_error")
                {
                    self.error(
                        Rule::EnumValue,
                        pointer_child(pointer, "status"),
                        format!(
                            "`status` must be success, error or validation_error, not {status:?}"
                        ),
                    );
                }
                if let Some(content) = map.get("content") {
                    let size = serde_json::to_string(content).map_or(0, |text| text.len());
                    if size > CONTENT_SIZE_LIMIT {
                        self.warning(
                            Rule::ContentSize,
                            pointer_child(pointer, "content"),
                            format!(
                                "inline content is {size} bytes; above 100 KB use `content_ref`"
                            ),
                        );
                    }
                }
                if let Some(content_ref) = self.optional_object(map, "content_ref", pointer) {
                    self.content_ref(content_ref, &pointer_child(pointer, "content_ref"));
                }
            }
            "retry-prompt" => {
                if let Some(content) = self.required(map, "content", pointer, what)
                    && !(content.is_string() || content.is_array())
                {
                    self.error(
                        Rule::FieldType,
                        pointer_child(pointer, "content"),
                        format!(
                            "`content` must be a string or a list of validation errors, not {}",
                            type_name(content)
                        ),
                    );
                }
                self.optional_str(map, "tool_name", pointer);
                self.optional_str(map, "tool_call_id", pointer);
            }
            "user-prompt" => match self.required(map, "content", pointer, what) {
                Some(Value::String(_)) | None => {}
                Some(Value::Array(items)) => {
                    let content_pointer = pointer_child(pointer, "content");
                    for (index, item) in items.iter().enumerate() {
                        let item_pointer = index_child(&content_pointer, index);
                        match item {
                            Value::String(_) => {}
                            Value::Object(item) => self.media(item, &item_pointer),
                            other => self.error(
                                Rule::FieldType,
                                item_pointer,
                                format!(
                                    "user content must be a string or an object, not {}",
                                    type_name(other)
                                ),
                            ),
                        }
                    }
                }
                Some(other) => self.error(
                    Rule::FieldType,
                    pointer_child(pointer, "content"),
                    format!(
                        "`content` must be a string or a list, not {}",
                        type_name(other)
                    ),
                ),
            },
            "file" => {
                if let Some(content) = self.required(map, "content", pointer, what) {
                    let content_pointer = pointer_child(pointer, "content");
                    if let Some(content) = self.object(content, &content_pointer, "file `content`")
                    {
                        match content.get("kind") {
                            Some(Value::String(kind)) if kind == "binary" => {
                                self.binary(content, &content_pointer)
                            }
                            _ => self.error(
                                Rule::ContentKind,
                                pointer_child(&content_pointer, "kind"),
                                "file `content` must be binary content (`kind: \"binary\"`)",
                            ),
                        }
                    }
                }
                self.optional_str(map, "id", pointer);
            }
            "system-prompt" => {
                self.error(
                    Rule::SystemPrompt,
                    pointer_child(pointer, "part_kind"),
                    "system prompts are not stored in a thread",
                );
            }
            other if other.starts_with("custom:") || other.starts_with("meta:") => {}
            "" => self.error(
                Rule::PartKind,
                pointer_child(pointer, "part_kind"),
                "`part_kind` is empty",
            ),
            other => {
                self.warning(
                    Rule::UnknownExtension,
                    pointer_child(pointer, "part_kind"),
                    format!(
                        "unknown part kind {other:?} (kept unchanged; use the custom: namespace)"
                    ),
                );
            }
        }
    }

    fn media(&mut self, map: &'a Map<String, Value>, pointer: &str) {
        let Some(kind) = self.required_str(map, "kind", pointer, "the user content item") else {
            return;
        };
        match kind {
            "image-url" | "audio-url" | "video-url" | "document-url" => {
                self.required_str(map, "url", pointer, "the URL item");
                self.required_str(map, "identifier", pointer, "the URL item");
                self.optional_bool(map, "force_download", pointer);
                self.optional_str(map, "media_type", pointer);
            }
            "binary" => self.binary(map, pointer),
            other => {
                self.warning(
                    Rule::UnknownExtension,
                    pointer_child(pointer, "kind"),
                    format!("unknown user content kind {other:?} (kept unchanged)"),
                );
            }
        }
    }

    fn binary(&mut self, map: &'a Map<String, Value>, pointer: &str) {
        if let Some(data) = self.required_str(map, "data", pointer, "the binary content")
            && !is_base64(data)
        {
            self.error(
                Rule::FieldType,
                pointer_child(pointer, "data"),
                "`data` must be base64",
            );
        }
        self.required_str(map, "media_type", pointer, "the binary content");
        self.required_str(map, "identifier", pointer, "the binary content");
    }

    fn content_ref(&mut self, map: &'a Map<String, Value>, pointer: &str) {
        if let Some(uri) = self.required_str(map, "uri", pointer, "the content reference") {
            let uri_pointer = pointer_child(pointer, "uri");
            match check_uri(uri, &self.options.extra_uri_schemes) {
                Ok(()) if uri.get(..5).is_some_and(|scheme| scheme.eq_ignore_ascii_case("file:")) => {
                    self.warning(Rule::ContentRefUri, uri_pointer, "file: URIs are for development only");
                }
                Ok(()) => {}
                Err(UriProblem::Syntax(reason)) => self.error(Rule::ContentRefUri, uri_pointer, format!("{uri:?} is not a valid URI: {reason}")),
                Err(UriProblem::Scheme) => self.error(Rule::ContentRefUri, uri_pointer, format!("{uri:?} does not use a recognized scheme (https, s3, gs, azure, file or a configured one)")),
            }
        }
        self.optional_count(map, "size_bytes", pointer);
        self.optional_str(map, "hash", pointer);
        self.optional_str(map, "media_type", pointer);
    }

    fn relationships(&mut self, map: &'a Map<String, Value>, pointer: &str) {
        let Some(links) = self.array(map, "links", pointer, "relationships", false) else {
            return;
        };
        let links_pointer = pointer_child(pointer, "links");
        for (index, link) in links.iter().enumerate() {
            let link_pointer = index_child(&links_pointer, index);
            let Some(link) = self.object(link, &link_pointer, "a thread link") else {
                continue;
            };
            if let Some(thread_id) =
                self.required_str(link, "thread_id", &link_pointer, "the thread link")
                && !is_uuid(thread_id)
            {
                self.error(
                    Rule::ThreadLinkId,
                    pointer_child(&link_pointer, "thread_id"),
                    format!("`thread_id` must be a UUID, not {thread_id:?}"),
                );
            }
            self.required_str(link, "relation", &link_pointer, "the thread link");
        }
    }
}
