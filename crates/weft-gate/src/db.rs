//! The gate's tables in the project's SQLite file (`.weft/weft.db`, the file `weft-store`
//! uses): policies, the audit trail, and coordination state (live agents and their claims).
//!
//! **Invariants:** every table is prefixed `gate_` and versioned by its own
//! `gate_schema_migrations` rows (append-only: a released migration is never edited), so the
//! store's migrations and these never touch each other's tables. The connection is plain,
//! synchronous rusqlite: no threads, no async runtime, so a hook stays within a few
//! milliseconds. A file that is not a database (or is corrupt) is moved aside to
//! `weft.db.corrupt-<millis>` and recreated ([`GateDb::open_healing`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, ErrorCode, OptionalExtension, params};

use crate::error::GateError;
use crate::invocation::Stage;
use crate::policy::Policy;
use crate::verdict::Level;

/// The migrations, in order; version = index + 1.
const MIGRATIONS: &[&str] = &[
    // V1: policies, audit trail, agents and claims.
    "CREATE TABLE gate_policies (
        id TEXT PRIMARY KEY,
        description TEXT NOT NULL DEFAULT '',
        level TEXT NOT NULL,
        stage TEXT NOT NULL,
        tools TEXT NOT NULL DEFAULT '*',
        deny_pattern TEXT,
        enforcer TEXT,
        enabled INTEGER NOT NULL DEFAULT 1,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE gate_audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        session_id TEXT,
        agent_id TEXT,
        harness TEXT NOT NULL,
        event TEXT NOT NULL,
        tool TEXT,
        summary TEXT,
        stage TEXT,
        gate TEXT NOT NULL,
        policy_id TEXT,
        level TEXT,
        passed INTEGER NOT NULL,
        message TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX gate_audit_at ON gate_audit (at);
    CREATE INDEX gate_audit_session ON gate_audit (session_id, event, id);
    CREATE TABLE gate_agents (
        session_id TEXT PRIMARY KEY,
        agent_id TEXT,
        harness TEXT NOT NULL,
        cwd TEXT,
        started_at INTEGER NOT NULL,
        last_seen INTEGER NOT NULL,
        task TEXT,
        first_task_at INTEGER,
        first_edit_at INTEGER
    );
    CREATE TABLE gate_claims (
        path TEXT NOT NULL,
        session_id TEXT NOT NULL,
        claimed_at INTEGER NOT NULL,
        PRIMARY KEY (path, session_id)
    );",
    // V2: the protocol state a session had when its context was compacted (pre-compact
    // saves it; session start with `source: compact` injects it again).
    "CREATE TABLE gate_snapshots (
        session_id TEXT PRIMARY KEY,
        saved_at INTEGER NOT NULL,
        trigger TEXT,
        state TEXT NOT NULL,
        compacted_at INTEGER,
        summary TEXT
    );",
];

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// One row of the audit trail.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditEntry {
    /// When (ms since the epoch).
    pub at: i64,
    /// The harness's session.
    pub session_id: Option<String>,
    /// The sub-agent, when one made the call.
    pub agent_id: Option<String>,
    /// `claude`, `cursor`, `codex`, `weft`, `cli`.
    pub harness: String,
    /// `pre-tool-use`, `post-tool-use`, `stop`, `session-start`, …
    pub event: String,
    /// The tool's name.
    pub tool: Option<String>,
    /// A clipped one-line description of the call.
    pub summary: Option<String>,
    /// The stage.
    pub stage: Option<String>,
    /// `worktree`, `command`, `policy`, `completion:<check>`, or `verdict` for the outcome.
    pub gate: String,
    /// The policy's id.
    pub policy_id: Option<String>,
    /// The level.
    pub level: Option<String>,
    /// Whether the check passed.
    pub passed: bool,
    /// Why it failed, or a note.
    pub message: String,
}

