//! The dangerous-command guard: shell commands that are refused before they run.
//!
//! The list (each entry is tested in `tests/guard.rs`):
//!
//! | rule | refused | allowed |
//! |---|---|---|
//! | infrastructure | `terraform`/`tofu`/`terragrunt` `apply` or `destroy` | `terraform plan` |
//! | force push | `git push --force`, `-f` (also in `-fu`), `--force-with-lease[=…]`, `--force-if-includes`, `+refspec`, to a protected branch (named, `HEAD` on one, or the current branch when no refspec is given — refused too when the branch cannot be told); `--mirror`; `--all`/`--branches` with force | a force push of a feature branch |
//! | deleting a protected branch | `git push --delete main`, `git push origin :main`, `git branch -D main` | deleting a feature branch |
//! | history rewrites on a protected branch | `git reset --hard`, `git rebase` (except `--abort`/`--quit`), `git commit --amend`, `git filter-branch`/`filter-repo` (also `--all`), `git branch -f/-M main`, `git checkout -B main`, `git switch -C main`, `git update-ref refs/heads/main` | the same on a feature branch |
//! | recursive delete of a root | `rm -r`/`-rf`/`--recursive` of `/`, `~`/`$HOME`, the project root or the worktree's top (also `…/*`), `--no-preserve-root` | `rm -rf target` |
//! | disks | `mkfs*`, `dd of=/dev/…` | `dd of=file` |
//! | version bumps on a protected branch | `npm`/`pnpm`/`yarn version`, `cargo set-version`, `cargo release`, `cargo bump` | the same on a feature branch |
//!
//! Protected branches are `main` and `master` unless `[gates] protectedBranches` says otherwise.
//! Commands are read through [`crate::shell`]: quoting, `sh -c`, `env`, `sudo`, pipes, `;` and
//! `&&` chains, `$(…)` do not hide them. `cd DIR` earlier in the line moves where the branch
//! is read.

use std::path::{Path, PathBuf};

use crate::project::{Repo, home, normalize, project_root};
use crate::shell::{program, simple_commands};

/// What the guard needs to know besides the command.
#[derive(Debug, Clone)]
pub(crate) struct GuardContext<'a> {
    /// Where the command runs.
    pub(crate) cwd: &'a Path,
    /// Branches whose history must not be rewritten.
    pub(crate) protected: &'a [String],
}

/// Why `command` is refused, or `None` when the guard lets it run.
pub(crate) fn check(command: &str, ctx: &GuardContext<'_>) -> Option<String> {
    let mut dir = ctx.cwd.to_path_buf();
    for words in simple_commands(command) {
        let name = program(&words[0]);
        if name == "cd" {
            if let Some(target) = words.get(1) {
                dir = normalize(&dir, Path::new(&expand_home(target)));
            }
            continue;
        }
        let reason = match name {
            "terraform" | "tofu" | "terragrunt" => terraform(&words),
            "git" => git(&words, &dir, ctx),
            "rm" => rm(&words, &dir),
            "dd" => words
                .iter()
                .any(|w| w.starts_with("of=/dev/"))
                .then(|| "dd onto a device overwrites a disk".to_owned()),
            n if n.starts_with("mkfs") => Some(format!("{n} formats a filesystem")),
            "npm" | "pnpm" | "yarn" | "cargo" => version_bump(&words, &dir, ctx),
            _ => None,
        };
        if let Some(reason) = reason {
            return Some(format!("{reason} (command: {})", words.join(" ")));
        }
    }
    None
}

/// The completion-like operation of a command line (`merge`, `deploy`, `release`), if any.
pub(crate) fn completion_operation(command: &str) -> Option<&'static str> {
    for words in simple_commands(command) {
        let name = program(&words[0]);
        let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        let positional: Vec<&str> = args
            .iter()
            .copied()
            .filter(|a| !a.starts_with('-'))
            .collect();
        let op = match (
            name,
            positional.first().copied(),
            positional.get(1).copied(),
        ) {
            ("git", Some("merge"), _) => Some("merge"),
            ("gh", Some("pr"), Some("merge")) | ("glab", Some("mr"), Some("merge")) => {
                Some("merge")
            }
            ("gh", Some("release"), Some("create")) => Some("release"),
            ("cargo" | "npm" | "pnpm" | "yarn", Some("publish"), _) => Some("release"),
            ("git", Some("tag"), _) => Some("release"),
            ("kubectl", Some("apply"), _) | ("helm", Some("upgrade" | "install"), _) => {
                Some("deploy")
            }
            ("terraform" | "tofu", Some("apply"), _) => Some("deploy"),
            _ if args.contains(&"deploy") || name == "deploy" => Some("deploy"),
            _ => None,
        };
        if op.is_some() {
            return op;
        }
    }
    None
}

