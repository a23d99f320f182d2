//! Delegation (runtime spec §5.4): the `delegate_to_agent` tool an agent under the runtime
//! profile is offered when its profile has a `[runtime.delegation]` table.
//!
//! A call runs a child through the **same** child-run mechanism as a Standard Agents
//! subagent ([`crate::subagent::run_child`] on `weft_runtime::child::ChildRun`): the child
//! is an `ai_human` agent named after its role, made for the call (no file defines it), run
//! as a blocking, non-resumable subagent of the caller —
//!
//! * an **isolated context**: its own thread (linked to the caller's), starting from the
//!   task (with its constraints and expected output) as its first message, and a system
//!   prompt of its role;
//! * a **registry constrained by role**: the role's tools
//!   (`weft_runtime::delegation::role_tools`) that the caller has, plus the tools
//!   `[runtime.delegation.grants]` grants the role; the caller's denials and rules hold
//!   for the child's calls too, and the child is under the runtime profile (it ends with
//!   `complete_task`, its sensitive tools ask), so it never has more than its parent
//!   without an explicit grant;
//! * its model: `delegation.model`, else the caller's;
//! * usage and cost rolled up, events under `caller/ROLE`, approvals surfacing on the root
//!   run (a child waiting for a decision leaves the caller's call pending);
//! * **artifacts**: the files the child lists in `complete_task` are copied into the caller's
//!   `attachments/from-REFERENCE/` and registered in the run's artifacts under the caller's
//!   agent id;
//! * **limits**: a child deeper than `maxDepth` (3) or an agent's child beyond
//!   `maxChildren` (8) is refused with a tool error the model reads; so is bad input.
//!
//! The call publishes `delegated` on the run tree's message bus and subscribes to its
//! child's topic; each notice it receives (`started`, then `finished`, `failed` or
//! `suspended`) is logged as a `delegation` event.
//!
//! The call's result is JSON: `{"reference", "role", "status": "completed", "summary",
//! "artifacts"}`; a failed child is an error result with the child's error.

use std::sync::Arc;

use serde_json::{Value, json};
use weft_provider::{Tool, ToolContext, ToolError};
use weft_runtime::bus::{BusMessage, DELEGATION_TOPIC, child_topic};
use weft_runtime::delegation::{DELEGATE_TO_AGENT, DelegateInput, DelegationConfig};
use weft_runtime::event::EventKind;
use weft_runtime::profile::RuntimeProfile;
use weft_store::{ArtifactType, NewArtifact};

use crate::definition::{AgentDefinition, PromptDefinition};
use crate::session::SessionStatus;
use crate::subagent::{ChildOutcome, ChildThread, Parent};

/// What the tool needs of the agent that offers it.
#[derive(Debug, Clone)]
struct Caller {
    parent: Parent,
    config: DelegationConfig,
    /// The caller's tools (names in its prompt).
    tools: Vec<String>,
    /// The children's model reference.
    model: String,
    /// The caller's `runtime` table (the child keeps its settings).
    runtime: Option<Value>,
}

/// The `delegate_to_agent` tool for `agent` (running `prompt` on the model `model`) under
/// `profile`, when the profile offers it: a `[runtime.delegation]` table with `enabled`
/// not false, and the policy does not deny the tool.
pub(crate) fn offered(
    profile: &RuntimeProfile,
    parent: &Parent,
    agent: &AgentDefinition,
    prompt: &PromptDefinition,
    model: &str,
) -> Option<Tool> {
    let config = profile.delegation.as_ref().filter(|d| d.enabled)?;
    if !profile.policy.offers(DELEGATE_TO_AGENT) {
        return None;
    }
    let caller = Arc::new(Caller {
        parent: parent.clone(),
        config: config.clone(),
        tools: prompt.tools.iter().map(|t| t.name().to_owned()).collect(),
        model: config
            .model
            .as_deref()
            .map_or_else(|| model.to_owned(), |m| parent.project.model_reference(m)),
        runtime: agent.runtime.clone(),
    });
    Some(
        Tool::new(
            DELEGATE_TO_AGENT,
            "Delegate a task to a child agent with a role (researcher, coder, reviewer or analyst). \
             The child works in its own context with the tools of its role and returns its summary.",
            DelegateInput::schema(),
            move |args: Value, ctx: ToolContext| {
                let caller = caller.clone();
                async move { delegate(&caller, &args, ctx).await }
            },
        )
        // The child's own calls are recorded and replayed: running the call again after a
        // crash replays the child, it repeats no side effect.
        .with_side_effects(false)
        .with_idempotent(true),
    )
}

