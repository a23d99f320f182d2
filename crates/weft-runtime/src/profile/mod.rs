//! The Agent Runtime Spec's profile (`agent-runtime-spec-2026.1.md` §5–§6), which a user
//! turns on for a project (`[runtime]` in `weft.toml`), an agent (its `runtime` table) or a
//! run (`weft run --profile runtime`).
//!
//! Under the profile a run follows the spec's contracts instead of the plain agent layer's:
//!
//! * **completion** (§5.1): `complete_task` is the only way a task ends; it is schema-checked
//!   and must be called alone; an agent that stops without it ends in ERROR, its partial
//!   output kept; the run's output is the summary and listed artifacts are registered;
//! * **recovery** (§5.2): at `turns >= maxTurns - graceTurns` a Final Warning is injected, only
//!   `complete_task` may be called from then on, bounded by `graceTurns` and
//!   `graceTimeoutMs`; a failed recovery is ERROR;
//! * **policy** (§5.3, §5.12): denied tools are not offered, `interactive` = one tool call per
//!   turn, `batch` = parallel up to `maxParallel`; the policy stage of the tool pipeline
//!   ([`layer::ProfileLayer`]) refuses what the profile forbids, with a reason the model reads;
//! * **context management** (§5.11, [`context`]): past `compressionThreshold` of the
//!   model's context limit the history is compressed (`summarize`, `truncate`, `hybrid`)
//!   before the next model call, the replaced history kept for expansion;
//! * **the state machine** (§6, [`state`]): every transition is a logged `state_transition`
//!   event, and an impossible one stops the run.
//!
//! [`RuntimeProfile`] is the configuration, with the spec's names and defaults;
//! [`orchestrator::Orchestrator`] drives one agent's turns under it.
//!
//! # Examples
//!
//! ```
//! use weft_runtime::profile::{PolicyMode, RuntimeProfile};
//!
//! let profile: RuntimeProfile = serde_json::from_value(serde_json::json!({
//!     "maxTurns": 10,
//!     "policy": {"mode": "batch", "maxParallel": 3}
//! }))?;
//! assert_eq!(profile.grace_turns, 2);
//! assert_eq!(profile.grace_timeout_ms, 60_000);
//! assert_eq!(profile.policy.mode, PolicyMode::Batch);
//! assert_eq!(profile.retry.max_retries, 2);
//! assert!(profile.problems().is_empty());
//! # Ok::<(), serde_json::Error>(())
//! ```

pub mod context;
pub mod layer;
pub mod orchestrator;
pub mod redact;
pub mod routing;
pub mod rules;
pub mod sop;
pub mod state;

use serde::{Deserialize, Serialize};

/// The name `weft run --profile` takes for this profile.
pub const PROFILE_NAME: &str = "runtime";

/// The tool that ends a task under the profile.
pub const COMPLETE_TASK: &str = "complete_task";

/// The tools the spec calls sensitive (§5.12(2)): they ask a person first in `interactive`
/// mode unless `requiresApproval` says otherwise.
pub const SENSITIVE_TOOLS: [&str; 2] = ["write_file", "run_command"];

/// The Final Warning's default text; `{remaining}` is replaced by the turns left,
/// `{maxTurns}` by the limit.
pub const DEFAULT_WARNING: &str = "FINAL WARNING: you have used your turns ({remaining} left of {maxTurns}). \
Call complete_task now, alone, with a summary of what you did and what is left; no other tool may be called.";

