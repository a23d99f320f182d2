//! Scheduled effects (Standard Agents `scheduleEffect(name, args, delay)` /
//! `getScheduledEffects(name?)` / `removeScheduledEffect(id)`; runtime §2's "a scheduled
//! effect alarm fires"). An effect is a named call with arguments due at a time
//! ([`weft_store::ScheduledEffect`], durable in the store): Weft has no separate effect
//! handlers, so the name is a tool of the thread's agent and firing queues that call on the
//! thread like `queueTool()` — it joins a run in progress before its next model step, or
//! starts a run on an idle thread ([`QueueDriver`]), and runs through the tool pipeline like
//! a call of the model.
//!
//! [`Runtime::schedule_effect`] / [`Runtime::scheduled_effects`] /
//! [`Runtime::remove_scheduled_effect`] manage them; an [`EffectScheduler`] fires them: it
//! sleeps until the next effect is due (at most [`MAX_IDLE`] by default, so effects scheduled by another
//! process are seen), wakes early when this process schedules one, fires at most
//! [`FIRE_BATCH`] due effects a pass, and stops when its shutdown token is cancelled.
//! Firing is exactly once ([`weft_store::ScheduledEffects::fire_effect`]: the effect leaves
//! the schedule and joins the queue in one transaction); a terminated thread's effects are
//! dropped ([`Runtime::terminate`] removes them, and the scheduler drops any it finds on a
//! terminated thread), never fired. A scheduler starting up first hands the threads whose
//! queue holds a fired effect not taken yet (its process died before the run started) to the
//! driver. When the caller's launcher cannot start a thread's run (a server at its limit of
//! runs), the fired call stays queued and the scheduler tries again, waiting twice as long
//! each time (1 s up to 5 min), until a run starts or another run takes the queue.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use weft_store::{QueuedTool, ScheduledEffect, ScheduledEffects as _, Threads as _};

use crate::error::RunError;
use crate::queue_driver::{QueueDriver, QueueRuns, QueueTaken};
use crate::run::Runtime;
use crate::thread_state::TERMINATED_KEY;

/// The longest an [`EffectScheduler`] sleeps before it reads the schedule again.
pub const MAX_IDLE: Duration = Duration::from_secs(5);

/// The most due effects an [`EffectScheduler`] fires in one pass (the rest in the next).
pub const FIRE_BATCH: usize = 64;

/// How long an [`EffectScheduler`] waits after a failed pass (the store unreachable), and
/// first waits before it tries again to start a run a fired effect could not start.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The longest an [`EffectScheduler`] waits between tries to start a thread's run.
const RETRY_AT_MOST: Duration = Duration::from_secs(300);

/// Threads whose queue holds fired work no run could start for (the caller's launcher
/// refused: a server at its limit of runs, a project that does not load), with when to try
/// again and the wait after that (doubling, up to [`RETRY_AT_MOST`]).
#[derive(Debug, Default)]
struct Stranded(std::sync::Mutex<HashMap<String, (tokio::time::Instant, Duration)>>);

impl Stranded {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (tokio::time::Instant, Duration)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `thread`'s run could not start: it is tried again after a wait twice the last.
    fn failed(&self, thread: &str) {
        let mut stranded = self.lock();
        let wait = stranded
            .get(thread)
            .map_or(RETRY_AFTER, |(_, wait)| (*wait * 2).min(RETRY_AT_MOST));
        stranded.insert(
            thread.to_owned(),
            (tokio::time::Instant::now() + wait, wait),
        );
    }

    fn settled(&self, thread: &str) {
        self.lock().remove(thread);
    }

    /// The threads to try again now, and how long until the next one is due after them.
    fn due(&self) -> (Vec<String>, Option<Duration>) {
        let now = tokio::time::Instant::now();
        let stranded = self.lock();
        let due = stranded
            .iter()
            .filter(|(_, (at, _))| *at <= now)
            .map(|(thread, _)| thread.clone())
            .collect();
        let next = stranded
            .values()
            .filter(|(at, _)| *at > now)
            .map(|(at, _)| *at - now)
            .min();
        (due, next)
    }
}

/// Microseconds since the Unix epoch, now.
pub fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

