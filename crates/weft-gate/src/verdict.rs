//! [`Verdict`]: the binary answer of the gates, with every finding that led to it.
//!
//! **Invariant:** a verdict is allow or deny, nothing else. No gate rewrites a call's
//! arguments (there is no "modify" verdict); advisory findings ride along but never change
//! the outcome.

use std::fmt;

/// How much a policy's violation matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// Blocks the call (fail-closed).
    Required,
    /// Logged, never blocks.
    Recommended,
    /// Logged (informational), never blocks.
    Optional,
}

impl Level {
    /// `REQUIRED`, `RECOMMENDED`, `OPTIONAL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Required => "REQUIRED",
            Level::Recommended => "RECOMMENDED",
            Level::Optional => "OPTIONAL",
        }
    }

    /// Parses the level, case-insensitively.
    pub fn parse(text: &str) -> Option<Level> {
        match text.trim().to_ascii_uppercase().as_str() {
            "REQUIRED" => Some(Level::Required),
            "RECOMMENDED" => Some(Level::Recommended),
            "OPTIONAL" => Some(Level::Optional),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One gate's result for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The gate: `worktree`, `command`, `policy`.
    pub gate: &'static str,
    /// The policy's id (policy gate only).
    pub policy: Option<String>,
    /// The level of what was checked (built-in gates are [`Level::Required`]).
    pub level: Level,
    /// Whether the check passed.
    pub passed: bool,
    /// Why it failed, or a note when it passed (e.g. an override was used).
    pub message: String,
}

impl Finding {
    /// A failed required check: it blocks.
    pub fn blocks(&self) -> bool {
        !self.passed && self.level == Level::Required
    }
}

/// Allow or deny, with the findings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Every check that ran, in order.
    pub findings: Vec<Finding>,
}

impl Verdict {
    /// Whether the call may proceed: no required check failed.
    pub fn allowed(&self) -> bool {
        !self.findings.iter().any(Finding::blocks)
    }

    /// The reasons of the blocking findings, one per line (empty when allowed).
    pub fn reason(&self) -> String {
        self.findings
            .iter()
            .filter(|f| f.blocks())
            .map(|f| match &f.policy {
                Some(id) => format!("[{} {id}] {}", f.gate, f.message),
                None => format!("[{}] {}", f.gate, f.message),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The failed checks that only log (RECOMMENDED / OPTIONAL), one per line.
    pub fn advisories(&self) -> String {
        self.findings
            .iter()
            .filter(|f| !f.passed && !f.blocks())
            .map(|f| {
                format!(
                    "[{} {} {}] {}",
                    f.gate,
                    f.policy.as_deref().unwrap_or(""),
                    f.level,
                    f.message
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub(crate) fn push(&mut self, finding: Finding) {
        self.findings.push(finding);
    }
}
