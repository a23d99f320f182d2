//! Pending decisions (RUNTIME.md §3): a tool call that waits for a person — an approval the
//! policy asks for, or an uncertain call left by a crash — is one durable record with its own
//! short id, bound to (run, call position, tool, hash of the arguments). A person decides it
//! (`weft approve` / `weft deny`) from any process; the run's owner reads the decisions when
//! it resumes. The pending set is only ever read from here: a client cannot forge one.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{StoreError, corrupt};
use crate::model::now_string;
use crate::sql::stmt;
use crate::store::Store;

/// What a decision is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// The policy asks a person before the tool runs.
    Approval,
    /// The call was running when its process died: did its effect happen? Run it again?
    Uncertain,
}

impl DecisionKind {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Approval => "approval",
            DecisionKind::Uncertain => "uncertain",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "approval" => Some(DecisionKind::Approval),
            "uncertain" => Some(DecisionKind::Uncertain),
            _ => None,
        }
    }
}

/// Where a decision stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionStatus {
    /// Nobody decided yet.
    Pending,
    /// Approved: the call may run (once).
    Approved,
    /// Denied: the model gets the reason as the call's error result.
    Denied,
    /// Approved and acted on: a decision is single-use.
    Used,
}

impl DecisionStatus {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionStatus::Pending => "pending",
            DecisionStatus::Approved => "approved",
            DecisionStatus::Denied => "denied",
            DecisionStatus::Used => "used",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(DecisionStatus::Pending),
            "approved" => Some(DecisionStatus::Approved),
            "denied" => Some(DecisionStatus::Denied),
            "used" => Some(DecisionStatus::Used),
            _ => None,
        }
    }
}

/// A decision about one tool call of a run.
///
/// # Examples
///
/// ```
/// use serde_json::json;
/// use weft_store::{DecisionKind, DecisionRecord};
///
/// let pending = DecisionRecord::pending(
///     "run-1", "main@3#0", "call_7", "run_command", json!({"command": "make deploy"}),
///     "hash", DecisionKind::Approval, "assistant",
/// );
/// assert!(pending.id.starts_with("d-"));
/// assert_eq!(pending.id.len(), 10);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRecord {
    /// The run.
    pub run_id: String,
    /// The short id a person types (`d-` and 8 hex digits), unique in the run.
    pub id: String,
    /// The call's position in the run (`SCOPE@N#I`).
    pub position: String,
    /// The model's id for the call.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// The arguments the call would run with.
    pub arguments: Value,
    /// SHA-256 of the arguments: a decision only applies to these exact arguments.
    pub args_hash: String,
    /// What it is about.
    pub kind: DecisionKind,
    /// Where it stands.
    pub status: DecisionStatus,
    /// The reason a person gave (a denial's reason reaches the model).
    pub reason: Option<String>,
    /// The agent (path) whose call it is.
    pub agent_id: String,
    /// When it was raised.
    pub created_at: String,
    /// When it was decided.
    pub decided_at: Option<String>,
}

impl DecisionRecord {
    /// A new pending decision; its id is derived from the run, position and kind, so raising
    /// the same decision again (a run suspended twice at one call) keeps its id.
    #[allow(clippy::too_many_arguments)]
    pub fn pending(
        run_id: impl Into<String>,
        position: impl Into<String>,
        tool_call_id: impl Into<String>,
        tool_name: impl Into<String>,
        arguments: Value,
        args_hash: impl Into<String>,
        kind: DecisionKind,
        agent_id: impl Into<String>,
    ) -> Self {
        use sha2::Digest as _;
        let run_id = run_id.into();
        let position = position.into();
        let digest = sha2::Sha256::digest(format!("{run_id}\n{position}\n{}", kind.as_str()));
        let id = format!(
            "d-{}",
            digest
                .iter()
                .take(4)
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        DecisionRecord {
            run_id,
            id,
            position,
            tool_call_id: tool_call_id.into(),
            tool_name: tool_name.into(),
            arguments,
            args_hash: args_hash.into(),
            kind,
            status: DecisionStatus::Pending,
            reason: None,
            agent_id: agent_id.into(),
            created_at: now_string(),
            decided_at: None,
        }
    }
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Approve,
    /// Do not run it; the model gets the reason.
    Deny(String),
}

/// Durable pending decisions.
#[async_trait]
pub trait Decisions: Send + Sync {
    /// Records a pending decision (raising one that exists keeps it as it is). Committed
    /// before it returns, whatever the durability: a run only suspends on a durable record.
    ///
    /// # Errors
    /// Database failures; [`StoreError::Fenced`].
    async fn raise_decision(&self, decision: &DecisionRecord) -> Result<(), StoreError>;

