//! [`QueueDriver`]: queued work on an idle thread forces execution (Standard Agents runtime
//! §2: "If a thread is already executing, new work is queued. If idle, the runtime starts a
//! new execution"). [`Runtime::queue_message`] / [`Runtime::queue_tool`] only make the work
//! durable in the thread's queue; the driver is the component that decides, per thread and
//! under one lock, whether a run in progress takes it (before its next model step) or a new
//! run must start for it, and then starts that run through the caller's [`QueueRuns`] — the
//! runtime does not know which agent, project or caller a thread's next run is for, its
//! driver (`weft serve`, a library program) does. A run the driver started is followed: when
//! it completes with work left in the queue (queued during its last model call), the next run
//! starts for it. The scheduler of effects ([`crate::schedule`]) fires due effects into the
//! queue and hands the thread to the driver the same way.
//!
//! What a run for the queue takes first: a message the user queued is the run's input (the
//! run takes the rest of the queue before its first step); a queued tool call, a fired
//! effect or a silent message (a child's result) is not a user's input, so the run starts
//! with none and its first step takes the queue (the call runs through the tool pipeline, a
//! silent message keeps its flag).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use weft_store::{QueuedMessage, RunStatus, Runs as _, ThreadQueue as _};

use crate::error::RunError;
use crate::ownership::effective_status;
use crate::run::Runtime;

/// An error of a [`QueueRuns`] implementation (returned inside [`RunError::Launch`]).
pub type LaunchError = Box<dyn std::error::Error + Send + Sync>;

/// What a run started for a thread's queue begins with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueInput {
    /// A message the user queued: the run's input. Its spec must name the entry in
    /// [`RunSpec::queued_input`](crate::spec::RunSpec::queued_input), so the message keeps
    /// the entry's id and leaves the queue once the run holds it.
    Message {
        /// The message.
        text: String,
        /// The queue entry's id.
        id: String,
    },
    /// No input: the run's first step takes the queue (a tool call, a fired effect, a
    /// silent message).
    Queue,
}

/// How a driver starts a thread's next run: which agent, project and spec it runs is the
/// driver's (`weft serve` runs the thread's agent of its project as the caller that queued
/// the work). The run must be started on `thread` (an existing thread).
///
/// # Examples
///
/// ```
/// use weft_runtime::queue_driver::{LaunchError, QueueInput, QueueRuns};
/// use weft_runtime::spec::{AgentProgram, Program, RunSpec};
///
/// struct Scripted(weft_runtime::Runtime);
///
/// #[async_trait::async_trait]
/// impl QueueRuns for Scripted {
///     async fn start(&self, thread: &str, input: QueueInput) -> Result<String, LaunchError> {
///         let (text, entry) = match input {
///             QueueInput::Message { text, id } => (text, Some(id)),
///             QueueInput::Queue => (String::new(), None),
///         };
///         let mut spec = RunSpec::new(text, Program::Agent(AgentProgram::new("echo")));
///         spec.queued_input = entry;
///         let handle = self.0.start_on(Some(thread), spec, false).await?;
///         Ok(handle.id().to_owned())
///     }
/// }
/// ```
#[async_trait]
pub trait QueueRuns: Send + Sync {
    /// Starts a run on `thread` beginning with `input`; returns its id once it is started
    /// (not finished).
    ///
    /// # Errors
    /// Whatever keeps the run from starting; the driver reports it as [`RunError::Launch`].
    async fn start(&self, thread: &str, input: QueueInput) -> Result<String, LaunchError>;
}

/// What became of a thread's queue when the driver looked at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueTaken {
    /// Nothing is queued.
    Empty,
    /// A run in progress takes the queue before its next model step: its id when this
    /// process drives it (`None`: another process does).
    Joined(Option<String>),
    /// The thread was idle: this run started for the queue.
    Started(String),
}

/// Per-thread locks, shared by the driver's clones.
type Locks = Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>;

/// Starts runs for the queues of idle threads (see the module docs). Cheap to clone; the
/// clones share their per-thread locks.
///
/// # Examples
///
/// ```no_run
/// # use std::sync::Arc;
/// # use weft_runtime::queue_driver::{QueueDriver, QueueRuns, QueueTaken};
/// # async fn demo(runtime: weft_runtime::Runtime, runs: Arc<dyn QueueRuns>) -> Result<(), weft_runtime::RunError> {
/// let driver = QueueDriver::new(runtime);
/// // Queued on an idle thread, the message starts a run at once.
/// let (_, taken) = driver.queue_message("thread-1", "and in French?", &runs).await?;
/// assert!(matches!(taken, QueueTaken::Started(_)));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct QueueDriver {
    runtime: Runtime,
    locks: Locks,
}

