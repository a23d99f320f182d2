//! The Agent Runtime Spec's profile for a project's agents (`weft_runtime::profile`): which
//! agents it governs, its settings (the project's `[runtime]` table with an agent's
//! `runtime` table over it), and what it changes in an agent's side turn — the tools offered
//! (`allowedTools` / `deniedTools`, `complete_task` always), how many calls run at once
//! (`interactive`: one; `batch`: `maxParallel`), which tools ask a person, how failed calls
//! are retried, and the stages and the orchestrator that hold the contracts.
//!
//! The profile governs `ai_human` agents: a `dual_ai` session's sides end their turns by
//! answering each other, which the completion contract would call an error.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # std::fs::create_dir(dir.path().join("agents"))?;
//! # std::fs::create_dir(dir.path().join("prompts"))?;
//! # std::fs::write(dir.path().join("agents/helper.toml"), "name = \"helper\"\n[sideA]\nprompt = \"helper\"\n")?;
//! # std::fs::write(dir.path().join("prompts/helper.toml"), "name = \"helper\"\n")?;
//! std::fs::write(dir.path().join("weft.toml"), "model = \"scripted:s.json\"\n[runtime]\nmaxTurns = 6\n")?;
//! let project = weft_standard::Project::load(dir.path())?;
//! let agent = project.agent("helper").expect("the agent");
//! let profile = project.runtime_profile(agent, false).expect("on: the project has [runtime]");
//! assert_eq!((profile.max_turns, profile.grace_turns), (6, 2));
//!
//! std::fs::write(dir.path().join("weft.toml"), "model = \"scripted:s.json\"\n[runtime]\ngraceTurn = 1\n")?;
//! let problems = weft_standard::Project::load(dir.path()).unwrap_err().to_string();
//! assert!(problems.contains("weft.toml") && problems.contains("runtime.graceTurn"), "{problems}");
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use weft_provider::provider::ModelReference;
use weft_provider::{ExecutionMode, LlmModel, Provider, Tool};
use weft_runtime::approval::ToolPolicy;
use weft_runtime::ledger::RunContext;
use weft_runtime::profile::routing::{Candidate, RoutedModel, RoutingConfig};
use weft_runtime::profile::sop::{SOP_PROGRESS_KEY, SopProgress};
use weft_runtime::profile::{COMPLETE_TASK, PolicyMode, RuntimeProfile};

use crate::definition::{AgentDefinition, AgentType};
use crate::error::Problem;
use crate::project::Project;

impl Project {
    /// The runtime profile of `agent` when it is on for it — the project has a `[runtime]`
    /// table, the agent a `runtime` table, or the run was started with `weft run --profile
    /// runtime` (`forced`) — and the agent is an `ai_human` one; `None` otherwise.
    pub fn runtime_profile(&self, agent: &AgentDefinition, forced: bool) -> Option<RuntimeProfile> {
        let project = self.config().runtime.as_ref();
        let on = forced || project.is_some() || agent.runtime.is_some();
        if !on || agent.agent_type != AgentType::AiHuman {
            return None;
        }
        // The project was validated when it loaded: a table that does not parse is not
        // reached here; the defaults stand in if it were.
        Some(RuntimeProfile::from_tables(project, agent.runtime.as_ref()).unwrap_or_default())
    }
}

impl Project {
    /// Every `secretPatterns` of the project's runtime profile (`[runtime.policy]` and the
    /// agents' `runtime.policy`), for the store's redactor: a run's records are redacted
    /// with them whichever agent runs.
    pub fn secret_patterns(&self) -> Vec<String> {
        let mut patterns: Vec<String> = self
            .agents()
            .filter_map(|agent| self.runtime_profile(agent, false))
            .flat_map(|profile| profile.policy.secret_patterns)
            .collect();
        if let Ok(profile) = RuntimeProfile::from_tables(self.config().runtime.as_ref(), None) {
            patterns.extend(profile.policy.secret_patterns);
        }
        patterns.sort();
        patterns.dedup();
        patterns
    }
}

