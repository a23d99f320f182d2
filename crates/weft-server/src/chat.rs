//! The Vercel AI SDK chat contract, so `useChat` with `DefaultChatTransport` works against
//! Weft unchanged: `POST /api/chat` (and `/api/agents/{agent}/chat`), `GET …/{id}/stream`
//! (rejoin the assistant message in progress; 204 when nothing runs), `POST …/{id}/stop`,
//! and `GET /api/chat/{id}/messages` (the stored conversation as `UIMessage`s).
//!
//! The chat id is a Weft thread. **The stored thread is the truth**: from a request only the
//! new user message, or the approval answers inside the replayed assistant message, are
//! taken; a history that differs from the stored one is answered 409. An approval answer is
//! matched against the run's pending decisions in the store — by id, bound to the call and
//! the hash of its arguments, single use — never taken from the replayed history alone.

use std::collections::HashMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use weft_runtime::RunError;
use weft_runtime::event::{ApprovalChunks, UiStreamEncoder};
use weft_runtime::transcript::Transcript;
use weft_runtime::ui_messages::assistant_message_id;
use weft_store::{
    DecisionStatus, Decisions as _, EventLog as _, EventQuery, RunRecord, RunStatus, Runs as _,
    Verdict,
};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::sse;
use crate::state::AppState;

/// A `UIMessage` as a client sends it (only what the server reads of it).
#[derive(Debug, Clone, Deserialize)]
pub struct ClientMessage {
    /// Its id.
    pub id: String,
    /// `user`, `assistant` or `system`.
    pub role: String,
    /// Its parts.
    #[serde(default)]
    pub parts: Vec<Value>,
}

impl ClientMessage {
    /// The text of its text parts.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("")
    }
}

/// The body of `POST /api/chat`: `{id, messages, trigger, messageId}`, or `{id, message}`
/// with only the last message.
#[derive(Debug, Deserialize)]
struct ChatRequest {
    id: String,
    #[serde(default)]
    messages: Option<Vec<ClientMessage>>,
    #[serde(default)]
    message: Option<ClientMessage>,
    #[serde(default)]
    trigger: Option<String>,
}

/// `?ui=v5`: a client of the AI SDK v5, which knows no approval chunk.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct UiQuery {
    #[serde(default)]
    ui: Option<String>,
}

impl UiQuery {
    fn approvals(&self) -> ApprovalChunks {
        if self.ui.as_deref() == Some("v5") {
            ApprovalChunks::DataPart
        } else {
            ApprovalChunks::ToolApprovalRequest
        }
    }
}

/// A chat request as read: the chat id, the message to act on, and the history before it
/// (when the client sent the whole conversation).
#[derive(Debug)]
pub(crate) struct ChatInput {
    pub(crate) thread: String,
    pub(crate) last: ClientMessage,
    pub(crate) history: Option<Vec<ClientMessage>>,
}

/// Reads a `POST /api/chat` body: 400 when it is not a chat request or has no message, 409
/// for `regenerate-message`.
pub(crate) fn read_chat_request(body: &[u8]) -> Result<ChatInput, ApiError> {
    let request: ChatRequest = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("the request body is not a chat request: {e}"))
    })?;
    if request.trigger.as_deref() == Some("regenerate-message") {
        return Err(ApiError::conflict(
            "regenerating a message is not supported: the stored thread keeps every answer; fork the thread from a checkpoint instead",
        ));
    }
    let (last, history) = match (request.message, request.messages) {
        (Some(message), _) => (message, None),
        (None, Some(mut messages)) => match messages.pop() {
            Some(last) => (last, Some(messages)),
            None => return Err(ApiError::bad_request("the request has no messages")),
        },
        (None, None) => {
            return Err(ApiError::bad_request(
                "the request has neither messages nor message",
            ));
        }
    };
    Ok(ChatInput {
        thread: request.id,
        last,
        history,
    })
}

/// `POST /api/chat`.
pub(crate) async fn post_default(
    state: State<AppState>,
    caller: Extension<Caller>,
    query: Query<UiQuery>,
    body: Bytes,
) -> Result<Response, ApiError> {
    post(state, caller, None, query, body).await
}

