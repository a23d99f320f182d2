//! [`Store`]: the typed store over either backend, and the storage traits it implements
//! ([`EventLog`], [`Artifacts`], [`Lineage`], [`Threads`], [`Runs`], [`ToolLedger`], and
//! weft-agent's [`CheckpointStore`]).
//!
//! # Checkpoint layout (the O(new data) invariant)
//!
//! A checkpoint never rewrites the history. Messages (and reasoning and sub-agent traces) are
//! stored once,
//! append-only, in `checkpoint_items` keyed by `(thread_key, seq)` (`thread_key`: the thread's
//! small integer in `checkpoint_threads`); a checkpoint row holds
//! the small rest of the state (id, step, metadata, plan) plus the *ranges* of `seq` that
//! make up its message list (`[[0, 41]]` for a plain growing history). Saving step n writes
//! the step's new messages and one checkpoint row: the bytes written grow with the step's new
//! data, not with n. `load` joins the ranges back into the full state.
//!
//! Message identity is the message id (UAP: ids are unique and messages immutable); a state
//! whose history was replaced (context compression) just references other rows. A per-thread
//! cache (next `seq`, id → `seq`) lives in the process; it is rebuilt from the database when
//! missing or after a failed write.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use weft_agent::checkpoint::{Checkpoint, CheckpointError, CheckpointMetadata, CheckpointStore};
use weft_agent::{AgentState, AgentStateJson, PlanStep, SubagentExecutionTrace};
use weft_provider::{Message, TokenUsage, ToolCall, ToolExecution, ToolResult};

use crate::error::{StoreError, corrupt};
use crate::lease::Fence;
use crate::model::{
    AgentNode, AgentStatus, ArtifactMetadata, ArtifactRecord, ArtifactType, CheckpointSummary,
    EventQuery, EventRecord, Lease, NewArtifact, NewEvent, RecordedResponse, Retention, RunRecord,
    RunStatus, ThreadRecord, ToolCallRecord, ToolCallStatus, Usage, new_id, now_string,
};
use crate::postgres::{PgBackend, PgOptions};
use crate::redact::{DefaultRedactor, Redactor};
use crate::sql::{Backend, Row, SqlValue, Stmt, WriteJob, stmt};
use crate::sqlite::{SqliteBackend, SqliteOptions};

mod housekeeping;
pub use housekeeping::{DeletedRun, GcReport};

/// When a write is durable relative to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Queued (bounded queue, in order); the caller goes on at once; failures are logged
    /// (the UAP default).
    #[default]
    Async,
    /// The call returns after the commit.
    Sync,
}

/// Token prices used to fill `usage_cost`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Pricing {
    /// Cost of one million input tokens.
    pub input_per_mtok: f64,
    /// Cost of one million output tokens.
    pub output_per_mtok: f64,
}

impl Pricing {
    /// The cost of `input` and `output` tokens.
    #[allow(clippy::cast_precision_loss)]
    pub fn cost(&self, input: u64, output: u64) -> f64 {
        (input as f64 * self.input_per_mtok + output as f64 * self.output_per_mtok) / 1e6
    }
}

/// The default database file of a working directory: `<dir>/.weft/weft.db`.
pub fn default_sqlite_path(dir: &Path) -> PathBuf {
    dir.join(".weft").join("weft.db")
}

/// A parsed store location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// `sqlite:PATH`.
    Sqlite(PathBuf),
    /// `postgres://…` / `postgresql://…`.
    Postgres(String),
}

impl StoreUrl {
    /// Parses `sqlite:PATH`, `sqlite://PATH` or `postgres://…`.
    ///
    /// # Errors
    /// [`StoreError::InvalidUrl`].
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        if let Some(rest) = url.strip_prefix("sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(StoreError::InvalidUrl {
                    url: url.to_owned(),
                    reason: "the path is empty".into(),
                });
            }
            Ok(StoreUrl::Sqlite(PathBuf::from(path)))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(StoreUrl::Postgres(url.to_owned()))
        } else {
            Err(StoreError::InvalidUrl {
                url: url.to_owned(),
                reason: "use sqlite:PATH or postgres://USER@HOST:PORT/DB".into(),
            })
        }
    }

    /// The configured location: `url` if given, else `WEFT_DATABASE_URL`, else the SQLite
    /// file `.weft/weft.db` under `dir`.
    ///
    /// # Errors
    /// [`StoreError::InvalidUrl`].
    pub fn resolve(url: Option<&str>, dir: &Path) -> Result<Self, StoreError> {
        match url {
            Some(url) => StoreUrl::parse(url),
            None => match std::env::var("WEFT_DATABASE_URL") {
                Ok(url) if !url.trim().is_empty() => StoreUrl::parse(url.trim()),
                _ => Ok(StoreUrl::Sqlite(default_sqlite_path(dir))),
            },
        }
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Sqlite(p) => write!(f, "sqlite:{}", p.display()),
            StoreUrl::Postgres(u) => {
                // Never print a password.
                match (u.find("://"), u.rfind('@')) {
                    (Some(s), Some(at)) if at > s => {
                        let creds = &u[s + 3..at];
                        let user = creds.split(':').next().unwrap_or_default();
                        write!(f, "{}{}@{}", &u[..s + 3], user, &u[at + 1..])
                    }
                    _ => f.write_str(u),
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
struct LastCheckpoint {
    state_blob: String,
    agent_id: String,
    agent_step: u64,
    message_count: u64,
    min_seq: i64,
    usage: Usage,
}

/// The state of the thread's latest saved step checkpoint, with the `seq` ranges of its
/// history: a state that [`AgentState::extends`] it only writes what it added.
#[derive(Debug, Clone)]
struct SavedHistory {
    state: AgentState,
    ranges: HistoryRanges,
}

/// Where a state's history lives in `checkpoint_items`.
#[derive(Debug, Clone, Default)]
struct HistoryRanges {
    messages: SeqRanges,
    reasoning: SeqRanges,
    traces: SeqRanges,
}

/// The kinds of history items without ids, stored by position (`item_key` = the index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Indexed {
    /// Reasoning traces (`r`).
    Reasoning,
    /// Sub-agent execution traces (`t`, JSON).
    Trace,
}

impl Indexed {
    fn kind(self) -> &'static str {
        match self {
            Indexed::Reasoning => "r",
            Indexed::Trace => "t",
        }
    }
}

#[derive(Debug, Default)]
struct ThreadCache {
    loaded: bool,
    /// Whether this process has written the thread's `checkpoint_threads` row (an
    /// idempotent insert before its first history rows).
    registered: bool,
    failed: Arc<AtomicBool>,
    next_seq: i64,
    next_step: i64,
    by_id: HashMap<String, i64>,
    /// Stored reasoning traces by position: (body, seq).
    reasoning: Vec<(String, i64)>,
    /// Stored sub-agent traces by position: (JSON body, seq).
    traces: Vec<(String, i64)>,
    last: Option<LastCheckpoint>,
    saved: Option<SavedHistory>,
}

struct Shared {
    backend: Arc<dyn Backend>,
    caches: Mutex<HashMap<String, Arc<tokio::sync::Mutex<ThreadCache>>>>,
    redactor: Arc<dyn Redactor>,
    /// The secret values the redactor learned at run time (secret variables).
    known_secrets: Arc<KnownSecrets>,
    /// The key of secret variables, once loaded or given.
    secret_key: std::sync::Mutex<Option<crate::variables::SecretKey>>,
    redact_checkpoints: bool,
    pricing: Pricing,
    location: String,
}

/// Secret values learned while the store is open (a secret variable set or read), redacted
/// in addition to what the configured redactor removes.
#[derive(Debug, Default)]
struct KnownSecrets {
    values: std::sync::RwLock<Vec<String>>,
    /// Redactors added while the store is open ([`Store::add_redactor`]), by key.
    redactors: std::sync::RwLock<Vec<(String, Arc<dyn Redactor>)>>,
}

/// The configured redactor, then every [`KnownSecrets`] value.
#[derive(Debug)]
struct Layered {
    inner: Arc<dyn Redactor>,
    known: Arc<KnownSecrets>,
}

impl Redactor for Layered {
    fn redact(&self, value: &mut Value) {
        self.inner.redact(value);
        if let Ok(known) = self.known.values.read() {
            for secret in known.iter() {
                weft_provider::redact::redact_json(value, Some(secret));
            }
        }
        if let Ok(added) = self.known.redactors.read() {
            for (_, redactor) in added.iter() {
                redactor.redact(value);
            }
        }
    }

    fn may_redact(&self, serialized: &str) -> bool {
        self.inner.may_redact(serialized)
            || self.known.values.read().is_ok_and(|known| {
                known.iter().any(|secret| {
                    weft_provider::redact::may_contain_secret(serialized, Some(secret))
                })
            })
            || self.known.redactors.read().is_ok_and(|added| {
                added
                    .iter()
                    .any(|(_, redactor)| redactor.may_redact(serialized))
            })
    }
}

/// The durable store: checkpoints, events, artifacts, lineage, threads, runs and the tool
/// ledger, on SQLite or PostgreSQL. Cheap to clone; clones share the backend and caches.
///
/// # Examples
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
/// use weft_store::{Store, EventLog, EventQuery, NewEvent};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::open(&format!("sqlite:{}", dir.path().join("weft.db").display())).await?;
/// store.append_event(NewEvent::new("turn_start", "r1", "t1", "a1", serde_json::json!({}))).await?;
/// store.flush().await?;
/// let events = store.events(&EventQuery { run_id: Some("r1".into()), ..Default::default() }).await?;
/// assert_eq!((events[0].event_type.as_str(), events[0].seq), ("turn_start", 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })
/// # }
/// ```
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
    durability: Durability,
    run_id: Option<Arc<str>>,
    fence: Option<Arc<Fence>>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.shared.location)
            .field("durability", &self.durability)
            .field("run_id", &self.run_id)
            .finish()
    }
}

/// How [`Store::open_with`] opens a store.
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    /// Redaction applied to events, tool-call records and (unless disabled) checkpoints.
    pub redactor: Option<Arc<dyn Redactor>>,
    /// Redact checkpoint payloads too (default: yes — RT-071).
    pub keep_checkpoint_secrets: bool,
    /// Token prices for `usage_cost`.
    pub pricing: Pricing,
    /// SQLite settings (the path is taken from the URL).
    pub sqlite: Option<SqliteOptions>,
    /// PostgreSQL schema to use (created when missing).
    pub postgres_schema: Option<String>,
}

impl Store {
    /// Opens (creating and migrating when needed) the store at `url`.
    ///
    /// # Errors
    /// Invalid URL, connection failure, [`StoreError::SchemaTooNew`].
    pub async fn open(url: &str) -> Result<Store, StoreError> {
        Store::open_with(&StoreUrl::parse(url)?, StoreOptions::default()).await
    }

