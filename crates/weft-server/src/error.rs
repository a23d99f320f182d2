//! [`ApiError`]: every error a route answers, as `{"error": {"code", "message"}}` with its
//! status.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use weft_runtime::RunError;
use weft_store::StoreError;

/// An error answered to a request.
#[derive(Debug, thiserror::Error)]
#[error("{status}: {message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable, machine-readable code (`not_found`, `busy`, …).
    pub code: &'static str,
    /// What went wrong, as a sentence.
    pub message: String,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 404: the thing named does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409: the request conflicts with the stored state.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 500: the server failed (storage); the message says what.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        tracing::warn!(%error, "storage failed");
        ApiError::internal(format!("storage failed: {error}"))
    }
}

impl From<RunError> for ApiError {
    fn from(error: RunError) -> Self {
        match &error {
            RunError::UnknownRun(_) | RunError::UnknownThread(_) => {
                ApiError::not_found(error.to_string())
            }
            RunError::Decision(_) => {
                ApiError::new(StatusCode::CONFLICT, "decision_refused", error.to_string())
            }
            RunError::Owned { .. } => {
                ApiError::new(StatusCode::CONFLICT, "busy", error.to_string())
            }
            RunError::Budget(_) => ApiError::bad_request(error.to_string()),
            RunError::Refused(_) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "variables_required",
                error.to_string(),
            ),
            RunError::Terminated(_) => {
                ApiError::new(StatusCode::CONFLICT, "terminated", error.to_string())
            }
            RunError::Store(_) => ApiError::internal(error.to_string()),
            _ => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "run_error",
                error.to_string(),
            ),
        }
    }
}
