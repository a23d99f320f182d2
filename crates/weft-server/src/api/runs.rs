//! Runs on a thread: started in the background, streamed, or waited for; listed, read,
//! joined (waiting, or streaming with `Last-Event-ID` = the `seq` of the run's events),
//! cancelled, and resumed with decisions keyed by interrupt id (`command.resume`).
//!
//! **A second message while a run is busy** (`multitask_strategy`): `enqueue` (default) puts
//! it in the thread's queue (Standard Agents): when this server drives the run in progress
//! (same agent), the message joins that run, taken before its next model step, and the answer
//! is that run (`Runtime::queue_message`; had the run been on its last model call, the next
//! run starts for the message when it ends). Otherwise a whole run is queued — answered at
//! once with status `pending` and a run id it keeps, started when the thread's run in
//! progress ends; the queued runs are kept in the thread's metadata (`weftQueue`), so a
//! server that stops with runs queued starts them when it serves again. `reject` answers 409;
//! `interrupt` stops the run in progress (it stays resumable) and starts the new one.
//!
//! **Streams** send `metadata` (`{run_id, thread_id, attempt}`) first, then for each run
//! event the parts of the requested `stream_mode`s, each with `id:` = the event's `seq`:
//! `values` (the whole state at the start and at every checkpoint), `updates` (`{AGENT:
//! {"messages": [...]}}` per step; `{"__interrupt__": [...]}` when the run waits for
//! decisions), `messages-tuple` (`event: messages`, `[message chunk, metadata]` per text
//! delta and tool result) and `messages` (`messages/metadata`, `messages/partial`,
//! `messages/complete`); `error` when the run fails; `end` last.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use weft_runtime::event::EventKind;
use weft_store::{
    DecisionStatus, Decisions as _, EventLog as _, EventQuery, RunStatus as WeftStatus, Runs as _,
    ThreadRecord, Threads as _, Verdict, new_id,
};

use super::model::{self, Interrupt, Run, RunCreate, RunStatus};
use super::stream::{Modes, stream_response};
use super::{QUEUE_KEY, latest_values, parse_body, run_of_thread, thread_record};
use crate::auth::{Caller, Scope};
use crate::config::Busy;
use crate::error::ApiError;
use crate::runs::resume_point;
use crate::sse::{self, Next};
use crate::state::AppState;

/// How often a waiter looks again for a queued run that has not started.
const QUEUED_POLL: Duration = Duration::from_millis(50);

/// A run a request started, resumed or queued.
#[derive(Debug, Clone)]
struct Launched {
    run_id: String,
    thread_id: String,
    /// Its new events come after this `seq`.
    after_seq: u64,
    /// Queued behind the thread's run in progress.
    queued: bool,
    strategy: Busy,
}

/// A queued run, as the thread's metadata keeps it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Queued {
    run_id: String,
    assistant_id: String,
    input: String,
    created_at: String,
    /// Why it could not start, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn queue_of(record: &ThreadRecord) -> Vec<Queued> {
    record
        .metadata
        .get(QUEUE_KEY)
        .and_then(|q| serde_json::from_value(q.clone()).ok())
        .unwrap_or_default()
}

async fn set_queue(state: &AppState, thread: &str, queue: &[Queued]) -> Result<(), ApiError> {
    let Some(mut record) = state.store().thread(thread).await? else {
        return Ok(());
    };
    if queue.is_empty() {
        record.metadata.remove(QUEUE_KEY);
    } else {
        record.metadata.insert(
            QUEUE_KEY.to_owned(),
            serde_json::to_value(queue).unwrap_or_default(),
        );
    }
    record.updated_at = weft_store::now_string();
    state.store().put_thread(&record).await?;
    state.store().flush().await?;
    Ok(())
}

fn queued_run(thread: &str, q: &Queued) -> Run {
    Run {
        run_id: q.run_id.clone(),
        thread_id: thread.to_owned(),
        assistant_id: q.assistant_id.clone(),
        created_at: q.created_at.clone(),
        updated_at: q.created_at.clone(),
        status: if q.error.is_some() {
            RunStatus::Error
        } else {
            RunStatus::Pending
        },
        metadata: json!({"queued": true, "error": q.error}),
        multitask_strategy: Busy::Enqueue,
    }
}

