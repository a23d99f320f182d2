//! Attachment copying between a parent and its subagent (agents §7.10, §7.12).
//!
//! Attachments are files named by paths relative to a thread's workspace. A subagent has a
//! filesystem of its own ([`crate::filesystem`]); crossing the boundary copies the files, and
//! the receiving thread gets the paths of the copies in its own filesystem:
//!
//! - parent → child (the call's `initAttachmentsProperty` argument, `subagent_message`'s
//!   `attachments`): into `attachments/` of the child's folder, before the child's message
//!   is given; the message lists the copies after a blank line.
//! - child → parent (the `attachmentsProperty` of the child's `sessionStop` / `sessionFail`
//!   binding, paths in the child's folder): into `attachments/from-<child reference>/` of the
//!   parent's workspace; the spec's result or failure text, byte for byte, is followed by the
//!   list after a blank line.
//!
//! A path is resolved like the built-in file tools resolve one ([`weft_tools::Workspace`]):
//! no absolute path, no `..` above the root, no link leading outside, nothing hidden; it
//! must be a file. A refused path copies nothing.

use std::path::PathBuf;

use serde_json::Value;
use weft_provider::ToolError;
use weft_tools::Workspace;

/// The folder (relative to the child's workspace) the attachments given to a child are
/// copied into.
pub const GIVEN_FOLDER: &str = "attachments";

/// The folder (relative to the shared workspace) the attachments given to the child
/// `reference` are copied into, for a child working in its parent's workspace (a delegated
/// role).
///
/// # Examples
///
/// ```
/// assert_eq!(weft_standard::attachments::child_folder("r-1"), "attachments/r-1");
/// ```
pub fn child_folder(reference: &str) -> String {
    format!("attachments/{reference}")
}

/// The folder (relative to the workspace) the attachments returned by the child
/// `reference` are copied into.
///
/// # Examples
///
/// ```
/// assert_eq!(weft_standard::attachments::returned_folder("r-1"), "attachments/from-r-1");
/// ```
pub fn returned_folder(reference: &str) -> String {
    format!("attachments/from-{reference}")
}

/// `text` followed by the list of `paths` (nothing added without paths).
///
/// # Examples
///
/// ```
/// assert_eq!(
///     weft_standard::attachments::listed("done", &["attachments/from-r/a.txt".to_owned()]),
///     "done\n\nAttachments:\n- attachments/from-r/a.txt"
/// );
/// assert_eq!(weft_standard::attachments::listed("done", &[]), "done");
/// ```
pub fn listed(text: &str, paths: &[String]) -> String {
    if paths.is_empty() {
        return text.to_owned();
    }
    let mut out = format!("{text}\n\nAttachments:");
    for path in paths {
        out.push_str("\n- ");
        out.push_str(path);
    }
    out
}

/// The JSON schema of an attachments argument: a path or a list of paths.
pub(crate) fn schema(description: &str) -> Value {
    serde_json::json!({"type": ["array", "string"], "items": {"type": "string"}, "description": description})
}

/// The attachment paths of the argument `property` of `args`: a path or a list of paths
/// (none when the argument is missing or null).
pub(crate) fn paths_of(args: &Value, property: Option<&str>) -> Result<Vec<String>, ToolError> {
    let Some(property) = property else {
        return Ok(Vec::new());
    };
    match args.get(property) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(path)) => Ok(vec![path.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_owned).ok_or_else(|| {
                    ToolError::new(format!(
                        "the argument {property:?} is a path or a list of paths relative to the workspace"
                    ))
                })
            })
            .collect(),
        Some(_) => Err(ToolError::new(format!(
            "the argument {property:?} is a path or a list of paths relative to the workspace"
        ))),
    }
}

/// A thread's filesystem: its workspace root and what its tools may not touch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Files<'a> {
    /// The workspace root.
    pub(crate) root: &'a std::path::Path,
    /// Its confinement.
    pub(crate) confinement: &'a weft_tools::Confinement,
}

/// Copies the files `paths` (relative to `from`'s root) into `folder` (relative to `to`'s
/// root), and gives the copies' paths relative to `to`'s root. Every path is checked before
/// anything is copied: a refused one is an error and nothing is copied.
pub(crate) async fn copy(
    from: Files<'_>,
    to: Files<'_>,
    paths: &[String],
    folder: &str,
) -> Result<Vec<String>, String> {
    blocking(from, Some((to, folder)), paths).await
}

