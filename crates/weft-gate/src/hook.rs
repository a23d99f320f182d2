//! The hook entry points: a harness's JSON payload in, its answer out.
//!
//! [`run_hook`] never fails and never panics outward; it returns the exit code and the text
//! for stdout and stderr, in the harness's contract (not Weft's usual exit codes):
//!
//! | event | Claude Code (and Codex, Factory) | Cursor |
//! |---|---|---|
//! | session start | exit 0; stdout: the `<uap-context>` block (added to the context) | exit 0; `{"additional_context": block}` |
//! | pre-tool-use, allow | exit 0, no output | exit 0; `{"permission":"allow"}` |
//! | pre-tool-use, deny | exit 2; stderr: the reason; stdout: `hookSpecificOutput.permissionDecision = "deny"` (ignored under exit 2, kept for harnesses that read it) | exit 2; stderr: the reason; `{"permission":"deny","user_message","agent_message"}` |
//! | post-tool-use | exit 0 (exit 2 + stderr when a REQUIRED post-exec policy fails: the tool already ran, Claude is told) | exit 0; `{"additional_context": …}` when something failed |
//! | post-tool-use after an edit, `[gates] postEditBuild` failing | exit 2; stderr: the build's failure (Claude is told; the edit stays) | exit 0; `{"additional_context": …}` |
//! | post-tool-use after an edit, `[gates] backupReminder` files uncommitted | exit 0; `hookSpecificOutput.additionalContext`: commit reminder | exit 0; `{"additional_context": …}` |
//! | pre-compact | exit 0; saves the session's protocol state (worktree, task, edited files); a note on stdout | exit 0; `{}` |
//! | post-compact | exit 0; records the compaction; the state comes back through session start | exit 0; `{}` |
//! | session start with `source: "compact"` | as session start, plus the state saved before compaction | — |
//! | user-prompt-submit | exit 0; stdout: the task's class and the READ → QUERY → ACT → RECORD → PROMOTE plan (added to the context) | exit 0; `{"continue": true}` |
//! | stop, sub-agent stop | refused: exit 2, stderr reason, stdout `{"decision":"block","reason"}`; allowed: exit 0 | refused: exit 0, `{"followup_message": reason}`; allowed: `{}` |
//!
//! A pre-tool-use payload that cannot be read (not JSON, no tool) is denied (fail-closed).
//! Session start is fail-open: it always exits 0, whatever happens to the database.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::completion::run_checklist;
use crate::config::GateConfig;
use crate::context::context_block;
use crate::db::{AuditEntry, GateDb, now_ms};
use crate::gates::Gates;
use crate::invocation::{Stage, ToolInvocation, ToolKind, clip};
use crate::project::project_root;
use crate::verdict::{Finding, Level, Verdict};

/// At most this many memories (and as many open loops) are injected at session start.
pub(crate) const MEMORY_LINES: usize = 10;

/// Agents not heard from for this long are deregistered at session start.
pub const STALE_AFTER: Duration = Duration::from_secs(15 * 60);

/// The harness events `weft hook` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    /// A session begins (or resumes, or was compacted).
    SessionStart,
    /// Before a tool call.
    PreToolUse,
    /// After a tool call.
    PostToolUse,
    /// Before the context is compacted: saves the session's protocol state.
    PreCompact,
    /// After the context was compacted (Claude Code's `PostCompact`).
    PostCompact,
    /// The user submitted a prompt: the task is classified and the loop planned.
    UserPromptSubmit,
    /// The agent wants to stop (claims to be done).
    Stop,
    /// A sub-agent wants to stop.
    SubagentStop,
}

impl HookEvent {
    /// The command-line spelling (`pre-tool-use`).
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session-start",
            HookEvent::PreToolUse => "pre-tool-use",
            HookEvent::PostToolUse => "post-tool-use",
            HookEvent::PreCompact => "pre-compact",
            HookEvent::PostCompact => "post-compact",
            HookEvent::UserPromptSubmit => "user-prompt-submit",
            HookEvent::Stop => "stop",
            HookEvent::SubagentStop => "subagent-stop",
        }
    }
}

