//! Durable runs: a recorded [`RunSpec`] (model reference, system prompt, tools by registry
//! name, durability), a [`Runner`] that starts a run and resumes it from its latest
//! checkpoint in **any** process, and the durable loop strategy.
//!
//! **Resume rule (runtime spec §5.9, RT-050):** every recorded tool result is re-used
//! instead of re-running the tool. A call recorded as pending without a result was in flight
//! when the process died: it is *uncertain*. It runs again only when its tool has no side
//! effects, is declared idempotent, or the user approved (`--rerun-uncertain`); otherwise
//! the resume stops before any model call and names the call ([`RunOutcome::NeedsApproval`]).
//!
//! **Determinism:** the resumed run starts from the latest checkpoint's state (a step
//! boundary) and re-asks the model; given a model that answers from the conversation (the
//! scripted models), it reaches the same final state as an uninterrupted run.
//!
//! Exit codes ([`RunOutcome::exit_code`]): 0 completed, 1 failed, 3 stopped on an uncertain
//! call (needs approval). `weft resume` and the program that started the run use the same.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_agent::checkpoint::CheckpointMode;
use weft_agent::execution::ExecutionStrategy;
use weft_agent::{
    AgentError, AgentOptions, AgentState, ExecutionContext, ExecutionResult, GenerateResult,
    RunOptions, agent,
};
use weft_provider::{Message, ProviderRegistry, TokenUsage, Tool, Turn};

use crate::durable::{DurableTool, RunContext};
use crate::error::StoreError;
use crate::model::{
    AgentNode, AgentStatus, RunRecord, RunStatus, ThreadRecord, ToolCallRecord, ToolCallStatus,
    Usage, event_type, new_id, now_string,
};
use crate::store::{Durability, Lineage, Pricing, Runs, Store, Threads, ToolLedger};

/// A tool of a run spec: a registry name and its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The registry name.
    pub name: String,
    /// Configuration handed to the tool's factory.
    #[serde(default)]
    pub config: Value,
}

/// Everything needed to (re)build a run's agent in another process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    /// Model reference, `PROVIDER:MODEL` (e.g. `scripted-turns:/path/script.json`).
    pub model: String,
    /// System prompt.
    #[serde(default)]
    pub system: Option<String>,
    /// Tools, by registry name.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// The user input that starts the run.
    pub input: String,
    /// Durability of checkpoints, events and the tool ledger.
    #[serde(default)]
    pub durability: Durability,
    /// Most steps (`None`: unbounded).
    #[serde(default)]
    pub max_steps: Option<u64>,
    /// Token prices.
    #[serde(default)]
    pub pricing: Option<Pricing>,
    /// The agent's SOP role, for lineage.
    #[serde(default = "default_role")]
    pub role: String,
}

fn default_role() -> String {
    "agent".into()
}

type ToolFactory = dyn Fn(&Value) -> Result<Tool, String> + Send + Sync;

/// Tools by name, so a recorded run spec can rebuild them.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    factories: HashMap<String, Arc<ToolFactory>>,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.factories.keys()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        ToolRegistry::default()
    }

    /// The registry with this crate's demo tools (`append_line`).
    pub fn with_builtins() -> Self {
        let mut registry = ToolRegistry::new();
        registry.register(
            crate::testing::APPEND_LINE,
            crate::testing::append_line_tool,
        );
        registry
    }

    /// Registers a factory under `name`.
    pub fn register(
        &mut self,
        name: impl Into<String>,
        factory: impl Fn(&Value) -> Result<Tool, String> + Send + Sync + 'static,
    ) {
        self.factories.insert(name.into(), Arc::new(factory));
    }

    fn build(&self, spec: &ToolSpec) -> Result<Tool, RunError> {
        let factory = self
            .factories
            .get(&spec.name)
            .ok_or_else(|| RunError::UnknownTool(spec.name.clone()))?;
        factory(&spec.config).map_err(|message| RunError::ToolConfig {
            tool: spec.name.clone(),
            message,
        })
    }
}

/// The model providers a runner resolves model references with: the built-ins plus
/// `scripted-turns` (see [`crate::testing`]).
pub fn default_providers() -> ProviderRegistry {
    let mut registry = ProviderRegistry::with_builtins();
    registry.register(
        crate::testing::SCRIPTED_TURNS,
        crate::testing::scripted_turns_provider,
    );
    registry
}

