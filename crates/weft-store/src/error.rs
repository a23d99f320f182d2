//! [`StoreError`]: every way a store operation fails.

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store URL is not `sqlite:PATH` or `postgres://…`.
    #[error("invalid store URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The database was written by a newer Weft (a newer schema version).
    #[error(
        "the database has schema version {found}, newer than the {supported} this Weft supports; \
         upgrade Weft (or use another database) — refusing to open it"
    )]
    SchemaTooNew {
        /// The version found in the database.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// A migration failed.
    #[error("migration to schema version {version} failed: {message}")]
    Migration {
        /// The version being applied.
        version: i64,
        /// The database error.
        message: String,
    },
    /// SQLite reported an error.
    #[error("sqlite: {0}")]
    Sqlite(String),
    /// PostgreSQL reported an error.
    #[error("postgres: {0}")]
    Postgres(String),
    /// File-system failure (creating the database directory).
    #[error("I/O error on {path}: {message}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        message: String,
    },
    /// A stored record could not be decoded.
    #[error("corrupt record in {table}: {message}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The store was closed (its writer stopped).
    #[error("the store is closed")]
    Closed,
    /// The record does not exist.
    #[error("{kind} {id:?} not found")]
    NotFound {
        /// What was looked for (`run`, `thread`, …).
        kind: &'static str,
        /// Its id.
        id: String,
    },
    /// The input cannot be stored (an empty id, an unknown artifact type…).
    /// A write of a run whose lease was taken over by another owner (a newer epoch): the
    /// writer is stale and must stop.
    #[error(
        "run {run_id:?} is now owned by another process (lease epoch {current}, this process holds {held}); \
         this process stopped writing to it"
    )]
    Fenced {
        /// The run.
        run_id: String,
        /// The epoch this writer holds.
        held: i64,
        /// The run's epoch in the store.
        current: i64,
    },
    /// Input that cannot be stored.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// A record with this key exists already (an active API token with the same name).
    #[error("{kind} {id:?} already exists")]
    AlreadyExists {
        /// What it is (`token`, …).
        kind: &'static str,
        /// The key in use.
        id: String,
    },
    /// The operating system gave no secure random bytes (a token secret cannot be made).
    #[error("no secure random bytes from the operating system")]
    Random,
    /// The key that encrypts secret variables cannot be had (not configured, unreadable,
    /// malformed) or a stored secret does not decrypt with it.
    #[error("secret variables: {0}")]
    SecretKey(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        StoreError::Sqlite(error.to_string())
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> Self {
        // `Display` of a server error is only "db error"; the full text is in the source.
        match error.as_db_error() {
            Some(db) => StoreError::Postgres(format!("{}: {}", db.code().code(), db.message())),
            None => StoreError::Postgres(error.to_string()),
        }
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        StoreError::Postgres(format!("connection pool: {error}"))
    }
}

pub(crate) fn corrupt(table: &'static str, error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        table,
        message: error.to_string(),
    }
}