    /// Opens the store at `url` with `options`.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub async fn open_with(url: &StoreUrl, options: StoreOptions) -> Result<Store, StoreError> {
        let backend: Arc<dyn Backend> = match url {
            StoreUrl::Sqlite(path) => {
                let mut sqlite = options
                    .sqlite
                    .clone()
                    .unwrap_or_else(|| SqliteOptions::new(path.clone()));
                sqlite.path = path.clone();
                Arc::new(SqliteBackend::open(sqlite).await?)
            }
            StoreUrl::Postgres(u) => {
                let mut pg = PgOptions::new(u.clone());
                pg.schema = options.postgres_schema.clone();
                Arc::new(PgBackend::open(pg).await?)
            }
        };
        Ok(Store::from_backend(backend, url.to_string(), options))
    }

    /// Opens a SQLite store with explicit options.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub async fn open_sqlite(options: SqliteOptions) -> Result<Store, StoreError> {
        let location = format!("sqlite:{}", options.path.display());
        let backend = Arc::new(SqliteBackend::open(options).await?);
        Ok(Store::from_backend(
            backend,
            location,
            StoreOptions::default(),
        ))
    }

    /// Opens a SQLite store migrated only up to `version` (to build old-schema fixtures).
    ///
    /// # Errors
    /// As [`Store::open`].
    #[doc(hidden)]
    pub async fn open_sqlite_at_version(path: &Path, version: i64) -> Result<Store, StoreError> {
        let backend = Arc::new(SqliteBackend::open_at(SqliteOptions::new(path), version).await?);
        Ok(Store::from_backend(
            backend,
            format!("sqlite:{}", path.display()),
            StoreOptions::default(),
        ))
    }

    /// Opens a PostgreSQL store with explicit options.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub async fn open_postgres(options: PgOptions) -> Result<Store, StoreError> {
        let location = StoreUrl::Postgres(options.url.clone()).to_string();
        let backend = Arc::new(PgBackend::open(options).await?);
        Ok(Store::from_backend(
            backend,
            location,
            StoreOptions::default(),
        ))
    }

    fn from_backend(backend: Arc<dyn Backend>, location: String, options: StoreOptions) -> Store {
        let known_secrets = Arc::new(KnownSecrets::default());
        let redactor = Arc::new(Layered {
            inner: options
                .redactor
                .unwrap_or_else(|| Arc::new(DefaultRedactor::default())),
            known: known_secrets.clone(),
        });
        Store {
            shared: Arc::new(Shared {
                backend,
                caches: Mutex::new(HashMap::new()),
                redactor,
                known_secrets,
                secret_key: std::sync::Mutex::new(None),
                redact_checkpoints: !options.keep_checkpoint_secrets,
                pricing: options.pricing,
                location,
            }),
            durability: Durability::default(),
            run_id: None,
            fence: None,
        }
    }

    /// The same store with another durability (shares backend and caches).
    #[must_use]
    pub fn with_durability(&self, durability: Durability) -> Store {
        Store {
            durability,
            ..self.clone()
        }
    }

    /// The same store tagging checkpoints it saves with `run_id`.
    #[must_use]
    pub fn for_run(&self, run_id: &str) -> Store {
        Store {
            run_id: Some(Arc::from(run_id)),
            ..self.clone()
        }
    }

    /// The same store whose every write commits only while `fence`'s epoch is the run's
    /// (see [`crate::lease`]): a stale owner's writes fail with [`StoreError::Fenced`].
    #[must_use]
    pub fn fenced(&self, fence: Arc<Fence>) -> Store {
        Store {
            fence: Some(fence),
            ..self.clone()
        }
    }

    /// The fence of this handle, if any.
    pub fn fence(&self) -> Option<&Arc<Fence>> {
        self.fence.as_ref()
    }

    /// The durability of writes through this handle.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Where the store is (passwords removed).
    pub fn location(&self) -> &str {
        &self.shared.location
    }

    /// The redactor: the configured one, then every secret value learned since the store
    /// was opened ([`Store::add_known_secret`]).
    pub fn redactor(&self) -> &Arc<dyn Redactor> {
        &self.shared.redactor
    }

    /// Adds `secret` to the values the redactor removes from everything the store writes
    /// (events, the tool ledger, checkpoints, run records) from now on, in every clone of the
    /// store. Values shorter than 4 characters are ignored (they would redact ordinary text).
    ///
    /// ```
    /// # async fn demo() -> Result<(), weft_store::StoreError> {
    /// let store = weft_store::Store::open("sqlite::memory:").await?;
    /// store.add_known_secret("opensesame");
    /// let mut value = serde_json::json!({"text": "the word is opensesame"});
    /// store.redactor().redact(&mut value);
    /// assert!(!value.to_string().contains("opensesame"));
    /// # Ok(()) }
    /// ```
    pub fn add_known_secret(&self, secret: &str) {
        let secret = secret.trim();
        if secret.chars().count() < 4 {
            return;
        }
        if let Ok(mut values) = self.shared.known_secrets.values.write()
            && !values.iter().any(|v| v == secret)
        {
            values.push(secret.to_owned());
        }
    }

    /// Adds `redactor` after the configured one, for everything the store writes from now on
    /// (events, the tool ledger, checkpoints, run records), in every clone of the store: a
    /// run's own secret patterns, added before the run records anything. `key` names it: a
    /// redactor with a key already added is not added again (every run of a project adds the
    /// project's).
    ///
    /// ```
    /// # async fn demo() -> Result<(), weft_store::StoreError> {
    /// # #[derive(Debug)]
    /// # struct Acme;
    /// # impl weft_store::Redactor for Acme {
    /// #     fn redact(&self, value: &mut serde_json::Value) {
    /// #         if let serde_json::Value::String(s) = value { *s = s.replace("ACME-1", "[REDACTED]"); }
    /// #     }
    /// # }
    /// let store = weft_store::Store::open("sqlite::memory:").await?;
    /// store.add_redactor("acme", std::sync::Arc::new(Acme));
    /// let mut value = serde_json::json!("ACME-1");
    /// store.redactor().redact(&mut value);
    /// assert_eq!(value, "[REDACTED]");
    /// # Ok(()) }
    /// ```
    pub fn add_redactor(&self, key: &str, redactor: Arc<dyn Redactor>) {
        if let Ok(mut added) = self.shared.known_secrets.redactors.write()
            && !added.iter().any(|(k, _)| k == key)
        {
            added.push((key.to_owned(), redactor));
        }
    }

    /// Uses `key` for secret variables instead of `WEFT_SECRET_KEY` or the key file (see
    /// [`ThreadVariables`](crate::ThreadVariables)).
    pub fn set_secret_key(&self, key: crate::variables::SecretKey) {
        if let Ok(mut slot) = self.shared.secret_key.lock() {
            *slot = Some(key);
        }
    }

    /// The key of secret variables: given, or loaded once (`create`: made if missing).
    pub(crate) fn secret_key(
        &self,
        create: bool,
    ) -> Result<Option<crate::variables::SecretKey>, StoreError> {
        if let Ok(slot) = self.shared.secret_key.lock()
            && let Some(key) = slot.as_ref()
        {
            return Ok(Some(key.clone()));
        }
        let key = crate::variables::load_key(&self.shared.location, create)?;
        if let (Some(key), Ok(mut slot)) = (&key, self.shared.secret_key.lock()) {
            *slot = Some(key.clone());
        }
        Ok(key)
    }

    /// Waits until every queued write is committed.
    ///
    /// # Errors
    /// [`StoreError::Closed`].
    ///
    /// # Cancel safety
    /// Dropping it leaves the queue untouched.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.shared.backend.flush().await
    }

    /// The schema version of the database.
    ///
    /// # Errors
    /// Database failures.
    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        self.shared.backend.schema_version().await
    }

    async fn write(
        &self,
        stmts: Vec<Stmt>,
        failed: Option<Arc<AtomicBool>>,
    ) -> Result<(), StoreError> {
        self.shared
            .backend
            .write(
                WriteJob {
                    stmts,
                    failed,
                    fence: self.fence.clone(),
                },
                self.durability == Durability::Sync,
            )
            .await
    }

    /// A write that waits for the commit whatever the durability.
    pub(crate) async fn write_now(&self, stmts: Vec<Stmt>) -> Result<(), StoreError> {
        self.commit(self.fence.clone(), stmts).await
    }

    /// An unfenced write queued in order behind the earlier ones, not awaited (its failure is
    /// logged): bookkeeping such as an API token's `last_used_at`.
    pub(crate) async fn write_later(&self, stmts: Vec<Stmt>) -> Result<(), StoreError> {
        self.shared
            .backend
            .write(
                WriteJob {
                    stmts,
                    failed: None,
                    fence: None,
                },
                false,
            )
            .await
    }

    /// A write that waits for its commit, fenced by `fence` (none: unconditional).
    pub(crate) async fn commit(
        &self,
        fence: Option<Arc<Fence>>,
        stmts: Vec<Stmt>,
    ) -> Result<(), StoreError> {
        self.shared
            .backend
            .write(
                WriteJob {
                    stmts,
                    failed: None,
                    fence,
                },
                true,
            )
            .await
    }

    /// The lease of `run_id`.
    ///
    /// # Errors
    /// Database failures.
    pub async fn lease(&self, run_id: &str) -> Result<Option<Lease>, StoreError> {
        let rows = self
            .query(stmt!(
                "SELECT lease_owner, lease_until, lease_epoch FROM runs WHERE run_id = $1",
                run_id
            ))
            .await?;
        rows.first()
            .map(|r| {
                Ok(Lease {
                    owner: r.opt_text(0)?,
                    until_ms: r.opt_int(1)?,
                    epoch: r.int(2)?,
                })
            })
            .transpose()
    }

    pub(crate) async fn query(&self, stmt: Stmt) -> Result<Vec<Row>, StoreError> {
        self.shared.backend.query(stmt).await
    }

    pub(crate) fn redact(&self, value: &mut Value) {
        self.shared.redactor.redact(value);
    }

    /// A checkpoint's `pending_tools` / `completed_tools` column: the list as JSON
    /// ([`Store::redacted_string`]), or NULL when it is empty (read back as empty: two bytes
    /// and a column header fewer in most rows).
    fn json_list<T: Serialize>(&self, list: &[T]) -> Result<Option<String>, StoreError> {
        if list.is_empty() {
            return Ok(None);
        }
        self.redacted_string(&list, true).map(Some)
    }

    fn redacted_string<T: Serialize>(
        &self,
        value: &T,
        checkpoint: bool,
    ) -> Result<String, StoreError> {
        let invalid = |e: serde_json::Error| StoreError::Invalid(e.to_string());
        let text = serde_json::to_string(value).map_err(invalid)?;
        if (checkpoint && !self.shared.redact_checkpoints)
            || !self.shared.redactor.may_redact(&text)
        {
            return Ok(text);
        }
        let mut v: Value = serde_json::from_str(&text).map_err(invalid)?;
        self.redact(&mut v);
        Ok(v.to_string())
    }

    fn cache(&self, thread_id: &str) -> Arc<tokio::sync::Mutex<ThreadCache>> {
        let mut caches = match self.shared.caches.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        caches.entry(thread_id.to_owned()).or_default().clone()
    }
}

// ----- checkpoints -----

const CHECKPOINT_COLUMNS: &str = "id, thread_id, step, timestamp, state_blob, pending_tools, \
    completed_tools, usage_tokens, usage_cost, kind, agent_id, agent_step, run_id, message_count, \
    usage_input_tokens, usage_output_tokens";

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StateHead {
    /// Written until the blob dropped it (it is always the state version of its writer).
    #[serde(default = "state_version")]
    version: String,
    /// As written: encoded ([`encode_key`], since issue 19's sixth round) or the id
    /// itself (before); [`decode_key`] reads both.
    #[serde(rename = "i", alias = "id")]
    id: String,
    /// Written until the blob dropped it (the row's `agent_step` holds it); written again
    /// when the column cannot hold it (beyond `i64::MAX`).
    #[serde(default)]
    step: Option<u64>,
    /// Left out when empty since format 3.
    #[serde(default, rename = "d", alias = "metadata")]
    metadata: Map<String, Value>,
    #[serde(
        default,
        rename = "p",
        alias = "plan",
        skip_serializing_if = "Option::is_none"
    )]
    plan: Option<Vec<PlanStep>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    subagent_traces: Vec<SubagentExecutionTrace>,
}

fn state_version() -> String {
    weft_agent::STATE_VERSION.to_owned()
}

/// The state without its history as written: no version (the store writes only the current
/// one) and no step (the row's `agent_step`), which every checkpoint row would repeat.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StateHeadRef<'a> {
    /// A canonical UUID (the ids Weft makes) as `~` and 22 base64url characters
    /// ([`encode_key`]); read back by [`StateHead`].
    #[serde(rename = "i")]
    id: std::borrow::Cow<'a, str>,
    /// The step, only when the row's `agent_step` (a signed 64-bit integer) cannot hold it.
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<u64>,
    #[serde(rename = "d", skip_serializing_if = "MetadataRef::is_empty")]
    metadata: MetadataRef<'a>,
    #[serde(rename = "p", skip_serializing_if = "Option::is_none")]
    plan: Option<&'a [PlanStep]>,
}

/// A state's metadata as written: without the entry `skip` (a `sessionId` that the row's
/// `thread_id` already says).
struct MetadataRef<'a> {
    map: &'a Map<String, Value>,
    skip: Option<usize>,
}

impl MetadataRef<'_> {
    fn is_empty(&self) -> bool {
        self.map.len() == usize::from(self.skip.is_some())
    }
}

impl Serialize for MetadataRef<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(
            self.map
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != self.skip)
                .map(|(_, entry)| entry),
        )
    }
}

/// The position of `metadata`'s `sessionId` when it is `thread_id` (what a checkpoint row
/// leaves out of its blob: 50 bytes a checkpoint).
fn session_position(metadata: &Map<String, Value>, thread_id: &str) -> Option<usize> {
    metadata
        .iter()
        .position(|(k, v)| k == weft_agent::SESSION_ID_KEY && v.as_str() == Some(thread_id))
}

/// `metadata` with `sessionId` = `thread_id` put back at `position`.
fn with_session(
    metadata: Map<String, Value>,
    position: usize,
    thread_id: &str,
) -> Map<String, Value> {
    let mut out = Map::new();
    let session = (
        weft_agent::SESSION_ID_KEY.to_owned(),
        Value::String(thread_id.to_owned()),
    );
    let mut session = Some(session);
    for (i, (k, v)) in metadata.into_iter().enumerate() {
        if i == position
            && let Some((sk, sv)) = session.take()
        {
            out.insert(sk, sv);
        }
        out.insert(k, v);
    }
    if let Some((sk, sv)) = session {
        out.insert(sk, sv);
    }
    out
}

/// How far back from a state's last message a completed call's call and result are looked
/// for (a step's calls and results are its last messages).
const COMPLETED_LOOKBACK: usize = 8;

/// The call and the result of tool call `id` among the last `limit` of `messages`.
fn call_and_result<'a>(
    messages: impl DoubleEndedIterator<Item = &'a Message>,
    id: &str,
    limit: usize,
) -> Option<(&'a ToolCall, &'a ToolResult)> {
    let mut result = None;
    for message in messages.rev().take(limit) {
        match message {
            Message::ToolResult(m) if result.is_none() => {
                result = m.results.iter().find(|r| r.tool_call_id == id);
            }
            Message::Assistant(m) if result.is_some() => {
                if let Some(call) = m.tool_calls.iter().find(|c| c.tool_call_id == id) {
                    return result.map(|r| (call, r));
                }
            }
            _ => {}
        }
    }
    None
}

