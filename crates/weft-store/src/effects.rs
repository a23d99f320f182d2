//! [`ScheduledEffects`]: a thread's scheduled effects (Standard Agents `scheduleEffect` /
//! `getScheduledEffects` / `removeScheduledEffect`; schema 13). An effect is a named call with
//! arguments due at a time; when it is due it *fires*: [`ScheduledEffects::fire_effect`]
//! moves it into the thread's queue as a queued tool call ([`QueuedTool`]) in one transaction
//! — the row leaves the schedule and the queue entry (whose id is the effect's) appears
//! together, or neither does. A crash on either side of that commit loses nothing and fires
//! nothing twice, and two schedulers firing the same effect at once queue it once.

use async_trait::async_trait;
use serde::Serialize;

use crate::error::{StoreError, corrupt};
use crate::model::now_string;
use crate::queue::QueuedTool;
use crate::sql::{Row, stmt};
use crate::store::Store;

/// An effect waiting for its time on a thread.
///
/// # Examples
///
/// ```
/// # async fn demo() -> Result<(), weft_store::StoreError> {
/// use weft_store::{QueuedTool, ScheduledEffects as _, Store, ThreadQueue as _};
/// let store = Store::open("sqlite::memory:").await?;
/// let call = QueuedTool { name: "remind".into(), arguments: serde_json::json!({"about": "tea"}) };
/// let effect = store.schedule_effect("t1", &call, 1_000).await?;
/// assert_eq!(store.due_effects(999, 10).await?, vec![]);
/// assert_eq!(store.due_effects(1_000, 10).await?, vec![effect.clone()]);
/// store.fire_effect(&effect.id).await?;
/// assert_eq!(store.queued("t1").await?[0].id, effect.id);
/// assert!(store.scheduled_effects("t1").await?.is_empty());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledEffect {
    /// Its id (`e-` and 16 hex digits); the id of the queue entry it becomes.
    pub id: String,
    /// The thread.
    pub thread_id: String,
    /// The call it becomes when it fires: the effect's name (a tool of the thread's agent)
    /// and its arguments.
    pub call: QueuedTool,
    /// When it is due, in microseconds since the Unix epoch.
    pub due_at: i64,
    /// When it was scheduled (RFC 3339).
    pub created_at: String,
}

impl ScheduledEffect {
    fn from_row(row: &Row) -> Result<Self, StoreError> {
        let call =
            serde_json::from_str(&row.text(2)?).map_err(|e| corrupt("scheduled_effects", e))?;
        Ok(ScheduledEffect {
            id: row.text(0)?,
            thread_id: row.text(1)?,
            call,
            due_at: row.int(3)?,
            created_at: row.text(4)?,
        })
    }
}

const COLUMNS: &str = "SELECT id, thread_id, tool, due_at, created_at FROM scheduled_effects";

/// The due time of an effect set aside because its row does not decode
/// ([`ScheduledEffects::due_effects`]): the end of time, so it never fires.
pub const SET_ASIDE: i64 = i64::MAX;

/// The rows that decode, in order; those that do not are reported (with their ids) and
/// left out, so one bad row holds up no other effect.
fn decode_rows(rows: &[Row]) -> (Vec<ScheduledEffect>, Vec<String>) {
    let mut effects = Vec::with_capacity(rows.len());
    let mut bad = Vec::new();
    for row in rows {
        match ScheduledEffect::from_row(row) {
            Ok(effect) => effects.push(effect),
            Err(error) => {
                let id = row.text(0).unwrap_or_default();
                tracing::error!(%error, effect = %id, "a scheduled effect's row does not decode; it is left out");
                bad.push(id);
            }
        }
    }
    (effects, bad)
}

impl Store {
    /// Inserts the effect `id` (with `on_conflict` after the row's values); returns it as
    /// written.
    async fn insert_effect(
        &self,
        id: &str,
        thread: &str,
        call: &QueuedTool,
        due_at: i64,
        on_conflict: &str,
    ) -> Result<ScheduledEffect, StoreError> {
        let json = serde_json::to_string(call).map_err(|e| corrupt("scheduled_effects", e))?;
        let effect = ScheduledEffect {
            id: id.to_owned(),
            thread_id: thread.to_owned(),
            call: call.clone(),
            due_at,
            created_at: now_string(),
        };
        self.write_now(vec![stmt!(
            format!(
                "INSERT INTO scheduled_effects (id, thread_id, name, tool, due_at, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6){on_conflict}"
            ),
            effect.id.as_str(),
            thread,
            call.name.as_str(),
            json.as_str(),
            due_at,
            effect.created_at.as_str()
        )])
        .await?;
        Ok(effect)
    }
}

