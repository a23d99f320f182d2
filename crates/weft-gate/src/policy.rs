//! Policies: rules kept in the policy database, each with a level, a stage, the tools it
//! applies to and what it checks — a deny pattern, an external enforcer, or both.
//!
//! An enforcer speaks the reference protocol, so existing enforcer scripts keep working:
//! it is run as `<enforcer> --operation OP --args JSON` in the project root, prints
//! `{"allowed": bool, "reason": …}` and exits 0 to allow or 2 to block. Any other outcome
//! (it cannot start, exits 1, prints no verdict, runs past its time limit) is a failure of
//! the check: a REQUIRED policy then blocks (fail-closed), the others log it.

use std::path::Path;
use std::time::Duration;

use regex::Regex;
use serde_json::Value;

use crate::invocation::{Stage, ToolInvocation, ToolKind};
use crate::process;
use crate::verdict::{Finding, Level};

/// How long an enforcer may take.
const ENFORCER_LIMIT: Duration = Duration::from_secs(30);

/// One policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// A short slug (`no-kubectl-delete`).
    pub id: String,
    /// What it is for, one line.
    pub description: String,
    /// REQUIRED blocks; the others log.
    pub level: Level,
    /// When it is checked.
    pub stage: Stage,
    /// Which tools: a regex over the tool's name or kind (`edit`, `shell`, `read`, `other`),
    /// anchored; `*` or empty means every tool.
    pub tools: String,
    /// A regex: the call is a violation when it matches the call's subject (the shell
    /// command, the edited paths, or the arguments' JSON).
    pub deny_pattern: Option<String>,
    /// An external enforcer command line (split like a shell would).
    pub enforcer: Option<String>,
    /// Disabled policies are skipped.
    pub enabled: bool,
}

impl Policy {
    /// Whether this policy is checked for `invocation` at `stage`.
    pub fn applies(&self, invocation: &ToolInvocation, stage: Stage) -> bool {
        self.enabled
            && (self.stage == stage || self.stage == Stage::Always)
            && tools_match(&self.tools, &invocation.tool, invocation.kind.name())
    }

    /// Checks `invocation` (at `stage`) against this policy; `root` is where an enforcer runs.
    pub fn evaluate(&self, invocation: &ToolInvocation, stage: Stage, root: &Path) -> Finding {
        let finding = |passed: bool, message: String| Finding {
            gate: "policy",
            policy: Some(self.id.clone()),
            level: self.level,
            passed,
            message,
        };
        if let Some(pattern) = &self.deny_pattern {
            match Regex::new(pattern) {
                Ok(re) => {
                    if re.is_match(&subject(invocation)) {
                        return finding(
                            false,
                            format!(
                                "{} (matches the policy's pattern {pattern:?})",
                                self.describe()
                            ),
                        );
                    }
                }
                Err(e) => {
                    return finding(false, format!("the policy's pattern is invalid: {e}"));
                }
            }
        }
        if let Some(enforcer) = &self.enforcer {
            return match run_enforcer(enforcer, invocation, stage, root) {
                Ok(()) => finding(true, String::new()),
                Err(reason) => finding(false, format!("{}: {reason}", self.describe())),
            };
        }
        finding(true, String::new())
    }

    fn describe(&self) -> String {
        if self.description.is_empty() {
            format!("policy {}", self.id)
        } else {
            self.description.clone()
        }
    }
}

/// Checks that `pattern` is a regex the policy gate can use.
///
/// # Errors
/// Why it is not.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    Regex::new(pattern).map(drop).map_err(|e| e.to_string())
}

fn tools_match(tools: &str, tool: &str, kind: &str) -> bool {
    let tools = tools.trim();
    if tools.is_empty() || tools == "*" {
        return true;
    }
    match Regex::new(&format!("^(?:{tools})$")) {
        Ok(re) => re.is_match(tool) || re.is_match(kind),
        // A matcher that is not a regex is compared as a literal.
        Err(_) => tools == tool || tools == kind,
    }
}

/// What a deny pattern is matched against.
fn subject(invocation: &ToolInvocation) -> String {
    match &invocation.kind {
        ToolKind::Shell { command } => command.clone(),
        ToolKind::Edit { paths } => paths.join("\n"),
        ToolKind::Read | ToolKind::Other => invocation.input.to_string(),
    }
}