/// `POST /api/agents/{agent}/chat`.
pub(crate) async fn post_agent(
    state: State<AppState>,
    caller: Extension<Caller>,
    Path(agent): Path<String>,
    query: Query<UiQuery>,
    body: Bytes,
) -> Result<Response, ApiError> {
    post(state, caller, Some(agent), query, body).await
}

async fn post(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    agent: Option<String>,
    Query(query): Query<UiQuery>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ChatInput {
        thread,
        last,
        history,
    } = read_chat_request(&body)?;
    let lock = state.thread_lock(&thread);
    let guard = lock.lock().await;
    if let Some(active) = state.active_run(&thread).await? {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "busy",
            format!(
                "run {} is in progress on this chat: rejoin it with GET /api/chat/{thread}/stream or stop it first",
                active.run_id
            ),
        ));
    }
    let latest = state.latest_run(&thread).await?;
    let (started, encoder) = match last.role.as_str() {
        "assistant" => {
            let Some(run) = latest.filter(|r| assistant_message_id(&r.run_id) == last.id) else {
                return Err(ApiError::conflict(format!(
                    "the message {:?} is not this chat's latest answer: reload the chat",
                    last.id
                )));
            };
            answer_approvals(&state, &run, &last).await?;
            let started = state.resume_run(&caller, &run).await?;
            // The client holds the message up to the step that waited: it goes on from there.
            let known = last
                .parts
                .iter()
                .filter_map(|p| p["toolCallId"].as_str().map(str::to_owned))
                .collect();
            let encoder = UiStreamEncoder::new(&last.id)
                .with_approvals(query.approvals())
                .continuing(known);
            (started, encoder)
        }
        "user" => {
            if let Some(history) = &history {
                check_history(&state, &thread, history).await?;
            }
            let text = last.text();
            if let Some(run) = latest.filter(|r| r.status == RunStatus::Suspended) {
                deny_pending(&state, &caller, &run, &text).await?;
            }
            let started = state
                .start_run(
                    &caller,
                    agent.as_deref(),
                    &thread,
                    text,
                    Some(last.id.clone()),
                )
                .await?;
            let encoder = UiStreamEncoder::new(&assistant_message_id(&started.run_id))
                .with_approvals(query.approvals());
            (started, encoder)
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "the last message is a {other:?} message: send a user message, or the assistant message with approval answers"
            )));
        }
    };
    drop(guard);
    sse::ui_stream(&state, &started.run_id, started.after_seq, encoder).await
}

/// The approval answers inside a replayed assistant message, each checked against the
/// run's pending decision it names (id, call, arguments; single use).
async fn answer_approvals(
    state: &AppState,
    run: &RunRecord,
    message: &ClientMessage,
) -> Result<(), ApiError> {
    // Every answer is checked before any is taken, so a forged or stale one among them
    // decides nothing.
    let decisions = state.store().decisions(&run.run_id).await?;
    let mut answers = Vec::new();
    for part in &message.parts {
        let Some(approval) = part.get("approval").filter(|a| a.get("approved").is_some()) else {
            continue;
        };
        let (Some(id), Some(call)) = (approval["id"].as_str(), part["toolCallId"].as_str()) else {
            return Err(ApiError::bad_request(
                "an approval answer has no id or toolCallId",
            ));
        };
        let approved = approval["approved"].as_bool() == Some(true);
        match decisions
            .iter()
            .find(|d| d.id == id && d.tool_call_id == call)
        {
            Some(d) if d.status == DecisionStatus::Pending => {
                answers.push((id, call, part, approved))
            }
            // Answered before (a replayed message carries every earlier answer): skipped
            // only when it is recorded as this very answer.
            Some(d) if (d.status == DecisionStatus::Denied) != approved => {}
            _ => {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "decision_refused",
                    format!(
                        "the approval {id:?} answers no pending call of run {}",
                        run.run_id
                    ),
                ));
            }
        }
    }
    let answered = answers.len();
    for (id, call, part, approved) in answers {
        let verdict = if approved {
            Verdict::Approve
        } else {
            Verdict::Deny(
                part["approval"]["reason"]
                    .as_str()
                    .filter(|r| !r.trim().is_empty())
                    .unwrap_or("the user denied this call")
                    .to_owned(),
            )
        };
        // The arguments are checked against the decision's hash here (single use too).
        state
            .runtime()
            .decide_bound(&run.run_id, id, call, part.get("input"), verdict)
            .await?;
    }
    let still = pending_decisions(state, run).await?;
    if !still.is_empty() {
        return Err(ApiError::conflict(format!(
            "run {} still waits for a decision on {}: answer every pending call",
            run.run_id,
            still.join(", ")
        )));
    }
    if answered == 0 && run.status != RunStatus::Suspended {
        return Err(ApiError::conflict(format!(
            "run {} waits for nothing: send a user message",
            run.run_id
        )));
    }
    Ok(())
}

