//! Agent memory for the Universal Agent Protocol, kept in the project's SQLite file
//! (`.weft/weft.db`, `memory_*` tables) and read by `weft memory …` and the session-start
//! hook.
//!
//! Four tiers ([`Tier`]): the **daily log** stages every write ("log first, promote later");
//! the **working cache** holds short-term context that decays unless recalled; the
//! **semantic** tier holds significant learnings, recalled by embedding similarity; the
//! **archive** keeps what went cold. Writes pass the **write gate** ([`check_write`]: empty,
//! too-short and noise content is rejected with a reason; secrets always are); promotion
//! ([`assess`]) takes only decisions with rationale of importance ≥ 7, patterns that prevent
//! recurring errors and configuration choices with context to the semantic tier; corrections
//! ([`Memory::correct`]) supersede stale entries in every tier, with an audit trail.
//!
//! Recall is semantic with an [`Embedder`] — Weft's embedding providers (feature `provider`)
//! or the local all-MiniLM-L6-v2 (feature `minilm`) — and lexical without one, saying so.
//!
//! # Feature flags
//!
//! | feature | default | what |
//! |---|---|---|
//! | `provider` | off | `ProviderEmbedder`: `weft-provider`'s `embedding()` as an [`Embedder`] |
//! | `minilm` | off | `minilm::MiniLm`: all-MiniLM-L6-v2 over candle (`candle-core`, `candle-nn`) |
//!
//! Without `minilm` the crate still finds the weights ([`minilm_files`]) so a caller can say
//! how to get semantic recall.
//!
//! # Example
//!
//! ```
//! use weft_memory::{Kind, Memory, MemoryDb, NewMemory};
//!
//! let dir = tempfile::tempdir()?;
//! let memory = Memory::new(MemoryDb::open(&dir.path().join("weft.db"))?);
//! let refused = memory.store(NewMemory::new("the key is AKIAABCDEFGHIJKLMNOP"), true)?;
//! assert!(refused.rejection_reason.unwrap().contains("secret"));
//! memory.store(NewMemory::new("Finish the deliver loop and its tests").kind(Kind::Goal).importance(8), false)?;
//! let context = memory.session_context(10)?;
//! assert_eq!(context.loops.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod clock;
mod db;
mod embed;
mod entry;
mod error;
mod gate;
mod memory;
mod minilm_files;
mod promote;
pub mod rank;
mod secrets;

#[cfg(feature = "minilm")]
pub mod minilm;

pub use clock::{Clock, ManualClock, SystemClock};
pub use db::{MemoryDb, SupersededEntry};
#[cfg(feature = "provider")]
pub use embed::ProviderEmbedder;
pub use embed::{EmbedError, EmbedFuture, Embedder, Purpose};
pub use entry::{Entry, Kind, NewMemory, Status, Tier};
pub use error::MemoryError;
pub use gate::{GateDecision, MIN_CHARS, MIN_WORDS, check_write};
pub use memory::{
    ARCHIVE_AFTER, CorrectionOutcome, DAILY_RETENTION, DAILY_STALE, EVICT_BELOW, Hit,
    LOOP_MIN_IMPORTANCE, MaintenanceReport, Memory, PromotionReport, QueryOptions, Ranking, Recall,
    RecallError, Reviewed, SessionContext, WORKING_CAPACITY,
};
pub use minilm_files::{MINILM_PACKAGE, MINILM_PATH_ENV, MiniLmFiles, minilm_files};
pub use promote::{Assessment, DECISION_MIN_IMPORTANCE, assess};
pub use rank::{cosine, decayed_weight};
pub use secrets::detect_secret;
