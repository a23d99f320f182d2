//! [`MemoryError`]: what can go wrong outside a gate decision (a rejected write is an
//! outcome, not an error).

use std::path::{Path, PathBuf};

/// An error of the memory library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The memory tables could not be opened, migrated, read or written.
    #[error("memory database {path}: {source}")]
    Database {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// No memory has this id.
    #[error("no memory #{0}")]
    NotFound(i64),
}

impl MemoryError {
    pub(crate) fn db(path: &Path, source: rusqlite::Error) -> Self {
        MemoryError::Database {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        MemoryError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
