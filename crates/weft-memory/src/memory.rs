//! [`Memory`]: the tiers and what moves memories between them — store (through the write
//! gate), promote, recall, correct, maintain, and the session-start context.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::clock::{Clock, SystemClock};
use crate::db::{Filter, MemoryDb};
use crate::embed::{Embedder, Purpose};
use crate::entry::{Entry, Kind, NewMemory, Status, Tier};
use crate::error::MemoryError;
use crate::gate::check_write;
use crate::promote::{Assessment, assess};
use crate::rank::{DEFAULT_HALF_LIFE, cosine, decayed_weight, lexical_scores};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// The working cache holds at most this many memories after maintenance.
pub const WORKING_CAPACITY: usize = 50;
/// A working-cache memory whose decayed weight falls below this is evicted by maintenance
/// (archived when its importance is 7 or more, else marked decayed).
pub const EVICT_BELOW: f32 = 0.05;
/// Semantic memories not recalled for this long are archived by maintenance.
pub const ARCHIVE_AFTER: Duration = Duration::from_secs(90 * 24 * 60 * 60);
/// Reviewed daily-log entries (promoted, rejected) older than this are pruned.
pub const DAILY_RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// Unreviewed daily-log entries older than this are pruned.
pub const DAILY_STALE: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// The least importance of an open loop shown at session start.
pub const LOOP_MIN_IMPORTANCE: u8 = 7;

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The outcome of a write.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreOutcome {
    /// Whether it was stored (in the daily log).
    pub stored: bool,
    /// Its id.
    pub id: Option<i64>,
    /// Why not (the write gate's or the secret check's reason).
    pub rejection_reason: Option<String>,
    /// Where promotion is expected to take it.
    pub suggested_tier: Option<Tier>,
    /// The write gate's quality score.
    pub score: f32,
    /// The gate was bypassed.
    pub forced: bool,
}

/// One daily-log entry reviewed by promotion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reviewed {
    /// The daily-log entry.
    pub id: i64,
    /// The start of its text.
    pub content: String,
    /// The decision.
    #[serde(flatten)]
    pub assessment: Assessment,
    /// The copy made in the target tier, when promoted.
    pub new_id: Option<i64>,
}

/// What promotion did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromotionReport {
    /// Every active daily-log entry, with its decision.
    pub reviewed: Vec<Reviewed>,
    /// Nothing was written.
    pub dry_run: bool,
}

impl PromotionReport {
    /// How many went to `tier`.
    pub fn promoted_to(&self, tier: Tier) -> usize {
        self.reviewed
            .iter()
            .filter(|r| matches!(&r.assessment, Assessment::Promote { tier: t, .. } if *t == tier))
            .count()
    }
}

/// How to search.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryOptions {
    /// At most this many results (default 10).
    pub limit: usize,
    /// The least similarity (0–1) a result needs (default 0.3: all-MiniLM-L6-v2 puts
    /// related sentences at 0.3–0.6 and unrelated ones below 0.2).
    pub threshold: f32,
    /// Only these tiers (empty: all).
    pub tiers: Vec<Tier>,
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            limit: 10,
            threshold: 0.3,
            tiers: Vec::new(),
        }
    }
}

/// How results were ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ranking {
    /// Cosine similarity of embeddings.
    Semantic,
    /// Shared words (see [`crate::rank`]): the fallback without an embedder.
    Lexical,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    /// The memory.
    pub entry: Entry,
    /// Its similarity to the query (0–1).
    pub similarity: f32,
    /// The rank score: similarity weighted by importance and, in the working cache, decay.
    pub score: f32,
}

/// The results of a search.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Recall {
    /// How they were ranked.
    pub ranking: Ranking,
    /// The embedding model (semantic ranking).
    pub model: Option<String>,
    /// Why the ranking is lexical, when it is.
    pub note: Option<String>,
    /// Best first.
    pub results: Vec<Hit>,
}

/// What a correction did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CorrectionOutcome {
    /// Whether anything was corrected.
    pub corrected: bool,
    /// The tiers that held the stale memory.
    pub tiers_updated: Vec<Tier>,
    /// How many entries were superseded.
    pub superseded_count: usize,
    /// The corrected entries, one per superseded one.
    pub new_ids: Vec<i64>,
    /// Why nothing was done.
    pub rejection_reason: Option<String>,
}

