//! A run and thread API for programs, in the shape the LangGraph SDK clients use
//! (`langgraph-sdk` for Python, `@langchain/langgraph-sdk` for JavaScript): the project's
//! agents are the API's **assistants** ([`assistants`]), Weft threads its **threads**
//! ([`threads`]: state, history by checkpoint, copy from a checkpoint, ThreadProtocol export
//! and import), Weft runs its **runs** ([`runs`]: background, streamed, waited for, joined,
//! cancelled, resumed with decisions keyed by interrupt id; a second message while a run is
//! busy is queued, rejected or interrupts it; `stream.rs` turns run events into the SDK's
//! stream parts). [`openapi`] serves the OpenAPI document,
//! generated from the handlers and [`model`]'s types.
//!
//! Like the rest of the server this holds no run logic: it starts, resumes, decides and stops
//! runs of `weft_runtime::Runtime` and reads their records and events back.

pub mod assistants;
pub mod effects;
pub mod model;
pub mod openapi;
pub mod queue;
pub mod runs;
mod stream;
pub mod threads;
pub mod variables;

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use weft_store::{
    Decisions as _, RunRecord, RunStatus as WeftStatus, Runs as _, StoredCheckpoint, ThreadRecord,
    Threads as _,
};

use crate::error::ApiError;
use crate::state::AppState;
use model::{Interrupt, Thread, ThreadStatus};

/// Declares the API's routes once: the router is built from the list and the OpenAPI test
/// checks every entry of [`ROUTES`] is documented.
macro_rules! api_routes {
    ($($method:ident $path:literal => $handler:path;)*) => {
        /// Every route of the run API, as `(method, path)` (axum's `{param}` syntax, the same
        /// as OpenAPI's).
        pub const ROUTES: &[(&str, &str)] = &[$((stringify!($method), $path)),*];

        /// The run API's routes (merged into the server's router, behind its guard).
        pub(crate) fn router() -> Router<AppState> {
            Router::new()$(.route($path, axum::routing::$method($handler)))*
        }
    };
}

api_routes! {
    get "/openapi.json" => openapi::document;
    post "/assistants/search" => assistants::search;
    post "/assistants/count" => assistants::count;
    get "/assistants/{assistant_id}" => assistants::get;
    post "/threads" => threads::create;
    post "/threads/search" => threads::search;
    post "/threads/count" => threads::count;
    post "/threads/import" => threads::import;
    get "/threads/{thread_id}" => threads::get;
    patch "/threads/{thread_id}" => threads::patch;
    delete "/threads/{thread_id}" => threads::delete;
    get "/threads/{thread_id}/state" => threads::state;
    get "/threads/{thread_id}/state/{checkpoint_id}" => threads::state_at;
    post "/threads/{thread_id}/state/checkpoint" => threads::state_checkpoint;
    post "/threads/{thread_id}/history" => threads::history;
    post "/threads/{thread_id}/copy" => threads::copy;
    get "/threads/{thread_id}/thread-protocol" => threads::export;
    get "/threads/{thread_id}/variables" => variables::get;
    post "/threads/{thread_id}/variables" => variables::set;
    get "/threads/{parent_thread_id}/variables/{request_id}" => variables::request_get;
    post "/threads/{parent_thread_id}/variables/{request_id}" => variables::request_post;
    get "/threads/{thread_id}/thread-state" => threads::thread_state;
    post "/threads/{thread_id}/terminate" => threads::terminate;
    post "/threads/{thread_id}/queue" => queue::queue_tool;
    post "/threads/{thread_id}/effects" => effects::schedule;
    get "/threads/{thread_id}/effects" => effects::list;
    delete "/threads/{thread_id}/effects/{effect_id}" => effects::remove;
    post "/threads/{thread_id}/runs" => runs::create;
    get "/threads/{thread_id}/runs" => runs::list;
    post "/threads/{thread_id}/runs/stream" => runs::stream;
    post "/threads/{thread_id}/runs/wait" => runs::wait;
    get "/threads/{thread_id}/runs/{run_id}" => runs::get;
    get "/threads/{thread_id}/runs/{run_id}/join" => runs::join;
    get "/threads/{thread_id}/runs/{run_id}/stream" => runs::join_stream;
    post "/threads/{thread_id}/runs/{run_id}/cancel" => runs::cancel;
}

/// The metadata key of a thread's queued runs (`multitask_strategy: enqueue`).
pub const QUEUE_KEY: &str = "weftQueue";

