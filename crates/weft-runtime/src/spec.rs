//! [`RunSpec`]: what a run is, recorded with it in one write, so any process can rebuild
//! it. Typed (a plain agent or a Standard Agents session) and portable: a session records a
//! snapshot of the project's definition files with their content hash instead of reading
//! them from a path at resume time.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use weft_provider::pricing::PriceTable;
use weft_store::{Durability, Pricing};

use crate::approval::ToolPolicy;

use crate::budget::Budget;

/// A run's recorded definition.
///
/// # Examples
///
/// ```
/// use weft_runtime::spec::{AgentProgram, Program, RunSpec};
///
/// let spec = RunSpec::new("What is 2 + 3?", Program::Agent(AgentProgram::new("scripted:demo.json")));
/// let stored = serde_json::to_value(&spec)?;
/// assert_eq!(stored["program"]["kind"], "agent");
/// assert_eq!(RunSpec::from_stored(&stored)?, spec);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSpec {
    /// The user input that starts the run.
    pub input: String,
    /// Durability of checkpoints, events, responses and the tool ledger.
    #[serde(default)]
    pub durability: Durability,
    /// What the run executes.
    pub program: Program,
    /// Limits on the whole run (kept by a resume).
    #[serde(default, skip_serializing_if = "is_unlimited")]
    pub budget: Budget,
    /// Model prices given for this run (`weft run --pricing FILE`), over the runtime's: a
    /// resume keeps charging new calls at them unless it is given others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<PriceTable>,
    /// The W3C `traceparent` of the run's first `invoke_agent` span (OpenTelemetry, when a
    /// process traced the run): a resumed process continues the same trace under it (see
    /// [`crate::trace`]). Written by the runtime, never by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The id a client gave the input message (a chat's UI message id, `weft serve`), so
    /// the thread's history shows the message with the id the client knows it by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_id: Option<String>,
    /// The thread-queue entry the input message is (a run the
    /// [`QueueDriver`](crate::queue_driver::QueueDriver) started for a queued message): the
    /// input message keeps the entry's id, and the entry leaves the queue only once the
    /// run's first checkpoint holds the message — a crash in between leaves it queued, and
    /// whichever run takes it next finds it held instead of adding it twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_input: Option<String>,
}

fn is_unlimited(budget: &Budget) -> bool {
    *budget == Budget::default()
}

impl RunSpec {
    /// A spec with `sync` durability.
    pub fn new(input: impl Into<String>, program: Program) -> Self {
        RunSpec {
            input: input.into(),
            durability: Durability::Sync,
            program,
            budget: Budget::default(),
            pricing: None,
            trace: None,
            input_id: None,
            queued_input: None,
        }
    }

    /// Reads a stored spec, including the untyped form written before this crate existed
    /// (`model`, `tools`, … at the top level and an optional `standard` object).
    ///
    /// # Errors
    /// When the value is neither form.
    pub fn from_stored(value: &Value) -> Result<RunSpec, serde_json::Error> {
        if value.get("program").is_some() {
            return serde_json::from_value(value.clone());
        }
        let legacy: LegacySpec = serde_json::from_value(value.clone())?;
        let program = match legacy.standard {
            Some(standard) => Program::Session(SessionProgram {
                project: None,
                workspace: standard.project,
                agent: standard.agent,
                model_override: standard.model,
                project_dir: None,
                sandbox: None,
                base_urls: Default::default(),
                profile: None,
            }),
            None => Program::Agent(AgentProgram {
                model: legacy.model,
                system: legacy.system,
                tools: legacy.tools,
                max_steps: legacy.max_steps,
                pricing: legacy.pricing,
                role: legacy.role,
                policy: ToolPolicy::default(),
            }),
        };
        Ok(RunSpec {
            input: legacy.input,
            durability: legacy.durability,
            program,
            budget: Budget::default(),
            pricing: None,
            trace: None,
            input_id: None,
            queued_input: None,
        })
    }

    /// The role recorded in the lineage: the agent's name or role.
    pub fn role(&self) -> &str {
        match &self.program {
            Program::Agent(a) => &a.role,
            Program::Session(s) => &s.agent,
        }
    }
}

/// What a run executes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Program {
    /// One agent with a model, a system prompt and tools from a [`crate::ToolRegistry`].
    Agent(AgentProgram),
    /// A Standard Agents session (run by the [`crate::Sessions`] the runtime was given).
    Session(SessionProgram),
}

/// A plain agent run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentProgram {
    /// Model reference, `PROVIDER:MODEL`.
    pub model: String,
    /// System prompt.
    #[serde(default)]
    pub system: Option<String>,
    /// Tools, by registry name.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Most steps (`None`: unbounded).
    #[serde(default)]
    pub max_steps: Option<u64>,
    /// Token prices.
    #[serde(default)]
    pub pricing: Option<Pricing>,
    /// The agent's role, for lineage.
    #[serde(default = "default_role")]
    pub role: String,
    /// Which tools wait for a person, which hooks run before calls.
    #[serde(default, skip_serializing_if = "is_default_policy")]
    pub policy: ToolPolicy,
}

fn is_default_policy(policy: &ToolPolicy) -> bool {
    *policy == ToolPolicy::default()
}

