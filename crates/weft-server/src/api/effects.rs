//! A thread's scheduled effects (Standard Agents `scheduleEffect` / `getScheduledEffects` /
//! `removeScheduledEffect`): `POST /threads/{thread_id}/effects` schedules one — a call of a
//! tool of the thread's agent, due after `delay` milliseconds or at `at` — and
//! `GET /threads/{thread_id}/effects` lists them (soonest first; `?name=` keeps those of one
//! name), `DELETE /threads/{thread_id}/effects/{effect_id}` removes one. The server's
//! scheduler (weft-runtime's `EffectScheduler`) fires a due effect into the thread's queue:
//! a run in progress takes the call before its next model step; on an idle thread a run of
//! the thread's agent starts for it. A terminated thread takes no effect, and terminating
//! one drops its effects.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use weft_store::ScheduledEffect;

use super::{parse_body, thread_record};
use crate::error::ApiError;
use crate::state::AppState;

/// The body of `POST /threads/{thread_id}/effects`: `name`, its `arguments` and when.
///
/// ```
/// let body: weft_server::api::effects::ScheduleEffect = serde_json::from_value(
///     serde_json::json!({"name": "remind", "arguments": {"about": "tea"}, "delay": 60000}),
/// )
/// .unwrap();
/// assert_eq!(body.delay, Some(60000));
/// ```
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleEffect {
    /// The effect's name: the tool of the thread's agent it calls when it fires.
    pub name: String,
    /// Its arguments, a JSON object (default `{}`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub arguments: Option<Value>,
    /// Due this many milliseconds from now (`scheduleEffect`'s `delay`; default 0).
    #[serde(default)]
    pub delay: Option<u64>,
    /// Due at this time instead (RFC 3339).
    #[serde(default)]
    pub at: Option<String>,
}

/// A scheduled effect as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EffectView {
    /// Its id (the queue entry's, and the call's id in the conversation, when it fires).
    pub id: String,
    /// The thread.
    pub thread_id: String,
    /// The tool it calls.
    pub name: String,
    /// Its arguments.
    #[schema(value_type = Object)]
    pub arguments: Value,
    /// When it is due (RFC 3339).
    pub due_at: String,
    /// When it was scheduled (RFC 3339).
    pub created_at: String,
}

impl From<ScheduledEffect> for EffectView {
    fn from(effect: ScheduledEffect) -> Self {
        EffectView {
            id: effect.id,
            thread_id: effect.thread_id,
            name: effect.call.name,
            arguments: effect.call.arguments,
            due_at: chrono::DateTime::from_timestamp_micros(effect.due_at)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
                .unwrap_or_default(),
            created_at: effect.created_at,
        }
    }
}

/// The query of `GET /threads/{thread_id}/effects`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
pub struct EffectFilter {
    /// Only the effects of this name.
    pub name: Option<String>,
}

/// The longest delay accepted (about ten years), so a due time always fits.
const MAX_DELAY_MS: u64 = 10 * 366 * 24 * 3600 * 1000;

/// `POST /threads/{thread_id}/effects`: schedules an effect (see the module docs).
#[utoipa::path(post, operation_id = "threads_schedule_effect", path = "/threads/{thread_id}/effects", tag = "threads",
    params(("thread_id" = String, Path, description = "The thread")),
    request_body(content = ScheduleEffect, description = "The effect: a tool call and when"),
    responses((status = 201, description = "Scheduled", body = EffectView),
        (status = 400, description = "No name, arguments that are not an object, a bad time"),
        (status = 404, description = "No such thread"),
        (status = 409, description = "The thread is terminated")))]
pub(crate) async fn schedule(
    State(state): State<AppState>,
    Path(thread): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<EffectView>), ApiError> {
    let request: ScheduleEffect = parse_body(&body)?;
    if request.name.trim().is_empty() {
        return Err(ApiError::bad_request(
            "name the effect's tool: {\"name\": TOOL}",
        ));
    }
    let arguments = request.arguments.unwrap_or_else(|| json!({}));
    if !arguments.is_object() {
        return Err(ApiError::bad_request(
            "the effect's arguments must be a JSON object",
        ));
    }
    let due_at = match (request.delay, request.at.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request("give either delay or at, not both"));
        }
        (_, Some(at)) => chrono::DateTime::parse_from_rfc3339(at)
            .map_err(|e| ApiError::bad_request(format!("at {at:?} is not an RFC 3339 time: {e}")))?
            .timestamp_micros(),
        (delay, None) => {
            let delay = delay.unwrap_or(0);
            if delay > MAX_DELAY_MS {
                return Err(ApiError::bad_request(format!(
                    "the delay {delay} ms is too long (at most {MAX_DELAY_MS})"
                )));
            }
            weft_runtime::schedule::now_micros()
                + i64::try_from(delay.saturating_mul(1000)).unwrap_or(i64::MAX / 2)
        }
    };
    thread_record(&state, &thread).await?;
    let effect = state
        .runtime()
        .schedule_effect(&thread, &request.name, arguments, due_at)
        .await?;
    Ok((StatusCode::CREATED, Json(effect.into())))
}

/// `GET /threads/{thread_id}/effects`: the thread's scheduled effects, soonest first.
#[utoipa::path(get, operation_id = "threads_list_effects", path = "/threads/{thread_id}/effects", tag = "threads",
    params(("thread_id" = String, Path, description = "The thread"), EffectFilter),
    responses((status = 200, description = "Its scheduled effects", body = [EffectView]),
        (status = 404, description = "No such thread")))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Path(thread): Path<String>,
    Query(filter): Query<EffectFilter>,
) -> Result<Json<Vec<EffectView>>, ApiError> {
    thread_record(&state, &thread).await?;
    let effects = state
        .runtime()
        .scheduled_effects(&thread, filter.name.as_deref())
        .await?;
    Ok(Json(effects.into_iter().map(EffectView::from).collect()))
}

/// `DELETE /threads/{thread_id}/effects/{effect_id}`: removes a scheduled effect; it never
/// fires.
#[utoipa::path(delete, operation_id = "threads_remove_effect", path = "/threads/{thread_id}/effects/{effect_id}", tag = "threads",
    params(("thread_id" = String, Path, description = "The thread"), ("effect_id" = String, Path, description = "The effect")),
    responses((status = 204, description = "Removed"),
        (status = 404, description = "No such thread, or no such effect scheduled on it (it fired or was removed)")))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    Path((thread, effect)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    use weft_store::ScheduledEffects as _;
    thread_record(&state, &thread).await?;
    let scheduled = state.store().scheduled_effect(&effect).await?;
    if scheduled.is_none_or(|e| e.thread_id != thread) {
        return Err(ApiError::not_found(format!(
            "no effect {effect} is scheduled on thread {thread}"
        )));
    }
    if !state.runtime().remove_scheduled_effect(&effect).await? {
        return Err(ApiError::not_found(format!(
            "effect {effect} fired or was removed"
        )));
    }
    Ok(StatusCode::NO_CONTENT)
}
