//! Subagents (agents §7): a `dual_ai` agent with `exposeAsTool`, listed in a prompt's
//! tools, is a tool whose call runs that agent's session as a **child run** of the calling
//! session (`weft_runtime::child`): its own thread linked to the parent's, its own
//! checkpoints, its model calls recorded under its thread and counted in the run's usage,
//! its events in the run's log under the agent path `parent/child`, its span under the
//! call's span. The call is blocking and the child non-resumable (§7.3): the parent waits,
//! and the child ends with its result.
//!
//! The call's result is the spec's canonical child → parent payload (§7.9, §7.10): the
//! `sessionStop` message of the child as
//!
//! ```text
//! Subagent (reference: {uuid}) has returned the following result:
//!
//! {result}
//! ```
//!
//! and a `sessionFail` (or any other failure of the child) as an error result
//! `Subagent (reference: {uuid}) has reported a failure:` + blank line + the details.
//!
//! The tool's schema is explicit: the agent's `toolParameters`, or one string argument
//! named by the caller's `initUserMessageProperty` (`message` when unset); that argument is
//! the child's first message (without one configured, a call with no `message` argument
//! sends its whole arguments as JSON text).

use std::sync::Arc;

use serde_json::{Value, json};
use weft_provider::{Tool, ToolContext, ToolError};
use weft_runtime::child::ChildRun;
use weft_runtime::event::AgentPath;

use crate::definition::{AgentDefinition, SubagentToolConfig};
use crate::project::Project;
use crate::session::{Durable, SessionOptions, SessionStatus, run_session};

/// How deep subagents may nest (a guard against an agent that calls itself).
pub const MAX_SUBAGENT_DEPTH: usize = 8;

/// The argument a subagent tool takes when neither the agent's `toolParameters` nor the
/// caller's `initUserMessageProperty` names one.
pub const DEFAULT_MESSAGE_PROPERTY: &str = "message";

/// The message a parent gets when its child ends by `sessionStop` (agents §7.10).
///
/// # Examples
///
/// ```
/// assert_eq!(
///     weft_standard::subagent::result_message("abc", "done"),
///     "Subagent (reference: abc) has returned the following result:\n\ndone"
/// );
/// ```
pub fn result_message(reference: &str, result: &str) -> String {
    format!("Subagent (reference: {reference}) has returned the following result:\n\n{result}")
}

/// The message a parent gets when its child ends by `sessionFail` (agents §7.10).
///
/// # Examples
///
/// ```
/// assert_eq!(
///     weft_standard::subagent::failure_message("abc", "no luck"),
///     "Subagent (reference: abc) has reported a failure:\n\nno luck"
/// );
/// ```
pub fn failure_message(reference: &str, details: &str) -> String {
    format!("Subagent (reference: {reference}) has reported a failure:\n\n{details}")
}

/// What a subagent tool of a session needs from it to start children.
#[derive(Debug, Clone)]
pub(crate) struct Parent {
    pub(crate) project: Arc<Project>,
    pub(crate) options: SessionOptions,
    /// The calling agent's path (events of a session outside a durable run).
    pub(crate) agent: AgentPath,
}

/// The name of the argument that becomes the child's first message.
fn message_property(config: Option<&SubagentToolConfig>) -> Option<&str> {
    config.and_then(|c| c.init_user_message_property.as_deref())
}

/// The tool that calls `target` (a `dual_ai` agent) as a subagent of `parent`, configured by
/// `config` (`None`: the tool listed by name, every setting at its default).
pub(crate) fn subagent_tool(
    target: &AgentDefinition,
    config: Option<&SubagentToolConfig>,
    parent: Parent,
) -> Tool {
    let name = target.name.clone();
    let description = target
        .tool_description
        .clone()
        .or_else(|| target.description.clone())
        .unwrap_or_else(|| format!("Give a task to the subagent {name}."));
    let property = message_property(config).map(str::to_owned);
    let parameters = target.tool_parameters.clone().unwrap_or_else(|| {
        let property = property.as_deref().unwrap_or(DEFAULT_MESSAGE_PROPERTY);
        json!({
            "type": "object",
            "properties": {property: {"type": "string", "description": "The subagent's task: its first message."}},
            "required": [property],
        })
    });
    let parent = Arc::new(parent);
    Tool::new(
        name.clone(),
        description,
        parameters,
        move |args: Value, ctx: ToolContext| {
            let (parent, name, property) = (parent.clone(), name.clone(), property.clone());
            async move { call(&parent, &name, property.as_deref(), &args, ctx).await }
        },
    )
    // The child's own calls are recorded and replayed: running the call again after a
    // crash replays the child, it repeats no side effect.
    .with_side_effects(false)
    .with_idempotent(true)
}

