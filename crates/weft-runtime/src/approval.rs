//! Who answers an approval while the run is live. The policy decides *whether* a call needs
//! a person ([`ToolPolicy`]); an [`Approver`] only decides *how* to ask: a terminal asks
//! inline, and without one (no terminal, `--no-input`, a server) nobody can answer now, the
//! decision stays pending and the run suspends (exit code 4) until `weft approve` /
//! `weft deny` and `weft resume`.

use std::collections::BTreeSet;
use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_store::Verdict;

use crate::hooks::PreToolHook;

/// A call waiting for a person.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The run.
    pub run_id: String,
    /// The pending decision's short id.
    pub decision_id: String,
    /// The model's id for the call.
    pub tool_call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments it would run with.
    pub arguments: Value,
}

/// Asks a person about a call, now.
#[async_trait]
pub trait Approver: Send + Sync + fmt::Debug {
    /// The person's verdict, or `None` when nobody can answer now (the run suspends).
    async fn decide(&self, request: &ApprovalRequest) -> Option<Verdict>;
}

/// What the runtime's policy says about the tools of one agent: which need a person's
/// approval, and which external pre-tool-use hooks run before each call.
///
/// # Examples
///
/// ```
/// use weft_runtime::approval::ToolPolicy;
///
/// let policy = ToolPolicy::requiring(["run_command", "deploy"]);
/// assert!(policy.requires_approval("deploy"));
/// assert!(!policy.requires_approval("read_file"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolPolicy {
    /// Tools that wait for a person's approval before every call.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub requires_approval: BTreeSet<String>,
    /// External scripts asked before every call (exit 2 = deny).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_tool_use: Vec<PreToolHook>,
    /// How many times a call whose tool failed with a *transient* error is run again, with
    /// exponential backoff (100 ms, 200 ms, …), before the error goes to the model: 0 by
    /// default (the library's behaviour); the runtime spec's profile uses 2.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_retries: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl ToolPolicy {
    /// A policy that asks before calls of `tools`.
    pub fn requiring(tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        ToolPolicy {
            requires_approval: tools.into_iter().map(Into::into).collect(),
            pre_tool_use: Vec::new(),
            max_retries: 0,
        }
    }

    /// Whether calls of `tool` wait for a person.
    pub fn requires_approval(&self, tool: &str) -> bool {
        self.requires_approval.contains(tool)
    }
}
