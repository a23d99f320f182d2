//! The agent side of checkpointing: turns a step-end state into a [`Checkpoint`] and saves it
//! without blocking the step.
//!
//! **Invariant:** in `Async` mode the step only spawns a task; serialization and I/O happen
//! on that task (the checkpoint holds the state itself: a clone is O(1)). Saves of one
//! agent are ordered by a sequence number under one async lock: a save that lost the race to a newer one for the same session is skipped, so
//! the store always ends with the newest state. Failures are logged (`tracing::warn!`) and
//! never reach the run (UAP-131, UAP-134, UAP-135).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::Utc;
use tokio::task::JoinHandle;
use weft_provider::{TokenUsage, ToolExecution};

use super::{Checkpoint, CheckpointMetadata, CheckpointMode, CheckpointStore};
use crate::state::{AgentState, new_id};

/// Saves checkpoints for one agent.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    store: Arc<dyn CheckpointStore>,
    mode: CheckpointMode,
    sequence: AtomicU64,
    /// Per session: the sequence number of the last save written. One lock per session, so
    /// saves of different conversations never wait for each other.
    written: Mutex<HashMap<String, Arc<tokio::sync::Mutex<u64>>>>,
    pending: Mutex<Vec<JoinHandle<()>>>,
}

/// What one step-end checkpoint holds besides the state.
#[derive(Debug, Default)]
pub(crate) struct StepRecord {
    pub(crate) completed: Vec<ToolExecution>,
    pub(crate) usage: Option<TokenUsage>,
}

impl Checkpointer {
    pub(crate) fn new(store: Arc<dyn CheckpointStore>, mode: CheckpointMode) -> Self {
        Checkpointer {
            store,
            mode,
            sequence: AtomicU64::new(0),
            written: Mutex::default(),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// Saves `state` for `session_id`: spawned (Async) or awaited (Sync); never fails.
    pub(crate) async fn save(
        &self,
        session_id: &str,
        agent_id: &str,
        state: &AgentState,
        record: StepRecord,
    ) {
        let sequence = self.sequence.fetch_add(1, Ordering::SeqCst) + 1;
        let store = self.store.clone();
        let written = match self.written.lock() {
            Ok(mut sessions) => {
                if sessions.len() > 1024 {
                    // Forget sessions no save is using (their next save starts afresh).
                    sessions.retain(|_, lock| Arc::strong_count(lock) > 1);
                }
                sessions.entry(session_id.to_owned()).or_default().clone()
            }
            Err(_) => Arc::default(),
        };
        let session_id = session_id.to_owned();
        let agent_id = agent_id.to_owned();
        let state = state.clone();
        let job = async move {
            let mut written = written.lock().await;
            if *written >= sequence {
                return;
            }
            let checkpoint = Checkpoint {
                metadata: CheckpointMetadata {
                    session_id: session_id.clone(),
                    checkpoint_id: new_id(),
                    timestamp: Utc::now(),
                    step: state.step(),
                    agent_id,
                },
                state: state.clone(),
                pending_tool_calls: Vec::new(),
                completed_tool_calls: record.completed,
                usage: record.usage,
            };
            match store.save(&session_id, checkpoint).await {
                Ok(()) => *written = sequence,
                Err(error) => {
                    tracing::warn!(session_id = %session_id, step = state.step(), %error, "checkpoint save failed");
                }
            }
        };
        match self.mode {
            CheckpointMode::Sync => job.await,
            CheckpointMode::Async => {
                let handle = tokio::spawn(job);
                if let Ok(mut pending) = self.pending.lock() {
                    pending.retain(|h| !h.is_finished());
                    pending.push(handle);
                }
            }
        }
    }

    /// Waits until every save started so far is done.
    pub(crate) async fn flush(&self) {
        loop {
            let handles: Vec<JoinHandle<()>> = match self.pending.lock() {
                Ok(mut pending) => std::mem::take(&mut *pending),
                Err(_) => return,
            };
            if handles.is_empty() {
                return;
            }
            for handle in handles {
                let _ = handle.await;
            }
        }
    }
}
