//! The profile's policy stage of the tool pipeline ([`Stage::Policy`]): one engine for the
//! runtime spec's rules, which the project's gates (`weft-gate`'s policy database, a stage
//! below it) extend rather than replace. In order, a call is refused (an error result the
//! model reads, logged as `tool_call_refused` with stage `policy`) when:
//!
//! 1. the policy does not offer its tool (`allowedTools`, `deniedTools`): the model should
//!    not have seen it, and gets no result from it;
//! 2. the run is in recovery (§5.2(3)) and the tool is not `complete_task`;
//! 3. the response called `complete_task` together with other tools (§5.1(3)): every call
//!    of that response is refused, so the model tries again with one;
//! 4. the mode is `interactive` (§5.3(4)) and an earlier call of the same response was
//!    taken: one call per turn, the others refused (not dropped), each told to come again.
//!
//! 5. the agent's SOP role (§7, [`super::sop`]) is in a phase that does not offer the tool;
//!
//! 6. the policy engine's rules ([`super::rules`], `[[runtime.policy.rules]]`) deny it; a rule
//!    deciding `allow_with_confirm` marks the call [`NeedsApproval`] for the approval stage.
//!
//! A call that passes is **sanitized** (§5.12(4)) before the stages below it see it: its
//! arguments' JSON may not exceed [`MAX_INPUT_BYTES`], control characters (other than tab,
//! line feed and carriage return) are removed from every string, and path arguments (`path`,
//! `paths`, `cwd`, `dir`, `file`) are normalized (`./a//b/../c` → `a/c`). A `complete_task`
//! call that passes has its `artifacts` checked (each must be a file in the workspace) and
//! registered in the store's artifacts table (size, hash, MIME type).

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use weft_provider::pipeline::{Invocation, Next, Stage, ToolLayer, ToolOutcome};
use weft_provider::tool::BoxFuture;
use weft_store::{ArtifactType, Artifacts as _, NewArtifact};

use super::rules::{Decision, PolicyInput, RuleSet};
use super::sop::SopExecutor;
use super::{COMPLETE_TASK, PolicyMode, RuntimeProfile};
use crate::approval::NeedsApproval;
use crate::ledger::RunContext;

/// What the profile's stage and its orchestrator share for one agent task.
#[derive(Debug, Default)]
pub struct ProfileFlags {
    recovering: AtomicBool,
}

impl ProfileFlags {
    /// Whether the task is in its grace period (only `complete_task` may run).
    pub fn recovering(&self) -> bool {
        self.recovering.load(Ordering::Acquire)
    }

    pub(crate) fn set_recovering(&self, on: bool) {
        self.recovering.store(on, Ordering::Release);
    }
}

/// The profile's policy stage for one agent task.
#[derive(Debug, Clone)]
pub struct ProfileLayer {
    profile: Arc<RuntimeProfile>,
    /// The policy's rules (built once).
    rules: Arc<RuleSet>,
    flags: Arc<ProfileFlags>,
    /// The durable run (artifacts are registered in its store); `None`: in memory.
    run: Option<Arc<RunContext>>,
    /// Where `complete_task`'s artifact paths resolve.
    workspace: PathBuf,
    /// The agent's SOP workflow (§7), when it has a role.
    sop: Option<Arc<SopExecutor>>,
}

impl ProfileLayer {
    /// The stage for a task under `profile`, sharing `flags` with its orchestrator.
    pub fn new(
        profile: Arc<RuntimeProfile>,
        flags: Arc<ProfileFlags>,
        run: Option<Arc<RunContext>>,
        workspace: impl Into<PathBuf>,
    ) -> Self {
        ProfileLayer {
            rules: Arc::new(profile.policy.rule_set()),
            profile,
            flags,
            run,
            workspace: workspace.into(),
            sop: None,
        }
    }

    /// The same stage holding the calls to `sop`'s current phase (§7): a tool of another
    /// phase is refused with the phase it belongs to, and `complete_task` waits for the
    /// workflow's last phase and its gates.
    #[must_use]
    pub fn with_sop(mut self, sop: Arc<SopExecutor>) -> Self {
        self.sop = Some(sop);
        self
    }