/// Why a run could not be started or resumed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run does not exist.
    #[error("run {0:?} not found")]
    UnknownRun(String),
    /// The run spec names a tool the registry lacks.
    #[error("the run uses tool {0:?}, which this program does not provide")]
    UnknownTool(String),
    /// A tool's configuration is invalid.
    #[error("tool {tool:?}: {message}")]
    ToolConfig {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// The recorded spec cannot be read.
    #[error("run spec of {run}: {message}")]
    Spec {
        /// The run.
        run: String,
        /// What is wrong.
        message: String,
    },
    /// The model reference cannot be resolved, or the agent cannot be built.
    #[error("agent: {0}")]
    Agent(String),
    /// The run has no checkpoint to resume from.
    #[error("run {0:?} has no checkpoint to resume from")]
    NoCheckpoint(String),
    /// The run is still owned by a live process.
    #[error("run {run:?} is still running in process {pid}")]
    StillRunning {
        /// The run.
        run: String,
        /// The owner.
        pid: u32,
    },
}

/// How a run ended (this time).
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// The run completed with this answer.
    Completed {
        /// The run.
        run_id: String,
        /// The final text.
        output: String,
    },
    /// The run failed.
    Failed {
        /// The run.
        run_id: String,
        /// Why.
        error: String,
    },
    /// Resume stopped: these calls were in flight at a crash and may not be re-run without
    /// approval (`--rerun-uncertain`).
    NeedsApproval {
        /// The run.
        run_id: String,
        /// The uncertain calls.
        calls: Vec<ToolCallRecord>,
    },
}

impl RunOutcome {
    /// The process exit code: 0 completed, 1 failed, 3 needs approval.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunOutcome::Completed { .. } => 0,
            RunOutcome::Failed { .. } => 1,
            RunOutcome::NeedsApproval { .. } => 3,
        }
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        match self {
            RunOutcome::Completed { run_id, .. }
            | RunOutcome::Failed { run_id, .. }
            | RunOutcome::NeedsApproval { run_id, .. } => run_id,
        }
    }
}

/// Options of [`Runner::resume`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResumeOptions {
    /// Re-run uncertain side-effecting calls (the user approves).
    pub rerun_uncertain: bool,
    /// Resume even if the recorded owner process looks alive.
    pub force: bool,
}

/// What [`Runner::prepare`] found.
#[derive(Debug)]
pub enum Preparation {
    /// The run can go on.
    Ready(Box<Prepared>),
    /// Nothing to run: it had completed, or it stopped on uncertain calls.
    Finished(RunOutcome),
}

/// A run ready to go on in this process.
#[derive(Debug)]
pub struct Prepared {
    /// Its record, now `running` and owned by this process.
    pub record: RunRecord,
    /// Its spec.
    pub spec: RunSpec,
    /// The store with the run's durability, scoped to the run.
    pub store: Store,
    /// Its ledger context (recorded results, approved re-runs).
    pub context: Arc<RunContext>,
    /// The latest checkpoint of its thread.
    pub checkpoint: crate::store::StoredCheckpoint,
}

/// Starts and resumes durable runs.
#[derive(Debug, Clone)]
pub struct Runner {
    store: Store,
    tools: ToolRegistry,
    providers: Arc<ProviderRegistry>,
}

/// Whether the process `pid` on this host is alive (Linux: `/proc/PID`).
pub fn process_alive(pid: u32) -> bool {
    pid == std::process::id() || std::path::Path::new(&format!("/proc/{pid}")).exists()
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into())
}

/// The status to show for a stored run: `running` whose owner on this host is gone reads as
/// `interrupted`.
pub fn effective_status(run: &RunRecord) -> RunStatus {
    match (run.status, run.owner_pid, run.owner_host.as_deref()) {
        (RunStatus::Running, Some(pid), Some(host))
            if host == host_name() && !process_alive(pid) =>
        {
            RunStatus::Interrupted
        }
        (status, ..) => status,
    }
}

impl Runner {
    /// A runner over `store` with `tools` and the default providers.
    pub fn new(store: Store, tools: ToolRegistry) -> Self {
        Runner {
            store,
            tools,
            providers: Arc::new(default_providers()),
        }
    }