/// Whose contract the answer follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Harness {
    /// Claude Code (also Factory, whose hooks use the same payloads and answers).
    Claude,
    /// Cursor.
    Cursor,
    /// OpenAI Codex CLI (Claude-shaped payloads and answers).
    Codex,
}

impl Harness {
    /// Parses `claude`, `factory`, `cursor`, `codex`.
    pub fn parse(text: &str) -> Option<Harness> {
        match text.trim().to_ascii_lowercase().as_str() {
            "claude" | "claude-code" | "factory" | "droid" => Some(Harness::Claude),
            "cursor" => Some(Harness::Cursor),
            "codex" => Some(Harness::Codex),
            _ => None,
        }
    }

    /// The name written to the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Harness::Claude => "claude",
            Harness::Cursor => "cursor",
            Harness::Codex => "codex",
        }
    }

    /// Guesses the harness from a payload: Cursor's carry `conversation_id` or
    /// `workspace_roots` and camelCase event names; everything else is answered like Claude.
    pub fn detect(payload: &Value) -> Harness {
        let cursor_fields = ["conversation_id", "workspace_roots", "cursor_version"]
            .iter()
            .any(|k| payload.get(k).is_some());
        let camel = payload
            .get("hook_event_name")
            .and_then(Value::as_str)
            .and_then(|n| n.chars().next())
            .is_some_and(|c| c.is_ascii_lowercase());
        if cursor_fields || camel {
            Harness::Cursor
        } else {
            Harness::Claude
        }
    }
}

/// What to print and how to exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookAnswer {
    /// The process exit code.
    pub exit_code: u8,
    /// Text for stdout.
    pub stdout: String,
    /// Text for stderr.
    pub stderr: String,
}

impl HookAnswer {
    fn ok(stdout: impl Into<String>) -> Self {
        HookAnswer {
            exit_code: 0,
            stdout: stdout.into(),
            stderr: String::new(),
        }
    }
}

/// A payload, read.
#[derive(Debug, Clone)]
struct Payload {
    raw: Value,
    event_name: String,
    session_id: Option<String>,
    agent_id: Option<String>,
    cwd: PathBuf,
}