/// Runs an enforcer; `Err(reason)` when it blocks or fails.
fn run_enforcer(
    enforcer: &str,
    invocation: &ToolInvocation,
    stage: Stage,
    root: &Path,
) -> Result<(), String> {
    let Some(mut words) = shlex::split(enforcer).filter(|w| !w.is_empty()) else {
        return Err(format!("the enforcer command {enforcer:?} cannot be split"));
    };
    let program = words.remove(0);
    words.extend([
        "--operation".to_owned(),
        invocation.tool.clone(),
        "--args".to_owned(),
        invocation.input.to_string(),
    ]);
    let done = process::run(
        &program,
        &words,
        root,
        &[("WEFT_GATE_STAGE", stage.as_str())],
        ENFORCER_LIMIT,
    )?;
    if done.timed_out {
        return Err(format!(
            "the enforcer ran past {}s",
            ENFORCER_LIMIT.as_secs()
        ));
    }
    let verdict: Option<Value> = done
        .stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(Value::is_object);
    let allowed = verdict
        .as_ref()
        .and_then(|v| v.get("allowed"))
        .and_then(Value::as_bool);
    let reason = verdict
        .as_ref()
        .and_then(|v| v.get("reason"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| process::tail(&done.stderr, 3));
    match (done.code, allowed) {
        (Some(0), Some(false)) | (Some(2), _) => Err(if reason.is_empty() {
            "the enforcer blocked the call".to_owned()
        } else {
            reason
        }),
        (Some(0), _) => Ok(()),
        (code, _) => Err(format!(
            "the enforcer failed (exit {}){}",
            code.map_or_else(|| "by signal".to_owned(), |c| c.to_string()),
            if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(tools: &str, pattern: &str) -> Policy {
        Policy {
            id: "p".into(),
            description: "no kubectl delete".into(),
            level: Level::Required,
            stage: Stage::PreExec,
            tools: tools.into(),
            deny_pattern: Some(pattern.into()),
            enforcer: None,
            enabled: true,
        }
    }

    #[test]
    fn tools_match_names_and_kinds() {
        assert!(tools_match("*", "Bash", "shell"));
        assert!(tools_match("Edit|Write", "Write", "edit"));
        assert!(!tools_match("Edit|Write", "MultiEdit", "edit"));
        assert!(tools_match("edit", "MultiEdit", "edit"));
    }

    #[test]
    fn patterns_match_the_subject() {
        let call = ToolInvocation::new("Bash", json!({"command": "kubectl delete ns x"}), "/");
        let p = policy("shell", "kubectl\\s+delete");
        assert!(p.applies(&call, Stage::PreExec));
        assert!(!p.applies(&call, Stage::PostExec));
        assert!(!p.evaluate(&call, Stage::PreExec, Path::new("/")).passed);
        let ok = ToolInvocation::new("Bash", json!({"command": "kubectl get ns"}), "/");
        assert!(p.evaluate(&ok, Stage::PreExec, Path::new("/")).passed);
    }

    #[test]
    fn a_matcher_that_is_not_a_regex_is_compared_literally() {
        // `Bash(` does not compile as a regex: it names the tool `Bash(` (or the kind) only.
        assert!(tools_match("Bash(", "Bash(", "shell"));
        assert!(tools_match("other(", "mcp__x", "other("));
        assert!(!tools_match("Bash(", "Bash", "shell"));
        assert!(!tools_match("Bash(", "Edit", "edit"));
    }

    #[test]
    fn a_violation_is_described_by_the_policy() {
        let call = ToolInvocation::new("Bash", json!({"command": "kubectl delete ns x"}), "/");
        let p = policy("shell", "kubectl");
        let finding = p.evaluate(&call, Stage::PreExec, Path::new("/"));
        assert!(
            finding.message.starts_with("no kubectl delete (matches"),
            "{}",
            finding.message
        );
        let unnamed = Policy {
            description: String::new(),
            ..p
        };
        let finding = unnamed.evaluate(&call, Stage::PreExec, Path::new("/"));
        assert!(
            finding.message.starts_with("policy p (matches"),
            "{}",
            finding.message
        );
    }

    #[test]
    fn check_pattern_refuses_what_the_gate_cannot_compile() {
        assert!(check_pattern("kubectl\\s+delete").is_ok());
        assert!(check_pattern("rm -rf (").is_err());
        assert!(check_pattern("[z-a]").is_err());
    }
}
