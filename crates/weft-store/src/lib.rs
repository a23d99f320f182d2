//! Durable storage and crash-safe execution for Weft (runtime spec §5.5, §5.6, §5.9, §8;
//! UAP-1.0 §12.4).
//!
//! * [`Store`]: checkpoints, events, artifacts, agent lineage, threads, runs and the tool
//!   ledger, on embedded **SQLite** (`sqlite:PATH`, default `.weft/weft.db`, WAL, a
//!   dedicated writer thread with batching) or **PostgreSQL** (`postgres://…`, pooled).
//!   It implements weft-agent's [`CheckpointStore`](weft_agent::checkpoint::CheckpointStore),
//!   so any agent can checkpoint into it.
//! * Checkpoint cost grows with the step's new data, not with the history: messages are
//!   stored once, append-only; a checkpoint references ranges of them (see `store.rs`).
//! * [`durable`]: the durable tool wrapper (record the pending call, run, record the result;
//!   on replay return the recorded result) and [`run`]: recorded run specs, a durable loop
//!   strategy, start and resume with the uncertain-call rule.
//!
//! # Code map
//!
//! | module | what |
//! |---|---|
//! | `sql` | the backend seam: portable statements, the `Backend` trait |
//! | `sqlite` | SQLite: writer thread + batching, read pool on `spawn_blocking` |
//! | `postgres` | PostgreSQL: `deadpool-postgres` pool, ordered writer task for `async` writes |
//! | `schema` | versioned migrations (one text, two dialects) |
//! | `store` | [`Store`], the storage traits, the O(new data) checkpoint layout |
//! | `model` | records: runs, events, artifacts, lineage, threads, tool calls |
//! | `redact` | the redaction hook |
//! | [`durable`] | [`durable::DurableTool`] and the per-run ledger context |
//! | [`run`] | [`run::RunSpec`], [`run::Runner`]: start, resume, exit codes |
//! | [`testing`] | the demo tool and the conversation-driven scripted model used by tests |

pub mod durable;
mod error;
mod model;
mod postgres;
mod redact;
pub mod run;
mod schema;
mod sql;
mod sqlite;
mod store;
pub mod testing;

pub use error::StoreError;
pub use model::{
    AgentNode, AgentStatus, ArtifactMetadata, ArtifactRecord, ArtifactType, CheckpointSummary,
    EventQuery, EventRecord, NewArtifact, NewEvent, Retention, RunRecord, RunStatus, ThreadRecord,
    ToolCallRecord, ToolCallStatus, Usage, event_type, new_id, now_string,
};
pub use postgres::{PgOptions, drop_schema};
pub use redact::{DefaultRedactor, NoRedaction, Redactor};
pub use schema::SCHEMA_VERSION;
pub use sqlite::{SqliteOptions, Synchronous};
pub use store::{
    Artifacts, Durability, EventLog, Lineage, Pricing, Runs, SaveStats, Store, StoreOptions,
    StoreUrl, StoredCheckpoint, Threads, ToolLedger, default_sqlite_path,
};