impl Payload {
    fn read(raw: Value, process_cwd: &Path) -> Payload {
        let text = |k: &str| raw.get(k).and_then(Value::as_str).map(str::to_owned);
        let cwd = text("cwd")
            .or_else(|| {
                raw.get("workspace_roots")
                    .and_then(Value::as_array)
                    .and_then(|r| r.first())
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .map(PathBuf::from)
            .or_else(|| {
                ["CLAUDE_PROJECT_DIR", "CURSOR_PROJECT_DIR"]
                    .iter()
                    .find_map(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
                    .map(PathBuf::from)
            })
            .map(|p| crate::project::normalize(process_cwd, &p))
            .unwrap_or_else(|| process_cwd.to_path_buf());
        Payload {
            event_name: text("hook_event_name").unwrap_or_default(),
            session_id: text("session_id").or_else(|| text("conversation_id")),
            agent_id: text("agent_id"),
            cwd,
            raw,
        }
    }

    /// The tool call of a pre/post-tool-use payload, in every harness's shape.
    fn tool_call(&self) -> Option<(String, Value)> {
        let input = |v: Option<&Value>| match v {
            // Cursor's MCP events give the input as a JSON string.
            Some(Value::String(s)) => {
                serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
            }
            Some(v) => v.clone(),
            None => json!({}),
        };
        match self.event_name.as_str() {
            "beforeShellExecution" | "afterShellExecution" => Some((
                "Shell".to_owned(),
                json!({"command": self.raw.get("command").cloned().unwrap_or(Value::Null)}),
            )),
            "beforeReadFile" => Some((
                "Read".to_owned(),
                json!({"file_path": self.raw.get("file_path").cloned().unwrap_or(Value::Null)}),
            )),
            "afterFileEdit" => Some((
                "Edit".to_owned(),
                json!({"file_path": self.raw.get("file_path").cloned().unwrap_or(Value::Null)}),
            )),
            _ => {
                let tool = self.raw.get("tool_name").and_then(Value::as_str)?;
                Some((tool.to_owned(), input(self.raw.get("tool_input"))))
            }
        }
    }

    fn invocation(&self, tool: String, input: Value, stage: Stage) -> ToolInvocation {
        let mut invocation = ToolInvocation::new(tool, input, &self.cwd).at(stage);
        // A shell call may name its own directory.
        if let ToolKind::Shell { .. } = invocation.kind
            && let Some(dir) = invocation
                .input
                .get("cwd")
                .or_else(|| self.raw.get("cwd"))
                .and_then(Value::as_str)
        {
            invocation.cwd = crate::project::normalize(&self.cwd, Path::new(dir));
        }
        invocation.session_id = self.session_id.clone();
        invocation.agent_id = self.agent_id.clone();
        invocation
    }
}

/// What [`run_hook`] reads from a payload before it acts: the harness it answers as, the
/// event name, and the tool call classified as a [`ToolInvocation`] (with the shell words the
/// command guard sees, for a shell call). `None` for a payload that is not a JSON object
/// (which `run_hook` refuses). Touches no file: the entry point of the payload fuzz target.
#[doc(hidden)]
pub fn read_payload(stdin: &[u8], process_cwd: &Path) -> Option<PayloadReading> {
    let raw = serde_json::from_slice::<Value>(stdin)
        .ok()
        .filter(Value::is_object)?;
    let payload = Payload::read(raw, process_cwd);
    let harness = Harness::detect(&payload.raw);
    let invocation = payload
        .tool_call()
        .map(|(tool, input)| payload.invocation(tool, input, Stage::PreExec));
    let words = match invocation.as_ref().map(|i| &i.kind) {
        Some(ToolKind::Shell { command }) => crate::shell::simple_commands(command),
        _ => Vec::new(),
    };
    Some(PayloadReading {
        harness,
        event_name: payload.event_name.clone(),
        invocation,
        shell_words: words,
    })
}

/// What [`read_payload`] found in a payload.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct PayloadReading {
    /// The harness the payload is answered as.
    pub harness: Harness,
    /// `hook_event_name`.
    pub event_name: String,
    /// The tool call, classified.
    pub invocation: Option<ToolInvocation>,
    /// A shell call's simple commands, as words.
    pub shell_words: Vec<Vec<String>>,
}

/// Answers one hook call. `harness` is `None` to detect it from the payload; `process_cwd`
/// is used when the payload names no directory.
pub fn run_hook(
    event: HookEvent,
    harness: Option<Harness>,
    stdin: &[u8],
    process_cwd: &Path,
) -> HookAnswer {
    let parsed: Result<Value, String> = serde_json::from_slice::<Value>(stdin)
        .map_err(|e| format!("the hook payload is not JSON: {e}"))
        .and_then(|v| {
            if v.is_object() {
                Ok(v)
            } else {
                Err("the hook payload is not a JSON object".to_owned())
            }
        });
    let payload = match parsed {
        Ok(raw) => Payload::read(raw, process_cwd),
        Err(reason) => {
            let harness = harness.unwrap_or(Harness::Claude);
            return match event {
                HookEvent::PreToolUse => deny(
                    harness,
                    &format!("weft gate: {reason}; the call is refused (fail-closed)"),
                ),
                HookEvent::SessionStart => {
                    let block = "<uap-context>\n(weft gate: the session-start payload could not be read; no context)\n</uap-context>\n";
                    session_answer(harness, block)
                }
                _ => HookAnswer {
                    exit_code: 0,
                    stdout: if harness == Harness::Cursor {
                        "{}".into()
                    } else {
                        String::new()
                    },
                    stderr: format!("weft gate: {reason}\n"),
                },
            };
        }
    };
    let harness = harness.unwrap_or_else(|| Harness::detect(&payload.raw));
    match event {
        HookEvent::SessionStart => {
            let outcome = std::panic::catch_unwind(|| session_start(&payload, harness));
            outcome.unwrap_or_else(|_| {
                session_answer(
                    harness,
                    "<uap-context>\n(weft gate: the context could not be built)\n</uap-context>\n",
                )
            })
        }
        HookEvent::PreToolUse => pre_tool_use(&payload, harness),
        HookEvent::PostToolUse => post_tool_use(&payload, harness),
        HookEvent::PreCompact => pre_compact(&payload, harness),
        HookEvent::PostCompact => post_compact(&payload, harness),
        HookEvent::UserPromptSubmit => user_prompt_submit(&payload, harness),
        HookEvent::Stop => stop(&payload, harness, false),
        HookEvent::SubagentStop => stop(&payload, harness, true),
    }
}

/// The project's settings, gates and database for a payload. A broken `weft.toml` yields
/// the defaults (every gate on) and a note.
struct Setup {
    root: PathBuf,
    config: GateConfig,
    db: Result<GateDb, String>,
    notes: Vec<String>,
}

fn setup(payload: &Payload) -> Setup {
    let root = project_root(&payload.cwd);
    let mut notes = Vec::new();
    let config = GateConfig::load(&root).unwrap_or_else(|e| {
        notes.push(format!("{e}; using the default gate settings"));
        GateConfig::default()
    });
    let db = match GateDb::open_healing(&GateDb::path_for(&root)) {
        Ok((db, healed)) => {
            notes.extend(healed);
            Ok(db)
        }
        Err(e) => Err(e.to_string()),
    };
    Setup {
        root,
        config,
        db,
        notes,
    }
}

fn audit_rows(
    payload: &Payload,
    harness: Harness,
    event: HookEvent,
    invocation: Option<&ToolInvocation>,
    findings: &[Finding],
    outcome: (bool, &str),
) -> Vec<AuditEntry> {
    let at = now_ms();
    let base = AuditEntry {
        at,
        session_id: payload.session_id.clone(),
        agent_id: payload.agent_id.clone(),
        harness: harness.as_str().to_owned(),
        event: event.as_str().to_owned(),
        tool: invocation.map(|i| i.tool.clone()),
        summary: invocation.map(ToolInvocation::summary),
        stage: invocation.map(|i| i.stage.as_str().to_owned()),
        ..AuditEntry::default()
    };
    let mut rows: Vec<AuditEntry> = findings
        .iter()
        .map(|f| AuditEntry {
            gate: f.gate.to_owned(),
            policy_id: f.policy.clone(),
            level: Some(f.level.as_str().to_owned()),
            passed: f.passed,
            message: clip(&f.message, 2000),
            ..base.clone()
        })
        .collect();
    rows.push(AuditEntry {
        gate: "verdict".into(),
        passed: outcome.0,
        message: clip(outcome.1, 2000),
        ..base
    });
    rows
}

fn deny(harness: Harness, reason: &str) -> HookAnswer {
    let stdout = match harness {
        Harness::Cursor => json!({
            "permission": "deny",
            "user_message": reason,
            "agent_message": reason,
        }),
        Harness::Claude | Harness::Codex => json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }),
    };
    HookAnswer {
        exit_code: 2,
        stdout: format!("{stdout}\n"),
        stderr: format!("{reason}\n"),
    }
}

