//! Promotion rules: which daily-log entries become long-term learnings.
//!
//! A learning is promoted to the semantic tier only when it changes future behaviour:
//! - **a decision with its rationale**, of importance ≥ [`DECISION_MIN_IMPORTANCE`]: kind
//!   `decision` or decision wording (*decided*, *chose*, *went with*, *prefer*, *settled on*,
//!   *we use*), plus a reason (*because*, *since*, *so that*, *to avoid*, *due to*, *instead
//!   of*, *rather than*, *over*);
//! - **a pattern that prevents a recurring error**: kind `pattern` or `lesson`, or an error
//!   (*error*, *fails*, *bug*, *crash*, *panic*, *regression*, *flaky*, *timeout*, *race*)
//!   together with what prevents it (*always*, *never*, *must*, *avoid*, *make sure*, *ensure*,
//!   *prevent*, *do not*, *fixed by*, *the fix is*);
//! - **a configuration choice with its context**: kind `config`, or a setting (a `key = value`,
//!   a `--flag`, an `ENV_VAR=`, *config*, *setting*, *option*, *timeout*, *limit*) together
//!   with why (*because*, *since*, *so that*, *to avoid*, *otherwise*, *due to*, *when*,
//!   *required*).
//!
//! Never promoted: secrets (refused), trivia (the write gate's noise and length rules, or
//! importance ≤ 3) and transient debugging state (*currently*, *for now*, *temporarily*, *a temporary hack*,
//! *WIP*, *still failing*, *trying to*, *investigating*, debug prints, breakpoints) — these are
//! rejected, and stay in the daily log marked with the reason. Session loops (kind `action` /
//! `goal`) and other observations of importance ≥ 5 go to the working cache, where they decay;
//! the rest stays in the daily log until maintenance prunes it.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::entry::{Entry, Kind, Tier};
use crate::gate::{MIN_CHARS, MIN_WORDS, noise};
use crate::secrets::detect_secret;

/// The least importance of a decision that is promoted.
pub const DECISION_MIN_IMPORTANCE: u8 = 7;

/// What promotion does with one daily-log entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "action")]
pub enum Assessment {
    /// Copied to `tier` (semantic for learnings, working for short-term context).
    Promote {
        /// The tier it goes to.
        tier: Tier,
        /// Why.
        reason: String,
    },
    /// Never promoted (trivia, transient state, a secret): marked rejected.
    Reject {
        /// Why.
        reason: String,
    },
    /// Left in the daily log as it is (it may qualify later, e.g. once a reason is added by a
    /// correction).
    Keep {
        /// Why.
        reason: String,
    },
}

macro_rules! pattern {
    ($name:ident, $re:expr) => {
        #[allow(clippy::expect_used)] // a constant pattern, exercised by the tests
        static $name: LazyLock<Regex> = LazyLock::new(|| Regex::new($re).expect("constant"));
    };
}

pattern!(
    TRANSIENT,
    r"(?i)\b(currently|right now|for now|temporarily|temporary (fix|hack|workaround|change|patch)|wip|work in progress|still (failing|broken|investigating|debugging)|trying (to|again|out)|investigating|attempt(ing)? #?\d|not sure (yet|why)|will (retry|check|look)|breakpoint|debug (print|log|output)|added (a )?(debug|print|log)( statement| line)?)\b|println!|console\.log\(|dbg!\(|print\(f?['\x22]debug"
);
pattern!(
    DECISION,
    r"(?i)\b(decided|decision|decide|chose|choose|chosen|picked|opted|went with|go with|settled on|prefer(s|red)?|we use|use \S+ (instead|rather))\b"
);
pattern!(
    RATIONALE,
    r"(?i)\b(because|since|so that|in order to|to avoid|to keep|due to|given that|as it|which (means|keeps|avoids)|rationale|the reason|instead of|rather than|over)\b"
);
pattern!(
    ERROR,
    r"(?i)\b(error|errors|fail(s|ed|ure|ures|ing)?|bug|bugs|crash(es|ed)?|panic(s|ked)?|regression|flak(y|iness)|break|broke|breaks|broken|timeout|deadlock|race)\b"
);
pattern!(
    PREVENTION,
    r"(?i)\b(always|never|must|avoid|make sure|ensure|prevent(s|ed)?|remember to|do not|don't|fix(ed)? by|the fix is|to fix|check that|guard against)\b"
);
pattern!(
    SETTING,
    r"(?i)(\b(config|configuration|configure[ds]?|setting|settings|option|env(ironment)? var(iable)?s?|timeout|threshold|limit|port)\b|(^|\s)--[a-z][a-z\-]+|\b[A-Z][A-Z0-9_]{2,}=|\b[a-zA-Z_][a-zA-Z0-9_.\-]*\s*=\s*\S)"
);
pattern!(
    CONTEXT,
    r"(?i)\b(because|since|so that|to avoid|in order to|otherwise|due to|when|required|needed|needs)\b"
);

