//! UAP-1.0 sub-agent tools as child runs: the runtime's [`ChildRunner`], the third
//! configuration of the one child-run mechanism ([`crate::child`]) beside Standard Agents
//! subagents and delegation.
//!
//! The runtime gives the tools of every agent it runs a [`ChildRuns`] in their
//! `ToolContext::extensions` ([`SubagentRuns::extension`]). A `weft_agent::SubagentTool`
//! called in a run finds it and runs its agent as a [`ChildRun`] of the run:
//!
//! * the child's **thread** (parent: the run's thread), **lineage node** and `invoke_agent`
//!   span, as every child run;
//! * its agent **rebound** to the child's [`RunContext`]: its model recorded (and replayed on
//!   resume) under the child's thread ([`recorded_model`]), the run's pipeline
//!   ([`crate::pipeline::layers`] with the run's policy) for its tool calls at their own
//!   positions, its conversation checkpointed under the child's thread, and its own tools
//!   given a [`ChildRuns`] for its context (a sub-agent of a sub-agent is a grandchild);
//! * its steps logged by a [`RunObserver`] of the child's context: its events are the run's,
//!   under the agent path `parent/child`; a step whose call waits for a decision is given up,
//!   and the child is [deferred](ChildRun::defer): the run suspends with the decision, and
//!   after it is taken the resume runs the parent's call again — the child replays from its
//!   first step (every model response and tool result is recorded, whatever its execution
//!   strategy) and goes on from there;
//! * its model calls count in the run's usage and budget (the run's ledger), and its own
//!   usage goes to its lineage node when it ends.
//!
//! **Permissions are not inherited**: the child's calls pass the run's own policy (its
//! hooks, its approvals), not the calling agent's extra stages.

use std::sync::Arc;

use weft_agent::checkpoint::CheckpointMode;
use weft_agent::execution::StepObserver;
use weft_agent::{Agent, ChildOutcome, ChildRunner, ChildRuns, OpenChild};
use weft_provider::tool::BoxFuture;
use weft_provider::{ModelReference, ToolContext, ToolError};
use weft_store::Store;

use crate::approval::ToolPolicy;
use crate::child::ChildRun;
use crate::ledger::RunContext;
use crate::observer::RunObserver;
use crate::recorded::recorded_model;

/// The [`ChildRunner`] of one agent of a run: opens its sub-agents as child runs of it.
pub struct SubagentRuns {
    run: Arc<RunContext>,
    policy: ToolPolicy,
    store: Store,
    mode: CheckpointMode,
    model: ModelReference,
}

impl std::fmt::Debug for SubagentRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentRuns")
            .field("run", &self.run.run_id())
            .field("agent", &self.run.agent().as_str())
            .finish_non_exhaustive()
    }
}

impl SubagentRuns {
    /// The extension the tools of the agent running in `run` get: its sub-agents become
    /// child runs of `run` whose calls pass `policy`, checkpointed in `store` with `mode`;
    /// `model` is the agent's model before recording (what an inheriting sub-agent gets).
    pub fn extension(
        run: Arc<RunContext>,
        policy: ToolPolicy,
        store: Store,
        mode: CheckpointMode,
        model: ModelReference,
    ) -> ChildRuns {
        ChildRuns(Arc::new(SubagentRuns {
            run,
            policy,
            store,
            mode,
            model,
        }))
    }

    /// `agent` bound to `child`: recorded model, the run's pipeline, checkpoints under the
    /// child's thread, child runs for its own sub-agents.
    fn bind(&self, agent: &Agent, child: &ChildRun) -> Result<Agent, ToolError> {
        let context = child.context();
        let mut options = agent.options().clone();
        let model = options.llm.model.clone();
        options.llm.model = recorded_model(&model, context.clone(), child.reference())
            .map_err(|e| ToolError::new(format!("the sub-agent's model cannot be bound: {e}")))?;
        for layer in crate::pipeline::layers(context, &self.policy) {
            options = options.tool_layer(layer);
        }
        let runs = SubagentRuns::extension(
            context.clone(),
            self.policy.clone(),
            self.store.clone(),
            self.mode,
            model,
        );
        options = options
            .tool_extension(runs)
            .checkpoints(self.store.clone())
            .checkpoint_mode(self.mode)
            .session_id(child.reference());
        weft_agent::agent(options)
            .map_err(|e| ToolError::new(format!("the sub-agent cannot run in this run: {e}")))
    }
}

impl ChildRunner for SubagentRuns {
    fn open<'a>(
        &'a self,
        name: &'a str,
        agent: &'a Agent,
        call: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Box<dyn OpenChild>, ToolError>> {
        Box::pin(async move {
            let child = ChildRun::open(&self.run, name, call).await.map_err(|e| {
                ToolError::transient(format!("the sub-agent {name} could not start: {e}"))
            })?;
            let bound = match self.bind(agent, &child) {
                Ok(bound) => bound,
                Err(error) => {
                    let _ = child.end(false).await;
                    return Err(error);
                }
            };
            let observer = RunObserver::new(child.context().clone(), None);
            Ok(Box::new(OpenSubagent {
                name: name.to_owned(),
                child,
                agent: bound,
                observer,
            }) as Box<dyn OpenChild>)
        })
    }

    fn model(&self) -> &ModelReference {
        &self.model
    }
}

/// A sub-agent's child run in progress.
struct OpenSubagent {
    name: String,
    child: ChildRun,
    agent: Agent,
    observer: Arc<RunObserver>,
}

impl OpenChild for OpenSubagent {
    fn agent(&self) -> &Agent {
        &self.agent
    }

    fn observer(&self) -> Option<Arc<dyn StepObserver>> {
        Some(self.observer.clone())
    }

    fn end(self: Box<Self>, outcome: ChildOutcome) -> BoxFuture<'static, Result<(), ToolError>> {
        Box::pin(async move {
            let OpenSubagent {
                name, child, agent, ..
            } = *self;
            agent.flush_checkpoints().await;
            if outcome == ChildOutcome::Interrupted {
                // The call stays pending (uncertain): a resume goes on with the child.
                return Err(ToolError::new(format!(
                    "the sub-agent {name} was interrupted"
                )));
            }
            if child.is_suspended() {
                // A call of the child waits for a decision: so does the parent's call (the
                // run suspends, and the decision surfaces on it).
                child.defer();
                return Err(ToolError::new(format!(
                    "the sub-agent {name} waits for a decision"
                )));
            }
            if let Err(error) = child.end(outcome == ChildOutcome::Succeeded).await {
                tracing::warn!(%error, "recording the end of a sub-agent failed");
            }
            Ok(())
        })
    }
}