/// A completed call as `completed_tools` holds it: in full, or — when the state's history
/// holds its call and its result unchanged (a step's calls always) — only what the history
/// does not say (`{"toolCallId":…,"duration":…}`: 40 bytes instead of the call and result
/// again; only the id, `"call_49"`, when that is all it would say).
#[derive(Serialize)]
#[serde(untagged)]
enum CompletedEntry<'a> {
    Reference {
        #[serde(rename = "toolCallId")]
        tool_call_id: &'a str,
        /// Left out when 0 (read back as 0).
        #[serde(skip_serializing_if = "is_zero")]
        duration: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        approved: Option<bool>,
    },
    /// A reference with nothing to add (no duration, no approval): its id alone,
    /// `"call_49"` (a checkpoint row is written per step, and a row a few bytes smaller
    /// packs one more into each page).
    Id(&'a str),
    Full(&'a ToolExecution),
}

fn completed_entries<'a>(
    executions: &'a [ToolExecution],
    state: &'a AgentState,
) -> Vec<CompletedEntry<'a>> {
    if executions.is_empty() {
        return Vec::new();
    }
    // The history's last messages, read (decoded) once for all the executions.
    let mut recent: Vec<std::borrow::Cow<'_, Message>> =
        state.messages().rev().take(COMPLETED_LOOKBACK).collect();
    recent.reverse();
    executions
        .iter()
        .map(|e| {
            match call_and_result(
                recent.iter().map(|m| &**m),
                &e.tool_call_id,
                COMPLETED_LOOKBACK,
            ) {
                Some((call, result))
                    if call.tool_name == e.tool_name
                        && call.arguments == e.arguments
                        && result.result == e.result
                        && result.is_error == e.is_error =>
                {
                    if e.duration == 0 && e.approved.is_none() {
                        return CompletedEntry::Id(&e.tool_call_id);
                    }
                    CompletedEntry::Reference {
                        tool_call_id: &e.tool_call_id,
                        duration: e.duration,
                        approved: e.approved,
                    }
                }
                _ => CompletedEntry::Full(e),
            }
        })
        .collect()
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A stored `completed_tools` entry as the execution it stands for (a reference is completed
/// from the call and result in `messages`).
fn completed_execution(entry: Value, messages: &[Message]) -> Result<ToolExecution, StoreError> {
    if entry.get("toolName").is_some() {
        return serde_json::from_value(entry).map_err(|e| corrupt("checkpoints", e));
    }
    // A bare id: a reference with no duration and no approval.
    let id = match &entry {
        Value::String(id) => id.as_str(),
        _ => entry
            .get("toolCallId")
            .and_then(Value::as_str)
            .ok_or_else(|| corrupt("checkpoints", "a completed call without toolCallId"))?,
    };
    let (call, result) = call_and_result(messages.iter(), id, messages.len()).ok_or_else(|| {
        corrupt(
            "checkpoints",
            format!("completed call {id} is not in the checkpoint's history"),
        )
    })?;
    Ok(ToolExecution {
        tool_name: call.tool_name.clone(),
        tool_call_id: call.tool_call_id.clone(),
        arguments: call.arguments.clone(),
        result: result.result.clone(),
        is_error: result.is_error,
        duration: entry.get("duration").and_then(Value::as_u64).unwrap_or(0),
        approved: entry.get("approved").and_then(Value::as_bool),
    })
}

/// What `state_blob` holds: the state without its history, the `seq` ranges of the history
/// (messages, reasoning traces, sub-agent traces), and the runtime spec's `sopPhase` (the
/// `contextVariables` are the state's metadata).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
///
/// Format 3 (issue 19) writes one-letter keys (`{"f":3,"s":{"i":"…"},"m":[[0,41]]}`: a blob is
/// written per checkpoint, and its keys were a third of it); the long keys of formats 1 and 2
/// still read. `u` keeps what the row's usage columns cannot say of the checkpoint's usage.
struct StateBlob<H> {
    #[serde(rename = "f", alias = "format")]
    format: u32,
    #[serde(rename = "s", alias = "state")]
    state: H,
    #[serde(rename = "m", alias = "messages")]
    messages: Vec<[i64; 2]>,
    #[serde(
        default,
        rename = "r",
        alias = "reasoning",
        skip_serializing_if = "Vec::is_empty"
    )]
    reasoning: Vec<[i64; 2]>,
    /// The sub-agent traces' rows (format 2). Format 1 kept them inline in `state`.
    #[serde(
        default,
        rename = "t",
        alias = "traces",
        skip_serializing_if = "Option::is_none"
    )]
    traces: Option<SeqRanges>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sop_phase: Option<Value>,
    /// Where the metadata's `sessionId` goes back: it was the row's `thread_id` and was left
    /// out (format 3).
    #[serde(default, rename = "n", skip_serializing_if = "Option::is_none")]
    session_at: Option<usize>,
    /// What the row's usage columns (input and output tokens) cannot say of the checkpoint's
    /// usage; absent when they say it all. Blobs written before it read as the columns say
    /// (cache tokens and cycles were lost, and no usage read back as zero usage).
    #[serde(default, rename = "u", skip_serializing_if = "Option::is_none")]
    usage: Option<UsageBeyondColumns>,
}

/// A checkpoint's usage where the row's columns are not enough: none at all (`false`), or
/// the whole usage (cache tokens, cycles, or a total other than input + output).
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum UsageBeyondColumns {
    None(bool),
    Whole(TokenUsage),
}

/// The usage the row's columns say.
fn usage_of_columns(input_tokens: u64, output_tokens: u64) -> TokenUsage {
    TokenUsage {
        input_tokens,
        output_tokens,
        total_tokens: input_tokens.saturating_add(output_tokens),
        ..TokenUsage::default()
    }
}

impl UsageBeyondColumns {
    /// What the blob keeps of `usage` (`None`: the columns say it all).
    fn of(usage: Option<&TokenUsage>) -> Option<Self> {
        match usage {
            None => Some(UsageBeyondColumns::None(false)),
            Some(u) if *u == usage_of_columns(u.input_tokens, u.output_tokens) => None,
            Some(u) => Some(UsageBeyondColumns::Whole(u.clone())),
        }
    }

    /// The checkpoint's usage from the blob's `kept` and the row's columns.
    fn read(kept: Option<Self>, columns: &Usage) -> Option<TokenUsage> {
        match kept {
            Some(UsageBeyondColumns::None(_)) => None,
            Some(UsageBeyondColumns::Whole(usage)) => Some(usage),
            None => Some(usage_of_columns(
                columns.input_tokens,
                columns.output_tokens,
            )),
        }
    }
}

/// Inclusive ranges of `seq` in `checkpoint_items`: a state's history (`[[0, 41]]`).
type SeqRanges = Vec<[i64; 2]>;

/// Appends `seq` to a list of inclusive ranges, merging it into the last one when it follows.
fn push_range(ranges: &mut Vec<[i64; 2]>, seq: i64) {
    match ranges.last_mut() {
        Some(r) if r[1] + 1 == seq => r[1] = seq,
        _ => ranges.push([seq, seq]),
    }
}

#[cfg(test)]
fn ranges(seqs: &[i64]) -> Vec<[i64; 2]> {
    let mut out: Vec<[i64; 2]> = Vec::new();
    for &s in seqs {
        push_range(&mut out, s);
    }
    out
}

/// A checkpoint as stored, with the runtime spec's view of it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCheckpoint {
    /// The row's summary.
    pub summary: CheckpointSummary,
    /// The full checkpoint (state with its whole history).
    pub checkpoint: Checkpoint,
    /// The SOP phase (`metadata.sopPhase`), when set.
    pub sop_phase: Option<Value>,
}

impl StoredCheckpoint {
    /// The runtime spec's context variables: the state's metadata.
    pub fn context_variables(&self) -> &Map<String, Value> {
        self.checkpoint.state.metadata()
    }
}

/// What a checkpoint save wrote (for benchmarks and tests of the O(new data) invariant).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SaveStats {
    /// New history rows written.
    pub new_items: u64,
    /// Bytes of SQL parameters written (history rows + the checkpoint row).
    pub bytes: u64,
}

fn stmt_bytes(stmts: &[Stmt]) -> u64 {
    stmts
        .iter()
        .flat_map(|s| s.params.iter())
        .map(|p| match p {
            SqlValue::Text(t) => t.len() as u64,
            SqlValue::Null => 0,
            _ => 8,
        })
        .sum()
}

/// The `checkpoint_items` key of the thread given as `$1` (schema 11).
macro_rules! thread_key {
    () => {
        "(SELECT id FROM checkpoint_threads WHERE thread_id = $1)"
    };
}
pub(crate) use thread_key;

/// Where a message's JSON (`{"type":"…",…`, the tag first) continues after its tag.
fn after_type_tag(json: &str) -> Option<usize> {
    const PREFIX: &str = "{\"type\":\"";
    let rest = json.strip_prefix(PREFIX)?;
    Some(PREFIX.len() + rest.find('"')? + 1)
}

/// A message's JSON as stored in `checkpoint_items`: without its `"id"`, which the row's
/// `item_key` holds (44 bytes a message that every row would store twice). serde writes the
/// tag, then the id (`{"type":"user","id":"…",…`); any other shape is kept whole.
fn body_without_id(mut json: String, id: &str) -> String {
    let (Some(at), Ok(id_json)) = (after_type_tag(&json), serde_json::to_string(id)) else {
        return json;
    };
    let field = format!(",\"id\":{id_json}");
    if json[at..].starts_with(&field) {
        json.replace_range(at..at + field.len(), "");
    }
    json
}

/// Takes `message`'s `"timestamp"` out of its stored JSON and returns it as Unix nanoseconds
/// (the row's `ts`: 8 bytes instead of 44). serde writes the timestamp last but for the
/// metadata, so the body must end with `,"timestamp":"…"` and then exactly `}` or
/// `,"metadata":{…}}` (the value has no quote, so the last `,"timestamp":"` before that end
/// is the top-level field); any other shape (a redacted body, a time that nanoseconds cannot
/// hold) keeps its timestamp. The time is not formatted again: that costs more than the rest
/// of the save.
fn take_timestamp(json: &mut String, message: &Message) -> Option<i64> {
    const KEY: &str = ",\"timestamp\":\"";
    let time = message.timestamp();
    let nanos = time.timestamp_nanos_opt()?;
    if DateTime::from_timestamp_nanos(nanos) != time {
        return None;
    }
    let tail = match message.metadata() {
        Some(metadata) => format!(",\"metadata\":{}}}", serde_json::to_string(metadata).ok()?),
        None => "}".to_owned(),
    };
    let end = json.len().checked_sub(tail.len())?;
    if json.get(end..)? != tail {
        return None;
    }
    let start = json.get(..end)?.rfind(KEY)?;
    let value = json.get(start + KEY.len()..end)?.strip_suffix('"')?;
    let rfc3339 = (20..=35).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_digit() || b"-:.TZ+".contains(&b));
    if !rfc3339 {
        return None;
    }
    json.replace_range(start..end, "");
    Some(nanos)
}

/// A message id as a row's `item_key`: a canonical UUID (lowercase, hyphenated: the ids
/// Weft makes) as `~` and its 16 bytes in unpadded base64url (23 characters instead of 36);
/// any other id as it is, with one more `~` in front when it starts with one.
fn encode_key(id: &str) -> std::borrow::Cow<'_, str> {
    use base64::Engine as _;
    match uuid::Uuid::try_parse(id) {
        Ok(uuid) if uuid.hyphenated().to_string() == id => std::borrow::Cow::Owned(format!(
            "~{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid.as_bytes())
        )),
        _ if id.starts_with('~') => std::borrow::Cow::Owned(format!("~{id}")),
        _ => std::borrow::Cow::Borrowed(id),
    }
}

/// The message id a row's `item_key` stands for (see [`encode_key`]); rows written before
/// keys were encoded hold the id itself.
fn decode_key(key: String) -> String {
    use base64::Engine as _;
    if let Some(escaped) = key.strip_prefix("~~") {
        return format!("~{escaped}");
    }
    let uuid = key
        .strip_prefix('~')
        .filter(|b64| b64.len() == 22)
        .and_then(|b64| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(b64)
                .ok()
        })
        .and_then(|bytes| uuid::Uuid::from_slice(&bytes).ok());
    match uuid {
        Some(uuid) => uuid.hyphenated().to_string(),
        None => key,
    }
}

/// The `kind` of a message row whose body leaves out its `"type"` tag, by tag (schema 11).
const TAGGED_KINDS: [(&str, &str); 3] =
    [("user", "mu"), ("assistant", "ma"), ("tool_result", "mr")];

/// Takes the `"type"` tag out of a stored message body (`{"type":"user","content":…}` →
/// `{"content":…}`) and returns the row's `kind` that says it: `m` (the tag kept) for any
/// other shape.
fn take_tag(json: &mut String) -> &'static str {
    const PREFIX: usize = "{\"type\":\"".len();
    let Some(at) = after_type_tag(json) else {
        return "m";
    };
    let tag = json.get(PREFIX..at - 1).unwrap_or_default();
    let Some(&(_, kind)) = TAGGED_KINDS.iter().find(|(t, _)| *t == tag) else {
        return "m";
    };
    if !json[at..].starts_with(',') {
        return "m";
    }
    json.replace_range(1..=at, "");
    kind
}

