//! Keeping the store bounded: deleting a run with everything recorded for it
//! ([`Store::delete_run`]), and collecting what no run or checkpoint refers to any more, then
//! giving the space back to the file system ([`Store::gc`]). Both work alike on SQLite and
//! PostgreSQL.
//!
//! Whether a run may be deleted (not while a live process drives it) is the caller's rule:
//! the store has no notion of a live owner.

use crate::error::StoreError;
use crate::sql::{Stmt, stmt};
use crate::store::{Store, ThreadCache, thread_key};

/// What [`Store::delete_run`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeletedRun {
    /// The run.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// Whether the thread (its checkpoints and history, side B's included) went too: `false`
    /// when another run still uses it.
    pub thread_deleted: bool,
}

/// What [`Store::gc`] collected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GcReport {
    /// History rows (`checkpoint_items`) no checkpoint refers to.
    pub history_rows: u64,
    /// Ledger rows (tool calls and recorded model responses) of runs that no longer exist.
    pub ledger_rows: u64,
}

impl GcReport {
    /// Rows removed in all.
    pub fn total(&self) -> u64 {
        self.history_rows + self.ledger_rows
    }
}

/// Orphaned history: a thread with no checkpoint, or rows older than the oldest message any
/// remaining checkpoint of the thread refers to.
const ORPHAN_HISTORY: &str = "FROM checkpoint_items WHERE thread_key NOT IN \
     (SELECT t.id FROM checkpoint_threads t WHERE t.thread_id IN (SELECT thread_id FROM checkpoints)) \
     OR seq < (SELECT MIN(c.min_message_seq) FROM checkpoints c JOIN checkpoint_threads t \
     ON t.thread_id = c.thread_id WHERE t.id = checkpoint_items.thread_key)";

/// Ledger tables keyed by a run.
const RUN_TABLES: [&str; 2] = ["tool_calls", "model_responses"];

impl Store {
    /// Deletes the run `run_id` and everything recorded for it: its event log, tool ledger,
    /// recorded responses, artifacts, agent lineage, the threads of its child runs (a child
    /// run's thread has its lineage node's id, and is the run's alone), and — when no other
    /// run uses its thread — the thread's checkpoints and history (side B's, `THREAD.sideB`,
    /// too). Returns `None` when there is no such run.
    ///
    /// # Errors
    /// Database failures.
    ///
    /// # Cancel safety
    /// The deletion is one transaction: dropping the future leaves the run whole or gone.
    pub async fn delete_run(&self, run_id: &str) -> Result<Option<DeletedRun>, StoreError> {
        self.flush().await?;
        let rows = self
            .query(stmt!(
                "SELECT thread_id FROM runs WHERE run_id = $1",
                run_id
            ))
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let thread_id = row.text(0)?;
        let others = self
            .query(stmt!(
                "SELECT COUNT(*) FROM runs WHERE thread_id = $1 AND run_id <> $2",
                thread_id.as_str(),
                run_id
            ))
            .await?
            .first()
            .map_or(Ok(0), |r| r.uint(0))?;
        let thread_deleted = others == 0;
        // The threads of the run's child runs (subagents): lineage nodes below the root
        // whose id is a thread linked to a parent.
        let children: Vec<String> = self
            .query(stmt!(
                "SELECT t.id FROM agent_lineage a JOIN threads t ON t.id = a.id \
                 WHERE a.run_id = $1 AND a.parent_agent_id IS NOT NULL AND t.parent_thread_id IS NOT NULL",
                run_id
            ))
            .await?
            .iter()
            .map(|r| r.text(0))
            .collect::<Result<_, _>>()?;
        let mut stmts = vec![
            stmt!("DELETE FROM artifacts WHERE run_id = $1", run_id),
            stmt!("DELETE FROM events WHERE run_id = $1", run_id),
            stmt!("DELETE FROM tool_calls WHERE run_id = $1", run_id),
            stmt!("DELETE FROM model_responses WHERE run_id = $1", run_id),
            stmt!("DELETE FROM agent_lineage WHERE run_id = $1", run_id),
            stmt!("DELETE FROM runs WHERE run_id = $1", run_id),
        ];
        let side_b = format!("{thread_id}.sideB");
        let mut gone: Vec<String> = Vec::new();
        if thread_deleted {
            gone.extend([thread_id.clone(), side_b.clone()]);
        }
        for child in &children {
            gone.extend([child.clone(), format!("{child}.sideB")]);
        }
        for thread in gone.iter().map(String::as_str) {
            stmts.push(stmt!(
                "UPDATE artifacts SET checkpoint_id = NULL WHERE checkpoint_id IN (SELECT id FROM checkpoints WHERE thread_id = $1)",
                thread
            ));
            stmts.push(stmt!(
                "DELETE FROM checkpoints WHERE thread_id = $1",
                thread
            ));
            stmts.push(stmt!(
                concat!(
                    "DELETE FROM checkpoint_items WHERE thread_key = ",
                    thread_key!()
                ),
                thread
            ));
            stmts.push(stmt!(
                "DELETE FROM checkpoint_threads WHERE thread_id = $1",
                thread
            ));
            stmts.push(stmt!("DELETE FROM threads WHERE id = $1", thread));
        }
        // Hold the threads' caches while their rows go, then forget them.
        let caches = [self.cache(&thread_id), self.cache(&side_b)];
        let mut guard_a = caches[0].lock().await;
        let mut guard_b = caches[1].lock().await;
        let child_caches: Vec<_> = children
            .iter()
            .flat_map(|c| [self.cache(c), self.cache(&format!("{c}.sideB"))])
            .collect();
        let mut child_guards = Vec::with_capacity(child_caches.len());
        for cache in &child_caches {
            child_guards.push(cache.lock().await);
        }
        self.commit(None, stmts).await?;
        if thread_deleted {
            *guard_a = ThreadCache::default();
            *guard_b = ThreadCache::default();
        }
        for guard in &mut child_guards {
            **guard = ThreadCache::default();
        }
        Ok(Some(DeletedRun {
            run_id: run_id.to_owned(),
            thread_id,
            thread_deleted,
        }))
    }

