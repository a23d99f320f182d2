//! The sandbox: a canonical root, and the resolution of model-given paths inside it.
//!
//! Resolution is lexical first (no absolute paths; `..` may not climb above the root), then
//! physical: the longest existing prefix of the path is canonicalized (following symlinks) and
//! must still lie under the root. A dangling symlink is refused. Races with a process that
//! swaps a folder for a symlink between the check and the use are out of scope.

use std::path::{Component, Path, PathBuf};

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The workspace root is unusable.
    #[error("the workspace root {path} cannot be used: {source}")]
    Root {
        /// The root.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// An absolute path was given.
    #[error("{0:?} is an absolute path; give a path relative to the workspace")]
    Absolute(String),
    /// `..` leaves the root.
    #[error("{0:?} leaves the workspace")]
    Escape(String),
    /// A symlink points outside the root (or nowhere).
    #[error("{0:?} goes through a link that leads outside the workspace")]
    Symlink(String),
    /// The path holds a NUL byte or is otherwise unusable.
    #[error("{0:?} is not a usable path")]
    Invalid(String),
}

/// A folder the tools may touch, and nothing outside it.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// A workspace rooted at `root` (which must exist).
    ///
    /// # Errors
    /// When the root cannot be canonicalized.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, SandboxError> {
        let root = root.as_ref();
        let canonical = root.canonicalize().map_err(|source| SandboxError::Root {
            path: root.display().to_string(),
            source,
        })?;
        Ok(Workspace { root: canonical })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The absolute path for `relative`, if it stays inside the workspace.
    ///
    /// # Errors
    /// Absolute paths, `..` escapes, links leading outside, NUL bytes.
    pub fn resolve(&self, relative: &str) -> Result<PathBuf, SandboxError> {
        if relative.contains('\0') {
            return Err(SandboxError::Invalid(relative.to_owned()));
        }
        let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
        for component in Path::new(relative).components() {
            match component {
                Component::Normal(part) => parts.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Err(SandboxError::Escape(relative.to_owned()));
                    }
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(SandboxError::Absolute(relative.to_owned()));
                }
            }
        }
        // Walk down from the root: every existing prefix must canonicalize inside the root.
        let mut current = self.root.clone();
        let mut rest = parts.into_iter();
        for part in rest.by_ref() {
            let next = current.join(part);
            match std::fs::symlink_metadata(&next) {
                Ok(_) => {
                    let canonical = next
                        .canonicalize()
                        .map_err(|_| SandboxError::Symlink(relative.to_owned()))?;
                    if !canonical.starts_with(&self.root) {
                        return Err(SandboxError::Symlink(relative.to_owned()));
                    }
                    current = canonical;
                }
                Err(_) => {
                    // The rest does not exist yet: it is created inside `current`.
                    current = next;
                    break;
                }
            }
        }
        for part in rest {
            current.push(part);
        }
        Ok(current)
    }

    /// `path` relative to the root, for messages (falls back to the full path).
    pub fn display(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .map(|p| {
                if p.as_os_str().is_empty() {
                    ".".to_owned()
                } else {
                    p.display().to_string()
                }
            })
            .unwrap_or_else(|_| path.display().to_string())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lexical_escapes_and_absolute_paths_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        assert!(matches!(
            ws.resolve("/etc/passwd"),
            Err(SandboxError::Absolute(_))
        ));
        assert!(matches!(ws.resolve("../x"), Err(SandboxError::Escape(_))));
        assert!(matches!(
            ws.resolve("a/../../x"),
            Err(SandboxError::Escape(_))
        ));
        assert!(matches!(ws.resolve("a\0b"), Err(SandboxError::Invalid(_))));
        assert_eq!(ws.resolve("a/./b/../c").unwrap(), ws.root().join("a/c"));
        assert_eq!(ws.resolve(".").unwrap(), ws.root());
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_out_of_the_workspace_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("s")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/target", dir.path().join("dangling")).unwrap();
        std::fs::create_dir(dir.path().join("in")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("in"), dir.path().join("inside_link")).unwrap();
        assert!(matches!(
            ws.resolve("out/secret"),
            Err(SandboxError::Symlink(_))
        ));
        assert!(matches!(
            ws.resolve("out/new_file"),
            Err(SandboxError::Symlink(_))
        ));
        assert!(matches!(ws.resolve("s"), Err(SandboxError::Symlink(_))));
        assert!(matches!(
            ws.resolve("dangling"),
            Err(SandboxError::Symlink(_))
        ));
        assert_eq!(ws.resolve("inside_link/x").unwrap(), ws.root().join("in/x"));
    }
}