/// A stored message body with its `"type"` tag, which `kind` gives when the body left it out.
fn tagged_body<'a>(body: &'a str, kind: &str) -> std::borrow::Cow<'a, str> {
    let tag = TAGGED_KINDS
        .iter()
        .find(|(_, k)| *k == kind)
        .map(|(t, _)| t);
    match (tag, body.strip_prefix('{')) {
        (Some(tag), Some(rest)) if rest.starts_with('}') => {
            std::borrow::Cow::Owned(format!("{{\"type\":\"{tag}\"{rest}"))
        }
        (Some(tag), Some(rest)) => std::borrow::Cow::Owned(format!("{{\"type\":\"{tag}\",{rest}")),
        _ => std::borrow::Cow::Borrowed(body),
    }
}

/// A stored message body as a message's JSON: the id from the row's `item_key` and the
/// timestamp from its `ts` put back after the tag, unless the body has them (rows written
/// before they were left out).
fn message_json<'a>(body: &'a str, id: &str, ts: Option<i64>) -> std::borrow::Cow<'a, str> {
    let Some(at) = after_type_tag(body) else {
        return std::borrow::Cow::Borrowed(body);
    };
    let mut fields = String::new();
    if !body[at..].starts_with(",\"id\":")
        && let Ok(id_json) = serde_json::to_string(id)
    {
        fields.push_str(",\"id\":");
        fields.push_str(&id_json);
    }
    if let Some(time) = ts.map(DateTime::from_timestamp_nanos)
        && let Ok(time_json) = serde_json::to_string(&time)
    {
        fields.push_str(",\"timestamp\":");
        fields.push_str(&time_json);
    }
    if fields.is_empty() {
        return std::borrow::Cow::Borrowed(body);
    }
    std::borrow::Cow::Owned(format!("{}{fields}{}", &body[..at], &body[at..]))
}

/// The `seq` of id-less item `index` of `kind` with `body`: the stored one when the thread
/// holds the same body at that position, else a staged insert.
fn stage_indexed(
    thread_id: &str,
    kind: Indexed,
    index: usize,
    body: String,
    cache: &mut ThreadCache,
    stmts: &mut Vec<Stmt>,
) -> i64 {
    let known = match kind {
        Indexed::Reasoning => &mut cache.reasoning,
        Indexed::Trace => &mut cache.traces,
    };
    if let Some((stored, seq)) = known.get(index)
        && *stored == body
    {
        return *seq;
    }
    let seq = cache.next_seq;
    cache.next_seq += 1;
    stmts.push(stmt!(
        concat!(
            "INSERT INTO checkpoint_items (thread_key, seq, kind, item_key, body) VALUES (",
            thread_key!(),
            ", $2, $3, $4, $5)"
        ),
        thread_id,
        seq,
        kind.kind(),
        index.to_string(),
        body.as_str()
    ));
    known.truncate(index);
    known.push((body, seq));
    seq
}

impl Store {
    async fn ensure_cache(
        &self,
        thread_id: &str,
        cache: &mut ThreadCache,
    ) -> Result<(), StoreError> {
        let failed = cache.failed.load(Ordering::SeqCst);
        if cache.loaded && !failed {
            return Ok(());
        }
        if failed || cache.next_step > 0 {
            // Writes of this thread may still be queued: let them land (or fail) first.
            self.flush().await?;
        }
        let max_step = self
            .query(stmt!(
                "SELECT COALESCE(MAX(step), 0) FROM checkpoints WHERE thread_id = $1",
                thread_id
            ))
            .await?;
        let max_step = max_step.first().map_or(Ok(0), |r| r.int(0))?;
        let items = self
            .query(stmt!(
                concat!(
                    "SELECT seq, kind, item_key, CASE WHEN kind IN ('r', 't') THEN body ELSE '' END \
                     FROM checkpoint_items WHERE thread_key = ",
                    thread_key!(),
                    " ORDER BY seq"
                ),
                thread_id
            ))
            .await?;
        let mut fresh = ThreadCache {
            loaded: true,
            failed: Arc::new(AtomicBool::new(false)),
            next_step: max_step + 1,
            ..ThreadCache::default()
        };
        for row in &items {
            let seq = row.int(0)?;
            fresh.next_seq = fresh.next_seq.max(seq + 1);
            let kind = row.text(1)?;
            if kind == "r" {
                fresh.reasoning.push((row.text(3)?, seq));
            } else if kind == "t" {
                fresh.traces.push((row.text(3)?, seq));
            } else {
                fresh.by_id.insert(decode_key(row.text(2)?), seq);
            }
        }
        let latest = self
            .query(stmt!(
                "SELECT state_blob, agent_id, agent_step, message_count, min_message_seq, \
                 usage_input_tokens, usage_output_tokens, usage_cost FROM checkpoints \
                 WHERE thread_id = $1 ORDER BY step DESC LIMIT 1",
                thread_id
            ))
            .await?;
        if let Some(row) = latest.first() {
            fresh.last = Some(LastCheckpoint {
                state_blob: row.text(0)?,
                agent_id: row.text(1)?,
                agent_step: row.uint(2)?,
                message_count: row.uint(3)?,
                min_seq: row.int(4)?,
                usage: Usage {
                    input_tokens: row.uint(5)?,
                    output_tokens: row.uint(6)?,
                    cost: row.opt_real(7)?,
                },
            });
        }
        *cache = fresh;
        Ok(())
    }

    /// Stages the inserts of the history items of `state` the thread does not hold yet and
    /// returns where its whole history lives.
    fn stage_history(
        &self,
        thread_id: &str,
        state: &AgentState,
        cache: &mut ThreadCache,
        stmts: &mut Vec<Stmt>,
    ) -> Result<HistoryRanges, StoreError> {
        let (mut ranges, known) = match cache.saved.take() {
            // The common case: the step appended to the saved history. O(new items).
            Some(saved) if state.extends(&saved.state) => {
                let known = (
                    saved.state.message_count(),
                    saved.state.reasoning().len(),
                    saved.state.subagent_traces().len(),
                );
                (saved.ranges, Some(known))
            }
            // A replaced history (context compression), a sibling branch, or the first save
            // in this process: every item is looked up.
            _ => (HistoryRanges::default(), None),
        };
        let (messages_known, reasoning_known, traces_known) = known.unwrap_or((0, 0, 0));
        for i in messages_known..state.message_count() {
            if let Some(message) = state.message(i) {
                let seq = self.stage_message(thread_id, &message, cache, stmts)?;
                push_range(&mut ranges.messages, seq);
            }
        }
        for (i, text) in state.reasoning().enumerate().skip(reasoning_known) {
            let mut body = Value::String(text.to_owned());
            if self.shared.redact_checkpoints && self.shared.redactor.may_redact(text) {
                self.redact(&mut body);
            }
            let body = body.as_str().unwrap_or_default().to_owned();
            let seq = stage_indexed(thread_id, Indexed::Reasoning, i, body, cache, stmts);
            push_range(&mut ranges.reasoning, seq);
        }
        for (i, trace) in state.subagent_traces().enumerate().skip(traces_known) {
            let body = self.redacted_string(trace, true)?;
            let seq = stage_indexed(thread_id, Indexed::Trace, i, body, cache, stmts);
            push_range(&mut ranges.traces, seq);
        }
        cache.reasoning.truncate(state.reasoning().len());
        cache.traces.truncate(state.subagent_traces().len());
        Ok(ranges)
    }

    /// The `seq` of `message` in the thread's history, staging its insert when new.
    fn stage_message(
        &self,
        thread_id: &str,
        message: &Message,
        cache: &mut ThreadCache,
        stmts: &mut Vec<Stmt>,
    ) -> Result<i64, StoreError> {
        let id = message.id();
        if let Some(&seq) = cache.by_id.get(id) {
            return Ok(seq);
        }
        let seq = cache.next_seq;
        let mut body = body_without_id(self.redacted_string(message, true)?, id);
        let ts = take_timestamp(&mut body, message);
        let kind = take_tag(&mut body);
        stmts.push(stmt!(
            concat!(
                "INSERT INTO checkpoint_items (thread_key, seq, kind, item_key, body, ts) VALUES (",
                thread_key!(),
                ", $2, $3, $4, $5, $6)"
            ),
            thread_id,
            seq,
            kind,
            encode_key(id).into_owned(),
            body,
            ts
        ));
        cache.next_seq += 1;
        cache.by_id.insert(id.to_owned(), seq);
        Ok(seq)
    }

    /// Saves a step-end checkpoint of `thread_id` (what `CheckpointStore::save` does),
    /// writing only the history items the thread does not hold yet.
    ///
    /// # Errors
    /// Database failures (in `Sync` durability), invalid ids.
    ///
    /// # Cancel safety
    /// In `Async` durability the write is queued before the future can be dropped after its
    /// first await; in `Sync`, a drop after queueing still commits. A drop before leaves
    /// nothing behind.
    pub async fn save_checkpoint(
        &self,
        thread_id: &str,
        checkpoint: &Checkpoint,
    ) -> Result<SaveStats, StoreError> {
        if thread_id.is_empty() {
            return Err(StoreError::Invalid("empty thread id".into()));
        }
        let cache = self.cache(thread_id);
        let mut cache = cache.lock().await;
        self.ensure_cache(thread_id, &mut cache).await?;
        let mut stmts = Vec::new();
        if !cache.registered {
            stmts.push(stmt!(
                "INSERT INTO checkpoint_threads (thread_id) VALUES ($1) ON CONFLICT (thread_id) DO NOTHING",
                thread_id
            ));
            cache.registered = true;
        }
        let registration = stmts.len();
        let state = &checkpoint.state;
        let staged = self.stage_history(thread_id, state, &mut cache, &mut stmts);
        let ranges = match staged {
            Ok(ranges) => ranges,
            Err(error) => {
                // The cache already counts rows that will not be written: rebuild it.
                cache.loaded = false;
                return Err(error);
            }
        };
        let new_items = (stmts.len() - registration) as u64;

        let session_at = session_position(state.metadata(), thread_id);
        let blob = StateBlob {
            format: 3,
            state: StateHeadRef {
                id: encode_key(state.id()),
                step: i64::try_from(state.step()).is_err().then_some(state.step()),
                metadata: MetadataRef {
                    map: state.metadata(),
                    skip: session_at,
                },
                plan: state.plan(),
            },
            messages: ranges.messages,
            reasoning: ranges.reasoning,
            traces: (!ranges.traces.is_empty()).then_some(ranges.traces),
            sop_phase: state.metadata().get("sopPhase").cloned(),
            session_at,
            usage: UsageBeyondColumns::of(checkpoint.usage.as_ref()),
        };
        let state_blob = self.redacted_string(&blob, true)?;
        let min_seq = blob
            .messages
            .iter()
            .chain(&blob.reasoning)
            .chain(blob.traces.iter().flatten())
            .map(|r| r[0])
            .min()
            .unwrap_or(cache.next_seq);
        let (input, output) = checkpoint
            .usage
            .as_ref()
            .map_or((0, 0), |u| (u.input_tokens, u.output_tokens));
        let pricing = self.shared.pricing;
        let usage = Usage {
            input_tokens: input,
            output_tokens: output,
            // The store knows a price only when its options give one; runs price each
            // model call themselves (weft-runtime).
            cost: (pricing != Pricing::default()).then(|| pricing.cost(input, output)),
        };
        let step = cache.next_step;
        cache.next_step += 1;
        let pending = self.json_list(&checkpoint.pending_tool_calls)?;
        let completed =
            self.json_list(&completed_entries(&checkpoint.completed_tool_calls, state))?;
        stmts.push(insert_checkpoint(CheckpointRow {
            id: &checkpoint.metadata.checkpoint_id,
            thread_id,
            step,
            timestamp: &checkpoint
                .metadata
                .timestamp
                .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            state_blob: &state_blob,
            pending: pending.as_deref(),
            completed: completed.as_deref(),
            usage,
            kind: "step",
            agent_id: &checkpoint.metadata.agent_id,
            agent_step: state.step(),
            run_id: self.run_id.as_deref(),
            message_count: state.message_count() as u64,
            min_seq,
        }));
        let stats = SaveStats {
            new_items,
            bytes: stmt_bytes(&stmts),
        };
        cache.saved = Some(SavedHistory {
            state: state.clone(),
            ranges: HistoryRanges {
                messages: blob.messages,
                reasoning: blob.reasoning,
                traces: blob.traces.unwrap_or_default(),
            },
        });
        cache.last = Some(LastCheckpoint {
            state_blob,
            agent_id: checkpoint.metadata.agent_id.clone(),
            agent_step: state.step(),
            message_count: state.message_count() as u64,
            min_seq,
            usage,
        });
        let failed = cache.failed.clone();
        let result = self.write(stmts, Some(failed)).await;
        if result.is_err() {
            cache.loaded = false;
        }
        result.map(|()| stats)
    }

