//! One side's turn as a weft-agent [`ExecutionStrategy`], with the stop evaluation of
//! agents §5 after every step, in this order:
//!
//! 1. session-level terminal bindings (`sessionStop` / `sessionFail`), first call wins;
//! 2. side-level stop bindings: `stopTool` (and handoff tools, which also end the turn);
//! 3. response stop: a text response without tool calls, when `stopOnResponse`;
//! 4. safety limits: `maxSteps` (the session loop checks `maxSessionTurns`).
//!
//! `sessionStatus` calls are published as events and never stop anything.
//!
//! With `stopOnResponse = false`, a text response without tool calls does not end the turn:
//! the side takes another step (bounded by `maxSteps`, or by [`DEFAULT_MAX_STEPS`]).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use weft_agent::execution::{StepOutcome, Steps};
use weft_agent::{AgentError, AgentState, ExecutionContext, ExecutionResult, ExecutionStrategy};
use weft_provider::{LlmInstance, Message, Tool, ToolResult, Turn, TurnResponse};
use weft_runtime::event::{EventKind, Side};
use weft_runtime::ledger::RunContext;
use weft_runtime::observer::RunObserver;
use weft_runtime::profile::context::{CompressionError, ContextManager};
use weft_runtime::profile::orchestrator::{Next, Orchestrator};

use crate::definition::{LifecyclePayload, SessionToolBinding, SideConfig};
use crate::session::SessionEvents;

/// The step cap of a side whose `stopOnResponse` is false and that sets no `maxSteps`.
pub const DEFAULT_MAX_STEPS: u64 = 50;

/// Why a side's turn ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TurnEnd {
    SessionStop(LifecyclePayload),
    SessionFail(LifecyclePayload),
    StopTool { tool: String, output: String },
    Handoff { to: String, message: String },
    Response(String),
    MaxSteps(String),
}

/// The stop rules of one side (from its [`SideConfig`] and its prompt's tools).
#[derive(Debug, Clone)]
pub(crate) struct StopPlan {
    pub(crate) side: SideConfig,
    pub(crate) handoffs: Vec<String>,
}

impl StopPlan {
    /// Evaluates §5 after a step. `steps` is the number of steps of this side turn so far;
    /// the payloads of the step's `sessionStatus` calls go to `statuses`, in call order.
    pub(crate) fn evaluate(
        &self,
        turn: &Turn,
        steps: u64,
        statuses: &mut Vec<LifecyclePayload>,
    ) -> Option<TurnEnd> {
        let calls = &turn.response.tool_calls;
        let results = last_results(turn);
        let binding_is = |binding: &Option<SessionToolBinding>, name: &str| {
            binding.as_ref().is_some_and(|b| b.name() == name)
        };
        for call in calls {
            if let Some(binding) = &self.side.session_status
                && binding.name() == call.tool_name
            {
                statuses.push(binding.payload(&call.arguments));
            }
        }
        // 1. session-level terminal bindings.
        for call in calls {
            if binding_is(&self.side.session_stop, &call.tool_name)
                && let Some(b) = &self.side.session_stop
            {
                return Some(TurnEnd::SessionStop(b.payload(&call.arguments)));
            }
            if binding_is(&self.side.session_fail, &call.tool_name)
                && let Some(b) = &self.side.session_fail
            {
                return Some(TurnEnd::SessionFail(b.payload(&call.arguments)));
            }
        }
        // 2. side-level stop bindings.
        for call in calls {
            if self.side.stop_tool.as_deref() == Some(call.tool_name.as_str()) {
                let result = results
                    .iter()
                    .find(|r| r.tool_call_id == call.tool_call_id)
                    .map(|r| &r.result);
                let output = match &self.side.stop_tool_response_property {
                    Some(property) => result
                        .and_then(|r| r.get(property))
                        .or_else(|| call.arguments.get(property))
                        .map(text_of)
                        .unwrap_or_default(),
                    None => result
                        .map(text_of)
                        .unwrap_or_else(|| turn.response.text_content()),
                };
                return Some(TurnEnd::StopTool {
                    tool: call.tool_name.clone(),
                    output,
                });
            }
            if self.handoffs.contains(&call.tool_name) {
                let message = call
                    .arguments
                    .get("message")
                    .map(text_of)
                    .unwrap_or_default();
                return Some(TurnEnd::Handoff {
                    to: call.tool_name.clone(),
                    message,
                });
            }
        }
        // 3. response stop.
        if calls.is_empty() && self.side.stop_on_response {
            return Some(TurnEnd::Response(turn.response.text_content()));
        }
        // 4. safety limit of the side turn.
        let max = self
            .side
            .max_steps
            .unwrap_or(if self.side.stop_on_response {
                u64::MAX
            } else {
                DEFAULT_MAX_STEPS
            });
        if steps >= max {
            return Some(TurnEnd::MaxSteps(turn.response.text_content()));
        }
        None
    }

