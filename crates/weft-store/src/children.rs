//! [`Subagents`]: the child registry of Standard Agents threads (agents §7.11,
//! `ThreadState.children`): one row per child thread a parent thread started, with the
//! spec's `SubagentRegistryEntry` fields, the arguments of the call that created it
//! (`subagent_create.arguments`, restored on every run of the child) and the call that
//! created it (`createdBy`: run id and call position), so a create call replayed after a
//! crash finds its child instead of starting another.
//!
//! A table of its own rather than thread metadata: several writers update one parent's
//! registry (the parent creates children, each child sets its own status, `terminate` marks
//! it), and a row per child updates its status in one statement, with no read-modify-write
//! of a shared document.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::StoreError;
use crate::sql::{Row, stmt};
use crate::store::Store;

/// One child in its parent's registry (agents §7.11 `SubagentRegistryEntry`), plus Weft's
/// `agent` (the child's agent definition).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentRegistryEntry {
    /// The child's reference: its thread id (a random UUID for a resumable child).
    pub reference: String,
    /// The instance's name (`subagent_create`'s `name`; the agent's name otherwise).
    pub name: String,
    /// A display title (the agent's `title`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the child does.
    pub description: String,
    /// Whether the child takes further messages (`subagent_message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumable: Option<bool>,
    /// Whether the parent waits for each of its results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
    /// The child thread's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_name: Option<String>,
    /// The group of children started together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn_group_id: Option<String>,
    /// When it was created, in microseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    /// Its status text: `running`, `idle`, `completed`, `failed`, `terminated`, or what its
    /// `sessionStatus` tool last said.
    pub status: String,
    /// `implicit` (results and failures queued to the parent) or `explicit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_communication: Option<String>,
    /// Weft's: the child's agent (the `dual_ai` agent definition it runs).
    pub agent: String,
}

/// A child as stored: its registry entry, its parent thread and its creation arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildRecord {
    /// The registry entry.
    pub entry: SubagentRegistryEntry,
    /// The parent thread.
    pub parent_thread_id: String,
    /// The arguments of the call that created it (`subagent_create.arguments`).
    pub arguments: Value,
    /// The call that created it (`RUN_ID POSITION`), if any.
    pub created_by: Option<String>,
}

/// Durable child registries.
///
/// # Examples
///
/// ```
/// # async fn demo() -> Result<(), weft_store::StoreError> {
/// use weft_store::{Store, SubagentRegistryEntry, Subagents as _};
/// let store = Store::open("sqlite::memory:").await?;
/// let entry = SubagentRegistryEntry {
///     reference: "0b7c…".into(), name: "alice".into(), title: None,
///     description: "Writes drafts.".into(), resumable: Some(true), blocking: Some(true),
///     thread_name: None, spawn_group_id: None, created_at: Some(1), status: "running".into(),
///     parent_communication: Some("implicit".into()), agent: "writer".into(),
/// };
/// let child = store.register_child("parent", &entry, &serde_json::json!({"name": "alice"}), Some("run-1 t@1#0")).await?;
/// assert_eq!(child.entry, entry);
/// store.set_child_status("0b7c…", "idle").await?;
/// assert_eq!(store.children("parent").await?[0].status, "idle");
/// # Ok(()) }
/// ```
#[async_trait]
pub trait Subagents: Send + Sync {
    /// Registers `entry` as a child of `parent_thread`, created with `arguments` by the call
    /// `created_by`; when that call already registered a child, returns it unchanged.
    ///
    /// # Errors
    /// Database failures.
    async fn register_child(
        &self,
        parent_thread: &str,
        entry: &SubagentRegistryEntry,
        arguments: &Value,
        created_by: Option<&str>,
    ) -> Result<ChildRecord, StoreError>;

    /// The children of `parent_thread`, oldest first.
    ///
    /// # Errors
    /// Database failures.
    async fn children(&self, parent_thread: &str)
    -> Result<Vec<SubagentRegistryEntry>, StoreError>;

    /// The child `reference`, with its parent and arguments.
    ///
    /// # Errors
    /// Database failures.
    async fn child(&self, reference: &str) -> Result<Option<ChildRecord>, StoreError>;

    /// The child the call `created_by` (`RUN_ID POSITION`) registered, if any.
    ///
    /// # Errors
    /// Database failures.
    async fn child_created_by(&self, created_by: &str) -> Result<Option<ChildRecord>, StoreError>;

    /// Sets the status of the child `reference` (no change when there is no such child).
    ///
    /// # Errors
    /// Database failures.
    async fn set_child_status(&self, reference: &str, status: &str) -> Result<(), StoreError>;
}

const COLUMNS: &str = "reference, parent_thread_id, entry, status, arguments, created_by";

fn record_of(row: &Row) -> Result<ChildRecord, StoreError> {
    let corrupt = |e: serde_json::Error| crate::error::corrupt("subagent_children", e);
    let mut entry: SubagentRegistryEntry = serde_json::from_str(&row.text(2)?).map_err(corrupt)?;
    entry.status = row.text(3)?;
    Ok(ChildRecord {
        entry,
        parent_thread_id: row.text(1)?,
        arguments: serde_json::from_str(&row.text(4)?).map_err(corrupt)?,
        created_by: row.opt_text(5)?,
    })
}

#[async_trait]
impl Subagents for Store {
    async fn register_child(
        &self,
        parent_thread: &str,
        entry: &SubagentRegistryEntry,
        arguments: &Value,
        created_by: Option<&str>,
    ) -> Result<ChildRecord, StoreError> {
        if let Some(by) = created_by
            && let Some(record) = self.child_created_by(by).await?
        {
            return Ok(record);
        }
        let json = serde_json::to_string(entry).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.write_now(vec![stmt!(
            "INSERT INTO subagent_children (reference, parent_thread_id, entry, status, arguments, created_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            entry.reference.as_str(),
            parent_thread,
            json,
            entry.status.as_str(),
            arguments.to_string(),
            created_by,
            entry.created_at.unwrap_or_default()
        )])
        .await?;
        Ok(ChildRecord {
            entry: entry.clone(),
            parent_thread_id: parent_thread.to_owned(),
            arguments: arguments.clone(),
            created_by: created_by.map(str::to_owned),
        })
    }

    async fn children(
        &self,
        parent_thread: &str,
    ) -> Result<Vec<SubagentRegistryEntry>, StoreError> {
        let rows = self
            .query(stmt!(
                format!(
                    "SELECT {COLUMNS} FROM subagent_children WHERE parent_thread_id = $1 ORDER BY created_at, position"
                ),
                parent_thread
            ))
            .await?;
        rows.iter()
            .map(|row| record_of(row).map(|r| r.entry))
            .collect()
    }

    async fn child(&self, reference: &str) -> Result<Option<ChildRecord>, StoreError> {
        let rows = self
            .query(stmt!(
                format!("SELECT {COLUMNS} FROM subagent_children WHERE reference = $1"),
                reference
            ))
            .await?;
        rows.first().map(record_of).transpose()
    }

    async fn child_created_by(&self, created_by: &str) -> Result<Option<ChildRecord>, StoreError> {
        let rows = self
            .query(stmt!(
                format!("SELECT {COLUMNS} FROM subagent_children WHERE created_by = $1"),
                created_by
            ))
            .await?;
        rows.first().map(record_of).transpose()
    }

    async fn set_child_status(&self, reference: &str, status: &str) -> Result<(), StoreError> {
        self.write_now(vec![stmt!(
            "UPDATE subagent_children SET status = $1 WHERE reference = $2",
            status,
            reference
        )])
        .await
    }
}