fn pre_tool_use(payload: &Payload, harness: Harness) -> HookAnswer {
    let Some((tool, input)) = payload.tool_call() else {
        return deny(
            harness,
            "weft gate: the pre-tool-use payload names no tool (no tool_name); the call is refused (fail-closed)",
        );
    };
    let mut setup = setup(payload);
    let invocation = payload.invocation(tool, input, Stage::PreExec);
    let policies = match &setup.db {
        Ok(db) => db.policies().map_err(|e| e.to_string()),
        Err(e) => Err(e.clone()),
    };
    let mut verdict = Verdict::default();
    let policies = match policies {
        Ok(p) => p,
        Err(e) => {
            // REQUIRED policies cannot be known: fail closed.
            verdict.findings.push(Finding {
                gate: "policy",
                policy: None,
                level: Level::Required,
                passed: false,
                message: format!("the policy database cannot be read: {e}"),
            });
            Vec::new()
        }
    };
    let gates = Gates::new(&setup.root, setup.config.clone()).with_policies(policies);
    verdict.findings.extend(gates.check(&invocation).findings);
    let allowed = verdict.allowed();
    let reason = verdict.reason();
    if let Ok(db) = setup.db.as_mut() {
        let rows = audit_rows(
            payload,
            harness,
            HookEvent::PreToolUse,
            Some(&invocation),
            &verdict.findings,
            (allowed, &reason),
        );
        let recorded = db.batch(|db| {
            db.audit(&rows)?;
            let Some(session) = payload.session_id.as_deref() else {
                return Ok(());
            };
            db.heartbeat(
                session,
                payload.agent_id.as_deref(),
                harness.as_str(),
                &payload.cwd,
            )?;
            if let Some(task) = in_progress_task(&invocation) {
                db.task_started(session, &task)?;
            }
            if let (true, ToolKind::Edit { paths }) = (allowed, &invocation.kind) {
                let absolute: Vec<String> = paths
                    .iter()
                    .map(|p| {
                        crate::project::normalize(&invocation.cwd, Path::new(p))
                            .to_string_lossy()
                            .into_owned()
                    })
                    .collect();
                db.edited(session, &absolute)?;
            }
            Ok(())
        });
        if let Err(e) = recorded {
            setup
                .notes
                .push(format!("the audit trail could not be written: {e}"));
        }
    }
    let mut notes = setup.notes.join("\n");
    let advisories = verdict.advisories();
    if !advisories.is_empty() {
        notes = format!("{notes}\n{advisories}").trim().to_owned();
    }
    if !allowed {
        let mut answer = deny(
            harness,
            &format!("weft gate denied {}:\n{reason}", invocation.tool),
        );
        if !notes.is_empty() {
            answer.stderr.push_str(&format!("{notes}\n"));
        }
        return answer;
    }
    HookAnswer {
        exit_code: 0,
        stdout: if harness == Harness::Cursor {
            "{\"permission\":\"allow\"}\n".into()
        } else {
            String::new()
        },
        stderr: if notes.is_empty() {
            String::new()
        } else {
            format!("weft gate: {notes}\n")
        },
    }
}

