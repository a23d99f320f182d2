//! Delegation (runtime spec §5.4): the `delegate_to_agent` tool's input, its roles and the
//! limits of `[runtime.delegation]`.
//!
//! Delegation is a configuration of the one child-run mechanism ([`crate::child`]) that
//! Standard Agents subagents use: `weft-standard` runs the delegated child as a child run
//! of the calling agent (own thread linked to the parent's, lineage node, usage rolled up,
//! events under `parent/ROLE`, approvals surfacing on the root run). This module holds what
//! is the runtime spec's own:
//!
//! * [`DelegateInput`]: the spec's `DelegateToAgentInput`, validated ([`DelegateInput::parse`]);
//! * [`DelegateRole`] and [`role_tools`]: the registry a role's child gets (from the SOP role
//!   table of [`crate::profile::sop`]);
//! * [`DelegationConfig`]: `enabled`, `maxDepth` (3), `maxChildren` (8), `model`, `grants`.
//!
//! # Examples
//!
//! ```
//! use weft_runtime::delegation::{DelegateInput, DelegateRole, DelegationConfig};
//!
//! let input = DelegateInput::parse(&serde_json::json!({
//!     "role": "reviewer", "task": "review the diff", "constraints": ["be brief"]
//! }))?;
//! assert_eq!(input.role, DelegateRole::Reviewer);
//! assert!(DelegateInput::parse(&serde_json::json!({"role": "poet", "task": "x"})).is_err());
//!
//! let config: DelegationConfig = serde_json::from_value(serde_json::json!({}))?;
//! assert_eq!((config.max_depth, config.max_children), (3, 8));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The tool's name.
pub const DELEGATE_TO_AGENT: &str = "delegate_to_agent";

/// The spec's roles of a delegated child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegateRole {
    /// Finds and reads sources.
    Researcher,
    /// Writes and runs code.
    Coder,
    /// Reviews work without changing it.
    Reviewer,
    /// Analyses data and code without changing it.
    Analyst,
}

impl DelegateRole {
    /// Every role, in the spec's order.
    pub const ALL: [DelegateRole; 4] = [
        DelegateRole::Researcher,
        DelegateRole::Coder,
        DelegateRole::Reviewer,
        DelegateRole::Analyst,
    ];

    /// The role's name (`researcher`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            DelegateRole::Researcher => "researcher",
            DelegateRole::Coder => "coder",
            DelegateRole::Reviewer => "reviewer",
            DelegateRole::Analyst => "analyst",
        }
    }

    /// The role named `name`.
    ///
    /// ```
    /// use weft_runtime::delegation::DelegateRole;
    /// assert_eq!(DelegateRole::parse("coder"), Some(DelegateRole::Coder));
    /// assert_eq!(DelegateRole::parse("Coder"), None);
    /// ```
    pub fn parse(name: &str) -> Option<DelegateRole> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// What the child is told it is (its system prompt's first paragraph).
    pub fn brief(self) -> &'static str {
        match self {
            DelegateRole::Researcher => {
                "You are a researcher agent. Find and read the sources the task needs and report what you found, with where you found it."
            }
            DelegateRole::Coder => {
                "You are a coder agent. Make the change the task asks for, keep it small, and check that it works."
            }
            DelegateRole::Reviewer => {
                "You are a reviewer agent. Review what the task names without changing it, and report the problems you find, most important first."
            }
            DelegateRole::Analyst => {
                "You are an analyst agent. Read what the task names without changing it, analyse it and report your findings."
            }
        }
    }
}

impl std::fmt::Display for DelegateRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The tools a child of `role` may have: the tools of the role's SOP phases (spec §7, from
/// the one role table, [`SopRole::builtin`](crate::profile::sop::SopRole::builtin) and
/// [`SopRole::all_tools`](crate::profile::sop::SopRole::all_tools): the union of its phases,
/// since a delegated child runs one task), before the intersection with its parent's tools and
/// the explicit grants ([`DelegationConfig::grants`]). The analyst, which §7 gives no SOP,
/// reads like a reviewer.
///
/// ```
/// use weft_runtime::delegation::{DelegateRole, role_tools};
/// assert!(role_tools(DelegateRole::Coder).iter().any(|t| t == "write_file"));
/// assert!(!role_tools(DelegateRole::Reviewer).iter().any(|t| t == "write_file"));
/// assert_eq!(role_tools(DelegateRole::Analyst), role_tools(DelegateRole::Reviewer));
/// ```
pub fn role_tools(role: DelegateRole) -> Vec<String> {
    let sop = match role {
        DelegateRole::Researcher => "researcher",
        DelegateRole::Coder => "coder",
        DelegateRole::Reviewer | DelegateRole::Analyst => "reviewer",
    };
    crate::profile::sop::SopRole::builtin(sop)
        .map(|role| role.all_tools())
        .unwrap_or_default()
}