/// The ids of `run`'s pending decisions.
async fn pending_decisions(state: &AppState, run: &RunRecord) -> Result<Vec<String>, ApiError> {
    Ok(state
        .store()
        .decisions(&run.run_id)
        .await?
        .into_iter()
        .filter(|d| d.status == DecisionStatus::Pending)
        .map(|d| d.id)
        .collect())
}

/// A user who types a new message instead of answering denies the pending calls, with that
/// reason; the run then finishes (the model hears why) before the new message runs.
async fn deny_pending(
    state: &AppState,
    caller: &Caller,
    run: &RunRecord,
    text: &str,
) -> Result<(), ApiError> {
    let pending = pending_decisions(state, run).await?;
    if pending.is_empty() {
        return Ok(());
    }
    let reason = format!("the user did not answer and sent a new message instead: {text}");
    for id in &pending {
        match state
            .runtime()
            .decide(&run.run_id, id, Verdict::Deny(reason.clone()))
            .await
        {
            Ok(_) | Err(RunError::Decision(_)) => {}
            Err(error) => return Err(error.into()),
        }
    }
    let started = state.resume_run(caller, run).await?;
    let mut events = state
        .runtime()
        .follow(&started.run_id, started.after_seq)
        .await?;
    while events.next().await.is_some() {}
    Ok(())
}

/// The request's history (every message before the new one) must be the stored one: same
/// messages in order, user messages by text, assistant messages by id.
async fn check_history(
    state: &AppState,
    thread: &str,
    history: &[ClientMessage],
) -> Result<(), ApiError> {
    let stored = stored_messages(state, thread).await?;
    let diverges = |why: String| {
        ApiError::new(
            StatusCode::CONFLICT,
            "history_diverged",
            format!("the chat's history differs from the stored thread ({why}): reload the chat"),
        )
    };
    if stored.len() != history.len() {
        return Err(diverges(format!(
            "{} messages stored, {} sent",
            stored.len(),
            history.len()
        )));
    }
    for (at, (stored, sent)) in stored.iter().zip(history).enumerate() {
        if stored["role"] != sent.role.as_str() {
            return Err(diverges(format!("message {at} has another role")));
        }
        let same = if sent.role == "user" {
            let text: String = stored["parts"]
                .as_array()
                .map(|parts| parts.iter().filter_map(|p| p["text"].as_str()).collect())
                .unwrap_or_default();
            text == sent.text()
        } else {
            stored["id"] == sent.id.as_str()
        };
        if !same {
            return Err(diverges(format!("message {at} differs")));
        }
    }
    Ok(())
}

/// The thread's conversation as `UIMessage`s (empty for a thread with nothing yet).
pub(crate) async fn stored_messages(
    state: &AppState,
    thread: &str,
) -> Result<Vec<Value>, ApiError> {
    let runs = state.store().thread_runs(thread).await?;
    let input_ids: HashMap<String, String> = runs
        .iter()
        .filter_map(|r| {
            Some((
                r.run_id.clone(),
                r.spec.get("inputId")?.as_str()?.to_owned(),
            ))
        })
        .collect();
    let mut messages = match Transcript::load(state.store(), thread, None).await {
        Ok(transcript) => transcript.to_ui_messages(&input_ids),
        Err(RunError::UnknownThread(_)) => Vec::new(),
        Err(error) => return Err(error.into()),
    };
    if let Some(run) = runs.first().filter(|r| r.status == RunStatus::Suspended) {
        add_waiting_step(state, run, &mut messages).await?;
    }
    Ok(messages)
}

