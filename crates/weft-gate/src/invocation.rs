//! [`ToolInvocation`]: one tool call as the gates see it, whatever harness made it.
//!
//! A harness names its tools its own way (Claude Code `Edit`, Cursor `StrReplace`, Weft
//! `write_file`, Codex `apply_patch`); [`ToolKind::classify`] maps every known name to what the
//! gates care about: does the call edit files (and which), run a shell command, or only read.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// When a check runs (the reference protocol's enforcement stages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Before the tool runs (`PreToolUse`).
    PreExec,
    /// After the tool ran (`PostToolUse`).
    PostExec,
    /// Before a completion-like operation (merge, deploy, release, done).
    Review,
    /// Every stage.
    Always,
}

impl Stage {
    /// The protocol's spelling: `pre-exec`, `post-exec`, `review`, `always`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::PreExec => "pre-exec",
            Stage::PostExec => "post-exec",
            Stage::Review => "review",
            Stage::Always => "always",
        }
    }

    /// Parses the protocol's spelling.
    pub fn parse(text: &str) -> Option<Stage> {
        match text.trim().to_ascii_lowercase().as_str() {
            "pre-exec" | "pre_exec" | "preexec" => Some(Stage::PreExec),
            "post-exec" | "post_exec" | "postexec" => Some(Stage::PostExec),
            "review" => Some(Stage::Review),
            "always" => Some(Stage::Always),
            _ => None,
        }
    }
}

/// What a tool call does, as far as the gates are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolKind {
    /// Writes, edits or deletes these files (paths as given, possibly relative to `cwd`).
    Edit {
        /// The target files. Empty when the payload names none (the gate then denies).
        paths: Vec<String>,
    },
    /// Runs this shell command.
    Shell {
        /// The command line.
        command: String,
    },
    /// Reads only (files, search, web): needs no worktree.
    Read,
    /// Anything else (MCP tools, tasks, …): only the policy gate applies.
    Other,
}

/// Tool names that edit files, per harness. Matching is exact (harness names are case-sensitive).
const EDIT_TOOLS: &[&str] = &[
    // Claude Code (and Factory, which uses the same names).
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    // Cursor.
    "StrReplace",
    "Delete",
    "TabWrite",
    "EditNotebook",
    "edit_file",
    "search_replace",
    "delete_file",
    // Weft's own file tools (weft-tools) and Codex.
    "write_file",
    "apply_patch",
    // OpenCode.
    "edit",
    "write",
    "patch",
];

/// Tool names that run shell commands.
const SHELL_TOOLS: &[&str] = &[
    "Bash",
    "Shell",
    "run_terminal_cmd",
    "run_command",
    "shell",
    "bash",
    "exec_command",
    "local_shell",
];

/// Tool names that only read.
const READ_TOOLS: &[&str] = &[
    "Read",
    "Grep",
    "Glob",
    "LS",
    "WebFetch",
    "WebSearch",
    "read_file",
    "search_code",
    "list_files",
    "list_dir",
    "codebase_search",
    "grep_search",
    "file_search",
    "read",
    "grep",
    "glob",
    "list",
];

impl ToolKind {
    /// Classifies a call from its tool name and input (`input` gives the paths or command).
    pub fn classify(tool: &str, input: &Value) -> ToolKind {
        if EDIT_TOOLS.contains(&tool) {
            return ToolKind::Edit {
                paths: edit_paths(tool, input),
            };
        }
        if SHELL_TOOLS.contains(&tool) {
            let command = match input.get("command") {
                Some(Value::String(s)) => s.clone(),
                // Codex's `shell` takes an argv array.
                Some(Value::Array(words)) => shell_join(words),
                _ => String::new(),
            };
            return ToolKind::Shell { command };
        }
        if READ_TOOLS.contains(&tool) {
            return ToolKind::Read;
        }
        ToolKind::Other
    }

