//! `POST /threads/{thread_id}/queue`: queues a tool call on a thread (Standard Agents
//! `queueTool()`). The call is durable in the thread's queue when the answer comes: a run of
//! the thread that this server drives takes it before its next model step; on an idle
//! thread a run starts for it at once (one with no new user message, whose first step takes
//! the queue). The call runs through the tool pipeline like a call of the model (validation,
//! policy, approval, the ledger), so a tool the agent lacks or bad arguments are a tool error
//! the model reads; a call of an `ai_human` agent's handoff tool hands the thread over to
//! that agent (a manual handoff).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::{parse_body, thread_record};
use weft_runtime::RunError;
use weft_runtime::queue_driver::QueueTaken;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// The body of `POST /threads/{thread_id}/queue`.
///
/// ```
/// let body: weft_server::api::queue::QueueTool =
///     serde_json::from_value(serde_json::json!({"tool": "support", "arguments": {"message": "hi"}}))
///         .unwrap();
/// assert_eq!(body.tool, "support");
/// ```
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueTool {
    /// The tool to call (a tool of the thread's agent's prompt: a function tool, a subagent,
    /// or an `ai_human` agent's handoff tool).
    pub tool: String,
    /// Its arguments, a JSON object (default `{}`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub arguments: Option<Value>,
    /// The agent of the run started when the thread is idle (default: the project's default
    /// agent).
    #[serde(default)]
    pub assistant_id: Option<String>,
}

/// The answer of `POST /threads/{thread_id}/queue`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QueuedToolView {
    /// The queue entry's id (the call's id in the conversation).
    pub id: String,
    /// The thread.
    pub thread_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    #[schema(value_type = Object)]
    pub arguments: Value,
    /// The run that takes it: the run in progress, or the one started for it (`null` when a
    /// run driven elsewhere is in progress: that run's thread takes it at its next run).
    pub run_id: Option<String>,
    /// Whether a run was started for it (the thread was idle).
    pub started: bool,
}

/// `POST /threads/{thread_id}/queue`: queues a tool call (see the module docs).
#[utoipa::path(post, operation_id = "threads_queue_tool", path = "/threads/{thread_id}/queue", tag = "threads",
    params(("thread_id" = String, Path, description = "The thread")),
    request_body(content = QueueTool, description = "The tool call to queue"),
    responses((status = 202, description = "Queued (and a run started when the thread was idle)", body = QueuedToolView),
        (status = 400, description = "No tool name, or arguments that are not a JSON object"),
        (status = 404, description = "No such thread"),
        (status = 409, description = "The thread is terminated")))]
pub(crate) async fn queue_tool(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(thread): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: QueueTool = parse_body(&body)?;
    if request.tool.trim().is_empty() {
        return Err(ApiError::bad_request(
            "name the tool to queue: {\"tool\": NAME}",
        ));
    }
    let arguments = request.arguments.unwrap_or_else(|| json!({}));
    if !arguments.is_object() {
        return Err(ApiError::bad_request(
            "the tool call's arguments must be a JSON object",
        ));
    }
    thread_record(&state, &thread).await?;
    // The queue driver queues it and, under the thread's lock, starts a run for an idle
    // thread (one with no new user message, whose first step takes the queue).
    let runs = state.queue_runs(&caller, request.assistant_id.as_deref());
    let (queued, taken) = state
        .queue_driver()
        .queue_tool(&thread, &request.tool, arguments.clone(), &runs)
        .await
        .map_err(launch_error)?;
    let (run_id, started) = taken_run(taken);
    let view = QueuedToolView {
        id: queued.id,
        thread_id: thread,
        tool: request.tool,
        arguments,
        run_id,
        started,
    };
    Ok((StatusCode::ACCEPTED, Json(view)).into_response())
}

/// The run that takes queued work, and whether it was started for it.
pub(crate) fn taken_run(taken: QueueTaken) -> (Option<String>, bool) {
    match taken {
        QueueTaken::Started(run) => (Some(run), true),
        QueueTaken::Joined(run) => (run, false),
        QueueTaken::Empty => (None, false),
    }
}

/// A queue driver's error as the answer: the server's own error when starting the run
/// failed (a 422 for an agent that cannot run, a 429 at the caller's limit).
pub(crate) fn launch_error(error: RunError) -> ApiError {
    match error {
        RunError::Launch(inner) => match inner.downcast::<ApiError>() {
            Ok(api) => *api,
            Err(other) => ApiError::internal(other.to_string()),
        },
        other => other.into(),
    }
}