pub(crate) fn strategy_of(text: Option<&str>) -> Result<Busy, ApiError> {
    match text {
        None | Some("enqueue") => Ok(Busy::Enqueue),
        Some("reject") => Ok(Busy::Reject),
        Some("interrupt") => Ok(Busy::Interrupt),
        Some("rollback") => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unsupported",
            "multitask_strategy rollback is not supported: Weft keeps every run; use interrupt",
        )),
        Some(other) => Err(ApiError::bad_request(format!(
            "multitask_strategy must be enqueue, reject or interrupt, not {other:?}"
        ))),
    }
}

/// One answer of `command.resume`.
fn verdict_of(value: &Value) -> Result<Verdict, String> {
    let deny = |reason: Option<&str>| {
        Verdict::Deny(
            reason
                .filter(|r| !r.trim().is_empty())
                .unwrap_or("the user denied this call")
                .to_owned(),
        )
    };
    match value {
        Value::Bool(true) => Ok(Verdict::Approve),
        Value::Bool(false) => Ok(deny(None)),
        Value::String(s) => match s.as_str() {
            "approve" | "approved" | "accept" | "yes" => Ok(Verdict::Approve),
            "deny" | "denied" | "reject" | "no" => Ok(deny(None)),
            other => Err(format!("{other:?} is neither approve nor deny")),
        },
        Value::Object(o) => {
            let reason = o
                .get("reason")
                .or_else(|| o.get("message"))
                .and_then(Value::as_str);
            if let Some(approve) = o.get("approve").and_then(Value::as_bool) {
                return Ok(if approve {
                    Verdict::Approve
                } else {
                    deny(reason)
                });
            }
            match o.get("type").and_then(Value::as_str) {
                Some("approve" | "accept") => Ok(Verdict::Approve),
                Some("reject" | "deny") => Ok(deny(reason)),
                _ => Err(
                    "an answer is {\"approve\": bool, \"reason\"?}, true/false or \"approve\"/\"deny\""
                        .to_owned(),
                ),
            }
        }
        _ => Err(
            "an answer is {\"approve\": bool, \"reason\"?}, true/false or \"approve\"/\"deny\""
                .to_owned(),
        ),
    }
}

/// The answers of `command.resume` for the run's pending decisions: keyed by decision id,
/// or a single answer for the only pending decision.
pub(crate) fn answers(
    resume: &Value,
    pending: &[String],
) -> Result<Vec<(String, Verdict)>, ApiError> {
    let conflict =
        |message: String| ApiError::new(StatusCode::CONFLICT, "decision_refused", message);
    let keyed = match resume {
        Value::Object(o) if o.keys().any(|k| pending.contains(k)) => Some(o),
        Value::Object(o) if o.get("approve").is_none() && o.get("type").is_none() => {
            // Keys, none of them pending.
            let keys: Vec<&str> = o.keys().map(String::as_str).collect();
            return Err(conflict(format!(
                "no pending decision {}; pending: {}",
                keys.join(", "),
                pending.join(", ")
            )));
        }
        _ => None,
    };
    let mut out = Vec::new();
    match keyed {
        Some(map) => {
            for (id, value) in map {
                if !pending.contains(id) {
                    return Err(conflict(format!(
                        "{id:?} is not a pending decision of this thread; pending: {}",
                        pending.join(", ")
                    )));
                }
                let verdict = verdict_of(value)
                    .map_err(|e| ApiError::bad_request(format!("the answer to {id}: {e}")))?;
                out.push((id.clone(), verdict));
            }
        }
        None => {
            let [only] = pending else {
                return Err(ApiError::bad_request(format!(
                    "several decisions are pending ({}): key command.resume by their ids",
                    pending.join(", ")
                )));
            };
            let verdict = verdict_of(resume).map_err(ApiError::bad_request)?;
            out.push((only.clone(), verdict));
        }
    }
    let missing: Vec<&str> = pending
        .iter()
        .filter(|p| !out.iter().any(|(id, _)| id == *p))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(conflict(format!(
            "command.resume must answer every pending decision; unanswered: {}",
            missing.join(", ")
        )));
    }
    Ok(out)
}

