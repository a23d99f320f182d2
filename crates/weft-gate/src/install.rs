//! Hook registration: `weft hooks install` writes a harness's hook configuration, merging
//! with what is there (an existing entry is never removed or rewritten; a file that is not
//! valid JSON is left alone and reported), and `weft hooks doctor` reports what is wired.

use std::path::{Path, PathBuf};

use regex::Regex;
use serde_json::{Map, Value, json};

use crate::error::GateError;
use crate::hook::Harness;
use crate::worktree::on_path;

/// `(harness event, weft hook event, matcher, timeout in seconds)` for Claude Code.
const CLAUDE_EVENTS: &[(&str, &str, &str, u64)] = &[
    ("SessionStart", "session-start", "", 30),
    ("PreToolUse", "pre-tool-use", "*", 60),
    ("PostToolUse", "post-tool-use", "*", 60),
    ("UserPromptSubmit", "user-prompt-submit", "", 30),
    ("PreCompact", "pre-compact", "", 30),
    ("PostCompact", "post-compact", "", 30),
    ("Stop", "stop", "", 1800),
    ("SubagentStop", "subagent-stop", "", 1800),
];

/// The same for Cursor (`preToolUse` covers every tool; the older specific events are
/// registered too for Cursor versions without it).
const CURSOR_EVENTS: &[(&str, &str)] = &[
    ("sessionStart", "session-start"),
    ("preToolUse", "pre-tool-use"),
    ("beforeShellExecution", "pre-tool-use"),
    ("beforeMCPExecution", "pre-tool-use"),
    ("postToolUse", "post-tool-use"),
    ("afterFileEdit", "post-tool-use"),
    ("preCompact", "pre-compact"),
    ("stop", "stop"),
    ("subagentStop", "subagent-stop"),
];

/// The edit and shell tools a pre-tool-use registration must cover, per harness.
const CLAUDE_TOOLS: &[&str] = &["Edit", "Write", "MultiEdit", "NotebookEdit", "Bash"];
const CURSOR_TOOLS: &[&str] = &["Write", "StrReplace", "Edit", "Delete", "Shell"];

/// What `install` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallReport {
    /// The file written.
    pub file: PathBuf,
    /// The events an entry was added for.
    pub added: Vec<String>,
    /// The events that already had Weft's entry.
    pub already: Vec<String>,
}

/// The command a harness runs for `event`.
pub fn hook_command(bin: &str, event: &str, harness: Harness) -> String {
    let bin = shlex::try_quote(bin).map_or_else(|_| bin.to_owned(), |q| q.into_owned());
    format!("{bin} hook {event} --harness {}", harness.as_str())
}

fn read_json(path: &Path) -> Result<Value, GateError> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(json!({})),
        Ok(text) => {
            let value: Value = serde_json::from_str(&text).map_err(|e| {
                GateError::Operation(format!(
                    "{} is not valid JSON ({e}); fix it by hand, it was left as it is",
                    path.display()
                ))
            })?;
            if value.is_object() {
                Ok(value)
            } else {
                Err(GateError::Operation(format!(
                    "{} is not a JSON object; it was left as it is",
                    path.display()
                )))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({})),
        Err(e) => Err(GateError::io(path, e)),
    }
}

fn write_json(path: &Path, value: &Value) -> Result<(), GateError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| GateError::io(dir, e))?;
    }
    let text =
        serde_json::to_string_pretty(value).map_err(|e| GateError::Operation(e.to_string()))?;
    std::fs::write(path, format!("{text}\n")).map_err(|e| GateError::io(path, e))
}

fn object<'a>(value: &'a mut Value, key: &str) -> Result<&'a mut Map<String, Value>, GateError> {
    let map = value
        .as_object_mut()
        .ok_or_else(|| GateError::Operation("expected a JSON object".into()))?;
    let entry = map.entry(key).or_insert_with(|| json!({}));
    entry
        .as_object_mut()
        .ok_or_else(|| GateError::Operation(format!("\"{key}\" is not a JSON object")))
}

fn array<'a>(map: &'a mut Map<String, Value>, key: &str) -> Result<&'a mut Vec<Value>, GateError> {
    map.entry(key)
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .ok_or_else(|| GateError::Operation(format!("hooks.{key} is not a JSON array")))
}

/// Writes (merging) the registration of `harness` in the project at `root`; `bin` is the
/// `weft` program the harness runs.
///
/// # Errors
/// An unreadable or non-JSON existing file (left untouched), or a write failure.
pub fn install(root: &Path, harness: Harness, bin: &str) -> Result<InstallReport, GateError> {
    match harness {
        Harness::Claude => install_claude(root, bin),
        Harness::Cursor => install_cursor(root, bin),
        Harness::Codex => Err(GateError::Operation(
            "installing hooks for codex is not supported yet; register `weft hook <event> --harness codex` by hand".into(),
        )),
    }
}