/// The spec's `DelegateToAgentInput`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegateInput {
    /// The child's role.
    pub role: DelegateRole,
    /// What the child is to do (not empty).
    pub task: String,
    /// Rules the child must keep.
    pub constraints: Vec<String>,
    /// What the child is to return.
    pub expected_output: Option<String>,
}

/// Why a `delegate_to_agent` call's arguments were refused (the model reads it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("delegate_to_agent: {0}")]
pub struct InputError(pub String);

impl DelegateInput {
    /// The tool's JSON Schema: exactly the spec's interface (no other properties).
    pub fn schema() -> Value {
        let roles: Vec<&str> = DelegateRole::ALL.iter().map(|r| r.as_str()).collect();
        json!({
            "type": "object",
            "properties": {
                "role": {"type": "string", "enum": roles, "description": "The child agent's role."},
                "task": {"type": "string", "minLength": 1, "description": "What the child agent is to do."},
                "constraints": {"type": "array", "items": {"type": "string"}, "description": "Rules the child must keep."},
                "expectedOutput": {"type": "string", "description": "What the child is to return."}
            },
            "required": ["role", "task"],
            "additionalProperties": false
        })
    }

    /// The input of a call's arguments, checked against [`DelegateInput::schema`].
    ///
    /// # Errors
    /// What is wrong, in words the model can act on.
    pub fn parse(args: &Value) -> Result<DelegateInput, InputError> {
        let bad = |m: String| Err(InputError(m));
        let Some(object) = args.as_object() else {
            return bad("the arguments must be an object".into());
        };
        if let Some(key) = object.keys().find(|k| {
            !matches!(
                k.as_str(),
                "role" | "task" | "constraints" | "expectedOutput"
            )
        }) {
            return bad(format!(
                "unknown argument {key:?}; the arguments are role, task, constraints, expectedOutput"
            ));
        }
        let names = || {
            DelegateRole::ALL
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let role = match object.get("role") {
            None => return bad(format!("`role` is required: one of {}", names())),
            Some(Value::String(name)) => match DelegateRole::parse(name) {
                Some(role) => role,
                None => return bad(format!("`role` {name:?} is not one of {}", names())),
            },
            Some(_) => return bad(format!("`role` must be a string: one of {}", names())),
        };
        let task = match object.get("task") {
            Some(Value::String(task)) if !task.trim().is_empty() => task.clone(),
            Some(Value::String(_)) => return bad("`task` must not be empty".into()),
            Some(_) => return bad("`task` must be a string".into()),
            None => return bad("`task` is required: what the child agent is to do".into()),
        };
        let constraints = match object.get("constraints") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut constraints = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Value::String(s) => constraints.push(s.clone()),
                        _ => return bad("`constraints` must be a list of strings".into()),
                    }
                }
                constraints
            }
            Some(_) => return bad("`constraints` must be a list of strings".into()),
        };
        let expected_output = match object.get("expectedOutput") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return bad("`expectedOutput` must be a string".into()),
        };
        Ok(DelegateInput {
            role,
            task,
            constraints,
            expected_output,
        })
    }

    /// The child's first message: the task, its constraints and the expected output.
    ///
    /// ```
    /// let input = weft_runtime::delegation::DelegateInput::parse(&serde_json::json!({
    ///     "role": "coder", "task": "fix it", "constraints": ["no new files"], "expectedOutput": "a diff"
    /// }))?;
    /// assert_eq!(input.message(), "fix it\n\nConstraints:\n- no new files\n\nExpected output: a diff");
    /// # Ok::<(), weft_runtime::delegation::InputError>(())
    /// ```
    pub fn message(&self) -> String {
        let mut text = self.task.clone();
        if !self.constraints.is_empty() {
            text.push_str("\n\nConstraints:");
            for c in &self.constraints {
                text.push_str("\n- ");
                text.push_str(c);
            }
        }
        if let Some(expected) = &self.expected_output {
            text.push_str("\n\nExpected output: ");
            text.push_str(expected);
        }
        text
    }
}

/// `[runtime.delegation]`: whether the runtime profile offers `delegate_to_agent`, and its
/// limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DelegationConfig {
    /// Offers `delegate_to_agent` (default true: the table's presence turns delegation on;
    /// `enabled = false` turns it off, e.g. for one agent).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The deepest a delegated child may be in the lineage (the root agent is 0; default 3,
    /// spec §5.4(4)).
    #[serde(default = "default_max_depth")]
    pub max_depth: u32,
    /// The most children one agent may delegate to in a run (default 8).
    #[serde(default = "default_max_children")]
    pub max_children: u32,
    /// The children's model (`PROVIDER:MODEL`); default: the delegating agent's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Explicit grants (spec §5.12(3)): per role, tools its children get although their
    /// parent does not have them. Without a grant a child has at most its parent's tools.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grants: BTreeMap<String, Vec<String>>,
}

