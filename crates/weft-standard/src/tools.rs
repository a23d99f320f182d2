//! The tools of a prompt: built-ins from `weft-tools` bound to the project workspace,
//! project tools (declared signatures whose call returns the arguments), and agent tools
//! (handoff to an `ai_human` agent with `exposeAsTool`; a `dual_ai` one is a subagent, see
//! [`crate::subagent`]), and prompt tools (a prompt with `exposeAsTool`, see
//! [`crate::prompt_tool`]), and the scheduled-effect tools ([`crate::effect_tools`]).

use serde_json::{Value, json};
use weft_provider::{Tool, ToolContext};
use weft_tools::Workspace;

use crate::definition::{AgentDefinition, AgentType, PromptDefinition, ToolDefinition};
use crate::error::SessionError;
use crate::project::{Project, ToolKind};

/// The result key a handoff tool returns; the session reads it to switch agents.
pub const HANDOFF_KEY: &str = "handoff";

/// A project tool: its call returns its arguments (it is a signal; the arguments are the
/// payload). No side effects, idempotent.
pub fn project_tool(definition: &ToolDefinition) -> Tool {
    let parameters = definition
        .parameters
        .clone()
        .unwrap_or_else(|| json!({"type": "object"}));
    Tool::new(
        definition.name.clone(),
        definition.description.clone(),
        parameters,
        |args: Value, _ctx: ToolContext| async move { Ok(args) },
    )
    .with_side_effects(false)
    .with_idempotent(true)
}

/// The handoff tool of an `ai_human` agent with `exposeAsTool` (agents §6): calling it
/// transfers control to that agent on the same thread; the session does the transfer.
pub fn handoff_tool(target: &AgentDefinition) -> Tool {
    let name = target.name.clone();
    let description = target
        .tool_description
        .clone()
        .or_else(|| target.description.clone())
        .unwrap_or_else(|| format!("Hand the conversation over to {name}."));
    Tool::new(
        name.clone(),
        description,
        json!({
            "type": "object",
            "properties": {"message": {"type": "string", "description": "What the next agent should know."}},
        }),
        move |args: Value, _ctx: ToolContext| {
            let name = name.clone();
            async move {
                Ok(json!({HANDOFF_KEY: name, "message": args.get("message").cloned().unwrap_or(Value::Null)}))
            }
        },
    )
    .with_side_effects(false)
    .with_idempotent(true)
}

/// Builds the tools of `prompt` run by `agent`, in its order, except its MCP servers'
/// (`mcp:NAME`: the session lists those, see `Project::mcp_hub`) and its disabled optional
/// subagent branches (agents §7.5: unavailable, so a call of one is an unknown tool); its
/// subagents' tools start children of `parent`. (A durable run adds the runtime's pipeline layers to the agent: recorded
/// results are replayed, never re-run.)
///
/// # Errors
/// [`SessionError::Workspace`] when a built-in tool's workspace cannot be opened.
pub(crate) fn prompt_tools(
    project: &Project,
    agent: &AgentDefinition,
    prompt: &PromptDefinition,
    workspace: &Workspace,
    parent: &crate::subagent::Parent,
) -> Result<Vec<Tool>, SessionError> {
    let mut tools = Vec::with_capacity(prompt.tools.len());
    let mut resumable = Vec::new();
    let mut effects = Vec::new();
    for entry in &prompt.tools {
        let name = entry.name();
        if let Some(config) = entry.subagent()
            && !config.enabled(|variable| {
                crate::variables::resolve(
                    project,
                    &parent.options.variables,
                    agent,
                    Some(prompt),
                    None,
                    variable,
                )
            })
        {
            continue;
        }
        if let (Some(config), Some(ToolKind::Agent(target))) =
            (entry.subagent(), project.tool_kind(name))
            && let Some(settings) = config.resumable_config()
        {
            // A resumable subagent is reached through the lifecycle tools.
            resumable.push(crate::lifecycle::Offered {
                agent: target.clone(),
                config: config.clone(),
                resumable: settings.clone(),
            });
            continue;
        }
        let tool = match project.tool_kind(name) {
            Some(ToolKind::Project(definition)) => project_tool(definition),
            Some(ToolKind::Agent(agent)) if agent.agent_type == AgentType::DualAi => {
                crate::subagent::subagent_tool(agent, entry.subagent(), parent.clone())
            }
            Some(ToolKind::Agent(agent)) => handoff_tool(agent),
            Some(ToolKind::Prompt(target)) => {
                crate::prompt_tool::prompt_tool(target, entry.subprompt(), parent.clone())
            }
            Some(ToolKind::Builtin) => weft_tools::builtin_tool(workspace, name)
                .ok_or_else(|| SessionError::Workspace(format!("no built-in tool {name:?}")))?,
            // An MCP server's tools are listed by the session, step by step (they change).
            Some(ToolKind::Mcp(_)) => continue,
            // Built once the tools an effect may call are known (below).
            Some(ToolKind::Effect) => {
                effects.push(name);
                continue;
            }
            None => return Err(SessionError::Agent(format!("unknown tool {name:?}"))),
        };
        tools.push(tool);
    }
    if !resumable.is_empty() {
        tools.extend(crate::lifecycle::lifecycle_tools(resumable, parent.clone()));
    }
    if !effects.is_empty() {
        // An effect calls one of the prompt's tools (the effect tools included: an effect
        // may schedule the next, a recurring reminder).
        let callable: std::collections::BTreeSet<String> = tools
            .iter()
            .map(|t| t.name.clone())
            .chain(effects.iter().map(|n| (*n).to_owned()))
            .collect();
        tools.extend(effects.iter().filter_map(|name| {
            crate::effect_tools::effect_tool(name, callable.clone(), parent.options.durable.clone())
        }));
    }
    if let Some(escalation) = &parent.options.escalation {
        // An explicit subagent escalates to its parent with these (agents §7.10).
        tools.extend(escalation.tools());
    }
    Ok(tools)
}
