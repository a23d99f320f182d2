//! Checkpointing (UAP-1.0 §12.4): the [`CheckpointStore`] trait, the [`Checkpoint`] record,
//! and the file reference store [`FileCheckpoints`].
//!
//! The record is a superset of what UAP asks for (the state JSON plus its metadata): it also
//! carries the tool calls completed in the step and the run's usage so far, and a slot for
//! pending calls, which the runtime profile's durable execution needs. A SQL store
//! implements the same trait.
//!
//! **Invariant:** a checkpoint save never blocks a step and never fails a run: the agent
//! hands the save to a spawned task (see `writer.rs`), logs failures with `tracing`, and
//! keeps the order of saves per session (an older save never overwrites a newer one).

mod codec;
mod file;
pub(crate) mod writer;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use weft_provider::{TokenUsage, ToolCall, ToolExecution};

#[cfg(feature = "compression")]
pub use codec::GzipCodec;
pub use codec::{CheckpointCodec, IdentityCodec};
pub use file::{FileCheckpointOptions, FileCheckpoints, file_checkpoints};

use crate::state::AgentState;

/// When a checkpoint save is durable relative to the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CheckpointMode {
    /// Fire and forget (the UAP default): the step goes on at once; failures are logged.
    #[default]
    Async,
    /// The step waits until the save is done (the runtime profile); failures are logged.
    Sync,
}

/// Metadata of a checkpoint (UAP-1.0 §12.4.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointMetadata {
    /// The session (UUIDv4 or user-provided).
    pub session_id: String,
    /// This checkpoint's id (UUIDv4).
    pub checkpoint_id: String,
    /// When it was taken (ISO 8601).
    pub timestamp: DateTime<Utc>,
    /// The step number of the state.
    pub step: u64,
    /// The agent that took it.
    pub agent_id: String,
}

/// One checkpoint: the state and what the runtime needs to resume deterministically.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// Who, when, which step.
    pub metadata: CheckpointMetadata,
    /// The state. It serializes as UAP's `AgentStateJSON`; holding the state itself (not
    /// its JSON form) keeps a save O(1) for the agent and lets a store find what the step
    /// added with [`AgentState::extends`].
    pub state: AgentState,
    /// Tool calls requested but not finished (empty at a UAP step end).
    #[serde(default)]
    pub pending_tool_calls: Vec<ToolCall>,
    /// Tool calls finished in the step that produced this checkpoint.
    #[serde(default)]
    pub completed_tool_calls: Vec<ToolExecution>,
    /// Usage of the run up to this checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
}

/// Why a checkpoint operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The session id cannot name a checkpoint (empty, a path, `..`, control characters).
    #[error("invalid session id {0:?}: use letters, digits, '-', '_' or '.'")]
    InvalidSessionId(String),
    /// File-system failure.
    #[error("checkpoint I/O failed for {path}: {message}")]
    Io {
        /// The file or directory.
        path: String,
        /// The OS error.
        message: String,
    },
    /// The stored checkpoint is not valid.
    #[error("checkpoint {path} is corrupt: {message}")]
    Corrupt {
        /// Where it was read from.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Encoding or decoding (compression, encryption) failed.
    #[error("checkpoint codec {codec} failed: {message}")]
    Codec {
        /// The codec's name.
        codec: String,
        /// What went wrong.
        message: String,
    },
    /// Any other backend failure (for custom stores).
    #[error("checkpoint store failed: {0}")]
    Backend(String),
}

/// Where checkpoints go (UAP-1.0 §12.4.1).
///
/// # Contract
///
/// * `save` replaces the session's latest checkpoint; a reader never sees a partly written
///   one. The agent calls it from a spawned task and never concurrently for one session, but
///   other processes may; stores should stay consistent under concurrent access.
/// * `load` and `load_metadata` return `Ok(None)` for an unknown session.
/// * `delete` of an unknown session is `Ok(())`.
/// * `list` returns every session id with a checkpoint, in any order.
///
/// Any implementation is accepted by `agent()` (UAP-136).
#[async_trait]
pub trait CheckpointStore: Send + Sync + std::fmt::Debug {
    /// Saves the latest checkpoint of `session_id`.
    async fn save(&self, session_id: &str, checkpoint: Checkpoint) -> Result<(), CheckpointError>;

    /// The latest checkpoint of `session_id`.
    async fn load(&self, session_id: &str) -> Result<Option<Checkpoint>, CheckpointError>;

    /// The latest checkpoint's metadata, without the state.
    async fn load_metadata(
        &self,
        session_id: &str,
    ) -> Result<Option<CheckpointMetadata>, CheckpointError>;

    /// Deletes every checkpoint of `session_id`.
    async fn delete(&self, session_id: &str) -> Result<(), CheckpointError>;

    /// Every session id with a checkpoint.
    async fn list(&self) -> Result<Vec<String>, CheckpointError>;
}

/// Checks that a session id is usable as one path component.
///
/// # Errors
/// [`CheckpointError::InvalidSessionId`].
pub fn validate_session_id(session_id: &str) -> Result<(), CheckpointError> {
    let ok = !session_id.is_empty()
        && session_id.len() <= 200
        && session_id != "."
        && session_id != ".."
        && !session_id.starts_with('.')
        && session_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(CheckpointError::InvalidSessionId(session_id.to_owned()))
    }
}
