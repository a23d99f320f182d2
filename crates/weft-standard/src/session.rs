//! Sessions (agents §2, §5, §6): [`run_session`] runs one agent of a [`Project`] to a stop.
//!
//! * `ai_human`: side A is the agent; side B is the human, whose message is the input. The
//!   session is side A's turn (one or more steps) until a stop condition.
//! * `dual_ai`: side A gets the input, then the sides alternate; each side's state holds
//!   its own messages as `assistant` and the other side's final texts as `user`, so neither
//!   sees the other's tool calls. Every side turn counts once against `maxSessionTurns`.
//! * Handoff: a call to an `ai_human` agent exposed as a tool ends the turn; the target
//!   agent's side A continues on the same state (history preserved), and an `agent.handoff`
//!   ThreadProtocol system message is recorded.
//!
//! Tool calls run one after another (`ExecutionMode::Sequential`, SA-091).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use weft_agent::checkpoint::CheckpointMode;
use weft_agent::{AgentError, AgentOptions, AgentState, AgentStreamEvent, agent};
use weft_provider::adapters::scripted::{self, Script, ScriptedModel};
use weft_provider::provider::ModelReference;
use weft_provider::{ExecutionMode, Message, ProviderRegistry, StreamEventType, TokenUsage};
use weft_runtime::ledger::RunContext;
use weft_store::Store;
use weft_thread::SystemMessage;
use weft_tools::Workspace;

use weft_runtime::event::{AgentPath, Emitter, EventKind};
pub use weft_runtime::event::{SessionStatus, StopReason};

use crate::definition::{AgentDefinition, AgentType, Side};
use crate::error::SessionError;
use crate::project::{Project, ToolKind, side_config};
use crate::side::{McpTools, SideTurn, StopPlan, TurnEnd};
use crate::tools::prompt_tools;

/// Most handoffs in one session (a guard against agents handing a task back and forth): one
/// more fails the session, with a message that says so.
pub const MAX_HANDOFFS: u32 = 16;

/// Durable execution through weft-store: checkpoints, the event log, and the tool ledger.
#[derive(Debug, Clone)]
pub struct Durable {
    /// The run's ledger context (tools are wrapped with weft-store's `DurableTool`).
    pub run: Arc<RunContext>,
    /// The store checkpoints go to.
    pub store: Store,
    /// `Sync` (a recorded result is never re-run) or `Async`.
    pub mode: CheckpointMode,
    /// The run's usage before this session started (a resumed run: its latest
    /// checkpoint's). Checkpoints record the run's usage up to them.
    pub base_usage: TokenUsage,
}

/// Everything a session needs besides the project.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Overrides every prompt's model (`weft run --model`).
    pub model_override: Option<String>,
    /// Resolves model references.
    pub providers: Arc<ProviderRegistry>,
    /// The root of the built-in tools' sandbox.
    pub workspace: std::path::PathBuf,
    /// Stops the session (Ctrl-C).
    pub signal: CancellationToken,
    /// Where the events of a session outside a durable run go (`None`: nowhere). A durable
    /// session's events go to its run's log and subscribers ([`Durable::run`]).
    pub events: Option<Emitter>,
    /// Durable execution; `None` runs in memory.
    pub durable: Option<Durable>,
    /// Side A's starting state. With an empty input the session goes on from it (see
    /// [`run_session`]).
    pub initial_state: AgentState,
    /// Side B's starting state (`dual_ai`; `None`: empty). A resumed session passes side
    /// B's latest checkpoint here.
    pub initial_state_b: Option<AgentState>,
    /// The thread id checkpoints are saved under (side B uses `THREAD.sideB`).
    pub thread_id: Option<String>,
    /// What the built-in tools may not touch and how commands are sandboxed
    /// ([`Project::confinement`] builds it for a run).
    pub confinement: weft_tools::Confinement,
    /// The endpoint of each provider (`provider name → base URL`), e.g. a proxy or a local
    /// server; a provider not listed uses its own default.
    pub base_urls: std::collections::BTreeMap<String, String>,
    /// Text added to every agent's system prompt for this session (the Universal Agent
    /// Protocol's `<uap-context>`: memory and rules, when the project turns the gates on for
    /// runs).
    pub start_context: Option<String>,
    /// The session's agent path in the events of a session outside a durable run (`None`:
    /// the started agent's name; a subagent's session is `parent/child`). A durable
    /// session's events name the agent of its run context.
    pub agent_path: Option<AgentPath>,
    /// The thread's variable values (its own and inherited; see [`crate::variables`]), the
    /// highest level of variable resolution. A subagent's child gets this env minus the
    /// names the child scopes.
    pub variables: crate::variables::Env,
    /// The side of a `dual_ai` session that takes the input (side A unless a resumable
    /// subagent's `receives_messages` is `side_b`: then side B answers the input as if side
    /// A had said it).
    pub input_side: Side,
    /// Where non-blocking subagents run (`None`: the session waits for them like for
    /// blocking ones). A run's root session gets one, and its children share it.
    pub background: Option<crate::background::Background>,
    /// A subagent with `parentCommunication = "explicit"`: its parent, to which its
    /// `notify_parent` and `set_status` tools escalate.
    pub escalation: Option<crate::background::Escalation>,
    /// Turns the Agent Runtime Spec's profile on for the session's `ai_human` agents even
    /// without a `[runtime]` table (`weft run --profile runtime`).
    pub runtime_profile: bool,
    /// The runtime profile of the agent that started this session as a subagent (and of its
    /// own parents): its denied tools and rules hold for this session's calls too, so a
    /// child never has more than its parent (runtime spec §5.12(3)).
    pub parent_profile: Option<Arc<weft_runtime::profile::RuntimeProfile>>,
    /// The session starts for the thread's queue (a run started with no input while a tool
    /// call or a message waits in the thread's queue, Standard Agents `queueTool()` on an
    /// idle thread): side A of the thread's agent takes a new turn even though the
    /// thread's last turn had ended, and its first step takes the queue.
    pub for_queue: bool,
}

impl SessionOptions {
    /// In-memory options: the built-in registry, the workspace `workspace`.
    pub fn new(workspace: impl Into<std::path::PathBuf>) -> Self {
        SessionOptions {
            model_override: None,
            providers: Arc::new(ProviderRegistry::with_builtins()),
            workspace: workspace.into(),
            signal: CancellationToken::new(),
            events: None,
            durable: None,
            initial_state: AgentState::initial(),
            initial_state_b: None,
            thread_id: None,
            confinement: weft_tools::Confinement::default(),
            base_urls: std::collections::BTreeMap::new(),
            start_context: None,
            agent_path: None,
            variables: crate::variables::Env::default(),
            input_side: Side::A,
            background: None,
            escalation: None,
            runtime_profile: false,
            parent_profile: None,
            for_queue: false,
        }
    }
}