fn install_claude(root: &Path, bin: &str) -> Result<InstallReport, GateError> {
    let file = root.join(".claude").join("settings.json");
    let mut settings = read_json(&file)?;
    let hooks = object(&mut settings, "hooks")?;
    let (mut added, mut already) = (Vec::new(), Vec::new());
    for (event, weft_event, matcher, timeout) in CLAUDE_EVENTS {
        let command = hook_command(bin, weft_event, Harness::Claude);
        let groups = array(hooks, event)?;
        let present = groups.iter().any(|g| {
            g.get("hooks").and_then(Value::as_array).is_some_and(|hs| {
                hs.iter()
                    .any(|h| h.get("command").and_then(Value::as_str) == Some(command.as_str()))
            })
        });
        if present {
            already.push((*event).to_owned());
            continue;
        }
        groups.push(json!({
            "matcher": matcher,
            "hooks": [{"type": "command", "command": command, "timeout": timeout}],
        }));
        added.push((*event).to_owned());
    }
    write_json(&file, &settings)?;
    Ok(InstallReport {
        file,
        added,
        already,
    })
}

fn install_cursor(root: &Path, bin: &str) -> Result<InstallReport, GateError> {
    let file = root.join(".cursor").join("hooks.json");
    let mut config = read_json(&file)?;
    if let Some(map) = config.as_object_mut() {
        map.entry("version").or_insert(json!(1));
    }
    let hooks = object(&mut config, "hooks")?;
    let (mut added, mut already) = (Vec::new(), Vec::new());
    for (event, weft_event) in CURSOR_EVENTS {
        let command = hook_command(bin, weft_event, Harness::Cursor);
        let entries = array(hooks, event)?;
        if entries
            .iter()
            .any(|e| e.get("command").and_then(Value::as_str) == Some(command.as_str()))
        {
            already.push((*event).to_owned());
            continue;
        }
        entries.push(json!({"command": command}));
        added.push((*event).to_owned());
    }
    write_json(&file, &config)?;
    Ok(InstallReport {
        file,
        added,
        already,
    })
}

/// One event of a harness's registration, as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventCoverage {
    /// The harness's event name.
    pub event: String,
    /// The gate commands wired to it (Weft's or another protocol implementation's).
    pub commands: Vec<String>,
}

/// What one harness has wired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    /// `claude` or `cursor`.
    pub harness: &'static str,
    /// The files read.
    pub files: Vec<PathBuf>,
    /// Whether any file exists.
    pub present: bool,
    /// Each expected event with what is wired to it.
    pub events: Vec<EventCoverage>,
    /// Edit and shell tools no pre-tool-use gate covers.
    pub uncovered_tools: Vec<String>,
    /// Other problems (an unreadable file, a hook program that does not exist).
    pub problems: Vec<String>,
}

impl Coverage {
    /// Every expected event is wired, every tool covered, no problem.
    pub fn complete(&self) -> bool {
        self.present
            && self.events.iter().all(|e| !e.commands.is_empty())
            && self.uncovered_tools.is_empty()
            && self.problems.is_empty()
    }

    /// Whether `event` has a gate command.
    pub fn wired(&self, event: &str) -> bool {
        self.events
            .iter()
            .any(|e| e.event == event && !e.commands.is_empty())
    }
}

/// A command that implements the protocol's hooks: Weft's, or a reference UAP script.
fn is_gate_command(command: &str) -> bool {
    (command.contains("weft") && command.contains(" hook "))
        || command.contains("uap")
        || command.contains(".claude/hooks/")
        || command.contains(".cursor/hooks/")
}

fn matcher_covers(matcher: Option<&str>, tool: &str) -> bool {
    let m = matcher.unwrap_or("").trim();
    if m.is_empty() || m == "*" {
        return true;
    }
    Regex::new(&format!("^(?:{m})$")).map_or(m == tool, |re| re.is_match(tool))
}

fn program_problem(command: &str) -> Option<String> {
    let words = shlex::split(command)?;
    let program = words.first()?;
    if matches!(program.as_str(), "bash" | "sh" | "python3" | "node" | "bun") {
        return None;
    }
    let exists = if program.contains('/') {
        Path::new(program).is_file()
    } else {
        on_path(program)
    };
    (!exists).then(|| {
        format!("the hook program {program} does not exist: the harness would let every call through (only exit 2 blocks)")
    })
}

/// Reports what Claude Code and Cursor have wired in the project at `root`.
pub fn doctor(root: &Path) -> Vec<Coverage> {
    vec![doctor_claude(root), doctor_cursor(root)]
}

