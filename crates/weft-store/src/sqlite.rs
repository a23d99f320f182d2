//! The embedded SQLite backend: one file, WAL mode, created on first use.
//!
//! **Threads:** all SQLite work happens off the async runtime. One dedicated writer thread
//! owns the write connection and drains a bounded queue in batches: a batch is one
//! transaction; if it fails, each job is retried in its own transaction so a failing job
//! fails alone; replies are sent only after the commit. A checkpointer thread copies the WAL
//! back into the database beside it (passive checkpoints, a few per second while writes
//! happen), so the writer only appends to the WAL. Reads run on `spawn_blocking` with a
//! small pool of read connections (WAL lets them run beside the writer).
//!
//! **Durability:** `synchronous = NORMAL` (the default) makes a commit survive a process
//! crash (SIGKILL); [`Synchronous::Full`] also survives power loss, at the cost of an fsync
//! per batch.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, OptionalExtension as _};
use tokio::sync::{mpsc, oneshot};

use crate::error::StoreError;
use crate::schema::{MIGRATIONS, MIGRATIONS_TABLE, Migration, SCHEMA_VERSION};
use crate::sql::{Backend, Row, SqlValue, Stmt, WriteJob};

/// SQLite's `synchronous` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Survives a process crash; the WAL is synced at checkpoints (the default).
    #[default]
    Normal,
    /// Survives power loss: every commit is fsynced.
    Full,
}

/// Options of the SQLite backend.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// The database file (created with its directory when missing).
    pub path: PathBuf,
    /// The `synchronous` setting.
    pub synchronous: Synchronous,
    /// Capacity of the writer queue (jobs); senders wait when it is full.
    pub queue_capacity: usize,
    /// Most jobs committed in one transaction.
    pub max_batch: usize,
    /// Read connections kept open.
    pub readers: usize,
}

impl SqliteOptions {
    /// Defaults for the file at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SqliteOptions {
            path: path.into(),
            synchronous: Synchronous::Normal,
            queue_capacity: 8192,
            max_batch: 512,
            readers: 2,
        }
    }
}

enum Job {
    Write {
        job: WriteJob,
        reply: Option<oneshot::Sender<Result<(), StoreError>>>,
    },
    Barrier(oneshot::Sender<()>),
}

/// The SQLite backend.
#[derive(Debug)]
pub(crate) struct SqliteBackend {
    tx: mpsc::Sender<Job>,
    readers: Arc<Mutex<Vec<Connection>>>,
    path: PathBuf,
}

impl rusqlite::ToSql for SqlValue {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            SqlValue::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            SqlValue::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            SqlValue::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            SqlValue::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}

fn value_of(v: ValueRef<'_>) -> SqlValue {
    match v {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Integer(i) => SqlValue::Int(i),
        ValueRef::Real(r) => SqlValue::Real(r),
        ValueRef::Text(t) | ValueRef::Blob(t) => {
            SqlValue::Text(String::from_utf8_lossy(t).into_owned())
        }
    }
}

/// `$1` → `?1` (SQLite also accepts `$1`, but as a *named* parameter).
fn sqlite_sql(sql: &str) -> String {
    sql.replace('$', "?")
}

fn open_connection(
    path: &Path,
    synchronous: Synchronous,
    write: bool,
) -> Result<Connection, StoreError> {
    let flags = if write {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    if write {
        // A new file gets 2 KiB pages (existing files keep theirs: this is a no-op once the
        // file has content). Most rows are small (a checkpoint row is ~300 bytes, a history
        // item often less), and every table and index of the schema costs at least one page
        // even when empty: with 4 KiB pages a file held ~110 KiB before its first row, and
        // small rows filled half-empty index pages (issue 19: W3's file −6 %). Rows larger
        // than ~2 KiB spill to overflow pages either way.
        conn.pragma_update(None, "page_size", 2048)?;
    }
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(
        None,
        "synchronous",
        match synchronous {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        },
    )?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // Reads of index pages (a checkpoint's random UUID id lands on a random page) come from
    // memory: a 64 MiB page cache for the writer, memory-mapped I/O for everyone.
    if write {
        conn.pragma_update(None, "cache_size", -65_536)?;
        // WAL checkpoints run on their own thread (see `checkpointer_loop`); this is only
        // the backstop that bounds the WAL (≈ 200 MiB) if that thread falls behind.
        conn.pragma_update(None, "wal_autocheckpoint", 50_000)?;
        // When the writer starts the WAL over (after a complete checkpoint), it cuts the file
        // back to 4 MiB: a burst does not leave a large WAL behind for good.
        conn.pragma_update(None, "journal_size_limit", 4 << 20)?;
    }
    conn.pragma_update(None, "mmap_size", 268_435_456)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

fn run_stmt(conn: &Connection, stmt: &Stmt) -> Result<(), StoreError> {
    let mut prepared = conn.prepare_cached(&sqlite_sql(&stmt.sql))?;
    prepared.execute(rusqlite::params_from_iter(stmt.params.iter()))?;
    Ok(())
}

fn query_stmt(conn: &Connection, stmt: &Stmt) -> Result<Vec<Row>, StoreError> {
    let mut prepared = conn.prepare_cached(&sqlite_sql(&stmt.sql))?;
    let columns = prepared.column_count();
    let mut rows = prepared.query(rusqlite::params_from_iter(stmt.params.iter()))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let mut values = Vec::with_capacity(columns);
        for i in 0..columns {
            values.push(value_of(row.get_ref(i)?));
        }
        out.push(Row(values));
    }
    Ok(out)
}

/// Reads the schema version; applies the missing migrations up to `target`.
pub(crate) fn migrate(conn: &mut Connection, target: i64) -> Result<i64, StoreError> {
    conn.execute_batch(MIGRATIONS_TABLE)?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let found: i64 = tx.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM weft_schema_migrations",
        [],
        |r| r.get(0),
    )?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for Migration { version, name, sql } in MIGRATIONS
        .iter()
        .filter(|m| m.version > found && m.version <= target)
    {
        tx.execute_batch(sql).map_err(|e| StoreError::Migration {
            version: *version,
            message: e.to_string(),
        })?;
        tx.execute(
            "INSERT INTO weft_schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
            rusqlite::params![version, name, crate::model::now_string()],
        )?;
    }
    tx.commit()?;
    Ok(found.max(target.min(SCHEMA_VERSION)))
}

