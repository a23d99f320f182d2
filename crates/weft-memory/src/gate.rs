//! The write gate: every write is scored, and empty, too-short and noise content is rejected
//! with a `rejectionReason` before it reaches storage (`--force` bypasses the gate, never the
//! secret check).
//!
//! Rules, in order:
//! 1. a secret (see [`crate::detect_secret`]) — always refused;
//! 2. empty content (only whitespace);
//! 3. too short: fewer than [`MIN_CHARS`] characters or [`MIN_WORDS`] words;
//! 4. noise: an acknowledgement ("ok", "thanks", "got it", "sounds good", …) or a transient
//!    request or narration ("can you …", "let me check …", "now running the tests") of at most
//!    twelve words that carries no signal word (a decision, a reason, a rule).
//!
//! What passes gets a quality score in 0–1 (length, signal words such as *because*,
//! *decided*, *always*, *never*, *prefer*, importance), reported to the caller.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::secrets::detect_secret;

/// The fewest characters a memory may have.
pub const MIN_CHARS: usize = 20;
/// The fewest words a memory may have.
pub const MIN_WORDS: usize = 4;

/// What the gate says about one write.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GateDecision {
    /// Whether the write may be stored.
    pub accepted: bool,
    /// Why not.
    pub rejection_reason: Option<String>,
    /// The quality score (0–1) of accepted content.
    pub score: f32,
    /// The gate was bypassed (`--force`).
    pub forced: bool,
}

#[allow(clippy::expect_used)] // constant patterns, exercised by the tests
static ACKNOWLEDGEMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(ok(ay)?|k|sure|yes|yep|yeah|no|nope|thanks?( you)?( so much)?|thx|ty|got it|understood|noted|will do|sounds good|looks good( to me)?|lgtm|great|cool|nice|perfect|awesome|done|fine|right|hello|hi|hey|bye|good (job|work)|makes sense|agreed|of course|no problem|np)\b",
    )
    .expect("constant")
});

#[allow(clippy::expect_used)]
static TRANSIENT_REQUEST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(can|could|would|will) you\b|^please\b|^let me\b|^let's\b|^i('ll| will| am going to|'m going to)\b|^(now|next|then),? (i|we|let)\b|^(checking|looking|running|reading|opening|trying|waiting|starting|continuing)\b|^(wait|hold on|one moment|brb)\b",
    )
    .expect("constant")
});

#[allow(clippy::expect_used)]
static SIGNAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(because|since|so that|in order to|to avoid|due to|decided|decision|chose|chosen|prefer(s|red)?|convention|always|never|must|should|rule|lesson|learned|root cause|caused by|fix(ed)? by|instead of|rather than|requires?|important)\b",
    )
    .expect("constant")
});

fn words(text: &str) -> usize {
    text.split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count()
}

/// Whether `text` carries a signal word (a decision, a reason, a rule).
pub(crate) fn has_signal(text: &str) -> bool {
    SIGNAL.is_match(text)
}

/// Why `text` is noise (an acknowledgement or a transient request), if it is.
pub(crate) fn noise(text: &str) -> Option<&'static str> {
    let trimmed = text.trim();
    if words(trimmed) > 12 || has_signal(trimmed) {
        return None;
    }
    if ACKNOWLEDGEMENT.is_match(trimmed) {
        return Some("an acknowledgement");
    }
    if TRANSIENT_REQUEST.is_match(trimmed) {
        return Some("a transient request or narration");
    }
    None
}

/// Judges one write of `content` with `importance` (1–10). `force` bypasses every rule but
/// the secret check.
///
/// # Examples
///
/// ```
/// use weft_memory::check_write;
///
/// assert_eq!(check_write("   ", 5, false).rejection_reason.as_deref(), Some("empty content"));
/// assert!(check_write("ok thanks", 5, false).rejection_reason.unwrap().contains("too short"));
/// assert!(check_write("Let me check the logs again now please", 5, false)
///     .rejection_reason.unwrap().contains("noise"));
/// assert!(check_write("ok", 5, true).accepted);
/// let kept = check_write("Chose rusqlite over sqlx because hooks must start in milliseconds", 8, false);
/// assert!(kept.accepted && kept.score > 0.6);
/// ```
pub fn check_write(content: &str, importance: u8, force: bool) -> GateDecision {
    let reject = |reason: String| GateDecision {
        accepted: false,
        rejection_reason: Some(reason),
        score: 0.0,
        forced: force,
    };
    if let Some(kind) = detect_secret(content) {
        return reject(format!(
            "contains a secret ({kind}); secrets are never stored, even with --force"
        ));
    }
    let trimmed = content.trim();
    let score = score(trimmed, importance);
    if force {
        return GateDecision {
            accepted: true,
            rejection_reason: None,
            score,
            forced: true,
        };
    }
    if trimmed.is_empty() {
        return reject("empty content".into());
    }
    let (chars, word_count) = (trimmed.chars().count(), words(trimmed));
    if chars < MIN_CHARS || word_count < MIN_WORDS {
        return reject(format!(
            "too short to be a meaningful memory ({chars} characters, {word_count} words; at least {MIN_CHARS} characters and {MIN_WORDS} words)"
        ));
    }
    if let Some(what) = noise(trimmed) {
        return reject(format!(
            "noise: {what}, not a learning (record decisions with their reasons, conventions, fixes)"
        ));
    }
    GateDecision {
        accepted: true,
        rejection_reason: None,
        score,
        forced: false,
    }
}

fn score(text: &str, importance: u8) -> f32 {
    let length = (words(text) as f32 / 25.0).min(1.0) * 0.35;
    let signal = if has_signal(text) { 0.35 } else { 0.0 };
    let weight = f32::from(importance.clamp(1, 10)) / 10.0 * 0.3;
    (length + signal + weight).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::check_write;

    #[test]
    fn empty_short_and_noise_are_rejected_with_a_reason() {
        let cases = [
            ("", "empty content"),
            ("  \n\t ", "empty content"),
            ("fixed it", "too short"),
            ("tests pass now", "too short"),
            (
                "ok, thanks, that looks good to me",
                "noise: an acknowledgement",
            ),
            (
                "sounds good, will do that next time",
                "noise: an acknowledgement",
            ),
            (
                "can you run the whole test suite again",
                "noise: a transient request",
            ),
            (
                "let me check the logs for that request",
                "noise: a transient request",
            ),
            (
                "password = hunter2hunter2 for the staging db",
                "contains a secret",
            ),
        ];
        for (text, reason) in cases {
            let d = check_write(text, 5, false);
            assert!(!d.accepted, "{text:?} must be rejected");
            let why = d.rejection_reason.unwrap_or_default();
            assert!(why.starts_with(reason), "{text:?}: {why}");
        }
    }

    #[test]
    fn force_bypasses_the_gate_but_not_the_secret_check() {
        assert!(check_write("ok", 5, true).accepted);
        assert!(check_write("", 5, true).accepted);
        let d = check_write("the key is AKIAABCDEFGHIJKLMNOP", 5, true);
        assert!(!d.accepted);
    }

    #[test]
    fn learnings_pass() {
        for text in [
            "Chose rusqlite over sqlx because hooks must start in a few milliseconds",
            "Always run cargo fmt before committing; CI fails on formatting",
            "The sandbox tests need user namespaces, so they skip inside docker",
            "OK so the flaky test was caused by a shared temp dir between tests",
        ] {
            assert!(check_write(text, 5, false).accepted, "{text}");
        }
    }
}