/// What maintenance did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceReport {
    /// Working-cache memories evicted after decaying (or past the capacity).
    pub decayed: Vec<i64>,
    /// Memories moved to the archive.
    pub archived: Vec<i64>,
    /// Duplicates superseded.
    pub duplicates: Vec<i64>,
    /// Daily-log entries pruned.
    pub pruned: Vec<i64>,
    /// The working cache's size afterwards.
    pub working_size: usize,
}

/// What the session-start hook injects.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionContext {
    /// The top memories of the last 24 hours (loops excluded), best first.
    pub top: Vec<Entry>,
    /// Open session loops: actions, goals and decisions of importance ≥ 7.
    pub loops: Vec<Entry>,
}

/// The memory of a project.
///
/// # Examples
///
/// ```
/// use weft_memory::{Kind, Memory, MemoryDb, NewMemory, QueryOptions, Tier};
///
/// let dir = tempfile::tempdir()?;
/// let memory = Memory::new(MemoryDb::open(&dir.path().join("weft.db"))?);
/// let stored = memory.store(
///     NewMemory::new("Chose rusqlite over sqlx because hooks must start in milliseconds")
///         .kind(Kind::Decision)
///         .importance(8),
///     false,
/// )?;
/// assert!(stored.stored);
/// assert!(!memory.store(NewMemory::new("ok thanks"), false)?.stored);
/// let report = memory.promote(false)?;
/// assert_eq!(report.promoted_to(Tier::Semantic), 1);
/// let found = memory.query_lexical("why rusqlite?", &QueryOptions::default())?;
/// assert_eq!(found.results[0].entry.tier, Tier::Semantic);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Memory {
    db: MemoryDb,
    clock: Arc<dyn Clock>,
    half_life: Duration,
}

impl Memory {
    /// Memory over `db`, on the system clock, with a one-day half-life.
    pub fn new(db: MemoryDb) -> Self {
        Memory {
            db,
            clock: Arc::new(SystemClock),
            half_life: DEFAULT_HALF_LIFE,
        }
    }

    /// Uses `clock` for every timestamp and for decay.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets the working cache's half-life.
    #[must_use]
    pub fn with_half_life(mut self, half_life: Duration) -> Self {
        self.half_life = half_life;
        self
    }