impl SqliteBackend {
    /// Opens (creating it when missing) and migrates the database, then starts the writer.
    pub(crate) async fn open(options: SqliteOptions) -> Result<Self, StoreError> {
        Self::open_at(options, SCHEMA_VERSION).await
    }

    /// Opens and migrates only up to `target` (tests build old-version fixtures with it).
    pub(crate) async fn open_at(options: SqliteOptions, target: i64) -> Result<Self, StoreError> {
        let opts = options.clone();
        let (writer, readers) = tokio::task::spawn_blocking(move || -> Result<_, StoreError> {
            if let Some(dir) = opts.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| StoreError::Io {
                    path: dir.display().to_string(),
                    message: e.to_string(),
                })?;
            }
            let mut writer = open_connection(&opts.path, opts.synchronous, true)?;
            migrate(&mut writer, target)?;
            let mut readers = Vec::new();
            for _ in 0..opts.readers.max(1) {
                readers.push(open_connection(&opts.path, opts.synchronous, false)?);
            }
            Ok((writer, readers))
        })
        .await
        .map_err(|e| StoreError::Sqlite(format!("open task failed: {e}")))??;

        let (tx, rx) = mpsc::channel(options.queue_capacity.max(1));
        let max_batch = options.max_batch.max(1);
        let spawn_failed = |e: std::io::Error| StoreError::Io {
            path: options.path.display().to_string(),
            message: format!("cannot start a store thread: {e}"),
        };
        let checkpoints = open_connection(&options.path, options.synchronous, false)?;
        let (wake, woken) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("weft-store-sqlite-checkpointer".into())
            .spawn(move || checkpointer_loop(&checkpoints, &woken))
            .map_err(spawn_failed)?;
        std::thread::Builder::new()
            .name("weft-store-sqlite-writer".into())
            .spawn(move || writer_loop(writer, rx, max_batch, &wake))
            .map_err(spawn_failed)?;
        Ok(SqliteBackend {
            tx,
            readers: Arc::new(Mutex::new(readers)),
            path: options.path,
        })
    }
}

fn writer_loop(
    mut conn: Connection,
    mut rx: mpsc::Receiver<Job>,
    max_batch: usize,
    wake_checkpointer: &std::sync::mpsc::SyncSender<()>,
) {
    let mut batch = Vec::with_capacity(max_batch);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        commit_batch(&mut conn, &mut batch);
        // A full channel means a wake-up is already pending.
        let _ = wake_checkpointer.try_send(());
    }
}

/// Most WAL checkpoints per second.
const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(200);

/// How long the writer must have been idle before the WAL file is truncated.
const IDLE_BEFORE_TRUNCATE: std::time::Duration = std::time::Duration::from_millis(200);

