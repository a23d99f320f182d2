//! Variables (tools §3): declarations on agents, prompts and tools, their resolution for a
//! thread, and the check that blocks execution until every required one resolves.
//!
//! **Declarations.** `[[variables]]` (`name`, `type` = `text` | `secret`, `required`,
//! `scoped`, `description`) on an agent, a prompt or a project tool. An agent's declared
//! variables are its own, its sides' prompts' and the project tools those prompts list
//! ([`declared`]); one name declared in several places is required, secret or scoped when
//! any declaration says so.
//!
//! **Resolution**, lowest to highest precedence (a higher one wins):
//!
//! 1. the process environment (the base source),
//! 2. `weft.toml`'s `env`,
//! 3. the prompt's `env`,
//! 4. the tool's `env`,
//! 5. the agent's `env`,
//! 6. the thread's values ([`Env`]): set on the thread (`weft variables set`, `POST
//!    /threads/{id}/variables`), else inherited from its parent thread, and so on up the
//!    chain of `parent_thread_id`s.
//!
//! **Scoped.** A variable the agent of thread T declares `scoped` is not inherited from T's
//! ancestors: only a value set on T itself (or a definition's `env`, or the process
//! environment) counts. Values of T still flow down to T's descendants that do not scope the
//! name again ([`Env::for_child`]).
//!
//! **Required.** A run refuses to start while a required variable has no value
//! ([`missing`]; `weft run` exits 2 and records nothing); a subagent call whose child lacks
//! one is a tool error naming them ([`missing_scoped`] for a child of a given parent env).
//!
//! **Secrets.** `type = "secret"` values are stored encrypted (see
//! `weft_store::ThreadVariables`) and the store's redactor learns every one it reads, so they
//! never reach events, the tool ledger or checkpoints. Tools get the declared variables'
//! values in their context ([`weft_tools::ToolEnv`]; `run_command` passes them to the
//! command's environment); a `${NAME}` in a prompt's `system` text or `headers` is replaced
//! by the resolved value.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use weft_store::{
    Runs as _, Store, StoreError, ThreadVariables as _, Threads as _, VariableKind,
    VariableRequests as _,
};

use crate::definition::{AgentDefinition, PromptDefinition, ToolDefinition, VariableDefinition};
use crate::project::Project;

/// Threads followed up the parent chain at most (a guard against a cycle in stored links).
const MAX_CHAIN: usize = 64;

/// A variable as an agent declares it, merged over its declarations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Declared {
    /// The name.
    pub name: String,
    /// `secret` when any declaration says so.
    pub kind: VariableKind,
    /// Required when any declaration says so.
    pub required: bool,
    /// Scoped when any declaration says so.
    pub scoped: bool,
    /// The first non-empty description.
    pub description: String,
    /// Where it is declared (`agent NAME`, `prompt NAME`, `tool NAME`).
    pub declared_by: Vec<String>,
}

/// The variables `agent` declares: its own, its prompts' and its prompts' project tools', by
/// name.
///
/// # Examples
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// # std::fs::write(dir.path().join("weft.toml"), "name = \"demo\"\nmodel = \"scripted:s.json\"\n")?;
/// # std::fs::create_dir(dir.path().join("agents"))?;
/// # std::fs::create_dir(dir.path().join("prompts"))?;
/// std::fs::write(dir.path().join("agents/helper.toml"),
///     "name = \"helper\"\n[sideA]\nprompt = \"helper\"\n[[variables]]\nname = \"TOKEN\"\ntype = \"secret\"\nrequired = true\n")?;
/// std::fs::write(dir.path().join("prompts/helper.toml"), "name = \"helper\"\nsystem = \"You help.\"\n")?;
/// let project = weft_standard::Project::load(dir.path())?;
/// let agent = project.agent("helper").expect("defined");
/// let declared = weft_standard::variables::declared(&project, agent);
/// assert_eq!(declared[0].name, "TOKEN");
/// assert_eq!(declared[0].declared_by, ["agent helper"]);
/// # Ok(()) }
/// ```
pub fn declared(project: &Project, agent: &AgentDefinition) -> Vec<Declared> {
    let mut merged: BTreeMap<String, Declared> = BTreeMap::new();
    let mut add = |definitions: &[VariableDefinition], by: String| {
        for definition in definitions {
            let entry = merged
                .entry(definition.name.clone())
                .or_insert_with(|| Declared {
                    name: definition.name.clone(),
                    kind: VariableKind::Text,
                    required: false,
                    scoped: false,
                    description: String::new(),
                    declared_by: Vec::new(),
                });
            if definition.kind == VariableKind::Secret {
                entry.kind = VariableKind::Secret;
            }
            entry.required |= definition.required;
            entry.scoped |= definition.scoped;
            if entry.description.is_empty() {
                entry.description.clone_from(&definition.description);
            }
            if !entry.declared_by.contains(&by) {
                entry.declared_by.push(by.clone());
            }
        }
    };
    add(&agent.variables, format!("agent {}", agent.name));
    for prompt in prompts_of(project, agent) {
        add(&prompt.variables, format!("prompt {}", prompt.name));
        for tool in tools_of(project, prompt) {
            add(&tool.variables, format!("tool {}", tool.name));
        }
    }
    merged.into_values().collect()
}