/// The child's definitions: an `ai_human` agent named after the role, on a prompt of its
/// own (its role's brief, its tools, the children's model).
fn child_definitions(
    caller: &Caller,
    input: &DelegateInput,
) -> Result<(AgentDefinition, PromptDefinition), ToolError> {
    let role = input.role.as_str();
    let parent_tools: Vec<&str> = caller.tools.iter().map(String::as_str).collect();
    let project = &caller.parent.project;
    // A grant naming a tool this project does not have is left out (the child could not
    // start with it).
    let tools: Vec<String> = caller
        .config
        .child_tools(input.role, &parent_tools)
        .into_iter()
        .filter(|t| project.tool_kind(t).is_some())
        .collect();
    let prompt_name = format!("delegate-{role}");
    let system = format!(
        "{}\n\nYou were given one task by another agent. Work only on it. When it is done, call \
         complete_task alone with a summary of the result (and, as artifacts, the files you \
         created).",
        input.role.brief()
    );
    let prompt: PromptDefinition = serde_json::from_value(json!({
        "name": prompt_name,
        "model": caller.model,
        "system": system,
        "tools": tools,
    }))
    .map_err(|e| ToolError::new(format!("the {role} could not be defined: {e}")))?;
    let agent: AgentDefinition = serde_json::from_value(json!({
        "name": role,
        "type": "ai_human",
        "description": format!("A delegated {role}."),
        "sideA": {"prompt": prompt_name},
        "runtime": caller.runtime.clone().unwrap_or_else(|| json!({})),
    }))
    .map_err(|e| ToolError::new(format!("the {role} could not be defined: {e}")))?;
    Ok((agent, prompt))
}