impl QueueDriver {
    /// A driver for the threads of `runtime`.
    pub fn new(runtime: Runtime) -> Self {
        QueueDriver {
            runtime,
            locks: Locks::default(),
        }
    }

    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The lock of `thread`: whoever decides what new work on the thread does (start a run,
    /// join the one in progress) and starts the run holds it, so two such decisions never
    /// race. A driver with other ways to start runs (a server's requests) takes it too.
    pub fn thread_lock(&self, thread: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Locks nobody holds or waits for are dropped now and then, so the map stays small.
        if locks.len() > 1024 {
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        }
        locks.entry(thread.to_owned()).or_default().clone()
    }

    /// The thread's run in progress — driven by this process, or by another live one — if
    /// any.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn active_run(&self, thread: &str) -> Result<Option<String>, RunError> {
        let store = self.runtime.store();
        Ok(store
            .thread_runs(thread)
            .await?
            .into_iter()
            .next()
            .filter(|run| {
                self.runtime.is_live(&run.run_id)
                    || effective_status(store, run) == RunStatus::Running
            })
            .map(|run| run.run_id))
    }

    /// Queues `text` on `thread` ([`Runtime::queue_message`]) and, when the thread is idle,
    /// starts a run for it.
    ///
    /// # Errors
    /// As [`Runtime::queue_message`]; [`RunError::Launch`] when the run cannot start (the
    /// message stays queued).
    pub async fn queue_message(
        &self,
        thread: &str,
        text: &str,
        runs: &Arc<dyn QueueRuns>,
    ) -> Result<(QueuedMessage, QueueTaken), RunError> {
        let lock = self.thread_lock(thread);
        let _guard = lock.lock().await;
        let queued = self.runtime.queue_message(thread, text).await?;
        let taken = self.take_locked(thread, runs).await?;
        Ok((queued, taken))
    }

    /// Queues a call of `tool` on `thread` ([`Runtime::queue_tool`]) and, when the thread is
    /// idle, starts a run for it.
    ///
    /// # Errors
    /// As [`Runtime::queue_tool`]; [`RunError::Launch`] when the run cannot start (the call
    /// stays queued).
    pub async fn queue_tool(
        &self,
        thread: &str,
        tool: &str,
        arguments: Value,
        runs: &Arc<dyn QueueRuns>,
    ) -> Result<(QueuedMessage, QueueTaken), RunError> {
        let lock = self.thread_lock(thread);
        let _guard = lock.lock().await;
        let queued = self.runtime.queue_tool(thread, tool, arguments).await?;
        let taken = self.take_locked(thread, runs).await?;
        Ok((queued, taken))
    }

    /// Starts a run for what waits in `thread`'s queue, unless nothing does or a run is in
    /// progress (which takes it).
    ///
    /// # Errors
    /// Storage failures; [`RunError::Launch`] when the run cannot start (the work stays
    /// queued).
    pub async fn run_the_queue(
        &self,
        thread: &str,
        runs: &Arc<dyn QueueRuns>,
    ) -> Result<QueueTaken, RunError> {
        let lock = self.thread_lock(thread);
        let _guard = lock.lock().await;
        self.take_locked(thread, runs).await
    }

    /// [`QueueDriver::run_the_queue`] for a caller that holds the thread's lock.
    async fn take_locked(
        &self,
        thread: &str,
        runs: &Arc<dyn QueueRuns>,
    ) -> Result<QueueTaken, RunError> {
        let store = self.runtime.store();
        let Some(first) = store.queued(thread).await?.into_iter().next() else {
            return Ok(QueueTaken::Empty);
        };
        if let Some(run) = self.active_run(thread).await? {
            return Ok(QueueTaken::Joined(
                self.runtime.is_live(&run).then_some(run),
            ));
        }
        self.runtime.refuse_terminated(thread).await?;
        let run_id = if first.tool.is_some() || first.silent {
            runs.start(thread, QueueInput::Queue)
                .await
                .map_err(RunError::Launch)?
        } else {
            // The entry stays queued until the run's first checkpoint holds it
            // (`RunSpec::queued_input`): a launch that fails, or a crash, loses nothing.
            let input = QueueInput::Message {
                text: first.text,
                id: first.id,
            };
            runs.start(thread, input).await.map_err(RunError::Launch)?
        };
        self.follow(&run_id, thread, runs);
        Ok(QueueTaken::Started(run_id))
    }

    /// Follows a run of `thread` this process drives: when it completes, the driver runs the
    /// thread's queue again (work queued during its last model call starts the next run). A
    /// driver that starts runs by other means (a request's run) follows them with it.
    pub fn follow(&self, run_id: &str, thread: &str, runs: &Arc<dyn QueueRuns>) {
        let driver = self.clone();
        let (run_id, thread, runs) = (run_id.to_owned(), thread.to_owned(), runs.clone());
        tokio::spawn(async move {
            driver.runtime.settled(&run_id).await;
            let completed = matches!(
                driver.runtime.store().run(&run_id).await,
                Ok(Some(run)) if run.status == RunStatus::Completed
            );
            if !completed {
                return;
            }
            if let Err(error) = Box::pin(driver.run_the_queue(&thread, &runs)).await {
                tracing::warn!(%error, %thread, "the thread's queue could not start a run; it stays queued");
            }
        });
    }
}