/// The in-progress item of a `TodoWrite`-like call.
fn in_progress_task(invocation: &ToolInvocation) -> Option<String> {
    if !matches!(invocation.tool.as_str(), "TodoWrite" | "todo_write") {
        return None;
    }
    invocation
        .input
        .get("todos")?
        .as_array()?
        .iter()
        .find(|t| t.get("status").and_then(Value::as_str) == Some("in_progress"))
        .map(|t| {
            let text = t
                .get("content")
                .or_else(|| t.get("activeForm"))
                .and_then(Value::as_str)
                .unwrap_or("a task");
            clip(text, 200)
        })
}

fn post_tool_use(payload: &Payload, harness: Harness) -> HookAnswer {
    let Some((tool, input)) = payload.tool_call() else {
        return HookAnswer {
            exit_code: 0,
            stdout: if harness == Harness::Cursor {
                "{}".into()
            } else {
                String::new()
            },
            stderr: "weft gate: the post-tool-use payload names no tool\n".into(),
        };
    };
    let mut setup = setup(payload);
    let invocation = payload.invocation(tool, input, Stage::PostExec);
    let policies = setup
        .db
        .as_ref()
        .ok()
        .and_then(|db| db.policies().ok())
        .unwrap_or_default();
    let mut verdict = Gates::new(&setup.root, setup.config.clone())
        .with_policies(policies)
        .check(&invocation);
    if let ToolKind::Edit { paths } = &invocation.kind {
        verdict
            .findings
            .extend(after_edit(&setup.config, &invocation.cwd, paths));
    }
    let reason = verdict.reason();
    if let Ok(db) = setup.db.as_mut() {
        let rows = audit_rows(
            payload,
            harness,
            HookEvent::PostToolUse,
            Some(&invocation),
            &verdict.findings,
            (verdict.allowed(), &reason),
        );
        let _ = db.audit(&rows);
    }
    let message = [reason.as_str(), verdict.advisories().as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    match harness {
        Harness::Cursor => HookAnswer::ok(if message.is_empty() {
            "{}\n".to_owned()
        } else {
            format!("{}\n", json!({"additional_context": message}))
        }),
        Harness::Claude | Harness::Codex if !verdict.allowed() => HookAnswer {
            exit_code: 2,
            stdout: String::new(),
            stderr: format!(
                "weft gate: a required post-tool-use check failed (the tool already ran):\n{reason}\n"
            ),
        },
        Harness::Claude | Harness::Codex if !message.is_empty() => HookAnswer::ok(format!(
            "{}\n",
            json!({"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": message}})
        )),
        Harness::Claude | Harness::Codex => HookAnswer::ok(""),
    }
}