    /// Saves a checkpoint after a tool result: the thread's latest state with the step's
    /// pending and completed calls. Returns its id, or `None` when the thread has no
    /// checkpoint yet to derive it from.
    ///
    /// # Errors
    /// Database failures (in `Sync` durability).
    ///
    /// # Cancel safety
    /// As [`Store::save_checkpoint`].
    pub async fn save_tool_checkpoint(
        &self,
        thread_id: &str,
        pending: &[ToolCall],
        completed: &[ToolExecution],
    ) -> Result<Option<String>, StoreError> {
        let cache = self.cache(thread_id);
        let mut cache = cache.lock().await;
        self.ensure_cache(thread_id, &mut cache).await?;
        let Some(last) = cache.last.clone() else {
            return Ok(None);
        };
        let id = new_id();
        let step = cache.next_step;
        cache.next_step += 1;
        let pending = self.json_list(pending)?;
        let completed = self.json_list(completed)?;
        let stmt = insert_checkpoint(CheckpointRow {
            id: &id,
            thread_id,
            step,
            timestamp: &now_string(),
            state_blob: &last.state_blob,
            pending: pending.as_deref(),
            completed: completed.as_deref(),
            usage: last.usage,
            kind: "tool",
            agent_id: &last.agent_id,
            agent_step: last.agent_step,
            run_id: self.run_id.as_deref(),
            message_count: last.message_count,
            min_seq: last.min_seq,
        });
        let failed = cache.failed.clone();
        let result = self.write(vec![stmt], Some(failed)).await;
        if result.is_err() {
            cache.loaded = false;
        }
        result.map(|()| Some(id))
    }

    /// The newest checkpoint of `thread_id`.
    ///
    /// # Errors
    /// Database failures; [`StoreError::Corrupt`] for an undecodable row.
    pub async fn latest_checkpoint(
        &self,
        thread_id: &str,
    ) -> Result<Option<StoredCheckpoint>, StoreError> {
        self.one_checkpoint(
            "thread_id = $1 ORDER BY step DESC LIMIT 1",
            vec![thread_id.into()],
        )
        .await
    }

    /// The checkpoint with ordinal `step` of `thread_id`.
    ///
    /// # Errors
    /// As [`Store::latest_checkpoint`].
    pub async fn checkpoint_at(
        &self,
        thread_id: &str,
        step: u64,
    ) -> Result<Option<StoredCheckpoint>, StoreError> {
        self.one_checkpoint(
            "thread_id = $1 AND step = $2",
            vec![thread_id.into(), step.into()],
        )
        .await
    }

    /// The first checkpoint matching `condition` (after `WHERE`), once queued writes landed.
    async fn one_checkpoint(
        &self,
        condition: &str,
        params: Vec<SqlValue>,
    ) -> Result<Option<StoredCheckpoint>, StoreError> {
        self.flush().await?;
        let sql = format!("SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE {condition}");
        let rows = self.query(Stmt::new(sql, params)).await?;
        match rows.first() {
            Some(row) => Ok(Some(self.decode_checkpoint(row).await?)),
            None => Ok(None),
        }
    }

    /// Every checkpoint of `thread_id`, oldest first.
    ///
    /// # Errors
    /// Database failures.
    pub async fn list_checkpoints(
        &self,
        thread_id: &str,
    ) -> Result<Vec<CheckpointSummary>, StoreError> {
        self.flush().await?;
        let rows = self
            .query(Stmt::new(
                format!("SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE thread_id = $1 ORDER BY step"),
                vec![thread_id.into()],
            ))
            .await?;
        rows.iter().map(summary_of).collect()
    }

    /// The bodies of the history rows in `ranges`, in order.
    async fn item_bodies(
        &self,
        thread_id: &str,
        ranges: &[[i64; 2]],
    ) -> Result<Vec<String>, StoreError> {
        Ok(self
            .item_rows(thread_id, ranges)
            .await?
            .into_iter()
            .map(|(_, body, _)| body)
            .collect())
    }

    /// The `(item_key, body, ts)` of the history rows in `ranges`, in order; a message's body
    /// with its `"type"` tag (see [`tagged_body`]).
    async fn item_rows(
        &self,
        thread_id: &str,
        ranges: &[[i64; 2]],
    ) -> Result<Vec<(String, String, Option<i64>)>, StoreError> {
        let mut rows = Vec::new();
        for [from, to] in ranges {
            for r in self
                .query(stmt!(
                    concat!(
                        "SELECT item_key, body, ts, kind FROM checkpoint_items WHERE thread_key = ",
                        thread_key!(),
                        " AND seq >= $2 AND seq <= $3 ORDER BY seq"
                    ),
                    thread_id,
                    *from,
                    *to
                ))
                .await?
            {
                let body = r.text(1)?;
                let body = match tagged_body(&body, &r.text(3)?) {
                    std::borrow::Cow::Owned(tagged) => tagged,
                    std::borrow::Cow::Borrowed(_) => body,
                };
                rows.push((decode_key(r.text(0)?), body, r.opt_int(2)?));
            }
        }
        Ok(rows)
    }

    async fn decode_checkpoint(&self, row: &Row) -> Result<StoredCheckpoint, StoreError> {
        let summary = summary_of(row)?;
        let blob: StateBlob<StateHead> =
            serde_json::from_str(&row.text(4)?).map_err(|e| corrupt("checkpoints", e))?;
        let thread = summary.thread_id.as_str();
        let messages = self
            .item_rows(thread, &blob.messages)
            .await?
            .iter()
            .map(|(id, body, ts)| serde_json::from_str::<Message>(&message_json(body, id, *ts)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| corrupt("checkpoint_items", e))?;
        let reasoning = self.item_bodies(thread, &blob.reasoning).await?;
        let subagent_traces = match &blob.traces {
            Some(ranges) => self
                .item_bodies(thread, ranges)
                .await?
                .iter()
                .map(|body| serde_json::from_str::<SubagentExecutionTrace>(body))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| corrupt("checkpoint_items", e))?,
            None => blob.state.subagent_traces,
        };
        let expected: i64 = blob.messages.iter().map(|[a, b]| b - a + 1).sum();
        if i64::try_from(messages.len()).unwrap_or(-1) != expected {
            return Err(corrupt(
                "checkpoint_items",
                format!(
                    "checkpoint {} references {expected} messages, {} found (pruned history?)",
                    summary.id,
                    messages.len()
                ),
            ));
        }
        let pending: Vec<ToolCall> = parse_opt_json(row.opt_text(5)?, "checkpoints")?;
        let completed: Vec<Value> = parse_opt_json(row.opt_text(6)?, "checkpoints")?;
        let completed = completed
            .into_iter()
            .map(|entry| completed_execution(entry, &messages))
            .collect::<Result<Vec<_>, _>>()?;
        let timestamp: DateTime<Utc> = DateTime::parse_from_rfc3339(&summary.timestamp)
            .map_err(|e| corrupt("checkpoints", e))?
            .with_timezone(&Utc);
        let usage = UsageBeyondColumns::read(blob.usage, &summary.usage);
        let step = blob.state.step.unwrap_or(summary.agent_step);
        let checkpoint = Checkpoint {
            metadata: CheckpointMetadata {
                session_id: summary.thread_id.clone(),
                checkpoint_id: summary.id.clone(),
                timestamp,
                step,
                agent_id: summary.agent_id.clone(),
            },
            state: AgentState::from_json(AgentStateJson {
                version: blob.state.version,
                id: decode_key(blob.state.id),
                messages,
                step,
                metadata: match blob.session_at {
                    Some(at) => with_session(blob.state.metadata, at, thread),
                    None => blob.state.metadata,
                },
                reasoning,
                plan: blob.state.plan,
                subagent_traces,
            })
            .map_err(|e| corrupt("checkpoints", e))?,
            pending_tool_calls: pending,
            completed_tool_calls: completed,
            usage,
        };
        Ok(StoredCheckpoint {
            summary,
            checkpoint,
            sop_phase: blob.sop_phase,
        })
    }

    /// Deletes every checkpoint (and stored history) of `thread_id`. Artifacts keep their
    /// rows with `checkpoint_id` cleared.
    ///
    /// # Errors
    /// Database failures.
    pub async fn delete_checkpoints(&self, thread_id: &str) -> Result<(), StoreError> {
        let cache = self.cache(thread_id);
        let mut cache = cache.lock().await;
        self.write_now(vec![
            stmt!(
                "UPDATE artifacts SET checkpoint_id = NULL WHERE checkpoint_id IN (SELECT id FROM checkpoints WHERE thread_id = $1)",
                thread_id
            ),
            stmt!("DELETE FROM checkpoints WHERE thread_id = $1", thread_id),
            stmt!(
                concat!("DELETE FROM checkpoint_items WHERE thread_key = ", thread_key!()),
                thread_id
            ),
            stmt!(
                "DELETE FROM checkpoint_threads WHERE thread_id = $1",
                thread_id
            ),
        ])
        .await?;
        *cache = ThreadCache::default();
        Ok(())
    }

    /// Applies `retention` to `thread_id`: drops old checkpoints (never the newest, never
    /// one an artifact points to) and the history rows no remaining checkpoint references.
    /// Returns how many checkpoints were dropped.
    ///
    /// # Errors
    /// Database failures.
    pub async fn prune_checkpoints(
        &self,
        thread_id: &str,
        retention: &Retention,
    ) -> Result<u64, StoreError> {
        let cache = self.cache(thread_id);
        let _guard = cache.lock().await;
        self.flush().await?;
        let before = self.count_checkpoints(thread_id).await?;
        let mut stmts = Vec::new();
        let keep_refs =
            "id NOT IN (SELECT checkpoint_id FROM artifacts WHERE checkpoint_id IS NOT NULL)";
        if retention.drop_superseded_tool_checkpoints {
            stmts.push(Stmt::new(
                format!(
                    "DELETE FROM checkpoints WHERE thread_id = $1 AND kind = 'tool' AND step < \
                     (SELECT COALESCE(MAX(step), 0) FROM checkpoints WHERE thread_id = $1 AND kind = 'step') AND {keep_refs}"
                ),
                vec![thread_id.into()],
            ));
        }
        if let Some(keep) = retention.keep_last {
            let keep = i64::from(keep.max(1));
            stmts.push(Stmt::new(
                format!(
                    "DELETE FROM checkpoints WHERE thread_id = $1 AND step <= \
                     (SELECT COALESCE(MAX(step), 0) FROM checkpoints WHERE thread_id = $1) - $2 AND {keep_refs}"
                ),
                vec![thread_id.into(), keep.into()],
            ));
        }
        stmts.push(stmt!(
            concat!(
                "DELETE FROM checkpoint_items WHERE thread_key = ",
                thread_key!(),
                " AND seq < (SELECT COALESCE(MIN(min_message_seq), 0) FROM checkpoints WHERE thread_id = $1)"
            ),
            thread_id
        ));
        self.write_now(stmts).await?;
        let after = self.count_checkpoints(thread_id).await?;
        Ok(before.saturating_sub(after))
    }

    async fn count_checkpoints(&self, thread_id: &str) -> Result<u64, StoreError> {
        let rows = self
            .query(stmt!(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = $1",
                thread_id
            ))
            .await?;
        rows.first().map_or(Ok(0), |r| r.uint(0))
    }

    /// Every thread with a checkpoint.
    ///
    /// # Errors
    /// Database failures.
    pub async fn checkpoint_threads(&self) -> Result<Vec<String>, StoreError> {
        self.flush().await?;
        let rows = self
            .query(stmt!(
                "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"
            ))
            .await?;
        rows.iter().map(|r| r.text(0)).collect()
    }
}

struct CheckpointRow<'a> {
    id: &'a str,
    thread_id: &'a str,
    step: i64,
    timestamp: &'a str,
    state_blob: &'a str,
    /// `None` (NULL) when there are none.
    pending: Option<&'a str>,
    /// `None` (NULL) when there are none.
    completed: Option<&'a str>,
    usage: Usage,
    kind: &'static str,
    agent_id: &'a str,
    agent_step: u64,
    run_id: Option<&'a str>,
    message_count: u64,
    min_seq: i64,
}

fn insert_checkpoint(row: CheckpointRow<'_>) -> Stmt {
    stmt!(
        "INSERT INTO checkpoints (id, thread_id, step, timestamp, state_blob, pending_tools, completed_tools, \
         usage_tokens, usage_cost, kind, agent_id, agent_step, run_id, message_count, min_message_seq, \
         usage_input_tokens, usage_output_tokens) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
        row.id,
        row.thread_id,
        row.step,
        row.timestamp,
        row.state_blob,
        row.pending,
        row.completed,
        row.usage.input_tokens + row.usage.output_tokens,
        row.usage.cost,
        row.kind,
        row.agent_id,
        row.agent_step,
        row.run_id,
        row.message_count,
        row.min_seq,
        row.usage.input_tokens,
        row.usage.output_tokens
    )
}

fn json_len(text: Option<String>) -> u64 {
    text.and_then(|t| serde_json::from_str::<Vec<Value>>(&t).ok())
        .map_or(0, |v| v.len() as u64)
}

fn summary_of(row: &Row) -> Result<CheckpointSummary, StoreError> {
    Ok(CheckpointSummary {
        id: row.text(0)?,
        thread_id: row.text(1)?,
        step: row.uint(2)?,
        timestamp: row.text(3)?,
        pending_tools: json_len(row.opt_text(5)?),
        completed_tools: json_len(row.opt_text(6)?),
        usage: Usage {
            input_tokens: row.uint(14)?,
            output_tokens: row.uint(15)?,
            cost: row.opt_real(8)?,
        },
        kind: row.text(9)?,
        agent_id: row.text(10)?,
        agent_step: row.uint(11)?,
        run_id: row.opt_text(12)?,
        message_count: row.uint(13)?,
    })
}

