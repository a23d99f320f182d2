//! Where the project is: its root (the main worktree, shared by every `.worktrees/NNN-<slug>/`),
//! the git directory and the current branch — read from the files under `.git`, without
//! starting `git` (the pre-tool-use hook runs before every tool call and must stay fast).

use std::path::{Component, Path, PathBuf};

/// The git repository around a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// The top of the worktree that holds the directory (the main one or a linked one).
    pub toplevel: PathBuf,
    /// The top of the main worktree: the project root, where `.worktrees/` and `.weft/` live.
    pub root: PathBuf,
    /// The worktree's own git directory (holds `HEAD`).
    pub git_dir: PathBuf,
}

impl Repo {
    /// Finds the repository holding `dir` (walking up), if any.
    pub fn discover(dir: &Path) -> Option<Repo> {
        let mut current = Some(dir);
        while let Some(d) = current {
            let dot_git = d.join(".git");
            if dot_git.is_dir() {
                return Some(Repo {
                    toplevel: d.to_path_buf(),
                    root: d.to_path_buf(),
                    git_dir: dot_git,
                });
            }
            if dot_git.is_file() {
                let text = std::fs::read_to_string(&dot_git).ok()?;
                let git_dir = text.trim().strip_prefix("gitdir:")?.trim();
                let git_dir = normalize(d, Path::new(git_dir));
                let common = match std::fs::read_to_string(git_dir.join("commondir")) {
                    Ok(c) => normalize(&git_dir, Path::new(c.trim())),
                    Err(_) => git_dir.clone(),
                };
                let root = common
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| d.to_path_buf());
                return Some(Repo {
                    toplevel: d.to_path_buf(),
                    root,
                    git_dir,
                });
            }
            current = d.parent();
        }
        None
    }

    /// The checked-out branch (`None` when HEAD is detached or unreadable).
    pub fn branch(&self) -> Option<String> {
        let head = std::fs::read_to_string(self.git_dir.join("HEAD")).ok()?;
        head.trim()
            .strip_prefix("ref: refs/heads/")
            .map(str::to_owned)
    }
}

/// The project root for `dir`: the main worktree's top when `dir` is in a git repository;
/// otherwise the part before a `.worktrees` component; otherwise `dir` itself.
pub fn project_root(dir: &Path) -> PathBuf {
    if let Some(repo) = Repo::discover(dir) {
        return repo.root;
    }
    let mut root = PathBuf::new();
    for component in dir.components() {
        if component.as_os_str() == ".worktrees" {
            return root;
        }
        root.push(component);
    }
    dir.to_path_buf()
}

/// `path` made absolute against `base` and cleaned lexically (`.` dropped, `..` applied).
/// Symbolic links are not resolved: the gates are a guardrail for cooperating agents.
pub fn normalize(base: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(Component::RootDir);
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// The home directory, from `HOME`.
pub(crate) fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_applies_dots() {
        assert_eq!(
            normalize(
                Path::new("/r"),
                Path::new(".worktrees/001-a/../../src/x.rs")
            ),
            PathBuf::from("/r/src/x.rs")
        );
        assert_eq!(
            normalize(Path::new("/"), Path::new("../..")),
            PathBuf::from("/")
        );
        assert_eq!(
            normalize(Path::new("/r"), Path::new("/a/./b")),
            PathBuf::from("/a/b")
        );
    }

    #[test]
    fn root_without_git_stops_at_worktrees() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let inner = dir.path().join(".worktrees/001-x/src");
        assert_eq!(project_root(&inner), dir.path().to_path_buf());
    }
}
