//! Errors of the agent layer: [`AgentError`] for runs and configuration, [`StateError`] for
//! state (de)serialization.
//!
//! Three families stay apart (design/STYLE.md §6): configuration mistakes
//! ([`AgentError::Config`]), run failures (provider errors, failing middleware or plans), and
//! cancellation ([`AgentError::Cancelled`], which hands back the last consistent state).

use weft_provider::UppError;

use crate::checkpoint::CheckpointError;
use crate::state::AgentState;

/// The error of an agent run or of building an agent.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A provider (UPP) error: the model call failed, the tool loop limit was hit, …
    #[error(transparent)]
    Upp(#[from] UppError),
    /// The agent's options are invalid (a developer mistake).
    #[error("invalid agent configuration: {0}")]
    Config(String),
    /// The run was aborted. `state` is the last state reached at a step boundary (the input
    /// state when no step completed): nothing half-applied is in it.
    #[error("the agent run was cancelled")]
    Cancelled {
        /// The last consistent state.
        state: Box<AgentState>,
    },
    /// A middleware failed.
    #[error("middleware {name} failed: {message}")]
    Middleware {
        /// The middleware's name.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// The plan produced by the model is unusable (unknown dependency, cycle, duplicate id).
    #[error("invalid plan: {0}")]
    InvalidPlan(String),
    /// A plan step failed and re-planning is off.
    #[error("plan step {step_id} failed: {reason}")]
    PlanStepFailed {
        /// The failed step.
        step_id: String,
        /// Why it failed.
        reason: String,
        /// The state with the plan showing the failure.
        state: Box<AgentState>,
    },
    /// A custom strategy failed.
    #[error("strategy {name} failed: {message}")]
    Strategy {
        /// The strategy's name.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// State (de)serialization failed.
    #[error(transparent)]
    State(#[from] StateError),
    /// A checkpoint store operation failed (only from explicit store calls: automatic
    /// checkpoint saves never fail a run).
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

impl AgentError {
    /// Whether this is a cancellation.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, AgentError::Cancelled { .. })
    }
}

/// Why a serialized state (or thread tree) was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// Not JSON, or JSON of the wrong shape (with the path and reason from serde).
    #[error("malformed agent state JSON: {0}")]
    Malformed(String),
    /// The `version` field names a version this crate cannot read.
    #[error("unsupported agent state version {found:?} (supported: {supported})")]
    UnsupportedVersion {
        /// The version found.
        found: String,
        /// What is supported.
        supported: &'static str,
    },
    /// The JSON is well formed but breaks an invariant.
    #[error("invalid agent state: {0}")]
    Invalid(String),
    /// The input is larger than the configured limit.
    #[error("agent state JSON is {size} bytes, over the limit of {limit}")]
    TooLarge {
        /// The input size.
        size: usize,
        /// The limit.
        limit: usize,
    },
}
