//! The memory tables in the project's SQLite file (`.weft/weft.db`, beside the store's and
//! the gate's tables).
//!
//! **Invariants:** every table is prefixed `memory_` and versioned by its own
//! `memory_schema_migrations` rows (append-only), so neither the store's nor the gate's
//! migrations touch them, nor these theirs. The connection is plain synchronous rusqlite (no
//! async runtime, no threads): a session-start hook reads it in a millisecond or two. A file
//! that is not a database is moved aside to `weft.db.corrupt-<millis>` and recreated
//! ([`MemoryDb::open_healing`]); nothing is ever deleted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OptionalExtension, Row, params, params_from_iter};
use serde::Serialize;

use crate::entry::{Entry, Kind, Status, Tier};
use crate::error::MemoryError;

/// The migrations, in order; version = index + 1.
const MIGRATIONS: &[&str] = &[
    // V1: entries of every tier, their vectors per model, the superseded-entries audit trail.
    "CREATE TABLE memory_entries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        tier TEXT NOT NULL,
        kind TEXT NOT NULL,
        content TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '',
        importance INTEGER NOT NULL,
        session_id TEXT,
        created_at INTEGER NOT NULL,
        last_access INTEGER NOT NULL,
        access_count INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'active',
        source_id INTEGER,
        suggested_tier TEXT,
        note TEXT
    );
    CREATE INDEX memory_entries_tier ON memory_entries (tier, status);
    CREATE INDEX memory_entries_created ON memory_entries (created_at);
    CREATE TABLE memory_vectors (
        entry_id INTEGER NOT NULL,
        model TEXT NOT NULL,
        dims INTEGER NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (entry_id, model)
    );
    CREATE TABLE memory_superseded (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        entry_id INTEGER NOT NULL,
        tier TEXT NOT NULL,
        old_content TEXT NOT NULL,
        new_entry_id INTEGER,
        reason TEXT NOT NULL,
        superseded_at INTEGER NOT NULL
    );",
];

/// One row of the superseded-entries audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SupersededEntry {
    /// The memory that was superseded.
    pub entry_id: i64,
    /// Its tier.
    pub tier: Tier,
    /// What it said.
    pub old_content: String,
    /// The memory that replaces it (none for a duplicate removed by maintenance).
    pub new_entry_id: Option<i64>,
    /// Why.
    pub reason: String,
    /// When (ms since the epoch).
    pub superseded_at: i64,
}

/// A connection to the memory tables.
#[derive(Debug)]
pub struct MemoryDb {
    conn: Connection,
    path: PathBuf,
}

const COLUMNS: &str = "id, tier, kind, content, tags, importance, session_id, created_at, \
                       last_access, access_count, status, source_id, suggested_tier, note";

fn entry(r: &Row<'_>) -> rusqlite::Result<Entry> {
    let text = |i: usize| -> rusqlite::Result<String> { r.get(i) };
    let tags: String = r.get(4)?;
    Ok(Entry {
        id: r.get(0)?,
        tier: Tier::parse(&text(1)?).unwrap_or(Tier::Daily),
        kind: Kind::parse(&text(2)?).unwrap_or(Kind::Observation),
        content: r.get(3)?,
        tags: tags
            .split(',')
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect(),
        importance: u8::try_from(r.get::<_, i64>(5)?.clamp(1, 10)).unwrap_or(5),
        session_id: r.get(6)?,
        created_at: r.get(7)?,
        last_access: r.get(8)?,
        access_count: r.get(9)?,
        status: Status::parse(&text(10)?).unwrap_or(Status::Active),
        source_id: r.get(11)?,
        suggested_tier: r
            .get::<_, Option<String>>(12)?
            .and_then(|t| Tier::parse(&t)),
        note: r.get(13)?,
    })
}

/// Which entries [`MemoryDb::entries`] returns.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter<'a> {
    pub(crate) tiers: &'a [Tier],
    pub(crate) statuses: &'a [Status],
    pub(crate) since: Option<i64>,
}

