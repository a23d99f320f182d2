//! `weft-runtime-durable-run`: starts or resumes a durable run (the crash tests' subject).
//!
//! ```text
//! weft-runtime-durable-run start  --store URL --script PATH --out FILE --log FILE
//!                               [--delay-ms N] [--durability sync|async] [--idempotent]
//!                               [--child-script PATH]
//! weft-runtime-durable-run resume --store URL RUN [--rerun-uncertain]
//! ```
//! Exit codes: those of `weft resume` (0 completed, 1 failed, 2 usage, 3 needs approval).
//!
//! With `--child-script`, the agent's one tool is `delegate`: a UAP-1.0 `SubagentTool` whose
//! agent (its model scripted by that file) has `append_line` — the calls run in a child run.

use std::process::ExitCode;

use serde_json::json;
use weft_runtime::spec::{AgentProgram, Program, RunSpec, ToolSpec};
use weft_runtime::{ResumeOptions, RunEnd, RunHandle, Runtime, ToolRegistry};
use weft_store::{Durability, Store};

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

async fn report(handle: Result<RunHandle, weft_runtime::RunError>) -> Result<ExitCode, String> {
    let handle = match handle {
        Ok(handle) => handle,
        Err(error) => {
            eprintln!("{error}");
            return Ok(ExitCode::from(error.exit_code()));
        }
    };
    let outcome = handle.outcome().await.map_err(|e| e.to_string())?;
    let run_id = &outcome.run_id;
    match &outcome.end {
        RunEnd::Completed { output } => println!("completed {run_id}: {output}"),
        RunEnd::Failed { error } => eprintln!("failed {run_id}: {error}"),
        RunEnd::Interrupted => eprintln!("interrupted {run_id}"),
        RunEnd::NeedsApproval { calls, decisions } => {
            for (call, decision) in calls.iter().zip(decisions) {
                eprintln!(
                    "run {run_id}: tool call {} ({}) was in flight when the run stopped; re-run it with --rerun-uncertain (decision {})",
                    call.tool_call_id, call.tool_name, decision.id
                );
            }
        }
        RunEnd::AwaitingDecision { decisions } => {
            for decision in decisions {
                eprintln!(
                    "run {run_id}: decision {} awaits approval of {} {}",
                    decision.id, decision.tool_name, decision.arguments
                );
            }
        }
    }
    Ok(ExitCode::from(outcome.exit_code()))
}

async fn main_async(args: Vec<String>) -> Result<ExitCode, String> {
    let store_url = flag(&args, "--store").ok_or("--store is required")?;
    let store = Store::open(&store_url).await.map_err(|e| e.to_string())?;
    let mut registry = ToolRegistry::with_builtins();
    registry.register("delegate", delegate_tool);
    let runtime = Runtime::new(store).with_tools(registry);
    match args.first().map(String::as_str) {
        Some("start") => {
            let program = AgentProgram {
                model: format!(
                    "scripted-turns:{}",
                    flag(&args, "--script").ok_or("--script")?
                ),
                system: Some("Append every line you are asked to.".into()),
                tools: vec![ToolSpec {
                    name: if flag(&args, "--child-script").is_some() {
                        "delegate".into()
                    } else {
                        "append_line".into()
                    },
                    config: json!({
                        "out": flag(&args, "--out").ok_or("--out")?,
                        "log": flag(&args, "--log").ok_or("--log")?,
                        "delay_ms": flag(&args, "--delay-ms").and_then(|d| d.parse::<u64>().ok()).unwrap_or(0),
                        "idempotent": args.iter().any(|a| a == "--idempotent"),
                        "script": flag(&args, "--child-script"),
                    }),
                }],
                max_steps: None,
                pricing: None,
                role: "coder".into(),
                policy: weft_runtime::approval::ToolPolicy::requiring(flag(
                    &args,
                    "--requires-approval",
                )),
            };
            let mut spec = RunSpec::new("Write the lines.", Program::Agent(program));
            if flag(&args, "--durability").as_deref() == Some("async") {
                spec.durability = Durability::Async;
            }
            let run_id = runtime.create(&spec).await.map_err(|e| e.to_string())?;
            println!("{run_id}");
            if args.iter().any(|a| a == "--create-only") {
                return Ok(ExitCode::SUCCESS);
            }
            report(
                runtime
                    .resume(&run_id, ResumeOptions::default(), false)
                    .await,
            )
            .await
        }
        Some("resume") => {
            let run = args
                .iter()
                .skip(1)
                .scan(false, |skip, a| {
                    let take = !*skip && !a.starts_with("--");
                    *skip = a == "--store";
                    Some(take.then(|| a.clone()))
                })
                .flatten()
                .next()
                .ok_or("resume needs a RUN id")?;
            let options = ResumeOptions {
                rerun_uncertain: args.iter().any(|a| a == "--rerun-uncertain"),
            };
            report(runtime.resume(&run, options, false).await).await
        }
        _ => Err("usage: weft-runtime-durable-run start|resume --store URL …".into()),
    }
}

/// `delegate`: a sub-agent whose agent (scripted by `config.script`) has `append_line`
/// (configured by the rest of `config`).
fn delegate_tool(config: &serde_json::Value) -> Result<weft_provider::Tool, String> {
    let script = config["script"]
        .as_str()
        .ok_or("config.script (the sub-agent's script) is required")?;
    let model = weft_runtime::default_providers()
        .resolve(&format!("scripted-turns:{script}"))
        .map_err(|e| e.to_string())?;
    let writer = weft_store::testing::append_line_tool(config)?;
    let child = weft_agent::agent(
        weft_agent::AgentOptions::new(model)
            .system("Append every line you are asked to.")
            .tool(writer),
    )
    .map_err(|e| e.to_string())?;
    Ok(weft_agent::SubagentTool::new(
        "delegate",
        "Hands the lines to a helper agent.",
        json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}),
        child,
    )
    .build())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("weft-runtime-durable-run: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(main_async(args)) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("weft-runtime-durable-run: {message}");
            ExitCode::from(2)
        }
    }
}
