//! [`ThreadState`] and termination (Standard Agents threads §1.2, §9; agents §7.13): the
//! read-only view of a thread — `threadId`, `agentId`, `userId`, `createdAt` and
//! `terminated` in microseconds, its child registry — and [`Runtime::terminate`], a soft
//! shutdown: the thread's runs this process drives are stopped, its scheduled effects are
//! dropped and its queue is emptied, the
//! `terminated` timestamp is set (thread metadata [`TERMINATED_KEY`]), its entry in its
//! parent's registry says `terminated`, and from then on the thread takes no new run and no
//! queued message ([`RunError::Terminated`]). The timestamp is durable: a run of the thread
//! that another process drives, and a subagent's child run inside its parent's run, watch
//! for it ([`until_terminated`]) and stop.
//!
//! Thread ids are random (v4) UUIDs, as the spec asks (`crypto.randomUUID()`).

use serde::Serialize;
use weft_store::{
    Runs as _, ScheduledEffects as _, SubagentRegistryEntry, Subagents as _, ThreadQueue as _,
    Threads as _,
};

use crate::error::RunError;
use crate::run::Runtime;

/// The thread metadata key of the termination timestamp (microseconds since the epoch).
pub const TERMINATED_KEY: &str = "terminated";

/// How often a running thread reads whether it was terminated ([`until_terminated`]).
pub const TERMINATION_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// Resolves when `thread` is terminated: its durable `terminated` timestamp, set by
/// [`Runtime::terminate`] in this process or in another one. The thread's record is read
/// every [`TERMINATION_POLL`] (a failed read is tried again at the next one). A run watches
/// its thread with it (a run of another process stops within a poll of the termination),
/// and so does a subagent's child run, which runs inside its parent's run.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(store: weft_store::Store, token: tokio_util::sync::CancellationToken) {
/// tokio::select! {
///     () = weft_runtime::thread_state::until_terminated(&store, "thread-1") => token.cancel(),
///     () = token.cancelled() => {}
/// }
/// # }
/// ```
pub async fn until_terminated(store: &weft_store::Store, thread: &str) {
    loop {
        if let Ok(Some(record)) = store.thread(thread).await
            && record.metadata.contains_key(TERMINATED_KEY)
        {
            return;
        }
        tokio::time::sleep(TERMINATION_POLL).await;
    }
}

/// The thread metadata key of the thread's user (`userId`), when a driver records one.
pub const USER_KEY: &str = "userId";

/// The read-only state of a thread (threads §1.2).
///
/// # Examples
///
/// ```
/// # async fn demo(runtime: weft_runtime::Runtime, thread: &str) -> Result<(), weft_runtime::RunError> {
/// let state = runtime.thread_state(thread).await?;
/// assert_eq!(state.thread_id, thread);
/// assert!(state.terminated.is_none());
/// let ended = runtime.terminate(thread).await?;
/// assert!(ended.terminated.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadState {
    /// The thread's id.
    pub thread_id: String,
    /// The agent that owns it: a subagent's agent, or the agent of its latest run.
    pub agent_id: Option<String>,
    /// Its user, when one was recorded.
    pub user_id: Option<String>,
    /// When it was created, in microseconds since the Unix epoch.
    pub created_at: i64,
    /// Its child registry.
    pub children: Vec<SubagentRegistryEntry>,
    /// When it was terminated (microseconds), or `None` while it is active.
    pub terminated: Option<i64>,
}

impl Runtime {
    /// The state of `thread`.
    ///
    /// # Errors
    /// [`RunError::UnknownThread`]; storage failures.
    pub async fn thread_state(&self, thread: &str) -> Result<ThreadState, RunError> {
        let store = self.store();
        let record = store
            .thread(thread)
            .await?
            .ok_or_else(|| RunError::UnknownThread(thread.to_owned()))?;
        let agent_id = match record.metadata.get(crate::child::SUBAGENT_KEY) {
            Some(agent) => agent.as_str().map(str::to_owned),
            None => store
                .thread_runs(thread)
                .await?
                .last()
                .and_then(|run| crate::spec::RunSpec::from_stored(&run.spec).ok())
                .map(|spec| spec.role().to_owned()),
        };
        let created_at = chrono::DateTime::parse_from_rfc3339(&record.created_at)
            .map(|t| t.timestamp_micros())
            .unwrap_or_default();
        Ok(ThreadState {
            thread_id: record.id.clone(),
            agent_id,
            user_id: record
                .metadata
                .get(USER_KEY)
                .and_then(|u| u.as_str())
                .map(str::to_owned),
            created_at,
            children: store.children(thread).await?,
            terminated: record.metadata.get(TERMINATED_KEY).and_then(|t| t.as_i64()),
        })
    }

    /// Terminates `thread` (see the module docs); a thread terminated before stays as it
    /// was. Returns its state.
    ///
    /// # Errors
    /// [`RunError::UnknownThread`]; storage failures.
    pub async fn terminate(&self, thread: &str) -> Result<ThreadState, RunError> {
        let store = self.store();
        let mut record = store
            .thread(thread)
            .await?
            .ok_or_else(|| RunError::UnknownThread(thread.to_owned()))?;
        if !record.metadata.contains_key(TERMINATED_KEY) {
            record.metadata.insert(
                TERMINATED_KEY.to_owned(),
                serde_json::Value::from(chrono::Utc::now().timestamp_micros()),
            );
            record.updated_at = weft_store::now_string();
            store.put_thread(&record).await?;
        }
        // In-flight work stops (its calls stay pending; nothing runs it again).
        self.stop_thread(thread);
        // Its scheduled effects go before its queue is emptied: one firing now lands in the
        // queue and is emptied with it; none fires after.
        store.remove_thread_effects(thread).await?;
        let queued: Vec<String> = store
            .queued(thread)
            .await?
            .into_iter()
            .map(|q| q.id)
            .collect();
        store.dequeue(thread, &queued).await?;
        store.set_child_status(thread, "terminated").await?;
        self.thread_state(thread).await
    }

    /// Fails with [`RunError::Terminated`] when `thread` was terminated.
    pub(crate) async fn refuse_terminated(&self, thread: &str) -> Result<(), RunError> {
        match self.store().thread(thread).await? {
            Some(record) if record.metadata.contains_key(TERMINATED_KEY) => {
                Err(RunError::Terminated(thread.to_owned()))
            }
            _ => Ok(()),
        }
    }
}
