//! `read_file`, `write_file`, `list_dir`.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};
use weft_provider::{Tool, ToolError};

use crate::parse_args;
use crate::workspace::Workspace;

/// Largest file `read_file` returns whole.
const MAX_READ_BYTES: u64 = 256 * 1024;

fn io_error(what: &str, path: &str, error: &std::io::Error) -> ToolError {
    ToolError::new(format!("cannot {what} {path}: {error}"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    start_line: Option<usize>,
    #[serde(default)]
    end_line: Option<usize>,
}

/// `read_file {path, start_line?, end_line?}`: a text file, whole or a 1-based line range.
pub fn read_file(workspace: &Workspace) -> Tool {
    let workspace = workspace.clone();
    Tool::new(
        "read_file",
        "Read a text file of the workspace. Optional start_line/end_line (1-based, inclusive) read a range.",
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "Path relative to the workspace root"},
            "start_line": {"type": "integer", "minimum": 1},
            "end_line": {"type": "integer", "minimum": 1}},
            "required": ["path"], "additionalProperties": false}),
        move |arguments: Value, _ctx| {
            let workspace = workspace.clone();
            async move {
                let args: ReadArgs = parse_args("read_file", arguments)?;
                let path = workspace
                    .resolve(&args.path)
                    .map_err(|e| ToolError::new(e.to_string()))?;
                let metadata = tokio::fs::metadata(&path)
                    .await
                    .map_err(|e| io_error("read", &args.path, &e))?;
                if metadata.is_dir() {
                    return Err(ToolError::new(format!(
                        "{} is a folder; use list_dir",
                        args.path
                    )));
                }
                let ranged = args.start_line.is_some() || args.end_line.is_some();
                if metadata.len() > MAX_READ_BYTES && !ranged {
                    return Err(ToolError::new(format!(
                        "{} is {} bytes; read it in ranges with start_line/end_line",
                        args.path,
                        metadata.len()
                    )));
                }
                let start = args.start_line.unwrap_or(1).max(1);
                let end = args.end_line.unwrap_or(usize::MAX);
                let shown = args.path.clone();
                let read = tokio::task::spawn_blocking(move || read_lines(&path, start, end))
                    .await
                    .map_err(|e| ToolError::new(format!("read_file failed: {e}")))?
                    .map_err(|e| io_error("read", &shown, &e))?;
                let Some(read) = read else {
                    return Err(ToolError::new(format!("{} is a binary file", args.path)));
                };
                let text = String::from_utf8_lossy(&read.bytes);
                let text = if ranged {
                    text.lines().collect::<Vec<_>>().join("\n")
                } else {
                    text.into_owned()
                };
                if read.cut {
                    return Ok(Value::String(crate::cap::truncate_text(
                        &text,
                        crate::cap::MAX_OUTPUT_BYTES,
                        Some(metadata.len()),
                        "; the rest of this range was not read",
                    )));
                }
                Ok(Value::String(text))
            }
        },
    )
}

/// Lines `start..=end` (1-based) of a file, at most [`crate::cap::MAX_OUTPUT_BYTES`] of them,
/// read in chunks (a 5 GB one-line file costs one capped read). `None` for a binary file.
struct ReadLines {
    bytes: Vec<u8>,
    /// Whether the range went on past the cap.
    cut: bool,
}