/// A suspended run's step that waits for decisions is not in the thread (it is taken again
/// when the run resumes), but the client must see it to answer: its calls are added to the
/// run's message as `approval-requested` tool parts, as the live stream showed them.
async fn add_waiting_step(
    state: &AppState,
    run: &RunRecord,
    messages: &mut Vec<Value>,
) -> Result<(), ApiError> {
    let pending: Vec<_> = state
        .store()
        .decisions(&run.run_id)
        .await?
        .into_iter()
        .filter(|d| d.status == DecisionStatus::Pending)
        .collect();
    if pending.is_empty() {
        return Ok(());
    }
    let id = assistant_message_id(&run.run_id);
    if messages.last().is_none_or(|m| m["id"] != id.as_str()) {
        messages.push(serde_json::json!({"id": id, "role": "assistant", "parts": []}));
    }
    let Some(Value::Array(parts)) = messages.last_mut().and_then(|m| m.get_mut("parts")) else {
        return Ok(());
    };
    parts.push(serde_json::json!({"type": "step-start"}));
    for decision in pending {
        parts.push(serde_json::json!({
            "type": format!("tool-{}", decision.tool_name),
            "toolCallId": decision.tool_call_id,
            "state": "approval-requested",
            "input": decision.arguments,
            "approval": {"id": decision.id},
        }));
    }
    Ok(())
}

/// The chat id a route names, refused (400) unless it is a valid thread id: an id in a path
/// never reaches anything but the store's rows of that thread.
fn chat_id(params: &HashMap<String, String>) -> Result<&str, ApiError> {
    match params.get("id") {
        Some(id) if crate::driver::valid_thread_id(id) => Ok(id),
        Some(id) => Err(ApiError::bad_request(format!(
            "{id:?} is not a valid chat id: use letters, digits, '-', '_', '.' or ':'"
        ))),
        None => Err(ApiError::bad_request("no chat id")),
    }
}

/// `GET /api/chat/{id}/messages`.
pub(crate) async fn messages(
    State(state): State<AppState>,
    Path(params): Path<HashMap<String, String>>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let thread = chat_id(&params)?;
    Ok(Json(stored_messages(&state, thread).await?))
}

/// `GET /api/chat/{id}/stream` (and under `/api/agents/{agent}`): the assistant message in
/// progress, replayed from its `start` chunk and then live; 204 when nothing runs.
pub(crate) async fn stream(
    State(state): State<AppState>,
    Path(params): Path<HashMap<String, String>>,
    Query(query): Query<UiQuery>,
) -> Result<Response, ApiError> {
    let thread = chat_id(&params)?;
    let Some(run) = state.active_run(thread).await? else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    // This drive of the run starts after the run's last `run_end` (a resumed run ended
    // once, suspended, before it was resumed).
    let ends = state
        .store()
        .events(&EventQuery {
            run_id: Some(run.run_id.clone()),
            types: vec!["run_end".to_owned()],
            ..EventQuery::default()
        })
        .await?;
    let after = ends.last().map_or(0, |e| e.seq);
    let encoder =
        UiStreamEncoder::new(&assistant_message_id(&run.run_id)).with_approvals(query.approvals());
    sse::ui_stream(&state, &run.run_id, after, encoder).await
}

/// `POST /api/chat/{id}/stop`: stops the run in progress (it keeps what it said and can be
/// resumed); the client's own `stop()` only disconnects.
pub(crate) async fn stop(
    State(state): State<AppState>,
    Path(params): Path<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let thread = chat_id(&params)?;
    let lock = state.thread_lock(thread);
    let _guard = lock.lock().await;
    let stopped = state.stop_thread(thread).await?;
    Ok(Json(
        serde_json::json!({"stopped": stopped.is_some(), "runId": stopped}),
    ))
}
