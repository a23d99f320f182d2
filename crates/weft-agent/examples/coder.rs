//! The UAP-1.0 Appendix B coder agent, run against the scripted provider:
//! `cargo run -p weft-agent --example coder`.
//!
//! A ReAct coder with an explorer sub-agent (explicit tool and schema), logging middleware,
//! lifecycle hooks with a developer-chosen stop condition, real-time tool hooks, and a state
//! saved to JSON and restored to continue.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use weft_agent::execution::{ReactOptions, react};
use weft_agent::middleware::{LogLevel, LoggingOptions, logging};
use weft_agent::{AgentOptions, AgentState, AgentStrategy, SubagentTool, agent};
use weft_provider::adapters::scripted::{self, Script, ScriptedResponse};
use weft_provider::{Tool, ToolError, ToolUseStrategy};

type Files = Arc<Mutex<BTreeMap<String, String>>>;

fn read_tool(files: &Files) -> Tool {
    let files = files.clone();
    Tool::new(
        "read",
        "Read a file",
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        move |args: Value, _ctx| {
            let files = files.clone();
            async move {
                let path = args["path"]
                    .as_str()
                    .ok_or(ToolError::new("path must be a string"))?;
                let files = files.lock().map_err(|_| ToolError::new("lock poisoned"))?;
                files
                    .get(path)
                    .cloned()
                    .map(Value::String)
                    .ok_or_else(|| ToolError::new(format!("no such file: {path}")))
            }
        },
    )
}

fn write_tool(files: &Files) -> Tool {
    let files = files.clone();
    Tool::new(
        "write",
        "Write a file",
        json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
               "required": ["path", "content"]}),
        move |args: Value, _ctx| {
            let files = files.clone();
            async move {
                let path = args["path"].as_str().ok_or(ToolError::new("path must be a string"))?;
                let content = args["content"].as_str().ok_or(ToolError::new("content must be a string"))?;
                files
                    .lock()
                    .map_err(|_| ToolError::new("lock poisoned"))?
                    .insert(path.to_owned(), content.to_owned());
                Ok(json!("written"))
            }
        },
    )
    .with_depends_on(["read"])
    .with_side_effects(true)
}

fn say(text: &str) -> ScriptedResponse {
    ScriptedResponse::text(text)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: Files = Arc::new(Mutex::new(BTreeMap::from([(
        "src/main.ts".to_owned(),
        "let x: number = \"one\";".to_owned(),
    )])));

    // The explorer sub-agent (its own model).
    let explorer = agent(
        AgentOptions::new(scripted::model(Script {
            fresh_ids: false,
            responses: vec![
                ScriptedResponse::tool_call("e1", "read", json!({"path": "src/main.ts"})),
                say("src/main.ts assigns a string to a number"),
            ],
        }))
        .tool(read_tool(&files))
        .system("You explore codebases and report findings."),
    )?;
    let explorer_tool = SubagentTool::new(
        "explore",
        "Explore codebase to find relevant files and code",
        json!({"type": "object", "properties": {"query": {"type": "string", "description": "What to find"}},
               "required": ["query"]}),
        explorer,
    )
    .subagent_type("explorer")
    .prompt_from("query")
    .build();

    // The coder: react, explicit limits only through the stop condition.
    let coder_script = Script {
        fresh_ids: false,
        responses: vec![
            say("I need to find the TypeScript error first."),
            ScriptedResponse::tool_call("c1", "explore", json!({"query": "TypeScript errors"})),
            say("The error is in src/main.ts; I will fix the type."),
            ScriptedResponse::tool_call(
                "c2",
                "write",
                json!({"path": "src/main.ts", "content": "let x: number = 1;"}),
            ),
            say("The fix is written; nothing else to do."),
            say("Fixed src/main.ts: x is now a number."),
            // Second task after restore.
            say("Tests should cover the fix."),
            ScriptedResponse::tool_call(
                "c3",
                "write",
                json!({"path": "src/main.test.ts", "content": "expect(x).toBe(1);"}),
            ),
            say("Test written."),
            say("Added src/main.test.ts."),
        ],
    };
    let coder = agent(
        AgentOptions::new(scripted::model(coder_script))
            .execution(react(ReactOptions::default()))
            .tools([read_tool(&files), write_tool(&files), explorer_tool])
            .system("You are an expert software engineer.")
            .middleware(logging(LoggingOptions {
                level: LogLevel::Info,
                ..LoggingOptions::default()
            }))
            .strategy(
                AgentStrategy::new()
                    .stop_condition(|state| {
                        state.metadata().get("taskComplete") == Some(&json!(true))
                            || state.step() > 50
                    })
                    .on_step_start(|step, _| println!("Step {step}"))
                    .on_complete(|result| {
                        println!("Done: {} tokens", result.turn.usage.total_tokens)
                    }),
            )
            .tool_strategy(
                ToolUseStrategy::unbounded()
                    .on_tool_call(|tool, _| println!("  tool {}", tool.name))
                    .on_after_call(|tool, _, _| {
                        println!("  ok {} completed", tool.name);
                        None
                    }),
            ),
    )?;

    let s0 = AgentState::initial()
        .with_metadata("startTime", json!(chrono::Utc::now().timestamp_millis()));
    let result = coder
        .generate("Find and fix all TypeScript errors", &s0)
        .await?;
    println!("> {}", result.turn.text());

    // Save state for later, restore, continue.
    let saved = result.state.to_json_string()?;
    let restored = AgentState::from_json_str(&saved)?;
    let next = coder.generate("Now add tests", &restored).await?;
    println!("> {}", next.turn.text());
    println!(
        "state: step {}, {} messages, {} reasoning traces, {} sub-agent traces",
        next.state.step(),
        next.state.message_count(),
        next.state.reasoning().count(),
        next.state.subagent_traces().count()
    );
    for (path, content) in files.lock().map_err(|_| "lock poisoned")?.iter() {
        println!("{path}: {content}");
    }
    Ok(())
}