/// Starts, resumes or queues the run a request asks for.
async fn launch(
    state: &AppState,
    caller: &Caller,
    thread: &str,
    request: RunCreate,
) -> Result<Launched, ApiError> {
    let strategy = strategy_of(request.multitask_strategy.as_deref())?;
    if let Some(why) = request.unsupported() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unsupported",
            why,
        ));
    }
    let from = request.checkpoint().map(str::to_owned);
    let command = request.command.unwrap_or_default();
    if command.update.is_some() || command.goto.is_some() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unsupported",
            "command.update and command.goto are not supported: Weft's state is the conversation; send input or command.resume",
        ));
    }
    let lock = state.thread_lock(thread);
    let _guard = lock.lock().await;
    if state.store().thread(thread).await?.is_none() {
        if request.if_not_exists.as_deref() == Some("create") {
            if !crate::driver::valid_thread_id(thread) || super::is_side_key(thread) {
                return Err(ApiError::bad_request(format!(
                    "{thread:?} is not a valid thread id"
                )));
            }
            state.store().put_thread(&ThreadRecord::new(thread)).await?;
        } else {
            return Err(ApiError::not_found(format!(
                "no thread {thread} (create it first, or send if_not_exists: create)"
            )));
        }
    }
    if let Some(checkpoint) = from {
        let latest = state.store().latest_checkpoint(thread).await?;
        if latest.is_none_or(|c| c.summary.id != checkpoint) {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unsupported",
                format!(
                    "checkpoint {checkpoint} is not thread {thread}'s latest: a Weft thread is linear; branch from it with POST /threads/{thread}/copy {{\"checkpoint_id\"}} and run on the copy"
                ),
            ));
        }
    }
    let latest = state.latest_run(thread).await?;
    if let Some(resume) = &command.resume {
        if request.input.as_ref().is_some_and(|i| !i.is_null()) {
            return Err(ApiError::bad_request(
                "send either input (a new message) or command.resume (decisions), not both",
            ));
        }
        let Some(run) =
            latest.filter(|r| r.status == WeftStatus::Suspended && !state.is_running(r))
        else {
            return Err(ApiError::conflict(format!(
                "thread {thread} waits for no decision: nothing to resume"
            )));
        };
        let pending: Vec<String> = state
            .store()
            .decisions(&run.run_id)
            .await?
            .into_iter()
            .filter(|d| d.status == DecisionStatus::Pending)
            .map(|d| d.id)
            .collect();
        if pending.is_empty() {
            return Err(ApiError::conflict(format!(
                "run {} waits for no decision",
                run.run_id
            )));
        }
        for (id, verdict) in answers(resume, &pending)? {
            state.runtime().decide(&run.run_id, &id, verdict).await?;
        }
        let started = state.resume_run(caller, &run).await?;
        return Ok(Launched {
            run_id: started.run_id,
            thread_id: started.thread_id,
            after_seq: started.after_seq,
            queued: false,
            strategy,
        });
    }
    let input = request
        .input
        .as_ref()
        .filter(|i| !i.is_null())
        .ok_or_else(|| ApiError::bad_request("send input (a user message) or command.resume"))?;
    let text = model::input_text(input).map_err(ApiError::bad_request)?;
    state.check_input(&text)?;
    let agent = super::agent_name(state, request.assistant_id.as_deref())?;
    if let Some(run) = latest
        .as_ref()
        .filter(|r| r.status == WeftStatus::Suspended && !state.is_running(r))
        && state
            .store()
            .decisions(&run.run_id)
            .await?
            .iter()
            .any(|d| d.status == DecisionStatus::Pending)
    {
        return Err(ApiError::conflict(format!(
            "thread {thread} waits for decisions of run {}: resume it with command.resume first",
            run.run_id
        )));
    }
    let record = thread_record(state, thread).await?;
    let queue = queue_of(&record);
    let waiting = queue.iter().any(|q| q.error.is_none());
    let active = state.active_run(thread).await?;
    if active.is_some() || waiting {
        match strategy {
            Busy::Reject => {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "busy",
                    format!(
                        "thread {thread} is busy{}: multitask_strategy is reject",
                        active
                            .as_ref()
                            .map(|r| format!(" with run {}", r.run_id))
                            .unwrap_or_default()
                    ),
                ));
            }
            Busy::Interrupt => {
                state.stop_thread(thread).await?;
            }
            // The run in progress is driven here, by the same agent, with nothing queued
            // before: the message joins it, taken before its next model step (the thread's
            // queue; if that run was on its last model call, the next run starts for it).
            Busy::Enqueue
                if !waiting
                    && active.as_ref().is_some_and(|run| {
                        state.runtime().is_live(&run.run_id)
                            && run.spec.pointer("/program/agent").and_then(Value::as_str)
                                == Some(agent.as_str())
                    }) =>
            {
                let Some(run) = active else {
                    return Err(ApiError::internal("the run in progress went away"));
                };
                let after_seq = state.store().last_event_seq(&run.run_id).await?;
                state.runtime().queue_message(thread, &text).await?;
                return Ok(Launched {
                    run_id: run.run_id,
                    thread_id: thread.to_owned(),
                    after_seq,
                    queued: false,
                    strategy,
                });
            }
            Busy::Enqueue => {
                let entry = Queued {
                    run_id: new_id(),
                    assistant_id: agent,
                    input: text,
                    created_at: weft_store::now_string(),
                    error: None,
                };
                let mut queue = queue;
                queue.push(entry.clone());
                set_queue(state, thread, &queue).await?;
                tokio::spawn(drain(
                    state.clone(),
                    caller.clone(),
                    thread.to_owned(),
                    entry.run_id.clone(),
                ));
                return Ok(Launched {
                    run_id: entry.run_id,
                    thread_id: thread.to_owned(),
                    after_seq: 0,
                    queued: true,
                    strategy,
                });
            }
        }
    }
    let started = state
        .start_run_as(caller, Some(&agent), thread, text, None, None)
        .await?;
    Ok(Launched {
        run_id: started.run_id,
        thread_id: started.thread_id,
        after_seq: started.after_seq,
        queued: false,
        strategy,
    })
}