/// The names `agent` declares scoped.
pub fn scoped_names(project: &Project, agent: &AgentDefinition) -> BTreeSet<String> {
    declared(project, agent)
        .into_iter()
        .filter(|d| d.scoped)
        .map(|d| d.name)
        .collect()
}

fn prompts_of<'a>(project: &'a Project, agent: &AgentDefinition) -> Vec<&'a PromptDefinition> {
    let mut prompts: Vec<&PromptDefinition> = Vec::new();
    for (_, side) in agent.sides() {
        if let Some(prompt) = project.prompt(&side.prompt)
            && !prompts.iter().any(|p| p.name == prompt.name)
        {
            prompts.push(prompt);
        }
    }
    prompts
}

fn tools_of<'a>(project: &'a Project, prompt: &PromptDefinition) -> Vec<&'a ToolDefinition> {
    prompt
        .tools
        .iter()
        .filter_map(|entry| project.tool(entry.name()))
        .collect()
}

/// A thread's variable values (its own and inherited), the highest level of resolution.
/// `Debug` shows the names only.
///
/// # Examples
///
/// ```
/// use weft_standard::variables::Env;
/// use weft_store::VariableKind;
/// let parent = Env::from_values([("REGION", "eu", VariableKind::Text), ("DB", "pg://a", VariableKind::Secret)]);
/// // The child scopes DB: it does not inherit the parent's value.
/// let child = parent.for_child(Env::default(), &["DB".to_owned()].into());
/// assert_eq!(child.get("REGION"), Some("eu"));
/// assert_eq!(child.get("DB"), None);
/// assert_eq!(format!("{parent:?}"), "Env([\"DB\", \"REGION\"])");
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Env {
    values: BTreeMap<String, (String, VariableKind)>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Env")
            .field(&self.values.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Env {
    /// An env of `(name, value, kind)` triples.
    pub fn from_values<'a>(
        values: impl IntoIterator<Item = (&'a str, &'a str, VariableKind)>,
    ) -> Env {
        Env {
            values: values
                .into_iter()
                .map(|(n, v, k)| (n.to_owned(), (v.to_owned(), k)))
                .collect(),
        }
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(|(v, _)| v.as_str())
    }

    /// Whether `name` holds a secret.
    pub fn is_secret(&self, name: &str) -> bool {
        self.values
            .get(name)
            .is_some_and(|(_, k)| *k == VariableKind::Secret)
    }

    /// The names that have a value.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// The env of a child thread: its `own` values, then this env's for every name the
    /// child does not declare `scoped`.
    #[must_use]
    pub fn for_child(&self, own: Env, scoped: &BTreeSet<String>) -> Env {
        let mut values = own.values;
        for (name, value) in &self.values {
            if !scoped.contains(name) && !values.contains_key(name) {
                values.insert(name.clone(), value.clone());
            }
        }
        Env { values }
    }

    /// The same env with `name` set (a value only this process holds: a transferred
    /// `scopedEnv` value).
    #[must_use]
    pub fn with(mut self, name: &str, value: &str, kind: VariableKind) -> Env {
        self.values
            .insert(name.to_owned(), (value.to_owned(), kind));
        self
    }

    pub(crate) fn from_store(values: BTreeMap<String, weft_store::VariableValue>) -> Env {
        Env {
            values: values
                .into_iter()
                .map(|(n, v)| (n, (v.value, v.kind)))
                .collect(),
        }
    }
}

/// The agent a stored thread runs: its latest run's (the last segment of an agent path),
/// else the thread's title when it names one of the project's agents (a child thread).
async fn agent_of_thread<'a>(
    store: &Store,
    project: &'a Project,
    thread: &weft_store::ThreadRecord,
) -> Result<Option<&'a AgentDefinition>, StoreError> {
    let runs = store.thread_runs(&thread.id).await?;
    let from_run = runs
        .iter()
        .rev()
        .find_map(|run| project.agent(run.agent_id.rsplit('/').next().unwrap_or(&run.agent_id)));
    Ok(from_run.or_else(|| thread.title.as_deref().and_then(|t| project.agent(t))))
}

