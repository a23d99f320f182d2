//! Threads: Weft threads with their state (`values` = `{"messages": [...]}`, built from the
//! side-A conversation of a checkpoint), their history (one state per checkpoint, newest
//! first, `checkpoint_id` = the Weft checkpoint id), a copy from any checkpoint (a fork), and
//! ThreadProtocol export and import.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use weft_runtime::RunError;
use weft_runtime::fork::{ForkPoint, fork};
use weft_runtime::import::{ImportError, import_thread};
use weft_runtime::transcript::Transcript;
use weft_store::{CheckpointSummary, ThreadRecord, Threads as _, new_id};

use super::model::{
    Checkpoint, CopyRequest, HistoryRequest, StateRequest, Thread, ThreadCreate, ThreadPatch,
    ThreadSearch, ThreadState, ThreadTask,
};
use super::{is_side_key, model, parse_body, thread_record, thread_status, thread_view, values_of};
use crate::driver::valid_thread_id;
use crate::error::ApiError;
use crate::state::AppState;

/// `POST /threads`: a new thread (`thread_id` chosen or a new UUID).
#[utoipa::path(post, operation_id = "threads_create", path = "/threads", tag = "threads", request_body = ThreadCreate,
    responses((status = 200, body = Thread), (status = 409, description = "It exists (if_exists: raise)")))]
pub(crate) async fn create(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<Thread>, ApiError> {
    let request: ThreadCreate = parse_body(&body)?;
    let id = request.thread_id.unwrap_or_else(new_id);
    if !valid_thread_id(&id) || is_side_key(&id) {
        return Err(ApiError::bad_request(format!(
            "{id:?} is not a valid thread id: use letters, digits, '-', '_', '.' or ':'"
        )));
    }
    let lock = state.thread_lock(&id);
    let _guard = lock.lock().await;
    if let Some(existing) = state.store().thread(&id).await? {
        return match request.if_exists.as_deref() {
            Some("do_nothing") => Ok(Json(thread_view(&state, existing).await?)),
            None | Some("raise") => Err(ApiError::conflict(format!("thread {id} exists"))),
            Some(other) => Err(ApiError::bad_request(format!(
                "if_exists must be raise or do_nothing, not {other:?}"
            ))),
        };
    }
    let mut record = ThreadRecord::new(&id);
    record.metadata = request.metadata.unwrap_or_default();
    record.metadata.remove(super::QUEUE_KEY);
    state.store().put_thread(&record).await?;
    state.store().flush().await?;
    Ok(Json(thread_view(&state, record).await?))
}

/// `GET /threads/{thread_id}`.
#[utoipa::path(get, operation_id = "threads_get", path = "/threads/{thread_id}", tag = "threads",
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 200, body = Thread), (status = 404, description = "No such thread")))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(thread): Path<String>,
) -> Result<Json<Thread>, ApiError> {
    let record = thread_record(&state, &thread).await?;
    Ok(Json(thread_view(&state, record).await?))
}

/// `PATCH /threads/{thread_id}`: merges `metadata` into the thread's.
#[utoipa::path(patch, operation_id = "threads_patch", path = "/threads/{thread_id}", tag = "threads", request_body = ThreadPatch,
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 200, body = Thread), (status = 404, description = "No such thread")))]
pub(crate) async fn patch(
    State(state): State<AppState>,
    Path(thread): Path<String>,
    body: Bytes,
) -> Result<Json<Thread>, ApiError> {
    let request: ThreadPatch = parse_body(&body)?;
    let lock = state.thread_lock(&thread);
    let _guard = lock.lock().await;
    let mut record = thread_record(&state, &thread).await?;
    for (key, value) in request.metadata.unwrap_or_default() {
        if key != super::QUEUE_KEY {
            record.metadata.insert(key, value);
        }
    }
    record.updated_at = weft_store::now_string();
    state.store().put_thread(&record).await?;
    Ok(Json(thread_view(&state, record).await?))
}

/// `DELETE /threads/{thread_id}`: the thread with its runs, checkpoints and logs.
#[utoipa::path(delete, operation_id = "threads_delete", path = "/threads/{thread_id}", tag = "threads",
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 204, description = "Deleted"), (status = 404, description = "No such thread"),
        (status = 409, description = "A run is in progress or queued on it")))]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Path(thread): Path<String>,
) -> Result<StatusCode, ApiError> {
    let lock = state.thread_lock(&thread);
    let _guard = lock.lock().await;
    let record = thread_record(&state, &thread).await?;
    let (status, _) = thread_status(&state, &record).await?;
    if status == model::ThreadStatus::Busy {
        return Err(ApiError::conflict(format!(
            "a run is in progress or queued on thread {thread}: cancel it first"
        )));
    }
    if !state.store().delete_thread(&thread).await? {
        return Err(ApiError::not_found(format!("no thread {thread}")));
    }
    Ok(StatusCode::NO_CONTENT)
}

