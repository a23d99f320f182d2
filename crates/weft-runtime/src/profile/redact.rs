//! The profile's `secretPatterns` (runtime spec §5.12(5)): a [`weft_store::Redactor`] that
//! removes the text matching any of them from everything the store records (events,
//! checkpoints, the tool ledger), on top of another redactor (the known key patterns and the
//! process's secret variables).

use std::fmt;
use std::sync::Arc;

use regex::Regex;
use serde_json::Value;
use weft_store::Redactor;

/// What a match is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// `inner`'s redaction, then every match of the patterns replaced with [`REDACTED`].
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use weft_runtime::profile::redact::PatternRedactor;
/// use weft_store::{NoRedaction, Redactor as _};
///
/// let redactor = PatternRedactor::new(Arc::new(NoRedaction), &["ACME-[0-9]{6}".to_owned()])?;
/// let mut value = serde_json::json!({"args": ["key ACME-123456 here"]});
/// redactor.redact(&mut value);
/// assert_eq!(value, serde_json::json!({"args": ["key [REDACTED] here"]}));
/// # Ok::<(), regex::Error>(())
/// ```
pub struct PatternRedactor {
    inner: Arc<dyn Redactor>,
    patterns: Vec<Regex>,
}

impl fmt::Debug for PatternRedactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PatternRedactor")
            .field("inner", &self.inner)
            .field("patterns", &self.patterns.len())
            .finish()
    }
}

impl PatternRedactor {
    /// `inner` plus `patterns` (regular expressions).
    ///
    /// # Errors
    /// A pattern that is not a regular expression.
    pub fn new(inner: Arc<dyn Redactor>, patterns: &[String]) -> Result<Self, regex::Error> {
        let patterns = patterns
            .iter()
            .map(|p| Regex::new(p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PatternRedactor { inner, patterns })
    }
}

impl Redactor for PatternRedactor {
    fn redact(&self, value: &mut Value) {
        self.inner.redact(value);
        scrub(value, &self.patterns);
    }

    fn may_redact(&self, serialized: &str) -> bool {
        // A match may hide behind JSON escapes in the serialized text: with patterns, every
        // value is looked at.
        !self.patterns.is_empty() || self.inner.may_redact(serialized)
    }
}

fn scrub(value: &mut Value, patterns: &[Regex]) {
    match value {
        Value::String(text) => {
            for re in patterns {
                if re.is_match(text) {
                    *text = re.replace_all(text, REDACTED).into_owned();
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| scrub(v, patterns)),
        Value::Object(map) => map.values_mut().for_each(|v| scrub(v, patterns)),
        _ => {}
    }
}