/// A live agent and what it claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRow {
    /// Its session.
    pub session_id: String,
    /// Its harness.
    pub harness: String,
    /// When it was last heard from (ms).
    pub last_seen: i64,
    /// The paths it edits.
    pub claims: Vec<String>,
}

/// What a session did about tasks and edits (for the task-discipline check).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskTrace {
    /// When a task first went `in_progress`.
    pub first_task_at: Option<i64>,
    /// When the first edit was allowed.
    pub first_edit_at: Option<i64>,
}

/// A connection to the gate tables.
#[derive(Debug)]
pub struct GateDb {
    conn: Connection,
    path: PathBuf,
}

impl GateDb {
    /// The database of the project at `root`: `WEFT_DATABASE_URL` when it names a SQLite
    /// file (`sqlite:PATH`), else `root/.weft/weft.db`.
    pub fn path_for(root: &Path) -> PathBuf {
        // One project file for the store, the gate and the memory.
        weft_memory::MemoryDb::path_for(root)
    }

    /// Opens (creating the file and its folder) and migrates.
    ///
    /// # Errors
    /// [`GateError::Database`] or [`GateError::Io`].
    pub fn open(path: &Path) -> Result<GateDb, GateError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| GateError::io(dir, e))?;
        }
        let conn = Connection::open(path).map_err(|e| GateError::db(path, e))?;
        let db = GateDb {
            conn,
            path: path.to_path_buf(),
        };
        db.setup().map_err(|e| GateError::db(path, e))?;
        Ok(db)
    }

    /// [`GateDb::open`], but a file that is not a database, or is corrupt, is moved aside and
    /// recreated. The notes say what was done.
    ///
    /// # Errors
    /// When the database still cannot be opened (e.g. a read-only folder).
    pub fn open_healing(path: &Path) -> Result<(GateDb, Vec<String>), GateError> {
        match GateDb::open(path) {
            Ok(db) => Ok((db, Vec::new())),
            Err(GateError::Database { source, .. }) if is_corruption(&source) => {
                let aside = PathBuf::from(format!("{}.corrupt-{}", path.display(), now_ms()));
                std::fs::rename(path, &aside).map_err(|e| GateError::io(path, e))?;
                for suffix in ["-wal", "-shm"] {
                    let side = PathBuf::from(format!("{}{suffix}", path.display()));
                    if side.exists() {
                        let _ = std::fs::rename(
                            &side,
                            PathBuf::from(format!("{}{suffix}", aside.display())),
                        );
                    }
                }
                let db = GateDb::open(path)?;
                Ok((
                    db,
                    vec![format!(
                        "the database was unreadable ({source}); it was moved to {} and recreated",
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
        // Each hook is a short process, usually the file's only connection: without this,
        // every exit would checkpoint the WAL with fsyncs. The WAL is truncated on drop
        // instead, once it passes WAL_TRUNCATE_BYTES (see `Drop`).
        self.conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        )?;
        self.migrate()
    }

    fn version(&self) -> rusqlite::Result<usize> {
        let exists: Option<String> = self
            .conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'gate_schema_migrations'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        if exists.is_none() {
            return Ok(0);
        }
        let v: Option<i64> =
            self.conn
                .query_row("SELECT MAX(version) FROM gate_schema_migrations", [], |r| {
                    r.get(0)
                })?;
        Ok(usize::try_from(v.unwrap_or(0)).unwrap_or(0))
    }

    fn migrate(&self) -> rusqlite::Result<()> {
        if self.version()? >= MIGRATIONS.len() {
            return Ok(());
        }
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let result = (|| {
            self.conn.execute_batch(
                "CREATE TABLE IF NOT EXISTS gate_schema_migrations (
                    version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
            )?;
            // Another process may have migrated while this one waited for the lock.
            let current = self.version()?;
            for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
                self.conn.execute_batch(sql)?;
                self.conn.execute(
                    "INSERT INTO gate_schema_migrations (version, applied_at) VALUES (?1, ?2)",
                    params![i64::try_from(i + 1).unwrap_or(i64::MAX), now_ms()],
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

    fn err(&self, e: rusqlite::Error) -> GateError {
        GateError::db(&self.path, e)
    }

    /// Every policy, enabled or not, by id.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn policies(&self) -> Result<Vec<Policy>, GateError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, description, level, stage, tools, deny_pattern, enforcer, enabled
                 FROM gate_policies ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, Option<String>>(6)?,
                    r.get::<_, bool>(7)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, description, level, stage, tools, deny_pattern, enforcer, enabled) =
                row.map_err(|e| self.err(e))?;
            out.push(Policy {
                id,
                description,
                // An unknown level is treated as REQUIRED: fail closed.
                level: Level::parse(&level).unwrap_or(Level::Required),
                stage: Stage::parse(&stage).unwrap_or(Stage::Always),
                tools,
                deny_pattern,
                enforcer,
                enabled,
            });
        }
        Ok(out)
    }

    /// Adds a policy, or replaces the one with the same id.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn put_policy(&self, policy: &Policy) -> Result<(), GateError> {
        let now = now_ms();
        self.conn
            .execute(
                "INSERT INTO gate_policies
                   (id, description, level, stage, tools, deny_pattern, enforcer, enabled, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)
                 ON CONFLICT (id) DO UPDATE SET description = ?2, level = ?3, stage = ?4, tools = ?5,
                   deny_pattern = ?6, enforcer = ?7, enabled = ?8, updated_at = ?9",
                params![
                    policy.id,
                    policy.description,
                    policy.level.as_str(),
                    policy.stage.as_str(),
                    policy.tools,
                    policy.deny_pattern,
                    policy.enforcer,
                    policy.enabled,
                    now
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Removes a policy; whether it existed.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn remove_policy(&self, id: &str) -> Result<bool, GateError> {
        let n = self
            .conn
            .execute("DELETE FROM gate_policies WHERE id = ?1", [id])
            .map_err(|e| self.err(e))?;
        Ok(n > 0)
    }

    /// Turns a policy on or off; whether it exists.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn set_policy_enabled(&self, id: &str, enabled: bool) -> Result<bool, GateError> {
        let n = self
            .conn
            .execute(
                "UPDATE gate_policies SET enabled = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, enabled, now_ms()],
            )
            .map_err(|e| self.err(e))?;
        Ok(n > 0)
    }

    /// Runs `work` in one write transaction (one WAL append for all of a hook's writes).
    ///
    /// # Errors
    /// [`GateError::Database`], or `work`'s error (the transaction is then rolled back).
    pub fn batch<T>(
        &self,
        work: impl FnOnce(&GateDb) -> Result<T, GateError>,
    ) -> Result<T, GateError> {
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

    /// Appends rows to the audit trail, in one transaction.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn audit(&self, entries: &[AuditEntry]) -> Result<(), GateError> {
        self.batch(|db| {
            let mut stmt = db
                .conn
                .prepare_cached(
                    "INSERT INTO gate_audit (at, session_id, agent_id, harness, event, tool, summary,
                       stage, gate, policy_id, level, passed, message)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                )
                .map_err(|e| db.err(e))?;
            for e in entries {
                stmt.execute(params![
                    e.at,
                    e.session_id,
                    e.agent_id,
                    e.harness,
                    e.event,
                    e.tool,
                    e.summary,
                    e.stage,
                    e.gate,
                    e.policy_id,
                    e.level,
                    e.passed,
                    e.message
                ])
                .map_err(|e| db.err(e))?;
            }
            Ok(())
        })
    }

    /// The newest audit rows (newest first), optionally only failures, since `since` (ms).
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn recent_audit(
        &self,
        since: i64,
        only_failures: bool,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, GateError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT at, session_id, agent_id, harness, event, tool, summary, stage, gate,
                        policy_id, level, passed, message
                 FROM gate_audit WHERE at >= ?1 AND (?2 = 0 OR (passed = 0 AND gate != 'verdict'))
                 ORDER BY id DESC LIMIT ?3",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(
                params![
                    since,
                    only_failures,
                    i64::try_from(limit).unwrap_or(i64::MAX)
                ],
                |r| {
                    Ok(AuditEntry {
                        at: r.get(0)?,
                        session_id: r.get(1)?,
                        agent_id: r.get(2)?,
                        harness: r.get(3)?,
                        event: r.get(4)?,
                        tool: r.get(5)?,
                        summary: r.get(6)?,
                        stage: r.get(7)?,
                        gate: r.get(8)?,
                        policy_id: r.get(9)?,
                        level: r.get(10)?,
                        passed: r.get(11)?,
                        message: r.get(12)?,
                    })
                },
            )
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    /// Open loops: sessions whose latest stop was refused by the completion checklist,
    /// since `since` — `(session, when, why)`.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn open_loops(&self, since: i64) -> Result<Vec<(String, i64, String)>, GateError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT COALESCE(a.session_id, ''), a.at, a.message FROM gate_audit a
                 WHERE a.event IN ('stop', 'subagent-stop') AND a.gate = 'verdict' AND a.at >= ?1
                   AND a.passed = 0
                   AND a.id = (SELECT MAX(b.id) FROM gate_audit b
                               WHERE b.event IN ('stop', 'subagent-stop') AND b.gate = 'verdict'
                                 AND b.session_id IS a.session_id)
                 ORDER BY a.id DESC LIMIT 10",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([since], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    /// Registers a session (or refreshes its heartbeat).
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn heartbeat(
        &self,
        session_id: &str,
        agent_id: Option<&str>,
        harness: &str,
        cwd: &Path,
    ) -> Result<(), GateError> {
        let now = now_ms();
        self.conn
            .execute(
                "INSERT INTO gate_agents (session_id, agent_id, harness, cwd, started_at, last_seen)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5)
                 ON CONFLICT (session_id) DO UPDATE SET last_seen = ?5, cwd = ?4",
                params![session_id, agent_id, harness, cwd.to_string_lossy(), now],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Records that `session_id` has a task in progress (the first time only counts).
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn task_started(&self, session_id: &str, task: &str) -> Result<(), GateError> {
        self.conn
            .execute(
                "UPDATE gate_agents SET task = ?2, first_task_at = COALESCE(first_task_at, ?3)
                 WHERE session_id = ?1",
                params![session_id, task, now_ms()],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Records an allowed edit of `paths` by `session_id`: claims them.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn edited(&self, session_id: &str, paths: &[String]) -> Result<(), GateError> {
        let now = now_ms();
        self.conn
            .execute(
                "UPDATE gate_agents SET first_edit_at = COALESCE(first_edit_at, ?2) WHERE session_id = ?1",
                params![session_id, now],
            )
            .map_err(|e| self.err(e))?;
        for path in paths {
            self.conn
                .execute(
                    "INSERT INTO gate_claims (path, session_id, claimed_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (path, session_id) DO UPDATE SET claimed_at = ?3",
                    params![path, session_id, now],
                )
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// The protocol state of a session, as a few lines: where it works, its task in
    /// progress, the files it edited. Empty when the session is unknown.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn session_state(&self, session_id: &str) -> Result<Vec<String>, GateError> {
        let row: Option<(Option<String>, Option<String>)> = self
            .conn
            .query_row(
                "SELECT cwd, task FROM gate_agents WHERE session_id = ?1",
                [session_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some((cwd, task)) = row else {
            return Ok(Vec::new());
        };
        let mut lines = Vec::new();
        if let Some(cwd) = cwd {
            lines.push(format!("Working directory: {cwd}"));
        }
        if let Some(task) = task {
            lines.push(format!("Task in progress: {task}"));
        }
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT path FROM gate_claims WHERE session_id = ?1 ORDER BY claimed_at, path LIMIT 20",
            )
            .map_err(|e| self.err(e))?;
        let paths = stmt
            .query_map([session_id], |r| r.get::<_, String>(0))
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))?;
        if !paths.is_empty() {
            lines.push(format!("Files edited this session: {}", paths.join(", ")));
        }
        Ok(lines)
    }

    /// Saves the protocol state of a session before its context is compacted.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn save_snapshot(
        &self,
        session_id: &str,
        trigger: Option<&str>,
        state: &str,
    ) -> Result<(), GateError> {
        self.conn
            .execute(
                "INSERT INTO gate_snapshots (session_id, saved_at, trigger, state) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (session_id) DO UPDATE SET saved_at = ?2, trigger = ?3, state = ?4,
                     compacted_at = NULL, summary = NULL",
                params![session_id, now_ms(), trigger, state],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Records that the compaction of a session happened (with the harness's summary).
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn compacted(&self, session_id: &str, summary: Option<&str>) -> Result<bool, GateError> {
        let n = self
            .conn
            .execute(
                "UPDATE gate_snapshots SET compacted_at = ?2, summary = ?3 WHERE session_id = ?1",
                params![session_id, now_ms(), summary],
            )
            .map_err(|e| self.err(e))?;
        Ok(n > 0)
    }

    /// The saved state of a session: `(saved at, state)`.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn snapshot(&self, session_id: &str) -> Result<Option<(i64, String)>, GateError> {
        self.conn
            .query_row(
                "SELECT saved_at, state FROM gate_snapshots WHERE session_id = ?1",
                [session_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// When a session was first seen (ms), if it is registered.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn session_started(&self, session_id: &str) -> Result<Option<i64>, GateError> {
        self.conn
            .query_row(
                "SELECT started_at FROM gate_agents WHERE session_id = ?1",
                [session_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The task trace of a session.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn task_trace(&self, session_id: &str) -> Result<TaskTrace, GateError> {
        self.conn
            .query_row(
                "SELECT first_task_at, first_edit_at FROM gate_agents WHERE session_id = ?1",
                [session_id],
                |r| {
                    Ok(TaskTrace {
                        first_task_at: r.get(0)?,
                        first_edit_at: r.get(1)?,
                    })
                },
            )
            .optional()
            .map(Option::unwrap_or_default)
            .map_err(|e| self.err(e))
    }

    /// Deregisters agents not heard from for `ttl` and releases their claims:
    /// `(agents removed, claims released)`.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn clean_stale(&mut self, ttl: Duration) -> Result<(usize, usize), GateError> {
        let cutoff = now_ms() - i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction()
            .map_err(|e| GateError::db(&path, e))?;
        let agents = tx
            .execute("DELETE FROM gate_agents WHERE last_seen < ?1", [cutoff])
            .map_err(|e| GateError::db(&path, e))?;
        let claims = tx
            .execute(
                "DELETE FROM gate_claims WHERE session_id NOT IN (SELECT session_id FROM gate_agents)",
                [],
            )
            .map_err(|e| GateError::db(&path, e))?;
        tx.execute(
            "DELETE FROM gate_snapshots WHERE session_id NOT IN (SELECT session_id FROM gate_agents)",
            [],
        )
        .map_err(|e| GateError::db(&path, e))?;
        tx.commit().map_err(|e| GateError::db(&path, e))?;
        Ok((agents, claims))
    }

    /// The live agents other than `except`, with their claims.
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn other_agents(&self, except: Option<&str>) -> Result<Vec<AgentRow>, GateError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT a.session_id, a.harness, a.last_seen, c.path FROM gate_agents a
                 LEFT JOIN gate_claims c ON c.session_id = a.session_id
                 WHERE a.session_id IS NOT ?1 ORDER BY a.last_seen DESC, c.path",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([except], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, Option<String>>(3)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out: Vec<AgentRow> = Vec::new();
        for row in rows {
            let (session_id, harness, last_seen, claim) = row.map_err(|e| self.err(e))?;
            match out.last_mut() {
                Some(last) if last.session_id == session_id => last.claims.extend(claim),
                _ => out.push(AgentRow {
                    session_id,
                    harness,
                    last_seen,
                    claims: claim.into_iter().collect(),
                }),
            }
        }
        Ok(out)
    }

    /// Releases every claim of `session_id` under `dir` (a finished worktree).
    ///
    /// # Errors
    /// [`GateError::Database`].
    pub fn release_claims_under(&self, dir: &Path) -> Result<usize, GateError> {
        let prefix = format!("{}/%", dir.to_string_lossy());
        self.conn
            .execute("DELETE FROM gate_claims WHERE path LIKE ?1", [prefix])
            .map_err(|e| self.err(e))
    }
}

/// The WAL size past which a closing connection truncates it.
///
/// A process that opens the file as its only connection rebuilds the WAL index by reading
/// every frame of the WAL, and a WAL written by one-connection processes never restarts
/// (each recovery forgets what was checkpointed). So without a bound, every hook would read a
/// WAL that grows by every hook. With it, a hook reads at most ~512 KiB, and one hook in
/// ~30 pays the checkpoint's fsyncs.
const WAL_TRUNCATE_BYTES: u64 = 512 * 1024;

impl Drop for GateDb {
    fn drop(&mut self) {
        let wal = PathBuf::from(format!("{}-wal", self.path.display()));
        let big = std::fs::metadata(&wal).is_ok_and(|m| m.len() > WAL_TRUNCATE_BYTES);
        if big {
            // Never wait for another connection (a running `weft run`): try, or leave it.
            let _ = self.conn.busy_timeout(Duration::ZERO);
            let _ = self
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
    }
}

fn is_corruption(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
    )
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
        let (db, notes) = GateDb::open_healing(&path).expect("healed");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(db.policies().expect("policies").is_empty());
        let moved = std::fs::read_dir(path.parent().expect("parent"))
            .expect("dir")
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().contains("corrupt"));
        assert!(moved);
    }

    #[test]
    fn the_wal_stays_bounded_across_short_connections() {
        // One connection per hook process: a WAL nobody truncates would grow with every hook,
        // and every hook would read all of it on open.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("weft.db");
        let wal = dir.path().join("weft.db-wal");
        let row = AuditEntry {
            harness: "claude".into(),
            event: "pre-tool-use".into(),
            gate: "verdict".into(),
            message: "x".repeat(500),
            ..AuditEntry::default()
        };
        let mut largest = 0;
        for _ in 0..300 {
            let db = GateDb::open(&path).expect("open");
            db.audit(&vec![row.clone(); 8]).expect("audit");
            drop(db);
            largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        }
        assert!(
            largest <= WAL_TRUNCATE_BYTES + 256 * 1024,
            "the WAL reached {largest} bytes"
        );
        let db = GateDb::open(&path).expect("open");
        assert_eq!(db.recent_audit(0, false, 10_000).expect("rows").len(), 2400);
    }

    #[test]
    fn migrations_run_once_and_coexist_with_other_tables() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("weft.db");
        {
            let conn = Connection::open(&path).expect("open");
            conn.execute_batch(
                "CREATE TABLE runs (id TEXT PRIMARY KEY); INSERT INTO runs VALUES ('r1');",
            )
            .expect("store table");
        }
        drop(GateDb::open(&path).expect("first"));
        let db = GateDb::open(&path).expect("second");
        assert_eq!(db.version().expect("version"), MIGRATIONS.len());
        let runs: i64 = db
            .conn
            .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
            .expect("runs kept");
        assert_eq!(runs, 1);
    }
}
