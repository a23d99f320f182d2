//! [`ThreadQueue`]: a thread's queue (Standard Agents): messages and tool calls
//! (`queueTool()`, [`QueuedTool`]) queued while one of its runs works, which that run takes,
//! in order, before its next model step. A message leaves the
//! queue only once the step that carries it is checkpointed, so a crash in between loses
//! nothing (the run recognises a message it already took by its id).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{StoreError, corrupt};
use crate::model::now_string;
use crate::sql::{Row, stmt};
use crate::store::Store;

/// A message waiting in a thread's queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedMessage {
    /// Its id (`q-` and 16 hex digits).
    pub id: String,
    /// The thread.
    pub thread_id: String,
    /// The user's text.
    pub text: String,
    /// When it was queued.
    pub created_at: String,
    /// Whether it is a *silent* message (Standard Agents §F): one the runtime queued for the
    /// model (a child's result or failure, queued once with
    /// [`ThreadQueue::queue_message_once`]), not something the user typed. The run carries
    /// the flag into the conversation (message metadata `silent: true`) and user-facing
    /// views do not show it as a user message.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub silent: bool,
    /// A queued tool call (Standard Agents `queueTool()`, queued with
    /// [`ThreadQueue::queue_tool`]) instead of a message: the run takes it as a call of its
    /// next step (`text` is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<QueuedTool>,
}

/// A tool call waiting in a thread's queue (Standard Agents `queueTool()`): the tool's name
/// and its arguments. The run that takes it runs it through the same tool pipeline as a call
/// the model made (validation, policy, approval, the ledger), under the queue entry's id.
///
/// # Examples
///
/// ```
/// let call = weft_store::QueuedTool {
///     name: "support".into(),
///     arguments: serde_json::json!({"message": "A customer asks for a refund"}),
/// };
/// assert_eq!(serde_json::to_value(&call).unwrap()["name"], "support");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedTool {
    /// The tool's name.
    pub name: String,
    /// Its arguments (a JSON object).
    pub arguments: Value,
}

impl QueuedMessage {
    fn from_row(row: &Row) -> Result<Self, StoreError> {
        let tool = match row.opt_text(5)? {
            Some(json) => {
                Some(serde_json::from_str(&json).map_err(|e| corrupt("thread_queue", e))?)
            }
            None => None,
        };
        Ok(QueuedMessage {
            id: row.text(0)?,
            thread_id: row.text(1)?,
            text: row.text(2)?,
            created_at: row.text(3)?,
            silent: row.int(4)? != 0,
            tool,
        })
    }
}

/// Durable per-thread message queues.
///
/// # Examples
///
/// ```
/// # async fn demo() -> Result<(), weft_store::StoreError> {
/// use weft_store::{Store, ThreadQueue as _};
/// let store = Store::open("sqlite::memory:").await?;
/// let queued = store.queue_message("t1", "And in French?").await?;
/// assert_eq!(store.queued("t1").await?, vec![queued.clone()]);
/// store.dequeue("t1", &[queued.id]).await?;
/// assert!(store.queued("t1").await?.is_empty());
/// # Ok(()) }
/// ```
#[async_trait]
pub trait ThreadQueue: Send + Sync {
    /// Queues `text` on `thread` (committed on return).
    ///
    /// # Errors
    /// Database failures.
    async fn queue_message(&self, thread: &str, text: &str) -> Result<QueuedMessage, StoreError>;

    /// Queues a call of the tool `tool` with `arguments` on `thread` (Standard Agents
    /// `queueTool()`; committed on return), in order with the queued messages.
    ///
    /// # Errors
    /// Database failures.
    async fn queue_tool(
        &self,
        thread: &str,
        tool: &QueuedTool,
    ) -> Result<QueuedMessage, StoreError>;