async fn matching(state: &AppState, search: &ThreadSearch) -> Result<Vec<Thread>, ApiError> {
    let mut records: Vec<ThreadRecord> = state
        .store()
        .threads()
        .await?
        .into_iter()
        .filter(|t| !is_side_key(&t.id))
        .filter(|t| search.ids.as_ref().is_none_or(|ids| ids.contains(&t.id)))
        .filter(|t| {
            search
                .metadata
                .as_ref()
                .is_none_or(|m| m.iter().all(|(k, v)| t.metadata.get(k) == Some(v)))
        })
        .collect();
    let by_created = search.sort_by.as_deref() == Some("created_at");
    records.sort_by(|a, b| {
        if by_created {
            a.created_at.cmp(&b.created_at)
        } else {
            a.updated_at.cmp(&b.updated_at)
        }
    });
    if search.sort_order.as_deref() != Some("asc") {
        records.reverse();
    }
    let mut out = Vec::new();
    for record in records {
        if search.status.is_some() {
            let (status, _) = thread_status(state, &record).await?;
            if Some(status) != search.status {
                continue;
            }
        }
        out.push(record);
    }
    let mut threads = Vec::new();
    for record in out
        .into_iter()
        .skip(search.offset.unwrap_or(0))
        .take(search.limit.unwrap_or(10))
    {
        threads.push(thread_view(state, record).await?);
    }
    Ok(threads)
}

/// `POST /threads/search`.
#[utoipa::path(post, operation_id = "threads_search", path = "/threads/search", tag = "threads", request_body = ThreadSearch,
    responses((status = 200, description = "Matching threads, newest update first", body = [Thread])))]
pub(crate) async fn search(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<Vec<Thread>>, ApiError> {
    let search: ThreadSearch = parse_body(&body)?;
    Ok(Json(matching(&state, &search).await?))
}

/// `POST /threads/count`.
#[utoipa::path(post, operation_id = "threads_count", path = "/threads/count", tag = "threads", request_body = ThreadSearch,
    responses((status = 200, description = "How many threads match", body = usize)))]
pub(crate) async fn count(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<usize>, ApiError> {
    let mut search: ThreadSearch = parse_body(&body)?;
    search.limit = Some(usize::MAX);
    search.offset = None;
    Ok(Json(matching(&state, &search).await?.len()))
}

/// The state of checkpoint `index` of `summaries` (the thread's, oldest first); `latest`
/// adds the decisions the thread waits for.
async fn state_of(
    state: &AppState,
    thread: &ThreadRecord,
    summaries: &[CheckpointSummary],
    index: usize,
) -> Result<ThreadState, ApiError> {
    let summary = &summaries[index];
    let stored = state
        .store()
        .checkpoint_at(&thread.id, summary.step)
        .await?;
    let mut result = ThreadState {
        values: values_of(stored.as_ref()),
        next: Vec::new(),
        checkpoint: Checkpoint::new(&thread.id, &summary.id),
        metadata: json!({
            "step": summary.step,
            "source": if summary.run_id.is_some() { "loop" } else { "input" },
            "run_id": summary.run_id,
            "kind": summary.kind,
            "agent_step": summary.agent_step,
            "agent_id": summary.agent_id,
        }),
        created_at: Some(summary.timestamp.clone()),
        parent_checkpoint: index
            .checked_sub(1)
            .map(|p| Checkpoint::new(&thread.id, &summaries[p].id)),
        tasks: Vec::new(),
        interrupts: Vec::new(),
    };
    if index + 1 == summaries.len()
        && let (_, Some((run, pending))) = thread_status(state, thread).await?
    {
        let agent = model::agent_of(&run);
        result.next = vec![agent.clone()];
        result.tasks = vec![ThreadTask {
            id: run.run_id,
            name: agent,
            error: None,
            interrupts: pending.clone(),
            checkpoint: None,
            state: None,
            result: None,
        }];
        result.interrupts = pending;
    }
    Ok(result)
}

/// The state of an empty thread (no checkpoint yet).
fn empty_state(thread: &str) -> ThreadState {
    ThreadState {
        values: values_of(None),
        next: Vec::new(),
        checkpoint: Checkpoint {
            thread_id: thread.to_owned(),
            checkpoint_ns: String::new(),
            checkpoint_id: None,
            checkpoint_map: None,
        },
        metadata: json!({}),
        created_at: None,
        parent_checkpoint: None,
        tasks: Vec::new(),
        interrupts: Vec::new(),
    }
}

async fn state_by_id(
    state: &AppState,
    thread: &str,
    checkpoint: Option<&str>,
) -> Result<ThreadState, ApiError> {
    let record = thread_record(state, thread).await?;
    let summaries = state.store().list_checkpoints(thread).await?;
    let index = match checkpoint {
        None if summaries.is_empty() => return Ok(empty_state(thread)),
        None => summaries.len() - 1,
        Some(id) => summaries.iter().position(|c| c.id == id).ok_or_else(|| {
            ApiError::not_found(format!("thread {thread} has no checkpoint {id}"))
        })?,
    };
    state_of(state, &record, &summaries, index).await
}

/// `GET /threads/{thread_id}/state`: the latest state, with the decisions it waits for.
#[utoipa::path(get, operation_id = "threads_state", path = "/threads/{thread_id}/state", tag = "threads",
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 200, body = ThreadState), (status = 404, description = "No such thread")))]
pub(crate) async fn state(
    State(state): State<AppState>,
    Path(thread): Path<String>,
) -> Result<Json<ThreadState>, ApiError> {
    Ok(Json(state_by_id(&state, &thread, None).await?))
}