/// The child's first message, from the call's arguments.
fn first_message(property: Option<&str>, args: &Value) -> Result<String, ToolError> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match property {
        Some(property) => args.get(property).map(text).ok_or_else(|| {
            ToolError::new(format!(
                "the call needs the argument {property:?}: the subagent's task"
            ))
        }),
        None => Ok(args
            .get(DEFAULT_MESSAGE_PROPERTY)
            .map_or_else(|| text(args), text)),
    }
}

async fn call(
    parent: &Parent,
    name: &str,
    property: Option<&str>,
    args: &Value,
    ctx: ToolContext,
) -> Result<Value, ToolError> {
    let input = first_message(property, args)?;
    if parent.agent.depth() >= MAX_SUBAGENT_DEPTH {
        return Err(ToolError::new(format!(
            "subagents nest at most {MAX_SUBAGENT_DEPTH} deep: {name} was not started"
        )));
    }
    let mut options = parent.options.clone();
    options.signal = ctx.signal.clone();
    options.initial_state = weft_agent::AgentState::initial();
    options.initial_state_b = None;
    options.agent_path = Some(parent.agent.child(name));
    let mut input = input;
    let child = match &parent.options.durable {
        Some(durable) => {
            let child = ChildRun::open(&durable.run, name, &ctx)
                .await
                .map_err(|e| {
                    ToolError::transient(format!("the subagent {name} could not start: {e}"))
                })?;
            let thread = child.reference().to_owned();
            // A resumed run goes on with the child from its checkpoints (its model calls and
            // tool calls replay from the run's record).
            let latest = |scope: String| {
                let store = durable.store.clone();
                async move { store.latest_checkpoint(&scope).await.ok().flatten() }
            };
            if let Some(a) = latest(thread.clone()).await {
                options.initial_state = a.checkpoint.state;
                options.initial_state_b = latest(format!("{thread}.sideB"))
                    .await
                    .map(|b| b.checkpoint.state);
                input.clear();
            }
            options.thread_id = Some(thread);
            options.durable = Some(Durable {
                run: child.context().clone(),
                store: durable.store.clone(),
                mode: durable.mode,
                base_usage: weft_provider::TokenUsage::default(),
            });
            Some(child)
        }
        None => {
            options.thread_id = None;
            None
        }
    };
    let reference = child
        .as_ref()
        .map_or_else(|| ctx.tool_call_id.clone(), |c| c.reference().to_owned());
    let outcome = Box::pin(run_session(&parent.project, name, &input, &options)).await;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => {
            if let Some(child) = child {
                let _ = child.end(false).await;
            }
            return Err(ToolError::new(failure_message(
                &reference,
                &error.to_string(),
            )));
        }
    };
    let child = match child {
        Some(child) if child.is_suspended() => {
            // A call of the child waits for a decision: so does the parent's call (the run
            // suspends, and the decision surfaces on it).
            child.defer();
            return Err(ToolError::new(format!(
                "the subagent {name} waits for a decision"
            )));
        }
        other => other,
    };
    if outcome.status == SessionStatus::Interrupted {
        // The call stays pending (uncertain): a resume goes on with the child.
        return Err(ToolError::new(format!(
            "the subagent {name} was interrupted"
        )));
    }
    let succeeded = outcome.status == SessionStatus::Completed;
    if let Some(child) = child
        && let Err(error) = child.end(succeeded).await
    {
        tracing::warn!(%error, "recording the end of a subagent failed");
    }
    if succeeded {
        Ok(Value::String(result_message(&reference, &outcome.message)))
    } else {
        Err(ToolError::new(failure_message(
            &reference,
            &outcome.message,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_message_is_the_mapped_argument() {
        let args = json!({"task": "review", "message": "other"});
        assert_eq!(
            first_message(Some("task"), &args).ok().as_deref(),
            Some("review")
        );
        assert_eq!(first_message(None, &args).ok().as_deref(), Some("other"));
        assert!(first_message(Some("missing"), &args).is_err());
        let whole = json!({"a": 1});
        assert_eq!(
            first_message(None, &whole).ok().as_deref(),
            Some("{\"a\":1}")
        );
    }
}
