//! Loading and validating a Weft project folder:
//!
//! ```text
//! PROJECT/
//!   weft.toml            # or weft.json: name, defaultAgent, model, env
//!   agents/NAME.toml     # or NAME.json: one AgentDefinition per file
//!   prompts/NAME.toml    # one PromptDefinition per file
//!   tools/NAME.toml      # one ToolDefinition per file (optional folder)
//! ```
//!
//! TOML and JSON files use the same keys. Every problem is collected (not only the first)
//! and reported with its file, key path and a sentence; [`Project::load`] returns a project
//! only when there are none.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_provider::pricing::{PriceSource, PriceTable};
use weft_runtime::spec::ProjectSnapshot;

use crate::definition::{
    AgentDefinition, AgentType, ProjectConfig, PromptDefinition, PromptTool, Side, ToolDefinition,
};
use crate::error::{Problem, ProjectError};

/// The built-in tools (from `weft-tools`) a prompt may name.
pub const BUILTIN_TOOLS: [&str; 8] = [
    "read_file",
    "write_file",
    "list_dir",
    "search_code",
    "run_command",
    "read_url",
    "search_web",
    "complete_task",
];

/// A definition and the file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded<T> {
    /// The file, relative to the project folder.
    pub file: PathBuf,
    /// The definition.
    pub value: T,
}

/// Where a run finds one of its models: the file and key that name it, and the reference.
///
/// # Examples
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("weft.toml"), "model = \"openai:gpt-4o-mini\"\n")?;
/// std::fs::create_dir(dir.path().join("agents"))?;
/// std::fs::create_dir(dir.path().join("prompts"))?;
/// std::fs::write(dir.path().join("agents/a.toml"), "name = \"a\"\n[sideA]\nprompt = \"p\"\n")?;
/// std::fs::write(dir.path().join("prompts/p.toml"), "name = \"p\"\n")?;
/// let project = weft_standard::Project::load(dir.path())?;
/// let agent = project.agent("a").ok_or("no agent")?;
/// let sites = project.model_sites(agent);
/// assert_eq!(sites[0].reference, "openai:gpt-4o-mini");
/// assert_eq!(sites[0].file, std::path::Path::new("weft.toml"));
/// assert_eq!(sites[0].key, "model");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSite {
    /// The file that names the model, relative to the project folder (a prompt's file, or
    /// `weft.toml` for the project's default model).
    pub file: PathBuf,
    /// The key in that file (`model`).
    pub key: String,
    /// The reference as written (`PROVIDER:MODEL`).
    pub reference: String,
}

/// Whether `name` is a tool name every provider Weft speaks accepts: 1 to 64 letters, digits,
/// `_` or `-`, starting with a letter or `_` (OpenAI and Anthropic take
/// `^[a-zA-Z0-9_-]{1,64}$`; Gemini also wants a letter or `_` first).
///
/// # Examples
///
/// ```
/// assert!(weft_standard::valid_tool_name("request_changes"));
/// assert!(!weft_standard::valid_tool_name("app rove!"));
/// assert!(!weft_standard::valid_tool_name("1st"));
/// ```
pub fn valid_tool_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=64).contains(&bytes.len())
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

/// A loaded, valid project.
#[derive(Debug, Clone)]
pub struct Project {
    dir: PathBuf,
    config: ProjectConfig,
    agents: BTreeMap<String, Loaded<AgentDefinition>>,
    prompts: BTreeMap<String, Loaded<PromptDefinition>>,
    tools: BTreeMap<String, Loaded<ToolDefinition>>,
}