/// A JSON body, or `T::default()` for an empty one (the SDK sends none for `copy` and
/// `cancel`).
///
/// # Errors
/// 400 for a body that is not JSON, 422 for JSON of another shape.
pub(crate) fn parse_body<T: DeserializeOwned + Default>(body: &Bytes) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not JSON: {e}")))?;
    if value.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(value).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            format!("the request body is not valid: {e}"),
        )
    })
}

/// The thread `id`'s record.
///
/// # Errors
/// 404 for an unknown thread; storage failures.
pub(crate) async fn thread_record(state: &AppState, id: &str) -> Result<ThreadRecord, ApiError> {
    state
        .store()
        .thread(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no thread {id}")))
}

/// The state `{"messages": [...]}` of a checkpoint (an empty conversation for none).
pub(crate) fn values_of(checkpoint: Option<&StoredCheckpoint>) -> Value {
    let messages = checkpoint
        .map(|c| model::lc_messages(c.checkpoint.state.messages()))
        .unwrap_or_default();
    json!({ "messages": messages })
}

/// The thread's latest state values.
///
/// # Errors
/// Storage failures.
pub(crate) async fn latest_values(state: &AppState, thread: &str) -> Result<Value, ApiError> {
    let latest = state.store().latest_checkpoint(thread).await?;
    Ok(values_of(latest.as_ref()))
}

/// What the thread is doing and the decisions it waits for, from its newest run (and its
/// queue).
///
/// # Errors
/// Storage failures.
pub(crate) async fn thread_status(
    state: &AppState,
    record: &ThreadRecord,
) -> Result<(ThreadStatus, Option<(RunRecord, Vec<Interrupt>)>), ApiError> {
    // Runs waiting in the queue (not those that could not start).
    let queued = record
        .metadata
        .get(QUEUE_KEY)
        .and_then(Value::as_array)
        .is_some_and(|q| q.iter().any(|e| e.get("error").is_none_or(Value::is_null)));
    let Some(latest) = state.latest_run(&record.id).await? else {
        let status = if queued {
            ThreadStatus::Busy
        } else {
            ThreadStatus::Idle
        };
        return Ok((status, None));
    };
    if state.is_running(&latest) || queued {
        return Ok((ThreadStatus::Busy, None));
    }
    Ok(match latest.status {
        WeftStatus::Suspended => {
            let pending = Interrupt::pending(&state.store().decisions(&latest.run_id).await?);
            if pending.is_empty() {
                (ThreadStatus::Idle, None)
            } else {
                (ThreadStatus::Interrupted, Some((latest, pending)))
            }
        }
        WeftStatus::Failed => (ThreadStatus::Error, None),
        _ => (ThreadStatus::Idle, None),
    })
}

/// The API's view of a thread.
///
/// # Errors
/// Storage failures.
pub(crate) async fn thread_view(
    state: &AppState,
    record: ThreadRecord,
) -> Result<Thread, ApiError> {
    let (status, waiting) = thread_status(state, &record).await?;
    let values = latest_values(state, &record.id).await?;
    let interrupts = waiting
        .map(|(run, pending)| [(run.run_id, pending)].into_iter().collect())
        .unwrap_or_default();
    Ok(Thread {
        thread_id: record.id,
        created_at: record.created_at,
        updated_at: record.updated_at,
        metadata: record.metadata,
        status,
        values,
        interrupts,
    })
}

/// Whether `id` names a side-B conversation rather than a thread.
pub(crate) fn is_side_key(id: &str) -> bool {
    id.ends_with(".sideB")
}

/// The agent `assistant_id` names (its name), or the default agent.
///
/// # Errors
/// 404 for an unknown agent; 400 when none is named and the project has no default.
pub(crate) fn agent_name(state: &AppState, assistant_id: Option<&str>) -> Result<String, ApiError> {
    Ok(state.agent(assistant_id)?.name.clone())
}

/// Reads a run of `thread`.
///
/// # Errors
/// 404 when the run is unknown or on another thread; storage failures.
pub(crate) async fn run_of_thread(
    state: &AppState,
    thread: &str,
    run_id: &str,
) -> Result<Option<RunRecord>, ApiError> {
    match state.store().run(run_id).await? {
        Some(run) if run.thread_id == thread => Ok(Some(run)),
        Some(_) => Err(ApiError::not_found(format!(
            "run {run_id} is not a run of thread {thread}"
        ))),
        None => Ok(None),
    }
}
