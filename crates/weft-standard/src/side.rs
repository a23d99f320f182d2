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
use weft_provider::{LlmInstance, Message, Tool, ToolResult, Turn};
use weft_runtime::event::{EventKind, Side};
use weft_runtime::ledger::RunContext;
use weft_runtime::observer::RunObserver;

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
        let messages: Vec<Message> = match last {
            Message::Assistant(_) => vec![last.clone()],
            Message::ToolResult(_) => match state.message(count.checked_sub(2)?)? {
                call @ Message::Assistant(_) => vec![call.clone(), last.clone()],
                _ => return None,
            },
            _ => return None,
        };
        let Some(Message::Assistant(response)) = messages.first().cloned() else {
            return None;
        };
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
    match turn.messages.last() {
        Some(Message::ToolResult(results)) => &results.results,
        _ => &[],
    }
}

/// The strategy of one side turn.
pub(crate) struct SideTurn {
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
        if let Some(run) = &self.run {
            steps = steps.observer(RunObserver::new(run.clone(), Some(self.side)));
        }
        let mut taken = self.prior_steps;
        let mut offered: Option<(LlmInstance, String)> = None;
        loop {
            if let Some(mcp) = &self.mcp {
                let seen = offered
                    .as_ref()
                    .map_or(mcp.fingerprint.as_str(), |(_, f)| f.as_str());
                match McpTools::listing(&mcp.hub, &mcp.servers).await {
                    Ok((tools, fingerprint)) if fingerprint != seen => {
                        let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
                        let mut options = ctx.agent.llm_options().clone();
                        options.tools = mcp.base.iter().cloned().chain(tools).collect();
                        offered = Some((ctx.llm_with(options)?, fingerprint));
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
            let stepped = match &offered {
                Some((llm, _)) => steps.step_with(llm).await?,
                None => steps.step().await?,
            };
            let turn = match stepped {
                StepOutcome::Continue(turn) | StepOutcome::Final(turn) => turn,
                StepOutcome::Suspended => {
                    // A call waits for a decision: the resume takes this step again.
                    return Err(AgentError::Cancelled {
                        state: Box::new(steps.committed().clone()),
                    });
                }
            };
            taken += 1;
            let mut statuses = Vec::new();
            let end = self.plan.evaluate(&turn, taken, &mut statuses);
            for status in statuses {
                let kind = EventKind::Status {
                    message: status.message,
                    side: Some(self.side),
                };
                self.events.emit(None, kind).await;
            }
            if let Some(end) = end {
                if let Ok(mut slot) = self.end.lock() {
                    *slot = Some(end);
                }
                break;
            }
        }
        steps.finish()
    }
}