    /// The database.
    pub fn db(&self) -> &MemoryDb {
        &self.db
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Writes to the daily log, through the write gate (`force` bypasses it, but never the
    /// secret check).
    ///
    /// # Errors
    /// [`MemoryError::Database`]. A rejected write is an `Ok` outcome with a reason.
    pub fn store(&self, memory: NewMemory, force: bool) -> Result<StoreOutcome, MemoryError> {
        let decision = check_write(&memory.content, memory.importance, force);
        if !decision.accepted {
            return Ok(StoreOutcome {
                stored: false,
                id: None,
                rejection_reason: decision.rejection_reason,
                suggested_tier: None,
                score: decision.score,
                forced: force,
            });
        }
        let suggested = match memory.kind {
            Kind::Decision | Kind::Pattern | Kind::Config | Kind::Lesson
                if memory.importance >= 5 =>
            {
                Tier::Semantic
            }
            _ => Tier::Working,
        };
        let now = self.now();
        let id = self.db.insert(&Entry {
            id: 0,
            tier: Tier::Daily,
            kind: memory.kind,
            content: memory.content.trim().to_owned(),
            tags: memory.tags,
            importance: memory.importance.clamp(1, 10),
            session_id: memory.session_id,
            created_at: now,
            last_access: now,
            access_count: 0,
            status: Status::Active,
            source_id: None,
            suggested_tier: Some(suggested),
            note: force.then(|| "stored with --force (write gate bypassed)".to_owned()),
        })?;
        Ok(StoreOutcome {
            stored: true,
            id: Some(id),
            rejection_reason: None,
            suggested_tier: Some(suggested),
            score: decision.score,
            forced: force,
        })
    }

    /// Reviews every active daily-log entry ([`crate::assess`]): significant learnings are
    /// copied to the semantic tier, short-term context to the working cache, trivia,
    /// transient state and secrets are marked rejected; the rest stays.
    ///
    /// # Errors
    /// [`MemoryError::Database`].
    pub fn promote(&self, dry_run: bool) -> Result<PromotionReport, MemoryError> {
        let pending = self.db.entries(&Filter {
            tiers: &[Tier::Daily],
            statuses: &[Status::Active],
            since: None,
        })?;
        let now = self.now();
        self.db.batch(|db| {
            let mut report = PromotionReport {
                reviewed: Vec::new(),
                dry_run,
            };
            for entry in pending {
                let assessment = assess(&entry);
                let mut new_id = None;
                if !dry_run {
                    match &assessment {
                        Assessment::Promote { tier, reason } => {
                            new_id = Some(db.insert(&Entry {
                                tier: *tier,
                                status: Status::Active,
                                source_id: Some(entry.id),
                                suggested_tier: None,
                                last_access: now,
                                note: Some(reason.clone()),
                                ..entry.clone()
                            })?);
                            db.set_status(entry.id, Status::Promoted, Some(reason))?;
                        }
                        Assessment::Reject { reason } => {
                            db.set_status(entry.id, Status::Rejected, Some(reason))?;
                        }
                        Assessment::Keep { .. } => {}
                    }
                }
                report.reviewed.push(Reviewed {
                    id: entry.id,
                    content: entry.content.chars().take(120).collect(),
                    assessment,
                    new_id,
                });
            }
            Ok(report)
        })
    }

    fn searchable(&self, tiers: &[Tier]) -> Result<Vec<Entry>, MemoryError> {
        let tiers: &[Tier] = if tiers.is_empty() { &Tier::ALL } else { tiers };
        self.db.entries(&Filter {
            tiers,
            statuses: &[Status::Active],
            since: None,
        })
    }

    fn weight(&self, entry: &Entry, now: i64) -> f32 {
        if entry.tier == Tier::Working {
            decayed_weight(entry.importance, now - entry.last_access, self.half_life)
        } else {
            f32::from(entry.importance) / 10.0
        }
    }

    fn rank(
        &self,
        candidates: Vec<Entry>,
        similarities: &[f32],
        options: &QueryOptions,
    ) -> Result<Vec<Hit>, MemoryError> {
        let now = self.now();
        let mut hits: Vec<Hit> = candidates
            .into_iter()
            .zip(similarities.iter().copied())
            .filter(|(_, s)| *s >= options.threshold && *s > 0.0)
            .map(|(entry, similarity)| {
                let score = similarity * (0.75 + 0.25 * self.weight(&entry, now));
                Hit {
                    entry,
                    similarity,
                    score,
                }
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| b.entry.id.cmp(&a.entry.id))
        });
        hits.truncate(options.limit);
        let ids: Vec<i64> = hits.iter().map(|h| h.entry.id).collect();
        self.db.touch(&ids, now)?;
        Ok(hits)
    }

    /// Searches by shared words ([`crate::rank`]'s lexical ranking).
    ///
    /// # Errors
    /// [`MemoryError::Database`].
    pub fn query_lexical(&self, text: &str, options: &QueryOptions) -> Result<Recall, MemoryError> {
        let candidates = self.searchable(&options.tiers)?;
        let documents: Vec<&str> = candidates.iter().map(|e| e.content.as_str()).collect();
        let scores = lexical_scores(text, &documents);
        Ok(Recall {
            ranking: Ranking::Lexical,
            model: None,
            note: None,
            results: self.rank(candidates, &scores, options)?,
        })
    }

    /// Embeds the searchable memories that have no vector of `embedder`'s model yet; returns
    /// how many.
    ///
    /// # Errors
    /// [`crate::EmbedError`] (as [`RecallError::Embed`]) or [`MemoryError`].
    pub async fn embed_missing(&self, embedder: &dyn Embedder) -> Result<usize, RecallError> {
        let model = embedder.model_id().to_owned();
        let have = self.db.vectors(&model)?;
        let missing: Vec<Entry> = self
            .searchable(&[])?
            .into_iter()
            .filter(|e| !have.contains_key(&e.id))
            .collect();
        for chunk in missing.chunks(32) {
            let texts: Vec<String> = chunk.iter().map(|e| e.content.clone()).collect();
            let vectors = embedder
                .embed(&texts, Purpose::Document)
                .await
                .map_err(RecallError::Embed)?;
            self.db.batch(|db| {
                for (entry, vector) in chunk.iter().zip(&vectors) {
                    db.put_vector(entry.id, &model, vector)?;
                }
                Ok(())
            })?;
        }
        Ok(missing.len())
    }

    /// Searches by meaning with `embedder` (embedding memories that lack a vector first);
    /// without one, or when it fails, by shared words — and the result says so
    /// ([`Recall::ranking`], [`Recall::note`]).
    ///
    /// # Errors
    /// [`MemoryError::Database`]; an embedder failure is not an error (lexical fallback).
    ///
    /// # Cancel safety
    /// Dropping the future leaves at most some vectors stored (they are a cache).
    pub async fn recall(
        &self,
        text: &str,
        options: &QueryOptions,
        embedder: Option<&dyn Embedder>,
    ) -> Result<Recall, MemoryError> {
        let Some(embedder) = embedder else {
            let mut recall = self.query_lexical(text, options)?;
            recall.note =
                Some("no embedding model: ranked lexically (shared words, not meaning)".to_owned());
            return Ok(recall);
        };
        match self.semantic(text, options, embedder).await {
            Ok(recall) => Ok(recall),
            Err(RecallError::Memory(e)) => Err(e),
            Err(RecallError::Embed(e)) => {
                let mut recall = self.query_lexical(text, options)?;
                recall.note = Some(format!(
                    "{} failed ({e}): ranked lexically (shared words, not meaning)",
                    embedder.model_id()
                ));
                Ok(recall)
            }
        }
    }

    async fn semantic(
        &self,
        text: &str,
        options: &QueryOptions,
        embedder: &dyn Embedder,
    ) -> Result<Recall, RecallError> {
        self.embed_missing(embedder).await?;
        let query = embedder
            .embed(&[text.to_owned()], Purpose::Query)
            .await
            .map_err(RecallError::Embed)?
            .into_iter()
            .next()
            .unwrap_or_default();
        let vectors: HashMap<i64, Vec<f32>> = self.db.vectors(embedder.model_id())?;
        let candidates = self.searchable(&options.tiers)?;
        let scores: Vec<f32> = candidates
            .iter()
            .map(|e| vectors.get(&e.id).map_or(0.0, |v| cosine(&query, v)))
            .collect();
        Ok(Recall {
            ranking: Ranking::Semantic,
            model: Some(embedder.model_id().to_owned()),
            note: None,
            results: self.rank(candidates, &scores, options)?,
        })
    }

    /// Replaces every memory matching `search` — in every tier — with `correction`: the old
    /// entries are marked superseded, with `reason`, in the superseded-entries audit trail
    /// ([`MemoryDb::superseded`]), and a corrected copy takes each one's place. A memory
    /// matches when its text contains `search` (ignoring case), else when it shares most of
    /// its words (lexical score ≥ 0.6, at most 5).
    ///
    /// # Errors
    /// [`MemoryError::Database`]. A refused correction (secret, write gate) or one that
    /// matches nothing is an `Ok` outcome with a reason.
    pub fn correct(
        &self,
        search: &str,
        correction: &str,
        reason: &str,
        force: bool,
    ) -> Result<CorrectionOutcome, MemoryError> {
        let refused = |why: String| CorrectionOutcome {
            corrected: false,
            tiers_updated: Vec::new(),
            superseded_count: 0,
            new_ids: Vec::new(),
            rejection_reason: Some(why),
        };
        let gate = check_write(correction, 5, force);
        if !gate.accepted {
            return Ok(refused(gate.rejection_reason.unwrap_or_default()));
        }
        let candidates = self.db.entries(&Filter {
            tiers: &Tier::ALL,
            statuses: &[Status::Active, Status::Promoted],
            since: None,
        })?;
        let needle = search.trim().to_lowercase();
        let mut matched: Vec<Entry> = if needle.is_empty() {
            Vec::new()
        } else {
            candidates
                .iter()
                .filter(|e| e.content.to_lowercase().contains(&needle))
                .cloned()
                .collect()
        };
        if matched.is_empty() && !needle.is_empty() {
            let documents: Vec<&str> = candidates.iter().map(|e| e.content.as_str()).collect();
            let scores = lexical_scores(search, &documents);
            let mut scored: Vec<(f32, &Entry)> = scores
                .into_iter()
                .zip(candidates.iter())
                .filter(|(s, _)| *s >= 0.6)
                .collect();
            scored.sort_by(|a, b| b.0.total_cmp(&a.0));
            matched = scored.into_iter().take(5).map(|(_, e)| e.clone()).collect();
        }
        if matched.is_empty() {
            return Ok(refused(format!("no memory matches {search:?}")));
        }
        let now = self.now();
        let reason = if reason.trim().is_empty() {
            "corrected"
        } else {
            reason.trim()
        };
        self.db.batch(|db| {
            let mut tiers = BTreeSet::new();
            let mut new_ids = Vec::new();
            for old in &matched {
                let new_id = db.insert(&Entry {
                    content: correction.trim().to_owned(),
                    created_at: now,
                    last_access: now,
                    access_count: 0,
                    source_id: Some(old.id),
                    note: Some(format!("correction of #{}: {reason}", old.id)),
                    ..old.clone()
                })?;
                db.supersede(old, Some(new_id), reason, now)?;
                tiers.insert(Tier::ALL.iter().position(|t| *t == old.tier).unwrap_or(0));
                new_ids.push(new_id);
            }
            Ok(CorrectionOutcome {
                corrected: true,
                tiers_updated: tiers.into_iter().map(|i| Tier::ALL[i]).collect(),
                superseded_count: matched.len(),
                new_ids,
                rejection_reason: None,
            })
        })
    }

    /// The lessons written since `since_ms` (ms since the epoch): memories of kind lesson,
    /// pattern, decision or config in any tier that were not superseded or rejected — what the
    /// completion gate's memory-lesson check looks for.
    ///
    /// # Errors
    /// [`MemoryError::Database`].
    pub fn lessons_since(&self, since_ms: i64) -> Result<Vec<Entry>, MemoryError> {
        Ok(self
            .db
            .entries(&Filter {
                tiers: &Tier::ALL,
                statuses: &[Status::Active, Status::Promoted, Status::Closed],
                since: None,
            })?
            .into_iter()
            .filter(|e| {
                e.created_at >= since_ms
                    && matches!(
                        e.kind,
                        Kind::Lesson | Kind::Pattern | Kind::Decision | Kind::Config
                    )
            })
            .collect())
    }

    /// Closes an open session loop (or any memory): it is no longer injected.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::Database`].
    pub fn close(&self, id: i64) -> Result<(), MemoryError> {
        self.db.get(id)?;
        self.db.set_status(id, Status::Closed, Some("closed"))
    }

    /// Scheduled maintenance: decay the working cache (evict what fell below
    /// [`EVICT_BELOW`] and what exceeds [`WORKING_CAPACITY`]; important ones are archived),
    /// archive semantic memories not recalled for [`ARCHIVE_AFTER`], supersede duplicates
    /// (same text in the same tier; the newest stays) and prune the daily log.
    ///
    /// # Errors
    /// [`MemoryError::Database`].
    pub fn maintain(&self) -> Result<MaintenanceReport, MemoryError> {
        let now = self.now();
        let mut report = MaintenanceReport::default();
        let active = self.searchable(&[])?;
        self.db.batch(|db| {
            // Duplicates first, so a duplicate does not hold a working slot.
            let mut seen: HashMap<(Tier, String), i64> = HashMap::new();
            let mut gone: BTreeSet<i64> = BTreeSet::new();
            for entry in active.iter().rev() {
                let key = (entry.tier, normalise(&entry.content));
                match seen.get(&key) {
                    Some(kept) => {
                        db.supersede(entry, Some(*kept), &format!("duplicate of #{kept}"), now)?;
                        report.duplicates.push(entry.id);
                        gone.insert(entry.id);
                    }
                    None => {
                        seen.insert(key, entry.id);
                    }
                }
            }
            let mut working: Vec<(f32, &Entry)> = active
                .iter()
                .filter(|e| e.tier == Tier::Working && !gone.contains(&e.id))
                .map(|e| (self.weight(e, now), e))
                .collect();
            working.sort_by(|a, b| b.0.total_cmp(&a.0));
            let mut kept = 0usize;
            for (weight, entry) in working {
                if weight >= EVICT_BELOW && kept < WORKING_CAPACITY {
                    kept += 1;
                    continue;
                }
                if entry.importance >= LOOP_MIN_IMPORTANCE {
                    db.set_tier(
                        entry.id,
                        Tier::Archive,
                        "archived from the working cache after it decayed",
                    )?;
                    report.archived.push(entry.id);
                } else {
                    db.set_status(
                        entry.id,
                        Status::Decayed,
                        Some("decayed out of the working cache"),
                    )?;
                }
                report.decayed.push(entry.id);
            }
            report.working_size = kept;
            for entry in active
                .iter()
                .filter(|e| e.tier == Tier::Semantic && !gone.contains(&e.id))
            {
                if now - entry.last_access >= ms(ARCHIVE_AFTER) {
                    db.set_tier(
                        entry.id,
                        Tier::Archive,
                        "archived: not recalled for 90 days",
                    )?;
                    report.archived.push(entry.id);
                }
            }
            let daily = db.entries(&Filter {
                tiers: &[Tier::Daily],
                statuses: &[],
                since: None,
            })?;
            let prune: Vec<i64> = daily
                .iter()
                .filter(|e| {
                    let age = now - e.created_at;
                    match e.status {
                        Status::Promoted | Status::Rejected => age >= ms(DAILY_RETENTION),
                        Status::Active => age >= ms(DAILY_STALE),
                        _ => false,
                    }
                })
                .map(|e| e.id)
                .collect();
            db.delete(&prune)?;
            report.pruned = prune;
            Ok(())
        })?;
        Ok(report)
    }

    /// What the session-start hook injects: the top memories of the last 24 hours (by
    /// importance and, in the working cache, decay; at most `limit`) and the open session
    /// loops (actions, goals, decisions of importance ≥ 7 in the daily log or the working
    /// cache).
    ///
    /// # Errors
    /// [`MemoryError::Database`].
    pub fn session_context(&self, limit: usize) -> Result<SessionContext, MemoryError> {
        let now = self.now();
        let recent = self.db.entries(&Filter {
            tiers: &Tier::ALL,
            statuses: &[Status::Active],
            since: Some(now - DAY_MS),
        })?;
        let open = self.db.entries(&Filter {
            tiers: &[Tier::Daily, Tier::Working],
            statuses: &[Status::Active],
            since: None,
        })?;
        let mut loops: Vec<Entry> = open
            .into_iter()
            .filter(|e| e.kind.is_loop() && e.importance >= LOOP_MIN_IMPORTANCE)
            .collect();
        loops.sort_by(|a, b| {
            b.importance
                .cmp(&a.importance)
                .then(b.created_at.cmp(&a.created_at))
        });
        loops.truncate(limit);
        let loop_ids: BTreeSet<i64> = loops.iter().map(|e| e.id).collect();
        let mut top: Vec<(f32, Entry)> = recent
            .into_iter()
            .filter(|e| !loop_ids.contains(&e.id))
            .map(|e| (self.weight(&e, now), e))
            .collect();
        top.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(b.1.created_at.cmp(&a.1.created_at))
        });
        // The same text in two tiers (a daily entry and its promoted copy) is shown once.
        let mut shown = BTreeSet::new();
        let top: Vec<Entry> = top
            .into_iter()
            .map(|(_, e)| e)
            .filter(|e| shown.insert(normalise(&e.content)))
            .take(limit)
            .collect();
        Ok(SessionContext { top, loops })
    }
}

fn normalise(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(['.', '!', ';'])
        .to_lowercase()
}

/// Why a semantic search could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecallError {
    /// The embedder failed.
    #[error(transparent)]
    Embed(#[from] crate::embed::EmbedError),
    /// The database failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
}