impl Runtime {
    /// Schedules a call of the tool `name` with `arguments` on `thread`, due at `due_at`
    /// (microseconds since the epoch; a time past is due at once). Durable when this returns;
    /// an [`EffectScheduler`] of this process wakes for it.
    ///
    /// # Errors
    /// [`RunError::UnknownThread`]; [`RunError::Terminated`]; [`RunError::Refused`] for an
    /// empty name or arguments that are not a JSON object; storage failures.
    pub async fn schedule_effect(
        &self,
        thread: &str,
        name: &str,
        arguments: Value,
        due_at: i64,
    ) -> Result<ScheduledEffect, RunError> {
        if self.store().thread(thread).await?.is_none() {
            return Err(RunError::UnknownThread(thread.to_owned()));
        }
        self.refuse_terminated(thread).await?;
        if name.trim().is_empty() {
            return Err(RunError::Refused("an effect needs a tool name".into()));
        }
        if !arguments.is_object() {
            return Err(RunError::Refused(format!(
                "the arguments of the effect {name} must be a JSON object"
            )));
        }
        let call = QueuedTool {
            name: name.to_owned(),
            arguments,
        };
        let effect = self.store().schedule_effect(thread, &call, due_at).await?;
        self.schedule_changed().notify_one();
        Ok(effect)
    }

    /// The effects scheduled on `thread`, soonest first; only those named `name` when given
    /// (`getScheduledEffects(name?)`).
    ///
    /// # Errors
    /// [`RunError::UnknownThread`]; storage failures.
    pub async fn scheduled_effects(
        &self,
        thread: &str,
        name: Option<&str>,
    ) -> Result<Vec<ScheduledEffect>, RunError> {
        if self.store().thread(thread).await?.is_none() {
            return Err(RunError::UnknownThread(thread.to_owned()));
        }
        let mut effects = self.store().scheduled_effects(thread).await?;
        if let Some(name) = name {
            effects.retain(|e| e.call.name == name);
        }
        Ok(effects)
    }

    /// Removes the scheduled effect `id`; whether it was still scheduled (one that fired or
    /// was removed before is not).
    ///
    /// # Errors
    /// Storage failures.
    pub async fn remove_scheduled_effect(&self, id: &str) -> Result<bool, RunError> {
        Ok(self.store().remove_scheduled_effect(id).await?)
    }
}

/// A clock in microseconds since the Unix epoch (the wall clock by default; a test's may
/// follow tokio's paused time).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Fires due effects into their threads' queues and has the [`QueueDriver`] start runs for
/// idle threads (see the module docs). One per process that should fire effects (`weft
/// serve` runs one).
///
/// # Examples
///
/// ```no_run
/// # use std::sync::Arc;
/// # use weft_runtime::queue_driver::{QueueDriver, QueueRuns};
/// # use weft_runtime::schedule::EffectScheduler;
/// # async fn demo(runtime: weft_runtime::Runtime, runs: Arc<dyn QueueRuns>) {
/// let shutdown = tokio_util::sync::CancellationToken::new();
/// let scheduler = EffectScheduler::new(QueueDriver::new(runtime), runs);
/// let task = tokio::spawn(scheduler.run(shutdown.clone()));
/// // … until the program stops:
/// shutdown.cancel();
/// task.await.ok();
/// # }
/// ```
pub struct EffectScheduler {
    driver: QueueDriver,
    runs: Arc<dyn QueueRuns>,
    clock: Clock,
    max_idle: Duration,
    stranded: Stranded,
}

impl std::fmt::Debug for EffectScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EffectScheduler").finish_non_exhaustive()
    }
}

impl EffectScheduler {
    /// A scheduler that hands threads to `driver`, which starts their runs with `runs`.
    pub fn new(driver: QueueDriver, runs: Arc<dyn QueueRuns>) -> Self {
        EffectScheduler {
            driver,
            runs,
            clock: Arc::new(now_micros),
            max_idle: MAX_IDLE,
            stranded: Stranded::default(),
        }
    }

    /// The same scheduler sleeping at most `max_idle` between passes (default
    /// [`MAX_IDLE`]).
    #[must_use]
    pub fn with_max_idle(mut self, max_idle: Duration) -> Self {
        self.max_idle = max_idle;
        self
    }