impl AgentProgram {
    /// An agent on `model` with no system prompt and no tools.
    pub fn new(model: impl Into<String>) -> Self {
        AgentProgram {
            model: model.into(),
            system: None,
            tools: Vec::new(),
            max_steps: None,
            pricing: None,
            role: default_role(),
            policy: ToolPolicy::default(),
        }
    }
}

fn default_role() -> String {
    "agent".into()
}

/// A tool of an agent program: a registry name and its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The registry name.
    pub name: String,
    /// Configuration handed to the tool's factory.
    #[serde(default)]
    pub config: Value,
}

/// A Standard Agents session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionProgram {
    /// The project's definitions as they were when the run started (`None` for runs
    /// recorded before snapshots existed: the project is read from `workspace`).
    #[serde(default)]
    pub project: Option<ProjectSnapshot>,
    /// The folder the agent's tools work in (and where the project was).
    pub workspace: PathBuf,
    /// The agent.
    pub agent: String,
    /// `--model` of the command that started the run.
    #[serde(default)]
    pub model_override: Option<String>,
    /// The project folder, when it is not the workspace (`weft run --workspace DIR`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_dir: Option<PathBuf>,
    /// `--sandbox` of the command that started the run (`workspace`, `strict` or `none`;
    /// `None`: the project's `sandbox` key decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// The endpoint of each model provider the run calls (`provider name → base URL`), as
    /// settled when the run started (`--base-url`, the project's `[providers.NAME]`, its
    /// `[env]` or the environment), so a resume reaches the same server without the
    /// environment that started it. Never a key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub base_urls: BTreeMap<String, String>,
    /// `--profile` of the command that started the run (`runtime`: the Agent Runtime Spec's
    /// profile, see [`crate::profile`]; `None`: the project's `[runtime]` table decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

impl SessionProgram {
    /// The project folder: `project_dir`, else the workspace.
    pub fn project_folder(&self) -> &std::path::Path {
        self.project_dir.as_deref().unwrap_or(&self.workspace)
    }
}

/// The definition files of a project (paths relative to the project folder → contents),
/// with a content hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectSnapshot {
    /// `relative path → text`.
    pub files: BTreeMap<String, String>,
    /// SHA-256 over the files (path and content), hex.
    pub hash: String,
}

impl ProjectSnapshot {
    /// A snapshot of `files`, hashed.
    pub fn new(files: BTreeMap<String, String>) -> Self {
        let mut hasher = Sha256::new();
        for (path, text) in &files {
            hasher.update(path.as_bytes());
            hasher.update([0]);
            hasher.update(text.as_bytes());
            hasher.update([0]);
        }
        let hash = hex(&hasher.finalize());
        ProjectSnapshot { files, hash }
    }

    /// The files that differ between `self` and `other` (added, removed or changed).
    pub fn changed_files(&self, other: &ProjectSnapshot) -> Vec<String> {
        let mut changed: Vec<String> = self
            .files
            .iter()
            .filter(|(path, text)| other.files.get(*path) != Some(*text))
            .map(|(path, _)| path.clone())
            .collect();
        changed.extend(
            other
                .files
                .keys()
                .filter(|path| !self.files.contains_key(*path))
                .cloned(),
        );
        changed.sort();
        changed
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[derive(Deserialize)]
struct LegacySpec {
    #[serde(default)]
    model: String,
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    tools: Vec<ToolSpec>,
    input: String,
    #[serde(default)]
    durability: Durability,
    #[serde(default)]
    max_steps: Option<u64>,
    #[serde(default)]
    pricing: Option<Pricing>,
    #[serde(default = "default_role")]
    role: String,
    #[serde(default)]
    standard: Option<LegacyStandard>,
}

#[derive(Deserialize)]
struct LegacyStandard {
    project: PathBuf,
    agent: String,
    #[serde(default)]
    model: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_spec_written_before_weft_runtime_reads_as_a_session() {
        let stored = json!({"model": "scripted-turns:proj/script.json", "system": "s",
            "tools": [{"name": "run_command", "config": {"root": "/p"}}], "input": "go",
            "durability": "sync", "max_steps": null, "pricing": null, "role": "a",
            "standard": {"project": "/p", "agent": "a", "type": "ai_human", "model": null}});
        let spec = RunSpec::from_stored(&stored).unwrap();
        assert_eq!(spec.input, "go");
        let Program::Session(session) = spec.program else {
            panic!("not a session")
        };
        assert_eq!(session.workspace, PathBuf::from("/p"));
        assert_eq!(session.agent, "a");
        assert!(session.project.is_none());
    }

    #[test]
    fn snapshots_hash_their_content_and_name_what_changed() {
        let a = ProjectSnapshot::new(BTreeMap::from([
            ("weft.toml".into(), "x".into()),
            ("agents/a.toml".into(), "1".into()),
        ]));
        let b = ProjectSnapshot::new(BTreeMap::from([
            ("weft.toml".into(), "x".into()),
            ("agents/a.toml".into(), "2".into()),
            ("tools/t.toml".into(), "t".into()),
        ]));
        assert_ne!(a.hash, b.hash);
        assert_eq!(a.changed_files(&b), vec!["agents/a.toml", "tools/t.toml"]);
        assert_eq!(a.hash, ProjectSnapshot::new(a.files.clone()).hash);
    }
}
