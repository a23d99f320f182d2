//! `UppError`: the one error type every modality surfaces (UPP-1.2 §4.4, Appendix A.2).
//!
//! Provider errors are data for the retry decision: the code says what went wrong, the status
//! and `retry_after` say what the server asked for, and [`UppError::is_retryable`] is the single
//! place that decides whether another attempt makes sense.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The standardized error codes of UPP-1.2 §4.4. The JSON form is the upper-snake name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// Invalid or missing API key.
    AuthenticationFailed,
    /// Too many requests.
    RateLimited,
    /// Input exceeds the model's context limit.
    ContextLengthExceeded,
    /// The requested model does not exist.
    ModelNotFound,
    /// Malformed request.
    InvalidRequest,
    /// The response failed validation (e.g. structured output that is not JSON).
    InvalidResponse,
    /// Content policy violation.
    ContentFiltered,
    /// Usage limits exceeded.
    QuotaExceeded,
    /// Provider-side error.
    ProviderError,
    /// Connection failure.
    NetworkError,
    /// The request timed out.
    Timeout,
    /// The operation was cancelled.
    Cancelled,
}

impl ErrorCode {
    /// Every code, in the order of the spec's table.
    pub const ALL: [ErrorCode; 12] = [
        ErrorCode::AuthenticationFailed,
        ErrorCode::RateLimited,
        ErrorCode::ContextLengthExceeded,
        ErrorCode::ModelNotFound,
        ErrorCode::InvalidRequest,
        ErrorCode::InvalidResponse,
        ErrorCode::ContentFiltered,
        ErrorCode::QuotaExceeded,
        ErrorCode::ProviderError,
        ErrorCode::NetworkError,
        ErrorCode::Timeout,
        ErrorCode::Cancelled,
    ];

    /// The wire string, e.g. `"RATE_LIMITED"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::AuthenticationFailed => "AUTHENTICATION_FAILED",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::ContextLengthExceeded => "CONTEXT_LENGTH_EXCEEDED",
            ErrorCode::ModelNotFound => "MODEL_NOT_FOUND",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::InvalidResponse => "INVALID_RESPONSE",
            ErrorCode::ContentFiltered => "CONTENT_FILTERED",
            ErrorCode::QuotaExceeded => "QUOTA_EXCEEDED",
            ErrorCode::ProviderError => "PROVIDER_ERROR",
            ErrorCode::NetworkError => "NETWORK_ERROR",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::Cancelled => "CANCELLED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which modality an error came from (UPP-1.2 §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Modality {
    /// Large language model operations.
    Llm,
    /// Vector embedding operations.
    Embedding,
    /// Image generation operations.
    Image,
    /// Audio operations (future).
    Audio,
    /// Video operations (future).
    Video,
}

impl Modality {
    /// The wire string, e.g. `"llm"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Modality::Llm => "llm",
            Modality::Embedding => "embedding",
            Modality::Image => "image",
            Modality::Audio => "audio",
            Modality::Video => "video",
        }
    }
}

impl fmt::Display for Modality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of every UPP operation.
///
/// Its JSON form follows Appendix A.2: `message`, `code`, `provider`, `modality`, and the optional
/// `statusCode` and `cause` (the original vendor error body, or a description of the transport
/// failure). API keys never appear in it: bodies are passed through [`crate::redact`] first.
///
/// # Examples
///
/// ```
/// use weft_provider::{ErrorCode, Modality, UppError};
///
/// let error = UppError::new(ErrorCode::RateLimited, "slow down", "openai", Modality::Llm)
///     .with_status(429);
/// assert!(error.is_retryable());
/// assert_eq!(serde_json::to_value(&error)?["code"], "RATE_LIMITED");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error("{code}: {message}")]
pub struct UppError {
    /// Human-readable message.
    pub message: String,
    /// Standardized code.
    pub code: ErrorCode,
    /// Provider name, e.g. `"anthropic"`.
    pub provider: String,
    /// The modality that failed.
    pub modality: Modality,
    /// HTTP status code, when the failure came from an HTTP response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    /// The original error: the vendor's error body, or `{ "message": … }` for transport errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<Value>,
    /// How long the server asked us to wait (`Retry-After`, Gemini `RetryInfo`), if it did.
    #[serde(skip)]
    pub retry_after: Option<Duration>,
}

impl UppError {
    /// A new error with no status, cause or retry hint.
    pub fn new(
        code: ErrorCode,
        message: impl Into<String>,
        provider: impl Into<String>,
        modality: Modality,
    ) -> Self {
        UppError {
            message: message.into(),
            code,
            provider: provider.into(),
            modality,
            status_code: None,
            cause: None,
            retry_after: None,
        }
    }

    /// Shorthand for an LLM-modality error.
    pub fn llm(code: ErrorCode, provider: impl Into<String>, message: impl Into<String>) -> Self {
        UppError::new(code, message, provider, Modality::Llm)
    }

    /// Sets the HTTP status code.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status_code = Some(status);
        self
    }

    /// Sets the original error.
    pub fn with_cause(mut self, cause: Value) -> Self {
        self.cause = Some(cause);
        self
    }

    /// Sets the server's retry hint.
    pub fn with_retry_after(mut self, delay: Duration) -> Self {
        self.retry_after = Some(delay);
        self
    }

    /// The `CANCELLED` error for an aborted operation.
    pub fn cancelled(provider: impl Into<String>, modality: Modality) -> Self {
        UppError::new(
            ErrorCode::Cancelled,
            "the operation was cancelled",
            provider,
            modality,
        )
    }

    /// Whether a retry may succeed: rate limits, provider-side errors (5xx, overloaded),
    /// network failures and timeouts. Authentication, bad requests, missing models, context
    /// overflow, content filtering, quota and cancellation are final.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.code,
            ErrorCode::RateLimited
                | ErrorCode::ProviderError
                | ErrorCode::NetworkError
                | ErrorCode::Timeout
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_wire_string() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).unwrap_or_default();
            assert_eq!(json, Value::String(code.as_str().to_owned()));
            let back: ErrorCode = serde_json::from_value(json).unwrap_or(ErrorCode::Cancelled);
            assert_eq!(back, code);
        }
    }

    #[test]
    fn retryable_codes_are_exactly_the_transient_ones() {
        let retryable: Vec<_> = ErrorCode::ALL
            .into_iter()
            .filter(|code| UppError::llm(*code, "p", "m").is_retryable())
            .collect();
        assert_eq!(
            retryable,
            vec![
                ErrorCode::RateLimited,
                ErrorCode::ProviderError,
                ErrorCode::NetworkError,
                ErrorCode::Timeout
            ]
        );
    }

    #[test]
    fn modality_strings() {
        let all = [
            Modality::Llm,
            Modality::Embedding,
            Modality::Image,
            Modality::Audio,
            Modality::Video,
        ];
        let names: Vec<_> = all.iter().map(|m| m.as_str()).collect();
        assert_eq!(names, ["llm", "embedding", "image", "audio", "video"]);
    }
}
