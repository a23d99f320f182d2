//! [`RunError`]: why a run could not be started, resumed or finished.

use weft_store::StoreError;

/// Why a run could not be started, resumed or driven to its end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run does not exist.
    #[error("run {0:?} not found")]
    UnknownRun(String),
    /// The run's budget cannot be enforced (a cost limit without prices): not started.
    #[error("{0}")]
    Budget(String),
    /// The run may not start (a required variable has no value): not started, nothing
    /// recorded (exit code 2).
    #[error("{0}")]
    Refused(String),
    /// A run for a thread's queue could not be started (the driver's
    /// [`QueueRuns`](crate::queue_driver::QueueRuns) failed); the work stays queued.
    #[error("a run for the thread's queue could not start: {0}")]
    Launch(#[source] crate::queue_driver::LaunchError),
    /// The thread does not exist.
    #[error("thread {0:?} not found")]
    UnknownThread(String),
    /// The thread was terminated: it takes no new run and no queued message.
    #[error("thread {0:?} was terminated: it takes no new work")]
    Terminated(String),
    /// The run spec names a tool the registry lacks.
    #[error("the run uses tool {0:?}, which this program does not provide")]
    UnknownTool(String),
    /// A tool's configuration is invalid.
    #[error("tool {tool:?}: {message}")]
    ToolConfig {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// The recorded spec cannot be read.
    #[error("run spec of {run}: {message}")]
    Spec {
        /// The run.
        run: String,
        /// What is wrong.
        message: String,
    },
    /// The model reference cannot be resolved, or the agent cannot be built.
    #[error("agent: {0}")]
    Agent(String),
    /// A Standard Agents session run, but this runtime was given no session runner.
    #[error("this program cannot run Standard Agents sessions")]
    NoSessions,
    /// Another live process owns the run (exit code 5).
    #[error(
        "run {run} is being driven by another live process ({owner}); wait for it to end, or stop it first"
    )]
    Owned {
        /// The run.
        run: String,
        /// The owner (`HOST/PID/NONCE`).
        owner: String,
    },
    /// No pending decision matches what was asked (`weft approve` / `weft deny`).
    #[error("{0}")]
    Decision(String),
    /// The OS lock of the run could not be taken.
    #[error("cannot lock the run in {path}: {message}")]
    Lock {
        /// The lock folder.
        path: String,
        /// Why.
        message: String,
    },
}

impl RunError {
    /// The exit code a command reports for this error: 5 when another process owns the
    /// run, 2 for a request that cannot be run as given (no run record is made), else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Owned { .. } | RunError::Store(StoreError::Fenced { .. }) => 5,
            RunError::Budget(_)
            | RunError::Refused(_)
            | RunError::UnknownThread(_)
            | RunError::Terminated(_)
            | RunError::Decision(_) => 2,
            _ => 1,
        }
    }
}
