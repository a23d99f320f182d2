//! Attachment copying between a parent and its subagent (agents §7.10, §7.12).
//!
//! Attachments are files named by paths relative to the workspace. Crossing a thread
//! boundary copies them, and the receiving thread gets the paths of the copies:
//!
//! - parent → child (the call's `initAttachmentsProperty` argument): into
//!   `attachments/<child reference>/` of the workspace, before the child's first message is
//!   given; the message lists the copies after a blank line.
//! - child → parent (the `attachmentsProperty` of the child's `sessionStop` / `sessionFail`
//!   binding): into `attachments/from-<child reference>/`; the spec's result or failure
//!   text, byte for byte, is followed by the list after a blank line.
//!
//! A path is resolved like the built-in file tools resolve one ([`weft_tools::Workspace`]):
//! no absolute path, no `..` above the root, no link leading outside, nothing hidden; it
//! must be a file. A refused path copies nothing.

use std::path::PathBuf;

use serde_json::Value;
use weft_provider::ToolError;
use weft_tools::Workspace;

/// The folder (relative to the workspace) the attachments given to the child `reference`
/// are copied into.
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

/// Copies the files `paths` (relative to `root`) into `folder` (relative to `root`), and
/// gives the copies' paths relative to `root`. Every path is checked before anything is
/// copied: a refused one is an error and nothing is copied.
pub(crate) async fn copy(
    root: &std::path::Path,
    confinement: &weft_tools::Confinement,
    paths: &[String],
    folder: &str,
) -> Result<Vec<String>, String> {
    blocking(root, confinement, paths, Some(folder)).await
}

/// Checks the files `paths` (relative to `root`) as [`copy`] does, copying nothing.
pub(crate) async fn check(
    root: &std::path::Path,
    confinement: &weft_tools::Confinement,
    paths: &[String],
) -> Result<(), String> {
    blocking(root, confinement, paths, None).await.map(|_| ())
}

async fn blocking(
    root: &std::path::Path,
    confinement: &weft_tools::Confinement,
    paths: &[String],
    folder: Option<&str>,
) -> Result<Vec<String>, String> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let (root, confinement) = (root.to_owned(), confinement.clone());
    let (paths, folder) = (paths.to_vec(), folder.map(str::to_owned));
    tokio::task::spawn_blocking(move || {
        copy_blocking(&root, confinement, &paths, folder.as_deref())
    })
    .await
    .map_err(|e| format!("the attachments could not be copied: {e}"))?
}

fn copy_blocking(
    root: &std::path::Path,
    confinement: weft_tools::Confinement,
    paths: &[String],
    folder: Option<&str>,
) -> Result<Vec<String>, String> {
    let workspace = Workspace::new(root)
        .map_err(|e| e.to_string())?
        .with_confinement(confinement);
    // Check every source first, and choose the copies' names.
    let mut plan: Vec<(PathBuf, String)> = Vec::new();
    for path in paths {
        let source = workspace
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
    let Some(folder) = folder else {
        return Ok(Vec::new());
    };
    let mut copies = Vec::new();
    for (source, name) in plan {
        let relative = format!("{folder}/{name}");
        let destination = workspace
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
        let paths = vec!["a/x.txt".to_owned(), "x.txt".to_owned()];
        let copies = copy(root, &c, &paths, "attachments/r").await.unwrap();
        assert_eq!(copies, ["attachments/r/x.txt", "attachments/r/2-x.txt"]);
        assert_eq!(
            std::fs::read_to_string(root.join("attachments/r/2-x.txt")).unwrap(),
            "two"
        );
        for bad in ["../x", "/etc/passwd", "missing.txt", "a"] {
            let refused = copy(root, &c, &["x.txt".into(), bad.into()], "attachments/s").await;
            assert!(refused.is_err(), "{bad}");
            assert!(!root.join("attachments/s").exists());
        }
        assert!(paths_of(&serde_json::json!({"f": 3}), Some("f")).is_err());
    }
}
