//! The policy engine's rules (runtime spec §4.2 `PolicyEngine`, §5.3, §5.12): an ordered list
//! of rules, each an action (`file.read`, `file.write`, `network.request`, `connector.read`,
//! `tool.NAME`, … — `file.*` matches a family), conditions (`when`) and a decision (`allow`,
//! `allow_with_confirm`, `deny`). The reference implementation's semantics, checked against its
//! parity table (`keepup-cowork-policy-parity.json`) in this crate's tests:
//!
//! * rules naming the exact action are tried first, in order, then wildcard rules, in order;
//!   the first whose conditions all hold decides;
//! * no rule: the fallback decides (`defaults.fallback`);
//! * `allow_with_confirm` means the call waits for a person's approval.
//!
//! Conditions: `matchesPattern` (globs over the path: `**`, `*`, `?`), `pathWithinGrant`,
//! `pathWithinOutputRoot` (with `caseInsensitivePaths`), `hostInAllowlist`,
//! `connectorScopeAllowed`, `fileSizeGreaterThan`. A condition about a value the input lacks
//! does not hold.

use std::path::{Component, Path, PathBuf};

use regex::Regex;
use serde::{Deserialize, Serialize};

/// A decision of the engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The call runs.
    #[default]
    Allow,
    /// The call runs after a person approves it.
    AllowWithConfirm,
    /// The call does not run.
    Deny,
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    /// Its id (named in decisions and refusals).
    pub id: String,
    /// The action it is about; a trailing `*` matches a family (`file.*`).
    pub action: String,
    /// Conditions that must all hold.
    #[serde(default)]
    pub when: Conditions,
    /// What it decides.
    pub decision: Decision,
    /// Why, in words the model reads when it denies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Tags for audit (`overwrite`, `network`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub risk_tags: Vec<String>,
}

/// A rule's conditions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conditions {
    /// The path matches one of these globs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches_pattern: Option<Vec<String>>,
    /// The path is (or is not) inside a granted root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_within_grant: Option<bool>,
    /// The path is (or is not) inside an output root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_within_output_root: Option<bool>,
    /// The host is (or is not) allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_in_allowlist: Option<bool>,
    /// The connector's scope is (or is not) allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector_scope_allowed: Option<bool>,
    /// The file is larger than this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size_greater_than: Option<u64>,
}

/// What a call is, for the rules.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyInput {
    /// The action (`file.read`, …).
    pub action: String,
    /// The path it touches (absolute).
    #[serde(default)]
    pub path: Option<String>,
    /// Roots it may touch.
    #[serde(default)]
    pub grant_roots: Vec<String>,
    /// Roots it may write without asking.
    #[serde(default)]
    pub output_roots: Vec<String>,
    /// The host it reaches.
    #[serde(default)]
    pub host: Option<String>,
    /// Hosts allowed.
    #[serde(default)]
    pub host_allowlist: Vec<String>,
    /// Whether the connector's scope is allowed.
    #[serde(default)]
    pub connector_scope_allowed: Option<bool>,
    /// The file's size.
    #[serde(default)]
    pub file_size_bytes: Option<u64>,
    /// Whether paths compare without case.
    #[serde(default)]
    pub case_insensitive_paths: bool,
}

/// The engine's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyDecision {
    /// The decision.
    pub decision: Decision,
    /// Whether a person must approve (`allow_with_confirm`).
    pub requires_confirmation: bool,
    /// The rule that decided (`None`: the fallback).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    /// Its reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub risk_tags: Vec<String>,
}

/// The fallback of a rule set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Defaults {
    /// What decides when no rule does.
    pub fallback: Decision,
}

