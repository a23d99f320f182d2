//! ThreadProtocol v0.0.3: the canonical JSON record of multi-agent threads — typed model,
//! validation, canonical form and hash, and the mappings to the Vercel AI SDK UI message stream
//! and to Pydantic AI `ModelMessages`.
//!
//! | module | what |
//! |---|---|
//! | [`types`] | every structure of the spec; unknown members, `custom:*` parts and `meta:*` data survive parse → serialize |
//! | [`validate`](mod@validate) | the eight validation rules and structural checks, as findings with a JSON Pointer |
//! | [`canonical`] | RFC 8785 (JCS) canonical JSON, with the `meta:*` exclusion |
//! | [`hash`] | `sha256:<hex>` over the canonical bytes |
//! | [`ui_stream`] | stream → thread ([`ui_stream::Assembler`]) and thread → stream ([`ui_stream::encode_thread`]) |
//! | [`pydantic_ai`] | one agent run → [`AgentTurn`]; turns → `ModelMessages` for a viewing agent |
//! | [`clock`] | injectable time for receipt timestamps |
//! | [`content_ref`] | a tool return's `content_ref` resolved: inline content wins, fetched content checked against its hash |
//! | [`weft_messages`] | Weft's own (UPP-1.2) messages of a run ⇄ [`UserTurn`] / [`AgentTurn`] |
//!
//! The crate does no I/O and uses no async runtime ([`content_ref`] takes the caller's fetcher); it has no cargo features. Besides serde it
//! depends only on `ring` (SHA-256) and, for [`weft_messages`], on `weft-provider`'s types.
//!
//! # Example: validate, hash, parse
//!
//! ```
//! use weft_thread::{HashOptions, Thread, hash_thread, validate};
//!
//! let json = r#"{
//!   "version": "0.0.3",
//!   "thread_id": "550e8400-e29b-41d4-a716-446655440000",
//!   "created_at": "2025-01-20T10:00:00Z",
//!   "updated_at": "2025-01-20T10:00:02Z",
//!   "agents": {"550e8400-e29b-41d4-a716-446655440001": {
//!     "agent_id": "550e8400-e29b-41d4-a716-446655440001", "agent_name": "helper",
//!     "created_at": "2025-01-20T09:00:00Z"}},
//!   "turns": [
//!     {"turn_type": "user", "submitted_at": "2025-01-20T10:00:00Z",
//!      "parts": [{"part_kind": "user-prompt", "content": "Hi"}]},
//!     {"turn_type": "agent", "agent_id": "550e8400-e29b-41d4-a716-446655440001",
//!      "started_at": "2025-01-20T10:00:01Z", "completed_at": "2025-01-20T10:00:02Z",
//!      "messages": [{"message_type": "response", "timestamp": "2025-01-20T10:00:02Z",
//!        "agent_id": "550e8400-e29b-41d4-a716-446655440001",
//!        "parts": [{"part_kind": "text", "content": "Hello!"}, {"part_kind": "custom:mood", "mood": "cheerful"}]}]}
//!   ]
//! }"#;
//! let value: serde_json::Value = serde_json::from_str(json)?;
//! let report = validate(&value);
//! assert!(report.is_valid(), "{:?}", report.findings);
//!
//! let hash = hash_thread(&value, HashOptions::default());
//! assert!(hash.to_string().starts_with("sha256:"));
//!
//! // The typed model keeps the custom part unchanged.
//! let thread = Thread::from_value(value.clone())?;
//! assert_eq!(thread.to_value()?, value);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod canonical;
pub mod clock;
pub mod content_ref;
mod error;
pub mod hash;
pub mod pydantic_ai;
mod serde_util;
pub mod syntax;
mod timestamp;
pub mod types;
pub mod ui_stream;
pub mod validate;
pub mod weft_messages;

pub use error::ParseError;
pub use hash::{HashOptions, HashScope, ThreadHash, hash_thread};
pub use timestamp::{Timestamp, TimestampError};
pub use types::*;
pub use validate::{
    Finding, Report, Rule, Severity, ValidateOptions, validate, validate_json, validate_with,
};