/// Starts the queued run `run_id` of `thread` when its turn comes: when no run is in
/// progress on the thread and it heads the queue.
async fn drain(state: AppState, caller: Caller, thread: String, run_id: String) {
    loop {
        if state.closing().is_cancelled() {
            // The server stops: the run stays queued for the next one.
            return;
        }
        if let Ok(Some(active)) = state.active_run(&thread).await {
            tokio::select! {
                () = wait_end(&state, &active.run_id) => {}
                () = state.closing().cancelled() => return,
            }
            continue;
        }
        let lock = state.thread_lock(&thread);
        let guard = lock.lock().await;
        if state.closing().is_cancelled() {
            return;
        }
        let Ok(Some(record)) = state.store().thread(&thread).await else {
            return;
        };
        let mut queue = queue_of(&record);
        let Some(at) = queue.iter().position(|q| q.run_id == run_id) else {
            // Cancelled.
            return;
        };
        let head = queue.iter().position(|q| q.error.is_none());
        if head != Some(at) || matches!(state.active_run(&thread).await, Ok(Some(_))) {
            drop(guard);
            tokio::time::sleep(QUEUED_POLL).await;
            continue;
        }
        let entry = queue.remove(at);
        let started = state
            .start_run_as(
                &caller,
                Some(&entry.assistant_id),
                &thread,
                entry.input.clone(),
                None,
                Some(entry.run_id.clone()),
            )
            .await;
        if let Err(error) = started {
            tracing::warn!(run = %entry.run_id, %error, "a queued run could not start");
            queue.insert(
                at,
                Queued {
                    error: Some(error.message),
                    ..entry
                },
            );
        }
        if let Err(error) = set_queue(&state, &thread, &queue).await {
            tracing::warn!(%error, "the thread's queue could not be saved");
        }
        return;
    }
}

/// Starts the queues a previous server left (called when the server starts).
pub(crate) async fn restart_queues(state: AppState) {
    let Ok(threads) = state.store().threads().await else {
        return;
    };
    let caller = Caller {
        id: "server".into(),
        scope: Scope::Full,
    };
    for record in threads {
        for q in queue_of(&record).into_iter().filter(|q| q.error.is_none()) {
            tokio::spawn(drain(
                state.clone(),
                caller.clone(),
                record.id.clone(),
                q.run_id,
            ));
        }
    }
}

/// The `seq` of the run's last `run_end` before its current (or last) drive, and of its last.
async fn ends(state: &AppState, run_id: &str) -> Result<Vec<u64>, ApiError> {
    Ok(state
        .store()
        .events(&EventQuery {
            run_id: Some(run_id.to_owned()),
            types: vec!["run_end".to_owned()],
            ..EventQuery::default()
        })
        .await?
        .into_iter()
        .map(|e| e.seq)
        .collect())
}