fn parse_opt_json<T: serde::de::DeserializeOwned + Default>(
    text: Option<String>,
    table: &'static str,
) -> Result<T, StoreError> {
    match text {
        None => Ok(T::default()),
        Some(t) => serde_json::from_str(&t).map_err(|e| corrupt(table, e)),
    }
}

fn checkpoint_error(error: StoreError) -> CheckpointError {
    CheckpointError::Backend(error.to_string())
}

#[async_trait]
impl CheckpointStore for Store {
    async fn save(&self, session_id: &str, checkpoint: Checkpoint) -> Result<(), CheckpointError> {
        self.save_checkpoint(session_id, &checkpoint)
            .await
            .map(|_| ())
            .map_err(checkpoint_error)
    }

    async fn load(&self, session_id: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        self.latest_checkpoint(session_id)
            .await
            .map(|c| c.map(|c| c.checkpoint))
            .map_err(checkpoint_error)
    }

    async fn load_metadata(
        &self,
        session_id: &str,
    ) -> Result<Option<CheckpointMetadata>, CheckpointError> {
        self.flush().await.map_err(checkpoint_error)?;
        let rows = self
            .query(Stmt::new(
                format!("SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE thread_id = $1 ORDER BY step DESC LIMIT 1"),
                vec![session_id.into()],
            ))
            .await
            .map_err(checkpoint_error)?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let s = summary_of(row).map_err(checkpoint_error)?;
        let timestamp = DateTime::parse_from_rfc3339(&s.timestamp)
            .map_err(|e| checkpoint_error(corrupt("checkpoints", e)))?
            .with_timezone(&Utc);
        Ok(Some(CheckpointMetadata {
            session_id: s.thread_id,
            checkpoint_id: s.id,
            timestamp,
            step: s.agent_step,
            agent_id: s.agent_id,
        }))
    }

    async fn delete(&self, session_id: &str) -> Result<(), CheckpointError> {
        self.delete_checkpoints(session_id)
            .await
            .map_err(checkpoint_error)
    }

    async fn list(&self) -> Result<Vec<String>, CheckpointError> {
        self.checkpoint_threads().await.map_err(checkpoint_error)
    }
}

// ----- events -----

/// The append-only event log (runtime spec §5.6, §8.2).
#[async_trait]
pub trait EventLog: Send + Sync {
    /// Appends one event (payload redacted). Durable on return in `Sync` durability.
    ///
    /// # Errors
    /// Database failures.
    ///
    /// # Cancel safety
    /// Once queued, the event is written even if the future is dropped.
    async fn append_event(&self, event: NewEvent) -> Result<(), StoreError>;

    /// Appends events in order, in one transaction.
    ///
    /// # Errors
    /// Database failures.
    ///
    /// # Cancel safety
    /// As [`EventLog::append_event`].
    async fn append_events(&self, events: Vec<NewEvent>) -> Result<(), StoreError>;

    /// Events matching `query`, in log order (by `seq` within a run).
    ///
    /// # Errors
    /// Database failures.
    async fn events(&self, query: &EventQuery) -> Result<Vec<EventRecord>, StoreError>;

    /// The number of the last event of `run_id` (0: none yet).
    ///
    /// # Errors
    /// Database failures.
    async fn last_event_seq(&self, run_id: &str) -> Result<u64, StoreError>;
}

impl Store {
    /// The statements appending `event`: its insert, preceded by the backend's
    /// [`run_seq_lock`](crate::sql::Backend::run_seq_lock) when the store numbers it.
    fn event_stmts(&self, event: NewEvent, out: &mut Vec<Stmt>) {
        if event.seq.is_none()
            && let Some(lock) = self.shared.backend.run_seq_lock(&event.run_id)
        {
            out.push(lock);
        }
        out.push(self.event_stmt(event));
    }

    fn event_stmt(&self, mut event: NewEvent) -> Stmt {
        self.redact(&mut event.payload);
        if let Some(id) = &mut event.tool_call_id {
            let mut v = Value::String(std::mem::take(id));
            self.redact(&mut v);
            *id = v.as_str().unwrap_or_default().to_owned();
        }
        let timestamp = event.timestamp.unwrap_or_else(now_string);
        match event.seq {
            Some(seq) => stmt!(
                "INSERT INTO events (thread_id, event_type, timestamp, payload, event_id, run_id, agent_id, turn, tool_call_id, run_seq) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                event.thread_id,
                event.event_type,
                timestamp,
                event.payload.to_string(),
                format!("{}:{seq}", event.run_id),
                event.run_id,
                event.agent_id,
                event.turn,
                event.tool_call_id,
                seq
            ),
            // The next number of the run, in the same statement; concurrent writers are
            // ordered by the backend's `run_seq_lock` (see `event_stmts`).
            None => stmt!(
                "INSERT INTO events (thread_id, event_type, timestamp, payload, event_id, run_id, agent_id, turn, tool_call_id, run_seq) \
                 SELECT $1, $2, $3, $4, $5 || ':' || CAST(n AS TEXT), $5, $6, $7, $8, n \
                 FROM (SELECT COALESCE(MAX(run_seq), 0) + 1 AS n FROM events WHERE run_id = $5) AS next",
                event.thread_id,
                event.event_type,
                timestamp,
                event.payload.to_string(),
                event.run_id,
                event.agent_id,
                event.turn,
                event.tool_call_id
            ),
        }
    }
}

#[async_trait]
impl EventLog for Store {
    async fn append_event(&self, event: NewEvent) -> Result<(), StoreError> {
        let mut stmts = Vec::with_capacity(2);
        self.event_stmts(event, &mut stmts);
        self.write(stmts, None).await
    }

    async fn append_events(&self, events: Vec<NewEvent>) -> Result<(), StoreError> {
        let mut stmts = Vec::with_capacity(events.len() * 2);
        for event in events {
            self.event_stmts(event, &mut stmts);
        }
        self.write(stmts, None).await
    }

    async fn events(&self, query: &EventQuery) -> Result<Vec<EventRecord>, StoreError> {
        self.flush().await?;
        let mut sql = String::from(
            "SELECT run_seq, event_id, event_type, run_id, thread_id, agent_id, turn, timestamp, tool_call_id, payload FROM events WHERE 1 = 1",
        );
        let mut params: Vec<SqlValue> = Vec::new();
        let mut add = |sql: &mut String, clause: &str, value: SqlValue| {
            params.push(value);
            sql.push_str(&clause.replace('?', &format!("${}", params.len())));
        };
        if let Some(run) = &query.run_id {
            add(&mut sql, " AND run_id = ?", run.into());
        }
        if let Some(thread) = &query.thread_id {
            add(&mut sql, " AND thread_id = ?", thread.into());
        }
        if !query.types.is_empty() {
            sql.push_str(" AND event_type IN (");
            for (i, t) in query.types.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                add(&mut sql, "?", t.into());
            }
            sql.push(')');
        }
        if let Some(since) = &query.since {
            add(&mut sql, " AND timestamp >= ?", since.into());
        }
        if let Some(until) = &query.until {
            add(&mut sql, " AND timestamp < ?", until.into());
        }
        if let Some(after) = query.after_seq {
            add(&mut sql, " AND run_seq > ?", after.into());
        }
        sql.push_str(if query.run_id.is_some() {
            " ORDER BY run_seq"
        } else {
            " ORDER BY id"
        });
        if let Some(limit) = query.limit {
            add(&mut sql, " LIMIT ?", limit.into());
        }
        let rows = self.query(Stmt::new(sql, params)).await?;
        rows.iter()
            .map(|r| {
                Ok(EventRecord {
                    seq: r.uint(0)?,
                    id: r.text(1)?,
                    event_type: r.text(2)?,
                    run_id: r.text(3)?,
                    thread_id: r.text(4)?,
                    agent_id: r.text(5)?,
                    turn: r.uint(6)?,
                    timestamp: r.text(7)?,
                    tool_call_id: r.opt_text(8)?,
                    payload: serde_json::from_str(&r.text(9)?).map_err(|e| corrupt("events", e))?,
                })
            })
            .collect()
    }

    async fn last_event_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        self.flush().await?;
        let rows = self
            .query(stmt!(
                "SELECT COALESCE(MAX(run_seq), 0) FROM events WHERE run_id = $1",
                run_id
            ))
            .await?;
        rows.first().map_or(Ok(0), |r| r.uint(0))
    }
}

// ----- artifacts -----

/// Artifacts (§8.3).
#[async_trait]
pub trait Artifacts: Send + Sync {
    /// Stores an artifact, computing size and SHA-256 (of `content`, else of the file at
    /// `path`). Always durable on return.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] without content or path; [`StoreError::Io`] when the file
    /// cannot be read; database failures.
    async fn put_artifact(&self, artifact: NewArtifact) -> Result<ArtifactRecord, StoreError>;

    /// The artifacts of a run, oldest first.
    ///
    /// # Errors
    /// Database failures.
    async fn artifacts(&self, run_id: &str) -> Result<Vec<ArtifactRecord>, StoreError>;
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[async_trait]
impl Artifacts for Store {
    async fn put_artifact(&self, artifact: NewArtifact) -> Result<ArtifactRecord, StoreError> {
        let (size, hash) = match (&artifact.content, &artifact.path) {
            (Some(content), _) => (content.len() as u64, sha256_hex(content.as_bytes())),
            (None, Some(path)) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || {
                    std::fs::read(&path)
                        .map(|bytes| (bytes.len() as u64, sha256_hex(&bytes)))
                        .map_err(|e| StoreError::Io {
                            path,
                            message: e.to_string(),
                        })
                })
                .await
                .map_err(|e| StoreError::Io {
                    path: String::new(),
                    message: e.to_string(),
                })??
            }
            (None, None) => {
                return Err(StoreError::Invalid(
                    "an artifact needs inline content or a path".into(),
                ));
            }
        };
        let record = ArtifactRecord {
            id: new_id(),
            metadata: ArtifactMetadata {
                size,
                hash,
                mime_type: artifact.media_type.clone(),
            },
            artifact,
            created_at: now_string(),
        };
        let metadata = serde_json::to_string(&record.metadata)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.write_now(vec![stmt!(
            "INSERT INTO artifacts (id, run_id, agent_id, checkpoint_id, artifact_type, path, content, metadata, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            record.id.as_str(),
            record.artifact.run_id.as_str(),
            record.artifact.agent_id.as_str(),
            record.artifact.checkpoint_id.as_deref(),
            record.artifact.artifact_type.as_str(),
            record.artifact.path.as_deref(),
            record.artifact.content.as_deref(),
            metadata,
            record.created_at.as_str()
        )])
        .await?;
        Ok(record)
    }

    async fn artifacts(&self, run_id: &str) -> Result<Vec<ArtifactRecord>, StoreError> {
        let rows = self
            .query(stmt!(
                "SELECT id, run_id, agent_id, checkpoint_id, artifact_type, path, content, metadata, created_at \
                 FROM artifacts WHERE run_id = $1 ORDER BY created_at, id",
                run_id
            ))
            .await?;
        rows.iter()
            .map(|r| {
                let metadata: ArtifactMetadata =
                    serde_json::from_str(&r.opt_text(7)?.unwrap_or_default())
                        .map_err(|e| corrupt("artifacts", e))?;
                Ok(ArtifactRecord {
                    id: r.text(0)?,
                    artifact: NewArtifact {
                        run_id: r.text(1)?,
                        agent_id: r.text(2)?,
                        checkpoint_id: r.opt_text(3)?,
                        artifact_type: ArtifactType::parse(&r.text(4)?)
                            .ok_or_else(|| corrupt("artifacts", "unknown artifact_type"))?,
                        path: r.opt_text(5)?,
                        content: r.opt_text(6)?,
                        media_type: metadata.mime_type.clone(),
                    },
                    metadata,
                    created_at: r.text(8)?,
                })
            })
            .collect()
    }
}

// ----- lineage -----

/// Agent lineage (§8.4).
#[async_trait]
pub trait Lineage: Send + Sync {
    /// Inserts or updates an agent node (the parent must exist). Durable on return.
    ///
    /// # Errors
    /// Database failures (a missing parent is a foreign-key error).
    async fn put_agent(&self, node: &AgentNode) -> Result<(), StoreError>;

    /// Every agent of a run, by depth then creation.
    ///
    /// # Errors
    /// Database failures.
    async fn lineage(&self, run_id: &str) -> Result<Vec<AgentNode>, StoreError>;

    /// The usage of `agent_id` and all its descendants.
    ///
    /// # Errors
    /// [`StoreError::NotFound`]; database failures.
    async fn rolled_up_usage(&self, agent_id: &str) -> Result<Usage, StoreError>;
}

fn node_of(r: &Row) -> Result<AgentNode, StoreError> {
    Ok(AgentNode {
        id: r.text(0)?,
        run_id: r.text(1)?,
        parent_agent_id: r.opt_text(2)?,
        role: r.text(3)?,
        status: AgentStatus::parse(&r.text(4)?)
            .ok_or_else(|| corrupt("agent_lineage", "unknown status"))?,
        depth: u32::try_from(r.int(5)?).unwrap_or(0),
        created_at: r.text(6)?,
        completed_at: r.opt_text(7)?,
        usage: Usage {
            input_tokens: r.uint(8)?,
            output_tokens: r.uint(9)?,
            cost: (r.int(11)? != 0).then_some(r.real(10)?),
        },
    })
}

