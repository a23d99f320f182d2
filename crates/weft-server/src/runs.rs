//! Weft's own run routes (under `/api`): a run's record with its usage and pending
//! decisions, its events as SSE (the page's live and nested view), and deciding a pending
//! call; `/api/info` says what the server serves.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Extension, Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_runtime::ownership::effective_status;
use weft_store::{DecisionRecord, DecisionStatus, Decisions as _, RunRecord, Runs as _, Verdict};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::sse;
use crate::state::AppState;

/// `GET /api/info`.
pub(crate) async fn info(State(state): State<AppState>) -> Json<Value> {
    let project = state.project();
    let agents: Vec<Value> = project
        .agents()
        .map(|a| {
            json!({
                "name": a.name,
                "kind": serde_json::to_value(a.agent_type).unwrap_or(Value::Null),
                "title": a.title,
                "description": a.description,
            })
        })
        .collect();
    Json(json!({
        "project": project.config().name,
        "version": env!("CARGO_PKG_VERSION"),
        "defaultAgent": project.default_agent().map(|a| a.name.clone()),
        "agents": agents,
    }))
}

/// A run as the API shows it, with secrets redacted as in the event log.
pub fn run_json(state: &AppState, run: &RunRecord, decisions: &[DecisionRecord]) -> Value {
    let usage = &run.usage;
    let pending: Vec<Value> = decisions
        .iter()
        .filter(|d| d.status == DecisionStatus::Pending)
        .map(decision_json)
        .collect();
    let mut value = json!({
        "runId": run.run_id,
        "threadId": run.thread_id,
        "agent": run.spec.pointer("/program/agent").cloned().unwrap_or(Value::Null),
        "status": effective_status(state.store(), run).as_str(),
        "createdAt": run.started_at,
        "updatedAt": run.updated_at,
        "endedAt": run.ended_at,
        "steps": run.steps,
        "usage": {
            "inputTokens": usage.input_tokens,
            "outputTokens": usage.output_tokens,
            "totalTokens": usage.input_tokens + usage.output_tokens,
            "cost": usage.cost,
        },
        "error": run.error,
        "output": run.output,
        "pendingDecisions": pending,
    });
    // The record's answer and error are stored as the run ended, unredacted (the event log
    // is redacted on write): a secret the model repeated must not reach a response.
    state.store().redactor().redact(&mut value);
    value
}

/// A pending decision as the API shows it.
pub fn decision_json(d: &DecisionRecord) -> Value {
    json!({
        "id": d.id,
        "kind": d.kind.as_str(),
        "tool": d.tool_name,
        "arguments": d.arguments,
        "toolCallId": d.tool_call_id,
        "reason": d.reason,
        "status": d.status.as_str(),
    })
}

async fn run_of(state: &AppState, run_id: &str) -> Result<RunRecord, ApiError> {
    state
        .store()
        .run(run_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no run {run_id}")))
}

/// `GET /api/runs/{run}`.
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(run_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let run = run_of(&state, &run_id).await?;
    let decisions = state.store().decisions(&run_id).await?;
    Ok(Json(run_json(&state, &run, &decisions)))
}

/// `?after=SEQ`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct After {
    #[serde(default)]
    after: Option<u64>,
}

/// The `seq` a stream starts after: `Last-Event-ID` (a reconnecting `EventSource`), else
/// `?after=`, else 0.
pub fn resume_point(headers: &HeaderMap, after: Option<u64>) -> u64 {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .or(after)
        .unwrap_or(0)
}

/// `GET /api/runs/{run}/events`: the run's events as SSE, then live until `run_end`.
pub(crate) async fn events(
    State(state): State<AppState>,
    Path(run_id): Path<String>,
    Query(after): Query<After>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    run_of(&state, &run_id).await?;
    let from = resume_point(&headers, after.after);
    sse::run_events(
        &state,
        &run_id,
        from,
        sse::raw_event,
        (Vec::new(), Vec::new()),
        true,
    )
    .await
}

/// The body of `POST /api/runs/{run}/decisions/{id}`.
#[derive(Debug, Deserialize)]
pub(crate) struct DecisionBody {
    approve: bool,
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /api/runs/{run}/decisions/{id}`: decides a pending call and, when the run waits
/// for nothing else, resumes it.
pub(crate) async fn decide(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(params): Path<HashMap<String, String>>,
    Json(body): Json<DecisionBody>,
) -> Result<Json<Value>, ApiError> {
    let (Some(run_id), Some(id)) = (params.get("run"), params.get("id")) else {
        return Err(ApiError::bad_request("name the run and the decision"));
    };
    let run = run_of(&state, run_id).await?;
    let lock = state.thread_lock(&run.thread_id);
    let _guard = lock.lock().await;
    let verdict = if body.approve {
        Verdict::Approve
    } else {
        Verdict::Deny(
            body.reason
                .filter(|r| !r.trim().is_empty())
                .unwrap_or_else(|| "the user denied this call".to_owned()),
        )
    };
    let decision = state.runtime().decide(run_id, id, verdict).await?;
    let waiting = state
        .store()
        .decisions(run_id)
        .await?
        .iter()
        .any(|d| d.status == DecisionStatus::Pending);
    let resumed = if waiting || state.is_running(&run) {
        None
    } else {
        Some(state.resume_run(&caller, &run).await?.run_id)
    };
    Ok(Json(json!({
        "decision": decision_json(&decision),
        "runId": run_id,
        "resumed": resumed.is_some(),
    })))
}
