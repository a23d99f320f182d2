//! Error types of the crate. Validation does not use them: it returns every finding as data
//! (see [`crate::validate`]).

/// A document could not be read as a thread (or as Pydantic AI messages).
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The text is not JSON.
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// The JSON does not have the expected shape.
    #[error("unexpected shape: {0}")]
    Shape(#[source] serde_json::Error),
}