    /// How the side turn that produced `state` ended, judged from its last step alone (a
    /// resumed session asks this of its latest checkpoint): `None` when the turn still has
    /// to go on (the state ends with an input, or the last step does not stop it). `steps`
    /// is the number of steps the turn had taken. `sessionStatus` calls are not re-published.
    pub(crate) fn ended_in(&self, state: &AgentState, steps: u64) -> Option<TurnEnd> {
        let count = state.message_count();
        let last = state.message(count.checked_sub(1)?)?;
        let messages: Vec<Arc<Message>> = match &*last {
            Message::Assistant(_) => vec![Arc::new(last.into_owned())],
            // The results of the calls of the message before it.
            Message::ToolResult(_) => {
                let call = state.message(count.checked_sub(2)?)?;
                vec![Arc::new(call.into_owned()), Arc::new(last.into_owned())]
            }
            _ => return None,
        };
        // A step is judged from its assistant message: without one there is none to judge.
        let response = TurnResponse::from_message(messages.first()?.clone()).ok()?;
        let turn = Turn {
            messages,
            response,
            tool_executions: Vec::new(),
            usage: weft_provider::TokenUsage::default(),
            cycles: 0,
            data: None,
        };
        self.evaluate(&turn, steps, &mut Vec::new())
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn last_results(turn: &Turn) -> &[ToolResult] {
    match turn.messages.last().map(|m| &**m) {
        Some(Message::ToolResult(results)) => &results.results,
        _ => &[],
    }
}

/// The strategy of one side turn.
pub(crate) struct SideTurn {
    /// The Agent Runtime Spec's profile, when it is on for the agent: it decides when the
    /// turn ends (`complete_task`, recovery) instead of the §5 stop rules.
    pub(crate) profile: Option<Arc<Orchestrator>>,
    /// The agent's SOP role (runtime spec §7): the steps offer its current phase's tools.
    pub(crate) sop: Option<SopTurn>,
    pub(crate) plan: StopPlan,
    /// The input of the turn; `None` when the state already ends with it (a durable run's
    /// initial checkpoint).
    pub(crate) input: Option<Message>,
    /// Where `sessionStatus` updates go.
    pub(crate) events: SessionEvents,
    pub(crate) end: Arc<Mutex<Option<TurnEnd>>>,
    /// Steps this turn took before (a turn resumed from a checkpoint), counted against
    /// `maxSteps`.
    pub(crate) prior_steps: u64,
    /// The durable run whose event log gets `turn_start`, `turn_end` and `checkpoint`
    /// events for every step (`None`: in memory).
    pub(crate) run: Option<Arc<RunContext>>,
    /// The side, for event payloads.
    pub(crate) side: Side,
    /// The run's usage before this turn: checkpoints record it plus the turn's so far.
    pub(crate) base_usage: weft_provider::TokenUsage,
    /// The MCP servers whose tools the side offers (`None`: none): listed again before
    /// every step, so a tool a server adds mid-turn is offered from the next step on.
    pub(crate) mcp: Option<McpTools>,
    /// The store and the session's thread (a durable session): a `sessionStatus` call sets
    /// the thread's status in its parent's registry (agents §7.10).
    pub(crate) thread: Option<(weft_store::Store, String)>,
    /// Whether the side's context lists the thread's child registry (agents §7.11), read
    /// again before every step.
    pub(crate) registry: bool,
    /// The runtime profile's context management (§5.11): the history is compressed before
    /// a step's model call when it passes the threshold (`None`: off).
    pub(crate) context: Option<Arc<ContextManager>>,
}

/// The SOP workflow of a side turn and the tools it added to the prompt's.
#[derive(Debug, Clone)]
pub(crate) struct SopTurn {
    pub(crate) executor: Arc<weft_runtime::profile::sop::SopExecutor>,
    /// The role's tools the prompt lacked, and `advance_phase`.
    pub(crate) extra: Vec<Tool>,
    /// The session turn (its checkpoints keep the workflow's progress for it).
    pub(crate) turn: u64,
}

/// The MCP servers of a side's prompt, and the tools it offers besides theirs.
#[derive(Debug)]
pub(crate) struct McpTools {
    pub(crate) hub: Arc<weft_mcp::McpHub>,
    pub(crate) servers: Vec<String>,
    /// The prompt's other tools.
    pub(crate) base: Vec<Tool>,
    /// The fingerprint of the servers' tools the agent was built with.
    pub(crate) fingerprint: String,
    /// The runtime profile whose policy filters what is offered (`None`: off).
    pub(crate) profile: Option<Arc<weft_runtime::profile::RuntimeProfile>>,
}

impl McpTools {
    /// The tools of every server now, and their fingerprint.
    pub(crate) async fn listing(
        hub: &weft_mcp::McpHub,
        servers: &[String],
    ) -> Result<(Vec<Tool>, String), weft_mcp::McpError> {
        let mut tools = Vec::new();
        let mut fingerprint = String::new();
        for server in servers {
            let listed = hub.tools(server).await?;
            tools.extend(listed.tools);
            fingerprint.push_str(&listed.fingerprint);
        }
        Ok((tools, fingerprint))
    }
}

impl std::fmt::Debug for SideTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SideTurn")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl ExecutionStrategy for SideTurn {
    fn name(&self) -> &str {
        "standard-side-turn"
    }

    async fn execute(&self, ctx: ExecutionContext) -> Result<ExecutionResult, AgentError> {
        // One step at a time through the step primitive (events, traces, checkpoints, the
        // shared conversation); every step logged in the run's event log with the side.
        let mut steps = Steps::new(&ctx)
            .input(self.input.clone())
            .base_usage(self.base_usage.clone());
        let observer = self.run.as_ref().map(|run| {
            let observer: Arc<dyn weft_agent::execution::StepObserver> =
                RunObserver::new(run.clone(), Some(self.side));
            observer
        });
        match (&self.profile, observer) {
            (Some(profile), observer) => steps = steps.observer(profile.observer(observer)),
            (None, Some(observer)) => steps = steps.observer(observer),
            (None, None) => {}
        }
        if let Some(profile) = &self.profile {
            profile.begin().await.map_err(illegal)?;
        }
        if let Some(sop) = &self.sop {
            sop.executor.start().await;
        }
        let mut phase_seen: Option<usize> = None;
        let mut taken = self.prior_steps;
        // What the steps offer besides the agent's own settings: the MCP servers' tools of
        // now (and their fingerprint), the child registry's text; and the model instance
        // built with them.
        let mut listed: Option<(Vec<Tool>, String)> = None;
        let mut registry_text: Option<String> = None;
        let mut offered: Option<LlmInstance> = None;
        loop {
            let mut changed = false;
            if let Some((store, thread)) = self.thread.as_ref().filter(|_| self.registry) {
                use weft_store::Subagents as _;
                match store.children(thread).await {
                    Ok(children) => {
                        let text = crate::lifecycle::registry_message(&children);
                        if text != registry_text {
                            registry_text = text;
                            changed = true;
                        }
                    }
                    Err(error) => tracing::warn!(%error, "reading the child registry failed"),
                }
            }
            if let Some(mcp) = &self.mcp {
                let seen = listed
                    .as_ref()
                    .map_or(mcp.fingerprint.as_str(), |(_, f)| f.as_str());
                match McpTools::listing(&mcp.hub, &mcp.servers).await {
                    Ok((tools, fingerprint)) if fingerprint != seen => {
                        let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
                        listed = Some((tools, fingerprint));
                        changed = true;
                        if let Some(run) = &self.run {
                            run.emit(EventKind::McpToolsChanged {
                                servers: mcp.servers.clone(),
                                tools: names,
                            })
                            .await;
                        }
                    }
                    Ok(_) => {}
                    // The step goes on with the tools it had; a call of a server that is down
                    // says so to the model.
                    Err(error) => tracing::warn!(%error, "listing MCP tools failed"),
                }
            }
            if let Some(sop) = &self.sop {
                let phase = sop.executor.phase();
                if phase_seen != Some(phase) {
                    phase_seen = Some(phase);
                    changed = true;
                }
            }
            if changed {
                let mut options = ctx.agent.llm_options().clone();
                if let (Some(mcp), Some((tools, _))) = (&self.mcp, &listed) {
                    let all: Vec<Tool> = mcp.base.iter().cloned().chain(tools.clone()).collect();
                    options.tools = match &mcp.profile {
                        // The profile's policy holds for the servers' new tools too.
                        Some(profile) => crate::runtime_profile::offered(profile, all),
                        None => all,
                    };
                }
                if let Some(sop) = &self.sop {
                    // The phase's tools only; the others stay callable, so a call of one is
                    // refused by the profile's policy stage with the phase it belongs to.
                    for tool in &sop.extra {
                        if !options.tools.iter().any(|t| t.name == tool.name) {
                            options.tools.push(tool.clone());
                        }
                    }
                    options.offered = Some(
                        sop.executor
                            .offered_among(options.tools.iter().map(|t| t.name.as_str())),
                    );
                    let text = sop.executor.instructions();
                    options.system = Some(match options.system.take() {
                        Some(system) if !system.is_empty() => format!("{system}\n\n{text}"),
                        _ => text,
                    });
                }
                if let Some(text) = &registry_text {
                    // The registry as a system message: after the prompt's system text.
                    options.system = Some(match options.system.take() {
                        Some(system) if !system.is_empty() => format!("{system}\n\n{text}"),
                        _ => text.clone(),
                    });
                }
                offered = Some(ctx.llm_with(options)?);
            }
            if let Some(context) = &self.context {
                // Compression comes before anything the step adds (the Final Warning, the
                // thread's queue) and before the knowledge the system prompt carries.
                let llm = offered.as_ref().unwrap_or(&ctx.llm);
                let pending: Vec<Message> = if taken == self.prior_steps {
                    self.input.iter().cloned().collect()
                } else {
                    Vec::new()
                };
                let summarizer = |system: &str| {
                    let mut options = ctx.agent.llm_options().clone();
                    options.tools = Vec::new();
                    options.tool_layers = Vec::new();
                    options.stream_tap = None;
                    options.structure = None;
                    options.system = Some(system.to_owned());
                    ctx.llm_with(options).ok()
                };
                let compressed = context
                    .before_call(
                        steps.committed(),
                        &pending,
                        llm,
                        summarizer,
                        ctx.signal.child_token(),
                    )
                    .await;
                match compressed {
                    Ok(Some(compressed)) => {
                        // The summary call is a model call of the run: its tokens count.
                        if let Some(usage) = &compressed.summary_usage {
                            steps.add_usage(usage);
                        }
                        steps.replace_history(compressed.history);
                    }
                    Ok(None) => {}
                    Err(error) => {
                        if let Some(profile) = &self.profile {
                            profile.failed().await;
                        }
                        // A failed summary falls back to truncate: only a stopping run
                        // (its signal cancelled) ends here.
                        return Err(match error {
                            _ if ctx.signal.is_cancelled() => AgentError::Cancelled {
                                state: Box::new(steps.committed().clone()),
                            },
                            CompressionError::Summary(e) => AgentError::Upp(e),
                            other => AgentError::Config(other.to_string()),
                        });
                    }
                }
            }
            // In recovery the step's model call offers only complete_task, and forces it.
            let mut narrowed: Option<LlmInstance> = None;
            if let Some(profile) = &self.profile {
                profile.before_step(taken).await.map_err(illegal)?;
                narrowed = profile.step_llm(offered.as_ref().unwrap_or(&ctx.llm))?;
            }
            let deadline = self.profile.as_ref().and_then(|p| p.grace_deadline());
            let stepping = self.step(
                &mut steps,
                narrowed.as_ref().or(offered.as_ref()).unwrap_or(&ctx.llm),
            );
            let stepped = match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline, stepping).await.ok(),
                None => Some(stepping.await),
            };
            let stepped = match (stepped, &self.profile) {
                (Some(Ok(stepped)), _) => stepped,
                (Some(Err(error)), profile) => {
                    if let Some(profile) = profile {
                        profile.failed().await;
                    }
                    return Err(error);
                }
                (None, Some(profile)) => {
                    // The grace period's time ran out mid-step (only complete_task could run):
                    // the step's model call is stopped, not waited for.
                    ctx.signal.cancel();
                    let next = profile.timed_out().await.map_err(illegal)?;
                    self.ended(profile_end(next));
                    break;
                }
                (None, None) => break,
            };
            let turn = match stepped {
                StepOutcome::Continue(turn) | StepOutcome::Final(turn) => turn,
                StepOutcome::Suspended => {
                    if let Some(profile) = &self.profile {
                        profile.suspended().await.map_err(illegal)?;
                    }
                    // A call waits for a decision: the resume takes this step again.
                    return Err(AgentError::Cancelled {
                        state: Box::new(steps.committed().clone()),
                    });
                }
            };
            taken += 1;
            if let Some(context) = &self.context {
                context.step_ended(&turn, steps.committed());
            }
            let mut statuses = Vec::new();
            let end = match &self.profile {
                Some(profile) => {
                    // `sessionStatus` calls are still published; the profile decides the end.
                    let _ = self.plan.evaluate(&turn, taken, &mut statuses);
                    profile_end(profile.after_step(&turn, taken).await.map_err(illegal)?)
                }
                None => self.plan.evaluate(&turn, taken, &mut statuses),
            };
            for status in statuses {
                if let Some((store, thread)) = &self.thread {
                    // A subagent's status is its parent registry's (agents §7.10); a thread
                    // that is nobody's child has no entry to update.
                    use weft_store::Subagents as _;
                    if let Err(error) = store.set_child_status(thread, &status.message).await {
                        tracing::warn!(%error, "recording a subagent's status failed");
                    }
                }
                let kind = EventKind::Status {
                    message: status.message,
                    side: Some(self.side),
                };
                self.events.emit(None, kind).await;
            }
            if let Some(end) = end {
                self.ended(Some(end));
                break;
            }
        }
        steps.finish()
    }
}