    /// The same scheduler reading time from `clock`.
    #[must_use]
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Fires what is due until `shutdown` is cancelled (then returns at once; an effect being
    /// fired is either fired or still scheduled).
    pub async fn run(self, shutdown: CancellationToken) {
        let changed = self.driver.runtime().schedule_changed().clone();
        self.recover().await;
        loop {
            let wait = match self.fire_due().await {
                Ok(wait) => wait,
                Err(error) => {
                    tracing::warn!(%error, "firing scheduled effects failed; trying again");
                    RETRY_AFTER
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = changed.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One pass: fires the effects due now (at most [`FIRE_BATCH`]) and starts runs for
    /// their idle threads, and tries again to start the runs that could not start before.
    /// Returns how long to sleep before the next pass.
    ///
    /// An effect that cannot be fired (its thread's row cannot be read) is reported and
    /// left scheduled, and the effects after it still fire; the pass then waits a little
    /// before the next.
    ///
    /// # Errors
    /// Storage failures reading the schedule.
    pub async fn fire_due(&self) -> Result<Duration, RunError> {
        let store = self.driver.runtime().store();
        let now = (self.clock)();
        let due = store.due_effects(now, FIRE_BATCH).await?;
        let mut failed = false;
        for effect in &due {
            if let Err(error) = self.fire(effect).await {
                tracing::warn!(%error, effect = %effect.id, thread = %effect.thread_id, "a scheduled effect could not fire; it stays scheduled");
                failed = true;
            }
        }
        let (retry, next_retry) = self.stranded.due();
        for thread in retry {
            self.run_the_queue(&thread).await;
        }
        if due.len() == FIRE_BATCH && !failed {
            return Ok(Duration::ZERO);
        }
        let mut wait = match store.next_effect_due().await? {
            Some(at) => {
                let micros = at.saturating_sub((self.clock)()).max(0);
                Duration::from_micros(u64::try_from(micros).unwrap_or(0))
            }
            None => self.max_idle,
        };
        if failed {
            wait = wait.max(RETRY_AFTER);
        }
        if let Some(retry) = next_retry {
            wait = wait.min(retry);
        }
        Ok(wait.min(self.max_idle))
    }

    /// Has the driver run `thread`'s queue; a run that cannot start is tried again later
    /// (see [`Stranded`]).
    async fn run_the_queue(&self, thread: &str) {
        match self.driver.run_the_queue(thread, &self.runs).await {
            Ok(taken) => {
                self.stranded.settled(thread);
                if let QueueTaken::Started(run) = taken {
                    tracing::info!(%run, %thread, "a run started for a fired effect");
                }
            }
            Err(RunError::Terminated(_)) => self.stranded.settled(thread),
            Err(error) => {
                self.stranded.failed(thread);
                tracing::warn!(%error, %thread, "a fired effect could not start a run; it stays queued and is tried again");
            }
        }
    }

    /// Effects fired before (by a process that died before their runs started) whose calls
    /// still wait in their threads' queues: the driver starts runs for them.
    async fn recover(&self) {
        let threads = match self
            .driver
            .runtime()
            .store()
            .threads_with_fired_effects()
            .await
        {
            Ok(threads) => threads,
            Err(error) => {
                tracing::warn!(%error, "reading fired effects failed");
                return;
            }
        };
        for thread in threads {
            self.run_the_queue(&thread).await;
        }
    }

    async fn fire(&self, effect: &ScheduledEffect) -> Result<(), RunError> {
        let store = self.driver.runtime().store();
        let thread = &effect.thread_id;
        let live = store
            .thread(thread)
            .await?
            .is_some_and(|t| !t.metadata.contains_key(TERMINATED_KEY));
        if !live {
            // A terminated (or deleted) thread takes no work: its effects go.
            store.remove_thread_effects(thread).await?;
            tracing::info!(effect = %effect.id, %thread, "an effect of a terminated thread was dropped");
            return Ok(());
        }
        store.fire_effect(&effect.id).await?;
        self.driver.runtime().wake_inbox(thread);
        tracing::info!(effect = %effect.id, %thread, tool = %effect.call.name, "a scheduled effect fired");
        self.run_the_queue(thread).await;
        Ok(())
    }
}
