//! Entry points for the fuzz targets (`fuzz/`, and the corpus replay test of `weft-fuzz`):
//! the server's request-body readers and their pure checks, without a state or a store.
//! Not a stable API.

use crate::ApiError;
use crate::api::model::{
    CopyRequest, HistoryRequest, RunCreate, StateRequest, ThreadCreate, ThreadPatch, ThreadSearch,
};
use crate::api::parse_body;

/// What a `POST /api/chat` body asks, as the handler reads it before touching the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatRead {
    /// The chat (thread) id.
    pub thread: String,
    /// The last message's role.
    pub role: String,
    /// The last message's id.
    pub id: String,
    /// How many messages came before it, when the client sent the whole conversation.
    pub history: Option<usize>,
    /// The last message's text.
    pub text: String,
}

/// Reads a `POST /api/chat` body as the handler does.
///
/// # Errors
/// The handler's answer for the body: 400 or 409.
pub fn chat_request(body: &[u8]) -> Result<ChatRead, ApiError> {
    let input = crate::chat::read_chat_request(body)?;
    Ok(ChatRead {
        text: input.last.text(),
        thread: input.thread,
        role: input.last.role,
        id: input.last.id,
        history: input.history.map(|h| h.len()),
    })
}

/// A run request (`POST /threads/{id}/runs`, `…/stream`, `…/wait`) read and checked as far as
/// a handler does without a store: the body, its unsupported options, its multitask
/// strategy and its `command.resume` answers for the given pending decisions.
///
/// # Errors
/// The handler's answer: 400, 409 or 422.
pub fn run_request(body: &[u8], pending: &[String]) -> Result<RunCreate, ApiError> {
    let request: RunCreate = parse_body(&bytes(body))?;
    let _ = request.unsupported();
    crate::api::runs::strategy_of(request.multitask_strategy.as_deref())?;
    if let Some(resume) = request.command.as_ref().and_then(|c| c.resume.as_ref()) {
        crate::api::runs::answers(resume, pending)?;
    }
    Ok(request)
}

/// The thread API's bodies, each read as its handler reads it (index: create, patch,
/// search, state, history, copy).
///
/// # Errors
/// The handler's answer: 400 or 422.
pub fn thread_request(kind: u8, body: &[u8]) -> Result<(), ApiError> {
    let body = bytes(body);
    match kind % 6 {
        0 => parse_body::<ThreadCreate>(&body).map(drop),
        1 => parse_body::<ThreadPatch>(&body).map(drop),
        2 => parse_body::<ThreadSearch>(&body).map(drop),
        3 => parse_body::<StateRequest>(&body).map(drop),
        4 => parse_body::<HistoryRequest>(&body).map(drop),
        _ => parse_body::<CopyRequest>(&body).map(drop),
    }
}

/// The query of `GET …/runs/{run_id}/stream`, split and percent-decoded.
pub fn query(text: &str) -> Vec<(String, String)> {
    crate::api::runs::query_pairs(Some(text))
}

fn bytes(body: &[u8]) -> axum::body::Bytes {
    axum::body::Bytes::copy_from_slice(body)
}
