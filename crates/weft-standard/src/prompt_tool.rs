//! Prompt tools (tools §1, §4): a prompt with `exposeAsTool = true`, listed in another
//! prompt's `tools` by name or as a `SubpromptConfig` object, is a tool whose call runs a
//! **nested invocation** of that prompt: its own system text, model and tools, on a fresh
//! conversation whose first user message is the call's `initUserMessageProperty` argument
//! (`message` by default; without a mapping, the `message` argument or the whole arguments as
//! JSON text), run to its end like an `ai_human` turn (a text response without tool calls, a
//! stop tool, `maxSteps`).
//!
//! The invocation is a child run of the calling session on the one child-run mechanism of
//! subagents ([`crate::subagent`], `weft_runtime::child`): an `ai_human` agent named after the
//! prompt, made for the call (no file defines it), on a thread of its own linked to the
//! caller's, its model calls recorded and replayed on resume (a call replayed after a crash
//! goes on from the child's checkpoints; a call whose result was recorded is not run again),
//! its events under the agent path `caller/PROMPT`, its own folder as its workspace. The
//! files of the `initAttachmentsProperty` argument are copied into that folder like a
//! subagent's.
//!
//! The call's result is shaped by the caller's [`SubpromptConfig`]:
//!
//! * only `includeTextResponse` (the default): the final text, as a string;
//! * otherwise a JSON object with `text` (with `includeTextResponse`), `toolCalls` (with
//!   `includeToolCalls`: the nested calls that succeeded, `{name, arguments, result}` in call
//!   order) and `errors` (with `includeErrors`: the nested calls that failed,
//!   `{name, arguments, error}`).
//!
//! A nested invocation that ends failed (`maxSteps`, a model error) is a tool error for the
//! caller, `Prompt tool NAME (reference: REF) failed (REASON): DETAILS`, followed with
//! `includeErrors` by the nested tool errors; the caller's session goes on.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use weft_provider::{Message, Tool, ToolContext, ToolError};

use crate::definition::{AgentDefinition, PromptDefinition, SubpromptConfig};
use crate::session::{SessionOutcome, SessionStatus};
use crate::subagent::{ChildEnd, ChildOutcome, ChildThread, Parent};

/// The tool that calls the prompt `target` as a nested invocation of `parent`'s session,
/// configured by `config`.
pub(crate) fn prompt_tool(
    target: &PromptDefinition,
    config: SubpromptConfig,
    parent: Parent,
) -> Tool {
    let name = target.name.clone();
    let description = target
        .tool_description
        .clone()
        .or_else(|| target.description.clone())
        .unwrap_or_else(|| format!("Ask {name} (a nested prompt) and get its answer."));
    let parameters = target.required_schema.clone().unwrap_or_else(|| {
        crate::subagent::call_schema(
            config.init_user_message_property.as_deref(),
            config.init_attachments_property.as_deref(),
            "prompt",
        )
    });
    let (parent, config) = (Arc::new(parent), Arc::new(config));
    Tool::new(
        name,
        description,
        parameters,
        move |args: Value, ctx: ToolContext| {
            let (parent, config) = (parent.clone(), config.clone());
            async move { call(&parent, &config, &args, ctx).await }
        },
    )
    // The nested invocation's own calls are recorded and replayed: running the call again
    // after a crash replays it, it repeats no side effect.
    .with_side_effects(false)
    .with_idempotent(true)
}

/// The `ai_human` agent a nested invocation of `prompt` runs as.
fn invocation_agent(prompt: &PromptDefinition) -> Result<AgentDefinition, ToolError> {
    serde_json::from_value(json!({
        "name": prompt.name,
        "type": "ai_human",
        "description": format!("A nested invocation of the prompt {}.", prompt.name),
        "sideA": {"prompt": prompt.name},
    }))
    .map_err(|e| {
        ToolError::new(format!(
            "the prompt tool {} could not be set up: {e}",
            prompt.name
        ))
    })
}