/// Waits until the run's current drive ends (at once when nothing drives it).
async fn wait_end(state: &AppState, run_id: &str) {
    // Where the drive in progress starts, read before asking whether one is: a drive that
    // ends in between still has its `run_end` after this.
    let after = ends(state, run_id)
        .await
        .ok()
        .and_then(|e| e.last().copied())
        .unwrap_or(0);
    let Ok(Some(run)) = state.store().run(run_id).await else {
        return;
    };
    if !state.is_running(&run) {
        return;
    }
    if let Ok(events) = state.runtime().follow(run_id, after).await {
        let mut events = sse::Followed::new(events);
        loop {
            match sse::next(state, &mut events, run_id, false).await {
                Next::Event(event) if matches!(event.kind, EventKind::RunEnd { .. }) => break,
                Next::Event(_) => {}
                Next::End | Next::Abandoned => break,
            }
        }
    }
    // The run has said it ended; its driver lets go of it right after.
    for _ in 0..400 {
        if !state.runtime().is_live(run_id) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until queued run `run_id` has started; `false` when it was cancelled or failed.
pub(super) async fn wait_started(state: &AppState, thread: &str, run_id: &str) -> bool {
    loop {
        if let Ok(Some(_)) = state.store().run(run_id).await {
            return true;
        }
        match state.store().thread(thread).await {
            Ok(Some(record)) => {
                if !queue_of(&record)
                    .iter()
                    .any(|q| q.run_id == run_id && q.error.is_none())
                {
                    // Started meanwhile, or gone.
                    return matches!(state.store().run(run_id).await, Ok(Some(_)));
                }
            }
            _ => return false,
        }
        tokio::time::sleep(QUEUED_POLL).await;
    }
}

/// What a waited-for run leaves: the thread's values, with `__interrupt__` when it waits for
/// decisions and `__error__` when it failed.
async fn final_values(state: &AppState, thread: &str, run_id: &str) -> Result<Value, ApiError> {
    let mut values = latest_values(state, thread).await?;
    if let Some(run) = state.store().run(run_id).await? {
        match run.status {
            WeftStatus::Suspended => {
                let pending = Interrupt::pending(&state.store().decisions(run_id).await?);
                values["__interrupt__"] = serde_json::to_value(pending).unwrap_or_default();
            }
            WeftStatus::Failed => {
                values["__error__"] = json!({
                    "error": "RunError",
                    "message": run.error.unwrap_or_else(|| "the run failed".to_owned()),
                });
            }
            _ => {}
        }
    }
    Ok(values)
}

pub(super) fn content_location(response: &mut Response, thread: &str, run: &str) {
    if let Ok(value) = HeaderValue::from_str(&format!("/threads/{thread}/runs/{run}")) {
        response
            .headers_mut()
            .insert(header::CONTENT_LOCATION, value);
    }
}

async fn run_view(state: &AppState, launched: &Launched) -> Result<Run, ApiError> {
    if launched.queued {
        let record = thread_record(state, &launched.thread_id).await?;
        if let Some(q) = queue_of(&record)
            .iter()
            .find(|q| q.run_id == launched.run_id)
        {
            return Ok(queued_run(&launched.thread_id, q));
        }
    }
    let run = state
        .store()
        .run(&launched.run_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no run {}", launched.run_id)))?;
    Ok(Run::of(&run, state.is_running(&run), launched.strategy))
}

/// `POST /threads/{thread_id}/runs`: starts (or queues, or resumes) a run in the background
/// and answers it at once.
#[utoipa::path(post, operation_id = "runs_create", path = "/threads/{thread_id}/runs", tag = "runs", request_body = RunCreate,
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 200, body = Run),
        (status = 404, description = "No such thread or agent"),
        (status = 409, description = "Busy (reject), or the decisions named are not pending"),
        (status = 422, description = "The agent cannot run, or an unsupported option")))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(thread): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: RunCreate = parse_body(&body)?;
    let launched = launch(&state, &caller, &thread, request).await?;
    let run = run_view(&state, &launched).await?;
    let mut response = Json(run).into_response();
    content_location(&mut response, &launched.thread_id, &launched.run_id);
    Ok(response)
}