/// The env of `thread` run by `agent`: its own stored values, then its ancestors' (up the
/// `parent_thread_id` chain), each ancestor's values taken for the names no thread below it
/// (this one included) scopes. An unknown thread has an empty env.
///
/// # Errors
/// Storage failures; [`StoreError::SecretKey`] when a secret cannot be decrypted.
pub async fn thread_env(
    store: &Store,
    project: &Project,
    thread: &str,
    agent: &AgentDefinition,
) -> Result<Env, StoreError> {
    let mut env = Env::from_store(store.variable_values(thread).await?);
    let mut blocked = scoped_names(project, agent);
    let mut current = store.thread(thread).await?;
    for _ in 0..MAX_CHAIN {
        let Some(parent_id) = current.as_ref().and_then(|t| t.parent_thread_id.clone()) else {
            break;
        };
        let parent = store.thread(&parent_id).await?;
        let inherited = Env::from_store(store.variable_values(&parent_id).await?);
        env = inherited.for_child(env, &blocked);
        if let Some(record) = &parent
            && let Some(parent_agent) = agent_of_thread(store, project, record).await?
        {
            blocked.extend(scoped_names(project, parent_agent));
        }
        current = parent;
    }
    Ok(env)
}

/// The value of `name` for `agent` running `prompt` (and `tool`, for a tool's own
/// variables) on a thread whose env is `env`, by the precedence of the module docs.
pub fn resolve(
    project: &Project,
    env: &Env,
    agent: &AgentDefinition,
    prompt: Option<&PromptDefinition>,
    tool: Option<&ToolDefinition>,
    name: &str,
) -> Option<String> {
    env.get(name)
        .map(str::to_owned)
        .or_else(|| agent.env.get(name).cloned())
        .or_else(|| tool.and_then(|t| t.env.get(name).cloned()))
        .or_else(|| prompt.and_then(|p| p.env.get(name).cloned()))
        .or_else(|| project.config().env.get(name).cloned())
        .or_else(|| std::env::var(name).ok())
}

/// Whether `name` has a value anywhere `agent` may read it: the thread, the agent, any of
/// its prompts or their tools, the project, the environment.
pub fn resolves_for(project: &Project, env: &Env, agent: &AgentDefinition, name: &str) -> bool {
    if resolve(project, env, agent, None, None, name).is_some() {
        return true;
    }
    prompts_of(project, agent).into_iter().any(|prompt| {
        prompt.env.contains_key(name)
            || tools_of(project, prompt)
                .into_iter()
                .any(|tool| tool.env.contains_key(name))
    })
}

/// The values of every variable `agent` declares that resolves, for its tools (see
/// [`weft_tools::ToolEnv`]), as `prompt` sees them.
pub fn tool_env(
    project: &Project,
    env: &Env,
    agent: &AgentDefinition,
    prompt: &PromptDefinition,
) -> weft_tools::ToolEnv {
    weft_tools::ToolEnv::new(declared(project, agent).into_iter().filter_map(|d| {
        let tool = d
            .declared_by
            .iter()
            .find_map(|by| by.strip_prefix("tool "))
            .and_then(|t| project.tool(t));
        resolve(project, env, agent, Some(prompt), tool, &d.name).map(|v| (d.name, v))
    }))
}