/// Copies the WAL back into the database file beside the writer (`PASSIVE`: it never blocks
/// the writer or the readers), at most every [`CHECKPOINT_INTERVAL`] while commits happen.
/// Once the writer has been idle for [`IDLE_BEFORE_TRUNCATE`], the WAL file is truncated to
/// zero bytes (`TRUNCATE`, given up at once if a reader or the writer is busy), so an idle
/// store leaves no WAL behind: the WAL holds whole pages per commit, so its size follows the
/// number of commits, not the data. Ends with the writer (when its wake-up sender is
/// dropped), after a last checkpoint.
fn checkpointer_loop(conn: &Connection, woken: &std::sync::mpsc::Receiver<()>) {
    use std::sync::mpsc::RecvTimeoutError;
    let checkpoint = |mode: &str| {
        let sql = format!("PRAGMA wal_checkpoint({mode})");
        if let Err(error) = conn.query_row(&sql, [], |_| Ok(())) {
            tracing::debug!(%error, "WAL checkpoint failed; the next one retries");
        }
    };
    // The truncation must never wait for a reader or the writer: it is retried at the next
    // idle moment.
    if let Err(error) = conn.busy_timeout(std::time::Duration::ZERO) {
        tracing::debug!(%error, "cannot set the checkpointer's busy timeout");
    }
    let mut awake = woken.recv().is_ok();
    while awake {
        std::thread::sleep(CHECKPOINT_INTERVAL);
        checkpoint("PASSIVE");
        awake = match woken.recv_timeout(IDLE_BEFORE_TRUNCATE) {
            Ok(()) => true,
            Err(RecvTimeoutError::Timeout) => {
                checkpoint("TRUNCATE");
                woken.recv().is_ok()
            }
            Err(RecvTimeoutError::Disconnected) => false,
        };
    }
    checkpoint("PASSIVE");
}

fn run_jobs<'a>(
    conn: &mut Connection,
    jobs: impl Iterator<Item = &'a WriteJob>,
) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    for job in jobs {
        if let Some(fence) = &job.fence {
            // A cached statement: most jobs of a run are fenced, and parsing this query again
            // for each of them cost more than the write it guards (issue 19, W1 through the
            // runtime: ~12 fenced jobs per tool step).
            let current: Option<i64> = tx
                .prepare_cached("SELECT lease_epoch FROM runs WHERE run_id = ?1")?
                .query_row([fence.run_id.as_str()], |row| row.get(0))
                .optional()?;
            fence.check(current)?;
        }
        job.stmts.iter().try_for_each(|s| run_stmt(&tx, s))?;
    }
    tx.commit()?;
    Ok(())
}

/// Commits a batch in one transaction; when it fails, each job is retried alone so one bad
/// job fails alone. Replies go out only after the commit.
fn commit_batch(conn: &mut Connection, batch: &mut Vec<Job>) {
    let writes = || {
        batch.iter().filter_map(|j| match j {
            Job::Write { job, .. } => Some(job),
            Job::Barrier(_) => None,
        })
    };
    let together = run_jobs(conn, writes());
    let results: Vec<Result<(), StoreError>> = match together {
        Ok(()) => writes().map(|_| Ok(())).collect(),
        Err(_) => {
            let jobs: Vec<&WriteJob> = writes().collect();
            jobs.into_iter()
                .map(|job| run_jobs(conn, std::iter::once(job)))
                .collect()
        }
    };
    let mut results = results.into_iter();
    for job in batch.drain(..) {
        match job {
            Job::Barrier(reply) => {
                let _ = reply.send(());
            }
            Job::Write { job, reply } => {
                let result = results.next().unwrap_or(Ok(()));
                if let Err(error) = &result {
                    if let Some(flag) = &job.failed {
                        flag.store(true, Ordering::SeqCst);
                    }
                    if reply.is_none() {
                        tracing::warn!(%error, "queued store write failed");
                    }
                }
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
        }
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    async fn write(&self, job: WriteJob, wait: bool) -> Result<(), StoreError> {
        if wait {
            let (reply, rx) = oneshot::channel();
            self.tx
                .send(Job::Write {
                    job,
                    reply: Some(reply),
                })
                .await
                .map_err(|_| StoreError::Closed)?;
            rx.await.map_err(|_| StoreError::Closed)?
        } else {
            self.tx
                .send(Job::Write { job, reply: None })
                .await
                .map_err(|_| StoreError::Closed)
        }
    }

    async fn query(&self, stmt: Stmt) -> Result<Vec<Row>, StoreError> {
        let readers = self.readers.clone();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let pooled = readers.lock().ok().and_then(|mut r| r.pop());
            let conn = match pooled {
                Some(conn) => conn,
                None => open_connection(&path, Synchronous::Normal, false)?,
            };
            let result = query_stmt(&conn, &stmt);
            if let Ok(mut r) = readers.lock() {
                r.push(conn);
            }
            result
        })
        .await
        .map_err(|e| StoreError::Sqlite(format!("read task failed: {e}")))?
    }

    async fn flush(&self) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job::Barrier(reply))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)
    }

    async fn compact(&self) -> Result<(), StoreError> {
        self.flush().await?;
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let conn = open_connection(&path, Synchronous::Normal, false)?;
            conn.execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")?;
            Ok(())
        })
        .await
        .map_err(|e| StoreError::Sqlite(format!("compact task failed: {e}")))?
    }
}
