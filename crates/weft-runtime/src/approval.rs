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
    /// Whether a stage above the approval stage may ask for a person's approval of one call
    /// ([`NeedsApproval`]: the runtime profile's `allow_with_confirm` rules), besides the
    /// tools listed in `requiresApproval`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirmations: bool,
    /// How retries wait and what they retry (`None`: the library's 100 ms doubling backoff,
    /// transient errors only, no error context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
}

/// The runtime spec's error recovery (§5.10) for a policy's retries: exponential backoff from
/// `backoffMs` by `backoffMultiplier`, the errors retried besides transient ones, no retry of
/// a failure whose signature (tool and error) was seen before, and the retries' context added
/// to the error the model finally gets.
///
/// # Examples
///
/// ```
/// use weft_runtime::approval::RetryPolicy;
///
/// let retry = RetryPolicy { backoff_ms: 1000, backoff_multiplier: 2.0, ..RetryPolicy::default() };
/// assert_eq!(retry.wait(1).as_millis(), 1000);
/// assert_eq!(retry.wait(3).as_millis(), 4000);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    /// The first wait, in milliseconds.
    pub backoff_ms: u64,
    /// Each further wait is the previous one times this.
    pub backoff_multiplier: f64,
    /// Error texts (substrings) retried although the tool did not call them transient.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retryable_errors: Vec<String>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            backoff_ms: 1000,
            backoff_multiplier: 2.0,
            retryable_errors: Vec::new(),
        }
    }
}

/// The longest wait between two attempts.
const MAX_WAIT_MS: f64 = 300_000.0;

impl RetryPolicy {
    /// The wait before retry `attempt` (1-based): `backoffMs × backoffMultiplier^(attempt-1)`,
    /// at most five minutes.
    pub fn wait(&self, attempt: u32) -> std::time::Duration {
        let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let ms = (self.backoff_ms as f64) * self.backoff_multiplier.powi(exponent);
        let ms = if ms.is_finite() {
            ms.clamp(0.0, MAX_WAIT_MS)
        } else {
            MAX_WAIT_MS
        };
        std::time::Duration::from_millis(ms as u64)
    }

    /// Whether an error with this text is retried although it is not transient.
    pub fn retryable(&self, message: &str) -> bool {
        self.retryable_errors
            .iter()
            .any(|e| !e.is_empty() && message.contains(e.as_str()))
    }
}

/// Put in a call's extensions by a stage above approval (the runtime profile's policy rules):
/// this call waits for a person's approval, whatever its tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeedsApproval {
    /// The rule that asks.
    pub rule: String,
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
            confirmations: false,
            retry: None,
        }
    }

    /// Whether calls of `tool` wait for a person.
    pub fn requires_approval(&self, tool: &str) -> bool {
        self.requires_approval.contains(tool)
    }
}
