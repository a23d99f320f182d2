//! [`Emitter`]: numbers a run's events, writes them to the event log in order (text deltas
//! coalesced) and hands them to live subscribers.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use tokio::sync::{Mutex, broadcast};
use weft_store::{EventLog as _, NewEvent, Store};

use super::{AgentPath, EventKind, RunEvent, RunEvents, Side};

/// Text deltas are stored (and published) at most this long after they arrive…
const COALESCE_TIME: Duration = Duration::from_millis(100);
/// …or once this much text has gathered.
const COALESCE_BYTES: usize = 4 * 1024;
/// Live events a subscriber may fall behind by before it reads back from the log.
pub(crate) const LIVE_CAPACITY: usize = 1024;

/// Numbers, stores and publishes one run's events (see the module docs of
/// [`event`](crate::event)). Cloning shares it.
///
/// Events are written in `seq` order: the next event waits until the one before is written
/// (queued, in `async` durability), so a reader of the log after `seq` N never finds a gap
/// that fills in later. A text or reasoning delta is held until about 100 ms have passed
/// since the last one was published, 4 KB have gathered, or another event comes: the first
/// delta after a pause goes out at once. A failed write is logged, never fails the run.
///
/// # Examples
///
/// ```
/// use weft_runtime::event::{AgentPath, Emitter, EventKind};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
/// let emitter = Emitter::live("run-1");
/// let mut events = emitter.subscribe(0);
/// emitter.emit(&AgentPath::root("main"), 1, None, EventKind::Error { message: "boom".into(), reason: None }).await;
/// drop(emitter);
/// let first = events.next().await.expect("an event");
/// assert_eq!((first.seq, first.kind.clone()), (1, EventKind::Error { message: "boom".into(), reason: None }));
/// # });
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Emitter {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Emitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter")
            .field("run_id", &self.inner.run_id)
            .finish_non_exhaustive()
    }
}

struct Inner {
    run_id: String,
    thread_id: String,
    store: Option<Store>,
    live: broadcast::Sender<Arc<RunEvent>>,
    /// The numbering, held while an event is written (events are written in order).
    state: Mutex<State>,
    /// Deltas gathered and not yet written: filled without waiting (also from synchronous
    /// code on the task that produces them), drained in order before every other event.
    gather: std::sync::Mutex<Gather>,
}

struct State {
    /// The next event's number (`None`: not read from the log yet).
    next: Option<u64>,
}

#[derive(Default)]
struct Gather {
    /// Blocks that ended (another block or agent began) and wait to be written.
    closed: Vec<Pending>,
    /// The block being gathered.
    open: Option<Pending>,
    /// When deltas were last written (the next one after a pause goes out at once).
    last_written: Option<Instant>,
    /// A task will write what is gathered.
    scheduled: bool,
}

/// Deltas being gathered: one block of one agent's text or reasoning.
struct Pending {
    agent: AgentPath,
    turn: u64,
    side: Option<Side>,
    reasoning: bool,
    text: String,
}

impl Emitter {
    /// The emitter of `run_id` on `thread_id`: events are written to `store`, numbered on
    /// from the last one its log holds, and published on `live` (made with
    /// [`Emitter::channel`]). One emitter per run at a time: the run's owner.
    pub fn new(
        store: Store,
        run_id: &str,
        thread_id: &str,
        live: broadcast::Sender<Arc<RunEvent>>,
    ) -> Self {
        Self::build(Some(store), run_id, thread_id, live)
    }

    /// An emitter that stores nothing (a session outside a durable run): events are only
    /// published. A subscriber that falls behind by more than the channel holds misses
    /// events (it sees the gap in `seq`).
    pub fn live(run_id: &str) -> Self {
        Self::build(None, run_id, "", Self::channel())
    }

    /// The bounded channel live events travel on.
    pub fn channel() -> broadcast::Sender<Arc<RunEvent>> {
        broadcast::channel(LIVE_CAPACITY).0
    }

    fn build(
        store: Option<Store>,
        run_id: &str,
        thread_id: &str,
        live: broadcast::Sender<Arc<RunEvent>>,
    ) -> Self {
        let next = if store.is_some() { None } else { Some(1) };
        Emitter {
            inner: Arc::new(Inner {
                run_id: run_id.to_owned(),
                thread_id: thread_id.to_owned(),
                store,
                live,
                state: Mutex::new(State { next }),
                gather: std::sync::Mutex::new(Gather::default()),
            }),
        }
    }

    /// The run.
    pub fn run_id(&self) -> &str {
        &self.inner.run_id
    }

    /// A live subscription to the events after `after_seq` (earlier ones still in the log
    /// are read from it first).
    pub fn subscribe(&self, after_seq: u64) -> RunEvents {
        RunEvents::new(
            self.inner.live.subscribe(),
            self.inner.store.clone(),
            &self.inner.run_id,
            after_seq,
        )
    }

    /// Emits an event of `agent` at `turn` (about `tool_call_id`, if any).
    pub async fn emit(
        &self,
        agent: &AgentPath,
        turn: u64,
        tool_call_id: Option<&str>,
        kind: EventKind,
    ) {
        let kind = match self.gather(agent, turn, kind) {
            Ok(true) => return self.flush_pending().await,
            Ok(false) => return,
            Err(kind) => kind,
        };
        let mut state = self.inner.state.lock().await;
        self.drain(&mut state).await;
        self.write(&mut state, agent, turn, tool_call_id, kind)
            .await;
    }