    /// Queues `text` on `thread` under the id `id` unless a message with that id was
    /// queued before (committed on return): a sender that may repeat itself (a child run
    /// replayed after a crash) queues its message once. Returns whether it was queued now.
    /// Such a message is *silent* ([`QueuedMessage::silent`]): the runtime's, not the user's.
    ///
    /// # Errors
    /// Database failures.
    async fn queue_message_once(
        &self,
        thread: &str,
        id: &str,
        text: &str,
    ) -> Result<bool, StoreError>;

    /// The messages queued on `thread`, oldest first.
    ///
    /// # Errors
    /// Database failures.
    async fn queued(&self, thread: &str) -> Result<Vec<QueuedMessage>, StoreError>;

    /// Removes the messages `ids` of `thread` (taken by a run); unknown ids are ignored.
    ///
    /// # Errors
    /// Database failures.
    async fn dequeue(&self, thread: &str, ids: &[String]) -> Result<(), StoreError>;
}

#[async_trait]
impl ThreadQueue for Store {
    async fn queue_message(&self, thread: &str, text: &str) -> Result<QueuedMessage, StoreError> {
        let message = QueuedMessage {
            id: format!("q-{:016x}", fastrand::u64(..)),
            thread_id: thread.to_owned(),
            text: text.to_owned(),
            created_at: now_string(),
            silent: false,
            tool: None,
        };
        self.write_now(vec![stmt!(
            "INSERT INTO thread_queue (id, thread_id, text, created_at) VALUES ($1, $2, $3, $4)",
            message.id.as_str(),
            message.thread_id.as_str(),
            message.text.as_str(),
            message.created_at.as_str()
        )])
        .await?;
        Ok(message)
    }

    async fn queue_tool(
        &self,
        thread: &str,
        tool: &QueuedTool,
    ) -> Result<QueuedMessage, StoreError> {
        let json = serde_json::to_string(tool).map_err(|e| corrupt("thread_queue", e))?;
        let message = QueuedMessage {
            id: format!("q-{:016x}", fastrand::u64(..)),
            thread_id: thread.to_owned(),
            text: String::new(),
            created_at: now_string(),
            silent: false,
            tool: Some(tool.clone()),
        };
        self.write_now(vec![stmt!(
            "INSERT INTO thread_queue (id, thread_id, text, created_at, tool) VALUES ($1, $2, $3, $4, $5)",
            message.id.as_str(),
            message.thread_id.as_str(),
            "",
            message.created_at.as_str(),
            json.as_str()
        )])
        .await?;
        Ok(message)
    }

    async fn queue_message_once(
        &self,
        thread: &str,
        id: &str,
        text: &str,
    ) -> Result<bool, StoreError> {
        let seen = self
            .query(stmt!("SELECT id FROM queue_sent WHERE id = $1", id))
            .await?;
        if !seen.is_empty() {
            return Ok(false);
        }
        let now = now_string();
        self.write_now(vec![
            stmt!(
                "INSERT INTO queue_sent (id, thread_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
                id,
                thread,
                now.as_str()
            ),
            stmt!(
                "INSERT INTO thread_queue (id, thread_id, text, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",
                id,
                thread,
                text,
                now.as_str()
            ),
        ])
        .await?;
        Ok(true)
    }

    async fn queued(&self, thread: &str) -> Result<Vec<QueuedMessage>, StoreError> {
        let rows = self
            .query(stmt!(
                "SELECT q.id, q.thread_id, q.text, q.created_at, \
                 CASE WHEN EXISTS (SELECT 1 FROM queue_sent s WHERE s.id = q.id) THEN 1 ELSE 0 END, q.tool \
                 FROM thread_queue q WHERE q.thread_id = $1 ORDER BY q.position",
                thread
            ))
            .await?;
        rows.iter().map(QueuedMessage::from_row).collect()
    }

    async fn dequeue(&self, thread: &str, ids: &[String]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let stmts = ids
            .iter()
            .map(|id| {
                stmt!(
                    "DELETE FROM thread_queue WHERE thread_id = $1 AND id = $2",
                    thread,
                    id.as_str()
                )
            })
            .collect();
        self.write_now(stmts).await
    }
}