/// Durable scheduled effects, per thread (see the module docs).
#[async_trait]
pub trait ScheduledEffects: Send + Sync {
    /// Schedules `call` on `thread` at `due_at` (microseconds since the epoch; committed on
    /// return).
    ///
    /// # Errors
    /// Database failures.
    async fn schedule_effect(
        &self,
        thread: &str,
        call: &QueuedTool,
        due_at: i64,
    ) -> Result<ScheduledEffect, StoreError>;

    /// [`ScheduledEffects::schedule_effect`] under a given `id` (`e-` and 16 hex digits, as
    /// the store makes them): scheduling the same id again does nothing and returns the
    /// effect as first scheduled — a program that derives the id from what asked for it (a
    /// model's tool call, replayed after a crash) schedules it once.
    ///
    /// # Errors
    /// Database failures.
    async fn schedule_effect_once(
        &self,
        id: &str,
        thread: &str,
        call: &QueuedTool,
        due_at: i64,
    ) -> Result<ScheduledEffect, StoreError>;

    /// The effects scheduled on `thread`, soonest first (a row that does not decode is
    /// reported in the log and left out).
    ///
    /// # Errors
    /// Database failures.
    async fn scheduled_effects(&self, thread: &str) -> Result<Vec<ScheduledEffect>, StoreError>;

    /// The effect `id`, if it is still scheduled.
    ///
    /// # Errors
    /// Database failures.
    async fn scheduled_effect(&self, id: &str) -> Result<Option<ScheduledEffect>, StoreError>;

    /// Removes the effect `id`; whether it was still scheduled.
    ///
    /// # Errors
    /// Database failures.
    async fn remove_scheduled_effect(&self, id: &str) -> Result<bool, StoreError>;

    /// Removes every effect scheduled on `thread` (a terminated thread's).
    ///
    /// # Errors
    /// Database failures.
    async fn remove_thread_effects(&self, thread: &str) -> Result<(), StoreError>;

    /// When the soonest effect of any thread is due, if any is scheduled (one set aside
    /// does not count).
    ///
    /// # Errors
    /// Database failures.
    async fn next_effect_due(&self) -> Result<Option<i64>, StoreError>;

    /// At most `limit` effects due at `now` (microseconds), soonest first. A row that does
    /// not decode (its call is not the JSON Weft wrote: the file was edited by something
    /// else) is set aside — its due time becomes [`SET_ASIDE`], so it neither fires nor
    /// holds up the effects after it — and reported in the log with its id; it stays in the
    /// table, for a person to read or remove ([`ScheduledEffects::remove_scheduled_effect`]).
    ///
    /// # Errors
    /// Database failures.
    async fn due_effects(&self, now: i64, limit: usize)
    -> Result<Vec<ScheduledEffect>, StoreError>;

    /// Fires the effect `id`: in one transaction it leaves the schedule and its call joins
    /// its thread's queue under the effect's id (after what is queued already). An effect
    /// removed or fired before fires nothing. Whoever runs the thread's queue takes it from
    /// there.
    ///
    /// # Errors
    /// Database failures.
    async fn fire_effect(&self, id: &str) -> Result<(), StoreError>;

    /// The threads whose queue holds a fired effect no run has taken yet (a process that
    /// fired it may have died before starting the run): a scheduler starting up hands them
    /// to the queue's driver.
    ///
    /// # Errors
    /// Database failures.
    async fn threads_with_fired_effects(&self) -> Result<Vec<String>, StoreError>;
}

#[async_trait]
impl ScheduledEffects for Store {
    async fn schedule_effect(
        &self,
        thread: &str,
        call: &QueuedTool,
        due_at: i64,
    ) -> Result<ScheduledEffect, StoreError> {
        let id = format!("e-{:016x}", fastrand::u64(..));
        self.insert_effect(&id, thread, call, due_at, "").await
    }

