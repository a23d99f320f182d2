//! The worktree convention: every edit happens in `.worktrees/NNN-<slug>/`, a real
//! `git worktree` on its own branch `feature/NNN-<slug>`, opened as a pull request against
//! the base branch and removed after the merge.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::completion::base_branch;
use crate::config::GateConfig;
use crate::error::GateError;
use crate::gates::is_worktree_name;
use crate::process;
use crate::project::Repo;

/// One worktree under `.worktrees/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    /// `NNN-<slug>`.
    pub name: String,
    /// Its folder.
    pub path: PathBuf,
    /// Its branch (`None` when detached).
    pub branch: Option<String>,
}

fn git(dir: &Path, args: &[&str]) -> Result<String, GateError> {
    let owned: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let done = process::run("git", &owned, dir, &[], Duration::from_secs(300))
        .map_err(GateError::Operation)?;
    if done.code == Some(0) {
        Ok(done.stdout)
    } else {
        Err(GateError::Operation(format!(
            "git {} failed: {}",
            args.join(" "),
            done.stderr.trim()
        )))
    }
}

/// Whether `slug` can name a worktree: lowercase letters, digits, `-`, `_`, `.`.
pub fn valid_slug(slug: &str) -> bool {
    !slug.is_empty()
        && slug.len() <= 60
        && slug
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
}

/// The worktrees under `root/.worktrees/`, by number.
///
/// # Errors
/// When `git worktree list` fails.
pub fn list(root: &Path) -> Result<Vec<Worktree>, GateError> {
    let text = git(root, &["worktree", "list", "--porcelain"])?;
    let base = root.join(".worktrees");
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut path = None;
        let mut branch = None;
        for line in block.lines() {
            if let Some(p) = line.strip_prefix("worktree ") {
                path = Some(PathBuf::from(p));
            } else if let Some(b) = line.strip_prefix("branch refs/heads/") {
                branch = Some(b.to_owned());
            }
        }
        let Some(path) = path else { continue };
        let name = path
            .strip_prefix(&base)
            .ok()
            .and_then(|rest| rest.to_str())
            .filter(|n| is_worktree_name(n))
            .map(str::to_owned);
        if let Some(name) = name {
            out.push(Worktree { name, path, branch });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn next_number(root: &Path) -> u32 {
    let mut max = 0;
    if let Ok(entries) = std::fs::read_dir(root.join(".worktrees")) {
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_worktree_name(&name)
                && let Some(n) = name.split('-').next().and_then(|n| n.parse::<u32>().ok())
            {
                max = max.max(n);
            }
        }
    }
    max + 1
}

/// Keeps `.worktrees/` out of `git status` through `.git/info/exclude` (a local file, so
/// nothing on the base branch is edited).
fn exclude_worktrees(root: &Path) -> Result<(), GateError> {
    let info = root.join(".git").join("info");
    if !root.join(".git").is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(&info).map_err(|e| GateError::io(&info, e))?;
    let exclude = info.join("exclude");
    let text = std::fs::read_to_string(&exclude).unwrap_or_default();
    if text
        .lines()
        .any(|l| l.trim() == "/.worktrees/" || l.trim() == ".worktrees/")
    {
        return Ok(());
    }
    let mut text = text;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("/.worktrees/\n");
    std::fs::write(&exclude, text).map_err(|e| GateError::io(&exclude, e))
}

/// Creates `.worktrees/NNN-<slug>/` on a new branch `feature/NNN-<slug>` from `base` (default:
/// the base branch, else `HEAD`).
///
/// # Errors
/// A bad slug, or `git worktree add` failing.
pub fn create(
    root: &Path,
    slug: &str,
    base: Option<&str>,
    config: &GateConfig,
) -> Result<Worktree, GateError> {
    if !valid_slug(slug) {
        return Err(GateError::Operation(format!(
            "{slug:?} is not a valid slug: use lowercase letters, digits, '-', '_' or '.'"
        )));
    }
    let name = format!("{:03}-{slug}", next_number(root));
    let path = root.join(".worktrees").join(&name);
    let branch = format!("feature/{name}");
    let base = base
        .map(str::to_owned)
        .or_else(|| base_branch(config, root))
        .unwrap_or_else(|| "HEAD".to_owned());
    exclude_worktrees(root)?;
    let path_text = path.to_string_lossy().into_owned();
    git(root, &["worktree", "add", "-b", &branch, &path_text, &base])?;
    Ok(Worktree {
        name,
        path,
        branch: Some(branch),
    })
}

/// The worktree `dir` is in, if any (`NNN-<slug>` under the project's `.worktrees/`).
pub fn current(dir: &Path) -> Option<Worktree> {
    let repo = Repo::discover(dir)?;
    let name = repo
        .toplevel
        .strip_prefix(repo.root.join(".worktrees"))
        .ok()?
        .to_str()?
        .to_owned();
    is_worktree_name(&name).then(|| Worktree {
        name,
        branch: repo.branch(),
        path: repo.toplevel.clone(),
    })
}

/// What `weft worktree pr` runs (or prints when the forge CLI is absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrPlan {
    /// The feature branch.
    pub branch: String,
    /// The base branch the PR targets.
    pub base: String,
    /// The commands, in order, as argv.
    pub commands: Vec<Vec<String>>,
}