/// What a name in a prompt's `tools` list refers to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ToolKind<'a> {
    /// A built-in tool of `weft-tools`.
    Builtin,
    /// A project tool.
    Project(&'a ToolDefinition),
    /// An agent with `exposeAsTool`.
    Agent(&'a AgentDefinition),
    /// A prompt with `exposeAsTool` (a prompt tool): a name that is no project tool, agent
    /// or built-in tool.
    Prompt(&'a PromptDefinition),
    /// `mcp:NAME`: every tool of the MCP server `NAME` of `[mcpServers]` (named
    /// `NAME__TOOL`, as the server lists them while the run goes on).
    Mcp(&'a str),
    /// One of the scheduled-effect tools (`schedule_effect`, `get_scheduled_effects`,
    /// `remove_scheduled_effect`: [`crate::effect_tools`]).
    Effect,
}

/// The prefix of a prompt's tool entry that offers an MCP server's tools (`mcp:NAME`).
pub const MCP_PREFIX: &str = weft_runtime::profile::sop::MCP_ENTRY_PREFIX;

impl Project {
    /// Loads and validates the project in `dir`.
    ///
    /// # Errors
    /// [`ProjectError::Io`] when the folder cannot be read; [`ProjectError::Invalid`] with
    /// every problem found otherwise.
    pub fn load(dir: impl AsRef<Path>) -> Result<Project, ProjectError> {
        let dir = dir.as_ref().to_path_buf();
        let io = |source| ProjectError::Io {
            path: dir.clone(),
            source,
        };
        if !std::fs::metadata(&dir).map_err(io)?.is_dir() {
            return Err(io(std::io::Error::other("not a folder")));
        }
        Project::load_from(&dir, &Source::Disk)
    }

    /// Loads and validates a project from its [`ProjectSnapshot`] (the definitions a run
    /// recorded), as if it were in `dir` (relative model script paths and the workspace
    /// resolve against `dir`).
    ///
    /// # Errors
    /// [`ProjectError::Invalid`] with every problem found.
    pub fn from_snapshot(
        snapshot: &ProjectSnapshot,
        dir: impl AsRef<Path>,
    ) -> Result<Project, ProjectError> {
        Project::load_from(dir.as_ref(), &Source::Snapshot(&snapshot.files))
    }

    /// The project's definition files as they are on disk now (`weft.toml`/`weft.json`,
    /// `agents/`, `prompts/`, `tools/`), with their content hash.
    ///
    /// # Errors
    /// When a file cannot be read.
    pub fn snapshot(&self) -> Result<ProjectSnapshot, ProjectError> {
        snapshot_of(&self.dir)
    }

    fn load_from(dir: &Path, source: &Source<'_>) -> Result<Project, ProjectError> {
        let mut problems = Vec::new();
        let mut loader = Loader {
            dir,
            source,
            problems: &mut problems,
        };
        let config = loader.config();
        let agents = loader.folder::<AgentDefinition>("agents", |a| &a.name);
        let prompts = loader.folder::<PromptDefinition>("prompts", |p| &p.name);
        let tools = loader.folder::<ToolDefinition>("tools", |t| &t.name);
        let project = Project {
            dir: dir.to_path_buf(),
            config: config.unwrap_or_default(),
            agents,
            prompts,
            tools,
        };
        project.validate(&mut problems);
        // The pricing file is read from disk (it is not a definition file, so a run's
        // snapshot does not hold it): a project loaded from disk must have a readable one.
        if matches!(source, Source::Disk)
            && let Err(problem) = project.prices()
        {
            problems.push(problem);
        }
        if problems.is_empty() {
            Ok(project)
        } else {
            Err(ProjectError::Invalid(problems))
        }
    }

    /// The project's `[telemetry]` settings (default: none; tracing then follows the
    /// `OTEL_*` environment variables alone).
    ///
    /// # Errors
    /// A [`Problem`] at `telemetry` for unknown keys or values of the wrong type.
    pub fn telemetry(&self) -> Result<weft_otel::Settings, Problem> {
        match &self.config.telemetry {
            None => Ok(weft_otel::Settings::default()),
            Some(value) => weft_otel::Settings::from_value(value).map_err(|e| {
                let message = match e {
                    weft_otel::TelemetryError::Settings(m) => m,
                    other => other.to_string(),
                };
                Problem::new("weft.toml", "telemetry", message)
            }),
        }
    }

    /// The project's `pricing`: its price table (from the file it names, relative to the
    /// project folder, or inline), `None` when it sets none.
    ///
    /// # Examples
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// std::fs::create_dir_all(dir.path().join("agents"))?;
    /// std::fs::write(dir.path().join("agents/a.toml"), "name = \"a\"\n[sideA]\nprompt = \"p\"\n")?;
    /// std::fs::create_dir_all(dir.path().join("prompts"))?;
    /// std::fs::write(dir.path().join("prompts/p.toml"), "name = \"p\"\nmodel = \"openai-compatible:llama3.2\"\n")?;
    /// std::fs::write(dir.path().join("weft.toml"), "[pricing.openai-compatible]\n\"*\" = { input = 0, output = 0 }\n")?;
    /// let project = weft_standard::Project::load(dir.path())?;
    /// let prices = project.prices().map_err(|p| p.to_string())?.ok_or("the project prices its models")?;
    /// assert_eq!(prices.quote("openai-compatible", "llama3.2").map(|q| q.input), Some(0.0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A [`Problem`] naming the file (`weft.toml` or the pricing file) and the key at fault:
    /// a file that cannot be read, a malformed table.
    pub fn prices(&self) -> Result<Option<PriceTable>, Problem> {
        let config_file = "weft.toml";
        let Some(pricing) = &self.config.pricing else {
            return Ok(None);
        };
        let (file, text) = match pricing {
            Value::String(path) => {
                let text = std::fs::read_to_string(self.dir.join(path)).map_err(|e| {
                    Problem::new(config_file, "pricing", format!("cannot read {path}: {e}"))
                })?;
                (PathBuf::from(path), text)
            }
            Value::Object(_) => {
                let text = toml::to_string(pricing).map_err(|e| {
                    Problem::new(config_file, "pricing", format!("not a price table: {e}"))
                })?;
                (PathBuf::from(config_file), text)
            }
            _ => {
                return Err(Problem::new(
                    config_file,
                    "pricing",
                    "expected a file name (pricing = \"prices.toml\") or a [pricing] table",
                ));
            }
        };
        let inline = file == Path::new(config_file);
        PriceTable::parse(&text, PriceSource::Override)
            .map(Some)
            .map_err(|e| {
                let key = if inline {
                    format!("pricing.{}", e.key)
                } else {
                    e.key
                };
                Problem::new(file, key, e.message)
            })
    }

    /// The model references (`PROVIDER:MODEL`) a run of agent `name` calls: `model` (a
    /// `--model` override) or the models of its sides' prompts, resolved as sessions
    /// resolve them.
    pub fn models_of(&self, name: &str, model: Option<&str>) -> Vec<String> {
        if let Some(model) = model {
            return vec![self.model_reference(model)];
        }
        let Some(agent) = self.agent(name) else {
            return Vec::new();
        };
        let mut out: Vec<String> = Vec::new();
        for (_, side) in agent.sides() {
            if let Some(m) = self.prompt(&side.prompt).and_then(|p| self.model_of(p)) {
                let m = self.model_reference(m);
                if !out.contains(&m) {
                    out.push(m);
                }
            }
        }
        out
    }

    /// The project folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What a run's tools may not touch, and how its commands are sandboxed: the run store
    /// (`store`, a SQLite file; its `.weft/` folder when it is the default one) is hidden; the
    /// definition files are read-only unless `toolsMayEditDefinitions = true`; the sandbox
    /// mode is `mode` (e.g. `--sandbox`), else `weft.toml`'s `sandbox`, else `workspace`.
    /// Paths outside the workspace need no protection from the file tools (they cannot reach
    /// them) and are not visible inside the command sandbox at all.
    pub fn confinement(
        &self,
        store: Option<&Path>,
        mode: Option<weft_tools::Mode>,
    ) -> weft_tools::Confinement {
        let dir = std::fs::canonicalize(&self.dir).unwrap_or_else(|_| self.dir.clone());
        let mut protected = Vec::new();
        if let Some(store) = store {
            let store = absolute_canonical(store);
            match store.parent() {
                // The store's own folder (`.weft/`): the database, its WAL and journal files.
                Some(parent) if parent.file_name().is_some_and(|n| n == ".weft") => {
                    protected.push((parent.to_path_buf(), weft_tools::Protection::Hidden));
                }
                _ => {
                    for suffix in ["", "-wal", "-shm", "-journal"] {
                        let mut name = store.clone().into_os_string();
                        name.push(suffix);
                        protected.push((PathBuf::from(name), weft_tools::Protection::Hidden));
                    }
                }
            }
        }
        if !self.config.tools_may_edit_definitions {
            for name in ["weft.toml", "weft.json", "agents", "prompts", "tools"] {
                protected.push((dir.join(name), weft_tools::Protection::ReadOnly));
            }
        }
        weft_tools::Confinement {
            protected,
            sandbox: weft_tools::CommandSandbox {
                mode: mode.or(self.config.sandbox).unwrap_or_default(),
                network: self.config.sandbox_network,
                ..weft_tools::CommandSandbox::default()
            },
        }
    }

    /// The project's MCP servers (`[mcpServers]`) for a run whose tools are confined by
    /// `confinement` in `workspace`: `${NAME}` in `env` and `headers` replaced with the
    /// project's variables (weft.toml's `env`, then the process environment), `readOnly`
    /// made absolute against the project folder, stdio servers in the command sandbox. None
    /// starts until its tools are asked for.
    pub fn mcp_hub(
        &self,
        confinement: &weft_tools::Confinement,
        workspace: &Path,
    ) -> weft_mcp::McpHub {
        let lookup = |name: &str| {
            self.config
                .env
                .get(name)
                .cloned()
                .or_else(|| std::env::var(name).ok())
        };
        let servers = self
            .config
            .mcp_servers
            .iter()
            .map(|(name, server)| {
                let mut server = server.clone();
                for value in server.env.values_mut().chain(server.headers.values_mut()) {
                    *value = substitute(value, lookup);
                }
                server.read_only = server
                    .read_only
                    .iter()
                    .map(|p| weft_mcp::absolute_against(&self.dir, p))
                    .collect();
                (name.clone(), server)
            })
            .collect();
        let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned());
        let protected = confinement
            .protected
            .iter()
            .map(|(path, protection)| (weft_mcp::absolute_against(&workspace, path), *protection))
            .collect();
        let sandboxing = weft_mcp::Sandboxing {
            mode: confinement.sandbox.mode,
            workspace,
            protected,
            limits: confinement.sandbox.limits,
            helper: confinement.sandbox.helper.clone(),
        };
        weft_mcp::McpHub::new(servers, sandboxing)
    }

    /// The MCP servers whose tools `prompt` offers (`mcp:NAME` entries), in its order.
    pub fn mcp_servers_of<'a>(&'a self, prompt: &'a PromptDefinition) -> Vec<&'a str> {
        prompt
            .tools
            .iter()
            .filter_map(|t| match self.tool_kind(t.name()) {
                Some(ToolKind::Mcp(server)) => Some(server),
                _ => None,
            })
            .collect()
    }

    /// What agent `name` may run with but should not be written that way (each a
    /// [`Problem`] that does not stop loading): a `dual_ai` agent without `maxSessionTurns`
    /// (agents §2.2).
    pub fn warnings(&self, name: &str) -> Vec<Problem> {
        self.agents
            .get(name)
            .filter(|a| {
                a.value.agent_type == AgentType::DualAi && a.value.max_session_turns.is_none()
            })
            .map(|a| {
                Problem::new(
                    &a.file,
                    "maxSessionTurns",
                    "a dual_ai agent should set maxSessionTurns so the session is bounded; without it only sessionStop or sessionFail ends it",
                )
            })
            .into_iter()
            .collect()
    }

    /// `weft.toml`.
    pub fn config(&self) -> &ProjectConfig {
        &self.config
    }

    /// The agents, by name.
    pub fn agents(&self) -> impl Iterator<Item = &AgentDefinition> {
        self.agents.values().map(|l| &l.value)
    }

    /// The agent `name`.
    pub fn agent(&self, name: &str) -> Option<&AgentDefinition> {
        self.agents.get(name).map(|l| &l.value)
    }

    /// The prompt `name`.
    pub fn prompt(&self, name: &str) -> Option<&PromptDefinition> {
        self.prompts.get(name).map(|l| &l.value)
    }

    /// This project with `agent` and `prompt` added (replacing any of the same names): the
    /// definitions a delegated child runs ([`crate::delegation`]), which no file holds.
    pub(crate) fn with_definitions(
        &self,
        agent: AgentDefinition,
        prompt: PromptDefinition,
    ) -> Project {
        let mut project = self.with_agent(agent);
        let file = PathBuf::from(format!("<delegation>/{}", prompt.name));
        project.prompts.insert(
            prompt.name.clone(),
            Loaded {
                file,
                value: prompt,
            },
        );
        project
    }

    /// This project with `agent` added (an agent made at run time, e.g. a prompt tool's
    /// nested invocation), or in place of the agent of its name.
    pub(crate) fn with_agent(&self, agent: AgentDefinition) -> Project {
        let mut project = self.clone();
        let file = PathBuf::from(format!("<made at run time>/{}", agent.name));
        project
            .agents
            .insert(agent.name.clone(), Loaded { file, value: agent });
        project
    }

    /// The project tool `name`.
    pub fn tool(&self, name: &str) -> Option<&ToolDefinition> {
        self.tools.get(name).map(|l| &l.value)
    }

    /// The agent `weft run` picks without `--agent`: `defaultAgent`, else the only agent.
    pub fn default_agent(&self) -> Option<&AgentDefinition> {
        match &self.config.default_agent {
            Some(name) => self.agent(name),
            None if self.agents.len() == 1 => self.agents.values().next().map(|l| &l.value),
            None => None,
        }
    }

    /// What the runtime's policy says about `agent`'s tools: those that wait for a person
    /// (the project's `requiresApproval`, the agent's, and project tools marked
    /// `requiresApproval = true`) and the project's pre-tool-use hooks (run in the project
    /// folder).
    pub fn tool_policy(&self, agent: &AgentDefinition) -> weft_runtime::approval::ToolPolicy {
        let mut policy = weft_runtime::approval::ToolPolicy::requiring(
            self.config
                .requires_approval
                .iter()
                .chain(&agent.requires_approval)
                .cloned(),
        );
        policy.requires_approval.extend(
            self.tools
                .values()
                .filter(|t| t.value.requires_approval)
                .map(|t| t.value.name.clone()),
        );
        if let Some(hooks) = &self.config.hooks {
            policy.pre_tool_use = hooks
                .pre_tool_use
                .iter()
                .map(|h| weft_runtime::hooks::PreToolHook {
                    command: h.command.clone(),
                    matcher: h.matcher.clone().unwrap_or_else(|| "*".to_owned()),
                    timeout_ms: h.timeout.map(|s| s.saturating_mul(1000)),
                    dir: Some(self.dir.clone()),
                })
                .collect();
        }
        policy
    }

    /// Whether `[gates] runs = true`: the project's runs pass the Universal Agent Protocol's
    /// gates (worktree, dangerous commands, policies) like a harness's tool calls do.
    pub fn gates_in_runs(&self) -> bool {
        self.config
            .gates
            .as_ref()
            .and_then(|g| g.get("runs"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// Whether `[gates] completeRuns = true`: a run of the project ends completed only when
    /// the completion checklist (`[completion]`, as `weft hook stop` runs it) passes.
    pub fn completion_gates_for_runs(&self) -> bool {
        self.config
            .gates
            .as_ref()
            .and_then(|g| g.get("completeRuns"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// What the tool name `name` of a prompt refers to.
    pub fn tool_kind<'a>(&'a self, name: &'a str) -> Option<ToolKind<'a>> {
        if let Some(server) = name.strip_prefix(MCP_PREFIX) {
            return self
                .config
                .mcp_servers
                .contains_key(server)
                .then_some(ToolKind::Mcp(server));
        }
        if let Some(tool) = self.tool(name) {
            Some(ToolKind::Project(tool))
        } else if let Some(agent) = self.agent(name) {
            Some(ToolKind::Agent(agent))
        } else if BUILTIN_TOOLS.contains(&name) {
            Some(ToolKind::Builtin)
        } else if crate::effect_tools::EFFECT_TOOLS.contains(&name) {
            Some(ToolKind::Effect)
        } else {
            self.prompt(name)
                .filter(|p| p.expose_as_tool)
                .map(ToolKind::Prompt)
        }
    }

    /// The model of `prompt`: its own, else the project's.
    pub fn model_of<'a>(&'a self, prompt: &'a PromptDefinition) -> Option<&'a str> {
        prompt.model.as_deref().or(self.config.model.as_deref())
    }

    /// The file a prompt was read from (relative to the project folder).
    pub fn prompt_file(&self, name: &str) -> Option<&Path> {
        self.prompts.get(name).map(|l| l.file.as_path())
    }

    /// The project's own file: `weft.json` when that is the one, else `weft.toml`.
    pub fn config_file(&self) -> &'static str {
        if !self.dir.join("weft.toml").is_file() && self.dir.join("weft.json").is_file() {
            "weft.json"
        } else {
            "weft.toml"
        }
    }

    /// The models a run of `agent` may call (its sides' prompts, and those of the agents and
    /// prompt tools it can call or hand off to, transitively), each once, with the file and key that name it. A
    /// prompt with no model and no project model is left out (`--model` or the local model
    /// fills in).
    pub fn model_sites(&self, agent: &AgentDefinition) -> Vec<ModelSite> {
        let mut agents = vec![agent];
        let mut seen_agents = BTreeSet::from([agent.name.as_str()]);
        let mut seen_prompts = BTreeSet::new();
        let mut sites: Vec<ModelSite> = Vec::new();
        while let Some(current) = agents.pop() {
            for (_, side) in current.sides() {
                // The side's prompt, then the prompt tools it reaches (nested invocations).
                let mut prompts: Vec<&PromptDefinition> =
                    self.prompt(&side.prompt).into_iter().collect();
                while let Some(prompt) = prompts.pop() {
                    if !seen_prompts.insert(prompt.name.as_str()) {
                        continue;
                    }
                    let site = match (&prompt.model, &self.config.model) {
                        (Some(model), _) => Some(ModelSite {
                            file: self
                                .prompt_file(&prompt.name)
                                .map_or_else(PathBuf::new, Path::to_path_buf),
                            key: "model".to_owned(),
                            reference: model.clone(),
                        }),
                        (None, Some(model)) => Some(ModelSite {
                            file: PathBuf::from(self.config_file()),
                            key: "model".to_owned(),
                            reference: model.clone(),
                        }),
                        (None, None) => None,
                    };
                    if let Some(site) = site
                        && !sites.contains(&site)
                    {
                        sites.push(site);
                    }
                    for tool in &prompt.tools {
                        match self.tool_kind(tool.name()) {
                            Some(ToolKind::Agent(next))
                                if seen_agents.insert(next.name.as_str()) =>
                            {
                                agents.push(next);
                            }
                            Some(ToolKind::Prompt(next)) => prompts.push(next),
                            _ => {}
                        }
                    }
                }
            }
        }
        sites
    }

    /// `reference` with a relative script path of the scripted providers (`scripted:PATH`,
    /// `scripted-turns:PATH`) made absolute against the project folder, so a project runs
    /// from any working directory.
    pub fn model_reference(&self, reference: &str) -> String {
        match reference.split_once(':') {
            Some((provider @ ("scripted" | "scripted-turns"), path))
                if Path::new(path).is_relative() =>
            {
                format!("{provider}:{}", self.dir.join(path).display())
            }
            _ => reference.to_owned(),
        }
    }

    /// The variable `name` for `prompt` run by `agent` outside any thread, by the
    /// precedence of [`crate::variables`] (lowest first: the process environment, weft.toml's
    /// `env`, the prompt's, the agent's).
    pub fn variable(
        &self,
        agent: &AgentDefinition,
        prompt: &PromptDefinition,
        name: &str,
    ) -> Option<String> {
        crate::variables::resolve(
            self,
            &crate::variables::Env::default(),
            agent,
            Some(prompt),
            None,
            name,
        )
    }

    /// The system text of `prompt` for `agent` on a thread whose variables are `env`, with
    /// `${NAME}` replaced (unknown names are left as written; [`Project::load`] reports the
    /// ones no declaration covers).
    pub fn system_text(
        &self,
        env: &crate::variables::Env,
        agent: &AgentDefinition,
        prompt: &PromptDefinition,
    ) -> String {
        substitute(&prompt.system, |name| {
            crate::variables::resolve(self, env, agent, Some(prompt), None, name)
        })
    }

    /// The HTTP headers of `prompt` for `agent` on a thread whose variables are `env`, with
    /// `${NAME}` replaced in the values.
    pub fn headers(
        &self,
        env: &crate::variables::Env,
        agent: &AgentDefinition,
        prompt: &PromptDefinition,
    ) -> Vec<(String, String)> {
        prompt
            .headers
            .iter()
            .map(|(name, value)| {
                let value = substitute(value, |variable| {
                    crate::variables::resolve(self, env, agent, Some(prompt), None, variable)
                });
                (name.clone(), value)
            })
            .collect()
    }

    fn validate(&self, problems: &mut Vec<Problem>) {
        let config_file = PathBuf::from("weft.toml");
        if self.agents.is_empty() && problems.is_empty() {
            problems.push(Problem::new(
                "agents",
                "",
                "the project defines no agent; add agents/NAME.toml",
            ));
        }
        if let Err(problem) = self.telemetry() {
            problems.push(problem);
        }
        crate::runtime_profile::check(
            self.config.runtime.as_ref(),
            &config_file,
            self.agents.values().map(|a| (&a.value, a.file.as_path())),
            problems,
        );
        crate::runtime_profile::check_role_tools(self, &config_file, problems);
        // An agent file that did not parse would make this a second, misleading problem.
        let parsed_cleanly = problems.is_empty();
        if let Some(name) = &self.config.default_agent
            && parsed_cleanly
            && !self.agents.contains_key(name)
        {
            problems.push(Problem::new(
                &config_file,
                "defaultAgent",
                format!("there is no agent {name:?}"),
            ));
        }
        if let Some(model) = &self.config.model {
            check_model(model, &config_file, "model", problems);
        }
        for tool in self.tools.values() {
            if BUILTIN_TOOLS.contains(&tool.value.name.as_str())
                || self.agents.contains_key(&tool.value.name)
            {
                problems.push(Problem::new(
                    &tool.file,
                    "name",
                    format!(
                        "the tool name {:?} is already taken by a built-in tool or an agent",
                        tool.value.name
                    ),
                ));
            }
            if !valid_tool_name(&tool.value.name) {
                problems.push(Problem::new(
                    &tool.file,
                    "name",
                    format!(
                        "{:?} is not a tool name the providers accept: use 1 to 64 letters, digits, `_` or `-`, starting with a letter or `_`",
                        tool.value.name
                    ),
                ));
            }
            if let Some(parameters) = &tool.value.parameters {
                check_schema(parameters, &tool.file, "parameters", problems);
            }
        }
        for (name, server) in &self.config.mcp_servers {
            for (key, message) in server.problems(name) {
                let key = if key.is_empty() {
                    format!("mcpServers.{name}")
                } else {
                    format!("mcpServers.{name}.{key}")
                };
                problems.push(Problem::new(&config_file, key, message));
            }
        }
        for prompt in self.prompts.values() {
            self.validate_prompt(prompt, problems);
        }
        for agent in self.agents.values() {
            self.validate_agent(agent, problems);
        }
    }

    fn validate_prompt(&self, prompt: &Loaded<PromptDefinition>, problems: &mut Vec<Problem>) {
        let file = &prompt.file;
        // No model at all is allowed: `weft run --model` or the embedded local model fills in.
        if let Some(model) = self.model_of(&prompt.value) {
            check_model(model, file, "model", problems);
        }
        for name in prompt.value.headers.keys() {
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !valid {
                problems.push(Problem::new(
                    file,
                    format!("headers.{name}"),
                    format!("{name:?} is not an HTTP header name"),
                ));
            }
        }
        if let Some(schema) = &prompt.value.output_schema {
            check_schema(schema, file, "outputSchema", problems);
        }
        if prompt.value.expose_as_tool {
            self.exposed_prompt_problems(&prompt.value, file, problems);
        } else if prompt.value.required_schema.is_some() {
            problems.push(Problem::new(
                file,
                "requiredSchema",
                "only a prompt with exposeAsTool = true is called with arguments (as a prompt tool)",
            ));
        }
        if let Some(chain) = self.prompt_tool_cycle(&prompt.value) {
            problems.push(Problem::new(file, "tools", format!(
                "the prompt tools call each other without end ({}): a nested invocation would never return; remove one of these tools",
                chain.join(" → "))));
        }
        let mut seen = BTreeSet::new();
        for (i, entry) in prompt.value.tools.iter().enumerate() {
            let name = entry.name();
            let key = format!("tools[{i}]");
            if !seen.insert(name) {
                problems.push(Problem::new(
                    file,
                    &key,
                    format!("the tool {name:?} is listed twice"),
                ));
            }
            match self.tool_kind(name) {
                None if let Some((tool_file, actual)) = self.tool_file_named(name) => {
                    problems.push(Problem::new(file, &key, format!(
                        "unknown tool {name:?}: {} names its tool {actual:?}, and prompts refer to a tool by its `name`, not its file name; rename one to match",
                        tool_file.display())));
                }
                None if let Some(server) = name.strip_prefix(MCP_PREFIX) => problems.push(Problem::new(file, &key, format!(
                    "there is no MCP server {server:?}: declare it in weft.toml as [mcpServers.{server}] (command = … or url = …)"))),
                None if self.prompt(name).is_some() => problems.push(Problem::new(file, &key, format!(
                    "the prompt {name:?} is not callable: set `exposeAsTool = true` in its definition"))),
                None => problems.push(Problem::new(file, &key, format!(
                    "unknown tool {name:?}: not a built-in tool ({}, {}), not in tools/, not an agent, not a prompt, and not mcp:SERVER",
                    BUILTIN_TOOLS.join(", "), crate::effect_tools::EFFECT_TOOLS.join(", ")))),
                Some(ToolKind::Prompt(target)) => {
                    prompt_tool_problems(target, entry, file, &key, problems);
                }
                Some(_) if matches!(entry, PromptTool::Subprompt(_)) => problems.push(Problem::new(file, &key, format!(
                    "includeTextResponse, includeToolCalls and includeErrors configure a prompt tool, and {name:?} is not a prompt: list it by name"))),
                Some(ToolKind::Agent(agent)) if !agent.expose_as_tool => problems.push(Problem::new(file, &key, format!(
                    "the agent {name:?} is not callable: set `exposeAsTool = true` in its definition"))),
                Some(ToolKind::Agent(agent)) if agent.agent_type == AgentType::DualAi => {
                    if let Some(config) = entry.subagent() {
                        subagent_problems(agent, config, file, &key, problems);
                    }
                }
                Some(_) if entry.subagent().is_some() => problems.push(Problem::new(file, &key, format!(
                    "the object form configures a subagent, and {name:?} is not a dual_ai agent: list it by name"))),
                Some(_) => {}
            }
        }
    }

    /// The problems of a prompt with `exposeAsTool`: its name must be a tool name no other
    /// tool has, its `requiredSchema` an object schema.
    fn exposed_prompt_problems(
        &self,
        prompt: &PromptDefinition,
        file: &Path,
        problems: &mut Vec<Problem>,
    ) {
        let name = prompt.name.as_str();
        if !valid_tool_name(name) {
            problems.push(Problem::new(file, "name", format!(
                "{name:?} is not a tool name every provider accepts (1–64 of a-z, A-Z, 0-9, _ and -, a letter or _ first), and a prompt with exposeAsTool = true is called by its name")));
        }
        let other = if self.tool(name).is_some() {
            Some("a project tool")
        } else if self.agent(name).is_some() {
            Some("an agent")
        } else if BUILTIN_TOOLS.contains(&name) {
            Some("a built-in tool")
        } else {
            None
        };
        if let Some(other) = other {
            problems.push(Problem::new(file, "exposeAsTool", format!(
                "the prompt {name:?} cannot be called as a tool: {other} has the same name and is what a prompt listing {name:?} gets; rename the prompt")));
        }
        if let Some(schema) = &prompt.required_schema {
            check_schema(schema, file, "requiredSchema", problems);
        }
    }

    /// The chain of prompt tools by which `prompt` calls itself again (`[A, B, A]`), if any.
    fn prompt_tool_cycle<'a>(&'a self, prompt: &'a PromptDefinition) -> Option<Vec<&'a str>> {
        let calls = |p: &'a PromptDefinition| {
            p.tools
                .iter()
                .filter_map(|t| match self.tool_kind(t.name()) {
                    Some(ToolKind::Prompt(next)) => Some(next),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        // Breadth first from `prompt`, each prompt reached once, with whom it was reached by.
        let mut reached_by: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([prompt]);
        while let Some(current) = queue.pop_front() {
            for next in calls(current) {
                if next.name == prompt.name {
                    let mut chain = vec![prompt.name.as_str()];
                    let mut at = current.name.as_str();
                    while at != prompt.name {
                        chain.push(at);
                        at = reached_by.get(at).copied().unwrap_or(prompt.name.as_str());
                    }
                    chain[1..].reverse();
                    chain.push(prompt.name.as_str());
                    return Some(chain);
                }
                if !reached_by.contains_key(next.name.as_str()) {
                    reached_by.insert(next.name.as_str(), current.name.as_str());
                    queue.push_back(next);
                }
            }
        }
        None
    }

    fn validate_agent(&self, agent: &Loaded<AgentDefinition>, problems: &mut Vec<Problem>) {
        let file = &agent.file;
        let def = &agent.value;
        if def.name.trim().is_empty() {
            problems.push(Problem::new(file, "name", "the name is empty"));
        }
        if def.agent_type == AgentType::DualAi && def.side_b.is_none() {
            problems.push(Problem::new(
                file,
                "sideB",
                "a dual_ai agent needs a sideB (both sides are AI)",
            ));
        }
        if def.max_session_turns == Some(0) {
            problems.push(Problem::new(file, "maxSessionTurns", "must be at least 1"));
        }
        if let Some(parameters) = &def.tool_parameters {
            if def.agent_type != AgentType::DualAi || !def.expose_as_tool {
                problems.push(Problem::new(file, "toolParameters", "only a dual_ai agent with exposeAsTool = true is called with arguments (as a subagent)"));
            }
            check_schema(parameters, file, "parameters", problems);
        }
        if def.expose_as_tool && def.tool_description.is_none() && def.description.is_none() {
            problems.push(Problem::new(file, "toolDescription", "an agent exposed as a tool needs a toolDescription (or a description) for the calling model"));
        }
        for (side, config) in def.sides() {
            let at = |key: &str| format!("{}.{key}", side.key());
            if config.max_steps == Some(0) {
                problems.push(Problem::new(file, at("maxSteps"), "must be at least 1"));
            }
            let Some(prompt) = self.prompt(&config.prompt) else {
                problems.push(Problem::new(
                    file,
                    at("prompt"),
                    format!(
                        "unknown prompt {:?}: no prompts/{}.toml or .json defines it",
                        config.prompt, config.prompt
                    ),
                ));
                continue;
            };
            let texts = std::iter::once(("system".to_owned(), &prompt.system)).chain(
                prompt
                    .headers
                    .iter()
                    .map(|(header, value)| (format!("headers.{header}"), value)),
            );
            for (key, text) in texts {
                // A declared variable may get its value on the thread, at run time (a
                // required one is checked before a run starts).
                let declared: Vec<String> = crate::variables::declared(self, def)
                    .into_iter()
                    .map(|d| d.name)
                    .collect();
                for name in undefined_variables(text, |n| {
                    declared.iter().any(|d| d == n) || self.variable(def, prompt, n).is_some()
                }) {
                    let prompt_file = self
                        .prompts
                        .get(&config.prompt)
                        .map_or_else(|| file.clone(), |l| l.file.clone());
                    problems.push(Problem::new(prompt_file, &key, format!(
                        "the variable ${{{name}}} has no value for agent {:?}: set it in the prompt's, the agent's or weft.toml's env, or in the environment", def.name)));
                }
            }
            if let Some(stop) = &config.stop_tool
                && !prompt.tools.iter().any(|t| t == stop.as_str())
            {
                problems.push(Problem::new(file, at("stopTool"), format!(
                    "the stop tool {stop:?} is not in the tools of prompt {:?}, so the model can never call it", prompt.name)));
            }
            if config.stop_tool_response_property.is_some() && config.stop_tool.is_none() {
                problems.push(Problem::new(
                    file,
                    at("stopToolResponseProperty"),
                    "is set but the side has no stopTool",
                ));
            }
            let mut bound = BTreeMap::new();
            for (key, binding) in config.bindings() {
                let name = binding.name();
                if let Some(other) = bound.insert(name, key) {
                    problems.push(Problem::new(
                        file,
                        at(key),
                        format!("the tool {name:?} is already bound to {other}"),
                    ));
                }
                if !prompt.tools.iter().any(|t| t == name) {
                    problems.push(Problem::new(file, at(key), format!(
                        "the {key} tool {name:?} is not in the tools of prompt {:?}, so the model can never call it", prompt.name)));
                    continue;
                }
                if let Some(tool) = self.tool(name) {
                    let properties = tool
                        .parameters
                        .as_ref()
                        .and_then(|p| p.get("properties"))
                        .and_then(Value::as_object);
                    for (pkey, property) in [
                        ("messageProperty", binding.message_property()),
                        ("attachmentsProperty", binding.attachments_property()),
                    ] {
                        if let (Some(property), Some(properties)) = (property, properties)
                            && !properties.contains_key(property)
                        {
                            problems.push(Problem::new(
                                file,
                                format!("{}.{pkey}", at(key)),
                                format!("the tool {name:?} has no argument {property:?}"),
                            ));
                        }
                    }
                }
            }
        }
    }
}

impl Project {
    /// The project tool whose file is `tools/NAME.toml` (or `.json`) though its `name` is
    /// not `NAME`: (its file, its name).
    fn tool_file_named(&self, stem: &str) -> Option<(PathBuf, String)> {
        self.tools.values().find_map(|tool| {
            let file_stem = tool.file.file_stem().and_then(|s| s.to_str())?;
            (file_stem == stem && tool.value.name != stem)
                .then(|| (tool.file.clone(), tool.value.name.clone()))
        })
    }
}

/// A tool's `parameters` or a prompt's `outputSchema`: an object schema that is a valid
/// JSON Schema (what the providers are sent, and what arguments are checked against).
/// What this version of Weft cannot do with a subagent tool's configuration `config` of
/// `agent` (at `key` of `file`): it runs blocking and resumable subagents whose first
/// message is one argument of the call.
/// The problems of an entry `entry` of a prompt's `tools` naming the prompt `target`: the
/// keys only a subagent tool has.
fn prompt_tool_problems(
    target: &PromptDefinition,
    entry: &PromptTool,
    file: &Path,
    key: &str,
    problems: &mut Vec<Problem>,
) {
    if let Some(config) = entry.subagent() {
        for only in config.subagent_only_keys() {
            problems.push(Problem::new(
                file,
                format!("{key}.{only}"),
                format!(
                    "{only} configures a subagent, and {:?} is a prompt (a prompt tool runs once, blocking, and returns): remove it",
                    target.name
                ),
            ));
        }
    }
}

fn subagent_problems(
    agent: &AgentDefinition,
    config: &crate::definition::SubagentToolConfig,
    file: &Path,
    key: &str,
    problems: &mut Vec<Problem>,
) {
    let unsupported = |what: &str| format!("{what}: this version of Weft does not run them yet");
    let at = |k: &str| format!("{key}.{k}");
    match &config.resumable {
        Some(crate::definition::Resumable::Flag(true)) => problems.push(Problem::new(
            file,
            at("resumable"),
            "resumable takes false or its settings ({ receives_messages = \"side_a\" | \"side_b\", maxInstances, parentCommunication })",
        )),
        Some(crate::definition::Resumable::Settings(settings))
            if settings.max_instances == Some(0) =>
        {
            problems.push(Problem::new(
                file,
                at("resumable.maxInstances"),
                "maxInstances must be at least 1",
            ));
        }
        _ => {}
    }
    if let Some(immediate) = &config.immediate {
        let shape = match immediate {
            Value::Bool(_) => true,
            Value::Object(map) => map.iter().all(|(key, value)| match key.as_str() {
                "nameEnv" | "descriptionEnv" => value.is_string(),
                "scopedEnv" => {
                    value.is_string()
                        || value
                            .as_array()
                            .is_some_and(|names| names.iter().all(Value::is_string))
                }
                _ => false,
            }),
            _ => false,
        };
        if !shape {
            problems.push(Problem::new(
                file,
                at("immediate"),
                "immediate is true, false, or { nameEnv = \"NAME\", descriptionEnv = \"NAME\", scopedEnv = [\"NAME\", …] }",
            ));
        }
    }
    if config.init_agent_name_property.is_some() {
        problems.push(Problem::new(
            file,
            at("initAgentNameProperty"),
            unsupported("named subagent instances"),
        ));
    }
    if let (Some(property), Some(parameters)) =
        (&config.init_user_message_property, &agent.tool_parameters)
        && parameters
            .get("properties")
            .and_then(|p| p.get(property))
            .is_none()
    {
        problems.push(Problem::new(file, at("initUserMessageProperty"), format!(
            "the agent {:?} takes no argument {property:?} (its toolParameters have no such property)", agent.name)));
    }
}

fn check_schema(schema: &Value, file: &Path, key: &str, problems: &mut Vec<Problem>) {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        let what = match key {
            "parameters" => "the parameters",
            "requiredSchema" => "the required schema",
            _ => "the output schema",
        };
        problems.push(Problem::new(
            file,
            key,
            format!("{what} must be a JSON Schema with \"type\" = \"object\""),
        ));
        return;
    }
    if let Err(error) = jsonschema::meta::validate(schema) {
        let at = error.instance_path().to_string();
        let key = if at.is_empty() {
            key.to_owned()
        } else {
            format!("{key}{}", at.replace('/', "."))
        };
        problems.push(Problem::new(
            file,
            key,
            format!("not a valid JSON Schema: {error}"),
        ));
    }
}

fn check_model(model: &str, file: &Path, key: &str, problems: &mut Vec<Problem>) {
    if !model
        .split_once(':')
        .is_some_and(|(p, m)| !p.is_empty() && !m.is_empty())
    {
        problems.push(Problem::new(
            file,
            key,
            format!("the model {model:?} is not PROVIDER:MODEL (e.g. openai:gpt-4o-mini)"),
        ));
    }
}

/// Replaces `${NAME}` in `text` with `lookup(NAME)`; unknown names stay as written.
pub fn substitute(text: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                let name = &after[..end];
                match lookup(name) {
                    Some(value) => out.push_str(&value),
                    None => out.push_str(&rest[start..start + 3 + end]),
                }
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn undefined_variables(text: &str, defined: impl Fn(&str) -> bool) -> Vec<String> {
    let mut missing = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        if !defined(name) && !missing.iter().any(|m| m == name) {
            missing.push(name.to_owned());
        }
        rest = &after[end + 1..];
    }
    missing
}

/// `path` absolute and, where it exists, canonical (so it compares with canonical workspaces).
fn absolute_canonical(path: &Path) -> PathBuf {
    let absolute = std::env::current_dir()
        .map(|cwd| cwd.join(path))
        .unwrap_or_else(|_| path.to_path_buf());
    match (absolute.parent(), absolute.file_name()) {
        (Some(parent), Some(name)) => parent
            .canonicalize()
            .map(|p| p.join(name))
            .unwrap_or(absolute.clone()),
        _ => absolute,
    }
}

/// The definition files of a project on disk now, as a snapshot.
///
/// # Errors
/// When a file cannot be read.
pub fn snapshot_of(dir: &Path) -> Result<ProjectSnapshot, ProjectError> {
    let io = |path: &Path, source| ProjectError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut files = BTreeMap::new();
    for name in ["weft.toml", "weft.json"] {
        let path = dir.join(name);
        if path.is_file() {
            files.insert(
                name.to_owned(),
                std::fs::read_to_string(&path).map_err(|e| io(&path, e))?,
            );
        }
    }
    for folder in DEFINITION_FOLDERS {
        let Ok(entries) = std::fs::read_dir(dir.join(folder)) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let ext = path
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or_default();
            if !matches!(ext, "toml" | "json") || !path.is_file() {
                continue;
            }
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            files.insert(
                format!("{folder}/{name}"),
                std::fs::read_to_string(&path).map_err(|e| io(&path, e))?,
            );
        }
    }
    Ok(ProjectSnapshot::new(files))
}

/// The folders of definition files.
const DEFINITION_FOLDERS: [&str; 3] = ["agents", "prompts", "tools"];

/// Where a project's files are read from.
enum Source<'a> {
    Disk,
    Snapshot(&'a BTreeMap<String, String>),
}

struct Loader<'a> {
    dir: &'a Path,
    source: &'a Source<'a>,
    problems: &'a mut Vec<Problem>,
}

impl Loader<'_> {
    fn is_file(&self, name: &str) -> bool {
        match self.source {
            Source::Disk => self.dir.join(name).is_file(),
            Source::Snapshot(files) => files.contains_key(name),
        }
    }

    /// The files of `folder` (paths under `dir`).
    fn list(&self, folder: &str) -> Vec<PathBuf> {
        match self.source {
            Source::Disk => std::fs::read_dir(self.dir.join(folder))
                .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
                .unwrap_or_default(),
            Source::Snapshot(files) => files
                .keys()
                .filter(|k| {
                    k.strip_prefix(folder)
                        .and_then(|rest| rest.strip_prefix('/'))
                        .is_some_and(|name| !name.contains('/'))
                })
                .map(|k| self.dir.join(k))
                .collect(),
        }
    }

    fn read(&self, path: &Path) -> std::io::Result<String> {
        match self.source {
            Source::Disk => std::fs::read_to_string(path),
            Source::Snapshot(files) => {
                let key = self.relative(path).to_string_lossy().replace('\\', "/");
                files
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
            }
        }
    }

    fn config(&mut self) -> Option<ProjectConfig> {
        let toml = self.dir.join("weft.toml");
        let json = self.dir.join("weft.json");
        let path = match (self.is_file("weft.toml"), self.is_file("weft.json")) {
            (true, true) => {
                self.problems.push(Problem::new(
                    "weft.json",
                    "",
                    "both weft.toml and weft.json exist; keep one",
                ));
                return None;
            }
            (true, false) => toml,
            (false, true) => json,
            (false, false) => {
                self.problems.push(Problem::new("weft.toml", "", "this is not a Weft project: there is no weft.toml (or weft.json); `weft init` makes one"));
                return None;
            }
        };
        self.parse(&path)
    }

    fn folder<T: DeserializeOwned>(
        &mut self,
        folder: &str,
        name: impl Fn(&T) -> &String,
    ) -> BTreeMap<String, Loaded<T>> {
        let mut out: BTreeMap<String, Loaded<T>> = BTreeMap::new();
        let mut paths = self.list(folder);
        paths.sort();
        for path in paths {
            let ext = path
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or_default();
            if !matches!(ext, "toml" | "json") {
                continue;
            }
            let Some(value) = self.parse::<T>(&path) else {
                continue;
            };
            let file = self.relative(&path);
            let key = name(&value).clone();
            if let Some(first) = out.get(&key) {
                self.problems.push(Problem::new(
                    &file,
                    "name",
                    format!(
                        "the name {key:?} is already used by {}",
                        first.file.display()
                    ),
                ));
                continue;
            }
            out.insert(key, Loaded { file, value });
        }
        out
    }

    fn relative(&self, path: &Path) -> PathBuf {
        path.strip_prefix(self.dir).unwrap_or(path).to_path_buf()
    }

    fn parse<T: DeserializeOwned>(&mut self, path: &Path) -> Option<T> {
        let file = self.relative(path);
        let text = match self.read(path) {
            Ok(text) => text,
            Err(e) => {
                self.problems.push(Problem::new(
                    &file,
                    "",
                    format!("cannot read the file: {e}"),
                ));
                return None;
            }
        };
        let is_toml = path.extension().is_some_and(|e| e == "toml");
        let value: Value = if is_toml {
            match toml::from_str::<Value>(&text) {
                Ok(v) => v,
                Err(e) => {
                    let message = e.message().trim_end().to_owned();
                    let line = e
                        .span()
                        .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
                    let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
                    self.problems.push(Problem::new(
                        &file,
                        "",
                        format!("this is not valid TOML{at}: {message}"),
                    ));
                    return None;
                }
            }
        } else {
            match serde_json::from_str::<Value>(&text) {
                Ok(v) => v,
                Err(e) => {
                    self.problems.push(Problem::new(
                        &file,
                        "",
                        format!("this is not valid JSON (line {}): {e}", e.line()),
                    ));
                    return None;
                }
            }
        };
        match serde_path_to_error::deserialize::<_, T>(value) {
            Ok(v) => Some(v),
            Err(e) => {
                let path = e.path().to_string();
                let base = if path == "." { String::new() } else { path };
                let inner = e.inner().to_string();
                let join = |k: &str| {
                    if base == k || base.ends_with(&format!(".{k}")) {
                        base.clone()
                    } else if base.is_empty() {
                        k.to_owned()
                    } else {
                        format!("{base}.{k}")
                    }
                };
                let problem = if let Some(field) = backticked(&inner, "missing field `") {
                    Problem::new(&file, join(&field), "this required key is missing")
                } else if let Some(field) = backticked(&inner, "unknown field `") {
                    let expected = inner
                        .split_once(", expected ")
                        .map(|(_, e)| format!(" (expected {e})"))
                        .unwrap_or_default();
                    Problem::new(&file, join(&field), format!("unknown key{expected}"))
                } else if inner.starts_with(
                    "data did not match any variant of untagged enum SessionToolBinding",
                ) {
                    Problem::new(
                        &file,
                        base,
                        "a session binding is a tool name or {name, messageProperty?, attachmentsProperty?}",
                    )
                } else {
                    Problem::new(&file, base, inner)
                };
                self.problems.push(problem);
                None
            }
        }
    }
}

fn backticked(text: &str, prefix: &str) -> Option<String> {
    let rest = text.strip_prefix(prefix)?;
    rest.split_once('`').map(|(field, _)| field.to_owned())
}

/// The side config of `agent` for `side`.
pub fn side_config(agent: &AgentDefinition, side: Side) -> Option<&crate::definition::SideConfig> {
    match side {
        Side::A => Some(&agent.side_a),
        Side::B => agent.side_b.as_ref(),
    }
}