    /// Gathers a text or reasoning delta without waiting: for code that cannot wait, on the
    /// task producing the deltas (a model's stream), so that they are logged before anything
    /// that task emits next. Other kinds are ignored.
    pub fn push_delta(&self, agent: &AgentPath, turn: u64, kind: EventKind) {
        if let Ok(true) = self.gather(agent, turn, kind) {
            self.schedule(Duration::ZERO);
        }
    }

    /// Adds a delta to what is gathered; `Ok(true)` when it is due to be written now, `Err`
    /// with the kind when it is not a delta.
    fn gather(&self, agent: &AgentPath, turn: u64, kind: EventKind) -> Result<bool, EventKind> {
        let (text, side, reasoning) = match kind {
            EventKind::TextDelta { text, side } => (text, side, false),
            EventKind::ReasoningDelta { text, side } => (text, side, true),
            other => return Err(other),
        };
        let Ok(mut gather) = self.inner.gather.lock() else {
            return Ok(false);
        };
        match &mut gather.open {
            Some(open)
                if open.reasoning == reasoning
                    && open.side == side
                    && open.turn == turn
                    && open.agent == *agent =>
            {
                open.text.push_str(&text);
            }
            _ => {
                let block = Pending {
                    agent: agent.clone(),
                    turn,
                    side,
                    reasoning,
                    text,
                };
                if let Some(closed) = gather.open.replace(block) {
                    gather.closed.push(closed);
                }
            }
        }
        let due = gather
            .last_written
            .is_none_or(|at| at.elapsed() >= COALESCE_TIME)
            || gather
                .open
                .as_ref()
                .is_some_and(|p| p.text.len() >= COALESCE_BYTES);
        if !due && !gather.scheduled {
            // Written by a timer if nothing else comes first.
            gather.scheduled = true;
            drop(gather);
            self.schedule(COALESCE_TIME);
        }
        Ok(due)
    }

    /// Writes what is gathered after `delay`, on a task of its own.
    fn schedule(&self, delay: Duration) {
        let emitter = self.clone();
        tokio::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            emitter.flush_pending().await;
        });
    }

    /// Writes out the gathered deltas (at the end of a run, before its last event).
    pub async fn flush_pending(&self) {
        let mut state = self.inner.state.lock().await;
        self.drain(&mut state).await;
    }

    /// Writes the gathered deltas, in the order they came.
    async fn drain(&self, state: &mut State) {
        let blocks = match self.inner.gather.lock() {
            Ok(mut gather) => {
                let mut blocks = std::mem::take(&mut gather.closed);
                blocks.extend(gather.open.take());
                if !blocks.is_empty() {
                    gather.last_written = Some(Instant::now());
                }
                gather.scheduled = false;
                blocks
            }
            Err(_) => Vec::new(),
        };
        for block in blocks {
            let kind = if block.reasoning {
                EventKind::ReasoningDelta {
                    text: block.text,
                    side: block.side,
                }
            } else {
                EventKind::TextDelta {
                    text: block.text,
                    side: block.side,
                }
            };
            self.write(state, &block.agent, block.turn, None, kind)
                .await;
        }
    }

    async fn write(
        &self,
        state: &mut State,
        agent: &AgentPath,
        turn: u64,
        tool_call_id: Option<&str>,
        kind: EventKind,
    ) {
        let seq = match (state.next, &self.inner.store) {
            (Some(seq), _) => seq,
            (None, Some(store)) => match store.last_event_seq(&self.inner.run_id).await {
                Ok(last) => last + 1,
                Err(error) => {
                    tracing::warn!(%error, "reading the run's last event number failed");
                    1
                }
            },
            (None, None) => 1,
        };
        state.next = Some(seq + 1);
        let timestamp = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let live = self.inner.live.receiver_count() > 0;
        let (event_type, mut payload) = kind.into_parts();
        if let Some(store) = &self.inner.store {
            if live {
                // Subscribers see what the log holds: the payload redacted.
                store.redactor().redact(&mut payload);
            }
            let event = NewEvent {
                event_type: event_type.clone(),
                run_id: self.inner.run_id.clone(),
                thread_id: self.inner.thread_id.clone(),
                agent_id: agent.as_str().to_owned(),
                turn,
                tool_call_id: tool_call_id.map(str::to_owned),
                payload: if live {
                    payload.clone()
                } else {
                    std::mem::take(&mut payload)
                },
                seq: Some(seq),
                timestamp: Some(timestamp.clone()),
            };
            if let Err(error) = store.append_event(event).await {
                tracing::warn!(%error, event_type, "event append failed");
            }
        }
        if live {
            let event = RunEvent {
                seq,
                timestamp,
                run_id: self.inner.run_id.clone(),
                agent: agent.clone(),
                turn,
                tool_call_id: tool_call_id.map(str::to_owned),
                kind: EventKind::from_parts(&event_type, payload),
            };
            // Every subscriber may have gone since: nobody watches then.
            let _ = self.inner.live.send(Arc::new(event));
        }
    }
}