impl SideTurn {
    /// One step with `llm`. With an SOP workflow the step is counted in it before its
    /// checkpoint, which keeps the workflow's progress after the step: a resumed turn goes on
    /// in its phase, its steps there counted.
    async fn step(
        &self,
        steps: &mut Steps<'_>,
        llm: &LlmInstance,
    ) -> Result<StepOutcome, AgentError> {
        let (Some(sop), Some(profile)) = (&self.sop, &self.profile) else {
            return steps.step_with(llm).await;
        };
        let step = steps.begin_step().await;
        let turn = match steps.call(llm, Vec::new()).await {
            Ok(turn) => turn,
            Err(AgentError::Cancelled { .. }) if steps.is_suspended() => {
                return Ok(StepOutcome::Suspended);
            }
            Err(error) => return Err(error),
        };
        steps.act_and_observe(step, &turn);
        profile.count_step(&turn).await;
        let mark = crate::runtime_profile::SopMark {
            turn: sop.turn,
            progress: sop.executor.progress(),
        };
        steps.set_metadata(
            weft_runtime::profile::sop::SOP_PROGRESS_KEY,
            serde_json::to_value(mark).unwrap_or(Value::Null),
        );
        steps.end_step(step).await;
        Ok(StepOutcome::of(turn))
    }

