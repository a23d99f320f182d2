//! The redaction hook: secrets never reach the event log, the tool ledger or (by default)
//! checkpoint payloads (runtime spec §5.12(5), RT-071).

use std::fmt;

use serde_json::Value;

/// Removes secrets from a JSON value in place.
pub trait Redactor: Send + Sync + fmt::Debug {
    /// Redacts `value`.
    fn redact(&self, value: &mut Value);

    /// Whether redacting the value whose JSON text is `serialized` could change it. `false`
    /// lets the store write the text as is, without parsing it; the default is `true`.
    fn may_redact(&self, serialized: &str) -> bool {
        let _ = serialized;
        true
    }
}

/// `weft_provider::redact::redact_json` (API-key shaped tokens: `sk-…`, `AIza…`,
/// `Bearer …`, `xai-…`, `gsk_…`) plus every configured known secret.
#[derive(Debug, Clone, Default)]
pub struct DefaultRedactor {
    /// Exact secret values to remove (e.g. the API keys in use), longer than 8 characters.
    pub known: Vec<String>,
}

impl Redactor for DefaultRedactor {
    fn redact(&self, value: &mut Value) {
        weft_provider::redact::redact_json(value, None);
        for secret in &self.known {
            weft_provider::redact::redact_json(value, Some(secret));
        }
    }

    fn may_redact(&self, serialized: &str) -> bool {
        use weft_provider::redact::may_contain_secret;
        may_contain_secret(serialized, None)
            || self
                .known
                .iter()
                .any(|secret| may_contain_secret(serialized, Some(secret)))
    }
}

/// Keeps everything (tests, or when payloads are known to hold no secrets).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRedaction;

impl Redactor for NoRedaction {
    fn redact(&self, _value: &mut Value) {}

    fn may_redact(&self, _serialized: &str) -> bool {
        false
    }
}