/// How the turn that produced `state` ended under the runtime profile, judged from its last
/// step (a resumed session asks this of its latest checkpoint): its `complete_task` call was
/// accepted (`sessionStop` with the summary and the artifacts), or `None` — the turn goes on.
pub(crate) fn ended_in(state: &weft_agent::AgentState) -> Option<crate::side::TurnEnd> {
    use weft_provider::Message;
    let count = state.message_count();
    let last = state.message(count.checked_sub(1)?)?;
    let Message::ToolResult(results) = &*last else {
        return None;
    };
    let previous = state.message(count.checked_sub(2)?)?;
    let Message::Assistant(response) = &*previous else {
        return None;
    };
    let call = response.tool_calls.iter().find(|call| {
        call.tool_name == COMPLETE_TASK
            && results
                .results
                .iter()
                .any(|r| r.tool_call_id == call.tool_call_id && !r.is_error)
    })?;
    let args = &call.arguments;
    Some(crate::side::TurnEnd::SessionStop(
        crate::definition::LifecyclePayload {
            message: args
                .get("summary")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            attachments: args
                .get("artifacts")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        },
    ))
}

/// The problems of the project's `[runtime]` table (in `config_file`) and of every agent's
/// `runtime` table over it (in the agent's file).
pub(crate) fn check<'a>(
    project: Option<&Value>,
    config_file: &Path,
    agents: impl Iterator<Item = (&'a AgentDefinition, &'a Path)>,
    problems: &mut Vec<Problem>,
) {
    let project_ok = match (project, RuntimeProfile::from_tables(project, None)) {
        (Some(_), Err(problem)) => {
            problems.push(Problem::new(config_file, problem.key, problem.message));
            false
        }
        _ => true,
    };
    for (agent, file) in agents {
        let Some(table) = &agent.runtime else {
            continue;
        };
        if agent.agent_type != AgentType::AiHuman {
            problems.push(Problem::new(
                file,
                "runtime",
                "the runtime profile governs ai_human agents; a dual_ai session's sides end their turns by \
                 answering each other",
            ));
            continue;
        }
        if project_ok && let Err(problem) = RuntimeProfile::from_tables(project, Some(table)) {
            problems.push(Problem::new(file, problem.key, problem.message));
        }
    }
}

/// The problems of the project's own SOP roles' tools (`[runtime.roles.NAME]`): each must
/// be a tool the project knows (built-in, `tools/`, an agent, `mcp:SERVER`).
pub(crate) fn check_role_tools(project: &Project, config_file: &Path, problems: &mut Vec<Problem>) {
    let Ok(profile) = RuntimeProfile::from_tables(project.config().runtime.as_ref(), None) else {
        return;
    };
    for (name, role) in &profile.roles {
        for (i, phase) in role.phases.iter().enumerate() {
            for tool in &phase.allowed_tools {
                if project.tool_kind(tool).is_none() {
                    problems.push(Problem::new(
                        config_file,
                        format!("runtime.roles.{name}.phases[{i}].allowedTools"),
                        format!(
                            "unknown tool {tool:?}: not a built-in tool, not in tools/, not an agent, and not mcp:SERVER"
                        ),
                    ));
                }
            }
        }
    }
}

/// The tools the agent is offered under `profile`: its own that the policy allows, and
/// `complete_task` (added when its prompt does not list it).
pub(crate) fn offered(profile: &RuntimeProfile, tools: Vec<Tool>) -> Vec<Tool> {
    let mut tools: Vec<Tool> = tools
        .into_iter()
        .filter(|t| profile.policy.offers(&t.name))
        .collect();
    if !tools.iter().any(|t| t.name == COMPLETE_TASK) {
        tools.push(weft_tools::complete_task());
    }
    tools
}

/// Where a turn's SOP workflow stood after a step, as the step's checkpoint keeps it (under
/// [`SOP_PROGRESS_KEY`]): the session turn it belongs to and the workflow's progress.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SopMark {
    pub(crate) turn: u64,
    #[serde(flatten)]
    pub(crate) progress: SopProgress,
}

impl SopMark {
    /// The progress `state` (a checkpoint's) keeps for the session turn `turn`: a resumed
    /// turn's; `None` for a new turn (its workflow starts at the first phase).
    pub(crate) fn resumed(state: &weft_agent::AgentState, turn: u64) -> Option<SopProgress> {
        let mark: SopMark =
            serde_json::from_value(state.metadata().get(SOP_PROGRESS_KEY)?.clone()).ok()?;
        (mark.turn == turn).then_some(mark.progress)
    }
}

