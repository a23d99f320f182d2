//! [`GateError`]: what can go wrong outside a verdict (a verdict itself is never an error).

use std::path::{Path, PathBuf};

/// An error of the gate library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    /// The gate database could not be opened, migrated, read or written.
    #[error("gate database {path}: {source}")]
    Database {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// `weft.toml` is unreadable or has a wrong gate setting.
    #[error("{path}: {message}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A git or file operation failed (worktrees, hook installation).
    #[error("{0}")]
    Operation(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl GateError {
    pub(crate) fn config(path: &Path, message: impl Into<String>) -> Self {
        GateError::Config {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    pub(crate) fn db(path: &Path, source: rusqlite::Error) -> Self {
        GateError::Database {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        GateError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
