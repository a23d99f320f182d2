//! The gate settings of a project, read from `weft.toml` at the project root.
//!
//! Only three tables are read here, leniently (other keys belong to other parts of Weft):
//!
//! ```toml
//! [project]
//! testCommand = "cargo test"      # one key, shared with the runtime profile's tests_pass
//!
//! [gates]
//! worktree = true                 # the worktree gate (default on)
//! dangerousCommands = true        # the dangerous-command guard (default on)
//! protectedBranches = ["main", "master"]
//! postEditBuild = "cargo check"   # post-tool-use build gate: run after every edit (off by default)
//! backupReminder = 10             # post-tool-use: remind to commit at 10+ uncommitted files
//!
//! [completion]                    # the checklist the stop hook runs
//! tests = true                    # runs [project] testCommand (on whenever it is set)
//! newTests = true                 # built in: changed code comes with changed tests
//! build = "cargo build"
//! typeCheck = "cargo check --all-targets"
//! lint = "cargo clippy -- -D warnings"
//! schemaDiff = true               # built in: no breaking schema/contract change (or a command)
//! taskDiscipline = true           # built in: a task was in progress before the first edit
//! review = true                   # built in: the [review] reviewers approve, in parallel
//!                                 # (without reviewers: a Reviewed-by: trailer on the branch)
//! memoryLesson = true             # built in: a lesson was written to memory (or a command)
//! versionBump = true              # built in: the version differs from the base branch's
//! optional = ["lint"]             # checks that only warn
//! timeoutSeconds = 900
//! subagents = false               # also check when a sub-agent stops
//! baseBranch = "main"
//!
//! [[review.reviewers]]            # the parallel expert review (see crate::review)
//! name = "security"
//! command = "scripts/review-security.sh"
//! required = true                 # default; false: its rejection is only reported
//! ```
//!
//! `newTests = true` checks that the tests cover the change when a test command is set:
//! the head's changed test files, run against the base revision's code, must fail there.

use std::path::Path;

use crate::error::GateError;

/// The names of the completion checks, in the order they run.
pub const CHECK_NAMES: &[&str] = &[
    "tests",
    "newTests",
    "build",
    "typeCheck",
    "lint",
    "taskDiscipline",
    "review",
    "schemaDiff",
    "memoryLesson",
    "versionBump",
];

/// Checks that have a built-in meaning when set to `true`.
const BUILTIN_CHECKS: &[&str] = &[
    "newTests",
    "schemaDiff",
    "taskDiscipline",
    "review",
    "versionBump",
    "memoryLesson",
];

/// How one completion check is carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckSpec {
    /// Run this command line (through `sh -c`); exit 0 passes.
    Command(String),
    /// A check Weft does itself.
    Builtin,
    /// Turned on without a way to run it (e.g. `tests = true` with no `testCommand`): fails.
    Missing(String),
}

/// One configured completion check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// One of [`CHECK_NAMES`].
    pub name: String,
    /// How it runs.
    pub spec: CheckSpec,
    /// Whether a failure refuses "done" (false for the names in `optional`).
    pub required: bool,
}

/// The `[completion]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionConfig {
    /// The checks, in [`CHECK_NAMES`] order.
    pub checks: Vec<Check>,
    /// How long one check may run.
    pub timeout_seconds: u64,
    /// Whether a sub-agent's stop runs the checklist too.
    pub subagents: bool,
    /// The branch features start from (default: `main`, else `master`).
    pub base_branch: Option<String>,
}

impl Default for CompletionConfig {
    fn default() -> Self {
        CompletionConfig {
            checks: Vec::new(),
            timeout_seconds: 900,
            subagents: false,
            base_branch: None,
        }
    }
}

/// One expert reviewer of the parallel review (`[[review.reviewers]]`).
///
/// ```
/// let c = weft_gate::GateConfig::parse(
///     "[[review.reviewers]]\nname = \"security\"\ncommand = \"./review.sh\"\n",
/// )
/// .expect("valid");
/// assert_eq!(c.reviewers[0].name, "security");
/// assert!(c.reviewers[0].required);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reviewer {
    /// Its name (in verdicts and the audit trail).
    pub name: String,
    /// The command line (through `sh -c`) that reviews the diff.
    pub command: String,
    /// Whether its rejection fails the review (default true).
    pub required: bool,
}