/// The profile's settings: the `[runtime]` table of `weft.toml` (and an agent's `runtime`
/// table over it), with the spec's names and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeProfile {
    /// How a task ends: only `complete_task` (the spec's completion contract).
    #[serde(default)]
    pub completion: Completion,
    /// Most turns (model calls) of one agent task, recovery included; the Final Warning
    /// comes at `maxTurns - graceTurns`. Default 50.
    #[serde(default = "default_max_turns")]
    pub max_turns: u64,
    /// Turns of the grace period (§5.2; default 2).
    #[serde(default = "default_grace_turns")]
    pub grace_turns: u64,
    /// How long the grace period may last, in milliseconds (§5.2; default 60000).
    #[serde(default = "default_grace_timeout")]
    pub grace_timeout_ms: u64,
    /// The Final Warning (`{remaining}` and `{maxTurns}` are filled in).
    #[serde(default = "default_warning")]
    pub warning_template: String,
    /// Whether the run ends in ERROR when the grace period is over without `complete_task`
    /// (default true); false lets the agent go on in recovery until the run's budget ends.
    #[serde(default = "yes")]
    pub hard_limit: bool,
    /// Tool execution and security (§5.3, §5.12).
    #[serde(default)]
    pub policy: PolicyConfig,
    /// Retries of failed tool calls (§5.10).
    #[serde(default)]
    pub retry: RetryConfig,
    /// Context management (§5.11): when and how the history is compressed.
    #[serde(default)]
    pub context: context::ContextConfig,
    /// Model routing (§5.7): `[runtime.routing]`; absent: the agent's own model, logged as
    /// routed under policy `quality`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<routing::RoutingConfig>,
    /// `[runtime.delegation]` (§5.4): its presence offers `delegate_to_agent`
    /// ([`crate::delegation`]); absent, the tool is not offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation: Option<crate::delegation::DelegationConfig>,
    /// The agent's SOP role (§7): a built-in one (`coder`, `researcher`, `reviewer`,
    /// `architect`) or one of `roles`; absent: no SOP, every offered tool in every turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The project's own roles (`[runtime.roles.NAME]`), with the built-in roles' keys.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub roles: std::collections::BTreeMap<String, sop::SopRole>,
}

impl Default for RuntimeProfile {
    fn default() -> Self {
        RuntimeProfile {
            completion: Completion::default(),
            max_turns: default_max_turns(),
            grace_turns: default_grace_turns(),
            grace_timeout_ms: default_grace_timeout(),
            warning_template: default_warning(),
            hard_limit: true,
            policy: PolicyConfig::default(),
            retry: RetryConfig::default(),
            context: context::ContextConfig::default(),
            routing: None,
            delegation: None,
            role: None,
            roles: std::collections::BTreeMap::new(),
        }
    }
}

/// How a task ends under the profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Completion {
    /// Only a call of `complete_task` (alone in its turn) ends the task.
    #[default]
    #[serde(rename = "complete_task")]
    CompleteTask,
}

/// `interactive` (one tool call per turn, sensitive tools ask) or `batch` (parallel calls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyMode {
    /// One tool call per turn; the sensitive tools ask a person first (the default).
    #[default]
    Interactive,
    /// Calls of one response run in parallel, at most `maxParallel` at once.
    Batch,
}

/// `[runtime.policy]`: the spec's `ToolExecutionContext` and `SecurityPolicy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyConfig {
    /// `interactive` (default) or `batch`.
    #[serde(default)]
    pub mode: PolicyMode,
    /// Most calls running at once in `batch` mode (default 4).
    #[serde(default = "default_max_parallel")]
    pub max_parallel: usize,
    /// The only tools offered (`complete_task` is always offered); absent: every tool of
    /// the agent's prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// Tools never offered (they win over `allowedTools`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_tools: Vec<String>,
    /// Tools that wait for a person before every call; absent: `write_file` and
    /// `run_command` in `interactive` mode, none in `batch` mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_approval: Option<Vec<String>>,
    /// The agent's tools run in the `strict` sandbox (no filesystem, no network), whatever
    /// the project's `sandbox` and `weft run --sandbox` say.
    #[serde(default)]
    pub sandboxed: bool,
    /// Regular expressions of secrets removed from events, checkpoints and the tool ledger,
    /// besides the known key patterns ([`redact::PatternRedactor`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_patterns: Vec<String>,
    /// The policy engine's rules ([`rules`]), tried for every call after the lists above:
    /// `deny` refuses the call, `allow_with_confirm` asks a person first. A call's action is
    /// `file.read` (`read_file`, `list_dir`, `search_code`), `file.write` (`write_file`) or
    /// `tool.NAME`; its path is resolved in the workspace (the grant root).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<rules::Rule>,
    /// What decides when no rule does (default `allow`: the lists above already decided).
    #[serde(default)]
    pub fallback: rules::Decision,
    /// Folders (relative to the workspace) `file.write` rules treat as output roots
    /// (`pathWithinOutputRoot`); default: the workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_roots: Vec<String>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            mode: PolicyMode::default(),
            max_parallel: default_max_parallel(),
            allowed_tools: None,
            denied_tools: Vec::new(),
            requires_approval: None,
            sandboxed: false,
            secret_patterns: Vec::new(),
            rules: Vec::new(),
            fallback: rules::Decision::Allow,
            output_roots: Vec::new(),
        }
    }
}