fn trivia(entry: &Entry) -> Option<String> {
    let text = entry.content.trim();
    let words = text.split_whitespace().count();
    if text.chars().count() < MIN_CHARS || words < MIN_WORDS {
        return Some("trivia: too short to be a learning".into());
    }
    if let Some(what) = noise(text) {
        return Some(format!("trivia: {what}"));
    }
    if entry.importance <= 3 {
        return Some(format!("trivia: importance {}", entry.importance));
    }
    None
}

/// Decides what promotion does with `entry` (a daily-log entry).
///
/// # Examples
///
/// ```
/// use weft_memory::{Assessment, Kind, Tier, assess};
/// # use weft_memory::{Entry, Status};
/// # fn entry(content: &str, kind: Kind, importance: u8) -> Entry {
/// #     Entry { id: 1, tier: Tier::Daily, kind, content: content.into(), tags: vec![], importance,
/// #         session_id: None, created_at: 0, last_access: 0, access_count: 0, status: Status::Active,
/// #         source_id: None, suggested_tier: None, note: None }
/// # }
///
/// let decision = entry("Chose SQLite for the gate tables because hooks must start in milliseconds", Kind::Decision, 8);
/// assert!(matches!(assess(&decision), Assessment::Promote { tier: Tier::Semantic, .. }));
/// let debugging = entry("Currently adding println! calls to find where the parser stops", Kind::Observation, 6);
/// assert!(matches!(assess(&debugging), Assessment::Reject { .. }));
/// ```
pub fn assess(entry: &Entry) -> Assessment {
    let text = entry.content.as_str();
    if let Some(kind) = detect_secret(text) {
        return Assessment::Reject {
            reason: format!("contains a secret ({kind}): never promoted"),
        };
    }
    if let Some(reason) = trivia(entry) {
        return Assessment::Reject { reason };
    }
    if TRANSIENT.is_match(text) {
        return Assessment::Reject {
            reason: "transient debugging state: not a lasting learning".into(),
        };
    }
    let decision = entry.kind == Kind::Decision || DECISION.is_match(text);
    if decision {
        let rationale = RATIONALE.is_match(text);
        if rationale && entry.importance >= DECISION_MIN_IMPORTANCE {
            return Assessment::Promote {
                tier: Tier::Semantic,
                reason: format!(
                    "a decision with its rationale (importance {})",
                    entry.importance
                ),
            };
        }
        if entry.kind == Kind::Decision {
            return Assessment::Keep {
                reason: if rationale {
                    format!(
                        "a decision of importance {}: promoted at {DECISION_MIN_IMPORTANCE} or more",
                        entry.importance
                    )
                } else {
                    "a decision without its rationale: say why (because …) to promote it".into()
                },
            };
        }
    }
    let pattern_kind = matches!(entry.kind, Kind::Pattern | Kind::Lesson);
    if PREVENTION.is_match(text) && (pattern_kind || ERROR.is_match(text)) {
        return Assessment::Promote {
            tier: Tier::Semantic,
            reason: "a pattern that prevents a recurring error".into(),
        };
    }
    let setting = entry.kind == Kind::Config || SETTING.is_match(text);
    if setting && CONTEXT.is_match(text) {
        return Assessment::Promote {
            tier: Tier::Semantic,
            reason: "a configuration choice with its context".into(),
        };
    }
    if entry.kind == Kind::Config {
        return Assessment::Keep {
            reason: "a configuration choice without context: say why to promote it".into(),
        };
    }
    if pattern_kind {
        return Assessment::Keep {
            reason: "a pattern that names no error it prevents (always / never / avoid …)".into(),
        };
    }
    if matches!(entry.kind, Kind::Action | Kind::Goal) {
        return Assessment::Promote {
            tier: Tier::Working,
            reason: "a session loop: short-term context".into(),
        };
    }
    if entry.importance >= 5 {
        return Assessment::Promote {
            tier: Tier::Working,
            reason: "recent context (not a lasting learning): the working cache".into(),
        };
    }
    Assessment::Keep {
        reason: "not significant enough to promote".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Status;

    fn entry(content: &str, kind: Kind, importance: u8) -> Entry {
        Entry {
            id: 1,
            tier: Tier::Daily,
            kind,
            content: content.into(),
            tags: vec![],
            importance,
            session_id: None,
            created_at: 0,
            last_access: 0,
            access_count: 0,
            status: Status::Active,
            source_id: None,
            suggested_tier: None,
            note: None,
        }
    }

    fn verdict(content: &str, kind: Kind, importance: u8) -> &'static str {
        match assess(&entry(content, kind, importance)) {
            Assessment::Promote {
                tier: Tier::Semantic,
                ..
            } => "semantic",
            Assessment::Promote { .. } => "working",
            Assessment::Reject { .. } => "reject",
            Assessment::Keep { .. } => "keep",
        }
    }

    #[test]
    fn significant_learnings_are_promoted_and_the_rest_is_not() {
        use Kind::*;
        let table = [
            // Decisions: rationale and importance ≥ 7.
            (
                "Chose rusqlite over sqlx because the hook must start in milliseconds",
                Decision,
                8,
                "semantic",
            ),
            (
                "Decided to keep the gate tables in weft.db so that one file holds the project state",
                Observation,
                7,
                "semantic",
            ),
            (
                "Chose rusqlite over sqlx because the hook must start in milliseconds",
                Decision,
                6,
                "keep",
            ),
            (
                "We decided to use rusqlite for the gate tables from now on",
                Decision,
                9,
                "keep",
            ),
            // Patterns that prevent recurring errors.
            (
                "Always call git with -c core.quotepath=off, otherwise non-ASCII paths break the diff parser",
                Observation,
                5,
                "semantic",
            ),
            (
                "Flaky test: never share a temp dir between tests running in parallel",
                Pattern,
                6,
                "semantic",
            ),
            (
                "The tests should be named after the requirement they prove",
                Pattern,
                6,
                "keep",
            ),
            // Configuration choices with context.
            (
                "Set busy_timeout = 5000 because two hooks can write at once",
                Config,
                5,
                "semantic",
            ),
            (
                "RUST_TEST_THREADS=1 is required when the sandbox tests run under docker",
                Observation,
                5,
                "semantic",
            ),
            (
                "Set busy_timeout = 5000 in the gate database connection",
                Config,
                5,
                "keep",
            ),
            // Never: trivia, transient debugging state, secrets.
            ("ok, thanks, that looks good", Observation, 9, "reject"),
            (
                "The README file has a title line at the top",
                Observation,
                2,
                "reject",
            ),
            (
                "Currently investigating why the parser stops at line 40",
                Observation,
                8,
                "reject",
            ),
            (
                "Added a debug print in hook.rs to see the payload for now",
                Observation,
                7,
                "reject",
            ),
            (
                "Decided to use the staging key sk-proj-abcdefghijklmnopqrstuvwx because it works",
                Decision,
                9,
                "reject",
            ),
            // Short-term context.
            (
                "Finish the memory CLI and its end-to-end tests today",
                Goal,
                8,
                "working",
            ),
            (
                "The policy table has eleven rows in this repository today",
                Observation,
                5,
                "working",
            ),
            (
                "The policy table has eleven rows in this repository today",
                Observation,
                4,
                "keep",
            ),
        ];
        for (text, kind, importance, expected) in table {
            assert_eq!(verdict(text, kind, importance), expected, "{text}");
        }
    }
}