impl PrPlan {
    /// The commands as shell lines.
    pub fn lines(&self) -> Vec<String> {
        self.commands
            .iter()
            .map(|c| shlex::try_join(c.iter().map(String::as_str)).unwrap_or_else(|_| c.join(" ")))
            .collect()
    }
}

/// The pull request of the worktree `dir` is in: push the branch, open the PR against the
/// base branch with `gh`.
///
/// # Errors
/// When `dir` is not in a worktree on a feature branch, or there is no base branch.
pub fn pr_plan(dir: &Path, config: &GateConfig) -> Result<PrPlan, GateError> {
    let worktree = current(dir).ok_or_else(|| {
        GateError::Operation(
            "not inside a worktree under .worktrees/NNN-<slug>/: PRs are opened from a worktree's branch"
                .into(),
        )
    })?;
    let branch = worktree.branch.ok_or_else(|| {
        GateError::Operation("the worktree's HEAD is detached: check out its branch".into())
    })?;
    if config.protected_branches.contains(&branch) {
        return Err(GateError::Operation(format!(
            "the worktree is on the protected branch {branch}; PRs come from a feature branch"
        )));
    }
    let base = base_branch(config, dir)
        .ok_or_else(|| GateError::Operation("no base branch (main or master) found".into()))?;
    let argv = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    Ok(PrPlan {
        commands: vec![
            argv(&["git", "push", "-u", "origin", &branch]),
            argv(&[
                "gh", "pr", "create", "--base", &base, "--head", &branch, "--fill",
            ]),
        ],
        branch,
        base,
    })
}

/// Whether `program` is on `PATH`.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Runs a plan's commands in `dir`; the combined output.
///
/// # Errors
/// The first command that fails.
pub fn run_plan(plan: &PrPlan, dir: &Path) -> Result<String, GateError> {
    let mut out = String::new();
    for command in &plan.commands {
        let done = process::run(
            &command[0],
            &command[1..],
            dir,
            &[],
            Duration::from_secs(300),
        )
        .map_err(GateError::Operation)?;
        out.push_str(&done.stdout);
        if done.code != Some(0) {
            return Err(GateError::Operation(format!(
                "{} failed: {}",
                command.join(" "),
                done.stderr.trim()
            )));
        }
    }
    Ok(out)
}

/// Removes a finished worktree (by `NNN-<slug>`, its slug, or the one `dir` is in) and
/// deletes its branch when it is merged. Refuses a worktree with uncommitted changes unless
/// `force`.
///
/// # Errors
/// No such worktree, uncommitted changes, or git failing.
pub fn finish(
    root: &Path,
    dir: &Path,
    which: Option<&str>,
    force: bool,
) -> Result<(Worktree, String), GateError> {
    let worktrees = list(root)?;
    let target = match which {
        Some(w) => worktrees
            .into_iter()
            .find(|t| t.name == w || t.name.split_once('-').is_some_and(|(_, s)| s == w)),
        None => current(dir).and_then(|c| worktrees.into_iter().find(|t| t.name == c.name)),
    }
    .ok_or_else(|| {
        GateError::Operation(match which {
            Some(w) => format!("no worktree {w:?} under .worktrees/"),
            None => "not inside a worktree: name one (`weft worktree finish NNN-<slug>`)".into(),
        })
    })?;
    let path = target.path.to_string_lossy().into_owned();
    let dirty = git(&target.path, &["status", "--porcelain"])?;
    if !dirty.trim().is_empty() && !force {
        return Err(GateError::Operation(format!(
            "{} has uncommitted changes; commit them or pass --force",
            target.name
        )));
    }
    let mut remove = vec!["worktree", "remove"];
    if force {
        remove.push("--force");
    }
    remove.push(&path);
    git(root, &remove)?;
    let note = match &target.branch {
        Some(branch) => match git(root, &["branch", "-d", branch]) {
            Ok(_) => format!("removed {} and its merged branch {branch}", target.name),
            Err(_) => format!(
                "removed {}; kept the branch {branch}, which is not merged (git branch -D {branch} drops it)",
                target.name
            ),
        },
        None => format!("removed {}", target.name),
    };
    Ok((target, note))
}