impl PolicyConfig {
    /// Whether `tool` is offered to the model (`complete_task` and `advance_phase` always
    /// are).
    ///
    /// ```
    /// let policy = weft_runtime::profile::PolicyConfig {
    ///     denied_tools: vec!["run_command".into()],
    ///     ..Default::default()
    /// };
    /// assert!(!policy.offers("run_command"));
    /// assert!(policy.offers("read_file"));
    /// assert!(policy.offers("complete_task"));
    /// let only_reads = weft_runtime::profile::PolicyConfig {
    ///     allowed_tools: Some(vec!["read_file".into()]),
    ///     ..Default::default()
    /// };
    /// assert!(only_reads.offers("advance_phase") && !only_reads.offers("list_dir"));
    /// ```
    pub fn offers(&self, tool: &str) -> bool {
        // complete_task ends a task; advance_phase moves an SOP role's workflow (an agent
        // without a role has no such tool): neither is the lists' to refuse.
        if tool == COMPLETE_TASK || tool == sop::ADVANCE_PHASE {
            return true;
        }
        !self.denied_tools.iter().any(|t| t == tool)
            && self
                .allowed_tools
                .as_ref()
                .is_none_or(|allowed| allowed.iter().any(|t| t == tool))
    }

    /// The rule set of this policy (its rules and fallback).
    pub fn rule_set(&self) -> rules::RuleSet {
        rules::RuleSet {
            defaults: rules::Defaults {
                fallback: self.fallback,
            },
            rules: self.rules.clone(),
            version: None,
        }
    }

    /// Whether calls pass the policy engine's rules (there are rules, or the fallback is
    /// not `allow`).
    pub fn has_rules(&self) -> bool {
        !self.rules.is_empty() || self.fallback != rules::Decision::Allow
    }

    /// The tools that wait for a person's approval under this policy.
    pub fn approval_tools(&self) -> Vec<String> {
        match (&self.requires_approval, self.mode) {
            (Some(listed), _) => listed.clone(),
            (None, PolicyMode::Interactive) => {
                SENSITIVE_TOOLS.iter().map(|t| (*t).to_owned()).collect()
            }
            (None, PolicyMode::Batch) => Vec::new(),
        }
    }
}

/// `[runtime.retry]`: the spec's `ErrorRecoveryPolicy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryConfig {
    /// Retries of a failed call (default 2).
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// The first wait, in milliseconds (default 1000).
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
    /// Each further wait is the previous one times this (default 2).
    #[serde(default = "default_multiplier")]
    pub backoff_multiplier: f64,
    /// Error texts (substrings) retried besides the transient errors tools report
    /// (network, rate limit).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retryable_errors: Vec<String>,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: default_max_retries(),
            backoff_ms: default_backoff_ms(),
            backoff_multiplier: default_multiplier(),
            retryable_errors: Vec::new(),
        }
    }
}

/// A setting of the profile that cannot be used: the key (as written in `weft.toml`, under
/// `runtime.`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileProblem {
    /// The key, e.g. `runtime.graceTurns`.
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

