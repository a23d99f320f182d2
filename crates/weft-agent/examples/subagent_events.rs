//! A parent agent streaming a sub-agent's events, shown as a nested tree:
//! `cargo run -p weft-agent --example subagent_events`.

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use weft_agent::{AgentOptions, AgentState, AgentStreamEvent, SubagentTool, UapEventType, agent};
use weft_provider::adapters::scripted::{self, Script, ScriptedResponse};
use weft_provider::{StreamEventType, Tool};

fn grep_tool() -> Tool {
    Tool::new(
        "grep",
        "Search files",
        json!({"type": "object", "properties": {"pattern": {"type": "string"}}}),
        |args: Value, _ctx| async move { Ok(json!(format!("src/lib.rs:12: {}", args["pattern"]))) },
    )
}

/// Prints one event, indenting sub-agent events by their depth.
fn show(event: &AgentStreamEvent, depth: usize) {
    let pad = "  ".repeat(depth);
    match event {
        AgentStreamEvent::Uap(uap) => match uap.event_type {
            UapEventType::SubagentEvent => {
                if let Ok(inner) =
                    serde_json::from_value::<AgentStreamEvent>(uap.data["innerEvent"].clone())
                {
                    show(&inner, depth + 1);
                }
            }
            UapEventType::SubagentStart => println!(
                "{pad}subagent_start {} ({}) for call {}: {}",
                uap.data["subagentType"],
                uap.data["subagentId"],
                uap.data["parentToolCallId"],
                uap.data["prompt"]
            ),
            UapEventType::SubagentEnd => println!(
                "{pad}subagent_end success={} result={} tools={}",
                uap.data["success"],
                uap.data["result"],
                uap.data["toolExecutions"].as_array().map_or(0, Vec::len)
            ),
            other => println!("{pad}{} step {}", other.as_str(), uap.step),
        },
        AgentStreamEvent::Upp(upp) => match upp.event_type {
            StreamEventType::TextDelta => println!(
                "{pad}  text {:?}",
                upp.delta.text.clone().unwrap_or_default()
            ),
            StreamEventType::ToolExecutionStart | StreamEventType::ToolExecutionEnd => {
                println!(
                    "{pad}  {} {}",
                    upp.event_type.as_str(),
                    upp.delta.tool_name.clone().unwrap_or_default()
                )
            }
            _ => {}
        },
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let explorer = agent(
        AgentOptions::new(scripted::model(Script {
            fresh_ids: false,
            responses: vec![
                ScriptedResponse::tool_call("g1", "grep", json!({"pattern": "fn main"})),
                ScriptedResponse::text("main is in src/lib.rs"),
            ],
        }))
        .tool(grep_tool()),
    )?;
    let explore = SubagentTool::new(
        "explore",
        "Explore the codebase",
        json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        explorer,
    )
    .subagent_type("explorer")
    .build();
    let parent = agent(
        AgentOptions::new(scripted::model(Script {
            fresh_ids: false,
            responses: vec![
                ScriptedResponse::tool_call(
                    "call_explore",
                    "explore",
                    json!({"query": "where is main?"}),
                ),
                ScriptedResponse::text("main lives in src/lib.rs"),
            ],
        }))
        .tool(explore),
    )?;

    let mut stream = parent.stream("Find main", &AgentState::initial());
    while let Some(event) = stream.next().await {
        show(&event, 0);
    }
    let result = stream.result().await?;
    println!("> {}", result.turn.text());
    for trace in result.state.subagent_traces() {
        println!(
            "trace {} {}: {} ms, {} tool executions",
            trace.subagent_type,
            trace.subagent_id,
            trace.end_time - trace.start_time,
            trace.tool_executions.as_ref().map_or(0, Vec::len)
        );
    }
    Ok(())
}