    /// Why `inv` may not run under the profile, if it may not.
    fn refusal(&self, inv: &Invocation<'_>) -> Option<String> {
        let tool = inv.tool.name.as_str();
        let policy = &self.profile.policy;
        if !policy.offers(tool) {
            return Some(format!(
                "{tool} is not allowed for this agent (runtime policy: allowedTools / deniedTools); it was not run"
            ));
        }
        if let Some(refusal) = self.sop.as_ref().and_then(|sop| sop.refusal(tool)) {
            return Some(refusal);
        }
        if self.flags.recovering() && tool != COMPLETE_TASK {
            return Some(format!(
                "{tool} was not run: the turn limit was reached and the task is in recovery; only complete_task \
                 may be called now — call it alone, with a summary of what was done"
            ));
        }
        let with_completion =
            inv.round.len() > 1 && inv.round.iter().any(|c| c.tool_name == COMPLETE_TASK);
        if with_completion {
            return Some(if tool == COMPLETE_TASK {
                "complete_task must be called alone in its turn: this response also called other tools, so \
                 none of its calls was run; finish those first, then call complete_task by itself"
                    .to_owned()
            } else {
                format!(
                    "{tool} was not run: this response also called complete_task, which must be alone in its \
                     turn; none of the response's calls was run"
                )
            });
        }
        if policy.mode == PolicyMode::Interactive && inv.index > 0 {
            return Some(format!(
                "{tool} was not run: the runtime policy is interactive, one tool call per turn, and this was \
                 call {} of {} in the response; call it again in its own turn",
                inv.index + 1,
                inv.round.len()
            ));
        }
        None
    }

    /// What the rules see of `inv`: its action, the path it touches in the workspace, the
    /// file's size (reads).
    async fn policy_input(&self, inv: &Invocation<'_>) -> PolicyInput {
        let action = match inv.tool.name.as_str() {
            "read_file" | "list_dir" | "search_code" => "file.read".to_owned(),
            "write_file" => "file.write".to_owned(),
            other => format!("tool.{other}"),
        };
        let root = self.workspace.to_string_lossy().into_owned();
        let path = inv.arguments.get("path").and_then(Value::as_str).map(|p| {
            let p = Path::new(p);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                self.workspace.join(p)
            }
        });
        let file_size_bytes = match (&path, action.as_str()) {
            (Some(path), "file.read") => tokio::fs::metadata(path).await.ok().map(|m| m.len()),
            _ => None,
        };
        let output_roots = if self.profile.policy.output_roots.is_empty() {
            vec![root.clone()]
        } else {
            self.profile
                .policy
                .output_roots
                .iter()
                .map(|r| self.workspace.join(r).to_string_lossy().into_owned())
                .collect()
        };
        PolicyInput {
            action,
            path: path.map(|p| p.to_string_lossy().into_owned()),
            grant_roots: vec![root],
            output_roots,
            file_size_bytes,
            ..PolicyInput::default()
        }
    }

    /// Checks and registers `complete_task`'s artifacts: an error text when one is not a file
    /// of the workspace.
    async fn register_artifacts(&self, arguments: &Value) -> Result<(), String> {
        let listed: Vec<String> = arguments
            .get("artifacts")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let mut files = Vec::with_capacity(listed.len());
        for path in &listed {
            let Some(file) = inside(&self.workspace, path) else {
                return Err(format!(
                    "artifact {path:?} is outside the workspace; list files the task created, relative to the workspace"
                ));
            };
            if !tokio::fs::metadata(&file).await.is_ok_and(|m| m.is_file()) {
                return Err(format!(
                    "artifact {path:?} is not a file in the workspace; list only files that exist"
                ));
            }
            files.push((path.clone(), file));
        }
        let Some(run) = &self.run else {
            return Ok(());
        };
        for (path, file) in files {
            let artifact = NewArtifact {
                run_id: run.run_id().to_owned(),
                agent_id: run.agent_id().to_owned(),
                checkpoint_id: None,
                artifact_type: ArtifactType::File,
                path: Some(file.to_string_lossy().into_owned()),
                content: None,
                media_type: Some(mime_type(&path).to_owned()),
            };
            run.store()
                .put_artifact(artifact)
                .await
                .map_err(|e| format!("artifact {path:?} could not be registered: {e}"))?;
        }
        Ok(())
    }
}