/// A rule set: the rules and the fallback.
///
/// # Examples
///
/// ```
/// use serde_json::json;
/// use weft_runtime::profile::rules::{Decision, PolicyInput, RuleSet};
///
/// let rules: RuleSet = serde_json::from_value(json!({
///     "defaults": {"fallback": "deny"},
///     "rules": [
///         {"id": "no-env", "action": "file.read", "when": {"matchesPattern": ["**/.env*"]},
///          "decision": "deny", "reason": "sensitive"},
///         {"id": "read", "action": "file.read", "when": {"pathWithinGrant": true}, "decision": "allow"}
///     ]
/// }))?;
/// let input = |path: &str| PolicyInput {
///     action: "file.read".into(),
///     path: Some(path.into()),
///     grant_roots: vec!["/w".into()],
///     ..PolicyInput::default()
/// };
/// assert_eq!(rules.decide(&input("/w/.env")).decision, Decision::Deny);
/// assert_eq!(rules.decide(&input("/w/a.md")).decision, Decision::Allow);
/// assert_eq!(rules.decide(&input("/etc/passwd")).rule_id, None); // the fallback: deny
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleSet {
    /// The fallback.
    #[serde(default)]
    pub defaults: Defaults,
    /// The rules, in order.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// The reference format's version (kept, not interpreted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl RuleSet {
    /// The decision for `input`.
    pub fn decide(&self, input: &PolicyInput) -> PolicyDecision {
        let exact = self.rules.iter().filter(|r| r.action == input.action);
        let family = self
            .rules
            .iter()
            .filter(|r| r.action != input.action && action_matches(&r.action, &input.action));
        match exact.chain(family).find(|r| holds(&r.when, input)) {
            Some(rule) => PolicyDecision {
                decision: rule.decision,
                requires_confirmation: rule.decision == Decision::AllowWithConfirm,
                rule_id: Some(rule.id.clone()),
                reason: rule.reason.clone(),
                risk_tags: rule.risk_tags.clone(),
            },
            None => PolicyDecision {
                decision: self.defaults.fallback,
                requires_confirmation: self.defaults.fallback == Decision::AllowWithConfirm,
                rule_id: None,
                reason: None,
                risk_tags: Vec::new(),
            },
        }
    }

    /// The problems of the rules (a glob that cannot be read), as `(rule id, message)`.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        for rule in &self.rules {
            for pattern in rule.when.matches_pattern.iter().flatten() {
                if let Err(error) = glob(pattern) {
                    problems.push((rule.id.clone(), format!("pattern {pattern:?}: {error}")));
                }
            }
        }
        problems
    }
}

fn action_matches(pattern: &str, action: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => action.starts_with(prefix),
        None => pattern == action,
    }
}

fn holds(when: &Conditions, input: &PolicyInput) -> bool {
    let path = input.path.as_deref();
    let within = |roots: &[String]| {
        path.is_some_and(|p| {
            roots
                .iter()
                .any(|r| inside(p, r, input.case_insensitive_paths))
        })
    };
    let checks = [
        when.matches_pattern.as_ref().map(|globs| {
            path.is_some_and(|p| globs.iter().any(|g| glob(g).is_ok_and(|re| re.is_match(p))))
        }),
        when.path_within_grant
            .map(|want| path.is_some() && within(&input.grant_roots) == want),
        when.path_within_output_root
            .map(|want| path.is_some() && within(&input.output_roots) == want),
        when.host_in_allowlist.map(|want| {
            input.host.as_ref().is_some_and(|h| {
                input
                    .host_allowlist
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(h))
                    == want
            })
        }),
        when.connector_scope_allowed
            .map(|want| input.connector_scope_allowed == Some(want)),
        when.file_size_greater_than
            .map(|limit| input.file_size_bytes.is_some_and(|size| size > limit)),
    ];
    checks.into_iter().flatten().all(|held| held)
}

/// Whether `path` is `root` or inside it (lexically, after normalizing both).
fn inside(path: &str, root: &str, case_insensitive: bool) -> bool {
    let norm = |p: &str| -> PathBuf {
        let p = if case_insensitive {
            p.to_lowercase()
        } else {
            p.to_owned()
        };
        let mut out = PathBuf::new();
        for part in Path::new(&p).components() {
            match part {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    };
    norm(path).starts_with(norm(root))
}

/// A glob as an anchored regex: `**/` any folders, `**` anything, `*` within a segment, `?`
/// one character.
fn glob(pattern: &str) -> Result<Regex, regex::Error> {
    let mut re = String::from("^");
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                if chars.peek() == Some(&'/') {
                    chars.next();
                    re.push_str("(?:.*/)?");
                } else {
                    re.push_str(".*");
                }
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            other => re.push_str(&regex::escape(&other.to_string())),
        }
    }
    re.push('$');
    Regex::new(&re)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::Value;

    /// The reference implementation's parity table: every case decides as it expects.
    #[test]
    fn the_reference_parity_table_decides_alike() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/keepup-cowork-policy-parity.json"
        );
        let table: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut checked = 0;
        for policy in table["policies"].as_array().unwrap() {
            let rules: RuleSet = serde_json::from_value(policy["config"].clone()).unwrap();
            assert!(rules.problems().is_empty());
            for case in policy["cases"].as_array().unwrap() {
                let input: PolicyInput = serde_json::from_value(case["input"].clone()).unwrap();
                let decided = serde_json::to_value(rules.decide(&input)).unwrap();
                assert_eq!(
                    decided, case["expected"],
                    "{}: {}",
                    policy["id"], case["name"]
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 12);
    }

    #[test]
    fn globs_match_like_the_reference() {
        let re = glob("**/.env*").unwrap();
        assert!(re.is_match("/workspace/.env"));
        assert!(re.is_match(".env.local"));
        assert!(!re.is_match("/workspace/env"));
        let re = glob("src/*.rs").unwrap();
        assert!(re.is_match("src/a.rs"));
        assert!(!re.is_match("src/a/b.rs"));
    }
}