impl Default for DelegationConfig {
    fn default() -> Self {
        DelegationConfig {
            enabled: true,
            max_depth: default_max_depth(),
            max_children: default_max_children(),
            model: None,
            grants: BTreeMap::new(),
        }
    }
}

impl DelegationConfig {
    /// What is wrong with these settings: `(key under runtime.delegation, message)`.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        if self.max_depth == 0 {
            problems.push(("maxDepth".into(), "must be at least 1".into()));
        }
        if self.max_children == 0 {
            problems.push(("maxChildren".into(), "must be at least 1".into()));
        }
        for role in self.grants.keys() {
            if DelegateRole::parse(role).is_none() {
                problems.push((
                    format!("grants.{role}"),
                    "is not a role: researcher, coder, reviewer or analyst".into(),
                ));
            }
        }
        problems
    }

    /// The tools a child of `role` gets when its parent has `parent_tools`: the role's
    /// ([`role_tools`]) that the parent has, and those granted to the role; never
    /// `delegate_to_agent` or `complete_task` (the runtime adds those itself).
    ///
    /// ```
    /// use weft_runtime::delegation::{DelegateRole, DelegationConfig};
    /// let mut config = DelegationConfig::default();
    /// let parent = ["read_file", "write_file"];
    /// assert_eq!(config.child_tools(DelegateRole::Reviewer, &parent), ["read_file"]);
    /// assert_eq!(config.child_tools(DelegateRole::Coder, &parent), ["read_file", "write_file"]);
    /// config.grants.insert("coder".into(), vec!["run_command".into()]);
    /// assert_eq!(
    ///     config.child_tools(DelegateRole::Coder, &parent),
    ///     ["read_file", "write_file", "run_command"]
    /// );
    /// ```
    pub fn child_tools(&self, role: DelegateRole, parent_tools: &[&str]) -> Vec<String> {
        let mut tools: Vec<String> = role_tools(role)
            .into_iter()
            .filter(|t| parent_tools.contains(&t.as_str()))
            .collect();
        for granted in self.grants.get(role.as_str()).into_iter().flatten() {
            if !tools.contains(granted) {
                tools.push(granted.clone());
            }
        }
        tools.retain(|t| t != DELEGATE_TO_AGENT && t != crate::profile::COMPLETE_TASK);
        tools
    }
}

fn yes() -> bool {
    true
}
fn default_max_depth() -> u32 {
    3
}
fn default_max_children() -> u32 {
    8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_input_is_the_specs_interface() {
        let ok = DelegateInput::parse(&json!({"role": "analyst", "task": "count"}));
        assert_eq!(
            ok.ok(),
            Some(DelegateInput {
                role: DelegateRole::Analyst,
                task: "count".into(),
                constraints: Vec::new(),
                expected_output: None,
            })
        );
        for (args, says) in [
            (json!({"task": "x"}), "`role` is required"),
            (json!({"role": "coder"}), "`task` is required"),
            (json!({"role": "architect", "task": "x"}), "not one of"),
            (json!({"role": "coder", "task": "  "}), "must not be empty"),
            (
                json!({"role": "coder", "task": "x", "constraints": "one"}),
                "list of strings",
            ),
            (
                json!({"role": "coder", "task": "x", "expectedOutput": 3}),
                "must be a string",
            ),
            (
                json!({"role": "coder", "task": "x", "model": "y"}),
                "unknown argument",
            ),
            (json!("coder"), "must be an object"),
        ] {
            let error = DelegateInput::parse(&args).err().map(|e| e.to_string());
            assert!(
                error.as_deref().is_some_and(|e| e.contains(says)),
                "{args}: {error:?}"
            );
        }
        let schema = DelegateInput::schema();
        assert_eq!(schema["required"], json!(["role", "task"]));
        assert_eq!(
            schema["properties"]["role"]["enum"],
            json!(["researcher", "coder", "reviewer", "analyst"])
        );
    }

    #[test]
    fn defaults_and_problems() {
        let config = DelegationConfig::default();
        assert_eq!((config.max_depth, config.max_children), (3, 8));
        assert!(config.enabled && config.problems().is_empty());
        let bad: DelegationConfig =
            serde_json::from_value(json!({"maxDepth": 0, "grants": {"poet": ["write_file"]}}))
                .unwrap_or_default();
        let keys: Vec<String> = bad.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["maxDepth", "grants.poet"]);
        assert!(serde_json::from_value::<DelegationConfig>(json!({"maxDeep": 2})).is_err());
    }

    #[test]
    fn a_child_never_gets_more_than_its_role_and_parent_without_a_grant() {
        let config = DelegationConfig::default();
        let parent = [
            "read_file",
            "write_file",
            "run_command",
            "delegate_to_agent",
        ];
        assert_eq!(
            config.child_tools(DelegateRole::Researcher, &parent),
            ["read_file"]
        );
        assert_eq!(
            config.child_tools(DelegateRole::Analyst, &["write_file"]),
            Vec::<String>::new()
        );
    }
}