    /// Uses `providers` to resolve model references.
    #[must_use]
    pub fn with_providers(mut self, providers: ProviderRegistry) -> Self {
        self.providers = Arc::new(providers);
        self
    }

    /// Records a new run of `spec` (thread, run, lineage root, initial checkpoint) and
    /// returns its id without running it.
    ///
    /// # Errors
    /// Storage failures; unknown tools.
    pub async fn create(&self, spec: &RunSpec) -> Result<String, RunError> {
        for tool in &spec.tools {
            self.tools.build(tool)?;
        }
        let run_id = new_id();
        let thread_id = new_id();
        let agent_id = new_id();
        let now = now_string();
        let store = self
            .store
            .with_durability(Durability::Sync)
            .for_run(&run_id);
        store.put_thread(&ThreadRecord::new(&thread_id)).await?;
        let record = RunRecord {
            run_id: run_id.clone(),
            thread_id: thread_id.clone(),
            agent_id: agent_id.clone(),
            status: RunStatus::Running,
            spec: serde_json::to_value(spec).map_err(|e| RunError::Spec {
                run: run_id.clone(),
                message: e.to_string(),
            })?,
            started_at: now.clone(),
            updated_at: now.clone(),
            ended_at: None,
            steps: 0,
            usage: Usage::default(),
            // Claimed by the process that drives it (`start` / `resume`).
            owner_pid: None,
            owner_host: None,
            error: None,
            output: None,
            parent_run_id: None,
        };
        store.put_run(&record).await?;
        store
            .put_agent(&AgentNode {
                id: agent_id.clone(),
                run_id: run_id.clone(),
                parent_agent_id: None,
                role: spec.role.clone(),
                status: AgentStatus::Active,
                depth: 0,
                created_at: now,
                completed_at: None,
                usage: Usage::default(),
            })
            .await?;
        let state = AgentState::initial()
            .with_message(Message::user(spec.input.as_str()))
            .with_metadata(weft_agent::SESSION_ID_KEY, Value::String(thread_id.clone()));
        let checkpoint = weft_agent::checkpoint::Checkpoint {
            metadata: weft_agent::checkpoint::CheckpointMetadata {
                session_id: thread_id.clone(),
                checkpoint_id: new_id(),
                timestamp: chrono::Utc::now(),
                step: 0,
                agent_id: agent_id.clone(),
            },
            state,
            pending_tool_calls: Vec::new(),
            completed_tool_calls: Vec::new(),
            usage: Some(TokenUsage::default()),
        };
        store.save_checkpoint(&thread_id, &checkpoint).await?;
        let ctx = RunContext::new(store, &run_id, &thread_id, &agent_id, [], HashSet::new());
        ctx.event(event_type::RUN_START, None, json!({"spec": spec}))
            .await;
        Ok(run_id)
    }

    /// Creates and runs `spec` to its end.
    ///
    /// # Errors
    /// As [`Runner::create`] and [`Runner::resume`].
    ///
    /// # Cancel safety
    /// Dropping the future stops the run where it is; it stays `running` in the store with
    /// a dead owner once the process ends, i.e. resumable.
    pub async fn start(&self, spec: &RunSpec) -> Result<RunOutcome, RunError> {
        let run_id = self.create(spec).await?;
        self.drive(&run_id, ResumeOptions::default(), false).await
    }

    /// Runs a run made by [`Runner::create`] (no `recovery` event).
    ///
    /// # Errors
    /// As [`Runner::resume`].
    ///
    /// # Cancel safety
    /// As [`Runner::start`].
    pub async fn run_created(&self, run_id: &str) -> Result<RunOutcome, RunError> {
        self.drive(run_id, ResumeOptions::default(), false).await
    }

    /// Resumes `run_id` from its latest checkpoint and runs it to its end.
    ///
    /// # Errors
    /// Unknown run, no checkpoint, unknown tools, storage failures, a live owner.
    ///
    /// # Cancel safety
    /// As [`Runner::start`].
    pub async fn resume(
        &self,
        run_id: &str,
        options: ResumeOptions,
    ) -> Result<RunOutcome, RunError> {
        self.drive(run_id, options, true).await
    }

