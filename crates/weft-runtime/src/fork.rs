//! Forks: a new thread that starts from any checkpoint of another (RUNTIME.md "Threads and
//! runs": a fork creates a new thread linked to its origin). The new thread's first
//! checkpoint is the chosen checkpoint's state (a step end or a tool result) with the new
//! thread's session id; the thread record names its parent and the checkpoint it came from.
//! Runs then go on from it with [`crate::Runtime::start_on`] (`weft run --continue`).

use serde::Serialize;
use serde_json::{Value, json};
use weft_store::{Runs as _, Store, ThreadRecord, Threads as _, new_id};

use crate::error::RunError;

/// Where a fork starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForkPoint {
    /// The origin's latest checkpoint.
    Latest,
    /// The checkpoint with this ordinal in the origin thread (`weft checkpoints list`).
    Ordinal(u64),
    /// The checkpoint with this id.
    Id(String),
}

/// A new thread made by [`fork`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fork {
    /// The new thread.
    pub thread_id: String,
    /// The thread it was forked from.
    pub origin_thread_id: String,
    /// The checkpoint it starts from.
    pub checkpoint_id: String,
    /// That checkpoint's ordinal in the origin.
    pub checkpoint_step: u64,
    /// Messages the new thread starts with.
    pub messages: u64,
}

/// Forks `origin` (a thread id, or a run id whose thread is meant) at `at`.
///
/// # Errors
/// [`RunError::UnknownThread`] when neither a thread nor a run has that id, or the checkpoint
/// is not one of the origin's; storage failures.
pub async fn fork(store: &Store, origin: &str, at: &ForkPoint) -> Result<Fork, RunError> {
    // Every write commits before this returns (a command exits right after).
    let store = &store.with_durability(weft_store::Durability::Sync);
    let thread = match store.thread(origin).await? {
        Some(thread) => thread.id,
        None => match store.run(origin).await? {
            Some(run) => run.thread_id,
            None => return Err(RunError::UnknownThread(origin.to_owned())),
        },
    };
    let checkpoint = match at {
        ForkPoint::Latest => store.latest_checkpoint(&thread).await?,
        ForkPoint::Ordinal(step) => store.checkpoint_at(&thread, *step).await?,
        ForkPoint::Id(id) => {
            let ordinal = store
                .list_checkpoints(&thread)
                .await?
                .into_iter()
                .find(|c| &c.id == id)
                .map(|c| c.step);
            match ordinal {
                Some(step) => store.checkpoint_at(&thread, step).await?,
                None => None,
            }
        }
    };
    let Some(stored) = checkpoint else {
        return Err(RunError::UnknownThread(format!(
            "{thread} has no checkpoint {}",
            match at {
                ForkPoint::Latest => "at all".to_owned(),
                ForkPoint::Ordinal(step) => step.to_string(),
                ForkPoint::Id(id) => id.clone(),
            }
        )));
    };
    let new_thread = new_id();
    let mut record = ThreadRecord::new(&new_thread);
    record.parent_thread_id = Some(thread.clone());
    record.metadata.insert(
        "forkedFrom".into(),
        json!({"thread": thread, "checkpoint": stored.summary.id, "step": stored.summary.step}),
    );
    store.put_thread(&record).await?;
    let mut checkpoint = stored.checkpoint;
    checkpoint.metadata.session_id = new_thread.clone();
    checkpoint.metadata.checkpoint_id = new_id();
    checkpoint.metadata.timestamp = chrono::Utc::now();
    checkpoint.state = checkpoint.state.with_metadata(
        weft_agent::SESSION_ID_KEY,
        Value::String(new_thread.clone()),
    );
    let messages = u64::try_from(checkpoint.state.message_count()).unwrap_or(u64::MAX);
    store.save_checkpoint(&new_thread, &checkpoint).await?;
    store.flush().await?;
    Ok(Fork {
        thread_id: new_thread,
        origin_thread_id: thread,
        checkpoint_id: stored.summary.id,
        checkpoint_step: stored.summary.step,
        messages,
    })
}
