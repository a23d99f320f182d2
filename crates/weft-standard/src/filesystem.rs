//! A thread's filesystem (agents §7.1: a subagent runs in its own thread — messages,
//! filesystem, queue, lifecycle).
//!
//! A Standard Agents subagent's child thread works in a folder of its own,
//! [`THREADS_FOLDER`]`/REFERENCE/` of its parent's workspace ([`folder`]): its built-in file
//! tools, its commands' sandbox and its MCP servers are rooted there, so it sees none of its
//! parent's files (nor its siblings'), and the parent's tools cannot see the children's
//! folders (they are hidden from it like the run store). Files cross the boundary only as
//! copied attachments ([`crate::attachments`]). A grandchild's folder is inside its parent's
//! folder, the same way.
//!
//! A resumable instance keeps its folder across messages and runs (its reference is its
//! thread id). The runtime spec's delegated roles are configured to work in their caller's
//! workspace instead: a delegated coder edits the caller's files.
//!
//! The child's confinement is its parent's, made absolute against the parent's workspace,
//! minus the protections of the folders that contain the child's folder (the parent's
//! hidden `.weft/`): outside its own folder the child reaches nothing anyway.

use std::path::{Path, PathBuf};

use weft_tools::{Confinement, Protection};

/// The folder (relative to a thread's workspace) its children's folders are in.
pub const THREADS_FOLDER: &str = ".weft/threads";

/// Whose files a child run works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ChildFiles {
    /// A folder of its own (a Standard Agents subagent).
    #[default]
    Own,
    /// Its parent's workspace (a delegated role, runtime spec §5.4).
    Shared,
}

/// The folder of the child thread `reference` of a thread working in `workspace`.
///
/// A reference that is not a plain name (a model's tool-call id outside a durable run may be
/// anything) is replaced by a digest of it, so the folder never leaves the threads folder.
///
/// # Examples
///
/// ```
/// use std::path::Path;
/// use weft_standard::filesystem::folder;
/// assert_eq!(
///     folder(Path::new("/w"), "0b1c-2d"),
///     Path::new("/w/.weft/threads/0b1c-2d")
/// );
/// assert!(folder(Path::new("/w"), "../x").starts_with("/w/.weft/threads"));
/// ```
pub fn folder(workspace: &Path, reference: &str) -> PathBuf {
    let plain = !reference.is_empty()
        && reference.len() <= 64
        && reference
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let name = if plain {
        reference.to_owned()
    } else {
        weft_runtime::child::child_reference("", reference)
    };
    workspace.join(THREADS_FOLDER).join(name)
}

/// Hides the folders of the children of a thread working in `workspace` from its tools.
pub(crate) fn hide_children(confinement: &mut Confinement, workspace: &Path) {
    confinement
        .protected
        .push((workspace.join(THREADS_FOLDER), Protection::Hidden));
}

/// The confinement of a session working in `workspace`: `confinement` without the
/// protections of the folders that contain the workspace (a deferred subagent's run works
/// in its folder inside the hidden `.weft/`), its children's folders hidden.
pub(crate) fn for_session(confinement: &mut Confinement, workspace: &Path) {
    if let Ok(root) = std::fs::canonicalize(workspace) {
        confinement.protected.retain(|(path, _)| {
            let path = root.join(path);
            !root.starts_with(std::fs::canonicalize(&path).unwrap_or(path))
        });
    }
    hide_children(confinement, workspace);
}

/// Opens the folder of the child `reference` of a thread working in `workspace` under
/// `confinement` (created when it does not exist): the child's workspace and confinement.
///
/// # Errors
/// When the folder cannot be created.
pub(crate) async fn open_child(
    workspace: &Path,
    confinement: &Confinement,
    reference: &str,
) -> std::io::Result<(PathBuf, Confinement)> {
    let root = folder(workspace, reference);
    tokio::fs::create_dir_all(&root).await?;
    let root = tokio::fs::canonicalize(&root).await?;
    let parent = tokio::fs::canonicalize(workspace).await?;
    let mut confinement = confinement.clone();
    confinement.protected = confinement
        .protected
        .into_iter()
        .map(|(path, protection)| {
            let path = parent.join(path);
            (std::fs::canonicalize(&path).unwrap_or(path), protection)
        })
        .filter(|(path, _)| !root.starts_with(path))
        .collect();
    Ok((root, confinement))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn a_child_folder_drops_the_protections_around_it_and_keeps_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".weft")).unwrap();
        let mut confinement = Confinement {
            protected: vec![
                (ws.join(".weft"), Protection::Hidden),
                (PathBuf::from("agents"), Protection::ReadOnly),
            ],
            ..Confinement::default()
        };
        hide_children(&mut confinement, &ws);
        let (root, child) = open_child(&ws, &confinement, "r-1").await.unwrap();
        assert_eq!(root, ws.join(".weft/threads/r-1"));
        assert!(root.is_dir());
        assert_eq!(
            child.protected,
            [(ws.join("agents"), Protection::ReadOnly)],
            "the parent's relative paths stay the parent's"
        );
    }
}