fn read_lines(path: &Path, start: usize, end: usize) -> std::io::Result<Option<ReadLines>> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let cap = crate::cap::MAX_OUTPUT_BYTES;
    let mut bytes = Vec::new();
    let mut line = 1usize;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut chunk)?;
        if n == 0 {
            return Ok(Some(ReadLines { bytes, cut: false }));
        }
        for &byte in &chunk[..n] {
            if byte == 0 {
                return Ok(None);
            }
            if line > end {
                return Ok(Some(ReadLines { bytes, cut: false }));
            }
            if line >= start {
                if bytes.len() >= cap {
                    return Ok(Some(ReadLines { bytes, cut: true }));
                }
                bytes.push(byte);
            }
            if byte == b'\n' {
                line += 1;
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

/// `write_file {path, content}`: writes the whole file (creating folders), atomically.
pub fn write_file(workspace: &Workspace) -> Tool {
    let workspace = workspace.clone();
    Tool::new(
        "write_file",
        "Write a text file of the workspace (the whole content; folders are created).",
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "Path relative to the workspace root"},
            "content": {"type": "string"}},
            "required": ["path", "content"], "additionalProperties": false}),
        move |arguments: Value, ctx: weft_provider::ToolContext| {
            let workspace = workspace.clone();
            async move {
                let args: WriteArgs = parse_args("write_file", arguments)?;
                let path = workspace
                    .resolve_for_write(&args.path)
                    .map_err(|e| ToolError::new(e.to_string()))?;
                if path == workspace.root() {
                    return Err(ToolError::new("the path names the workspace itself"));
                }
                if let Some(parent) = path.parent() {
                    tokio::fs::create_dir_all(parent)
                        .await
                        .map_err(|e| io_error("create folders for", &args.path, &e))?;
                }
                // Same folder, unique name: rename is atomic, so no reader sees half a file.
                let temp = path.with_file_name(format!(
                    ".{}.weft-{}.tmp",
                    path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
                    sanitize(&ctx.tool_call_id)
                ));
                tokio::fs::write(&temp, args.content.as_bytes())
                    .await
                    .map_err(|e| io_error("write", &args.path, &e))?;
                if let Err(error) = tokio::fs::rename(&temp, &path).await {
                    let _ = tokio::fs::remove_file(&temp).await;
                    return Err(io_error("write", &args.path, &error));
                }
                Ok(json!({"path": args.path, "bytes": args.content.len()}))
            }
        },
    )
    .with_side_effects(true)
    .with_idempotent(true)
}

fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default = "dot")]
    path: String,
    #[serde(default)]
    recursive: bool,
    #[serde(default = "default_max_entries")]
    max_entries: usize,
}

fn dot() -> String {
    ".".into()
}

fn default_max_entries() -> usize {
    500
}

/// `list_dir {path?, recursive?, max_entries?}`: entries with `/` after folders; recursive
/// listings honour `.gitignore` and skip hidden files.
pub fn list_dir(workspace: &Workspace) -> Tool {
    let workspace = workspace.clone();
    Tool::new(
        "list_dir",
        "List a folder of the workspace (folders end with /). recursive=true walks the tree, honouring .gitignore.",
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "Folder relative to the workspace root (default .)"},
            "recursive": {"type": "boolean"},
            "max_entries": {"type": "integer", "minimum": 1}},
            "additionalProperties": false}),
        move |arguments: Value, _ctx| {
            let workspace = workspace.clone();
            async move {
                let args: ListArgs = parse_args("list_dir", arguments)?;
                let path = workspace
                    .resolve(&args.path)
                    .map_err(|e| ToolError::new(e.to_string()))?;
                let result = tokio::task::spawn_blocking(move || list(&workspace, &path, &args))
                    .await
                    .map_err(|e| ToolError::new(format!("list_dir failed: {e}")))??;
                Ok(result)
            }
        },
    )
}

fn list(workspace: &Workspace, path: &Path, args: &ListArgs) -> Result<Value, ToolError> {
    if !path.is_dir() {
        return Err(ToolError::new(format!("{} is not a folder", args.path)));
    }
    let mut entries = Vec::new();
    let mut truncated = false;
    let walker = ignore::WalkBuilder::new(path)
        .max_depth(if args.recursive { None } else { Some(1) })
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry({
            let workspace = workspace.clone();
            move |entry| !workspace.is_hidden(entry.path())
        })
        .build();
    let mut bytes = 0usize;
    for entry in walker.flatten() {
        if entry.depth() == 0 {
            continue;
        }
        if entries.len() >= args.max_entries || bytes >= crate::cap::MAX_OUTPUT_BYTES {
            truncated = true;
            break;
        }
        let shown = workspace.display(entry.path());
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        bytes += shown.len() + 4;
        entries.push(if is_dir { format!("{shown}/") } else { shown });
    }
    Ok(json!({"entries": entries, "truncated": truncated}))
}