/// The required variables of `agent` that have no value on a thread whose env is `env`.
pub fn missing(project: &Project, agent: &AgentDefinition, env: &Env) -> Vec<Declared> {
    declared(project, agent)
        .into_iter()
        .filter(|d| d.required && !resolves_for(project, env, agent, &d.name))
        .collect()
}

/// The required variables a child run by `child` would lack when started by a parent
/// whose env is `parent_env`, the child's thread holding `child_own`: what a subagent
/// creation checks before it boots the child (agents §7.8).
///
/// # Examples
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// # std::fs::write(dir.path().join("weft.toml"), "name = \"demo\"\nmodel = \"scripted:s.json\"\n")?;
/// # std::fs::create_dir(dir.path().join("agents"))?;
/// # std::fs::create_dir(dir.path().join("prompts"))?;
/// std::fs::write(dir.path().join("agents/child.toml"),
///     "name = \"child\"\n[sideA]\nprompt = \"p\"\n[[variables]]\nname = \"WEFT_DOC_DB\"\nrequired = true\nscoped = true\n")?;
/// std::fs::write(dir.path().join("prompts/p.toml"), "name = \"p\"\nsystem = \"Hi.\"\n")?;
/// let project = weft_standard::Project::load(dir.path())?;
/// let child = project.agent("child").expect("defined");
/// use weft_standard::variables::{Env, missing_scoped};
/// let parent = Env::from_values([("WEFT_DOC_DB", "pg://parent", weft_store::VariableKind::Text)]);
/// // Scoped: the parent's value is not inherited, so it is missing.
/// assert_eq!(missing_scoped(&project, child, &parent, Env::default())[0].name, "WEFT_DOC_DB");
/// let own = Env::from_values([("WEFT_DOC_DB", "pg://child", weft_store::VariableKind::Text)]);
/// assert!(missing_scoped(&project, child, &parent, own).is_empty());
/// # Ok(()) }
/// ```
pub fn missing_scoped(
    project: &Project,
    child: &AgentDefinition,
    parent_env: &Env,
    child_own: Env,
) -> Vec<Declared> {
    let env = parent_env.for_child(child_own, &scoped_names(project, child));
    missing(project, child, &env)
}

/// Missing required variables, as the sentence a person reads: which, what they are, and
/// how to give them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(.agent, .thread.as_deref(), .missing))]
pub struct MissingVariables {
    /// The agent.
    pub agent: String,
    /// The thread they were looked up on (`None`: a new thread).
    pub thread: Option<String>,
    /// The required variables without a value.
    pub missing: Vec<Declared>,
}

fn describe(agent: &str, thread: Option<&str>, missing: &[Declared]) -> String {
    let list = missing
        .iter()
        .map(|d| {
            let mut item = d.name.clone();
            let mut notes = Vec::new();
            if d.kind == VariableKind::Secret {
                notes.push("secret".to_owned());
            }
            if d.scoped {
                notes.push("scoped".to_owned());
            }
            if !d.description.is_empty() {
                notes.push(d.description.clone());
            }
            if !notes.is_empty() {
                item.push_str(&format!(" ({})", notes.join("; ")));
            }
            item
        })
        .collect::<Vec<_>>()
        .join(", ");
    let on_thread = match thread {
        Some(thread) => format!(
            "`weft variables set NAME=VALUE [--secret] --thread {thread}` (or POST /threads/{thread}/variables)"
        ),
        None => "`weft variables set NAME=VALUE [--secret] --thread THREAD` then `weft run --continue THREAD`".to_owned(),
    };
    format!(
        "the agent {agent:?} needs required variables that have no value: {list}. Give them on the thread with {on_thread}, \
         in the agent's, the prompt's or weft.toml's env, or in the environment"
    )
}

