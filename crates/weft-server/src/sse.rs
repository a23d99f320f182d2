//! Server-sent event streams of a run: the Vercel AI SDK's UI message stream (a chat's
//! assistant message) and the run's own events. Both read the run through
//! `Runtime::follow` — live when this process drives it, from the durable log otherwise —
//! so a client that reconnects, a restarted server and another server process all serve
//! the same stream. Each response has a bounded queue: a slow client holds back its
//! producer, which then reads the run's events back from the log instead of buffering them.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::{HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use tokio::sync::mpsc;
use weft_runtime::event::{EventKind, RunEvent, RunEvents, UiStreamEncoder};
use weft_store::{RunStatus, Runs as _};
use weft_thread::ui_stream::UiChunk;

use crate::config::StreamSettings;
use crate::error::ApiError;
use crate::state::AppState;

/// Events queued for one response before its producer waits for the client.
const QUEUE: usize = 64;

/// The header of a UI message stream.
pub const UI_STREAM_HEADER: &str = "x-vercel-ai-ui-message-stream";

/// How a stream keeps its connection alive every `StreamSettings::ping`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ping {
    /// A comment line (`: ping`): invisible to clients, the only safe kind on a UI message
    /// stream (the AI SDK parses every event's data as a chunk).
    Comment,
    /// A `ping` event with `{}` as its data (ThreadProtocol's heartbeat: a client that sees none
    /// for two intervals treats the stream as dead).
    Event,
}

/// A response streaming `rx`, with a keep-alive every `settings.ping`.
pub(crate) fn respond(
    rx: mpsc::Receiver<Event>,
    settings: StreamSettings,
    ping: Ping,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok(event), rx))
    });
    let keep_alive = KeepAlive::new().interval(settings.ping);
    let keep_alive = match ping {
        Ping::Comment => keep_alive.text("ping"),
        // A `data` line is needed: a browser drops an event without one. `{}` keeps
        // readers that parse every event's data as JSON happy.
        Ping::Event => keep_alive.event(Event::default().event("ping").data("{}")),
    };
    Sse::new(stream).keep_alive(keep_alive)
}

/// What ended a followed run's events.
pub(crate) enum Next {
    Event(Box<RunEvent>),
    /// The run's events ended (after `run_end`, or the run had stopped before).
    End,
    /// No process drives the run any more, yet it never recorded its end (its process died
    /// or nothing came for too long).
    Abandoned,
}

/// A followed run: its events and whether `run_end` was among them.
pub(crate) struct Followed {
    events: RunEvents,
    saw_end: bool,
}

impl Followed {
    pub(crate) fn new(events: RunEvents) -> Self {
        Followed {
            events,
            saw_end: false,
        }
    }
}

/// The next event of `followed`, checking every idle timeout that the run is still driven.
/// Events that end without `run_end` while the run's record still says `running` mean its
/// driver is gone: that is [`Next::Abandoned`], not a normal end.
pub(crate) async fn next(
    state: &AppState,
    followed: &mut Followed,
    run_id: &str,
    first: bool,
) -> Next {
    let settings = state.config().stream;
    let mut waited = Duration::ZERO;
    loop {
        match tokio::time::timeout(settings.idle_timeout, followed.events.next()).await {
            Ok(Some(event)) => {
                if matches!(event.kind, EventKind::RunEnd { .. }) {
                    followed.saw_end = true;
                }
                return Next::Event(Box::new(event));
            }
            Ok(None) if followed.saw_end => {
                // The run's last event is out, its drive is finishing: wait for it, so that
                // a client that reads the thread's status after the stream's end finds it
                // idle, not still busy.
                state.runtime().settled(run_id).await;
                return Next::End;
            }
            Ok(None) => {
                return match state.store().run(run_id).await {
                    Ok(Some(run)) if run.status == RunStatus::Running => Next::Abandoned,
                    _ => Next::End,
                };
            }
            Err(_) => {
                waited += settings.idle_timeout;
                let driven = match state.store().run(run_id).await {
                    Ok(Some(run)) => state.is_running(&run),
                    _ => false,
                };
                if !driven || (first && waited >= settings.stream_timeout) {
                    return Next::Abandoned;
                }
            }
        }
    }
}