/// `GET /threads/{thread_id}/state/{checkpoint_id}`: the state at a checkpoint.
#[utoipa::path(get, operation_id = "threads_state_at", path = "/threads/{thread_id}/state/{checkpoint_id}", tag = "threads",
    params(("thread_id" = String, Path, description = "The thread"),
        ("checkpoint_id" = String, Path, description = "A Weft checkpoint id")),
    responses((status = 200, body = ThreadState), (status = 404, description = "No such thread or checkpoint")))]
pub(crate) async fn state_at(
    State(state): State<AppState>,
    Path((thread, checkpoint)): Path<(String, String)>,
) -> Result<Json<ThreadState>, ApiError> {
    Ok(Json(state_by_id(&state, &thread, Some(&checkpoint)).await?))
}

/// `POST /threads/{thread_id}/state/checkpoint`: the state at `checkpoint.checkpoint_id`.
#[utoipa::path(post, operation_id = "threads_state_checkpoint", path = "/threads/{thread_id}/state/checkpoint", tag = "threads",
    request_body = StateRequest,
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 200, body = ThreadState), (status = 404, description = "No such thread or checkpoint")))]
pub(crate) async fn state_checkpoint(
    State(state): State<AppState>,
    Path(thread): Path<String>,
    body: Bytes,
) -> Result<Json<ThreadState>, ApiError> {
    let request: StateRequest = parse_body(&body)?;
    let id = request.checkpoint.and_then(|c| c.checkpoint_id);
    Ok(Json(state_by_id(&state, &thread, id.as_deref()).await?))
}

/// `POST /threads/{thread_id}/history`: one state per checkpoint, newest first.
#[utoipa::path(post, operation_id = "threads_history", path = "/threads/{thread_id}/history", tag = "threads",
    request_body = HistoryRequest,
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 200, body = [ThreadState]), (status = 404, description = "No such thread")))]
pub(crate) async fn history(
    State(state): State<AppState>,
    Path(thread): Path<String>,
    body: Bytes,
) -> Result<Json<Vec<ThreadState>>, ApiError> {
    let request: HistoryRequest = parse_body(&body)?;
    let record = thread_record(&state, &thread).await?;
    let summaries = state.store().list_checkpoints(&thread).await?;
    let before = match &request.before {
        Some(Value::String(id)) => Some(id.clone()),
        Some(Value::Object(o)) => o
            .get("checkpoint_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    };
    let end = match before {
        Some(id) => summaries.iter().position(|c| c.id == id).ok_or_else(|| {
            ApiError::not_found(format!("thread {thread} has no checkpoint {id}"))
        })?,
        None => summaries.len(),
    };
    let mut states = Vec::new();
    for index in (0..end).rev().take(request.limit.unwrap_or(10)) {
        states.push(state_of(&state, &record, &summaries, index).await?);
    }
    Ok(Json(states))
}

/// `POST /threads/{thread_id}/copy`: a new thread starting from the latest checkpoint, or
/// (Weft extension) from `checkpoint_id`.
#[utoipa::path(post, operation_id = "threads_copy", path = "/threads/{thread_id}/copy", tag = "threads", request_body = CopyRequest,
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 200, description = "The new thread", body = Thread),
        (status = 404, description = "No such thread or checkpoint")))]
