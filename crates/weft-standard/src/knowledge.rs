//! A project's knowledge: the text files of its `knowledge/` folder (`*.md`, `*.txt`, in
//! name order), which the runtime profile adds to the system prompt of every model call of
//! its agents — after context compression (runtime spec §5.11(4)): the knowledge is never
//! part of the conversation's history, so compression never removes or summarizes it.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! std::fs::create_dir(dir.path().join("knowledge"))?;
//! std::fs::write(dir.path().join("knowledge/api.md"), "The API lives at /v2.\n")?;
//! let text = weft_standard::knowledge::load(dir.path()).await?.expect("a knowledge folder");
//! assert!(text.starts_with("<knowledge>") && text.contains("## api.md\nThe API lives at /v2."));
//! assert!(weft_standard::knowledge::load(&dir.path().join("none")).await?.is_none());
//! # Ok(()) }
//! ```

use std::path::Path;

/// The folder of a project that holds its knowledge.
pub const FOLDER: &str = "knowledge";

/// The most bytes of knowledge added (the files after it are left out, with a note).
pub const MAX_BYTES: usize = 256 * 1024;

/// The knowledge of the project at `project_dir` as one block
/// (`<knowledge>\n## FILE\nTEXT\n…</knowledge>`), or `None` when it has no `knowledge/`
/// folder or no text file in it.
///
/// # Errors
/// Reading the folder or a file failed (a file that is not UTF-8 included).
pub async fn load(project_dir: &Path) -> std::io::Result<Option<String>> {
    let folder = project_dir.join(FOLDER);
    let mut entries = match tokio::fs::read_dir(&folder).await {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    while let Some(entry) = entries.next_entry().await? {
        let path = entry.path();
        let text_file = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "md" | "txt"));
        if text_file && entry.file_type().await?.is_file() {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Ok(None);
    }
    files.sort();
    let mut block = String::from("<knowledge>\n");
    for path in files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = tokio::fs::read_to_string(&path).await?;
        if block.len() + text.len() > MAX_BYTES {
            block.push_str(&format!(
                "[knowledge/{name} and the files after it are left out: more than {MAX_BYTES} bytes]\n"
            ));
            break;
        }
        block.push_str(&format!("## {name}\n{}\n", text.trim_end()));
    }
    block.push_str("</knowledge>");
    Ok(Some(block))
}