/// The SOP workflow of an agent turn whose profile names a role (§7): the role's built-in
/// tools the prompt lacks (those the policy offers) and `advance_phase` are added to `tools`.
/// A resumed turn goes on from `resumed` (the progress its checkpoint kept).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sop_turn(
    profile: &RuntimeProfile,
    project: &Project,
    workspace: &weft_tools::Workspace,
    run: Option<std::sync::Arc<weft_runtime::ledger::RunContext>>,
    side: weft_runtime::event::Side,
    (turn, resumed): (u64, Option<SopProgress>),
    tools: &mut Vec<Tool>,
) -> Option<crate::side::SopTurn> {
    use std::sync::Arc;
    use weft_runtime::profile::sop::SopExecutor;
    let role = profile.sop_role()?;
    let mut extra = Vec::new();
    for name in role.all_tools() {
        if tools.iter().any(|t| t.name == name) || !profile.policy.offers(&name) {
            continue;
        }
        if let Some(tool) = weft_tools::builtin_tool(workspace, &name) {
            extra.push(tool);
        }
    }
    let test_command = project
        .config()
        .project
        .as_ref()
        .and_then(|p| p.get("testCommand"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let checker = Arc::new(crate::sop::ProjectGates::new(
        workspace.clone(),
        test_command,
    ));
    let executor = Arc::new(SopExecutor::new(role, checker, run, Some(side)));
    if let Some(progress) = &resumed
        && !executor.restore(progress)
    {
        tracing::warn!(
            role = %progress.role,
            phase = %progress.phase,
            "the checkpoint's SOP progress is not the role's; the workflow starts at its first phase"
        );
    }
    extra.push(executor.advance_tool());
    tools.extend(extra.iter().cloned());
    Some(crate::side::SopTurn {
        executor,
        extra,
        turn,
    })
}

/// How many calls of one response run at once: one in `interactive` mode (the others are
/// refused by the profile's stage), `maxParallel` in `batch` mode.
pub(crate) fn execution_mode(profile: &RuntimeProfile) -> ExecutionMode {
    match profile.policy.mode {
        PolicyMode::Interactive => ExecutionMode::Sequential,
        PolicyMode::Batch => ExecutionMode::Limited(profile.policy.max_parallel),
    }
}

/// The project's tool policy for the agent, with the profile's approvals (of the tools it
/// offers) and retries added.
pub(crate) fn tool_policy(
    profile: &RuntimeProfile,
    mut policy: ToolPolicy,
    tools: &[Tool],
) -> ToolPolicy {
    for tool in profile.policy.approval_tools() {
        if tools.iter().any(|t| t.name == tool) {
            policy.requires_approval.insert(tool);
        }
    }
    policy.max_retries = policy.max_retries.max(profile.retry.max_retries);
    policy.retry = Some(weft_runtime::approval::RetryPolicy {
        backoff_ms: profile.retry.backoff_ms,
        backoff_multiplier: profile.retry.backoff_multiplier,
        retryable_errors: profile.retry.retryable_errors.clone(),
    });
    policy.confirmations |= profile.policy.has_rules();
    policy
}

/// The routing rules of an agent under `profile`, their model references resolved in the
/// project (relative script paths): `[runtime.routing]`, or — when there is none — the
/// agent's own model as the default (its calls are logged as routed under `quality`).
/// `None` when there are no rules and the agent names no model.
pub(crate) fn routing_of(
    profile: &RuntimeProfile,
    project: &Project,
    requested: Option<&str>,
) -> Option<RoutingConfig> {
    let mut routing = match &profile.routing {
        Some(routing) => routing.clone(),
        None => RoutingConfig {
            default: requested?.to_owned(),
            ..RoutingConfig::default()
        },
    };
    routing.map_models(|m| project.model_reference(m));
    Some(routing)
}

/// What a routed model needs from its session.
pub(crate) struct Routing<'a> {
    /// The durable run and the conversation scope its responses are recorded in.
    pub durable: Option<(Arc<RunContext>, String)>,
    /// The run's base URLs, by provider.
    pub base_urls: &'a BTreeMap<String, String>,
    /// The prompt's headers.
    pub headers: &'a [(String, String)],
    /// The task's phase at each call.
    pub phase: Arc<dyn Fn() -> String + Send + Sync>,
    /// The side.
    pub side: crate::definition::Side,
}

/// The model of an agent task under routing rules: every model of the rules (and the
/// requested one) bound through `bind` (recorded in a durable run), each with its
/// provider's endpoint and headers, behind a [`RoutedModel`].
///
/// # Errors
/// When the rules' default model cannot be used.
pub(crate) fn routed_model(
    routing: RoutingConfig,
    requested: Option<String>,
    bind: &mut dyn FnMut(&str) -> Result<ModelReference, String>,
    context: Routing<'_>,
) -> Result<ModelReference, String> {
    let mut references = routing.models();
    if let Some(requested) = &requested
        && !references.contains(requested)
    {
        references.push(requested.clone());
    }
    let mut candidates = HashMap::new();
    for reference in references {
        let candidate = bind(&reference).and_then(|model| {
            let model = match &context.durable {
                Some((run, scope)) => {
                    weft_runtime::recorded::recorded_model(&model, run.clone(), scope.clone())
                        .map_err(|e| e.to_string())?
                }
                None => model,
            };
            let bound = model
                .provider
                .llm_handler()
                .and_then(|h| h.bind(&model.model_id, &model.options))
                .map_err(|e| e.to_string())?;
            let mut config = model.provider.default_config.clone();
            if let Some(url) = context.base_urls.get(&model.provider.name) {
                config.base_url = Some(url.clone());
            }
            config.headers.extend(context.headers.iter().cloned());
            Ok(Candidate {
                model: bound,
                config: Arc::new(config),
            })
        });
        candidates.insert(reference, candidate);
    }
    let default = routing.default.clone();
    let (run, side) = (
        context.durable.as_ref().map(|(run, _)| run.clone()),
        Some(context.side),
    );
    let routed: Arc<dyn LlmModel> = Arc::new(RoutedModel::new(
        routing,
        requested,
        candidates,
        context.phase,
        run,
        side,
    )?);
    let (provider, model_id) = default.split_once(':').unwrap_or(("routing", &default));
    let provider = Provider::new(provider, "routing")
        .with_llm(move |_id: &str, _options: &Value| Ok(routed.clone()));
    Ok(ModelReference {
        model_id: model_id.to_owned(),
        provider: Arc::new(provider),
        options: Value::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sop_phases_mcp_entry_names_tools_as_weft_mcp_names_them() {
        // A phase's `mcp:SERVER` matches the names weft-mcp gives the server's tools.
        assert_eq!(
            weft_runtime::profile::sop::MCP_SEPARATOR,
            weft_mcp::SEPARATOR
        );
        let phase = weft_runtime::profile::sop::Phase {
            name: "look".into(),
            allowed_tools: vec![format!("{}demo", crate::project::MCP_PREFIX)],
        };
        assert!(phase.offers(&format!("demo{}echo", weft_mcp::SEPARATOR)));
    }

    #[test]
    fn the_profile_sets_the_specs_retry_policy_and_approvals() {
        let profile = RuntimeProfile::default();
        let tools = vec![weft_tools::complete_task()];
        let policy = tool_policy(&profile, ToolPolicy::default(), &tools);
        assert_eq!(policy.max_retries, 2);
        let retry = policy.retry.expect("the profile's retry policy");
        assert_eq!((retry.backoff_ms, retry.backoff_multiplier), (1000, 2.0));
        // write_file / run_command ask only when the agent has them.
        assert!(policy.requires_approval.is_empty());
        assert_eq!(execution_mode(&profile), ExecutionMode::Sequential);
        let mut batch = RuntimeProfile::default();
        batch.policy.mode = PolicyMode::Batch;
        batch.policy.max_parallel = 3;
        assert_eq!(execution_mode(&batch), ExecutionMode::Limited(3));
        // In batch mode nothing asks by default.
        let tools = vec![weft_tools::complete_task()];
        assert!(
            tool_policy(&batch, ToolPolicy::default(), &tools)
                .requires_approval
                .is_empty()
        );
    }
}