pub(crate) async fn copy(
    State(state): State<AppState>,
    Path(thread): Path<String>,
    body: Bytes,
) -> Result<Json<Thread>, ApiError> {
    let request: CopyRequest = parse_body(&body)?;
    thread_record(&state, &thread).await?;
    let at = match request.checkpoint_id {
        Some(id) => ForkPoint::Id(id),
        None => ForkPoint::Latest,
    };
    let forked = fork(state.store(), &thread, &at).await?;
    let record = thread_record(&state, &forked.thread_id).await?;
    Ok(Json(thread_view(&state, record).await?))
}

/// `GET /threads/{thread_id}/thread-state`: the thread's Standard Agents `ThreadState`
/// (`threadId`, `agentId`, `userId`, `createdAt` and `terminated` in µs, `children`).
#[utoipa::path(get, operation_id = "threads_thread_state", path = "/threads/{thread_id}/thread-state", tag = "threads",
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 200, description = "The thread's ThreadState", body = Object),
        (status = 404, description = "No such thread")))]
pub(crate) async fn thread_state(
    State(state): State<AppState>,
    Path(thread): Path<String>,
) -> Result<Json<weft_runtime::ThreadState>, ApiError> {
    Ok(Json(state.runtime().thread_state(&thread).await?))
}

/// `POST /threads/{thread_id}/terminate`: ends the thread for good (Standard Agents
/// `terminate()`): its run in progress stops, its queue is emptied, its parent's registry
/// marks it `terminated`, and it takes no new run or queued message. Returns its state.
#[utoipa::path(post, operation_id = "threads_terminate", path = "/threads/{thread_id}/terminate", tag = "threads",
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 200, description = "The terminated thread's ThreadState", body = Object),
        (status = 404, description = "No such thread")))]
pub(crate) async fn terminate(
    State(state): State<AppState>,
    Path(thread): Path<String>,
) -> Result<Json<weft_runtime::ThreadState>, ApiError> {
    Ok(Json(state.runtime().terminate(&thread).await?))
}

/// `GET /threads/{thread_id}/thread-protocol`: the thread as a ThreadProtocol document.
#[utoipa::path(get, operation_id = "threads_export", path = "/threads/{thread_id}/thread-protocol", tag = "threads",
    params(("thread_id" = String, Path, description = "The thread")),
    responses((status = 200, description = "A ThreadProtocol thread", body = Object),
        (status = 404, description = "No such thread, or it holds no conversation yet")))]
pub(crate) async fn export(
    State(state): State<AppState>,
    Path(thread): Path<String>,
) -> Result<Json<Value>, ApiError> {
    thread_record(&state, &thread).await?;
    let transcript = Transcript::load(state.store(), &thread, None)
        .await
        .map_err(|e| match e {
            RunError::UnknownThread(_) => {
                ApiError::not_found(format!("thread {thread} holds no conversation yet"))
            }
            other => other.into(),
        })?;
    let value = transcript
        .to_thread()
        .to_value()
        .map_err(|e| ApiError::internal(format!("the thread cannot be written: {e}")))?;
    Ok(Json(value))
}

/// `POST /threads/import`: a ThreadProtocol thread becomes a new thread whose first
/// checkpoint holds its conversation.
#[utoipa::path(post, operation_id = "threads_import", path = "/threads/import", tag = "threads",
    request_body(content = Object, description = "A ThreadProtocol thread"),
    responses((status = 201, description = "The new thread", body = Thread),
        (status = 400, description = "Not a valid ThreadProtocol thread: the problems")))]
pub(crate) async fn import(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let document: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not JSON: {e}")))?;
    let imported = import_thread(state.store(), &document)
        .await
        .map_err(|e| match e {
            ImportError::Invalid(problems) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_thread",
                format!(
                    "the body is not a valid ThreadProtocol thread: {}",
                    problems.join("; ")
                ),
            ),
            ImportError::Run(e) => e.into(),
            other => ApiError::internal(other.to_string()),
        })?;
    let record = thread_record(&state, &imported.thread_id).await?;
    let thread = thread_view(&state, record).await?;
    Ok((StatusCode::CREATED, Json(thread)).into_response())
}