/// The top of the git checkout (worktree) holding `path`, or `None`.
fn checkout_of(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
}

/// The post-tool-use checks of an edit: the build gate (`[gates] postEditBuild`, REQUIRED)
/// and the backup reminder (`[gates] backupReminder`, advisory), run in the checkout that
/// holds the edited file.
fn after_edit(config: &GateConfig, cwd: &Path, paths: &[String]) -> Vec<Finding> {
    if config.post_edit_build.is_none() && config.backup_reminder.is_none() {
        return Vec::new();
    }
    let Some(dir) = paths
        .iter()
        .map(|p| crate::project::normalize(cwd, Path::new(p)))
        .find_map(|p| checkout_of(&p))
        .or_else(|| checkout_of(cwd))
    else {
        return Vec::new();
    };
    let mut findings = Vec::new();
    if let Some(line) = &config.post_edit_build {
        let limit = Duration::from_secs(config.completion.timeout_seconds);
        let (passed, detail) = crate::completion::run_command(line, &dir, limit);
        findings.push(Finding {
            gate: "build",
            policy: Some("postEditBuild".into()),
            level: Level::Required,
            passed,
            message: if passed {
                detail
            } else {
                format!(
                    "the build is broken after editing {} in {}: {detail}",
                    paths.join(", "),
                    dir.display()
                )
            },
        });
    }
    if let Some(threshold) = config.backup_reminder {
        let status = crate::process::run(
            "git",
            &["status".to_owned(), "--porcelain".to_owned()],
            &dir,
            &[],
            Duration::from_secs(30),
        );
        if let Ok(done) = status
            && done.code == Some(0)
        {
            let dirty = done.stdout.lines().filter(|l| !l.trim().is_empty()).count();
            if dirty >= threshold {
                findings.push(Finding {
                    gate: "backup",
                    policy: Some("backupReminder".into()),
                    level: Level::Recommended,
                    passed: false,
                    message: format!(
                        "{dirty} files have uncommitted changes in {}: back up your work with a commit (git add -A && git commit -m \"…\")",
                        dir.display()
                    ),
                });
            }
        }
    }
    findings
}

fn session_answer(harness: Harness, block: &str) -> HookAnswer {
    match harness {
        Harness::Cursor => HookAnswer::ok(format!("{}\n", json!({"additional_context": block}))),
        Harness::Claude | Harness::Codex => HookAnswer::ok(block),
    }
}