fn doctor_claude(root: &Path) -> Coverage {
    let files = vec![
        root.join(".claude/settings.json"),
        root.join(".claude/settings.local.json"),
    ];
    let mut problems = Vec::new();
    // (event, matcher, command)
    let mut handlers: Vec<(String, Option<String>, String)> = Vec::new();
    let mut present = false;
    for file in &files {
        if !file.exists() {
            continue;
        }
        present = true;
        match read_json(file) {
            Err(e) => problems.push(e.to_string()),
            Ok(settings) => {
                let Some(hooks) = settings.get("hooks").and_then(Value::as_object) else {
                    continue;
                };
                for (event, groups) in hooks {
                    for group in groups.as_array().into_iter().flatten() {
                        let matcher = group
                            .get("matcher")
                            .and_then(Value::as_str)
                            .map(str::to_owned);
                        for h in group
                            .get("hooks")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                        {
                            if let Some(c) = h.get("command").and_then(Value::as_str) {
                                handlers.push((event.clone(), matcher.clone(), c.to_owned()));
                            }
                        }
                    }
                }
            }
        }
    }
    coverage(
        "claude",
        files,
        present,
        problems,
        &handlers,
        &CLAUDE_EVENTS.iter().map(|e| e.0).collect::<Vec<_>>(),
        &[("PreToolUse", CLAUDE_TOOLS)],
    )
}

fn doctor_cursor(root: &Path) -> Coverage {
    let file = root.join(".cursor/hooks.json");
    let mut problems = Vec::new();
    let mut handlers = Vec::new();
    let present = file.exists();
    if present {
        match read_json(&file) {
            Err(e) => problems.push(e.to_string()),
            Ok(config) => {
                if let Some(hooks) = config.get("hooks").and_then(Value::as_object) {
                    for (event, entries) in hooks {
                        for e in entries.as_array().into_iter().flatten() {
                            if let Some(c) = e.get("command").and_then(Value::as_str) {
                                let matcher =
                                    e.get("matcher").and_then(Value::as_str).map(str::to_owned);
                                // The specific shell event covers the shell tool.
                                let (event, matcher) = if event == "beforeShellExecution" {
                                    ("preToolUse".to_owned(), Some("Shell".to_owned()))
                                } else {
                                    (event.clone(), matcher)
                                };
                                handlers.push((event, matcher, c.to_owned()));
                            }
                        }
                    }
                }
            }
        }
    }
    coverage(
        "cursor",
        vec![file],
        present,
        problems,
        &handlers,
        &[
            "sessionStart",
            "preToolUse",
            "postToolUse",
            "preCompact",
            "stop",
            "subagentStop",
        ],
        &[("preToolUse", CURSOR_TOOLS)],
    )
}

fn coverage(
    harness: &'static str,
    files: Vec<PathBuf>,
    present: bool,
    mut problems: Vec<String>,
    handlers: &[(String, Option<String>, String)],
    events: &[&str],
    tools: &[(&str, &[&str])],
) -> Coverage {
    let gate: Vec<&(String, Option<String>, String)> = handlers
        .iter()
        .filter(|(_, _, c)| is_gate_command(c))
        .collect();
    let events = events
        .iter()
        .map(|event| {
            let mut commands: Vec<String> = gate
                .iter()
                .filter(|(e, _, _)| e == event)
                .map(|(_, _, c)| c.clone())
                .collect();
            commands.dedup();
            EventCoverage {
                event: (*event).to_owned(),
                commands,
            }
        })
        .collect();
    let mut uncovered_tools = Vec::new();
    for (event, names) in tools {
        for tool in *names {
            let covered = gate
                .iter()
                .any(|(e, m, _)| e == event && matcher_covers(m.as_deref(), tool));
            if !covered {
                uncovered_tools.push(format!("{event}: {tool}"));
            }
        }
    }
    let mut seen = Vec::new();
    for (_, _, command) in &gate {
        if let Some(p) = program_problem(command)
            && !seen.contains(&p)
        {
            seen.push(p.clone());
            problems.push(p);
        }
    }
    Coverage {
        harness,
        files,
        present,
        events,
        uncovered_tools,
        problems,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matchers_are_anchored_regexes() {
        assert!(matcher_covers(None, "MultiEdit"));
        assert!(matcher_covers(Some("*"), "Bash"));
        assert!(matcher_covers(Some("Edit|Write"), "Write"));
        assert!(!matcher_covers(Some("Edit|Write"), "MultiEdit"));
        assert!(matcher_covers(Some("Edit|MultiEdit|Write"), "MultiEdit"));
    }
}
