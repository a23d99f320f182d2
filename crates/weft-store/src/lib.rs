//! Durable storage and crash-safe execution for Weft (runtime spec §5.5, §5.6, §5.9, §8;
//! UAP-1.0 §12.4).
//!
//! * [`Store`]: checkpoints, events, artifacts, agent lineage, threads, runs and the tool
//!   ledger, and the API tokens of `weft serve` ([`Tokens`]), on embedded **SQLite**
//!   (`sqlite:PATH`, default `.weft/weft.db`, WAL, a dedicated writer thread with batching)
//!   or **PostgreSQL** (`postgres://…`, pooled).
//!   It implements weft-agent's [`CheckpointStore`](weft_agent::checkpoint::CheckpointStore),
//!   so any agent can checkpoint into it.
//! * Checkpoint cost grows with the step's new data, not with the history: messages are
//!   stored once, append-only; a checkpoint references ranges of them (see `store.rs`).
//! * Storage only: the tool ledger keyed by a call's position in its run, recorded model
//!   responses, run leases and fenced writes ([`lease`]). What a run *does* with them —
//!   durable tools, replay, resume, ownership — is `weft-runtime`'s.
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
//! | `children` | the child registry of subagents ([`Subagents`]) |
//! | `effects` | scheduled effects of threads ([`ScheduledEffects`]), fired into the thread queue |
//! | `token` | API tokens for `weft serve`: hashed secrets, scopes, revocation ([`Tokens`]) |
//! | `variables` | thread variables (secrets encrypted, [`ThreadVariables`]) and deferred variable requests |
//! | [`lease`] | run leases (claim, renew, release) and the write fence |
//! | [`testing`] | the demo tool and the conversation-driven scripted model used by tests |

mod children;
mod decision;
mod effects;
mod error;
pub mod lease;
mod model;
mod postgres;
mod queue;
mod redact;
mod schema;
mod sql;
mod sqlite;
mod store;
pub mod testing;
mod token;
mod variables;

pub use children::{ChildRecord, SubagentRegistryEntry, Subagents};
pub use decision::{DecisionKind, DecisionRecord, DecisionStatus, Decisions, Verdict};
pub use effects::{SET_ASIDE, ScheduledEffect, ScheduledEffects};
pub use error::StoreError;
pub use model::{
    AgentNode, AgentStatus, ArtifactMetadata, ArtifactRecord, ArtifactType, CheckpointSummary,
    EventQuery, EventRecord, Lease, NewArtifact, NewEvent, RecordedResponse, Retention, RunRecord,
    RunStatus, ThreadRecord, ToolCallRecord, ToolCallStatus, Usage, event_type, new_id, now_string,
};
pub use postgres::{PgOptions, drop_schema};
pub use queue::{QueuedMessage, QueuedTool, ThreadQueue};
pub use redact::{DefaultRedactor, NoRedaction, Redactor};
pub use schema::SCHEMA_VERSION;
pub use sqlite::{SqliteOptions, Synchronous};
pub use store::{
    Artifacts, DeletedRun, Durability, EventLog, GcReport, Lineage, Pricing, Responses, Runs,
    SaveStats, Store, StoreOptions, StoreUrl, StoredCheckpoint, Threads, ToolLedger,
    default_sqlite_path,
};
pub use token::{TOKEN_PREFIX, TokenRecord, TokenScope, TokenSecret, Tokens};
pub use variables::{
    RequestStatus, SECRET_KEY_ENV, SECRET_KEY_FILE, SECRET_KEY_FILE_ENV, SecretKey,
    ThreadVariables, VariableKind, VariableRecord, VariableRequest, VariableRequests,
    VariableValue,
};