    /// Every decision of `run_id`, oldest first.
    ///
    /// # Errors
    /// Database failures.
    async fn decisions(&self, run_id: &str) -> Result<Vec<DecisionRecord>, StoreError>;

    /// Decides the *pending* decision `id` of `run_id`; `false` when there is none (unknown
    /// id, or already decided). Not fenced: any process may decide.
    ///
    /// # Errors
    /// Database failures.
    async fn decide(&self, run_id: &str, id: &str, verdict: &Verdict) -> Result<bool, StoreError>;

    /// Marks an approved decision as used (the call was started).
    ///
    /// # Errors
    /// Database failures; [`StoreError::Fenced`].
    async fn use_decision(&self, run_id: &str, id: &str) -> Result<(), StoreError>;
}

#[async_trait]
impl Decisions for Store {
    async fn raise_decision(&self, decision: &DecisionRecord) -> Result<(), StoreError> {
        let mut args = decision.arguments.clone();
        self.redact(&mut args);
        self.write_now(vec![stmt!(
            "INSERT INTO decisions (run_id, id, position, tool_call_id, tool_name, arguments, args_hash, kind, \
             status, reason, agent_id, created_at, decided_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', NULL, $9, $10, NULL) \
             ON CONFLICT (run_id, id) DO NOTHING",
            decision.run_id.as_str(),
            decision.id.as_str(),
            decision.position.as_str(),
            decision.tool_call_id.as_str(),
            decision.tool_name.as_str(),
            args.to_string(),
            decision.args_hash.as_str(),
            decision.kind.as_str(),
            decision.agent_id.as_str(),
            decision.created_at.as_str()
        )])
        .await
    }

    async fn decisions(&self, run_id: &str) -> Result<Vec<DecisionRecord>, StoreError> {
        self.flush().await?;
        let rows = self
            .query(stmt!(
                "SELECT id, position, tool_call_id, tool_name, arguments, args_hash, kind, status, reason, \
                 agent_id, created_at, decided_at FROM decisions WHERE run_id = $1 ORDER BY created_at, id",
                run_id
            ))
            .await?;
        rows.iter()
            .map(|r| {
                Ok(DecisionRecord {
                    run_id: run_id.to_owned(),
                    id: r.text(0)?,
                    position: r.text(1)?,
                    tool_call_id: r.text(2)?,
                    tool_name: r.text(3)?,
                    arguments: serde_json::from_str(&r.text(4)?)
                        .map_err(|e| corrupt("decisions", e))?,
                    args_hash: r.text(5)?,
                    kind: DecisionKind::parse(&r.text(6)?)
                        .ok_or_else(|| corrupt("decisions", "unknown kind"))?,
                    status: DecisionStatus::parse(&r.text(7)?)
                        .ok_or_else(|| corrupt("decisions", "unknown status"))?,
                    reason: r.opt_text(8)?,
                    agent_id: r.text(9)?,
                    created_at: r.text(10)?,
                    decided_at: r.opt_text(11)?,
                })
            })
            .collect()
    }

    async fn decide(&self, run_id: &str, id: &str, verdict: &Verdict) -> Result<bool, StoreError> {
        let pending = self
            .decisions(run_id)
            .await?
            .into_iter()
            .any(|d| d.id == id && d.status == DecisionStatus::Pending);
        if !pending {
            return Ok(false);
        }
        let (status, reason) = match verdict {
            Verdict::Approve => (DecisionStatus::Approved, None),
            Verdict::Deny(reason) => (DecisionStatus::Denied, Some(reason.as_str())),
        };
        self.commit(
            None,
            vec![stmt!(
                "UPDATE decisions SET status = $1, reason = $2, decided_at = $3 \
                 WHERE run_id = $4 AND id = $5 AND status = 'pending'",
                status.as_str(),
                reason,
                now_string(),
                run_id,
                id
            )],
        )
        .await?;
        Ok(true)
    }

    async fn use_decision(&self, run_id: &str, id: &str) -> Result<(), StoreError> {
        self.write_now(vec![stmt!(
            "UPDATE decisions SET status = 'used' WHERE run_id = $1 AND id = $2 AND status = 'approved'",
            run_id,
            id
        )])
        .await
    }
}