/// How a session ended.
#[derive(Debug, Clone)]
pub struct SessionOutcome {
    /// Completed, failed or interrupted.
    pub status: SessionStatus,
    /// Why.
    pub reason: StopReason,
    /// The final output, or the lifecycle message of `sessionStop` / `sessionFail`, or the
    /// error.
    pub message: String,
    /// The lifecycle payload's attachments.
    pub attachments: Vec<String>,
    /// Model calls made.
    pub steps: u64,
    /// Token usage.
    pub usage: TokenUsage,
    /// The agent active at the end (differs from the started one after a handoff).
    pub agent: String,
    /// Side A's final state (the thread's history).
    pub state_a: AgentState,
    /// Side B's final state (`dual_ai` only).
    pub state_b: Option<AgentState>,
    /// ThreadProtocol system events recorded during the session (`agent.handoff`).
    pub thread_events: Vec<SystemMessage>,
    /// Side turns taken.
    pub turns: u64,
}

struct Driver<'a> {
    project: &'a Project,
    options: &'a SessionOptions,
    workspace: Workspace,
    steps: u64,
    usage: TokenUsage,
    models: HashMap<String, ModelReference>,
    /// The session's agent (events outside a durable run name it).
    agent: AgentPath,
    /// The project's MCP servers, started on first use, stopped when the session ends.
    mcp: Option<Arc<weft_mcp::McpHub>>,
    /// The project, shared with the session's subagent tools.
    shared: Arc<Project>,
}