const LINEAGE_COLUMNS: &str = "id, run_id, parent_agent_id, role, status, depth, created_at, completed_at, \
    usage_input_tokens, usage_output_tokens, usage_cost, usage_priced";

#[async_trait]
impl Lineage for Store {
    async fn put_agent(&self, node: &AgentNode) -> Result<(), StoreError> {
        self.write_now(vec![stmt!(
            "INSERT INTO agent_lineage (id, run_id, parent_agent_id, role, status, depth, created_at, completed_at, \
             usage_input_tokens, usage_output_tokens, usage_cost, usage_priced) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, completed_at = excluded.completed_at, \
             usage_input_tokens = excluded.usage_input_tokens, usage_output_tokens = excluded.usage_output_tokens, \
             usage_cost = excluded.usage_cost, usage_priced = excluded.usage_priced, role = excluded.role",
            node.id.as_str(),
            node.run_id.as_str(),
            node.parent_agent_id.as_deref(),
            node.role.as_str(),
            node.status.as_str(),
            i64::from(node.depth),
            node.created_at.as_str(),
            node.completed_at.as_deref(),
            node.usage.input_tokens,
            node.usage.output_tokens,
            node.usage.cost.unwrap_or(0.0),
            node.usage.cost.is_some()
        )])
        .await
    }

    async fn lineage(&self, run_id: &str) -> Result<Vec<AgentNode>, StoreError> {
        let rows = self
            .query(Stmt::new(
                format!("SELECT {LINEAGE_COLUMNS} FROM agent_lineage WHERE run_id = $1 ORDER BY depth, created_at, id"),
                vec![run_id.into()],
            ))
            .await?;
        rows.iter().map(node_of).collect()
    }

    async fn rolled_up_usage(&self, agent_id: &str) -> Result<Usage, StoreError> {
        let rows = self
            .query(Stmt::new(
                format!(
                    "SELECT {LINEAGE_COLUMNS} FROM agent_lineage WHERE run_id = \
                     (SELECT run_id FROM agent_lineage WHERE id = $1)"
                ),
                vec![agent_id.into()],
            ))
            .await?;
        let nodes: Vec<AgentNode> = rows.iter().map(node_of).collect::<Result<_, _>>()?;
        if !nodes.iter().any(|n| n.id == agent_id) {
            return Err(StoreError::NotFound {
                kind: "agent",
                id: agent_id.to_owned(),
            });
        }
        let mut total = Usage::default();
        let mut frontier = vec![agent_id.to_owned()];
        while let Some(id) = frontier.pop() {
            for n in &nodes {
                if n.id == id {
                    total = total.plus(n.usage);
                }
                if n.parent_agent_id.as_deref() == Some(id.as_str()) {
                    frontier.push(n.id.clone());
                }
            }
        }
        Ok(total)
    }
}

// ----- threads -----

/// Threads: the persistent entity runs work on.
#[async_trait]
pub trait Threads: Send + Sync {
    /// Inserts or updates a thread. Durable on return.
    ///
    /// # Errors
    /// Database failures.
    async fn put_thread(&self, thread: &ThreadRecord) -> Result<(), StoreError>;

    /// One thread.
    ///
    /// # Errors
    /// Database failures.
    async fn thread(&self, id: &str) -> Result<Option<ThreadRecord>, StoreError>;

    /// Every thread, newest first.
    ///
    /// # Errors
    /// Database failures.
    async fn threads(&self) -> Result<Vec<ThreadRecord>, StoreError>;
}

fn thread_of(r: &Row) -> Result<ThreadRecord, StoreError> {
    Ok(ThreadRecord {
        id: r.text(0)?,
        created_at: r.text(1)?,
        updated_at: r.text(2)?,
        parent_thread_id: r.opt_text(3)?,
        title: r.opt_text(4)?,
        metadata: serde_json::from_str(&r.text(5)?).map_err(|e| corrupt("threads", e))?,
        retention: parse_opt_json::<Option<Retention>>(r.opt_text(6)?, "threads")?,
    })
}

#[async_trait]
impl Threads for Store {
    async fn put_thread(&self, thread: &ThreadRecord) -> Result<(), StoreError> {
        let metadata = Value::Object(thread.metadata.clone()).to_string();
        let retention = match &thread.retention {
            Some(r) => {
                Some(serde_json::to_string(r).map_err(|e| StoreError::Invalid(e.to_string()))?)
            }
            None => None,
        };
        self.write_now(vec![stmt!(
            "INSERT INTO threads (id, created_at, updated_at, parent_thread_id, title, metadata, retention) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at, \
             parent_thread_id = excluded.parent_thread_id, title = excluded.title, metadata = excluded.metadata, \
             retention = excluded.retention",
            thread.id.as_str(),
            thread.created_at.as_str(),
            thread.updated_at.as_str(),
            thread.parent_thread_id.as_deref(),
            thread.title.as_deref(),
            metadata,
            retention
        )])
        .await
    }

    async fn thread(&self, id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        let rows = self
            .query(stmt!(
                "SELECT id, created_at, updated_at, parent_thread_id, title, metadata, retention FROM threads WHERE id = $1",
                id
            ))
            .await?;
        rows.first().map(thread_of).transpose()
    }

    async fn threads(&self) -> Result<Vec<ThreadRecord>, StoreError> {
        let rows = self
            .query(stmt!(
                "SELECT id, created_at, updated_at, parent_thread_id, title, metadata, retention FROM threads ORDER BY created_at DESC, id"
            ))
            .await?;
        rows.iter().map(thread_of).collect()
    }
}

// ----- runs -----

/// Runs.
#[async_trait]
pub trait Runs: Send + Sync {
    /// Inserts or updates a run. Durable on return.
    ///
    /// # Errors
    /// Database failures.
    async fn put_run(&self, run: &RunRecord) -> Result<(), StoreError>;

    /// One run (status as stored).
    ///
    /// # Errors
    /// Database failures.
    async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError>;

    /// The newest runs first.
    ///
    /// # Errors
    /// Database failures.
    async fn runs(&self, limit: Option<u64>) -> Result<Vec<RunRecord>, StoreError>;

    /// The runs of a thread, the newest first.
    ///
    /// # Errors
    /// Database failures.
    async fn thread_runs(&self, thread_id: &str) -> Result<Vec<RunRecord>, StoreError>;
}

const RUN_COLUMNS: &str = "run_id, thread_id, agent_id, status, spec, started_at, updated_at, ended_at, steps, \
    usage_input_tokens, usage_output_tokens, usage_cost, owner_pid, owner_host, error, output, parent_run_id, \
    lease_owner, lease_until, lease_epoch, usage_priced";

fn run_of(r: &Row) -> Result<RunRecord, StoreError> {
    Ok(RunRecord {
        run_id: r.text(0)?,
        thread_id: r.text(1)?,
        agent_id: r.text(2)?,
        status: RunStatus::parse(&r.text(3)?).ok_or_else(|| corrupt("runs", "unknown status"))?,
        spec: serde_json::from_str(&r.text(4)?).map_err(|e| corrupt("runs", e))?,
        started_at: r.text(5)?,
        updated_at: r.text(6)?,
        ended_at: r.opt_text(7)?,
        steps: r.uint(8)?,
        usage: Usage {
            input_tokens: r.uint(9)?,
            output_tokens: r.uint(10)?,
            cost: (r.int(20)? != 0).then_some(r.real(11)?),
        },
        owner_pid: r.opt_int(12)?.and_then(|p| u32::try_from(p).ok()),
        owner_host: r.opt_text(13)?,
        error: r.opt_text(14)?,
        output: r.opt_text(15)?,
        parent_run_id: r.opt_text(16)?,
        lease: Lease {
            owner: r.opt_text(17)?,
            until_ms: r.opt_int(18)?,
            epoch: r.int(19)?,
        },
    })
}

#[async_trait]
impl Runs for Store {
    async fn put_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        // What a run said (its output, its error) and was asked are recorded redacted, as
        // its events are: a secret the model repeats never reaches the file.
        let redacted = |text: Option<&str>| {
            text.map(|text| {
                let mut value = Value::String(text.to_owned());
                if self.shared.redactor.may_redact(text) {
                    self.shared.redactor.redact(&mut value);
                }
                match value {
                    Value::String(text) => text,
                    other => other.to_string(),
                }
            })
        };
        let mut spec = run.spec.to_string();
        if self.shared.redactor.may_redact(&spec) {
            let mut value = run.spec.clone();
            self.shared.redactor.redact(&mut value);
            spec = value.to_string();
        }
        let (output, error) = (
            redacted(run.output.as_deref()),
            redacted(run.error.as_deref()),
        );
        self.write_now(vec![stmt!(
            "INSERT INTO runs (run_id, thread_id, agent_id, status, spec, started_at, updated_at, ended_at, steps, \
             usage_input_tokens, usage_output_tokens, usage_cost, owner_pid, owner_host, error, output, parent_run_id, \
             usage_priced) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) \
             ON CONFLICT (run_id) DO UPDATE SET agent_id = excluded.agent_id, status = excluded.status, \
             spec = excluded.spec, updated_at = excluded.updated_at, ended_at = excluded.ended_at, steps = excluded.steps, \
             usage_input_tokens = excluded.usage_input_tokens, usage_output_tokens = excluded.usage_output_tokens, \
             usage_cost = excluded.usage_cost, usage_priced = excluded.usage_priced, owner_pid = excluded.owner_pid, \
             owner_host = excluded.owner_host, \
             error = excluded.error, output = excluded.output",
            run.run_id.as_str(),
            run.thread_id.as_str(),
            run.agent_id.as_str(),
            run.status.as_str(),
            spec,
            run.started_at.as_str(),
            run.updated_at.as_str(),
            run.ended_at.as_deref(),
            run.steps,
            run.usage.input_tokens,
            run.usage.output_tokens,
            run.usage.cost.unwrap_or(0.0),
            run.owner_pid.map(i64::from),
            run.owner_host.as_deref(),
            error.as_deref(),
            output.as_deref(),
            run.parent_run_id.as_deref(),
            run.usage.cost.is_some()
        )])
        .await
    }

    async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let rows = self
            .query(Stmt::new(
                format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1"),
                vec![run_id.into()],
            ))
            .await?;
        rows.first().map(run_of).transpose()
    }

    async fn runs(&self, limit: Option<u64>) -> Result<Vec<RunRecord>, StoreError> {
        let (sql, params) = match limit {
            Some(l) => (
                format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY started_at DESC, run_id LIMIT $1"),
                vec![l.into()],
            ),
            None => (
                format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY started_at DESC, run_id"),
                Vec::new(),
            ),
        };
        let rows = self.query(Stmt::new(sql, params)).await?;
        rows.iter().map(run_of).collect()
    }

    async fn thread_runs(&self, thread_id: &str) -> Result<Vec<RunRecord>, StoreError> {
        let rows = self
            .query(Stmt::new(
                format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE thread_id = $1 ORDER BY started_at DESC, run_id DESC"
                ),
                vec![thread_id.into()],
            ))
            .await?;
        rows.iter().map(run_of).collect()
    }
}

// ----- tool ledger -----

/// The durable record of tool calls (runtime spec §5.9): the idempotency ledger.
#[async_trait]
pub trait ToolLedger: Send + Sync {
    /// Records that a call is about to run (or runs again: `attempts` grows).
    ///
    /// # Errors
    /// Database failures (in `Sync` durability).
    ///
    /// # Cancel safety
    /// Once queued, the record is written even if the future is dropped.
    async fn tool_call_started(&self, call: &ToolCallRecord) -> Result<(), StoreError>;

    /// Records a call's result.
    ///
    /// # Errors
    /// Database failures (in `Sync` durability).
    ///
    /// # Cancel safety
    /// As [`ToolLedger::tool_call_started`].
    async fn tool_call_finished(
        &self,
        run_id: &str,
        position: &str,
        result: &Value,
        is_error: bool,
    ) -> Result<(), StoreError>;

    /// Every recorded call of a run, in start order.
    ///
    /// # Errors
    /// Database failures.
    async fn tool_calls(&self, run_id: &str) -> Result<Vec<ToolCallRecord>, StoreError>;
}

#[async_trait]
impl ToolLedger for Store {
    async fn tool_call_started(&self, call: &ToolCallRecord) -> Result<(), StoreError> {
        let mut args = call.arguments.clone();
        self.redact(&mut args);
        self.write(
            vec![stmt!(
                "INSERT INTO tool_calls (run_id, position, tool_call_id, args_hash, thread_id, tool_name, arguments, \
                 status, attempts, side_effects, idempotent, turn, started_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', 1, $8, $9, $10, $11) \
                 ON CONFLICT (run_id, position) DO UPDATE SET attempts = tool_calls.attempts + 1, status = 'pending', \
                 tool_call_id = excluded.tool_call_id",
                call.run_id.as_str(),
                call.position.as_str(),
                call.tool_call_id.as_str(),
                call.args_hash.as_str(),
                call.thread_id.as_str(),
                call.tool_name.as_str(),
                args.to_string(),
                call.side_effects,
                call.idempotent,
                call.turn,
                call.started_at.as_str()
            )],
            None,
        )
        .await
    }