    /// `edit`, `shell`, `read` or `other`: what a policy's tool matcher can name.
    pub fn name(&self) -> &'static str {
        match self {
            ToolKind::Edit { .. } => "edit",
            ToolKind::Shell { .. } => "shell",
            ToolKind::Read => "read",
            ToolKind::Other => "other",
        }
    }
}

fn shell_join(words: &[Value]) -> String {
    let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
    // `["bash", "-lc", "git push -f"]` is a shell command wrapped once; keep it as one line.
    shlex::try_join(words.iter().copied()).unwrap_or_else(|_| words.join(" "))
}

/// The files an edit names: the usual keys of each harness, plus `apply_patch` headers.
fn edit_paths(tool: &str, input: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    for key in [
        "file_path",
        "path",
        "notebook_path",
        "target_file",
        "filePath",
        "target_notebook",
    ] {
        if let Some(Value::String(p)) = input.get(key) {
            paths.push(p.clone());
        }
    }
    if let Some(Value::Array(edits)) = input.get("edits") {
        for edit in edits {
            if let Some(Value::String(p)) = edit.get("file_path").or_else(|| edit.get("path")) {
                paths.push(p.clone());
            }
        }
    }
    if tool == "apply_patch" || tool == "patch" {
        let text = input
            .get("input")
            .or_else(|| input.get("patch"))
            .or_else(|| input.get("command"))
            .map(|v| match v {
                Value::String(s) => s.clone(),
                Value::Array(a) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("\n"),
                other => other.to_string(),
            })
            .unwrap_or_default();
        for line in text.lines() {
            for header in [
                "*** Add File: ",
                "*** Update File: ",
                "*** Delete File: ",
                "*** Move to: ",
            ] {
                if let Some(p) = line.trim().strip_prefix(header) {
                    paths.push(p.trim().to_owned());
                }
            }
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

/// One tool call, harness-neutral: what [`crate::Gates::check`] judges.
#[derive(Debug, Clone)]
pub struct ToolInvocation {
    /// The tool's name as the harness gave it (`Edit`, `Shell`, `write_file`, …).
    pub tool: String,
    /// The tool's arguments as the harness gave them. Gates read them, never change them.
    pub input: Value,
    /// What the call does.
    pub kind: ToolKind,
    /// The working directory relative paths and commands are resolved against.
    pub cwd: PathBuf,
    /// The stage this check runs at ([`Stage::PreExec`] or [`Stage::PostExec`]).
    pub stage: Stage,
    /// The harness's session id, when it gave one.
    pub session_id: Option<String>,
    /// The sub-agent that made the call, when it was one (Claude Code `agent_id`).
    pub agent_id: Option<String>,
}

impl ToolInvocation {
    /// A pre-exec invocation of `tool` with `input`, classified, in `cwd`.
    pub fn new(tool: impl Into<String>, input: Value, cwd: impl AsRef<Path>) -> Self {
        let tool = tool.into();
        let kind = ToolKind::classify(&tool, &input);
        ToolInvocation {
            tool,
            input,
            kind,
            cwd: cwd.as_ref().to_path_buf(),
            stage: Stage::PreExec,
            session_id: None,
            agent_id: None,
        }
    }

    /// The same call at another stage.
    pub fn at(mut self, stage: Stage) -> Self {
        self.stage = stage;
        self
    }

    /// A short, one-line description for the audit trail (tool and target, clipped).
    pub fn summary(&self) -> String {
        let target = match &self.kind {
            ToolKind::Edit { paths } => paths.join(", "),
            ToolKind::Shell { command } => command.clone(),
            ToolKind::Read | ToolKind::Other => {
                let text = self.input.to_string();
                if text == "null" { String::new() } else { text }
            }
        };
        // One line whatever the payload holds: CR, LF, and other control characters in the
        // tool name, a path or a command become spaces.
        let line: String = format!("{} {}", self.tool, target)
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        clip(&line, 200)
    }

    /// The completion-like operation this call performs (`merge`, `deploy`, `release`,
    /// `done`), if any: those are re-checked at the [`Stage::Review`] stage.
    pub fn completion_operation(&self) -> Option<&'static str> {
        match &self.kind {
            ToolKind::Shell { command } => crate::command_guard::completion_operation(command),
            _ => {
                let done_tool = matches!(
                    self.tool.as_str(),
                    "complete_task" | "TaskCompleted" | "attempt_completion"
                );
                let todo_done = matches!(self.tool.as_str(), "TodoWrite" | "todo_write")
                    && self
                        .input
                        .get("todos")
                        .and_then(Value::as_array)
                        .is_some_and(|todos| {
                            todos.iter().any(|t| {
                                t.get("status").and_then(Value::as_str) == Some("completed")
                            })
                        });
                (done_tool || todo_done).then_some("done")
            }
        }
    }
}

/// `text` cut to at most `max` characters (on a character boundary), with `…` when cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Found by the `hook_payload` fuzz target: a CR in a shell command (or any control
    /// character in a tool name or path) split the audit trail's one-line summary.
    #[test]
    fn summary_is_one_line_whatever_the_payload_holds() {
        for (tool, input) in [
            (
                "Bash",
                json!({"command": "git push --force\rorigin main\nls"}),
            ),
            ("Edit\r\nx", json!({"file_path": "a\nb\u{7f}"})),
            ("Write", json!({"file_path": "line\rbreak"})),
        ] {
            let summary = ToolInvocation::new(tool, input, "/w").summary();
            assert!(!summary.chars().any(char::is_control), "{summary:?}");
        }
    }

    #[test]
    fn every_harness_edit_tool_is_an_edit() {
        for (tool, input, path) in [
            ("Edit", json!({"file_path": "a.rs"}), "a.rs"),
            ("Write", json!({"file_path": "b.md"}), "b.md"),
            (
                "MultiEdit",
                json!({"file_path": "c.json", "edits": []}),
                "c.json",
            ),
            (
                "NotebookEdit",
                json!({"notebook_path": "n.ipynb"}),
                "n.ipynb",
            ),
            ("StrReplace", json!({"path": "d.ts"}), "d.ts"),
            ("Delete", json!({"path": "e.sh"}), "e.sh"),
            (
                "write_file",
                json!({"path": "f.toml", "content": ""}),
                "f.toml",
            ),
            (
                "apply_patch",
                json!({"input": "*** Begin Patch\n*** Update File: g.py\n@@\n*** End Patch"}),
                "g.py",
            ),
        ] {
            assert_eq!(
                ToolKind::classify(tool, &input),
                ToolKind::Edit {
                    paths: vec![path.to_owned()]
                },
                "{tool}"
            );
        }
    }

    #[test]
    fn shells_reads_and_others() {
        assert_eq!(
            ToolKind::classify("Bash", &json!({"command": "ls"})),
            ToolKind::Shell {
                command: "ls".into()
            }
        );
        assert_eq!(
            ToolKind::classify("shell", &json!({"command": ["bash", "-lc", "git push -f"]})),
            ToolKind::Shell {
                command: "bash -lc 'git push -f'".into()
            }
        );
        assert_eq!(ToolKind::classify("Read", &json!({})), ToolKind::Read);
        assert_eq!(ToolKind::classify("mcp__x__y", &json!({})), ToolKind::Other);
    }

    #[test]
    fn completion_like_operations_are_recognised() {
        let done = ToolInvocation::new(
            "TodoWrite",
            json!({"todos": [{"content": "x", "status": "completed"}]}),
            "/",
        );
        assert_eq!(done.completion_operation(), Some("done"));
        let merge = ToolInvocation::new("Bash", json!({"command": "gh pr merge 3"}), "/");
        assert_eq!(merge.completion_operation(), Some("merge"));
        let ls = ToolInvocation::new("Bash", json!({"command": "ls"}), "/");
        assert_eq!(ls.completion_operation(), None);
    }
}