impl Driver<'_> {
    /// Resolves a model reference once per session, so a cursor-based `scripted:` model
    /// keeps its place across side turns and handoffs.
    fn model(&mut self, reference: &str) -> Result<ModelReference, String> {
        if let Some(model) = self.models.get(reference) {
            return Ok(model.clone());
        }
        let model = match reference.strip_prefix("scripted:") {
            Some(path) => {
                let script = Script::load(std::path::Path::new(path)).map_err(|e| e.to_string())?;
                scripted::from_shared(Arc::new(ScriptedModel::from_script(path, script)))
            }
            None => self
                .options
                .providers
                .resolve(reference)
                .map_err(|e| e.to_string())?,
        };
        // A model without vision gets its requests without image parts (SA-090).
        let model = crate::vision::without_images_if_blind(model);
        self.models.insert(reference.to_owned(), model.clone());
        Ok(model)
    }

    fn events(&self) -> SessionEvents {
        SessionEvents::of(self.options, &self.agent)
    }

    /// What this session's subagent tools start children from.
    fn parent(&self) -> crate::subagent::Parent {
        crate::subagent::Parent {
            project: self.shared.clone(),
            options: self.options.clone(),
            agent: self.agent.clone(),
            transfer: crate::variables::Env::default(),
            child_files: crate::filesystem::ChildFiles::Own,
        }
    }

    /// Runs the immediate subagent tools of side A's prompt of `pos.agent`, which just
    /// became active (agents §7.6): each as a call the conversation records (the call, then
    /// its result) before the first model step. The call's message argument is the latest
    /// user message, after the `nameEnv` / `descriptionEnv` hints (`Name: …`,
    /// `Description: …`: model-visible); `scopedEnv` values go to the child's env only.
    async fn run_immediate(&mut self, pos: &mut Position<'_>) {
        let Some(prompt) = self.project.prompt(&pos.agent.side_a.prompt) else {
            return;
        };
        let env = &self.options.variables;
        let entries: Vec<(
            crate::definition::SubagentToolConfig,
            crate::definition::Immediate,
        )> = prompt
            .tools
            .iter()
            .filter_map(|entry| entry.subagent())
            .filter(|config| {
                config.enabled(|v| {
                    crate::variables::resolve(self.project, env, pos.agent, Some(prompt), None, v)
                })
            })
            .filter_map(|config| config.immediate().map(|i| (config.clone(), i)))
            .collect();
        if entries.is_empty() {
            return;
        }
        // The input becomes part of the state first: the calls answer it.
        if let Some(input) = pos.input.take() {
            pos.state_a = pos.state_a.with_message(input);
        }
        let task = pos
            .state_a
            .messages()
            .rev()
            .find(|m| m.is_user())
            .map(|m| m.text())
            .unwrap_or_default();
        for (n, (config, immediate)) in entries.into_iter().enumerate() {
            let resolve = |name: &str| {
                crate::variables::resolve(self.project, env, pos.agent, Some(prompt), None, name)
            };
            let mut hints = Vec::new();
            if let Some(value) = immediate.name_env.as_deref().and_then(resolve) {
                hints.push(format!("Name: {value}"));
            }
            if let Some(value) = immediate.description_env.as_deref().and_then(resolve) {
                hints.push(format!("Description: {value}"));
            }
            let text = if hints.is_empty() {
                task.clone()
            } else {
                format!("{}\n\n{task}", hints.join("\n"))
            };
            let mut transfer = crate::variables::Env::default();
            for name in &immediate.scoped_env {
                if let Some(value) = resolve(name) {
                    let kind = if env.is_secret(name) {
                        weft_store::VariableKind::Secret
                    } else {
                        weft_store::VariableKind::Text
                    };
                    transfer = transfer.with(name, &value, kind);
                }
            }
            let property = config
                .init_user_message_property
                .clone()
                .unwrap_or_else(|| crate::subagent::DEFAULT_MESSAGE_PROPERTY.to_owned());
            let args = serde_json::json!({ property: text });
            let id = format!("immediate-{}-{n}-{}", pos.turns + 1, config.name);
            self.events()
                .emit(
                    Some(&id),
                    EventKind::ToolCallStart {
                        tool: config.name.clone(),
                        arguments: args.clone(),
                        side: Some(Side::A),
                    },
                )
                .await;
            let parent = self.parent();
            let result = crate::subagent::call_immediate(
                &parent,
                &config,
                &args,
                &id,
                self.options.signal.child_token(),
                transfer,
            )
            .await;
            let (result, is_error) = match result {
                Ok(value) => (value, false),
                Err(error) => (Value::String(error.message), true),
            };
            self.events()
                .emit(
                    Some(&id),
                    EventKind::ToolCallEnd {
                        tool: config.name.clone(),
                        is_error,
                        result: Some(result.clone()),
                        result_bytes: None,
                        result_ref: None,
                        side: Some(Side::A),
                    },
                )
                .await;
            let call = weft_provider::ToolCall::new(&id, &config.name, args);
            if let Ok(assistant) = weft_provider::AssistantMessage::new(
                Vec::new(),
                vec![call],
                weft_provider::MessageOptions::default(),
            ) {
                pos.state_a = pos.state_a.with_messages([
                    Message::Assistant(assistant),
                    Message::ToolResult(weft_provider::ToolResultMessage::new(vec![
                        weft_provider::ToolResult {
                            tool_call_id: id.clone(),
                            result,
                            is_error,
                        },
                    ])),
                ]);
            }
        }
    }

    async fn emit(&self, kind: EventKind) {
        self.events().emit(None, kind).await;
    }

    /// The MCP servers of `prompt` (`mcp:NAME`), their tools added to `tools` (the rest).
    async fn mcp_tools(
        &self,
        prompt: &crate::definition::PromptDefinition,
        tools: &mut Vec<weft_provider::Tool>,
    ) -> Result<Option<McpTools>, String> {
        let servers: Vec<String> = self
            .project
            .mcp_servers_of(prompt)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let Some(hub) = self.mcp.clone().filter(|_| !servers.is_empty()) else {
            return Ok(None);
        };
        let (listed, fingerprint) = McpTools::listing(&hub, &servers)
            .await
            .map_err(|e| e.to_string())?;
        let base = tools.clone();
        tools.extend(listed);
        Ok(Some(McpTools {
            hub,
            servers,
            base,
            fingerprint,
            profile: None,
        }))
    }

    /// Runs side turn number `turn_no` of `agent`, or goes on with it when it had taken
    /// `prior_steps` steps before a resume. Returns the end, the new state.
    async fn side_turn(
        &mut self,
        agent_def: &AgentDefinition,
        side: Side,
        input: Option<Message>,
        state: &AgentState,
        (turn_no, prior_steps, session_start): (u64, u64, u64),
    ) -> Result<(TurnEnd, AgentState), (AgentError, AgentState)> {
        // Every checkpoint of the turn says where the session was (see `SessionMark`).
        let mark = SessionMark {
            agent: agent_def.name.clone(),
            side,
            turn: turn_no,
            turn_start_step: state.step() - prior_steps,
            session_start,
        };
        let state = &mark.stamp(state);
        let fail = |m: String| (AgentError::Config(m), state.clone());
        let config = side_config(agent_def, side)
            .ok_or_else(|| fail(format!("{} has no {}", agent_def.name, side.key())))?;
        let prompt = self
            .project
            .prompt(&config.prompt)
            .ok_or_else(|| fail(format!("unknown prompt {}", config.prompt)))?;
        let flags = Arc::new(weft_runtime::profile::layer::ProfileFlags::default());
        let requested = self
            .options
            .model_override
            .clone()
            .or_else(|| self.project.model_of(prompt).map(str::to_owned))
            .map(|r| self.project.model_reference(&r));
        let durable_run = self.options.durable.as_ref().map(|d| d.run.clone());
        // The Agent Runtime Spec's profile, when it is on for this agent.
        let profile = self
            .project
            .runtime_profile(agent_def, self.options.runtime_profile)
            .map(Arc::new);
        let headers = self
            .project
            .headers(&self.options.variables, agent_def, prompt);
        // Under the profile every model call is routed (§5.7): the rules of
        // `[runtime.routing]`, or the agent's own model when there are none.
        let routing = profile.as_ref().and_then(|profile| {
            crate::runtime_profile::routing_of(profile, self.project, requested.as_deref())
        });
        let reference = match (&routing, &requested) {
            (Some(routing), _) => routing.default.clone(),
            (None, Some(requested)) => requested.clone(),
            (None, None) => return Err(fail(format!("prompt {} has no model", prompt.name))),
        };
        let model = match routing {
            Some(routing) => {
                let scope = match side {
                    Side::A => self.options.thread_id.clone(),
                    Side::B => self
                        .options
                        .thread_id
                        .as_ref()
                        .map(|t| format!("{t}.sideB")),
                };
                let durable = durable_run.clone().zip(scope);
                let base_urls = self.options.base_urls.clone();
                let flags = flags.clone();
                let mut bind = |reference: &str| self.model(reference);
                crate::runtime_profile::routed_model(
                    routing,
                    requested.clone(),
                    &mut bind,
                    crate::runtime_profile::Routing {
                        durable,
                        base_urls: &base_urls,
                        headers: &headers,
                        phase: Arc::new(move || {
                            if flags.recovering() {
                                weft_runtime::profile::routing::RECOVERY_PHASE.to_owned()
                            } else {
                                weft_runtime::profile::routing::WORK_PHASE.to_owned()
                            }
                        }),
                        side,
                    },
                )
                .map_err(fail)?
            }
            None => {
                let model = self
                    .model(&reference)
                    .map_err(|e| fail(format!("model {reference:?}: {e}")))?;
                // A durable session records every response before its tools run, per side
                // (each side's conversation is its own scope), and a resume replays what was
                // recorded.
                match (&self.options.durable, &self.options.thread_id) {
                    (Some(durable), Some(thread)) => {
                        let scope = match side {
                            Side::A => thread.clone(),
                            Side::B => format!("{thread}.sideB"),
                        };
                        weft_runtime::recorded::recorded_model(&model, durable.run.clone(), scope)
                            .map_err(|e| fail(format!("model {reference:?}: {e}")))?
                    }
                    _ => model,
                }
            }
        };
        let routed = profile.is_some();
        let mut options = self.options.clone();
        // The subagents this agent starts are bound by its profile's denials and rules.
        options.parent_profile = profile
            .clone()
            .or_else(|| self.options.parent_profile.clone());
        let parent = crate::subagent::Parent {
            project: self.shared.clone(),
            options,
            agent: self.agent.clone(),
            transfer: crate::variables::Env::default(),
            child_files: crate::filesystem::ChildFiles::Own,
        };
        let mut tools = prompt_tools(self.project, agent_def, prompt, &self.workspace, &parent)
            .map_err(|e| fail(e.to_string()))?;
        let mcp = self.mcp_tools(prompt, &mut tools).await.map_err(fail)?;
        if let Some(profile) = &profile {
            tools = crate::runtime_profile::offered(profile, tools);
            // `[runtime.delegation]`: the runtime spec's delegation, on the same child runs.
            tools.extend(crate::delegation::offered(
                profile, &parent, agent_def, prompt, &reference,
            ));
        }
        // The agent's SOP role (runtime spec §7): its tools, `advance_phase`, the workflow.
        let sop = profile.as_deref().and_then(|profile| {
            crate::runtime_profile::sop_turn(
                profile,
                self.project,
                &self.workspace,
                durable_run.clone(),
                side,
                (
                    turn_no,
                    crate::runtime_profile::SopMark::resumed(state, turn_no),
                ),
                &mut tools,
            )
        });
        let mcp = mcp.map(|mut mcp| {
            mcp.profile = profile.clone();
            mcp
        });
        let end = Arc::new(Mutex::new(None));
        let plan = stop_plan(self.project, agent_def, side)
            .ok_or_else(|| fail(format!("{} has no {}", agent_def.name, side.key())))?;
        if let Some(run) = &durable_run
            && !routed
        {
            // Which model serves this side turn, and why (the runtime spec's routing event;
            // under the runtime profile each model call is routed and logged instead).
            let source = if self.options.model_override.is_some() {
                "override"
            } else if prompt.model.is_some() {
                "prompt"
            } else {
                "project"
            };
            run.emit(EventKind::Routing {
                requested: reference.clone(),
                resolved: model.to_reference_string(),
                reason: source.to_owned(),
                policy: "quality".to_owned(),
                side: Some(side),
            })
            .await;
        }
        // The child registry goes into the context before every step when this side may
        // start children, or the thread has some already (read once per turn otherwise).
        let (thread, registry) = match (&self.options.durable, &self.options.thread_id) {
            (Some(durable), Some(thread)) => {
                let starts_children = prompt.tools.iter().any(|t| {
                    matches!(self.project.tool_kind(t.name()),
                        Some(ToolKind::Agent(a)) if a.agent_type == AgentType::DualAi)
                });
                let has_children = || async {
                    use weft_store::Subagents as _;
                    durable
                        .store
                        .children(thread)
                        .await
                        .is_ok_and(|c| !c.is_empty())
                };
                let registry = starts_children || has_children().await;
                (Some((durable.store.clone(), thread.clone())), registry)
            }
            _ => (None, false),
        };
        let orchestrator = profile.as_ref().map(|profile| {
            let orchestrator = weft_runtime::profile::orchestrator::Orchestrator::new(
                profile.clone(),
                flags.clone(),
                durable_run.clone(),
                Some(side),
            );
            Arc::new(match &sop {
                Some(sop) => orchestrator.with_sop(sop.executor.clone()),
                None => orchestrator,
            })
        });
        let strategy = SideTurn {
            profile: orchestrator,
            sop: sop.clone(),
            plan,
            input,
            events: self.events(),
            end: end.clone(),
            prior_steps,
            run: durable_run.clone(),
            side,
            mcp,
            thread,
            registry,
            context: profile.as_ref().map(|profile| {
                Arc::new(weft_runtime::profile::context::ContextManager::new(
                    profile.context.clone(),
                    durable_run.clone(),
                    Some(side),
                ))
            }),
            base_usage: {
                let mut usage = self
                    .options
                    .durable
                    .as_ref()
                    .map(|d| d.base_usage.clone())
                    .unwrap_or_default();
                usage.merge(&self.usage);
                usage.cycles = None;
                usage
            },
        };
        let mut system = match &self.options.start_context {
            Some(context) => format!(
                "{}\n\n{context}",
                self.project
                    .system_text(&self.options.variables, agent_def, prompt)
            ),
            None => self
                .project
                .system_text(&self.options.variables, agent_def, prompt),
        };
        if profile.is_some() {
            // The project's knowledge, in the system prompt of every model call: added after
            // the history is compressed, never part of it (runtime spec §5.11(4)).
            let knowledge = crate::knowledge::load(self.project.dir())
                .await
                .map_err(|e| fail(format!("the project's knowledge/ folder: {e}")))?;
            if let Some(knowledge) = knowledge {
                system = if system.is_empty() {
                    knowledge
                } else {
                    format!("{system}\n\n{knowledge}")
                };
            }
        }
        let mut agent_options = AgentOptions::new(model)
            .system(system)
            .tools(tools.clone())
            // The declared variables' values, for the tools (`run_command` passes them on).
            .tool_extension(crate::variables::tool_env(
                self.project,
                &self.options.variables,
                agent_def,
                prompt,
            ))
            .execution_mode(profile.as_deref().map_or(
                ExecutionMode::Sequential,
                crate::runtime_profile::execution_mode,
            ))
            .execution(strategy);
        if let Some(inherited) = &self.options.parent_profile {
            // A subagent: its parent's denials and rules hold for its calls too.
            let layer = weft_runtime::profile::layer::ProfileLayer::new(
                inherited.clone(),
                Arc::new(weft_runtime::profile::layer::ProfileFlags::default()),
                durable_run.clone(),
                self.workspace.root(),
            );
            agent_options = agent_options.tool_layer(layer.inherited());
        }
        if let Some(profile) = &profile {
            // The profile's policy stage: one engine, which the gates below extend.
            let layer = weft_runtime::profile::layer::ProfileLayer::new(
                profile.clone(),
                flags.clone(),
                durable_run.clone(),
                self.workspace.root(),
            );
            agent_options = agent_options.tool_layer(Arc::new(match &sop {
                Some(sop) => layer.with_sop(sop.executor.clone()),
                None => layer,
            }));
        }
        if let Some(run) = &durable_run {
            // The step's streamed text is logged where the model's stream is read, before the
            // step's calls (which that task runs next).
            agent_options = agent_options.stream_tap(run.stream_tap(Some(side)));
            // The runtime's stages of the tool pipeline: replay, hooks, approval, record.
            let mut policy = self.project.tool_policy(agent_def);
            if let Some(profile) = &profile {
                policy = crate::runtime_profile::tool_policy(profile, policy, &tools);
            }
            for layer in weft_runtime::pipeline::layers(run, &policy) {
                agent_options = agent_options.tool_layer(layer);
            }
        }
        if self.project.gates_in_runs() {
            // `[gates] runs = true`: the UAP gates as a stage, for this agent and its sub-agents.
            let gates =
                crate::gates::GateLayer::for_project(self.project.dir(), self.workspace.root())
                    .map_err(|e| fail(format!("the project's gates: {e}")))?;
            agent_options = agent_options.tool_layer(Arc::new(gates));
        }
        for (key, value) in &prompt.params {
            agent_options = agent_options.param(key.clone(), value.clone());
        }
        let provider = reference.split_once(':').map_or("", |(p, _)| p);
        // A routed model's calls carry their own provider's endpoint and headers.
        let base_url = (!routed)
            .then(|| self.options.base_urls.get(provider).cloned())
            .flatten();
        if (!routed && !headers.is_empty()) || base_url.is_some() {
            agent_options = agent_options.config(weft_provider::ProviderConfig {
                headers,
                base_url,
                ..weft_provider::ProviderConfig::default()
            });
        }
        if let Some(schema) = &prompt.output_schema {
            agent_options = agent_options.structure(schema.clone());
        }
        if let (Some(durable), Some(thread)) = (&self.options.durable, &self.options.thread_id) {
            let session = match side {
                Side::A => thread.clone(),
                Side::B => format!("{thread}.sideB"),
            };
            agent_options = agent_options
                .checkpoints(durable.store.clone())
                .checkpoint_mode(durable.mode)
                .session_id(session);
        }
        let runner = agent(agent_options).map_err(|e| (e, state.clone()))?;
        let label = config
            .label
            .clone()
            .unwrap_or_else(|| agent_def.name.clone());
        self.emit(EventKind::SideTurnStart {
            side,
            label,
            session_turn: turn_no,
        })
        .await;
        let mut stream = runner.stream_with(
            Message::user(""),
            state,
            weft_agent::RunOptions {
                signal: self.options.signal.child_token(),
                ..weft_agent::RunOptions::default()
            },
        );
        let mut arguments: Vec<(String, String, String)> = Vec::new();
        while let Some(event) = stream.next().await {
            self.forward(side, &event, &mut arguments).await;
        }
        let result = stream.result().await;
        runner.flush_checkpoints().await;
        match result {
            Ok(result) => {
                self.steps += result.state.step().saturating_sub(state.step());
                self.usage.merge(&result.turn.usage);
                let end = end
                    .lock()
                    .ok()
                    .and_then(|mut e| e.take())
                    .unwrap_or(TurnEnd::Response(result.turn.text()));
                Ok((end, result.state))
            }
            Err(AgentError::Cancelled { state: s }) => {
                Err((AgentError::Cancelled { state: s.clone() }, *s))
            }
            Err(e) => Err((e, state.clone())),
        }
    }

    /// Passes on what the agent's stream says, outside a durable run (inside one, the run's
    /// step observer and tool pipeline log the steps, text and calls on the agent's own task,
    /// in order, with what they decided).
    async fn forward(
        &self,
        side: Side,
        event: &AgentStreamEvent,
        arguments: &mut Vec<(String, String, String)>,
    ) {
        if self.options.durable.is_some() {
            return;
        }
        let side = Some(side);
        match event {
            AgentStreamEvent::Uap(e) if e.event_type == weft_agent::UapEventType::StepStart => {
                self.emit(EventKind::TurnStart { messages: 0, side }).await;
            }
            AgentStreamEvent::Uap(e) if e.event_type == weft_agent::UapEventType::StepEnd => {
                // The step's tokens, and the run's so far (the side turn starts from the
                // session's usage before it).
                let tokens = |key: &str| {
                    let usage = &e.data[key];
                    (
                        usage["inputTokens"].as_u64().unwrap_or(0),
                        usage["outputTokens"].as_u64().unwrap_or(0),
                    )
                };
                let ((input, output), (run_input, run_output)) =
                    (tokens("stepUsage"), tokens("usage"));
                self.emit(EventKind::TurnEnd {
                    tool_calls: 0,
                    input_tokens: input,
                    output_tokens: output,
                    run_input_tokens: run_input,
                    run_output_tokens: run_output,
                    cost: None,
                    side,
                })
                .await;
            }
            AgentStreamEvent::Uap(_) => {}
            AgentStreamEvent::Upp(e) => match e.event_type {
                StreamEventType::TextDelta => {
                    if let Some(text) = &e.delta.text {
                        let text = text.clone();
                        self.emit(EventKind::TextDelta { text, side }).await;
                    }
                }
                StreamEventType::ReasoningDelta => {
                    if let Some(text) = &e.delta.text {
                        let text = text.clone();
                        self.emit(EventKind::ReasoningDelta { text, side }).await;
                    }
                }
                StreamEventType::ToolCallDelta => {
                    let index = e.index.to_string();
                    let id = e.delta.tool_call_id.clone();
                    let slot = arguments.iter_mut().rev().find(|(i, call_id, _)| {
                        *i == index && (id.is_none() || id.as_deref() == Some(call_id))
                    });
                    match slot {
                        Some(slot) => slot
                            .2
                            .push_str(e.delta.arguments_json.as_deref().unwrap_or_default()),
                        None => arguments.push((
                            index,
                            id.unwrap_or_default(),
                            e.delta.arguments_json.clone().unwrap_or_default(),
                        )),
                    }
                }
                StreamEventType::ToolExecutionStart => {
                    let id = e.delta.tool_call_id.clone().unwrap_or_default();
                    let args = arguments
                        .iter()
                        .find(|(_, call_id, _)| *call_id == id)
                        .and_then(|(_, _, json)| serde_json::from_str(json).ok())
                        .unwrap_or(Value::Null);
                    let kind = EventKind::ToolCallStart {
                        tool: e.delta.tool_name.clone().unwrap_or_default(),
                        arguments: args,
                        side,
                    };
                    self.events().emit(Some(&id), kind).await;
                }
                StreamEventType::ToolExecutionEnd => {
                    let id = e.delta.tool_call_id.clone().unwrap_or_default();
                    let kind = EventKind::ToolCallEnd {
                        tool: e.delta.tool_name.clone().unwrap_or_default(),
                        is_error: e.delta.is_error.unwrap_or(false),
                        result: Some(e.delta.result.clone().unwrap_or(Value::Null)),
                        result_bytes: None,
                        result_ref: None,
                        side,
                    };
                    self.events().emit(Some(&id), kind).await;
                }
                _ => {}
            },
        }
    }
}

