//! The completion checklist: what must pass before anyone may claim "done".
//!
//! Each check comes from the project's `[completion]` table ([`crate::config`]): a command
//! (tests — the one `[project] testCommand` key —, build, type-check, lint, schema diff,
//! memory lesson) passes when it exits 0; three are built in:
//! - `newTests`: when the branch (committed or not, against the base branch) changes source
//!   files, it changes at least one test file too (a path with a `test`/`tests`/`spec`
//!   part, or a `_test.`/`.test.`/`.spec.`/`test_` file name); and, when a test command is
//!   set (the `tests` check's, else `[project] testCommand`), those tests cover the change:
//!   the base revision (the merge base) is checked out in a temporary git worktree, the
//!   base's own suite must pass there, then the head's changed test files are copied in and
//!   the test command must FAIL — a test that passes on the old code does not cover the new
//!   behaviour (the `tests` check runs the suite on the head);
//! - `schemaDiff`: no breaking schema or contract change against the base
//!   ([`mod@crate::schema_diff`]);
//! - `versionBump`: the branch is not a protected one, and the version in `Cargo.toml`,
//!   `package.json` or `pyproject.toml` at `HEAD` differs from the base branch's;
//! - `review`: the `[[review.reviewers]]` approve the diff, run in parallel
//!   ([`crate::review`]; each verdict goes to the audit trail); without reviewers, a commit on
//!   the branch since the base carries a `Reviewed-by:` trailer;
//! - `taskDiscipline`: the session had a task in progress (a `TodoWrite` item
//!   `in_progress`) before its first edit;
//! - `memoryLesson`: a lesson (a memory of kind lesson, pattern, decision or config, see
//!   `weft memory store --type lesson`) was written since the session started — without a
//!   session, since the branch left its base branch (the merge base's commit time), else at all.

use std::path::Path;
use std::time::Duration;

use crate::config::{CheckSpec, GateConfig};
use crate::db::GateDb;
use crate::process;
use crate::project::Repo;

/// The result of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// The check's name.
    pub name: String,
    /// Whether a failure refuses "done".
    pub required: bool,
    /// Whether it passed.
    pub passed: bool,
    /// What it ran or saw, and the tail of the output when it failed.
    pub detail: String,
}

/// The results of the whole checklist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checklist {
    /// One per configured check, in order.
    pub results: Vec<CheckResult>,
}

impl Checklist {
    /// Whether "done" may be claimed: no required check failed.
    pub fn passed(&self) -> bool {
        self.results.iter().all(|r| r.passed || !r.required)
    }

    /// The failed required checks, with their details.
    pub fn reason(&self) -> String {
        let failed: Vec<String> = self
            .results
            .iter()
            .filter(|r| !r.passed && r.required)
            .map(|r| format!("- {}: {}", r.name, r.detail))
            .collect();
        format!(
            "completion gates failed; do not claim done until they pass:\n{}",
            failed.join("\n")
        )
    }