/// `POST /threads/{thread_id}/runs/wait`: starts a run and answers the thread's values when
/// it ends (`__interrupt__` when it waits for decisions, `__error__` when it failed).
#[utoipa::path(post, operation_id = "runs_wait", path = "/threads/{thread_id}/runs/wait", tag = "runs", request_body = RunCreate,
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 200, description = "The thread's values when the run ended", body = Object),
        (status = 404, description = "No such thread or agent"),
        (status = 409, description = "Busy (reject), or the decisions named are not pending")))]
pub(crate) async fn wait(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(thread): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: RunCreate = parse_body(&body)?;
    let launched = launch(&state, &caller, &thread, request).await?;
    if launched.queued && !wait_started(&state, &thread, &launched.run_id).await {
        return Err(ApiError::conflict(format!(
            "queued run {} was cancelled or could not start",
            launched.run_id
        )));
    }
    wait_end(&state, &launched.run_id).await;
    let values = final_values(&state, &thread, &launched.run_id).await?;
    let mut response = Json(values).into_response();
    content_location(&mut response, &launched.thread_id, &launched.run_id);
    Ok(response)
}

/// `POST /threads/{thread_id}/runs/stream`: starts a run and streams it (see the module's
/// documentation for the parts).
#[utoipa::path(post, operation_id = "runs_stream", path = "/threads/{thread_id}/runs/stream", tag = "runs", request_body = RunCreate,
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 200, description = "Server-sent events: metadata, the stream modes' parts (id = the run event's seq), end", content_type = "text/event-stream", body = String),
        (status = 404, description = "No such thread or agent"),
        (status = 409, description = "Busy (reject), or the decisions named are not pending")))]
pub(crate) async fn stream(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(thread): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: RunCreate = parse_body(&body)?;
    let modes = Modes::parse(request.stream_mode.as_ref(), Modes::default_for_runs())?;
    let launched = launch(&state, &caller, &thread, request).await?;
    Ok(stream_response(
        &state,
        &launched.thread_id,
        &launched.run_id,
        launched.after_seq,
        modes,
    ))
}

/// The query of `GET …/runs/{run_id}/stream` and `GET …/runs`: `stream_mode` may repeat.
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `GET /threads/{thread_id}/runs/{run_id}/stream`: joins a run's stream — from the event
/// after `Last-Event-ID` when given, else from the start of its current (or last) drive.
#[utoipa::path(get, operation_id = "runs_join_stream", path = "/threads/{thread_id}/runs/{run_id}/stream", tag = "runs",
    params(("thread_id" = String, Path, description = "The thread"),
        ("run_id" = String, Path, description = "The run"),
        ("stream_mode" = Option<Vec<String>>, Query, description = "values, updates, messages, messages-tuple (repeatable; default values, updates and messages-tuple)"),
        ("Last-Event-ID" = Option<String>, Header, description = "The seq of the last event received")),
    responses((status = 200, description = "Server-sent events", content_type = "text/event-stream", body = String),
        (status = 404, description = "No such run on this thread")))]