impl ToolLayer for ProfileLayer {
    fn stage(&self) -> Stage {
        Stage::Policy
    }

    fn for_child(&self) -> Option<Arc<dyn ToolLayer>> {
        Some(Arc::new(ChildPolicy {
            layer: self.clone(),
            log: true,
        }))
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        let refusal = self
            .refusal(inv)
            .map_or_else(|| sanitize(&mut inv.arguments).err(), Some);
        if let Some(reason) = refusal {
            return Box::pin(async move {
                ToolOutcome::Refused {
                    stage: Stage::Policy,
                    reason,
                }
            });
        }
        if inv.tool.name != COMPLETE_TASK && !self.profile.policy.has_rules() {
            return next.run(inv);
        }
        Box::pin(async move {
            // complete_task always passes the rules: it is the only way a task ends.
            if self.profile.policy.has_rules() && inv.tool.name != COMPLETE_TASK {
                let input = self.policy_input(inv).await;
                let decided = self.rules.decide(&input);
                match decided.decision {
                    Decision::Allow => {}
                    Decision::AllowWithConfirm => inv.context.extensions.insert(NeedsApproval {
                        rule: decided.rule_id.unwrap_or_else(|| "fallback".to_owned()),
                    }),
                    Decision::Deny => {
                        return ToolOutcome::Refused {
                            stage: Stage::Policy,
                            reason: denial(&inv.tool.name, &input, decided.rule_id, decided.reason),
                        };
                    }
                }
            }
            if inv.tool.name != COMPLETE_TASK {
                return next.run(inv).await;
            }
            if let Some(sop) = &self.sop
                && let Err(reason) = sop.may_complete(self.flags.recovering()).await
            {
                return ToolOutcome::Refused {
                    stage: Stage::Policy,
                    reason,
                };
            }
            if let Err(reason) = self.register_artifacts(&inv.arguments).await {
                return ToolOutcome::Refused {
                    stage: Stage::Policy,
                    reason,
                };
            }
            next.run(inv).await
        })
    }
}

/// The profile's policy for a sub-agent's calls (§5.12(3): a child never has more than its
/// parent): the parent's `deniedTools` and rules hold, and inputs are sanitized. The parent's
/// task rules — completion, recovery, interactive mode — and its `allowedTools` (its own
/// registry) are the parent's, not the child's.
#[derive(Debug, Clone)]
struct ChildPolicy {
    layer: ProfileLayer,
    /// Whether it logs its refusals (a sub-agent's pipeline has no replay stage to do it).
    log: bool,
}

impl ProfileLayer {
    /// The stage a session started by this agent as a subagent (a child run with its own
    /// pipeline, whose replay stage logs refusals) puts in its policy place: the parent's
    /// `deniedTools` and rules, and input sanitizing.
    pub fn inherited(&self) -> Arc<dyn ToolLayer> {
        Arc::new(ChildPolicy {
            layer: self.clone(),
            log: false,
        })
    }
}

impl ToolLayer for ChildPolicy {
    fn stage(&self) -> Stage {
        Stage::Policy
    }

    fn for_child(&self) -> Option<Arc<dyn ToolLayer>> {
        Some(Arc::new(self.clone()))
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let layer = &self.layer;
            let tool = inv.tool.name.clone();
            let mut refusal = if layer.profile.policy.denied_tools.contains(&tool) {
                Some(format!(
                    "{tool} is denied by the runtime policy of the agent that started this sub-agent; it was not run"
                ))
            } else {
                sanitize(&mut inv.arguments).err()
            };
            if refusal.is_none() && layer.profile.policy.has_rules() && tool != COMPLETE_TASK {
                let input = layer.policy_input(inv).await;
                let decided = layer.rules.decide(&input);
                match decided.decision {
                    Decision::Allow => {}
                    Decision::AllowWithConfirm => inv.context.extensions.insert(NeedsApproval {
                        rule: decided.rule_id.unwrap_or_else(|| "fallback".to_owned()),
                    }),
                    Decision::Deny => {
                        refusal = Some(denial(&tool, &input, decided.rule_id, decided.reason))
                    }
                }
            }
            let Some(reason) = refusal else {
                return next.run(inv).await;
            };
            if let Some(run) = layer.run.as_ref().filter(|_| self.log) {
                run.emit_call(
                    &inv.call.tool_call_id,
                    crate::event::EventKind::ToolCallRefused {
                        tool,
                        stage: Stage::Policy.as_str().to_owned(),
                        reason: Value::String(reason.clone()),
                        arguments: inv.arguments.clone(),
                        sub_agent: true,
                    },
                )
                .await;
            }
            ToolOutcome::Refused {
                stage: Stage::Policy,
                reason,
            }
        })
    }
}