    /// Makes run `run_id` ready to go on in this process: the uncertain-call rule over its
    /// tool ledger (the flags of `tools`, else those the ledger recorded), a `recovery`
    /// event when `resuming`, its ledger context (recorded results are re-used), its latest
    /// checkpoint, and the record marked `running` and owned by this process. Programs that
    /// drive a run their own way (`weft run` projects) resume through this too.
    ///
    /// # Errors
    /// Unknown run, unreadable spec, no checkpoint, storage failures, a live owner.
    pub async fn prepare(
        &self,
        run_id: &str,
        options: ResumeOptions,
        resuming: bool,
        tools: &[Tool],
    ) -> Result<Preparation, RunError> {
        let mut record = self
            .store
            .run(run_id)
            .await?
            .ok_or_else(|| RunError::UnknownRun(run_id.to_owned()))?;
        if record.status == RunStatus::Completed {
            return Ok(Preparation::Finished(RunOutcome::Completed {
                run_id: run_id.to_owned(),
                output: record.output.unwrap_or_default(),
            }));
        }
        if resuming
            && !options.force
            && record.status == RunStatus::Running
            && effective_status(&record) == RunStatus::Running
            && let Some(pid) = record.owner_pid
            && pid != std::process::id()
        {
            return Err(RunError::StillRunning {
                run: run_id.to_owned(),
                pid,
            });
        }
        let spec: RunSpec =
            serde_json::from_value(record.spec.clone()).map_err(|e| RunError::Spec {
                run: run_id.to_owned(),
                message: e.to_string(),
            })?;
        let store = self.store.with_durability(spec.durability).for_run(run_id);
        let by_name: HashMap<&str, &Tool> = tools.iter().map(|t| (t.name.as_str(), t)).collect();

        // The uncertain-call rule.
        let calls = store.tool_calls(run_id).await?;
        let mut approved = HashSet::new();
        let mut blocked = Vec::new();
        for call in calls.iter().filter(|c| c.status == ToolCallStatus::Pending) {
            let tool = by_name.get(call.tool_name.as_str());
            let side_effects = tool.map_or(call.side_effects, |t| t.side_effects);
            let idempotent = tool.map_or(call.idempotent, |t| t.idempotent);
            if !side_effects || idempotent || options.rerun_uncertain {
                approved.insert(call.tool_call_id.clone());
            } else {
                blocked.push(call.clone());
            }
        }
        let ctx = Arc::new(RunContext::new(
            store.clone(),
            run_id,
            &record.thread_id,
            &record.agent_id,
            calls.iter().cloned(),
            approved.clone(),
        ));
        if !blocked.is_empty() {
            ctx.event(
                event_type::RECOVERY,
                None,
                json!({"stopped": true, "uncertainCalls": blocked.iter().map(|c| &c.tool_call_id).collect::<Vec<_>>()}),
            )
            .await;
            record.status = RunStatus::Interrupted;
            record.updated_at = now_string();
            self.store.put_run(&record).await?;
            return Ok(Preparation::Finished(RunOutcome::NeedsApproval {
                run_id: run_id.to_owned(),
                calls: blocked,
            }));
        }

        let latest = store
            .latest_checkpoint(&record.thread_id)
            .await?
            .ok_or_else(|| RunError::NoCheckpoint(run_id.to_owned()))?;
        if resuming {
            let reused = calls
                .iter()
                .filter(|c| c.status == ToolCallStatus::Completed)
                .count();
            ctx.begin_turn(latest.checkpoint.state.step());
            ctx.event(
                event_type::RECOVERY,
                None,
                json!({
                    "fromCheckpoint": latest.summary.id,
                    "checkpointStep": latest.summary.step,
                    "agentStep": latest.checkpoint.state.step(),
                    "recordedResults": reused,
                    "rerunUncertain": approved.iter().collect::<Vec<_>>(),
                }),
            )
            .await;
        }
        record.status = RunStatus::Running;
        record.owner_pid = Some(std::process::id());
        record.owner_host = Some(host_name());
        record.updated_at = now_string();
        self.store.put_run(&record).await?;
        Ok(Preparation::Ready(Box::new(Prepared {
            record,
            spec,
            store,
            context: ctx,
            checkpoint: latest,
        })))
    }