async fn call(
    parent: &Parent,
    config: &SubpromptConfig,
    args: &Value,
    ctx: ToolContext,
) -> Result<Value, ToolError> {
    let name = config.name.as_str();
    let prompt = parent
        .project
        .prompt(name)
        .ok_or_else(|| ToolError::new(format!("there is no prompt {name:?}")))?;
    let input = crate::subagent::first_message(config.init_user_message_property.as_deref(), args)?;
    let files = crate::attachments::paths_of(args, config.init_attachments_property.as_deref())?;
    let reference = crate::subagent::call_reference(parent, &ctx);
    let input = crate::subagent::give_attachments(parent, &reference, &input, &files).await?;
    let parent = Parent {
        project: Arc::new(parent.project.with_agent(invocation_agent(prompt)?)),
        ..parent.clone()
    };
    let mut ended =
        crate::subagent::run_child(&parent, name, &ChildThread::PerCall, &input, ctx).await?;
    if let (ChildOutcome::Ended(outcome), Some(durable)) =
        (&mut ended.outcome, &parent.options.durable)
        && outcome.status != SessionStatus::Completed
    {
        // A turn that failed gives back the state it started from; the steps it finished
        // (with their tool errors) are in the invocation's latest checkpoint.
        if let Ok(Some(latest)) = durable.store.latest_checkpoint(&ended.reference).await
            && latest.checkpoint.state.messages().len() > outcome.state_a.messages().len()
        {
            outcome.state_a = latest.checkpoint.state;
        }
    }
    shaped(config, ended)
}

/// The call's result: the nested invocation's end shaped by `config`.
fn shaped(config: &SubpromptConfig, ended: ChildEnd) -> Result<Value, ToolError> {
    let (name, reference) = (config.name.as_str(), ended.reference.as_str());
    let outcome = match ended.outcome {
        ChildOutcome::Ended(outcome) => outcome,
        ChildOutcome::Broken(details) => {
            return Err(ToolError::new(format!(
                "Prompt tool {name} (reference: {reference}) could not run: {details}"
            )));
        }
        ChildOutcome::Pending(why) | ChildOutcome::Terminated(why) => {
            return Err(ToolError::new(why));
        }
    };
    let (succeeded, failed) = nested_calls(&outcome);
    if outcome.status != SessionStatus::Completed {
        let reason = serde_json::to_value(outcome.reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let mut text = format!(
            "Prompt tool {name} (reference: {reference}) failed ({reason}): {}",
            outcome.message
        );
        if config.include_errors && !failed.is_empty() {
            text.push_str("\n\nTool errors: ");
            text.push_str(&Value::Array(failed).to_string());
        }
        return Err(ToolError::new(text));
    }
    let text = crate::attachments::listed(&outcome.message, &ended.returned);
    if !config.include_tool_calls && !config.include_errors {
        return Ok(if config.include_text_response {
            Value::String(text)
        } else {
            json!({})
        });
    }
    let mut result = Map::new();
    if config.include_text_response {
        result.insert("text".into(), Value::String(text));
    }
    if config.include_tool_calls {
        result.insert("toolCalls".into(), Value::Array(succeeded));
    }
    if config.include_errors {
        result.insert("errors".into(), Value::Array(failed));
    }
    Ok(Value::Object(result))
}

/// The nested invocation's tool calls in call order: those that succeeded
/// (`{name, arguments, result}`) and those that failed (`{name, arguments, error}`).
fn nested_calls(outcome: &SessionOutcome) -> (Vec<Value>, Vec<Value>) {
    let messages: Vec<std::borrow::Cow<'_, Message>> = outcome.state_a.messages().collect();
    let result_of = |id: &str| {
        messages.iter().find_map(|m| match m.as_ref() {
            Message::ToolResult(r) => r.results.iter().find(|r| r.tool_call_id == id),
            _ => None,
        })
    };
    let (mut succeeded, mut failed) = (Vec::new(), Vec::new());
    for message in &messages {
        let Message::Assistant(reply) = message.as_ref() else {
            continue;
        };
        for call in &reply.tool_calls {
            // A call without a result (the invocation stopped before it ran) is neither.
            let Some(result) = result_of(&call.tool_call_id) else {
                continue;
            };
            if result.is_error {
                failed.push(json!({"name": call.tool_name, "arguments": call.arguments, "error": result.result}));
            } else {
                succeeded.push(json!({"name": call.tool_name, "arguments": call.arguments, "result": result.result}));
            }
        }
    }
    (succeeded, failed)
}