/// Checks that every required variable of `agent` resolves on `thread` (`None`: a new
/// thread, which has no values of its own yet).
///
/// # Errors
/// `Ok(Err(MissingVariables))` when some do not; `Err` on storage failures.
pub async fn check_required(
    store: &Store,
    project: &Project,
    agent: &AgentDefinition,
    thread: Option<&str>,
) -> Result<Result<Env, MissingVariables>, StoreError> {
    let env = match thread {
        Some(thread) => thread_env(store, project, thread, agent).await?,
        None => Env::default(),
    };
    let missing = missing(project, agent, &env);
    Ok(if missing.is_empty() {
        Ok(env)
    } else {
        Err(MissingVariables {
            agent: agent.name.clone(),
            thread: thread.map(str::to_owned),
            missing,
        })
    })
}

/// The structured error of a subagent call whose required variables are missing (agents
/// §7.8).
pub const ENV_REQUIRED: &str = "subagent_env_required";

/// What a deferred subagent call keeps for its boot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeferredCall<'a> {
    /// The call's arguments.
    pub(crate) arguments: &'a serde_json::Value,
    /// The argument that is the child's first message.
    pub(crate) message_property: Option<&'a str>,
    /// A deferred `subagent_create`: the resumable instance's name, description, blocking,
    /// parent communication and attachments argument, registered as the parent's child
    /// when it boots.
    pub(crate) creation: Option<&'a serde_json::Value>,
    /// The child folder (a reference) the call's attachments were copied into, which the
    /// booted child works in (default: the request's own).
    pub(crate) folder: Option<&'a str>,
}

/// Records a deferred subagent call `call` of `agent` from `parent_thread` that waits for
/// `missing`, and the tool error the model reads: JSON with `error` = [`ENV_REQUIRED`], the
/// request id, the missing names and the bootstrap endpoint.
pub(crate) async fn defer_subagent(
    store: &Store,
    parent_thread: &str,
    agent: &str,
    call: DeferredCall<'_>,
    missing: &[Declared],
) -> Result<String, StoreError> {
    let names: Vec<String> = missing.iter().map(|d| d.name.clone()).collect();
    let payload = serde_json::json!({
        "arguments": call.arguments,
        "messageProperty": call.message_property,
        "create": call.creation,
        "folder": call.folder,
    });
    let request = store
        .create_variable_request(parent_thread, agent, &payload, &names)
        .await?;
    let endpoint = format!("/threads/{parent_thread}/variables/{}", request.id);
    Ok(serde_json::json!({
        "error": ENV_REQUIRED,
        "agent": agent,
        "requestId": request.id,
        "missing": names,
        "variables": missing.iter().map(|d| serde_json::json!({
            "name": d.name, "type": d.kind, "scoped": d.scoped, "description": d.description,
        })).collect::<Vec<_>>(),
        "endpoint": endpoint,
        "message": format!(
            "the subagent {agent} was not started: it needs the variables {}. A person provides them with POST {endpoint}, \
             which then starts it with this call's arguments; its result will come as a message",
            names.join(", ")
        ),
    })
    .to_string())
}

