//! The backend seam: portable statements ([`Stmt`], `$1`-style parameters) and the
//! [`Backend`] trait both engines implement. Every typed store operation is written once,
//! in `store.rs`, on top of it.
//!
//! **Invariant:** a `write` is one transaction: all its statements commit or none do, and
//! when it returns `Ok` with `wait = true` they are committed (durable as the engine's
//! synchronous setting allows). With `wait = false` the write is queued in order behind the
//! earlier ones; a failure is logged and reported through the job's `on_error` flag.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use async_trait::async_trait;

use crate::error::{StoreError, corrupt};

/// A parameter or column value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SqlValue {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl From<i64> for SqlValue {
    fn from(v: i64) -> Self {
        SqlValue::Int(v)
    }
}
impl From<u64> for SqlValue {
    fn from(v: u64) -> Self {
        SqlValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<bool> for SqlValue {
    fn from(v: bool) -> Self {
        SqlValue::Int(i64::from(v))
    }
}
impl From<f64> for SqlValue {
    fn from(v: f64) -> Self {
        SqlValue::Real(v)
    }
}
impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        SqlValue::Text(v)
    }
}
impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        SqlValue::Text(v.to_owned())
    }
}
impl From<&String> for SqlValue {
    fn from(v: &String) -> Self {
        SqlValue::Text(v.clone())
    }
}
impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(SqlValue::Null, Into::into)
    }
}

/// One statement with `$1…$n` parameters, numbered in order of first appearance.
#[derive(Debug, Clone)]
pub(crate) struct Stmt {
    pub(crate) sql: Cow<'static, str>,
    pub(crate) params: Vec<SqlValue>,
}

impl Stmt {
    pub(crate) fn new(sql: impl Into<Cow<'static, str>>, params: Vec<SqlValue>) -> Self {
        Stmt {
            sql: sql.into(),
            params,
        }
    }
}

/// Builds a `Stmt`: `stmt!("SELECT … WHERE a = $1", a)`.
macro_rules! stmt {
    ($sql:expr $(, $p:expr)* $(,)?) => {
        $crate::sql::Stmt::new($sql, vec![$($crate::sql::SqlValue::from($p)),*])
    };
}
pub(crate) use stmt;

/// One result row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row(pub(crate) Vec<SqlValue>);

impl Row {
    fn at(&self, i: usize) -> Result<&SqlValue, StoreError> {
        self.0
            .get(i)
            .ok_or_else(|| corrupt("row", format!("missing column {i}")))
    }
    pub(crate) fn text(&self, i: usize) -> Result<String, StoreError> {
        match self.at(i)? {
            SqlValue::Text(s) => Ok(s.clone()),
            SqlValue::Int(v) => Ok(v.to_string()),
            other => Err(corrupt(
                "row",
                format!("column {i}: expected text, got {other:?}"),
            )),
        }
    }
    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        match self.at(i)? {
            SqlValue::Null => Ok(None),
            _ => self.text(i).map(Some),
        }
    }
    pub(crate) fn int(&self, i: usize) -> Result<i64, StoreError> {
        match self.at(i)? {
            SqlValue::Int(v) => Ok(*v),
            SqlValue::Null => Ok(0),
            // The number fits: stored values are integers written by us.
            #[allow(clippy::cast_possible_truncation)]
            SqlValue::Real(v) => Ok(*v as i64),
            other => Err(corrupt(
                "row",
                format!("column {i}: expected integer, got {other:?}"),
            )),
        }
    }
    pub(crate) fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        match self.at(i)? {
            SqlValue::Null => Ok(None),
            _ => self.int(i).map(Some),
        }
    }
    pub(crate) fn uint(&self, i: usize) -> Result<u64, StoreError> {
        Ok(u64::try_from(self.int(i)?).unwrap_or(0))
    }
    pub(crate) fn opt_real(&self, i: usize) -> Result<Option<f64>, StoreError> {
        match self.at(i)? {
            SqlValue::Null => Ok(None),
            _ => self.real(i).map(Some),
        }
    }

    pub(crate) fn real(&self, i: usize) -> Result<f64, StoreError> {
        match self.at(i)? {
            SqlValue::Real(v) => Ok(*v),
            #[allow(clippy::cast_precision_loss)]
            SqlValue::Int(v) => Ok(*v as f64),
            SqlValue::Null => Ok(0.0),
            other => Err(corrupt(
                "row",
                format!("column {i}: expected real, got {other:?}"),
            )),
        }
    }
}

/// A write handed to a backend.
pub(crate) struct WriteJob {
    pub(crate) stmts: Vec<Stmt>,
    /// Set when the write failed (async writes: the caller's cache is then stale).
    pub(crate) failed: Option<Arc<AtomicBool>>,
    /// Commit only while the run's lease epoch is this one (see [`crate::lease::Fence`]).
    pub(crate) fence: Option<Arc<crate::lease::Fence>>,
}

impl fmt::Debug for WriteJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteJob")
            .field("stmts", &self.stmts.len())
            .finish_non_exhaustive()
    }
}

/// A storage engine.
#[async_trait]
pub(crate) trait Backend: Send + Sync + fmt::Debug {
    /// Runs `job` as one transaction. `wait`: return after commit; otherwise queue it
    /// (in order) and return at once.
    ///
    /// # Cancel safety
    /// Dropping the future of a waiting write does not cancel it: the job is already queued
    /// (SQLite) or runs to completion on a spawned task (PostgreSQL).
    async fn write(&self, job: WriteJob, wait: bool) -> Result<(), StoreError>;

    /// Runs one read-only query.
    async fn query(&self, stmt: Stmt) -> Result<Vec<Row>, StoreError>;

    /// Waits until every queued write has been committed (or has failed).
    async fn flush(&self) -> Result<(), StoreError>;

    /// Gives the space of deleted rows back (`VACUUM`), outside any transaction.
    async fn compact(&self) -> Result<(), StoreError>;

    /// A statement that makes its transaction, until it ends, the only one numbering
    /// `run_id`'s events (`run_seq` assigned by the store as the run's highest plus one), so
    /// concurrent writers get a dense numbering instead of a duplicate-key failure. `None`
    /// where write transactions are serialized anyway (SQLite's immediate transactions).
    fn run_seq_lock(&self, _run_id: &str) -> Option<Stmt> {
        None
    }

    /// The schema version of the database.
    async fn schema_version(&self) -> Result<i64, StoreError> {
        let rows = self
            .query(Stmt::new(
                "SELECT COALESCE(MAX(version), 0) FROM weft_schema_migrations",
                Vec::new(),
            ))
            .await?;
        rows.first().map_or(Ok(0), |r| r.int(0))
    }
}