impl RuntimeProfile {
    /// What is wrong with these settings (values the types accept but the profile cannot
    /// use); empty when they are fine.
    pub fn problems(&self) -> Vec<ProfileProblem> {
        let mut problems = Vec::new();
        let mut problem = |key: &str, message: String| {
            problems.push(ProfileProblem {
                key: format!("runtime.{key}"),
                message,
            });
        };
        if self.max_turns == 0 {
            problem("maxTurns", "must be at least 1".into());
        }
        if self.grace_turns >= self.max_turns {
            problem(
                "graceTurns",
                format!(
                    "must be less than maxTurns ({}): the Final Warning comes at maxTurns - graceTurns",
                    self.max_turns
                ),
            );
        }
        if self.grace_timeout_ms == 0 {
            problem("graceTimeoutMs", "must be more than 0".into());
        }
        if self.warning_template.trim().is_empty() {
            problem("warningTemplate", "must not be empty".into());
        }
        if self.policy.max_parallel == 0 {
            problem("policy.maxParallel", "must be at least 1".into());
        }
        if !(self.retry.backoff_multiplier.is_finite() && self.retry.backoff_multiplier >= 1.0) {
            problem(
                "retry.backoffMultiplier",
                "must be a number of at least 1".into(),
            );
        }
        for (key, message) in self.context.problems() {
            problem(&format!("context.{key}"), message);
        }
        // Accepted names the profile does not act on yet: refused rather than ignored, so a
        // security setting never silently does nothing.
        for pattern in &self.policy.secret_patterns {
            if let Err(error) = regex::Regex::new(pattern) {
                problem(
                    "policy.secretPatterns",
                    format!("{pattern:?} is not a regular expression: {error}"),
                );
            }
        }
        let set = rules::RuleSet {
            rules: self.policy.rules.clone(),
            ..rules::RuleSet::default()
        };
        for (rule, message) in set.problems() {
            problem("policy.rules", format!("rule {rule:?}: {message}"));
        }
        if let Some(routing) = &self.routing {
            for (key, message) in routing.problems() {
                problem(&key, message);
            }
        }
        for (key, message) in self.delegation.iter().flat_map(|d| d.problems()) {
            problem(&format!("delegation.{key}"), message);
        }
        for tool in self.policy.denied_tools.iter() {
            if tool == COMPLETE_TASK {
                problem(
                    "policy.deniedTools",
                    "complete_task cannot be denied: it is the only way a task ends".into(),
                );
            }
        }
        for (name, role) in &self.roles {
            if sop::SopRole::builtin(name).is_some() {
                problem(
                    &format!("roles.{name}"),
                    format!(
                        "{name:?} is a built-in role ({}); give the project's role another name",
                        sop::BUILTIN_ROLES.join(", ")
                    ),
                );
            }
            for (key, message) in role.problems() {
                problem(&format!("roles.{name}.{key}"), message);
            }
        }
        if let Some(role) = &self.role
            && self.sop_role().is_none()
        {
            let custom: Vec<&str> = self.roles.keys().map(String::as_str).collect();
            problem(
                "role",
                format!(
                    "unknown role {role:?}: the built-in roles are {}{}",
                    sop::BUILTIN_ROLES.join(", "),
                    if custom.is_empty() {
                        " (a project defines its own under [runtime.roles.NAME])".to_owned()
                    } else {
                        format!("; the project's: {}", custom.join(", "))
                    }
                ),
            );
        }
        problems
    }

    /// The agent's SOP role: `role` looked up among the project's `roles`, then the
    /// built-in ones; `None` without a role (or an unknown one, which
    /// [`RuntimeProfile::problems`] reports).
    ///
    /// ```
    /// let profile: weft_runtime::profile::RuntimeProfile =
    ///     serde_json::from_value(serde_json::json!({"role": "reviewer"}))?;
    /// assert_eq!(profile.sop_role().map(|r| r.max_react_loop), Some(8));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn sop_role(&self) -> Option<sop::SopRole> {
        let name = self.role.as_deref()?;
        if let Some(role) = self.roles.get(name) {
            let mut role = role.clone();
            if role.name.is_empty() {
                role.name = name.to_owned();
            }
            return Some(role);
        }
        sop::SopRole::builtin(name)
    }

    /// The profile of an agent: the project's `[runtime]` table with the agent's `runtime`
    /// table over it (key by key, nested tables merged), the spec's defaults for the rest.
    ///
    /// # Errors
    /// The first key that is unknown or has a value of the wrong type (its path under
    /// `runtime.`), or the first of [`RuntimeProfile::problems`].
    ///
    /// # Examples
    ///
    /// ```
    /// use serde_json::json;
    /// use weft_runtime::profile::RuntimeProfile;
    ///
    /// let project = json!({"maxTurns": 8, "policy": {"mode": "batch"}});
    /// let agent = json!({"policy": {"maxParallel": 2}});
    /// let profile = RuntimeProfile::from_tables(Some(&project), Some(&agent))?;
    /// assert_eq!((profile.max_turns, profile.policy.max_parallel), (8, 2));
    ///
    /// let bad = json!({"policy": {"mxParallel": 2}});
    /// let problem = RuntimeProfile::from_tables(Some(&bad), None).unwrap_err();
    /// assert_eq!(problem.key, "runtime.policy.mxParallel");
    /// # Ok::<(), weft_runtime::profile::ProfileProblem>(())
    /// ```
    pub fn from_tables(
        project: Option<&serde_json::Value>,
        agent: Option<&serde_json::Value>,
    ) -> Result<RuntimeProfile, ProfileProblem> {
        let mut merged = project
            .cloned()
            .unwrap_or_else(|| serde_json::Value::Object(Default::default()));
        if let Some(agent) = agent {
            merge(&mut merged, agent);
        }
        let profile: RuntimeProfile =
            serde_path_to_error::deserialize(&merged).map_err(|error| {
                let key = error.path().to_string();
                let inner = error.into_inner().to_string();
                ProfileProblem {
                    key: if key == "." {
                        "runtime".to_owned()
                    } else {
                        format!("runtime.{key}")
                    },
                    message: inner,
                }
            })?;
        match profile.problems().into_iter().next() {
            Some(problem) => Err(problem),
            None => Ok(profile),
        }
    }

    /// The Final Warning for a run at `turns` turns.
    pub fn warning(&self, turns: u64) -> String {
        self.warning_template
            .replace(
                "{remaining}",
                &self.max_turns.saturating_sub(turns).to_string(),
            )
            .replace("{maxTurns}", &self.max_turns.to_string())
    }

    /// The turn count at which recovery starts (`maxTurns - graceTurns`).
    pub fn recovery_at(&self) -> u64 {
        self.max_turns.saturating_sub(self.grace_turns)
    }
}