/// Why the rules refuse a call.
fn denial(tool: &str, input: &PolicyInput, rule: Option<String>, reason: Option<String>) -> String {
    format!(
        "{tool} was not run: the runtime policy denies {} of {}{}{}",
        input.action,
        input.path.as_deref().unwrap_or("this call"),
        rule.map_or_else(String::new, |id| format!(" (rule {id})")),
        reason.map_or_else(String::new, |r| format!(": {r}")),
    )
}

/// The largest arguments (JSON text, bytes) a call may have under the profile.
pub const MAX_INPUT_BYTES: usize = 1 << 20;

/// The argument keys whose strings are paths.
const PATH_KEYS: [&str; 5] = ["path", "paths", "cwd", "dir", "file"];

/// Sanitizes a call's arguments in place (§5.12(4)): size bounded, control characters
/// removed, paths normalized. `Err` with the reason when they are too large.
///
/// # Examples
///
/// ```
/// use serde_json::json;
/// use weft_runtime::profile::layer::sanitize;
///
/// let mut args = json!({"path": "./notes//draft/../a.md", "content": "ok\u{7}\n"});
/// sanitize(&mut args).unwrap();
/// assert_eq!(args, json!({"path": "notes/a.md", "content": "ok\n"}));
/// ```
///
/// # Errors
/// When the arguments' JSON exceeds [`MAX_INPUT_BYTES`].
pub fn sanitize(arguments: &mut Value) -> Result<(), String> {
    let size = serde_json::to_string(arguments).map_or(0, |text| text.len());
    if size > MAX_INPUT_BYTES {
        return Err(format!(
            "the call's arguments are {size} bytes, more than the runtime policy's limit of {MAX_INPUT_BYTES}; \
             it was not run: send smaller arguments (write large content in parts)"
        ));
    }
    clean(arguments, false);
    Ok(())
}

fn clean(value: &mut Value, is_path: bool) {
    match value {
        Value::String(text) => {
            if text
                .chars()
                .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
            {
                text.retain(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'));
            }
            if is_path {
                let normalized = normalize_path(text);
                if normalized != *text {
                    *text = normalized;
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| clean(item, is_path)),
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                clean(item, PATH_KEYS.contains(&key.as_str()));
            }
        }
        _ => {}
    }
}

/// `path` normalized lexically: no `.`, no empty parts, `x/..` removed (leading `..` kept).
fn normalize_path(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|last| *last != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// `path` under `root`, when it stays inside it (`..` and absolute paths elsewhere refused).
fn inside(root: &Path, path: &str) -> Option<PathBuf> {
    let path = Path::new(path);
    // An absolute path elsewhere keeps its root, which the loop below refuses.
    let relative = path.strip_prefix(root).unwrap_or(path);
    let mut out = root.to_path_buf();
    for part in relative.components() {
        match part {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

/// The media type of a file, by its extension (`application/octet-stream` when unknown).
pub fn mime_type(path: &str) -> &'static str {
    let ext = Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" | "log" => "text/plain",
        "json" => "application/json",
        "toml" => "application/toml",
        "yaml" | "yml" => "application/yaml",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "js" | "mjs" => "text/javascript",
        "ts" => "text/x-typescript",
        "rs" => "text/x-rust",
        "py" => "text/x-python",
        "sh" => "text/x-shellscript",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "pdf" => "application/pdf",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests;