/// Where a session's events go: a durable run's log and subscribers (through its
/// context, numbered at the run's turn), or the emitter of a session outside a run.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionEvents {
    run: Option<Arc<RunContext>>,
    live: Option<(Emitter, AgentPath)>,
}

impl SessionEvents {
    fn of(options: &SessionOptions, agent: &AgentPath) -> Self {
        SessionEvents {
            run: options.durable.as_ref().map(|d| d.run.clone()),
            live: options.events.clone().map(|e| (e, agent.clone())),
        }
    }

    /// Emits `kind` (about the call `tool_call_id`, if any).
    pub(crate) async fn emit(&self, tool_call_id: Option<&str>, kind: EventKind) {
        match (&self.run, &self.live, tool_call_id) {
            (Some(run), _, Some(id)) => run.emit_call(id, kind).await,
            (Some(run), _, None) => run.emit(kind).await,
            (None, Some((emitter, agent)), id) => emitter.emit(agent, 0, id, kind).await,
            (None, None, _) => {}
        }
    }
}

/// The stop rules of `side` of `agent`: its config and the handoff tools of its prompt.
fn stop_plan(project: &Project, agent: &AgentDefinition, side: Side) -> Option<StopPlan> {
    let config = side_config(agent, side)?;
    let handoffs = project
        .prompt(&config.prompt)
        .map(|prompt| {
            prompt
                .tools
                .iter()
                .filter(|t| {
                    matches!(project.tool_kind(t.name()),
                        Some(ToolKind::Agent(a)) if a.agent_type == AgentType::AiHuman)
                })
                .map(|t| t.name().to_owned())
                .collect()
        })
        .unwrap_or_default();
    Some(StopPlan {
        side: config.clone(),
        handoffs,
    })
}

