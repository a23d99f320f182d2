//! [`RunEvents`]: a live subscription to a run's events that never skips one.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;
use weft_store::{EventLog as _, EventQuery, Runs as _, Store};

use super::{EventKind, RunEvent};

/// A run's events as they happen, in `seq` order, each once.
///
/// Live events travel on a bounded channel; a subscriber that falls behind (or joins late)
/// reads the events it missed back from the run's event log, so nothing is lost and nothing
/// grows without bound. The stream ends after the run's `run_end` event (or when the run's
/// emitter is gone).
///
/// Taken from a [`RunHandle`](crate::RunHandle), the stream is the run's lifeline: **dropping
/// it stops the run** (as Ctrl-C does: resumable) unless [`RunEvents::detach`] was called —
/// a caller that stops listening does not leave tools running unseen.
pub struct RunEvents {
    live: broadcast::Receiver<Arc<RunEvent>>,
    store: Option<Store>,
    run_id: String,
    last: u64,
    backlog: VecDeque<RunEvent>,
    ended: bool,
    stop_on_drop: Option<CancellationToken>,
    /// Set for a run driven by no emitter of this process: how often the log is read again
    /// while the run is running elsewhere.
    poll: Option<Duration>,
    /// Whether the log was read once: a subscriber that joins late gets what was logged
    /// before it joined at once, not when the run's next event comes.
    caught_up: bool,
}

impl std::fmt::Debug for RunEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunEvents")
            .field("run_id", &self.run_id)
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

impl RunEvents {
    pub(crate) fn new(
        live: broadcast::Receiver<Arc<RunEvent>>,
        store: Option<Store>,
        run_id: &str,
        after_seq: u64,
    ) -> Self {
        RunEvents {
            live,
            store,
            run_id: run_id.to_owned(),
            last: after_seq,
            backlog: VecDeque::new(),
            ended: false,
            stop_on_drop: None,
            poll: None,
            caught_up: false,
        }
    }

    /// A stream of a run this process does not drive: the log is read every `interval`
    /// while the run is running (in another process), and the stream ends after `run_end`
    /// or when the run is no longer running and everything logged was handed out.
    pub(crate) fn polling(store: Store, run_id: &str, after_seq: u64, interval: Duration) -> Self {
        // A channel whose sender is gone: every receive reports `Closed` at once.
        let (_, live) = broadcast::channel(1);
        let mut events = RunEvents::new(live, Some(store), run_id, after_seq);
        events.poll = Some(interval);
        events
    }

    /// This stream, stopping the run through `abort` when it is dropped undetached.
    pub(crate) fn stopping(mut self, abort: CancellationToken) -> Self {
        self.stop_on_drop = Some(abort);
        self
    }

    /// Lets the run go on when this stream is dropped.
    pub fn detach(&mut self) {
        self.stop_on_drop = None;
    }

    /// The `seq` of the last event returned (or the one the stream started after).
    pub fn last_seq(&self) -> u64 {
        self.last
    }

    /// The next event; `None` once the run has ended.
    pub async fn next(&mut self) -> Option<RunEvent> {
        loop {
            if let Some(event) = self.backlog.pop_front() {
                return Some(self.hand_out(event));
            }
            if self.ended {
                return None;
            }
            if !self.caught_up {
                self.caught_up = true;
                self.read_back(None).await;
                continue;
            }
            match self.live.recv().await {
                Ok(event) if event.seq <= self.last => {}
                Ok(event) if event.seq == self.last + 1 => {
                    return Some(self.hand_out((*event).clone()));
                }
                // Events before this one are only in the log (joined late, or lagged).
                Ok(event) => {
                    self.read_back(Some(event.seq)).await;
                    self.backlog.push_back((*event).clone());
                }
                Err(RecvError::Lagged(_)) => self.read_back(None).await,
                Err(RecvError::Closed) => {
                    self.read_back(None).await;
                    if let Some(interval) = self.poll
                        && self.backlog.is_empty()
                    {
                        if self.running_elsewhere().await {
                            tokio::time::sleep(interval).await;
                        } else {
                            // One last read: the run may have logged its end since.
                            self.read_back(None).await;
                            self.ended = true;
                        }
                    } else if self.poll.is_none() {
                        self.ended = true;
                    }
                }
            }
        }
    }

    fn hand_out(&mut self, event: RunEvent) -> RunEvent {
        self.last = event.seq;
        if matches!(event.kind, EventKind::RunEnd { .. }) {
            self.ended = true;
            self.backlog.clear();
            // The run is over: dropping the stream stops nothing.
            self.stop_on_drop = None;
        }
        event
    }

    /// Whether another process is driving the run now (its record says running and its
    /// owner is alive).
    async fn running_elsewhere(&self) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        match store.run(&self.run_id).await {
            Ok(Some(record)) => {
                crate::ownership::effective_status(store, &record) == weft_store::RunStatus::Running
            }
            Ok(None) => false,
            Err(error) => {
                tracing::warn!(%error, "reading a followed run's record failed");
                false
            }
        }
    }

    /// Queues the logged events after the last one handed out (before `until`, if given).
    async fn read_back(&mut self, until: Option<u64>) {
        let Some(store) = &self.store else {
            return;
        };
        let query = EventQuery {
            run_id: Some(self.run_id.clone()),
            after_seq: Some(self.last),
            limit: until.map(|until| until.saturating_sub(self.last + 1)),
            ..EventQuery::default()
        };
        match store.events(&query).await {
            Ok(records) => self.backlog.extend(
                records
                    .into_iter()
                    .filter(|r| until.is_none_or(|until| r.seq < until))
                    .map(RunEvent::from_record),
            ),
            Err(error) => tracing::warn!(%error, "reading a run's events back failed"),
        }
    }
}

impl Drop for RunEvents {
    fn drop(&mut self) {
        if let Some(abort) = &self.stop_on_drop {
            abort.cancel();
        }
    }
}