fn session_start(payload: &Payload, harness: Harness) -> HookAnswer {
    let mut setup = setup(payload);
    let mut housekeeping = Vec::new();
    if let Ok(db) = setup.db.as_mut() {
        match db.clean_stale(STALE_AFTER) {
            Ok((agents, claims)) if agents + claims > 0 => housekeeping.push(format!(
                "deregistered {agents} stale agent(s), released {claims} abandoned claim(s)"
            )),
            Ok(_) => {}
            Err(e) => housekeeping.push(format!("stale state not cleaned: {e}")),
        }
        if let Some(session) = payload.session_id.as_deref() {
            let _ = db.heartbeat(
                session,
                payload.agent_id.as_deref(),
                harness.as_str(),
                &payload.cwd,
            );
        }
        let rows = audit_rows(
            payload,
            harness,
            HookEvent::SessionStart,
            None,
            &[],
            (true, ""),
        );
        let _ = db.audit(&rows);
    }
    housekeeping.extend(setup.notes.iter().cloned());
    if let Err(e) = &setup.db {
        housekeeping.push(format!(
            "the gate database is unavailable ({e}); no memory was injected"
        ));
    }
    // Memory is read here only (never on the tool-call path), and never fails the hook.
    let memory =
        match weft_memory::MemoryDb::open_healing(&weft_memory::MemoryDb::path_for(&setup.root)) {
            Ok((db, healed)) => {
                housekeeping.extend(healed);
                match weft_memory::Memory::new(db).session_context(MEMORY_LINES) {
                    Ok(context) => Some(context),
                    Err(e) => {
                        housekeeping.push(format!("memory not injected: {e}"));
                        None
                    }
                }
            }
            Err(e) => {
                housekeeping.push(format!("memory not injected: {e}"));
                None
            }
        };
    let mut block = context_block(
        &setup.root,
        &payload.cwd,
        &setup.config,
        setup.db.as_ref().ok(),
        memory.as_ref(),
        payload.session_id.as_deref(),
        &housekeeping,
    );
    let compacted = payload.raw.get("source").and_then(Value::as_str) == Some("compact");
    if let (true, Ok(db), Some(session)) =
        (compacted, setup.db.as_ref(), payload.session_id.as_deref())
    {
        let restored = match db.snapshot(session) {
            Ok(Some((at, state))) if !state.is_empty() => format!(
                "Protocol state before the compaction (saved by pre-compact at {}):\n{state}\n",
                crate::context::time(at)
            ),
            _ => {
                let live = session_state(db, session);
                if live.is_empty() {
                    String::new()
                } else {
                    format!("Protocol state of this session:\n{live}\n")
                }
            }
        };
        if let Some(at) = block.rfind("</uap-context>") {
            block.insert_str(at, &restored);
        }
    }
    session_answer(harness, &block)
}

fn pre_compact(payload: &Payload, harness: Harness) -> HookAnswer {
    let mut setup = setup(payload);
    let mut saved = false;
    if let Ok(db) = setup.db.as_mut() {
        let rows = audit_rows(
            payload,
            harness,
            HookEvent::PreCompact,
            None,
            &[],
            (true, ""),
        );
        let _ = db.audit(&rows);
        if let Some(session) = payload.session_id.as_deref() {
            let _ = db.heartbeat(
                session,
                payload.agent_id.as_deref(),
                harness.as_str(),
                &payload.cwd,
            );
            let state = session_state(db, session);
            let trigger = payload.raw.get("trigger").and_then(Value::as_str);
            saved = db.save_snapshot(session, trigger, &state).is_ok();
        }
    }
    match harness {
        Harness::Cursor => HookAnswer::ok("{}\n"),
        Harness::Claude | Harness::Codex => HookAnswer::ok(if saved {
            "weft gate: the protocol state (worktree, task in progress, edited files, open loops) was saved; it is injected again when the session resumes after compaction.\n"
        } else {
            "weft gate: the protocol context (worktree rule, open loops, completion checklist) is injected again when the session resumes after compaction.\n"
        }),
    }
}

/// The protocol state of a session worth keeping across a compaction.
fn session_state(db: &GateDb, session: &str) -> String {
    let mut lines = db.session_state(session).unwrap_or_default();
    if let Ok(loops) = db.open_loops(0) {
        for (_, _, why) in loops.iter().filter(|(s, _, _)| s == session) {
            let first = why.lines().nth(1).unwrap_or(why.as_str()).trim();
            lines.push(format!("Refused \"done\" (still open): {first}"));
        }
    }
    lines.join("\n")
}

fn post_compact(payload: &Payload, harness: Harness) -> HookAnswer {
    let mut setup = setup(payload);
    let mut note = String::new();
    if let Ok(db) = setup.db.as_mut() {
        let summary = payload.raw.get("compact_summary").and_then(Value::as_str);
        let recorded = payload
            .session_id
            .as_deref()
            .is_some_and(|s| db.compacted(s, summary).unwrap_or(false));
        let rows = audit_rows(
            payload,
            harness,
            HookEvent::PostCompact,
            None,
            &[],
            (
                true,
                if recorded {
                    "compacted; the saved state is injected at the next session start"
                } else {
                    "compacted; no state had been saved"
                },
            ),
        );
        let _ = db.audit(&rows);
        if recorded {
            note = "weft gate: compaction recorded; the protocol state saved before it comes back with the session-start context (source compact).\n".into();
        }
    }
    match harness {
        Harness::Cursor => HookAnswer::ok("{}\n"),
        Harness::Claude | Harness::Codex => HookAnswer::ok(note),
    }
}