/// The gate settings of a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateConfig {
    /// `[project] testCommand`.
    pub test_command: Option<String>,
    /// The worktree gate is on.
    pub worktree: bool,
    /// The dangerous-command guard is on.
    pub dangerous_commands: bool,
    /// Branches whose history must not be rewritten.
    pub protected_branches: Vec<String>,
    /// The completion checklist.
    pub completion: CompletionConfig,
    /// `[gates] postEditBuild`: the build command the post-tool-use hook runs after an edit.
    pub post_edit_build: Option<String>,
    /// `[gates] backupReminder`: remind to commit once this many files are uncommitted.
    pub backup_reminder: Option<usize>,
    /// `[[review.reviewers]]`: the parallel expert review.
    pub reviewers: Vec<Reviewer>,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            test_command: None,
            worktree: true,
            dangerous_commands: true,
            protected_branches: vec!["main".into(), "master".into()],
            completion: CompletionConfig::default(),
            post_edit_build: None,
            backup_reminder: None,
            reviewers: Vec::new(),
        }
    }
}

impl GateConfig {
    /// Reads `weft.toml` in `root`; the defaults when there is none.
    ///
    /// # Errors
    /// [`GateError::Config`] when the file exists but cannot be read or parsed, or a key has
    /// the wrong type.
    pub fn load(root: &Path) -> Result<GateConfig, GateError> {
        let path = root.join("weft.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(GateConfig::default());
            }
            Err(e) => return Err(GateError::config(&path, e.to_string())),
        };
        GateConfig::parse(&text).map_err(|message| GateError::config(&path, message))
    }

    /// Parses the text of a `weft.toml`.
    ///
    /// # Errors
    /// The reason, when the text is not TOML or a key has the wrong type.
    pub fn parse(text: &str) -> Result<GateConfig, String> {
        let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut config = GateConfig::default();
        let empty = toml::Table::new();
        let section = |name: &str| -> Result<&toml::Table, String> {
            match table.get(name) {
                None => Ok(&empty),
                Some(toml::Value::Table(t)) => Ok(t),
                Some(_) => Err(format!("[{name}] must be a table")),
            }
        };
        let project = section("project")?;
        config.test_command = string(project, "project", "testCommand")?;
        let gates = section("gates")?;
        if let Some(b) = boolean(gates, "gates", "worktree")? {
            config.worktree = b;
        }
        if let Some(b) = boolean(gates, "gates", "dangerousCommands")? {
            config.dangerous_commands = b;
        }
        if let Some(list) = strings(gates, "gates", "protectedBranches")? {
            config.protected_branches = list;
        }
        config.post_edit_build = string(gates, "gates", "postEditBuild")?;
        config.backup_reminder = match gates.get("backupReminder") {
            None | Some(toml::Value::Boolean(false)) => None,
            Some(toml::Value::Boolean(true)) => Some(10),
            Some(toml::Value::Integer(n)) if *n > 0 => usize::try_from(*n).ok(),
            Some(_) => {
                return Err(
                    "[gates] backupReminder must be true, false or a positive number of files"
                        .into(),
                );
            }
        };
        config.reviewers = reviewers(section("review")?)?;
        let completion = section("completion")?;
        let optional = strings(completion, "completion", "optional")?.unwrap_or_default();
        for key in completion.keys() {
            if !CHECK_NAMES.contains(&key.as_str())
                && !matches!(
                    key.as_str(),
                    "optional" | "timeoutSeconds" | "subagents" | "baseBranch"
                )
            {
                return Err(format!(
                    "[completion] has no key {key:?} (known: {}, optional, timeoutSeconds, subagents, baseBranch)",
                    CHECK_NAMES.join(", ")
                ));
            }
        }
        for name in CHECK_NAMES {
            let spec = match completion.get(*name) {
                None if *name == "tests" => config.test_command.clone().map(CheckSpec::Command),
                None | Some(toml::Value::Boolean(false)) => None,
                Some(toml::Value::String(command)) => Some(CheckSpec::Command(command.clone())),
                Some(toml::Value::Boolean(true)) if *name == "tests" => {
                    Some(match &config.test_command {
                        Some(c) => CheckSpec::Command(c.clone()),
                        None => CheckSpec::Missing(
                            "tests = true but [project] testCommand is not set".into(),
                        ),
                    })
                }
                Some(toml::Value::Boolean(true)) if BUILTIN_CHECKS.contains(name) => {
                    Some(CheckSpec::Builtin)
                }
                Some(toml::Value::Boolean(true)) => Some(CheckSpec::Missing(format!(
                    "{name} = true needs a command: {name} = \"…\""
                ))),
                Some(_) => {
                    return Err(format!(
                        "[completion] {name} must be true, false or a command"
                    ));
                }
            };
            if let Some(spec) = spec {
                config.completion.checks.push(Check {
                    name: (*name).to_owned(),
                    spec,
                    required: !optional.iter().any(|o| o == name),
                });
            }
        }
        if let Some(toml::Value::Integer(n)) = completion.get("timeoutSeconds") {
            config.completion.timeout_seconds = u64::try_from(*n).unwrap_or(900).max(1);
        }
        if let Some(b) = boolean(completion, "completion", "subagents")? {
            config.completion.subagents = b;
        }
        config.completion.base_branch = string(completion, "completion", "baseBranch")?;
        Ok(config)
    }
}