pub(crate) async fn join_stream(
    State(state): State<AppState>,
    Path((thread, run_id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let pairs = query_pairs(query.as_deref());
    let requested: Vec<Value> = pairs
        .iter()
        .filter(|(k, _)| k == "stream_mode")
        .map(|(_, v)| Value::String(v.clone()))
        .collect();
    let modes = if requested.is_empty() {
        Modes::default_for_join()
    } else {
        Modes::parse(Some(&Value::Array(requested)), Modes::default_for_join())?
    };
    let after = match run_of_thread(&state, &thread, &run_id).await? {
        Some(_) if headers.contains_key("last-event-id") => resume_point(&headers, None),
        Some(run) => {
            // The drive in progress starts after the last `run_end` (read first: a drive that
            // ends in between still has its end after it); a finished run's last drive after
            // the end before its last (read again: the drive may just have ended).
            let before = ends(&state, &run_id).await?;
            if state.is_running(&run) {
                before.last().copied().unwrap_or(0)
            } else {
                let ends = ends(&state, &run_id).await?;
                ends.len().checked_sub(2).map_or(0, |i| ends[i])
            }
        }
        None => {
            let record = thread_record(&state, &thread).await?;
            if !queue_of(&record).iter().any(|q| q.run_id == run_id) {
                return Err(ApiError::not_found(format!("no run {run_id}")));
            }
            resume_point(&headers, None)
        }
    };
    Ok(stream_response(&state, &thread, &run_id, after, modes))
}

/// `GET /threads/{thread_id}/runs`: the thread's runs, queued ones first, then newest first.
#[utoipa::path(get, operation_id = "runs_list", path = "/threads/{thread_id}/runs", tag = "runs",
    params(("thread_id" = String, Path, description = "The thread"),
        ("limit" = Option<usize>, Query, description = "At most this many (default 10)"),
        ("offset" = Option<usize>, Query, description = "Skip this many"),
        ("status" = Option<RunStatus>, Query, description = "Only runs with this status")),
    responses((status = 200, body = [Run]), (status = 404, description = "No such thread")))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Path(thread): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Vec<Run>>, ApiError> {
    let record = thread_record(&state, &thread).await?;
    let pairs = query_pairs(query.as_deref());
    let number = |key: &str, default: usize| -> Result<usize, ApiError> {
        match pairs.iter().find(|(k, _)| k == key) {
            Some((_, v)) => v
                .parse()
                .map_err(|_| ApiError::bad_request(format!("{key} must be a number"))),
            None => Ok(default),
        }
    };
    let (limit, offset) = (number("limit", 10)?, number("offset", 0)?);
    let status: Option<RunStatus> = match pairs.iter().find(|(k, _)| k == "status") {
        Some((_, v)) => Some(
            serde_json::from_value(Value::String(v.clone()))
                .map_err(|_| ApiError::bad_request(format!("unknown run status {v:?}")))?,
        ),
        None => None,
    };
    let stored = state.store().thread_runs(&thread).await?;
    // A queued run that has just started is stored before it leaves the queue.
    let mut runs: Vec<Run> = queue_of(&record)
        .iter()
        .filter(|q| !stored.iter().any(|r| r.run_id == q.run_id))
        .map(|q| queued_run(&thread, q))
        .collect();
    for run in stored {
        runs.push(Run::of(&run, state.is_running(&run), Busy::Enqueue));
    }
    Ok(Json(
        runs.into_iter()
            .filter(|r| status.is_none_or(|s| r.status == s))
            .skip(offset)
            .take(limit)
            .collect(),
    ))
}

async fn find_run(state: &AppState, thread: &str, run_id: &str) -> Result<Run, ApiError> {
    if let Some(run) = run_of_thread(state, thread, run_id).await? {
        return Ok(Run::of(&run, state.is_running(&run), Busy::Enqueue));
    }
    let record = thread_record(state, thread).await?;
    queue_of(&record)
        .iter()
        .find(|q| q.run_id == run_id)
        .map(|q| queued_run(thread, q))
        .ok_or_else(|| ApiError::not_found(format!("no run {run_id} on thread {thread}")))
}

/// `GET /threads/{thread_id}/runs/{run_id}`.
#[utoipa::path(get, operation_id = "runs_get", path = "/threads/{thread_id}/runs/{run_id}", tag = "runs",
    params(("thread_id" = String, Path, description = "The thread"),
        ("run_id" = String, Path, description = "The run")),
    responses((status = 200, body = Run), (status = 404, description = "No such run on this thread")))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path((thread, run_id)): Path<(String, String)>,
) -> Result<Json<Run>, ApiError> {
    Ok(Json(find_run(&state, &thread, &run_id).await?))
}

/// `GET /threads/{thread_id}/runs/{run_id}/join`: waits for the run to end; answers the
/// thread's values (as `…/runs/wait`).
#[utoipa::path(get, operation_id = "runs_join", path = "/threads/{thread_id}/runs/{run_id}/join", tag = "runs",
    params(("thread_id" = String, Path, description = "The thread"),
        ("run_id" = String, Path, description = "The run")),
    responses((status = 200, description = "The thread's values when the run ended", body = Object),
        (status = 404, description = "No such run on this thread")))]
