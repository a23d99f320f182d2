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

/// Words that, ending an environment variable's name, say its value is a secret.
const SECRET_NAMES: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "CREDENTIALS",
    "CREDENTIAL",
    "AUTH",
];

/// Shortest value taken as a secret (shorter ones would redact ordinary words).
const MIN_SECRET_CHARS: usize = 9;

impl DefaultRedactor {
    /// A redactor that also removes the value of every variable of `variables` whose name
    /// says it is a secret (it ends in `KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `PASS`,
    /// `CREDENTIALS` or `AUTH`, e.g. `OPENAI_API_KEY`, `GITHUB_TOKEN`, `DB_PASSWORD`) and that
    /// is longer than 8 characters — whatever it looks like, so a plain password a model or
    /// a tool repeats never reaches the event log either.
    ///
    /// # Examples
    ///
    /// ```
    /// use weft_store::{DefaultRedactor, Redactor as _};
    /// let redactor = DefaultRedactor::with_secrets_from([
    ///     ("DB_PASSWORD".to_owned(), "hunter2-correct-horse".to_owned()),
    ///     ("PROJECT_NAME".to_owned(), "demo-project-name".to_owned()),
    /// ]);
    /// let mut value = serde_json::json!({"text": "use hunter2-correct-horse for demo-project-name"});
    /// redactor.redact(&mut value);
    /// assert!(!value["text"].as_str().unwrap_or_default().contains("hunter2"));
    /// assert!(value["text"].as_str().unwrap_or_default().contains("demo-project-name"));
    /// ```
    pub fn with_secrets_from(variables: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut known: Vec<String> = variables
            .into_iter()
            .filter(|(name, value)| {
                let name = name.to_ascii_uppercase();
                value.trim().chars().count() >= MIN_SECRET_CHARS
                    && SECRET_NAMES.iter().any(|word| name.ends_with(word))
            })
            .map(|(_, value)| value.trim().to_owned())
            .collect();
        known.sort();
        known.dedup();
        DefaultRedactor { known }
    }
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