fn reviewers(review: &toml::Table) -> Result<Vec<Reviewer>, String> {
    let Some(list) = review.get("reviewers") else {
        return Ok(Vec::new());
    };
    let Some(list) = list.as_array() else {
        return Err("[review] reviewers must be a list of tables".into());
    };
    let mut out: Vec<Reviewer> = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let Some(table) = item.as_table() else {
            return Err("[review] reviewers must be a list of tables".into());
        };
        let section = format!("review.reviewers[{i}]");
        let name =
            string(table, &section, "name")?.unwrap_or_else(|| format!("reviewer-{}", i + 1));
        let Some(command) = string(table, &section, "command")? else {
            return Err(format!("[{section}] needs a command"));
        };
        if out.iter().any(|r| r.name == name) {
            return Err(format!("[review] two reviewers are named {name:?}"));
        }
        out.push(Reviewer {
            name,
            command,
            required: boolean(table, &section, "required")?.unwrap_or(true),
        });
    }
    Ok(out)
}

fn string(table: &toml::Table, section: &str, key: &str) -> Result<Option<String>, String> {
    match table.get(key) {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("[{section}] {key} must be a string")),
    }
}

fn boolean(table: &toml::Table, section: &str, key: &str) -> Result<Option<bool>, String> {
    match table.get(key) {
        None => Ok(None),
        Some(toml::Value::Boolean(b)) => Ok(Some(*b)),
        Some(_) => Err(format!("[{section}] {key} must be true or false")),
    }
}

fn strings(table: &toml::Table, section: &str, key: &str) -> Result<Option<Vec<String>>, String> {
    match table.get(key) {
        None => Ok(None),
        Some(toml::Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("[{section}] {key} must list strings"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(format!("[{section}] {key} must be a list of strings")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_command_is_one_key() {
        let c = GateConfig::parse("[project]\ntestCommand = \"cargo test\"\n").expect("valid");
        assert_eq!(
            c.completion.checks,
            [Check {
                name: "tests".into(),
                spec: CheckSpec::Command("cargo test".into()),
                required: true
            }]
        );
        let c = GateConfig::parse(
            "name = \"x\"\n[completion]\ntests = true\nbuild = \"make\"\nversionBump = true\noptional = [\"build\"]\n",
        )
        .expect("valid");
        assert_eq!(c.completion.checks.len(), 3);
        assert!(matches!(c.completion.checks[0].spec, CheckSpec::Missing(_)));
        assert!(!c.completion.checks[1].required);
        assert_eq!(c.completion.checks[2].spec, CheckSpec::Builtin);
    }

    #[test]
    fn wrong_types_and_unknown_checks_are_errors() {
        assert!(GateConfig::parse("[gates]\nworktree = \"yes\"\n").is_err());
        assert!(GateConfig::parse("[completion]\ntest = \"x\"\n").is_err());
    }
}