/// The UI message stream of `run_id`'s assistant message, from the events after
/// `after_seq`, as `encoder` makes it: `start` … `finish`, then `[DONE]`.
///
/// # Errors
/// 404 for an unknown run.
pub async fn ui_stream(
    state: &AppState,
    run_id: &str,
    after_seq: u64,
    mut encoder: UiStreamEncoder,
) -> Result<Response, ApiError> {
    let mut events = Followed::new(state.runtime().follow(run_id, after_seq).await?);
    let (tx, rx) = mpsc::channel(QUEUE);
    let producer = state.clone();
    let run = run_id.to_owned();
    tokio::spawn(async move {
        let send = |chunks: Vec<UiChunk>| {
            let tx = tx.clone();
            async move {
                for chunk in chunks {
                    let event = Event::default().data(chunk.to_value().to_string());
                    if tx.send(event).await.is_err() {
                        return false;
                    }
                }
                true
            }
        };
        let mut first = true;
        loop {
            match next(&producer, &mut events, &run, first).await {
                Next::Event(event) => {
                    first = false;
                    if !send(encoder.push(&event)).await {
                        // The client went away; the run goes on.
                        return;
                    }
                }
                Next::End => break,
                Next::Abandoned => {
                    let error = UiChunk::Error {
                        error_text: format!(
                            "run {run} is not being driven any more (its process stopped); resume it to go on"
                        ),
                    };
                    if !send(vec![error]).await {
                        return;
                    }
                    break;
                }
            }
        }
        if send(encoder.finish()).await {
            let _ = tx.send(Event::default().data("[DONE]")).await;
        }
    });
    let mut response = respond(rx, state.config().stream, Ping::Comment).into_response();
    response
        .headers_mut()
        .insert(UI_STREAM_HEADER, HeaderValue::from_static("v1"));
    no_buffering(&mut response);
    Ok(response)
}

/// The events of `run_id` after `after_seq` as SSE: `id:` the event's `seq` (so
/// `Last-Event-ID` rejoins where a client left off), `event:` its type, `data:` the
/// `RunEvent` JSON; ends after `run_end`. `map` turns an event into the SSE events sent for
/// it (the run API's stream modes), the default sends it as it is. `ping_events`: keep the
/// connection alive with `ping` events (ThreadProtocol's heartbeat) rather than comments.
///
/// # Errors
/// 404 for an unknown run.
pub async fn run_events(
    state: &AppState,
    run_id: &str,
    after_seq: u64,
    map: impl Fn(&RunEvent) -> Vec<Event> + Send + 'static,
    (first, last): (Vec<Event>, Vec<Event>),
    ping_events: bool,
) -> Result<Response, ApiError> {
    let ping = if ping_events {
        Ping::Event
    } else {
        Ping::Comment
    };
    let mut events = Followed::new(state.runtime().follow(run_id, after_seq).await?);
    let (tx, rx) = mpsc::channel(QUEUE);
    let producer = state.clone();
    let run = run_id.to_owned();
    tokio::spawn(async move {
        for event in first {
            if tx.send(event).await.is_err() {
                return;
            }
        }
        let mut first = true;
        loop {
            match next(&producer, &mut events, &run, first).await {
                Next::Event(event) => {
                    first = false;
                    for sse in map(&event) {
                        if tx.send(sse).await.is_err() {
                            return;
                        }
                    }
                }
                Next::End => break,
                Next::Abandoned => {
                    let data = serde_json::json!({
                        "error": "abandoned",
                        "message": format!("run {run} is not being driven any more (its process stopped)"),
                    });
                    if tx
                        .send(Event::default().event("error").data(data.to_string()))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    break;
                }
            }
        }
        for event in last {
            if tx.send(event).await.is_err() {
                return;
            }
        }
    });
    let mut response = respond(rx, state.config().stream, ping).into_response();
    no_buffering(&mut response);
    Ok(response)
}

/// One run event as it is: `id: seq`, `event: type`, `data: RunEvent`.
pub fn raw_event(event: &RunEvent) -> Vec<Event> {
    let value = serde_json::to_value(event).unwrap_or_default();
    let kind = value["type"].as_str().unwrap_or("event").to_owned();
    vec![
        Event::default()
            .id(event.seq.to_string())
            .event(kind)
            .data(value.to_string()),
    ]
}

pub(crate) fn no_buffering(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
}