    async fn schedule_effect_once(
        &self,
        id: &str,
        thread: &str,
        call: &QueuedTool,
        due_at: i64,
    ) -> Result<ScheduledEffect, StoreError> {
        let effect = self
            .insert_effect(id, thread, call, due_at, " ON CONFLICT (id) DO NOTHING")
            .await?;
        // Scheduled before: as it was scheduled then.
        Ok(self.scheduled_effect(id).await?.unwrap_or(effect))
    }

    async fn scheduled_effects(&self, thread: &str) -> Result<Vec<ScheduledEffect>, StoreError> {
        let rows = self
            .query(stmt!(
                format!("{COLUMNS} WHERE thread_id = $1 ORDER BY due_at, id"),
                thread
            ))
            .await?;
        Ok(decode_rows(&rows).0)
    }

    async fn scheduled_effect(&self, id: &str) -> Result<Option<ScheduledEffect>, StoreError> {
        let rows = self
            .query(stmt!(format!("{COLUMNS} WHERE id = $1"), id))
            .await?;
        rows.first().map(ScheduledEffect::from_row).transpose()
    }

    async fn remove_scheduled_effect(&self, id: &str) -> Result<bool, StoreError> {
        // By id alone: an effect whose row does not decode can be removed too.
        let rows = self
            .query(stmt!("SELECT id FROM scheduled_effects WHERE id = $1", id))
            .await?;
        if rows.is_empty() {
            return Ok(false);
        }
        self.write_now(vec![stmt!(
            "DELETE FROM scheduled_effects WHERE id = $1",
            id
        )])
        .await?;
        Ok(true)
    }

    async fn remove_thread_effects(&self, thread: &str) -> Result<(), StoreError> {
        self.write_now(vec![stmt!(
            "DELETE FROM scheduled_effects WHERE thread_id = $1",
            thread
        )])
        .await
    }

    async fn next_effect_due(&self) -> Result<Option<i64>, StoreError> {
        let rows = self
            .query(stmt!(
                "SELECT due_at FROM scheduled_effects WHERE due_at < $1 ORDER BY due_at LIMIT 1",
                SET_ASIDE
            ))
            .await?;
        rows.first().map(|row| row.int(0)).transpose()
    }

    async fn due_effects(
        &self,
        now: i64,
        limit: usize,
    ) -> Result<Vec<ScheduledEffect>, StoreError> {
        let rows = self
            .query(stmt!(
                format!(
                    "{COLUMNS} WHERE due_at <= $1 AND due_at < $3 ORDER BY due_at, id LIMIT $2"
                ),
                now,
                i64::try_from(limit).unwrap_or(i64::MAX),
                SET_ASIDE
            ))
            .await?;
        let (effects, bad) = decode_rows(&rows);
        if !bad.is_empty() {
            let set_aside = bad
                .iter()
                .map(|id| {
                    stmt!(
                        "UPDATE scheduled_effects SET due_at = $1 WHERE id = $2",
                        SET_ASIDE,
                        id.as_str()
                    )
                })
                .collect();
            self.write_now(set_aside).await?;
        }
        Ok(effects)
    }

    async fn fire_effect(&self, id: &str) -> Result<(), StoreError> {
        // `WHERE` before `ON CONFLICT` also keeps SQLite's parser from reading the upsert
        // clause as a join constraint.
        self.write_now(vec![
            stmt!(
                "INSERT INTO thread_queue (id, thread_id, text, created_at, tool) \
                 SELECT id, thread_id, '', $2, tool FROM scheduled_effects WHERE id = $1 \
                 ON CONFLICT (id) DO NOTHING",
                id,
                now_string()
            ),
            stmt!("DELETE FROM scheduled_effects WHERE id = $1", id),
        ])
        .await
    }

    async fn threads_with_fired_effects(&self) -> Result<Vec<String>, StoreError> {
        let rows = self
            .query(stmt!(
                "SELECT DISTINCT thread_id FROM thread_queue WHERE id LIKE 'e-%' ORDER BY thread_id"
            ))
            .await?;
        rows.iter().map(|row| row.text(0)).collect()
    }
}