impl std::fmt::Display for ProfileProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

impl std::error::Error for ProfileProblem {}

/// `over`'s keys written into `base`, nested objects merged.
fn merge(base: &mut serde_json::Value, over: &serde_json::Value) {
    match (base, over) {
        (serde_json::Value::Object(base), serde_json::Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge(existing, value);
                    }
                    _ => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, over) => *base = over.clone(),
    }
}

fn default_max_turns() -> u64 {
    50
}
fn default_grace_turns() -> u64 {
    2
}
fn default_grace_timeout() -> u64 {
    60_000
}
fn default_warning() -> String {
    DEFAULT_WARNING.to_owned()
}
fn yes() -> bool {
    true
}
fn default_max_parallel() -> usize {
    4
}
fn default_max_retries() -> u32 {
    2
}
fn default_backoff_ms() -> u64 {
    1000
}
fn default_multiplier() -> f64 {
    2.0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_the_specs() {
        let p: RuntimeProfile = serde_json::from_value(json!({})).unwrap();
        assert_eq!(p, RuntimeProfile::default());
        assert_eq!(p.completion, Completion::CompleteTask);
        assert_eq!((p.grace_turns, p.grace_timeout_ms), (2, 60_000));
        assert_eq!(
            (
                p.retry.max_retries,
                p.retry.backoff_ms,
                p.retry.backoff_multiplier
            ),
            (2, 1000, 2.0)
        );
        assert_eq!(p.policy.approval_tools(), ["write_file", "run_command"]);
        assert!(p.hard_limit);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let e = RuntimeProfile::from_tables(Some(&json!({"maxTurnz": 3})), None).unwrap_err();
        assert_eq!(e.key, "runtime.maxTurnz", "{e}");
        let e = RuntimeProfile::from_tables(None, Some(&json!({"retry": {"maxRetries": "x"}})))
            .unwrap_err();
        assert_eq!(e.key, "runtime.retry.maxRetries", "{e}");
        let e = serde_json::from_value::<RuntimeProfile>(json!({"policy": {"mode": "fast"}}))
            .unwrap_err();
        assert!(e.to_string().contains("fast"), "{e}");
        let e =
            serde_json::from_value::<RuntimeProfile>(json!({"completion": "stop"})).unwrap_err();
        assert!(e.to_string().contains("stop"), "{e}");
        let p: RuntimeProfile =
            serde_json::from_value(json!({"maxTurns": 2, "graceTurns": 2})).unwrap();
        assert_eq!(p.problems()[0].key, "runtime.graceTurns");
    }

    #[test]
    fn the_warning_names_what_is_left() {
        let p = RuntimeProfile {
            max_turns: 5,
            warning_template: "{remaining} of {maxTurns}".into(),
            ..RuntimeProfile::default()
        };
        assert_eq!(p.warning(3), "2 of 5");
        assert_eq!(p.recovery_at(), 3);
    }
}