    async fn tool_call_finished(
        &self,
        run_id: &str,
        position: &str,
        result: &Value,
        is_error: bool,
    ) -> Result<(), StoreError> {
        let mut result = result.clone();
        self.redact(&mut result);
        self.write(
            vec![stmt!(
                "UPDATE tool_calls SET status = 'completed', result = $1, is_error = $2, ended_at = $3 \
                 WHERE run_id = $4 AND position = $5",
                result.to_string(),
                is_error,
                now_string(),
                run_id,
                position
            )],
            None,
        )
        .await
    }

    async fn tool_calls(&self, run_id: &str) -> Result<Vec<ToolCallRecord>, StoreError> {
        self.flush().await?;
        let rows = self
            .query(stmt!(
                "SELECT run_id, position, tool_call_id, args_hash, thread_id, tool_name, arguments, status, result, \
                 is_error, attempts, side_effects, idempotent, turn, started_at, ended_at FROM tool_calls \
                 WHERE run_id = $1 ORDER BY started_at, position",
                run_id
            ))
            .await?;
        rows.iter()
            .map(|r| {
                Ok(ToolCallRecord {
                    run_id: r.text(0)?,
                    position: r.text(1)?,
                    tool_call_id: r.text(2)?,
                    args_hash: r.text(3)?,
                    thread_id: r.text(4)?,
                    tool_name: r.text(5)?,
                    arguments: serde_json::from_str(&r.text(6)?)
                        .map_err(|e| corrupt("tool_calls", e))?,
                    status: if r.text(7)? == "completed" {
                        ToolCallStatus::Completed
                    } else {
                        ToolCallStatus::Pending
                    },
                    result: parse_opt_json::<Option<Value>>(r.opt_text(8)?, "tool_calls")?,
                    is_error: r.int(9)? != 0,
                    attempts: u32::try_from(r.int(10)?).unwrap_or(0),
                    side_effects: r.int(11)? != 0,
                    idempotent: r.int(12)? != 0,
                    turn: r.uint(13)?,
                    started_at: r.text(14)?,
                    ended_at: r.opt_text(15)?,
                })
            })
            .collect()
    }
}

// ----- recorded model responses -----

/// Model responses recorded before their tools run, so a resumed step continues from the
/// response instead of asking the model again (whose new call ids would match nothing).
#[async_trait]
pub trait Responses: Send + Sync {
    /// Records a response (a second record at the same position keeps the first).
    ///
    /// # Errors
    /// Database failures (in `Sync` durability); [`StoreError::Fenced`].
    ///
    /// # Cancel safety
    /// Once queued, the record is written even if the future is dropped.
    async fn record_response(&self, response: &RecordedResponse) -> Result<(), StoreError>;

    /// Every response recorded for `run_id`.
    ///
    /// # Errors
    /// Database failures.
    async fn recorded_responses(&self, run_id: &str) -> Result<Vec<RecordedResponse>, StoreError>;

    /// The response recorded at `position` of `run_id`.
    ///
    /// # Errors
    /// Database failures.
    async fn recorded_response(
        &self,
        run_id: &str,
        position: &str,
    ) -> Result<Option<RecordedResponse>, StoreError>;
}

#[async_trait]
impl Responses for Store {
    async fn record_response(&self, response: &RecordedResponse) -> Result<(), StoreError> {
        let mut body = response.response.clone();
        self.redact(&mut body);
        self.write(
            vec![stmt!(
                "INSERT INTO model_responses (run_id, position, fingerprint, response, created_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (run_id, position) DO NOTHING",
                response.run_id.as_str(),
                response.position.as_str(),
                response.fingerprint.as_str(),
                body.to_string(),
                now_string()
            )],
            None,
        )
        .await
    }

    async fn recorded_responses(&self, run_id: &str) -> Result<Vec<RecordedResponse>, StoreError> {
        self.flush().await?;
        let rows = self
            .query(stmt!(
                "SELECT position, fingerprint, response FROM model_responses WHERE run_id = $1",
                run_id
            ))
            .await?;
        rows.iter()
            .map(|r| {
                Ok(RecordedResponse {
                    run_id: run_id.to_owned(),
                    position: r.text(0)?,
                    fingerprint: r.text(1)?,
                    response: serde_json::from_str(&r.text(2)?)
                        .map_err(|e| corrupt("model_responses", e))?,
                })
            })
            .collect()
    }

    async fn recorded_response(
        &self,
        run_id: &str,
        position: &str,
    ) -> Result<Option<RecordedResponse>, StoreError> {
        self.flush().await?;
        let rows = self
            .query(stmt!(
                "SELECT fingerprint, response FROM model_responses WHERE run_id = $1 AND position = $2",
                run_id,
                position
            ))
            .await?;
        rows.first()
            .map(|r| {
                Ok(RecordedResponse {
                    run_id: run_id.to_owned(),
                    position: position.to_owned(),
                    fingerprint: r.text(0)?,
                    response: serde_json::from_str(&r.text(1)?)
                        .map_err(|e| corrupt("model_responses", e))?,
                })
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_bodies_leave_out_the_id_and_get_it_back() {
        let message = Message::user("hi \"there\"");
        let json = serde_json::to_string(&message).unwrap_or_default();
        let body = body_without_id(json.clone(), message.id());
        assert!(!body.contains(message.id()), "{body}");
        assert_eq!(body.len(), json.len() - 44);
        assert_eq!(message_json(&body, message.id(), None), json);
        // A body written with its id (before) reads as it is.
        assert_eq!(message_json(&json, message.id(), None), json);
        // Ids that need escaping survive.
        let odd = Message::User(weft_provider::UserMessage::with_options(
            vec![],
            weft_provider::MessageOptions {
                id: Some("a\"b\\c".into()),
                metadata: None,
            },
        ));
        let json = serde_json::to_string(&odd).unwrap_or_default();
        let body = body_without_id(json.clone(), odd.id());
        assert!(!body.contains("\"id\""), "{body}");
        let back: Message = serde_json::from_str(&message_json(&body, odd.id(), None))
            .unwrap_or_else(|_| Message::user(""));
        assert_eq!(back, odd);
    }

    #[test]
    fn message_bodies_leave_out_the_timestamp_and_get_it_back() {
        let mut with_metadata = weft_provider::AssistantMessage::text("a \"timestamp\" here");
        let mut metadata = weft_provider::Metadata::new();
        metadata.insert(
            "x".into(),
            serde_json::json!({"timestamp": "2026-01-01T00:00:00Z"}),
        );
        with_metadata.metadata = Some(metadata);
        for message in [Message::user("hi"), Message::Assistant(with_metadata)] {
            let json = serde_json::to_string(&message).unwrap_or_default();
            let mut body = body_without_id(json.clone(), message.id());
            let ts = take_timestamp(&mut body, &message);
            assert!(ts.is_some(), "{body}");
            let kind = take_tag(&mut body);
            assert!(["mu", "ma"].contains(&kind), "{kind}");
            assert!(!body.contains("\"type\":\"user\""), "{body}");
            let body = tagged_body(&body, kind).into_owned();
            assert!(
                !body.contains(
                    &message
                        .timestamp()
                        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
                ),
                "{body}"
            );
            let back: Message = serde_json::from_str(&message_json(&body, message.id(), ts))
                .unwrap_or_else(|_| Message::user(""));
            assert_eq!(back, message);
        }
        // Tool results too; a body of another shape keeps its tag (kind `m`).
        let mut body = r#"{"type":"tool_result","results":[]}"#.to_owned();
        assert_eq!(take_tag(&mut body), "mr");
        assert_eq!(body, r#"{"results":[]}"#);
        assert_eq!(
            tagged_body(&body, "mr"),
            r#"{"type":"tool_result","results":[]}"#
        );
        let mut body = r#"{"type":"user"}"#.to_owned();
        assert_eq!(take_tag(&mut body), "m");
        assert_eq!(tagged_body(&body, "m"), r#"{"type":"user"}"#);
        // A body whose end is not the timestamp (say, redacted into another shape) keeps it.
        let message = Message::user("x");
        let mut body = "{\"type\":\"user\",\"content\":[]}".to_owned();
        assert_eq!(take_timestamp(&mut body, &message), None);
        assert_eq!(body, "{\"type\":\"user\",\"content\":[]}");
    }

    #[test]
    fn completed_calls_in_the_history_are_stored_as_references() {
        use weft_provider::{AssistantMessage, MessageOptions, ToolResultMessage};
        let call = ToolCall::new("c1", "add", serde_json::json!({"a": 1, "b": 2}));
        let assistant = AssistantMessage::new(vec![], vec![call], MessageOptions::default())
            .unwrap_or_else(|_| AssistantMessage::text(""));
        let results = ToolResultMessage::new(vec![ToolResult {
            tool_call_id: "c1".into(),
            result: serde_json::json!(3),
            is_error: false,
        }]);
        let state = AgentState::initial().with_messages([
            Message::user("go"),
            Message::Assistant(assistant),
            Message::ToolResult(results),
        ]);
        let done = ToolExecution {
            tool_name: "add".into(),
            tool_call_id: "c1".into(),
            arguments: serde_json::json!({"a": 1, "b": 2}),
            result: serde_json::json!(3),
            is_error: false,
            duration: 7,
            approved: Some(true),
        };
        // Not what the history says (other arguments): kept whole.
        let mut changed = done.clone();
        changed.arguments = serde_json::json!({"a": 1});
        let executions = [done.clone(), changed.clone()];
        let stored =
            serde_json::to_value(completed_entries(&executions, &state)).unwrap_or_default();
        assert_eq!(
            stored[0],
            serde_json::json!({"toolCallId": "c1", "duration": 7, "approved": true})
        );
        // Nothing to add: the id alone; no time and no approval read back as such.
        let instant = ToolExecution {
            duration: 0,
            approved: None,
            ..done.clone()
        };
        let alone = serde_json::to_value(completed_entries(std::slice::from_ref(&instant), &state))
            .unwrap_or_default();
        assert_eq!(alone, serde_json::json!(["c1"]));
        let untimed = ToolExecution {
            duration: 0,
            ..done.clone()
        };
        let approved =
            serde_json::to_value(completed_entries(std::slice::from_ref(&untimed), &state))
                .unwrap_or_default();
        assert_eq!(
            approved,
            serde_json::json!([{"toolCallId": "c1", "approved": true}])
        );
        let messages = state.messages_vec();
        for (entry, execution) in [(&alone[0], &instant), (&approved[0], &untimed)] {
            assert_eq!(
                completed_execution(entry.clone(), &messages).ok().as_ref(),
                Some(execution)
            );
        }
        assert_eq!(
            stored[1],
            serde_json::to_value(&changed).unwrap_or_default()
        );
        let messages = state.messages_vec();
        let back: Vec<ToolExecution> = stored
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|e| completed_execution(e, &messages).ok())
            .collect();
        assert_eq!(back, executions);
        // A reference the history cannot answer is corrupt, not a panic.
        assert!(completed_execution(serde_json::json!({"toolCallId": "c9"}), &messages).is_err());
    }

    #[test]
    fn the_session_id_leaves_the_blob_and_comes_back_in_place() {
        let mut metadata = Map::new();
        metadata.insert("a".into(), serde_json::json!(1));
        metadata.insert("sessionId".into(), serde_json::json!("t1"));
        metadata.insert("b".into(), serde_json::json!(2));
        let at = session_position(&metadata, "t1");
        assert_eq!(at, Some(1));
        assert_eq!(session_position(&metadata, "t2"), None);
        let written = serde_json::to_string(&MetadataRef {
            map: &metadata,
            skip: at,
        })
        .unwrap_or_default();
        assert_eq!(written, r#"{"a":1,"b":2}"#);
        let read: Map<String, Value> = serde_json::from_str(&written).unwrap_or_default();
        let back = with_session(read, 1, "t1");
        assert_eq!(
            serde_json::to_string(&back).unwrap_or_default(),
            serde_json::to_string(&metadata).unwrap_or_default()
        );
    }

    #[test]
    fn uuid_ids_are_stored_compactly_and_other_ids_as_they_are() {
        let id = "97ddfd49-8354-4abd-b7ac-8e44b52b6424";
        let key = encode_key(id).into_owned();
        assert_eq!(key.len(), 23);
        assert_eq!(decode_key(key), id);
        for id in [
            "call-1",
            "~odd",
            "~~odder",
            "97DDFD49-8354-4ABD-B7AC-8E44B52B6424",
            "0",
        ] {
            assert_eq!(decode_key(encode_key(id).into_owned()), id, "{id}");
        }
        // A key written before schema 11 (the id itself) reads as it is.
        assert_eq!(decode_key(id.to_owned()), id);
    }

    #[test]
    fn ranges_merge_consecutive_seqs() {
        assert_eq!(ranges(&[0, 1, 2, 5, 6, 9]), vec![[0, 2], [5, 6], [9, 9]]);
        assert!(ranges(&[]).is_empty());
    }

    #[test]
    fn urls() {
        assert_eq!(
            StoreUrl::parse("sqlite:.weft/weft.db").ok(),
            Some(StoreUrl::Sqlite(PathBuf::from(".weft/weft.db")))
        );
        assert!(StoreUrl::parse("mysql://x").is_err());
        let pg = StoreUrl::parse("postgres://u:secret@h:5432/db").map(|u| u.to_string());
        assert_eq!(pg.ok().as_deref(), Some("postgres://u@h:5432/db"));
    }
}