/// The state metadata key under which every side turn records where its session is:
/// `{"agent", "side", "turn", "turnStartStep"}` (the active agent after handoffs, whose turn
/// it is, the session turn number, the state's step when that turn began). Checkpoints carry
/// it, so a session resumes from them exactly.
pub const SESSION_MARK_KEY: &str = "weftSession";

/// Where a session was when a state was saved: the active agent (after handoffs), the side,
/// the session turn number, and the state's step when that turn began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionMark {
    agent: String,
    side: Side,
    turn: u64,
    turn_start_step: u64,
    /// The turns of the thread's earlier sessions (`maxSessionTurns` counts this session's).
    #[serde(default)]
    session_start: u64,
}

impl SessionMark {
    fn of(state: &AgentState) -> Option<SessionMark> {
        serde_json::from_value(state.metadata().get(SESSION_MARK_KEY)?.clone()).ok()
    }

    fn stamp(&self, state: &AgentState) -> AgentState {
        if SessionMark::of(state).as_ref() == Some(self) {
            return state.clone();
        }
        state.with_metadata(
            SESSION_MARK_KEY,
            serde_json::to_value(self).unwrap_or(Value::Null),
        )
    }
}

/// Where a session goes on from: the agent, the side whose turn comes, the turns begun so
/// far, the input of that turn, and (when the turn numbered `turns` already ended before a
/// resume) its end, to be handled before any model call.
struct Position<'p> {
    agent: &'p AgentDefinition,
    side: Side,
    turns: u64,
    input: Option<Message>,
    state_a: AgentState,
    state_b: AgentState,
    ended: Option<TurnEnd>,
    /// Steps the next turn took before a resume (it goes on under its own number).
    resumed_steps: u64,
    /// Side A's prompt just became active (a new thread, or a handoff): its immediate
    /// subagent tools run before the next turn.
    bootstrap: bool,
    /// The turns of the thread's earlier sessions.
    session_start: u64,
}