async fn delegate(caller: &Caller, args: &Value, ctx: ToolContext) -> Result<Value, ToolError> {
    let input = DelegateInput::parse(args).map_err(|e| ToolError::new(e.to_string()))?;
    let role = input.role.as_str();
    let Some(durable) = caller.parent.options.durable.clone() else {
        return Err(ToolError::new(
            "delegate_to_agent runs its child inside the run's store: this session has none",
        ));
    };
    let run = &durable.run;
    let depth = u32::try_from(run.agent().depth()).unwrap_or(u32::MAX) + 1;
    let max_depth = caller.config.max_depth;
    if depth > max_depth {
        return Err(ToolError::new(format!(
            "delegate_to_agent refused: the {role} would be at depth {depth}, and delegation is \
             limited to maxDepth = {max_depth}; do the task yourself"
        )));
    }
    let position = weft_runtime::child::call_position(run, &ctx);
    let reference = weft_runtime::child::child_reference(run.run_id(), &position);
    // The caller's children so far, every process's (the lineage is the run's): a replay of
    // this call reopens its own child, which does not count.
    let lineage = {
        use weft_store::Lineage as _;
        durable
            .store
            .lineage(run.run_id())
            .await
            .map_err(|e| ToolError::transient(format!("the {role} could not start: {e}")))?
    };
    let children = lineage
        .iter()
        .filter(|node| {
            node.parent_agent_id.as_deref() == Some(run.agent_id())
                && weft_runtime::delegation::DelegateRole::parse(&node.role).is_some()
                && node.id != reference
        })
        .count();
    let max_children = caller.config.max_children;
    if children >= usize::try_from(max_children).unwrap_or(usize::MAX) {
        return Err(ToolError::new(format!(
            "delegate_to_agent refused: this agent has delegated {children} tasks, the most \
             maxChildren = {max_children} allows; do the rest yourself"
        )));
    }
    let (agent, prompt) = child_definitions(caller, &input)?;
    let parent = Parent {
        project: Arc::new(caller.parent.project.with_definitions(agent, prompt)),
        // A delegated role works on its caller's files (a coder edits the caller's
        // workspace); its isolation is its context and its constrained registry.
        child_files: crate::filesystem::ChildFiles::Shared,
        ..caller.parent.clone()
    };
    let bus = run.bus().clone();
    let mut notices = bus.subscribe(&child_topic(&reference));
    let from = run.agent().as_str().to_owned();
    bus.publish(
        DELEGATION_TOPIC,
        &from,
        BusMessage::Delegated {
            reference: reference.clone(),
            role: role.to_owned(),
            task: input.task.clone(),
            depth,
        },
    );
    run.emit(EventKind::Delegation {
        reference: reference.clone(),
        role: role.to_owned(),
        status: "delegated".into(),
        depth,
        topic: DELEGATION_TOPIC.into(),
    })
    .await;
    let ended =
        crate::subagent::run_child(&parent, role, &ChildThread::PerCall, &input.message(), ctx)
            .await;
    // What the child's run published about it, as the caller received it.
    while let Some(notice) = notices.try_recv() {
        let status = match notice.message {
            BusMessage::ChildStarted { .. } => "started",
            BusMessage::ChildFinished { .. } => "finished",
            BusMessage::ChildFailed { .. } => "failed",
            BusMessage::ChildSuspended { .. } => "suspended",
            _ => continue,
        };
        run.emit(EventKind::Delegation {
            reference: reference.clone(),
            role: role.to_owned(),
            status: status.into(),
            depth,
            topic: notice.topic,
        })
        .await;
    }
    let ended = ended?;
    let outcome = match &ended.outcome {
        ChildOutcome::Ended(outcome) => outcome,
        ChildOutcome::Broken(details) => {
            return Err(ToolError::new(format!(
                "the delegated {role} (reference: {reference}) could not run: {details}"
            )));
        }
        ChildOutcome::Pending(why) | ChildOutcome::Terminated(why) => {
            return Err(ToolError::new(why.clone()));
        }
    };
    if outcome.status != SessionStatus::Completed {
        return Err(ToolError::new(format!(
            "the delegated {role} (reference: {reference}) failed: {}",
            outcome.message
        )));
    }
    // The child's artifacts, copied into the caller's folder, are the caller's too.
    register(caller, &durable, &ended.returned).await?;
    Ok(json!({
        "reference": reference,
        "role": role,
        "status": "completed",
        "summary": outcome.message,
        "artifacts": ended.returned,
    }))
}

/// Registers the files `paths` (relative to the workspace) as the caller's artifacts (once:
/// a replayed call finds them registered).
async fn register(
    caller: &Caller,
    durable: &crate::session::Durable,
    paths: &[String],
) -> Result<(), ToolError> {
    use weft_store::Artifacts as _;
    if paths.is_empty() {
        return Ok(());
    }
    let run = &durable.run;
    let existing = durable
        .store
        .artifacts(run.run_id())
        .await
        .map_err(|e| ToolError::transient(format!("the artifacts could not be read: {e}")))?;
    for path in paths {
        let file = caller
            .parent
            .options
            .workspace
            .join(path)
            .to_string_lossy()
            .into_owned();
        if existing.iter().any(|a| {
            a.artifact.agent_id == run.agent_id() && a.artifact.path.as_deref() == Some(&file)
        }) {
            continue;
        }
        durable
            .store
            .put_artifact(NewArtifact {
                run_id: run.run_id().to_owned(),
                agent_id: run.agent_id().to_owned(),
                checkpoint_id: None,
                artifact_type: ArtifactType::File,
                path: Some(file),
                content: None,
                media_type: Some(weft_runtime::profile::layer::mime_type(path).to_owned()),
            })
            .await
            .map_err(|e| {
                ToolError::transient(format!(
                    "the artifact {path:?} could not be registered: {e}"
                ))
            })?;
    }
    Ok(())
}