    async fn drive(
        &self,
        run_id: &str,
        options: ResumeOptions,
        resuming: bool,
    ) -> Result<RunOutcome, RunError> {
        let spec: RunSpec = match self.store.run(run_id).await? {
            Some(record) => serde_json::from_value(record.spec).map_err(|e| RunError::Spec {
                run: run_id.to_owned(),
                message: e.to_string(),
            })?,
            None => return Err(RunError::UnknownRun(run_id.to_owned())),
        };
        let tools: Vec<Tool> = spec
            .tools
            .iter()
            .map(|t| self.tools.build(t))
            .collect::<Result<_, _>>()?;
        let prepared = match self.prepare(run_id, options, resuming, &tools).await? {
            Preparation::Ready(prepared) => prepared,
            Preparation::Finished(outcome) => return Ok(outcome),
        };
        let Prepared {
            mut record,
            spec,
            store,
            context: ctx,
            checkpoint: latest,
        } = *prepared;
        let state = latest.checkpoint.state.clone();

        let model = self
            .providers
            .resolve(&spec.model)
            .map_err(|e| RunError::Agent(e.to_string()))?;
        let base_usage = latest.summary.usage;
        let strategy = DurableLoop {
            run: ctx.clone(),
            max_steps: spec.max_steps,
            base_usage: TokenUsage {
                input_tokens: base_usage.input_tokens,
                output_tokens: base_usage.output_tokens,
                total_tokens: base_usage.input_tokens + base_usage.output_tokens,
                ..TokenUsage::default()
            },
            pricing: spec.pricing.unwrap_or_default(),
        };
        let mut options = AgentOptions::new(model)
            .tools(tools.into_iter().map(|t| DurableTool::wrap(t, ctx.clone())))
            .execution(strategy)
            .checkpoints(store.clone())
            .checkpoint_mode(match spec.durability {
                Durability::Sync => CheckpointMode::Sync,
                Durability::Async => CheckpointMode::Async,
            })
            .session_id(record.thread_id.clone());
        if let Some(system) = &spec.system {
            options = options.system(system.clone());
        }
        let agent = agent(options).map_err(|e| RunError::Agent(e.to_string()))?;
        let result = agent
            .generate_with(Message::user(""), &state, RunOptions::default())
            .await;
        agent.flush_checkpoints().await;
        let now = now_string();
        let outcome = match result {
            Ok(GenerateResult { turn, state }) => {
                let usage = cumulative(
                    &strategy_usage(&turn),
                    &base_usage,
                    spec.pricing.unwrap_or_default(),
                );
                ctx.event(
                    event_type::COMPLETION,
                    None,
                    json!({"summary": turn.text(), "steps": state.step()}),
                )
                .await;
                record.status = RunStatus::Completed;
                record.output = Some(final_text(&state).unwrap_or_else(|| turn.text()));
                record.steps = state.step();
                record.usage = usage;
                record.ended_at = Some(now.clone());
                RunOutcome::Completed {
                    run_id: run_id.to_owned(),
                    output: record.output.clone().unwrap_or_default(),
                }
            }
            Err(error) => {
                let message = error.to_string();
                ctx.event(event_type::ERROR, None, json!({"message": message}))
                    .await;
                record.status = RunStatus::Failed;
                record.error = Some(message.clone());
                record.ended_at = Some(now.clone());
                RunOutcome::Failed {
                    run_id: run_id.to_owned(),
                    error: message,
                }
            }
        };
        store.flush().await?;
        record.updated_at = now.clone();
        self.store.put_run(&record).await?;
        record_root_agent(&self.store, &record, &spec.role).await?;
        Ok(outcome)
    }
}

/// Records the root agent of `run` in the lineage as the run stands: completed or failed
/// (with `ended_at`) once the run ended, active before; usage is the run's.
///
/// # Errors
/// Storage failures.
pub async fn record_root_agent(
    store: &Store,
    run: &RunRecord,
    role: &str,
) -> Result<(), StoreError> {
    store
        .put_agent(&AgentNode {
            id: run.agent_id.clone(),
            run_id: run.run_id.clone(),
            parent_agent_id: None,
            role: role.to_owned(),
            status: match run.status {
                RunStatus::Completed => AgentStatus::Completed,
                RunStatus::Failed => AgentStatus::Failed,
                RunStatus::Running | RunStatus::Interrupted => AgentStatus::Active,
            },
            depth: 0,
            created_at: run.started_at.clone(),
            completed_at: run.ended_at.clone(),
            usage: run.usage,
        })
        .await
}