fn terraform(words: &[String]) -> Option<String> {
    let sub = words[1..].iter().find(|w| !w.starts_with('-'))?;
    matches!(sub.as_str(), "apply" | "destroy").then(|| {
        format!(
            "{} {sub} changes live infrastructure; run it through the pipeline",
            program(&words[0])
        )
    })
}

fn is_protected(branch: &str, ctx: &GuardContext<'_>) -> bool {
    let branch = branch.strip_prefix("refs/heads/").unwrap_or(branch);
    ctx.protected.iter().any(|p| p == branch)
}

fn current_branch(dir: &Path) -> Option<String> {
    Repo::discover(dir)?.branch()
}

/// Splits `git [global options] SUB args…`; `-C DIR` moves `dir`.
fn git_parts<'w>(words: &'w [String], dir: &Path) -> Option<(&'w str, &'w [String], PathBuf)> {
    let mut dir = dir.to_path_buf();
    let mut i = 1;
    while let Some(w) = words.get(i) {
        match w.as_str() {
            "-C" => {
                if let Some(d) = words.get(i + 1) {
                    dir = normalize(&dir, Path::new(&expand_home(d)));
                }
                i += 2;
            }
            "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--exec-path" => i += 2,
            w if w.starts_with('-') => i += 1,
            _ => break,
        }
    }
    let sub = words.get(i)?;
    Some((sub.as_str(), &words[i + 1..], dir))
}

fn git(words: &[String], dir: &Path, ctx: &GuardContext<'_>) -> Option<String> {
    let (sub, args, dir) = git_parts(words, dir)?;
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let positional: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let on_protected = || {
        current_branch(&dir)
            .filter(|b| is_protected(b, ctx))
            .map(|b| format!("the current branch {b} is protected"))
    };
    match sub {
        "push" => push(args, &dir, ctx),
        "reset" if has("--hard") => {
            on_protected().map(|why| format!("git reset --hard rewrites history: {why}"))
        }
        "rebase" if !has("--abort") && !has("--quit") => {
            if let Some(branch) = positional.get(1).filter(|b| is_protected(b, ctx)) {
                return Some(format!("git rebase rewrites the protected branch {branch}"));
            }
            on_protected().map(|why| format!("git rebase rewrites history: {why}"))
        }
        "commit" if has("--amend") => {
            on_protected().map(|why| format!("git commit --amend rewrites history: {why}"))
        }
        "filter-branch" | "filter-repo" => {
            if has("--all") || positional.iter().any(|b| is_protected(b, ctx)) {
                return Some(format!(
                    "git {sub} rewrites the history of protected branches"
                ));
            }
            on_protected().map(|why| format!("git {sub} rewrites history: {why}"))
        }
        "branch" => {
            let forceful = args.iter().any(|a| {
                matches!(
                    a.as_str(),
                    "-f" | "--force" | "-D" | "-M" | "-C" | "--delete" | "-d" | "-m"
                )
            });
            positional
                .iter()
                .find(|b| forceful && is_protected(b, ctx))
                .map(|b| {
                    format!(
                        "git branch {} rewrites or deletes the protected branch {b}",
                        args.join(" ")
                    )
                })
        }
        "checkout" | "switch" => {
            let reset = args
                .iter()
                .position(|a| a == "-B" || a == "-C" || a == "--force-create");
            reset
                .and_then(|i| args.get(i + 1))
                .filter(|b| is_protected(b, ctx))
                .map(|b| format!("git {sub} resets the protected branch {b}"))
        }
        "update-ref" => positional
            .iter()
            .find(|r| is_protected(r, ctx))
            .map(|r| format!("git update-ref moves the protected branch {r}")),
        _ => None,
    }
}