/// Why a deferred request could not boot.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// No such request on that thread.
    #[error("no variable request {0} on this thread")]
    Unknown(String),
    /// It booted already.
    #[error("the variable request {0} was completed already")]
    Completed(String),
    /// Its agent is not in the project.
    #[error("the project has no agent {0:?}")]
    UnknownAgent(String),
    /// Required variables are still missing.
    #[error(transparent)]
    Missing(#[from] MissingVariables),
    /// The run could not start.
    #[error(transparent)]
    Run(#[from] weft_runtime::RunError),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The project cannot make a run spec.
    #[error(transparent)]
    Project(#[from] crate::ProjectError),
    /// The parent thread has an instance of the deferred creation's name already.
    #[error("the thread has an instance named {0:?} already")]
    Duplicate(String),
    /// The creation's attachments could not be copied to the child.
    #[error("{0}")]
    Attachments(String),
}

/// The thread a deferred request's child runs on: the request's id, a child of its parent
/// thread (variables posted for the request are set on it, so scoped ones are its own).
pub fn deferred_thread(request: &weft_store::VariableRequest) -> String {
    request.id.clone()
}

/// The variables `request`'s agent declares (for the bootstrap endpoints), with what is
/// still missing on its thread.
///
/// # Errors
/// Storage failures.
pub async fn request_status(
    store: &Store,
    project: &Project,
    request: &weft_store::VariableRequest,
) -> Result<(Vec<Declared>, Vec<String>), StoreError> {
    let Some(agent) = project.agent(&request.agent) else {
        return Ok((Vec::new(), request.missing.clone()));
    };
    let thread = deferred_thread(request);
    let env = Env::from_store(store.variable_values(&thread).await?);
    let parent = thread_env(store, project, &request.parent_thread_id, agent).await?;
    let env = parent.for_child(env, &scoped_names(project, agent));
    let missing = missing(project, agent, &env)
        .into_iter()
        .map(|d| d.name)
        .collect();
    Ok((declared(project, agent), missing))
}

/// Boots the deferred subagent call `request_id` of `parent_thread` with its original
/// arguments, once its variables resolve: a run of its agent on its own thread (a child of
/// the parent thread, [`deferred_thread`]), started on `runtime` as `launch` says. Its
/// result goes to the parent with [`deliver_deferred`].
///
/// # Errors
/// [`BootError`]: unknown or completed request, still-missing variables, run failures.
pub async fn boot_deferred(
    runtime: &weft_runtime::Runtime,
    project: &Project,
    launch: &crate::Launch,
    parent_thread: &str,
    request_id: &str,
) -> Result<(weft_store::VariableRequest, weft_runtime::RunHandle), BootError> {
    let store = runtime.store();
    let request = store
        .variable_request(parent_thread, request_id)
        .await?
        .ok_or_else(|| BootError::Unknown(request_id.to_owned()))?;
    if request.status != weft_store::RequestStatus::Pending {
        return Err(BootError::Completed(request.id));
    }
    let agent = project
        .agent(&request.agent)
        .ok_or_else(|| BootError::UnknownAgent(request.agent.clone()))?;
    let (_, still_missing) = request_status(store, project, &request).await?;
    if !still_missing.is_empty() {
        let missing = declared(project, agent)
            .into_iter()
            .filter(|d| still_missing.contains(&d.name))
            .collect();
        return Err(MissingVariables {
            agent: agent.name.clone(),
            thread: Some(deferred_thread(&request)),
            missing,
        }
        .into());
    }
    let thread = deferred_thread(&request);
    let arguments = &request.payload["arguments"];
    let creation = request.payload.get("create").filter(|c| c.is_object());
    if let Some(name) = creation.and_then(|c| c["name"].as_str()) {
        // An instance of that name created since the call was deferred keeps it.
        use weft_store::Subagents as _;
        if store
            .children(parent_thread)
            .await?
            .iter()
            .any(|c| c.name == name)
        {
            return Err(BootError::Duplicate(name.to_owned()));
        }
    }
    let property = request.payload["messageProperty"].as_str();
    let input = crate::subagent::first_message(property, arguments)
        .map_err(|e| BootError::Run(weft_runtime::RunError::Agent(e.message)))?;
    let (workspace, input) = deferred_files(project, launch, &request, input).await?;
    if !store
        .complete_variable_request(parent_thread, request_id)
        .await?
    {
        return Err(BootError::Completed(request.id));
    }
    let existing = store.thread(&thread).await?;
    if existing.is_none() || creation.is_some() {
        let mut record = existing.unwrap_or_else(|| weft_store::ThreadRecord::new(&thread));
        record.parent_thread_id = Some(parent_thread.to_owned());
        record.title = Some(agent.name.clone());
        record.metadata.insert(
            "variableRequest".to_owned(),
            serde_json::Value::from(request.id.clone()),
        );
        if let Some(creation) = creation {
            // A resumable instance: its thread says whose it is and what created it.
            record.title = creation["name"].as_str().map(str::to_owned);
            record.metadata.insert(
                weft_runtime::child::SUBAGENT_KEY.to_owned(),
                serde_json::Value::from(agent.name.clone()),
            );
            record
                .metadata
                .insert("arguments".to_owned(), arguments.clone());
        }
        store.put_thread(&record).await?;
    }
    if let Some(creation) = creation {
        // The deferred `subagent_create`: the instance joins the parent's registry now,
        // under its thread (its reference), so `subagent_message` reaches it later.
        use weft_store::Subagents as _;
        let name = creation["name"].as_str().unwrap_or(&agent.name).to_owned();
        let entry = weft_store::SubagentRegistryEntry {
            reference: thread.clone(),
            name: name.clone(),
            title: agent.title.clone(),
            description: creation["description"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| agent.tool_description.clone())
                .or_else(|| agent.description.clone())
                .unwrap_or_default(),
            resumable: Some(true),
            blocking: creation["blocking"].as_bool(),
            thread_name: Some(name),
            spawn_group_id: None,
            created_at: Some(chrono::Utc::now().timestamp_micros()),
            status: "running".into(),
            parent_communication: creation["parentCommunication"].as_str().map(str::to_owned),
            agent: agent.name.clone(),
        };
        store
            .register_child(parent_thread, &entry, arguments, None)
            .await?;
    }
    let launch = crate::Launch {
        workspace: Some(workspace),
        ..launch.clone()
    };
    let spec = launch.spec(project, agent, input)?;
    let handle = runtime.start_on(Some(&thread), spec, false).await?;
    Ok((request, handle))
}

/// The filesystem of a booted deferred request (agents §7.1, §7.12): the child's own
/// folder in the parent's workspace (`launch`'s) — the one the call's attachments were
/// copied into, else the request thread's — and its first message `input`, followed by the
/// paths of the attachments a deferred `subagent_create` gave, copied there now.
async fn deferred_files(
    project: &Project,
    launch: &crate::Launch,
    request: &weft_store::VariableRequest,
    input: String,
) -> Result<(std::path::PathBuf, String), BootError> {
    let parent = launch
        .workspace
        .clone()
        .unwrap_or_else(|| project.dir().to_owned());
    let folder = request.payload["folder"]
        .as_str()
        .map_or_else(|| deferred_thread(request), str::to_owned);
    let confinement = project.confinement(None, None);
    let (root, own) = crate::filesystem::open_child(&parent, &confinement, &folder)
        .await
        .map_err(|source| crate::ProjectError::Workspace {
            path: parent.clone(),
            source,
        })?;
    let property = request.payload["create"]["attachmentsProperty"].as_str();
    let files = crate::attachments::paths_of(&request.payload["arguments"], property)
        .map_err(|e| BootError::Attachments(e.message))?;
    let mut given = confinement;
    crate::filesystem::hide_children(&mut given, &parent);
    let copies = crate::attachments::copy(
        crate::attachments::Files {
            root: &parent,
            confinement: &given,
        },
        crate::attachments::Files {
            root: &root,
            confinement: &own,
        },
        &files,
        crate::attachments::GIVEN_FOLDER,
    )
    .await
    .map_err(BootError::Attachments)?;
    Ok((root, crate::attachments::listed(&input, &copies)))
}

/// Queues the result of a booted deferred request on its parent thread, as the spec's
/// implicit completion (agents §7.10): `Subagent (reference: {thread}) has returned the
/// following result:` + blank line + the output, or the failure text.
///
/// # Errors
/// Storage failures.
pub async fn deliver_deferred(
    store: &Store,
    request: &weft_store::VariableRequest,
    end: &weft_runtime::RunEnd,
) -> Result<(), StoreError> {
    use weft_store::ThreadQueue as _;
    let reference = deferred_thread(request);
    let text = match end {
        weft_runtime::RunEnd::Completed { output } => {
            crate::subagent::result_message(&reference, output)
        }
        weft_runtime::RunEnd::Failed { error } => {
            crate::subagent::failure_message(&reference, error)
        }
        other => crate::subagent::failure_message(&reference, &format!("the run ended: {other:?}")),
    };
    if request
        .payload
        .get("create")
        .is_some_and(serde_json::Value::is_object)
    {
        // A resumable instance: its registry entry says how its first session ended.
        use weft_store::Subagents as _;
        let status = match end {
            weft_runtime::RunEnd::Completed { .. } => "completed",
            _ => "failed",
        };
        store.set_child_status(&reference, status).await?;
    }
    // Silent (the runtime's message to the model, not the user's), and queued once.
    store
        .queue_message_once(
            &request.parent_thread_id,
            &format!("q-{}-result", request.id),
            &text,
        )
        .await
        .map(|_| ())
}