fn strategy_usage(turn: &Turn) -> TokenUsage {
    turn.usage.clone()
}

fn cumulative(turn: &TokenUsage, base: &Usage, pricing: Pricing) -> Usage {
    let input = turn.input_tokens + base.input_tokens;
    let output = turn.output_tokens + base.output_tokens;
    Usage {
        input_tokens: input,
        output_tokens: output,
        cost: pricing.cost(input, output),
    }
}

/// The text of the final assistant message, when the state ends with one.
fn final_text(state: &AgentState) -> Option<String> {
    match state.messages().last() {
        Some(Message::Assistant(a)) if !a.has_tool_calls() => Some(a.text_content()),
        _ => None,
    }
}

/// The loop of durable runs: like `loop()`, but it starts from a state that already holds
/// the input (a new run's initial checkpoint, or the checkpoint a resume starts from), saves
/// cumulative usage in every checkpoint, records turn events, and does nothing when the state
/// already ends with a final answer (a run that died after its last checkpoint).
#[derive(Debug)]
struct DurableLoop {
    run: Arc<RunContext>,
    max_steps: Option<u64>,
    base_usage: TokenUsage,
    pricing: Pricing,
}

#[async_trait]
impl ExecutionStrategy for DurableLoop {
    fn name(&self) -> &str {
        "durable-loop"
    }

    async fn execute(&self, ctx: ExecutionContext) -> Result<ExecutionResult, AgentError> {
        let mut state = ctx.state.clone();
        let mut total: Option<Turn> = None;
        let mut usage = self.base_usage.clone();
        let mut rounds = 0u32;
        let mut conversation: Option<Arc<Vec<Message>>> = None;
        if let Some(text) = final_text(&state) {
            // Finished before the crash: the answer is in the checkpoint.
            let turn = Turn {
                messages: Vec::new(),
                response: match state.messages().last() {
                    Some(Message::Assistant(a)) => a.clone(),
                    _ => return Err(AgentError::Config(text)),
                },
                tool_executions: Vec::new(),
                usage: TokenUsage::default(),
                cycles: 0,
                data: None,
            };
            return Ok(GenerateResult { turn, state });
        }
        loop {
            if self.max_steps.is_some_and(|max| state.step() >= max) {
                break;
            }
            let step = state.step() + 1;
            state = state.with_step(step);
            self.run.begin_turn(step);
            self.run
                .event(
                    event_type::TURN_START,
                    None,
                    json!({"messages": state.message_count()}),
                )
                .await;
            ctx.strategy.step_start(step, &state);
            // The provider's conversation is kept between steps (the state only grows by
            // each step's messages here): no step copies the history.
            let history = conversation
                .take()
                .unwrap_or_else(|| Arc::new(state.messages_vec()));
            let (turn, kept) = ctx
                .llm
                .generate_step_shared(history, (), rounds, ctx.signal.child_token())
                .await?;
            conversation = Some(kept);
            state = state.with_messages(turn.messages.iter().cloned());
            usage.merge(&turn.usage);
            usage.cycles = None;
            let result = GenerateResult {
                turn: turn.clone(),
                state: state.clone(),
            };
            ctx.strategy.step_end(step, &result);
            ctx.save_checkpoint(&state, turn.tool_executions.clone(), Some(usage.clone()))
                .await;
            let cost = self.pricing.cost(usage.input_tokens, usage.output_tokens);
            self.run
                .event(
                    event_type::TURN_END,
                    None,
                    json!({"toolCalls": turn.tool_executions.len(), "inputTokens": usage.input_tokens,
                           "outputTokens": usage.output_tokens, "cost": cost}),
                )
                .await;
            self.run
                .event(
                    event_type::CHECKPOINT,
                    None,
                    json!({"agentStep": step, "messages": state.message_count()}),
                )
                .await;
            let tools_ran = turn.response.has_tool_calls()
                && turn.messages.last().is_some_and(Message::is_tool_result);
            total = Some(Turn::fold(total, turn));
            if !tools_ran || ctx.strategy.should_stop(&state).await {
                break;
            }
            rounds += 1;
        }
        match total {
            Some(turn) => Ok(GenerateResult { turn, state }),
            None => Err(AgentError::Strategy {
                name: "durable-loop".into(),
                message: "the step limit was reached before any model call".into(),
            }),
        }
    }
}