impl<'p> Position<'p> {
    /// The position of a session whose states are `state_a` / `state_b`: a fresh start
    /// (no marks), or where the marks of the latest checkpoints say it stopped.
    /// `profile`: `weft run --profile runtime` (the runtime profile judges how a turn ended).
    fn of(
        project: &'p Project,
        start: &'p AgentDefinition,
        (input, input_side): (Option<Message>, Side),
        (state_a, state_b): (AgentState, AgentState),
        (profile, for_queue): (bool, bool),
    ) -> Result<Self, SessionError> {
        let fresh = Position {
            agent: start,
            side: Side::A,
            turns: 0,
            input,
            state_a,
            state_b,
            ended: None,
            resumed_steps: 0,
            bootstrap: false,
            session_start: 0,
        };
        // A thread whose side A has not answered yet is booting.
        let mut fresh = fresh;
        fresh.bootstrap = !fresh.state_a.messages().any(|m| m.is_assistant());
        let marks = [
            SessionMark::of(&fresh.state_a),
            SessionMark::of(&fresh.state_b),
        ];
        if fresh.input.is_some() {
            // A new session: on a thread with earlier sessions (a resumable subagent's next
            // message) its turns are numbered after theirs.
            let turns = marks.iter().flatten().map(|m| m.turn).max().unwrap_or(0);
            let side = match start.agent_type {
                AgentType::DualAi => input_side,
                AgentType::AiHuman => Side::A,
            };
            return Ok(Position {
                side,
                turns,
                session_start: turns,
                ..fresh
            });
        }
        if fresh.state_a.message_count() == 0 {
            return Err(SessionError::NoInput);
        }
        // A run attached to a thread whose session ended: its state ends with the new
        // input, after the marks of the earlier turns. Side A of the started agent takes a
        // new turn, numbered after them (so a later resume finds the latest turn).
        let latest_turn = marks.iter().flatten().map(|m| m.turn).max();
        if let Some(turns) = latest_turn
            && (for_queue
                || matches!(
                    fresh.state_a.last_message().as_deref(),
                    Some(Message::User(_))
                ))
        {
            return Ok(Position {
                turns,
                session_start: turns,
                ..fresh
            });
        }
        // Without marks (a durable run's initial checkpoint, whose last message is the
        // input, or a run saved before marks existed) the state is side A's first turn.
        let mark = marks
            .into_iter()
            .flatten()
            .max_by_key(|m| m.turn)
            .unwrap_or_else(|| SessionMark {
                agent: start.name.clone(),
                side: Side::A,
                turn: 1,
                turn_start_step: 0,
                session_start: 0,
            });
        let agent = project
            .agent(&mark.agent)
            .ok_or_else(|| SessionError::UnknownAgent(mark.agent.clone()))?;
        let state = match mark.side {
            Side::A => &fresh.state_a,
            Side::B => &fresh.state_b,
        };
        let steps = state.step().saturating_sub(mark.turn_start_step);
        let ended = match project.runtime_profile(agent, profile) {
            // Under the runtime profile only an accepted complete_task ended the turn.
            Some(_) => crate::runtime_profile::ended_in(state),
            None => {
                stop_plan(project, agent, mark.side).and_then(|plan| plan.ended_in(state, steps))
            }
        };
        Ok(Position {
            agent,
            side: mark.side,
            // A turn that had not ended goes on under its own number, its steps counted.
            turns: if ended.is_some() {
                mark.turn
            } else {
                mark.turn.saturating_sub(1)
            },
            resumed_steps: if ended.is_some() { 0 } else { steps },
            ended,
            session_start: mark.session_start,
            ..fresh
        })
    }

