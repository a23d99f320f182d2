//! `search_code`: a regex over the workspace's files, `.gitignore`-aware.

use serde::Deserialize;
use serde_json::{Value, json};
use weft_provider::{Tool, ToolError};

use crate::parse_args;
use crate::workspace::Workspace;

const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
const MAX_LINE_CHARS: usize = 300;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    #[serde(default = "default_max_results")]
    max_results: usize,
}

fn default_max_results() -> usize {
    200
}

/// `search_code {pattern, path?, glob?, case_insensitive?, max_results?}` → matches as
/// `path:line: text`, skipping binary, huge and ignored files.
pub fn search_code(workspace: &Workspace) -> Tool {
    let workspace = workspace.clone();
    Tool::new(
        "search_code",
        "Search the workspace's files with a regular expression (Rust regex syntax). Honours .gitignore. Returns path:line: text.",
        json!({"type": "object", "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string", "description": "Folder or file to search (default: the workspace)"},
            "glob": {"type": "string", "description": "Only files matching this glob, e.g. *.rs"},
            "case_insensitive": {"type": "boolean"},
            "max_results": {"type": "integer", "minimum": 1}},
            "required": ["pattern"], "additionalProperties": false}),
        move |arguments: Value, _ctx| {
            let workspace = workspace.clone();
            async move {
                let args: SearchArgs = parse_args("search_code", arguments)?;
                tokio::task::spawn_blocking(move || search(&workspace, &args))
                    .await
                    .map_err(|e| ToolError::new(format!("search_code failed: {e}")))?
            }
        },
    )
}

fn search(workspace: &Workspace, args: &SearchArgs) -> Result<Value, ToolError> {
    let regex = regex::RegexBuilder::new(&args.pattern)
        .case_insensitive(args.case_insensitive)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| ToolError::new(format!("invalid pattern: {e}")))?;
    let start = workspace
        .resolve(args.path.as_deref().unwrap_or("."))
        .map_err(|e| ToolError::new(e.to_string()))?;
    let mut builder = ignore::WalkBuilder::new(&start);
    builder
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry({
            let workspace = workspace.clone();
            move |entry| !workspace.is_hidden(entry.path())
        });
    if let Some(glob) = &args.glob {
        let mut overrides = ignore::overrides::OverrideBuilder::new(&start);
        overrides
            .add(glob)
            .map_err(|e| ToolError::new(format!("invalid glob: {e}")))?;
        builder.overrides(
            overrides
                .build()
                .map_err(|e| ToolError::new(format!("invalid glob: {e}")))?,
        );
    }
    let mut matches: Vec<String> = Vec::new();
    let mut shown_bytes = 0usize;
    let mut truncated = false;
    'files: for entry in builder.build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if entry.metadata().map(|m| m.len()).unwrap_or(0) > MAX_FILE_BYTES {
            continue;
        }
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        if bytes[..bytes.len().min(8192)].contains(&0) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (number, line) in text.lines().enumerate() {
            if regex.is_match(line) {
                if matches.len() >= args.max_results || shown_bytes >= crate::cap::MAX_OUTPUT_BYTES
                {
                    truncated = true;
                    break 'files;
                }
                let shown: String = line.chars().take(MAX_LINE_CHARS).collect();
                shown_bytes += shown.len() + 16;
                matches.push(format!(
                    "{}:{}: {}",
                    workspace.display(entry.path()),
                    number + 1,
                    shown.trim_end()
                ));
            }
        }
    }
    Ok(json!({"matches": matches, "truncated": truncated}))
}
