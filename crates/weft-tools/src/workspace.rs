//! The workspace: a canonical root, the resolution of model-given paths inside it, the paths
//! tools may not touch, and how commands are sandboxed.
//!
//! Resolution is lexical first (no absolute paths; `..` may not climb above the root), then
//! physical: the longest existing prefix of the path is canonicalized (following symlinks) and
//! must still lie under the root. A dangling symlink is refused. The resolved path must not lie
//! in a protected path ([`Confinement`]): hidden paths (the run store) can be neither read nor
//! written, read-only ones (the project's definition files) cannot be written. Races with a
//! process that swaps a folder for a symlink between the check and the use are out of scope for
//! the file tools; commands run in the OS sandbox, where the same paths are hidden or read-only.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

pub use weft_sandbox::{Limits, Mode, Protection};

/// How `run_command` (and later other processes started for an agent) is sandboxed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandSandbox {
    /// `workspace` (default), `strict` or `none`.
    pub mode: Mode,
    /// Whether commands may use the network.
    pub network: bool,
    /// Resource limits of one command.
    pub limits: Limits,
    /// The sandbox helper program (default: the running program, which must call
    /// `weft_sandbox::run_helper_if_requested` first thing in `main`).
    pub helper: Option<PathBuf>,
}

/// What the tools may not touch, and how commands are sandboxed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    /// Paths (absolute, or relative to the workspace root) tools may not read
    /// ([`Protection::Hidden`]) or not write ([`Protection::ReadOnly`]).
    pub protected: Vec<(PathBuf, Protection)>,
    /// The command sandbox.
    pub sandbox: CommandSandbox,
}

/// Whether a path is wanted for reading or for writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

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
    /// The path is Weft's own data (the run store), which tools can never read or write.
    #[error("{0:?} is Weft's run store, which tools cannot read or write")]
    Hidden(String),
    /// Mode `strict`: tools have no filesystem at all (commands get a scratch folder).
    #[error(
        "{0:?}: the sandbox is \"strict\", so tools have no filesystem access (commands run in a scratch folder)"
    )]
    Strict(String),
    /// The path is read-only to tools (the project's definition files).
    #[error(
        "{0:?} is one of the project's definition files, which are read-only to tools (the project can allow edits in weft.toml: tools_may_edit_definitions = true)"
    )]
    ReadOnly(String),
}

/// A folder the tools may touch, and nothing outside it.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    confinement: Arc<Confinement>,
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
        Ok(Workspace {
            root: canonical,
            confinement: Arc::new(Confinement::default()),
        })
    }

    /// The same workspace with `confinement`: protected paths (made absolute against the root,
    /// links resolved) and the command sandbox.
    #[must_use]
    pub fn with_confinement(mut self, mut confinement: Confinement) -> Self {
        for (path, _) in &mut confinement.protected {
            let absolute = weft_sandbox::absolute(&self.root, path);
            *path = absolute.canonicalize().unwrap_or(absolute);
        }
        self.confinement = Arc::new(confinement);
        self
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The confinement (protected paths, absolute; the command sandbox).
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    /// Whether `path` (absolute) lies in a hidden protected path.
    pub fn is_hidden(&self, path: &Path) -> bool {
        self.protection_of(path) == Some(Protection::Hidden)
    }

    fn protection_of(&self, path: &Path) -> Option<Protection> {
        let mut found = None;
        for (protected, protection) in &self.confinement.protected {
            if path.starts_with(protected) {
                if *protection == Protection::Hidden {
                    return Some(Protection::Hidden);
                }
                found = Some(*protection);
            }
        }
        found
    }

    /// The absolute path for `relative`, if it stays inside the workspace and may be read.
    ///
    /// # Errors
    /// Absolute paths, `..` escapes, links leading outside, NUL bytes, hidden paths.
    pub fn resolve(&self, relative: &str) -> Result<PathBuf, SandboxError> {
        self.resolve_for(relative, Access::Read)
    }

    /// The absolute path for `relative`, if it stays inside the workspace and may be written.
    ///
    /// # Errors
    /// As [`Workspace::resolve`], and read-only paths.
    pub fn resolve_for_write(&self, relative: &str) -> Result<PathBuf, SandboxError> {
        self.resolve_for(relative, Access::Write)
    }

    pub(crate) fn resolve_for(
        &self,
        relative: &str,
        access: Access,
    ) -> Result<PathBuf, SandboxError> {
        if self.confinement.sandbox.mode == Mode::Strict {
            return Err(SandboxError::Strict(relative.to_owned()));
        }
        let path = self.resolve_inside(relative)?;
        match self.protection_of(&path) {
            Some(Protection::Hidden) => Err(SandboxError::Hidden(relative.to_owned())),
            Some(Protection::ReadOnly) if access == Access::Write => {
                Err(SandboxError::ReadOnly(relative.to_owned()))
            }
            _ => Ok(path),
        }
    }

    fn resolve_inside(&self, relative: &str) -> Result<PathBuf, SandboxError> {
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