pub(crate) async fn join(
    State(state): State<AppState>,
    Path((thread, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    find_run(&state, &thread, &run_id).await?;
    if !wait_started(&state, &thread, &run_id).await {
        return Err(ApiError::conflict(format!(
            "queued run {run_id} was cancelled or could not start"
        )));
    }
    wait_end(&state, &run_id).await;
    Ok(Json(final_values(&state, &thread, &run_id).await?))
}

/// `POST /threads/{thread_id}/runs/{run_id}/cancel`: stops a run this server drives (it ends
/// `interrupted`, resumable), or takes a queued run off the queue. `?wait=1` waits for the run
/// to record its end.
#[utoipa::path(post, operation_id = "runs_cancel", path = "/threads/{thread_id}/runs/{run_id}/cancel", tag = "runs",
    params(("thread_id" = String, Path, description = "The thread"),
        ("run_id" = String, Path, description = "The run"),
        ("wait" = Option<String>, Query, description = "1/true: wait for the run to end"),
        ("action" = Option<String>, Query, description = "interrupt (default); rollback is not supported")),
    responses((status = 200, description = "The run after cancelling", body = Run),
        (status = 404, description = "No such run on this thread"),
        (status = 409, description = "It is not running, or another process drives it"),
        (status = 422, description = "action=rollback")))]
pub(crate) async fn cancel(
    State(state): State<AppState>,
    Path((thread, run_id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Json<Run>, ApiError> {
    let pairs = query_pairs(query.as_deref());
    let value = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    if value("action").is_some_and(|a| a != "interrupt") {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unsupported",
            "only action=interrupt is supported: Weft keeps every run",
        ));
    }
    let wait = matches!(value("wait"), Some("1" | "true" | "True"));
    let lock = state.thread_lock(&thread);
    let guard = lock.lock().await;
    let Some(run) = run_of_thread(&state, &thread, &run_id).await? else {
        let record = thread_record(&state, &thread).await?;
        let mut queue = queue_of(&record);
        let Some(at) = queue.iter().position(|q| q.run_id == run_id) else {
            return Err(ApiError::not_found(format!(
                "no run {run_id} on thread {thread}"
            )));
        };
        let entry = queue.remove(at);
        set_queue(&state, &thread, &queue).await?;
        let mut view = queued_run(&thread, &entry);
        view.status = RunStatus::Interrupted;
        return Ok(Json(view));
    };
    if !state.is_running(&run) {
        return Err(ApiError::conflict(format!(
            "run {run_id} is not running ({})",
            RunStatus::of(run.status, false).as_str()
        )));
    }
    if !state.runtime().stop(&run_id) {
        return Err(ApiError::conflict(format!(
            "run {run_id} is driven by another process; stop it there"
        )));
    }
    drop(guard);
    if wait {
        wait_end(&state, &run_id).await;
    }
    let run = state.store().run(&run_id).await?.unwrap_or(run);
    Ok(Json(Run::of(&run, state.is_running(&run), Busy::Enqueue)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn resume_answers_are_keyed_by_decision_or_alone_for_one() {
        let pending = vec!["d-1".to_owned(), "d-2".to_owned()];
        let keyed = json!({"d-1": {"approve": true}, "d-2": "deny"});
        let got = answers(&keyed, &pending).unwrap();
        assert_eq!(got.len(), 2);
        assert!(matches!(got[0].1, Verdict::Approve));
        assert!(matches!(got[1].1, Verdict::Deny(_)));
        // Not every pending decision answered: 409.
        let partial = answers(&json!({"d-1": true}), &pending).unwrap_err();
        assert_eq!(partial.status, StatusCode::CONFLICT);
        // An unknown id: 409.
        let unknown = answers(&json!({"d-9": true}), &pending).unwrap_err();
        assert_eq!(unknown.status, StatusCode::CONFLICT);
        // A single answer for the only pending decision.
        let one = answers(
            &json!({"approve": false, "reason": "no"}),
            &["d-1".to_owned()],
        )
        .unwrap();
        assert!(matches!(&one[0].1, Verdict::Deny(r) if r == "no"));
        // A bad answer: 400.
        let bad = answers(&json!({"d-1": 3, "d-2": true}), &pending).unwrap_err();
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn queries_decode_and_repeat() {
        let pairs = query_pairs(Some(
            "stream_mode=values&stream_mode=messages-tuple&x=a%20b+c",
        ));
        assert_eq!(pairs[0], ("stream_mode".into(), "values".into()));
        assert_eq!(pairs[1].1, "messages-tuple");
        assert_eq!(pairs[2].1, "a b c");
    }
}
