//! Streaming (UAP-1.0 §11): [`AgentStreamEvent`], [`AgentStreamResult`] and the
//! [`EventSink`] strategies and tools emit into.
//!
//! Streaming is an observation mechanism, not a second execution path: every built-in
//! strategy runs the same code for `generate` and `stream`, the only difference being whether
//! the sink forwards events. So `stream(..).result()` yields the same turn and state content
//! as `generate` for the same script (UAP-119).

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_core::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use weft_provider::StreamEvent;

use crate::agent::GenerateResult;
use crate::error::AgentError;
use crate::state::{AgentState, SubagentExecutionTrace};

/// The UAP event types (UAP-1.0 §11.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UapEventType {
    /// A step began.
    StepStart,
    /// A step completed.
    StepEnd,
    /// Reasoning output (ReAct).
    Reasoning,
    /// Tool calls chosen.
    Action,
    /// Tool results observed.
    Observation,
    /// A sub-agent began.
    SubagentStart,
    /// An event forwarded from a sub-agent.
    SubagentEvent,
    /// A sub-agent finished.
    SubagentEnd,
}

impl UapEventType {
    /// Every type, in spec order.
    pub const ALL: [UapEventType; 8] = [
        UapEventType::StepStart,
        UapEventType::StepEnd,
        UapEventType::Reasoning,
        UapEventType::Action,
        UapEventType::Observation,
        UapEventType::SubagentStart,
        UapEventType::SubagentEvent,
        UapEventType::SubagentEnd,
    ];

    /// The wire name (`step_start`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            UapEventType::StepStart => "step_start",
            UapEventType::StepEnd => "step_end",
            UapEventType::Reasoning => "reasoning",
            UapEventType::Action => "action",
            UapEventType::Observation => "observation",
            UapEventType::SubagentStart => "subagent_start",
            UapEventType::SubagentEvent => "subagent_event",
            UapEventType::SubagentEnd => "subagent_end",
        }
    }
}

/// A UAP-level event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UapEvent {
    /// What happened.
    #[serde(rename = "type")]
    pub event_type: UapEventType,
    /// The step it belongs to.
    pub step: u64,
    /// The agent that emitted it.
    pub agent_id: String,
    /// Type-specific data (a JSON object).
    pub data: Value,
}

/// Where an event comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventSource {
    /// The agent layer.
    Uap,
    /// The provider layer (an unchanged UPP `StreamEvent`).
    Upp,
}

/// One event of an agent stream: a UAP event or an unchanged UPP event.
///
/// Serializes as `{"source": "uap", "uap": {type, step, agentId, data}}` or
/// `{"source": "upp", "upp": <StreamEvent>}`.
///
/// # Examples
///
/// ```
/// use weft_agent::{AgentStreamEvent, EventSource, UapEvent, UapEventType};
///
/// let event = AgentStreamEvent::Uap(UapEvent {
///     event_type: UapEventType::StepStart, step: 1, agent_id: "a".into(),
///     data: serde_json::json!({}),
/// });
/// assert_eq!(event.source(), EventSource::Uap);
/// let json = serde_json::to_value(&event)?;
/// assert_eq!(json["uap"]["type"], "step_start");
/// assert_eq!(serde_json::from_value::<AgentStreamEvent>(json)?, event);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum AgentStreamEvent {
    /// An agent-level event.
    Uap(UapEvent),
    /// A provider event, unchanged.
    Upp(StreamEvent),
}

impl AgentStreamEvent {
    /// The source.
    pub fn source(&self) -> EventSource {
        match self {
            AgentStreamEvent::Uap(_) => EventSource::Uap,
            AgentStreamEvent::Upp(_) => EventSource::Upp,
        }
    }

    /// The UAP event, if this is one.
    pub fn uap(&self) -> Option<&UapEvent> {
        match self {
            AgentStreamEvent::Uap(event) => Some(event),
            AgentStreamEvent::Upp(_) => None,
        }
    }

    /// The UPP event, if this is one.
    pub fn upp(&self) -> Option<&StreamEvent> {
        match self {
            AgentStreamEvent::Upp(event) => Some(event),
            AgentStreamEvent::Uap(_) => None,
        }
    }

    /// The UAP type, if this is a UAP event.
    pub fn uap_type(&self) -> Option<UapEventType> {
        self.uap().map(|e| e.event_type)
    }
}

#[derive(Serialize, Deserialize)]
struct EventWire {
    source: EventSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uap: Option<UapEvent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    upp: Option<StreamEvent>,
}

impl Serialize for AgentStreamEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let wire = match self {
            AgentStreamEvent::Uap(e) => EventWire {
                source: EventSource::Uap,
                uap: Some(e.clone()),
                upp: None,
            },
            AgentStreamEvent::Upp(e) => EventWire {
                source: EventSource::Upp,
                uap: None,
                upp: Some(e.clone()),
            },
        };
        wire.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for AgentStreamEvent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = EventWire::deserialize(deserializer)?;
        match (wire.source, wire.uap, wire.upp) {
            (EventSource::Uap, Some(e), _) => Ok(AgentStreamEvent::Uap(e)),
            (EventSource::Upp, _, Some(e)) => Ok(AgentStreamEvent::Upp(e)),
            (source, _, _) => Err(serde::de::Error::custom(format!(
                "an event with source {source:?} must carry the matching field"
            ))),
        }
    }
}