    fn state(&self, side: Side) -> &AgentState {
        match side {
            Side::A => &self.state_a,
            Side::B => &self.state_b,
        }
    }

    fn set_state(&mut self, side: Side, state: AgentState) {
        match side {
            Side::A => self.state_a = state,
            Side::B => self.state_b = state,
        }
    }
}

/// Runs `agent_name` of `project` on `input` to a stop.
///
/// With an empty `input`, the session goes on from `options.initial_state` (and
/// `options.initial_state_b`): a durable run's initial checkpoint, or the latest checkpoints
/// of a stopped session, whose [`SESSION_MARK_KEY`] marks say which agent, side and turn
/// come next; a turn that had ended is handled (stop, handoff, next side) before any model
/// call. Errors of the model or the tools end the session as [`SessionStatus::Failed`]
/// with [`StopReason::Error`]; the signal ends it as [`SessionStatus::Interrupted`].
///
/// # Errors
/// [`SessionError::UnknownAgent`], [`SessionError::Workspace`], [`SessionError::NoInput`].
///
/// # Cancel safety
/// Cancel through `options.signal`, not by dropping: then every finished step is
/// checkpointed and the outcome says where the session stopped.
pub async fn run_session(
    project: &Project,
    agent_name: &str,
    input: &str,
    options: &SessionOptions,
) -> Result<SessionOutcome, SessionError> {
    let start = project
        .agent(agent_name)
        .ok_or_else(|| SessionError::UnknownAgent(agent_name.to_owned()))?;
    let mut confinement = options.confinement.clone();
    if project
        .runtime_profile(start, options.runtime_profile)
        .is_some_and(|profile| profile.policy.sandboxed)
    {
        // The runtime profile's `sandboxed = true` (§5.12): no filesystem, no network.
        confinement.sandbox.mode = weft_tools::Mode::Strict;
        confinement.sandbox.network = false;
    }
    // The folders of the session's children are theirs alone (agents §7.1).
    crate::filesystem::for_session(&mut confinement, &options.workspace);
    let workspace = Workspace::new(&options.workspace)
        .map_err(|e| SessionError::Workspace(e.to_string()))?
        .with_confinement(confinement);
    let position = Position::of(
        project,
        start,
        (
            (!input.is_empty()).then(|| Message::user(input)),
            options.input_side,
        ),
        (
            options.initial_state.clone(),
            options
                .initial_state_b
                .clone()
                .unwrap_or_else(AgentState::initial),
        ),
        (options.runtime_profile, options.for_queue),
    )?;
    let mut driver = Driver {
        project,
        options,
        workspace,
        steps: 0,
        usage: TokenUsage::default(),
        models: HashMap::new(),
        agent: options
            .agent_path
            .clone()
            .unwrap_or_else(|| AgentPath::root(&position.agent.name)),
        mcp: (!project.config().mcp_servers.is_empty())
            .then(|| Arc::new(project.mcp_hub(&options.confinement, &options.workspace))),
        shared: Arc::new(project.clone()),
    };
    driver
        .emit(EventKind::SessionStart {
            agent_type: position.agent.agent_type,
        })
        .await;
    let mut outcome = match position.agent.agent_type {
        AgentType::AiHuman => ai_human(&mut driver, position).await,
        AgentType::DualAi => dual_ai(&mut driver, position).await,
    };
    if let Some(hub) = &driver.mcp {
        hub.shutdown().await;
    }
    outcome.steps = driver.steps;
    outcome.usage = driver.usage.clone();
    match outcome.status {
        SessionStatus::Completed => {
            driver
                .emit(EventKind::Completion {
                    summary: outcome.message.clone(),
                    steps: outcome.state_a.step(),
                    reason: Some(outcome.reason),
                })
                .await;
        }
        SessionStatus::Failed => {
            driver
                .emit(EventKind::Error {
                    message: outcome.message.clone(),
                    reason: Some(outcome.reason),
                })
                .await;
        }
        SessionStatus::Interrupted => {}
    }
    driver
        .emit(EventKind::SessionEnd {
            status: outcome.status,
            reason: outcome.reason,
            message: outcome.message.clone(),
            attachments: outcome.attachments.clone(),
            steps: outcome.steps,
            input_tokens: outcome.usage.input_tokens,
            output_tokens: outcome.usage.output_tokens,
        })
        .await;
    Ok(outcome)
}

fn outcome(
    status: SessionStatus,
    reason: StopReason,
    message: String,
    agent: &str,
    state_a: AgentState,
) -> SessionOutcome {
    SessionOutcome {
        status,
        reason,
        message,
        attachments: Vec::new(),
        steps: 0,
        usage: TokenUsage::default(),
        agent: agent.to_owned(),
        state_a,
        state_b: None,
        thread_events: Vec::new(),
        turns: 0,
    }
}

fn error_outcome(error: AgentError, agent: &str, state: AgentState) -> SessionOutcome {
    match error {
        AgentError::Cancelled { .. } => outcome(
            SessionStatus::Interrupted,
            StopReason::Interrupted,
            "interrupted".into(),
            agent,
            state,
        ),
        other => outcome(
            SessionStatus::Failed,
            StopReason::Error,
            other.to_string(),
            agent,
            state,
        ),
    }
}

/// Maps a turn end to the session's status/reason/message when it ends the session.
/// The outcome of a session whose turn ended with `end`, when that end stops the session
/// (`sessionStop` / `sessionFail`), with side A's state `state_a`.
fn terminal(end: &TurnEnd, agent: &str, state_a: &AgentState) -> Option<SessionOutcome> {
    let (status, reason, payload) = match end {
        TurnEnd::SessionStop(p) => (SessionStatus::Completed, StopReason::SessionStop, p),
        TurnEnd::SessionFail(p) => (SessionStatus::Failed, StopReason::SessionFail, p),
        _ => return None,
    };
    let mut o = outcome(
        status,
        reason,
        payload.message.clone(),
        agent,
        state_a.clone(),
    );
    o.attachments = payload.attachments.clone();
    Some(o)
}