fn push(args: &[String], dir: &Path, ctx: &GuardContext<'_>) -> Option<String> {
    let mut force = false;
    let mut delete = false;
    let mut all = false;
    let mut positional = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "--mirror" => return Some("git push --mirror overwrites every remote branch".into()),
            "--force" | "--force-if-includes" => force = true,
            s if s.starts_with("--force-with-lease") => force = true,
            "--delete" => delete = true,
            "--all" | "--branches" => all = true,
            "-o" | "--push-option" | "--repo" | "--receive-pack" | "--exec" => i += 1,
            "--" => {
                positional.extend(args[i + 1..].iter().cloned());
                break;
            }
            s if s.starts_with("--") => {}
            s if s.starts_with('-') => {
                // A cluster of short flags: `-f`, `-fu`, `-uf`, `-d`.
                force |= s.contains('f');
                delete |= s.contains('d');
            }
            _ => positional.push(a.clone()),
        }
        i += 1;
    }
    let refspecs: Vec<&String> = positional.iter().skip(1).collect();
    if refspecs.iter().any(|r| r.starts_with('+')) {
        force = true;
    }
    if !force && !delete {
        // A delete through an empty source: `git push origin :main`.
        return refspecs
            .iter()
            .filter_map(|r| r.strip_prefix(':'))
            .find(|dst| is_protected(dst, ctx))
            .map(|dst| format!("git push deletes the protected branch {dst}"));
    }
    let verb = if delete { "deletes" } else { "force-pushes to" };
    if all {
        return Some(format!(
            "git push --all {verb} every branch, protected ones included"
        ));
    }
    if refspecs.is_empty() {
        return match current_branch(dir) {
            Some(b) if is_protected(&b, ctx) => {
                Some(format!("git push {verb} the protected branch {b}"))
            }
            Some(_) => None,
            None => Some(format!(
                "git push {verb} the current branch, which cannot be told (detached or unreadable HEAD)"
            )),
        };
    }
    for spec in refspecs {
        let spec = spec.trim_start_matches('+');
        let dst = spec.rsplit_once(':').map_or(spec, |(_, d)| d);
        let dst = if dst == "HEAD" || dst == "@" {
            match current_branch(dir) {
                Some(b) => b,
                None => {
                    return Some(format!("git push {verb} HEAD, whose branch cannot be told"));
                }
            }
        } else {
            dst.to_owned()
        };
        if is_protected(&dst, ctx) {
            return Some(format!("git push {verb} the protected branch {dst}"));
        }
    }
    None
}

fn expand_home(word: &str) -> String {
    let Some(home) = home() else {
        return word.to_owned();
    };
    let home = home.to_string_lossy().into_owned();
    for prefix in ["~", "$HOME", "${HOME}"] {
        if word == prefix {
            return home;
        }
        if let Some(rest) = word.strip_prefix(prefix).and_then(|r| r.strip_prefix('/')) {
            return format!("{home}/{rest}");
        }
    }
    word.to_owned()
}

fn rm(words: &[String], dir: &Path) -> Option<String> {
    let mut recursive = false;
    let mut targets = Vec::new();
    let mut options_done = false;
    for w in &words[1..] {
        if !options_done && w == "--" {
            options_done = true;
        } else if !options_done && w == "--no-preserve-root" {
            return Some("rm --no-preserve-root can delete the whole filesystem".into());
        } else if !options_done && w == "--recursive" {
            recursive = true;
        } else if !options_done && w.starts_with('-') && !w.starts_with("--") {
            recursive |= w.contains('r') || w.contains('R');
        } else if !options_done && w.starts_with("--") {
        } else {
            targets.push(w);
        }
    }
    if !recursive {
        return None;
    }
    let repo = Repo::discover(dir);
    let mut roots: Vec<(PathBuf, &str)> = vec![(PathBuf::from("/"), "the filesystem root")];
    if let Some(h) = home() {
        roots.push((normalize(Path::new("/"), &h), "the home directory"));
    }
    roots.push((project_root(dir), "the project root"));
    if let Some(repo) = repo {
        roots.push((repo.toplevel, "the worktree's top"));
    }
    for target in targets {
        let expanded = expand_home(target);
        let mut path = expanded.as_str();
        // `/*`, `~/*`, `*`: everything under that directory.
        for glob in ["/*", "/.*", "*"] {
            if let Some(parent) = path.strip_suffix(glob) {
                path = if parent.is_empty() && glob != "*" {
                    "/"
                } else {
                    parent
                };
                break;
            }
        }
        let path = if path.is_empty() { "." } else { path };
        let resolved = normalize(dir, Path::new(path));
        if let Some((_, what)) = roots.iter().find(|(r, _)| *r == resolved) {
            return Some(format!("rm -r of {target} deletes {what}"));
        }
    }
    None
}

fn version_bump(words: &[String], dir: &Path, ctx: &GuardContext<'_>) -> Option<String> {
    let positional: Vec<&str> = words[1..]
        .iter()
        .filter(|w| !w.starts_with('-'))
        .map(String::as_str)
        .collect();
    let bump = matches!(
        (program(&words[0]), positional.first().copied()),
        ("npm" | "pnpm" | "yarn", Some("version"))
            | ("cargo", Some("set-version" | "release" | "bump"))
    );
    if !bump {
        return None;
    }
    current_branch(dir)
        .filter(|b| is_protected(b, ctx))
        .map(|b| {
            format!("version bumps happen on the feature branch, not on the protected branch {b}")
        })
}