/// Where strategies and tools send events during one execution.
///
/// When the execution is not streamed the sink drops events, but it still collects
/// sub-agent traces (UAP-093), so `generate` and `stream` produce the same state.
#[derive(Clone)]
pub struct EventSink {
    agent_id: Arc<str>,
    tx: Option<mpsc::UnboundedSender<AgentStreamEvent>>,
    step: Arc<AtomicU64>,
    traces: Arc<Mutex<Vec<SubagentExecutionTrace>>>,
}

impl fmt::Debug for EventSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventSink")
            .field("agent_id", &self.agent_id)
            .field("streaming", &self.tx.is_some())
            .field("step", &self.current_step())
            .finish()
    }
}

impl EventSink {
    /// A sink that drops events (non-streaming execution).
    pub fn silent(agent_id: &str) -> Self {
        EventSink {
            agent_id: agent_id.into(),
            tx: None,
            step: Arc::new(AtomicU64::new(0)),
            traces: Arc::default(),
        }
    }

    /// A sink forwarding into `tx`.
    pub fn channel(agent_id: &str, tx: mpsc::UnboundedSender<AgentStreamEvent>) -> Self {
        EventSink {
            tx: Some(tx),
            ..EventSink::silent(agent_id)
        }
    }

    /// Whether events go anywhere.
    pub fn is_streaming(&self) -> bool {
        self.tx.is_some()
    }

    /// The agent id events are stamped with.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// Sends an event (dropped when not streaming or the receiver is gone).
    pub fn emit(&self, event: AgentStreamEvent) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(event);
        }
    }

    /// Sends a UAP event of this agent.
    pub fn emit_uap(&self, event_type: UapEventType, step: u64, data: Value) {
        if self.tx.is_some() {
            self.emit(AgentStreamEvent::Uap(UapEvent {
                event_type,
                step,
                agent_id: self.agent_id.to_string(),
                data,
            }));
        }
    }

    /// Records the step now running (stamped on events emitted by tools).
    pub fn set_step(&self, step: u64) {
        self.step.store(step, Ordering::Relaxed);
    }

    /// The step now running.
    pub fn current_step(&self) -> u64 {
        self.step.load(Ordering::Relaxed)
    }

    /// Keeps a sub-agent trace until the step ends.
    pub fn record_trace(&self, trace: SubagentExecutionTrace) {
        if let Ok(mut traces) = self.traces.lock() {
            traces.push(trace);
        }
    }

    /// Takes the traces recorded since the last call (strategies call this at step end).
    pub fn take_traces(&self) -> Vec<SubagentExecutionTrace> {
        self.traces
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default()
    }
}

type ResultReceiver = oneshot::Receiver<Result<GenerateResult, AgentError>>;

/// A streaming agent run (UAP-1.0 §4.5, §11.1): a [`Stream`] of [`AgentStreamEvent`]s,
/// [`AgentStreamResult::result`] and [`AgentStreamResult::abort`].
///
/// Reading the events is optional. Dropping the value detaches the run: it goes on to the
/// end (checkpoints included); call `abort` first to stop it.
pub struct AgentStreamResult {
    events: mpsc::UnboundedReceiver<AgentStreamEvent>,
    result: Option<ResultReceiver>,
    signal: CancellationToken,
    fallback: AgentState,
}

impl fmt::Debug for AgentStreamResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentStreamResult")
            .field("aborted", &self.signal.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl AgentStreamResult {
    /// Runs `run` on a new task with a streaming sink and returns its stream. Custom
    /// strategies use this to implement [`crate::ExecutionStrategy::stream`]; `fallback` is
    /// the state reported if the task dies without a result.
    pub fn spawn<F, Fut>(
        agent_id: &str,
        signal: CancellationToken,
        fallback: AgentState,
        run: F,
    ) -> Self
    where
        F: FnOnce(EventSink) -> Fut,
        Fut: Future<Output = Result<GenerateResult, AgentError>> + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let (result_tx, result_rx) = oneshot::channel();
        let future = run(EventSink::channel(agent_id, tx));
        tokio::spawn(async move {
            let _ = result_tx.send(future.await);
        });
        AgentStreamResult {
            events: rx,
            result: Some(result_rx),
            signal,
            fallback,
        }
    }

    /// Stops the run: the in-flight model call and tools see the signal, and
    /// [`AgentStreamResult::result`] fails with [`AgentError::Cancelled`] carrying the last
    /// step-boundary state. Nothing half-applied is ever returned.
    pub fn abort(&self) {
        self.signal.cancel();
    }

    /// A token that aborts this run when cancelled.
    pub fn abort_handle(&self) -> CancellationToken {
        self.signal.clone()
    }

    /// Waits for the result. Events not yet read are discarded.
    ///
    /// # Errors
    /// The run's error; [`AgentError::Cancelled`] after [`AgentStreamResult::abort`].
    pub async fn result(mut self) -> Result<GenerateResult, AgentError> {
        match self.result.take() {
            Some(rx) => rx.await.unwrap_or_else(|_| {
                Err(AgentError::Cancelled {
                    state: Box::new(self.fallback.clone()),
                })
            }),
            None => Err(AgentError::Cancelled {
                state: Box::new(self.fallback.clone()),
            }),
        }
    }
}

impl Stream for AgentStreamResult {
    type Item = AgentStreamEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events.poll_recv(cx)
    }
}