fn user_prompt_submit(payload: &Payload, harness: Harness) -> HookAnswer {
    let prompt = payload
        .raw
        .get("prompt")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if prompt.trim().is_empty() {
        return match harness {
            Harness::Cursor => HookAnswer::ok("{\"continue\":true}\n"),
            Harness::Claude | Harness::Codex => HookAnswer::ok(""),
        };
    }
    let plan = crate::classify::classify_task(prompt).plan();
    match harness {
        // Cursor's beforeSubmitPrompt cannot add context; it is let through.
        Harness::Cursor => HookAnswer::ok("{\"continue\":true}\n"),
        Harness::Claude | Harness::Codex => {
            HookAnswer::ok(format!("<uap-task>\n{plan}</uap-task>\n"))
        }
    }
}

fn stop(payload: &Payload, harness: Harness, subagent: bool) -> HookAnswer {
    let event = if subagent {
        HookEvent::SubagentStop
    } else {
        HookEvent::Stop
    };
    let quiet = || {
        HookAnswer::ok(if harness == Harness::Cursor {
            "{}\n"
        } else {
            ""
        })
    };
    // Cursor says why the loop ended; only a completed loop claims "done".
    if let Some(status) = payload.raw.get("status").and_then(Value::as_str)
        && status != "completed"
    {
        return quiet();
    }
    let root = project_root(&payload.cwd);
    let (config, config_error) = match GateConfig::load(&root) {
        Ok(c) => (c, None),
        Err(e) => (GateConfig::default(), Some(e.to_string())),
    };
    let mut setup = setup(payload);
    if subagent && !config.completion.subagents && config_error.is_none() {
        if let Ok(db) = setup.db.as_mut() {
            let rows = audit_rows(
                payload,
                harness,
                event,
                None,
                &[],
                (
                    true,
                    "sub-agent stop: checklist not configured for sub-agents",
                ),
            );
            let _ = db.audit(&rows);
        }
        return quiet();
    }
    let checklist = run_checklist(
        &config,
        &payload.cwd,
        setup.db.as_ref().ok(),
        payload.session_id.as_deref(),
    );
    // "done" is completion-like: the review-stage policies are checked too.
    let review = ToolInvocation::new(
        if subagent { "SubagentStop" } else { "Stop" },
        json!({"operation": "done"}),
        &payload.cwd,
    )
    .at(Stage::Review);
    let policies = setup
        .db
        .as_ref()
        .ok()
        .and_then(|db| db.policies().ok())
        .unwrap_or_default();
    let review_verdict = Gates::new(&root, config.clone())
        .with_policies(policies)
        .check(&review);
    let mut problems = Vec::new();
    if let Some(e) = &config_error {
        problems.push(format!("the completion checklist cannot be read: {e}"));
    }
    if !checklist.passed() {
        problems.push(checklist.reason());
    }
    if !review_verdict.allowed() {
        problems.push(format!(
            "review-stage policies refuse \"done\":\n{}",
            review_verdict.reason()
        ));
    }
    let refused = !problems.is_empty();
    let reason = problems.join("\n");
    if let Ok(db) = setup.db.as_mut() {
        let mut findings: Vec<Finding> = checklist
            .results
            .iter()
            .map(|r| Finding {
                gate: "completion",
                policy: Some(r.name.clone()),
                level: if r.required {
                    Level::Required
                } else {
                    Level::Recommended
                },
                passed: r.passed,
                message: r.detail.clone(),
            })
            .collect();
        findings.extend(review_verdict.findings.iter().cloned());
        let rows = audit_rows(
            payload,
            harness,
            event,
            None,
            &findings,
            (!refused, &reason),
        );
        let _ = db.audit(&rows);
    }
    if !refused {
        return quiet();
    }
    match harness {
        Harness::Cursor => HookAnswer::ok(format!("{}\n", json!({"followup_message": reason}))),
        Harness::Claude | Harness::Codex => HookAnswer {
            exit_code: 2,
            stdout: format!("{}\n", json!({"decision": "block", "reason": reason})),
            stderr: format!("{reason}\n"),
        },
    }
}