/// Checks the files `paths` (relative to `from`'s root) as [`copy`] does, copying nothing.
pub(crate) async fn check(from: Files<'_>, paths: &[String]) -> Result<(), String> {
    blocking(from, None, paths).await.map(|_| ())
}

/// An owned [`Files`], for the blocking pool.
type OwnedFiles = (PathBuf, weft_tools::Confinement);

fn owned(files: Files<'_>) -> OwnedFiles {
    (files.root.to_owned(), files.confinement.clone())
}

async fn blocking(
    from: Files<'_>,
    to: Option<(Files<'_>, &str)>,
    paths: &[String],
) -> Result<Vec<String>, String> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let from = owned(from);
    let to = to.map(|(files, folder)| (owned(files), folder.to_owned()));
    let paths = paths.to_vec();
    tokio::task::spawn_blocking(move || copy_blocking(from, to, &paths))
        .await
        .map_err(|e| format!("the attachments could not be copied: {e}"))?
}

fn workspace((root, confinement): OwnedFiles) -> Result<Workspace, String> {
    Ok(Workspace::new(root)
        .map_err(|e| e.to_string())?
        .with_confinement(confinement))
}

fn copy_blocking(
    from: OwnedFiles,
    to: Option<(OwnedFiles, String)>,
    paths: &[String],
) -> Result<Vec<String>, String> {
    let source_workspace = workspace(from)?;
    // Check every source first, and choose the copies' names.
    let mut plan: Vec<(PathBuf, String)> = Vec::new();
    for path in paths {
        let source = source_workspace
            .resolve(path)
            .map_err(|e| format!("the attachment {path:?} cannot be copied: {e}"))?;
        let meta = std::fs::metadata(&source)
            .map_err(|e| format!("the attachment {path:?} cannot be copied: {e}"))?;
        if !meta.is_file() {
            return Err(format!(
                "the attachment {path:?} cannot be copied: it is not a file"
            ));
        }
        let file_name = source
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "attachment".to_owned());
        let mut name = file_name.clone();
        let mut n = 2;
        while plan.iter().any(|(_, taken)| *taken == name) {
            name = format!("{n}-{file_name}");
            n += 1;
        }
        plan.push((source, name));
    }
    let Some((to, folder)) = to else {
        return Ok(Vec::new());
    };
    let destination_workspace = workspace(to)?;
    let mut copies = Vec::new();
    for (source, name) in plan {
        let relative = format!("{folder}/{name}");
        let destination = destination_workspace
            .resolve_for_write(&relative)
            .map_err(|e| format!("the attachment cannot be copied to {relative:?}: {e}"))?;
        if let Some(dir) = destination.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("the attachment cannot be copied to {relative:?}: {e}"))?;
        }
        if source != destination {
            std::fs::copy(&source, &destination)
                .map_err(|e| format!("the attachment cannot be copied to {relative:?}: {e}"))?;
        }
        copies.push(relative);
    }
    Ok(copies)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn files_are_copied_and_escapes_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::fs::write(root.join("a/x.txt"), "one").unwrap();
        std::fs::write(root.join("x.txt"), "two").unwrap();
        let c = weft_tools::Confinement::default();
        let files = Files {
            root,
            confinement: &c,
        };
        let paths = vec!["a/x.txt".to_owned(), "x.txt".to_owned()];
        let copies = copy(files, files, &paths, "attachments/r").await.unwrap();
        assert_eq!(copies, ["attachments/r/x.txt", "attachments/r/2-x.txt"]);
        assert_eq!(
            std::fs::read_to_string(root.join("attachments/r/2-x.txt")).unwrap(),
            "two"
        );
        for bad in ["../x", "/etc/passwd", "missing.txt", "a"] {
            let refused = copy(files, files, &["x.txt".into(), bad.into()], "attachments/s").await;
            assert!(refused.is_err(), "{bad}");
            assert!(!root.join("attachments/s").exists());
        }
        assert!(paths_of(&serde_json::json!({"f": 3}), Some("f")).is_err());
    }
}
