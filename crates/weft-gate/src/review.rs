//! The parallel expert review: the protocol's "expert review precedes ship" gate.
//!
//! Every reviewer of `[[review.reviewers]]` ([`crate::Reviewer`]) runs at the same time, in
//! the worktree, on the branch's diff against its base (the merge base with the base
//! branch, working-tree changes included). A reviewer is any command — a script, an
//! external tool, or a Weft agent (`weft run reviewer …`). It gets:
//!
//! - `WEFT_REVIEW_DIFF`: a file holding the unified diff (and the list of new, untracked files);
//! - `WEFT_REVIEWER`: its name; `WEFT_REVIEW_BASE`: the base revision;
//!
//! and answers on stdout with a JSON object — `{"verdict": "approve" | "reject",
//! "reasons": ["…"]}` (also accepted: `"approved": true|false`, `"reason": "…"`); the last
//! line that is such an object counts. Exit 2, or a reject, is a rejection; a reviewer that
//! crashes, times out or gives no verdict rejects too (fail-closed). The review passes when
//! every required reviewer approves. Each verdict is written to the audit trail (gate
//! `review`, the reviewer's name as the policy id).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::config::{GateConfig, Reviewer};
use crate::process;

/// One reviewer's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewVerdict {
    /// The reviewer's name.
    pub reviewer: String,
    /// Whether its rejection fails the review.
    pub required: bool,
    /// Whether it approved.
    pub approved: bool,
    /// Its reasons (or why it could not give a verdict).
    pub reasons: Vec<String>,
}

/// The result of a parallel review.
///
/// ```
/// let review = weft_gate::Review::default();
/// assert!(!review.passed(), "no reviewer: nothing was reviewed");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Review {
    /// The revision the diff was taken against.
    pub base: String,
    /// One per reviewer, in the configured order.
    pub verdicts: Vec<ReviewVerdict>,
}

impl Review {
    /// Whether there was a reviewer and every required one approved.
    pub fn passed(&self) -> bool {
        !self.verdicts.is_empty() && self.verdicts.iter().all(|v| v.approved || !v.required)
    }

    /// One line per reviewer.
    pub fn summary(&self) -> String {
        self.verdicts
            .iter()
            .map(|v| {
                format!(
                    "{} {}{}: {}",
                    if v.approved {
                        "approved by"
                    } else {
                        "REJECTED by"
                    },
                    v.reviewer,
                    if v.required { "" } else { " (optional)" },
                    if v.reasons.is_empty() {
                        "no reasons given".to_owned()
                    } else {
                        v.reasons.join("; ")
                    }
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs every configured reviewer in parallel on the diff of `dir` against `base`.
pub fn run_review(config: &GateConfig, dir: &Path, base: &str) -> Review {
    let limit = Duration::from_secs(config.completion.timeout_seconds);
    let diff = diff_text(dir, base);
    let file = tempfile_path("review-diff");
    if let Err(e) = std::fs::write(&file, &diff) {
        return Review {
            base: base.to_owned(),
            verdicts: config
                .reviewers
                .iter()
                .map(|r| ReviewVerdict {
                    reviewer: r.name.clone(),
                    required: r.required,
                    approved: false,
                    reasons: vec![format!("the diff could not be written for review: {e}")],
                })
                .collect(),
        };
    }
    let file_text = file.to_string_lossy().into_owned();
    let verdicts = std::thread::scope(|scope| {
        let handles: Vec<_> = config
            .reviewers
            .iter()
            .map(|reviewer| {
                let file_text = &file_text;
                scope.spawn(move || one(reviewer, dir, base, file_text, limit))
            })
            .collect();
        handles
            .into_iter()
            .zip(&config.reviewers)
            .map(|(h, r)| {
                h.join().unwrap_or_else(|_| ReviewVerdict {
                    reviewer: r.name.clone(),
                    required: r.required,
                    approved: false,
                    reasons: vec!["the reviewer's thread failed".into()],
                })
            })
            .collect()
    });
    let _ = std::fs::remove_file(&file);
    Review {
        base: base.to_owned(),
        verdicts,
    }
}

fn tempfile_path(stem: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!("weft-{stem}-{}-{nanos}", std::process::id()))
}

fn diff_text(dir: &Path, base: &str) -> String {
    let run = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        process::run("git", &args, dir, &[], Duration::from_secs(60))
            .ok()
            .filter(|d| d.code == Some(0))
            .map(|d| d.stdout)
            .unwrap_or_default()
    };
    let mut text = run(&["diff", base]);
    let untracked = run(&["ls-files", "--others", "--exclude-standard"]);
    if !untracked.trim().is_empty() {
        text.push_str("\n# new files not yet added to git:\n");
        for line in untracked.lines() {
            text.push_str(&format!("# {line}\n"));
        }
    }
    text
}

fn one(reviewer: &Reviewer, dir: &Path, base: &str, diff: &str, limit: Duration) -> ReviewVerdict {
    let verdict = |approved: bool, reasons: Vec<String>| ReviewVerdict {
        reviewer: reviewer.name.clone(),
        required: reviewer.required,
        approved,
        reasons,
    };
    let envs = [
        ("WEFT_REVIEW_DIFF", diff),
        ("WEFT_REVIEWER", reviewer.name.as_str()),
        ("WEFT_REVIEW_BASE", base),
    ];
    let done = match process::run(
        "sh",
        &["-c".to_owned(), reviewer.command.clone()],
        dir,
        &envs,
        limit,
    ) {
        Ok(done) => done,
        Err(e) => return verdict(false, vec![e]),
    };
    if done.timed_out {
        return verdict(
            false,
            vec![format!(
                "gave no verdict within {}s (stopped)",
                limit.as_secs()
            )],
        );
    }
    let answer = done
        .stdout
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l.trim())
                .ok()
                .filter(Value::is_object)
        })
        .or_else(|| serde_json::from_str::<Value>(done.stdout.trim()).ok());
    let approved_word = answer.as_ref().and_then(|a| {
        a.get("verdict")
            .and_then(Value::as_str)
            .map(|v| matches!(v.to_ascii_lowercase().as_str(), "approve" | "approved"))
            .or_else(|| a.get("approved").and_then(Value::as_bool))
    });
    let mut reasons: Vec<String> = answer
        .as_ref()
        .map(|a| {
            let mut list: Vec<String> = a
                .get("reasons")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            if let Some(one) = a.get("reason").and_then(Value::as_str) {
                list.push(one.to_owned());
            }
            list
        })
        .unwrap_or_default();
    match (done.code, approved_word) {
        (Some(0), Some(true)) => verdict(true, reasons),
        (Some(2), _) | (Some(0), Some(false)) => {
            if reasons.is_empty() {
                reasons.push(process::tail(&done.stderr, 5));
            }
            verdict(false, reasons)
        }
        (Some(0), None) => verdict(
            false,
            vec![format!(
                "gave no verdict (expected {{\"verdict\": \"approve\"|\"reject\", \"reasons\": [...]}} on stdout): {}",
                process::tail(&done.stdout, 3)
            )],
        ),
        (code, _) => verdict(
            false,
            vec![format!(
                "failed (exit {}): {}",
                code.map_or_else(|| "by signal".to_owned(), |c| c.to_string()),
                process::tail(&format!("{}\n{}", done.stdout, done.stderr), 5)
            )],
        ),
    }
}