fn turn_reason(end: &TurnEnd) -> (StopReason, String) {
    match end {
        TurnEnd::SessionStop(p) => (StopReason::SessionStop, p.message.clone()),
        TurnEnd::SessionFail(p) => (StopReason::SessionFail, p.message.clone()),
        TurnEnd::StopTool { output, .. } => (StopReason::StopTool, output.clone()),
        TurnEnd::Handoff { message, .. } => (StopReason::StopTool, message.clone()),
        TurnEnd::Response(text) => (StopReason::Response, text.clone()),
        TurnEnd::MaxSteps(text) => (StopReason::MaxSteps, text.clone()),
    }
}

/// Whether a turn's end was read back from a checkpoint (a resume) rather than just taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Replayed(bool);

/// Whether the run's log already holds the `agent.handoff` of session turn `turn`: a resume
/// that replays a handoff logs it only if the crash came before it was logged. A log that
/// cannot be read counts as lacking it (a duplicate event rather than a missing one).
async fn handoff_logged(durable: &Durable, turn: u64) -> bool {
    use weft_store::EventLog as _;
    let query = weft_store::EventQuery {
        run_id: Some(durable.run.run_id().to_owned()),
        types: vec!["handoff".into(), "agent.handoff".into()],
        ..weft_store::EventQuery::default()
    };
    durable
        .store
        .events(&query)
        .await
        .is_ok_and(|events| events.iter().any(|e| e.payload["turn"] == turn))
}

/// Takes the side turn the position says comes next, or hands back the end of the turn that
/// had ended before a resume. Returns the turn's end, or the outcome of its error.
async fn next_turn(
    driver: &mut Driver<'_>,
    pos: &mut Position<'_>,
) -> Result<(TurnEnd, Replayed), SessionOutcome> {
    if let Some(end) = pos.ended.take() {
        return Ok((end, Replayed(true)));
    }
    if pos.side == Side::A && std::mem::take(&mut pos.bootstrap) {
        driver.run_immediate(pos).await;
    }
    pos.turns += 1;
    let side = pos.side;
    let state = pos.state(side).clone();
    let prior_steps = std::mem::take(&mut pos.resumed_steps);
    match driver
        .side_turn(
            pos.agent,
            side,
            pos.input.take(),
            &state,
            (pos.turns, prior_steps, pos.session_start),
        )
        .await
    {
        Ok((end, next)) => {
            pos.set_state(side, next);
            Ok((end, Replayed(false)))
        }
        Err((error, state)) => {
            pos.set_state(side, state);
            let mut o = error_outcome(error, &pos.agent.name, pos.state_a.clone());
            o.turns = pos.turns;
            Err(o)
        }
    }
}

async fn ai_human(driver: &mut Driver<'_>, mut pos: Position<'_>) -> SessionOutcome {
    let mut thread_events = Vec::new();
    loop {
        let (end, replayed) = match next_turn(driver, &mut pos).await {
            Ok(pair) => pair,
            Err(mut o) => {
                o.thread_events = thread_events;
                return o;
            }
        };
        let (reason, output) = turn_reason(&end);
        driver
            .emit(EventKind::SideTurnEnd {
                side: Side::A,
                session_turn: pos.turns,
                reason,
                output: output.clone(),
            })
            .await;
        if let TurnEnd::Handoff { to, message } = &end
            && let Some(target) = driver.project.agent(to)
        {
            if u32::try_from(thread_events.len()).unwrap_or(u32::MAX) >= MAX_HANDOFFS {
                // Agents handing the task back and forth: the session fails, saying so,
                // rather than completing with a handoff message as its answer.
                let mut o = outcome(
                    SessionStatus::Failed,
                    StopReason::StopTool,
                    format!(
                        "the session reached its limit of {MAX_HANDOFFS} handoffs: {} handed \
                         off to {to} once more",
                        pos.agent.name
                    ),
                    &pos.agent.name,
                    pos.state_a,
                );
                o.thread_events = thread_events;
                o.turns = pos.turns;
                return o;
            }
            let handoff = EventKind::Handoff {
                from: pos.agent.name.clone(),
                to: to.clone(),
                message: message.clone(),
                turn: pos.turns,
            };
            // The thread record's `agent.handoff` message is a mapping of the event.
            let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            thread_events.extend(handoff.to_system_message(&now));
            // A resume that replays the handoff logs it only if the crash came before.
            let logged = match &driver.options.durable {
                Some(durable) => {
                    replayed == Replayed(true) && handoff_logged(durable, pos.turns).await
                }
                None => false,
            };
            if !logged {
                driver.emit(handoff).await;
            }
            pos.agent = target;
            pos.bootstrap = true;
            continue;
        }
        let mut o = terminal(&end, &pos.agent.name, &pos.state_a).unwrap_or_else(|| {
            outcome(
                SessionStatus::Completed,
                reason,
                output,
                &pos.agent.name,
                pos.state_a,
            )
        });
        o.thread_events = thread_events;
        o.turns = pos.turns;
        return o;
    }
}

async fn dual_ai(driver: &mut Driver<'_>, mut pos: Position<'_>) -> SessionOutcome {
    let finish = |mut o: SessionOutcome, b: AgentState, turns: u64| {
        o.state_b = Some(b);
        o.turns = turns;
        o
    };
    loop {
        if pos.ended.is_none()
            && pos
                .agent
                .max_session_turns
                .is_some_and(|max| pos.turns.saturating_sub(pos.session_start) >= max)
        {
            let o = outcome(
                SessionStatus::Failed,
                StopReason::MaxSessionTurns,
                format!(
                    "the session reached maxSessionTurns ({}) without sessionStop",
                    pos.turns.saturating_sub(pos.session_start)
                ),
                &pos.agent.name,
                pos.state_a,
            );
            return finish(o, pos.state_b, pos.turns);
        }
        let end = match next_turn(driver, &mut pos).await {
            Ok((end, _)) => end,
            Err(o) => return finish(o, pos.state_b, pos.turns),
        };
        let (reason, output) = turn_reason(&end);
        driver
            .emit(EventKind::SideTurnEnd {
                side: pos.side,
                session_turn: pos.turns,
                reason,
                output: output.clone(),
            })
            .await;
        if let Some(o) = terminal(&end, &pos.agent.name, &pos.state_a) {
            return finish(o, pos.state_b, pos.turns);
        }
        // The other side receives this side's output as a user message.
        pos.input = Some(Message::user(output));
        pos.side = pos.side.other();
    }
}
