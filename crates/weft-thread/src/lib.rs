//! ThreadProtocol v0.0.3 (TODO crate docs)

pub mod canonical;
mod error;
pub mod hash;
mod serde_util;
pub mod syntax;
mod timestamp;
pub mod types;
pub mod validate;

pub use error::ParseError;
pub use hash::{HashOptions, HashScope, ThreadHash, hash_thread};
pub use timestamp::{Timestamp, TimestampError};
pub use types::*;
pub use validate::{Finding, Report, Rule, Severity, ValidateOptions, validate, validate_json, validate_with};