impl MemoryDb {
    /// The file of the project at `root`: `WEFT_DATABASE_URL` when it names a SQLite file
    /// (`sqlite:PATH`), else `root/.weft/weft.db` (the store's and the gate's file).
    pub fn path_for(root: &Path) -> PathBuf {
        if let Ok(url) = std::env::var("WEFT_DATABASE_URL")
            && let Some(path) = url.trim().strip_prefix("sqlite:")
            && !path.is_empty()
        {
            let path = path.strip_prefix("//").unwrap_or(path);
            return root.join(path);
        }
        root.join(".weft").join("weft.db")
    }

    /// Opens (creating the file and its folder) and migrates.
    ///
    /// # Errors
    /// [`MemoryError::Database`] or [`MemoryError::Io`].
    pub fn open(path: &Path) -> Result<MemoryDb, MemoryError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| MemoryError::io(dir, e))?;
        }
        let conn = Connection::open(path).map_err(|e| MemoryError::db(path, e))?;
        let db = MemoryDb {
            conn,
            path: path.to_path_buf(),
        };
        db.setup().map_err(|e| MemoryError::db(path, e))?;
        Ok(db)
    }

    /// [`MemoryDb::open`], but a file that is not a database, or is corrupt, is moved aside
    /// (`<file>.corrupt-<millis>`) and recreated. The notes say what was done.
    ///
    /// # Errors
    /// When the database still cannot be opened (e.g. a read-only folder).
    pub fn open_healing(path: &Path) -> Result<(MemoryDb, Vec<String>), MemoryError> {
        match MemoryDb::open(path) {
            Ok(db) => Ok((db, Vec::new())),
            Err(MemoryError::Database { source, .. })
                if matches!(
                    source.sqlite_error_code(),
                    Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
                ) =>
            {
                let aside = PathBuf::from(format!(
                    "{}.corrupt-{}",
                    path.display(),
                    crate::clock::Clock::now_ms(&crate::clock::SystemClock)
                ));
                std::fs::rename(path, &aside).map_err(|e| MemoryError::io(path, e))?;
                for suffix in ["-wal", "-shm"] {
                    let side = PathBuf::from(format!("{}{suffix}", path.display()));
                    if side.exists() {
                        let _ = std::fs::rename(
                            &side,
                            PathBuf::from(format!("{}{suffix}", aside.display())),
                        );
                    }
                }
                let db = MemoryDb::open(path)?;
                Ok((
                    db,
                    vec![format!(
                        "the memory database was unreadable ({source}); it was moved to {} and recreated",
                        aside.display()
                    )],
                ))
            }
            Err(e) => Err(e),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn setup(&self) -> rusqlite::Result<()> {
        self.conn.busy_timeout(Duration::from_secs(5))?;
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            self.conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))?;
        }
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        self.migrate()
    }

    fn version(&self) -> rusqlite::Result<usize> {
        let exists: Option<String> = self
            .conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'memory_schema_migrations'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        if exists.is_none() {
            return Ok(0);
        }
        let v: Option<i64> = self.conn.query_row(
            "SELECT MAX(version) FROM memory_schema_migrations",
            [],
            |r| r.get(0),
        )?;
        Ok(usize::try_from(v.unwrap_or(0)).unwrap_or(0))
    }

    fn migrate(&self) -> rusqlite::Result<()> {
        if self.version()? >= MIGRATIONS.len() {
            return Ok(());
        }
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let result = (|| {
            self.conn.execute_batch(
                "CREATE TABLE IF NOT EXISTS memory_schema_migrations (
                    version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
            )?;
            let current = self.version()?;
            for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
                self.conn.execute_batch(sql)?;
                self.conn.execute(
                    "INSERT INTO memory_schema_migrations (version, applied_at) VALUES (?1, ?2)",
                    params![
                        i64::try_from(i + 1).unwrap_or(i64::MAX),
                        crate::clock::Clock::now_ms(&crate::clock::SystemClock)
                    ],
                )?;
            }
            Ok(())
        })();
        match result {
            Ok(()) => self.conn.execute_batch("COMMIT"),
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    fn err(&self, e: rusqlite::Error) -> MemoryError {
        MemoryError::db(&self.path, e)
    }

    /// Runs `work` in one write transaction.
    pub(crate) fn batch<T>(
        &self,
        work: impl FnOnce(&MemoryDb) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        if !self.conn.is_autocommit() {
            return work(self);
        }
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| self.err(e))?;
        match work(self) {
            Ok(value) => {
                self.conn.execute_batch("COMMIT").map_err(|e| self.err(e))?;
                Ok(value)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Inserts `entry` (its id is ignored) and returns the new id.
    pub(crate) fn insert(&self, e: &Entry) -> Result<i64, MemoryError> {
        self.conn
            .execute(
                "INSERT INTO memory_entries (tier, kind, content, tags, importance, session_id,
                   created_at, last_access, access_count, status, source_id, suggested_tier, note)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    e.tier.as_str(),
                    e.kind.as_str(),
                    e.content,
                    e.tags.join(","),
                    i64::from(e.importance),
                    e.session_id,
                    e.created_at,
                    e.last_access,
                    e.access_count,
                    e.status.as_str(),
                    e.source_id,
                    e.suggested_tier.map(Tier::as_str),
                    e.note,
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// One entry.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::Database`].
    pub fn get(&self, id: i64) -> Result<Entry, MemoryError> {
        self.conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM memory_entries WHERE id = ?1"),
                [id],
                entry,
            )
            .optional()
            .map_err(|e| self.err(e))?
            .ok_or(MemoryError::NotFound(id))
    }

    /// Entries matching `filter`, oldest first.
    pub(crate) fn entries(&self, filter: &Filter<'_>) -> Result<Vec<Entry>, MemoryError> {
        let mut sql = format!("SELECT {COLUMNS} FROM memory_entries WHERE 1 = 1");
        let mut values: Vec<rusqlite::types::Value> = Vec::new();
        let mut list = |column: &str, items: Vec<&'static str>, sql: &mut String| {
            if items.is_empty() {
                return;
            }
            sql.push_str(&format!(
                " AND {column} IN ({})",
                vec!["?"; items.len()].join(", ")
            ));
            values.extend(
                items
                    .into_iter()
                    .map(|s| rusqlite::types::Value::Text(s.to_owned())),
            );
        };
        list(
            "tier",
            filter.tiers.iter().map(|t| t.as_str()).collect(),
            &mut sql,
        );
        list(
            "status",
            filter.statuses.iter().map(|s| s.as_str()).collect(),
            &mut sql,
        );
        if let Some(since) = filter.since {
            sql.push_str(" AND (created_at >= ? OR last_access >= ?)");
            values.push(rusqlite::types::Value::Integer(since));
            values.push(rusqlite::types::Value::Integer(since));
        }
        sql.push_str(" ORDER BY id");
        let mut stmt = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params_from_iter(values), entry)
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    /// Sets an entry's status and note.
    pub(crate) fn set_status(
        &self,
        id: i64,
        status: Status,
        note: Option<&str>,
    ) -> Result<(), MemoryError> {
        self.conn
            .execute(
                "UPDATE memory_entries SET status = ?2, note = COALESCE(?3, note) WHERE id = ?1",
                params![id, status.as_str(), note],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Moves an entry to another tier.
    pub(crate) fn set_tier(&self, id: i64, tier: Tier, note: &str) -> Result<(), MemoryError> {
        self.conn
            .execute(
                "UPDATE memory_entries SET tier = ?2, note = ?3 WHERE id = ?1",
                params![id, tier.as_str(), note],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Records a recall of `ids` at `now`.
    pub(crate) fn touch(&self, ids: &[i64], now: i64) -> Result<(), MemoryError> {
        self.batch(|db| {
            for id in ids {
                db.conn
                    .execute(
                        "UPDATE memory_entries SET last_access = ?2, access_count = access_count + 1 WHERE id = ?1",
                        params![id, now],
                    )
                    .map_err(|e| db.err(e))?;
            }
            Ok(())
        })
    }

    /// Deletes entries (the daily log's reviewed entries, pruned).
    pub(crate) fn delete(&self, ids: &[i64]) -> Result<(), MemoryError> {
        self.batch(|db| {
            for id in ids {
                db.conn
                    .execute("DELETE FROM memory_entries WHERE id = ?1", [id])
                    .map_err(|e| db.err(e))?;
                db.conn
                    .execute("DELETE FROM memory_vectors WHERE entry_id = ?1", [id])
                    .map_err(|e| db.err(e))?;
            }
            Ok(())
        })
    }

    /// The stored vectors of `model`, by entry id.
    pub(crate) fn vectors(&self, model: &str) -> Result<HashMap<i64, Vec<f32>>, MemoryError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT entry_id, vector FROM memory_vectors WHERE model = ?1")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([model], |r| {
                let bytes: Vec<u8> = r.get(1)?;
                Ok((
                    r.get::<_, i64>(0)?,
                    bytes
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect::<Vec<f32>>(),
                ))
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<HashMap<_, _>>>()
            .map_err(|e| self.err(e))
    }

    /// Stores the vector of `entry_id` under `model`.
    pub(crate) fn put_vector(
        &self,
        entry_id: i64,
        model: &str,
        vector: &[f32],
    ) -> Result<(), MemoryError> {
        let bytes: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
        self.conn
            .execute(
                "INSERT INTO memory_vectors (entry_id, model, dims, vector) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (entry_id, model) DO UPDATE SET dims = ?3, vector = ?4",
                params![
                    entry_id,
                    model,
                    i64::try_from(vector.len()).unwrap_or(i64::MAX),
                    bytes
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Marks `old` superseded by `new` and writes the audit row.
    pub(crate) fn supersede(
        &self,
        old: &Entry,
        new: Option<i64>,
        reason: &str,
        now: i64,
    ) -> Result<(), MemoryError> {
        self.conn
            .execute(
                "INSERT INTO memory_superseded (entry_id, tier, old_content, new_entry_id, reason, superseded_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![old.id, old.tier.as_str(), old.content, new, reason, now],
            )
            .map_err(|e| self.err(e))?;
        self.set_status(old.id, Status::Superseded, Some(reason))
    }

    /// The superseded-entries audit trail, newest first.
    ///
    /// # Errors
    /// [`MemoryError::Database`].
    pub fn superseded(&self, limit: usize) -> Result<Vec<SupersededEntry>, MemoryError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT entry_id, tier, old_content, new_entry_id, reason, superseded_at
                 FROM memory_superseded ORDER BY id DESC LIMIT ?1",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
                Ok(SupersededEntry {
                    entry_id: r.get(0)?,
                    tier: Tier::parse(&r.get::<_, String>(1)?).unwrap_or(Tier::Daily),
                    old_content: r.get(2)?,
                    new_entry_id: r.get(3)?,
                    reason: r.get(4)?,
                    superseded_at: r.get(5)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    /// How many entries each (tier, status) has.
    ///
    /// # Errors
    /// [`MemoryError::Database`].
    pub fn counts(&self) -> Result<Vec<(Tier, Status, i64)>, MemoryError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT tier, status, COUNT(*) FROM memory_entries GROUP BY tier, status ORDER BY tier, status",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (tier, status, n) = row.map_err(|e| self.err(e))?;
            if let (Some(t), Some(s)) = (Tier::parse(&tier), Status::parse(&status)) {
                out.push((t, s, n));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_garbage_file_is_moved_aside_and_recreated() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(".weft/weft.db");
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, vec![0x42u8; 8192]).expect("write");
        let (db, notes) = MemoryDb::open_healing(&path).expect("healed");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(db.counts().expect("counts").is_empty());
    }

    #[test]
    fn migrations_run_once_beside_other_tables() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("weft.db");
        {
            let conn = Connection::open(&path).expect("open");
            conn.execute_batch(
                "CREATE TABLE gate_policies (id TEXT); INSERT INTO gate_policies VALUES ('p');",
            )
            .expect("other table");
        }
        drop(MemoryDb::open(&path).expect("first"));
        let db = MemoryDb::open(&path).expect("second");
        assert_eq!(db.version().expect("version"), MIGRATIONS.len());
        let n: i64 = db
            .conn
            .query_row("SELECT COUNT(*) FROM gate_policies", [], |r| r.get(0))
            .expect("kept");
        assert_eq!(n, 1);
    }
}