    /// One line per check.
    pub fn summary(&self) -> String {
        self.results
            .iter()
            .map(|r| {
                format!(
                    "{} {}{}",
                    if r.passed { "pass" } else { "FAIL" },
                    r.name,
                    if r.required { "" } else { " (optional)" }
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs every configured check in `dir` (the worktree being finished). `db` and `session`
/// serve the task-discipline check.
pub fn run_checklist(
    config: &GateConfig,
    dir: &Path,
    db: Option<&GateDb>,
    session: Option<&str>,
) -> Checklist {
    let limit = Duration::from_secs(config.completion.timeout_seconds);
    let mut results = Vec::new();
    for check in &config.completion.checks {
        let (passed, detail) = match &check.spec {
            CheckSpec::Missing(why) => (false, why.clone()),
            CheckSpec::Command(line) => run_command(line, dir, limit),
            CheckSpec::Builtin => match check.name.as_str() {
                "versionBump" => version_bump(config, dir),
                "newTests" => new_tests(config, dir, limit),
                "schemaDiff" => schema_diff_check(config, dir),
                "review" if !config.reviewers.is_empty() => expert_review(config, dir, db, session),
                "review" => review(config, dir),
                "taskDiscipline" => task_discipline(db, session),
                "memoryLesson" => memory_lesson(config, dir, db, session),
                other => (false, format!("{other} has no built-in check")),
            },
        };
        results.push(CheckResult {
            name: check.name.clone(),
            required: check.required,
            passed,
            detail,
        });
    }
    Checklist { results }
}

pub(crate) fn run_command(line: &str, dir: &Path, limit: Duration) -> (bool, String) {
    match process::run_shell(line, dir, limit) {
        Err(e) => (false, e),
        Ok(done) if done.timed_out => (
            false,
            format!("`{line}` ran past {}s and was stopped", limit.as_secs()),
        ),
        Ok(done) if done.code == Some(0) => (true, format!("`{line}` passed")),
        Ok(done) => {
            let output = format!("{}\n{}", done.stdout, done.stderr);
            (
                false,
                format!(
                    "`{line}` exited {}:\n{}",
                    done.code
                        .map_or_else(|| "by signal".to_owned(), |c| c.to_string()),
                    process::tail(&output, 15)
                ),
            )
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let done = process::run("git", &args, dir, &[], Duration::from_secs(60)).ok()?;
    (done.code == Some(0)).then_some(done.stdout)
}

/// The base branch: configured, else the first protected branch that exists.
pub(crate) fn base_branch(config: &GateConfig, dir: &Path) -> Option<String> {
    let candidates = config
        .completion
        .base_branch
        .iter()
        .chain(config.protected_branches.iter());
    for candidate in candidates {
        if git(dir, &["rev-parse", "--verify", "--quiet", candidate]).is_some() {
            return Some(candidate.clone());
        }
    }
    None
}

fn version_at(dir: &Path, rev: &str) -> Option<(String, String)> {
    for file in ["Cargo.toml", "package.json", "pyproject.toml"] {
        let Some(text) = git(dir, &["show", &format!("{rev}:{file}")]) else {
            continue;
        };
        let version = if file == "package.json" {
            serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("version")?.as_str().map(str::to_owned))
        } else {
            toml::from_str::<toml::Table>(&text).ok().and_then(|t| {
                let pick = |path: &[&str]| {
                    let mut value = t.get(path[0])?;
                    for key in &path[1..] {
                        value = value.get(key)?;
                    }
                    value.as_str().map(str::to_owned)
                };
                pick(&["package", "version"])
                    .or_else(|| pick(&["workspace", "package", "version"]))
                    .or_else(|| pick(&["project", "version"]))
                    .or_else(|| pick(&["tool", "poetry", "version"]))
            })
        };
        if let Some(v) = version {
            return Some((file.to_owned(), v));
        }
    }
    None
}

fn version_bump(config: &GateConfig, dir: &Path) -> (bool, String) {
    let branch = Repo::discover(dir).and_then(|r| r.branch());
    if let Some(b) = branch
        .as_ref()
        .filter(|b| config.protected_branches.contains(b))
    {
        return (
            false,
            format!("version bumps happen on the feature branch, and this is {b}"),
        );
    }
    let Some(base) = base_branch(config, dir) else {
        return (false, "no base branch to compare the version with".into());
    };
    let Some(merge_base) = git(dir, &["merge-base", "HEAD", &base]).map(|s| s.trim().to_owned())
    else {
        return (false, format!("no common ancestor of HEAD and {base}"));
    };
    match (version_at(dir, "HEAD"), version_at(dir, &merge_base)) {
        (None, _) => (
            false,
            "no version found in Cargo.toml, package.json or pyproject.toml at HEAD".into(),
        ),
        (Some((file, now)), Some((_, before))) if now == before => (
            false,
            format!("the version in {file} is still {now}, as on {base}: bump it on this branch"),
        ),
        (Some((file, now)), before) => (
            true,
            format!(
                "{file}: {} → {now}",
                before.map_or_else(|| "none".to_owned(), |(_, v)| v)
            ),
        ),
    }
}

const CODE_EXTENSIONS: &[&str] = &[
    "rs", "ts", "tsx", "js", "jsx", "mjs", "py", "go", "java", "kt", "rb", "c", "cc", "cpp", "h",
    "hpp", "cs", "swift", "scala", "php",
];

fn is_test_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let file = lower.rsplit('/').next().unwrap_or(&lower);
    lower
        .split('/')
        .any(|part| matches!(part, "test" | "tests" | "spec" | "specs" | "__tests__"))
        || file.starts_with("test_")
        || file.contains("_test.")
        || file.contains(".test.")
        || file.contains(".spec.")
}

fn merge_base(config: &GateConfig, dir: &Path) -> Result<(String, String), String> {
    let Some(base) = base_branch(config, dir) else {
        return Err("no base branch to compare the changes with".into());
    };
    git(dir, &["merge-base", "HEAD", &base])
        .map(|s| (base.clone(), s.trim().to_owned()))
        .ok_or_else(|| format!("no common ancestor of HEAD and {base}"))
}

fn schema_diff_check(config: &GateConfig, dir: &Path) -> (bool, String) {
    let (base, merge_base) = match merge_base(config, dir) {
        Ok(found) => found,
        Err(e) => return (false, e),
    };
    match crate::schema_diff::schema_diff(dir, &merge_base, None) {
        Err(e) => (false, e.to_string()),
        Ok(diff) if diff.passed() => (true, diff.summary()),
        Ok(diff) => (
            false,
            format!(
                "breaking schema/contract changes against {base} (weft schema-diff {merge_base}):\n{}",
                diff.summary()
            ),
        ),
    }
}

fn expert_review(
    config: &GateConfig,
    dir: &Path,
    db: Option<&GateDb>,
    session: Option<&str>,
) -> (bool, String) {
    let (_, merge_base) = match merge_base(config, dir) {
        Ok(found) => found,
        Err(e) => return (false, e),
    };
    let review = crate::review::run_review(config, dir, &merge_base);
    if let Some(db) = db {
        let at = crate::db::now_ms();
        let rows: Vec<crate::db::AuditEntry> = review
            .verdicts
            .iter()
            .map(|v| crate::db::AuditEntry {
                at,
                session_id: session.map(str::to_owned),
                harness: "weft".into(),
                event: "review".into(),
                stage: Some("review".into()),
                gate: "review".into(),
                policy_id: Some(v.reviewer.clone()),
                level: Some(
                    if v.required {
                        "REQUIRED"
                    } else {
                        "RECOMMENDED"
                    }
                    .into(),
                ),
                passed: v.approved,
                message: crate::invocation::clip(&v.reasons.join("; "), 2000),
                ..crate::db::AuditEntry::default()
            })
            .collect();
        let _ = db.audit(&rows);
    }
    (review.passed(), review.summary())
}

/// The command that runs the suite: the `tests` check's, else `[project] testCommand`.
fn test_line(config: &GateConfig) -> Option<String> {
    config
        .completion
        .checks
        .iter()
        .find_map(|c| match (&c.spec, c.name.as_str()) {
            (CheckSpec::Command(line), "tests") => Some(line.clone()),
            _ => None,
        })
        .or_else(|| config.test_command.clone())
}

/// Runs `test_line` against the code of `merge_base` with the head's `tests` copied in: a
/// failure there means the tests cover the change.
fn covers(
    dir: &Path,
    merge_base: &str,
    tests: &[String],
    test_line: &str,
    limit: Duration,
) -> (bool, String) {
    let Some(top) = git(dir, &["rev-parse", "--show-toplevel"]).map(|t| t.trim().to_owned()) else {
        return (false, "not a git repository".into());
    };
    let top = Path::new(&top);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let scratch =
        std::env::temp_dir().join(format!("weft-coverage-{}-{nanos}", std::process::id()));
    let scratch_text = scratch.to_string_lossy().into_owned();
    if git(
        top,
        &[
            "worktree",
            "add",
            "--detach",
            "--quiet",
            &scratch_text,
            merge_base,
        ],
    )
    .is_none()
    {
        return (
            false,
            format!("the base revision {merge_base} could not be checked out to run the new tests"),
        );
    }
    let relative = dir
        .canonicalize()
        .ok()
        .zip(top.canonicalize().ok())
        .and_then(|(d, t)| d.strip_prefix(&t).ok().map(Path::to_path_buf))
        .unwrap_or_default();
    let verdict = judge_coverage(
        top, &scratch, &relative, merge_base, tests, test_line, limit,
    );
    if git(top, &["worktree", "remove", "--force", &scratch_text]).is_none() {
        let _ = std::fs::remove_dir_all(&scratch);
        let _ = git(top, &["worktree", "prune"]);
    }
    verdict
}

/// In the scratch checkout of the base: its own suite must pass, and fail once the head's
/// changed tests are copied in.
fn judge_coverage(
    top: &Path,
    scratch: &Path,
    relative: &Path,
    merge_base: &str,
    tests: &[String],
    test_line: &str,
    limit: Duration,
) -> (bool, String) {
    let work = scratch.join(relative);
    let exit = |code: Option<i32>| code.map_or_else(|| "by signal".to_owned(), |c| c.to_string());
    // A base whose suite already fails proves nothing by failing again.
    match process::run_shell(test_line, &work, limit) {
        Err(e) => return (false, e),
        Ok(done) if done.timed_out => {
            return (
                false,
                format!(
                    "`{test_line}` on the base revision ran past {}s",
                    limit.as_secs()
                ),
            );
        }
        Ok(done) if done.code != Some(0) => {
            return (
                false,
                format!(
                    "the base revision's own suite fails (`{test_line}` exited {} on {merge_base:.12}), so whether the changed tests cover the change cannot be told; fix the base branch's tests or make newTests optional:\n{}",
                    exit(done.code),
                    process::tail(&format!("{}\n{}", done.stdout, done.stderr), 10)
                ),
            );
        }
        Ok(_) => {}
    }
    let mut copied = Vec::new();
    for test in tests {
        let (from, to) = (top.join(test), scratch.join(test));
        let result = to
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::copy(&from, &to).map(|_| ()));
        if let Err(e) = result {
            return (false, format!("{test} could not be copied: {e}"));
        }
        copied.push(test.as_str());
    }
    let names = copied
        .iter()
        .take(5)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    match process::run_shell(test_line, &work, limit) {
        Err(e) => (false, e),
        Ok(done) if done.timed_out => (
            false,
            format!(
                "`{test_line}` on the base revision with the changed tests ran past {}s",
                limit.as_secs()
            ),
        ),
        Ok(done) if done.code == Some(0) => (
            false,
            format!(
                "the changed tests ({names}) also pass against the base revision's code ({merge_base:.12}): they do not cover the change; add a test that fails without it"
            ),
        ),
        Ok(done) => (
            true,
            format!(
                "the changed tests ({names}) fail against the base revision's code (exit {}; its own suite passes there) and so cover the change",
                exit(done.code)
            ),
        ),
    }
}

fn new_tests(config: &GateConfig, dir: &Path, limit: Duration) -> (bool, String) {
    let Some(base) = base_branch(config, dir) else {
        return (false, "no base branch to compare the changes with".into());
    };
    let Some(merge_base) = git(dir, &["merge-base", "HEAD", &base]).map(|s| s.trim().to_owned())
    else {
        return (false, format!("no common ancestor of HEAD and {base}"));
    };
    let top = git(dir, &["rev-parse", "--show-toplevel"])
        .map_or_else(|| dir.to_path_buf(), |t| Path::new(t.trim()).to_path_buf());
    let mut changed: Vec<String> = git(dir, &["diff", "--name-only", &merge_base])
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    changed.extend(
        git(
            dir,
            &["ls-files", "--others", "--exclude-standard", "--full-name"],
        )
        .unwrap_or_default()
        .lines()
        .map(str::to_owned),
    );
    let code: Vec<&String> = changed
        .iter()
        .filter(|p| {
            p.rsplit_once('.')
                .is_some_and(|(_, ext)| CODE_EXTENSIONS.contains(&ext))
                && !is_test_path(p)
        })
        .collect();
    let test_files: Vec<String> = changed
        .iter()
        .filter(|p| is_test_path(p) && top.join(p).is_file())
        .cloned()
        .collect();
    let tests = test_files.len();
    match (code.is_empty(), tests) {
        (true, _) => (true, "no source file changed".into()),
        (false, 0) => (
            false,
            format!(
                "source files changed ({}) but no test file did: add tests that cover the change",
                code.iter()
                    .take(5)
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        (false, n) => match test_line(config) {
            Some(line) => covers(dir, &merge_base, &test_files, &line, limit),
            None => (
                true,
                format!(
                    "{n} test file(s) changed with the code (set a test command to check that they cover it)"
                ),
            ),
        },
    }
}

fn review(config: &GateConfig, dir: &Path) -> (bool, String) {
    let Some(base) = base_branch(config, dir) else {
        return (false, "no base branch to find the branch's commits".into());
    };
    let Some(log) = git(dir, &["log", &format!("{base}..HEAD"), "--format=%B"]) else {
        return (false, "cannot read the branch's commits".into());
    };
    if log
        .lines()
        .any(|l| l.trim().to_ascii_lowercase().starts_with("reviewed-by:"))
    {
        (true, "a Reviewed-by: trailer is present".into())
    } else {
        (
            false,
            format!(
                "no commit since {base} carries a Reviewed-by: trailer (have the change reviewed first)"
            ),
        )
    }
}

fn task_discipline(db: Option<&GateDb>, session: Option<&str>) -> (bool, String) {
    let (Some(db), Some(session)) = (db, session) else {
        return (false, "no session to check the task trace of".into());
    };
    match db.task_trace(session) {
        Err(e) => (false, e.to_string()),
        Ok(trace) => match (trace.first_task_at, trace.first_edit_at) {
            (_, None) => (true, "no edits in this session".into()),
            (Some(task), Some(edit)) if task <= edit => {
                (true, "a task was in progress before the first edit".into())
            }
            _ => (
                false,
                "files were edited before any task was in progress (mark a task in_progress first)"
                    .into(),
            ),
        },
    }
}

fn memory_lesson(
    config: &GateConfig,
    dir: &Path,
    db: Option<&GateDb>,
    session: Option<&str>,
) -> (bool, String) {
    let started = match (db, session) {
        (Some(db), Some(session)) => db.session_started(session).ok().flatten(),
        _ => None,
    };
    let (since, when) = match started {
        Some(at) => (at, "since this session started"),
        None => match base_branch(config, dir)
            .and_then(|base| git(dir, &["merge-base", "HEAD", &base]))
            .and_then(|rev| git(dir, &["log", "-1", "--format=%ct", rev.trim()]))
            .and_then(|t| t.trim().parse::<i64>().ok())
        {
            Some(seconds) => (seconds.saturating_mul(1000), "on this branch"),
            None => (0, "yet"),
        },
    };
    let root = crate::project::project_root(dir);
    let path = weft_memory::MemoryDb::path_for(&root);
    let lessons = weft_memory::MemoryDb::open_healing(&path)
        .map(|(db, _)| weft_memory::Memory::new(db))
        .and_then(|m| m.lessons_since(since));
    match lessons {
        Err(e) => (false, format!("the memory cannot be read: {e}")),
        Ok(found) if found.is_empty() => (
            false,
            format!(
                "no lesson was written to memory {when}: record what this change taught \
                 (weft memory store \"<what and why>\" --type lesson --importance 7)"
            ),
        ),
        Ok(found) => (
            true,
            format!(
                "{} lesson(s) written {when}, e.g. #{}",
                found.len(),
                found.last().map_or(0, |e| e.id)
            ),
        ),
    }
}