    /// Deletes the thread `thread_id` with every run on it (as [`Store::delete_run`] each:
    /// logs, ledgers, artifacts, lineage), its checkpoints and history (side B's,
    /// `THREAD.sideB`, too) and its record. Returns whether there was such a thread (a record
    /// or a checkpoint).
    ///
    /// # Errors
    /// Database failures.
    ///
    /// # Cancel safety
    /// Each run's deletion is one transaction, and the thread's own rows another: dropping
    /// the future may leave some runs deleted and the thread whole, never a run half gone.
    pub async fn delete_thread(&self, thread_id: &str) -> Result<bool, StoreError> {
        self.flush().await?;
        let runs = self
            .query(stmt!(
                "SELECT run_id FROM runs WHERE thread_id = $1",
                thread_id
            ))
            .await?;
        for row in &runs {
            self.delete_run(&row.text(0)?).await?;
        }
        let side_b = format!("{thread_id}.sideB");
        let found = self
            .query(stmt!(
                "SELECT (SELECT COUNT(*) FROM threads WHERE id = $1) + (SELECT COUNT(*) FROM checkpoints WHERE thread_id = $1)",
                thread_id
            ))
            .await?
            .first()
            .map_or(Ok(0), |r| r.uint(0))?;
        let mut stmts = Vec::new();
        for thread in [thread_id, side_b.as_str()] {
            stmts.push(stmt!(
                "UPDATE artifacts SET checkpoint_id = NULL WHERE checkpoint_id IN (SELECT id FROM checkpoints WHERE thread_id = $1)",
                thread
            ));
            stmts.push(stmt!(
                "DELETE FROM checkpoints WHERE thread_id = $1",
                thread
            ));
            stmts.push(stmt!(
                concat!(
                    "DELETE FROM checkpoint_items WHERE thread_key = ",
                    thread_key!()
                ),
                thread
            ));
            stmts.push(stmt!(
                "DELETE FROM checkpoint_threads WHERE thread_id = $1",
                thread
            ));
            stmts.push(stmt!("DELETE FROM threads WHERE id = $1", thread));
            stmts.push(stmt!(
                "DELETE FROM thread_queue WHERE thread_id = $1",
                thread
            ));
            stmts.push(stmt!("DELETE FROM queue_sent WHERE thread_id = $1", thread));
            stmts.push(stmt!(
                "DELETE FROM scheduled_effects WHERE thread_id = $1",
                thread
            ));
        }
        // Its child registry; its own entry stays in its parent's (the parent's history).
        stmts.push(stmt!(
            "DELETE FROM subagent_children WHERE parent_thread_id = $1",
            thread_id
        ));
        let caches = [self.cache(thread_id), self.cache(&side_b)];
        let mut guard_a = caches[0].lock().await;
        let mut guard_b = caches[1].lock().await;
        self.commit(None, stmts).await?;
        *guard_a = ThreadCache::default();
        *guard_b = ThreadCache::default();
        Ok(found > 0 || !runs.is_empty())
    }

    /// Collects what nothing refers to any more — history rows no checkpoint needs, ledger
    /// rows of deleted runs — and gives the space back (SQLite: a WAL checkpoint and
    /// `VACUUM`; PostgreSQL: `VACUUM` of Weft's tables). Safe while runs are being driven:
    /// it removes nothing a live run or checkpoint refers to.
    ///
    /// # Errors
    /// Database failures.
    pub async fn gc(&self) -> Result<GcReport, StoreError> {
        self.flush().await?;
        let count = |sql: String| async move {
            self.query(Stmt::new(sql, Vec::new()))
                .await?
                .first()
                .map_or(Ok(0), |r| r.uint(0))
        };
        let mut report = GcReport {
            history_rows: count(format!("SELECT COUNT(*) {ORPHAN_HISTORY}")).await?,
            ..GcReport::default()
        };
        let mut stmts = vec![Stmt::new(format!("DELETE {ORPHAN_HISTORY}"), Vec::new())];
        for table in RUN_TABLES {
            let orphans = format!("FROM {table} WHERE run_id NOT IN (SELECT run_id FROM runs)");
            report.ledger_rows += count(format!("SELECT COUNT(*) {orphans}")).await?;
            stmts.push(Stmt::new(format!("DELETE {orphans}"), Vec::new()));
        }
        self.commit(None, stmts).await?;
        self.shared.backend.compact().await?;
        Ok(report)
    }
}