    fn ended(&self, end: Option<TurnEnd>) {
        if let (Some(end), Ok(mut slot)) = (end, self.end.lock()) {
            *slot = Some(end);
        }
    }
}

/// The turn end the profile's verdict means: `complete_task` is the session's stop (its
/// summary the output, its artifacts the attachments), an error its failure.
fn profile_end(next: Next) -> Option<TurnEnd> {
    match next {
        Next::Continue => None,
        Next::Done {
            summary, artifacts, ..
        } => Some(TurnEnd::SessionStop(LifecyclePayload {
            message: summary,
            attachments: artifacts,
        })),
        Next::Error(message) => Some(TurnEnd::SessionFail(LifecyclePayload {
            message,
            attachments: Vec::new(),
        })),
    }
}

/// An impossible state transition: a bug, which stops the run.
fn illegal(error: weft_runtime::profile::state::IllegalTransition) -> AgentError {
    AgentError::Config(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_turn_names_its_strategy_and_shows_its_stop_plan() {
        // The name is what an error of a run that ended before any model call names.
        let side: SideConfig =
            serde_json::from_value(serde_json::json!({"prompt": "p", "stopTool": "finish"}))
                .expect("a side");
        let turn = SideTurn {
            profile: None,
            sop: None,
            plan: StopPlan {
                side,
                handoffs: vec!["writer".into()],
            },
            input: None,
            events: SessionEvents::default(),
            end: Arc::default(),
            prior_steps: 0,
            run: None,
            side: Side::A,
            base_usage: weft_provider::TokenUsage::default(),
            mcp: None,
            thread: None,
            registry: false,
            context: None,
        };
        assert_eq!(turn.name(), "standard-side-turn");
        let shown = format!("{turn:?}");
        assert!(shown.starts_with("SideTurn { plan: StopPlan {"), "{shown}");
        assert!(
            shown.contains("\"finish\"") && shown.contains("\"writer\""),
            "{shown}"
        );
    }
}
