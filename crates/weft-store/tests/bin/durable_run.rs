//! `weft-store-durable-run`: starts or resumes a durable run (the crash tests' subject).
//!
//! ```text
//! weft-store-durable-run start  --store URL --script PATH --out FILE --log FILE
//!                               [--delay-ms N] [--durability sync|async] [--idempotent]
//! weft-store-durable-run resume --store URL RUN [--rerun-uncertain]
//! ```
//! Exit codes: those of `weft resume` (0 completed, 1 failed, 2 usage, 3 needs approval).

use std::process::ExitCode;

use serde_json::json;
use weft_store::run::{ResumeOptions, RunOutcome, RunSpec, Runner, ToolRegistry, ToolSpec};
use weft_store::{Durability, Store};

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn report(outcome: &RunOutcome) -> ExitCode {
    match outcome {
        RunOutcome::Completed { run_id, output } => println!("completed {run_id}: {output}"),
        RunOutcome::Failed { run_id, error } => eprintln!("failed {run_id}: {error}"),
        RunOutcome::NeedsApproval { run_id, calls } => {
            for call in calls {
                eprintln!(
                    "run {run_id}: tool call {} ({}) was in flight when the run stopped; re-run it with --rerun-uncertain",
                    call.tool_call_id, call.tool_name
                );
            }
        }
    }
    ExitCode::from(outcome.exit_code())
}

async fn main_async(args: Vec<String>) -> Result<ExitCode, String> {
    let store_url = flag(&args, "--store").ok_or("--store is required")?;
    let store = Store::open(&store_url).await.map_err(|e| e.to_string())?;
    let runner = Runner::new(store, ToolRegistry::with_builtins());
    match args.first().map(String::as_str) {
        Some("start") => {
            let spec = RunSpec {
                model: format!(
                    "scripted-turns:{}",
                    flag(&args, "--script").ok_or("--script")?
                ),
                system: Some("Append every line you are asked to.".into()),
                tools: vec![ToolSpec {
                    name: "append_line".into(),
                    config: json!({
                        "out": flag(&args, "--out").ok_or("--out")?,
                        "log": flag(&args, "--log").ok_or("--log")?,
                        "delay_ms": flag(&args, "--delay-ms").and_then(|d| d.parse::<u64>().ok()).unwrap_or(0),
                        "idempotent": args.iter().any(|a| a == "--idempotent"),
                    }),
                }],
                input: "Write the lines.".into(),
                durability: if flag(&args, "--durability").as_deref() == Some("async") {
                    Durability::Async
                } else {
                    Durability::Sync
                },
                max_steps: None,
                pricing: None,
                role: "coder".into(),
            };
            let run_id = runner.create(&spec).await.map_err(|e| e.to_string())?;
            println!("{run_id}");
            if args.iter().any(|a| a == "--create-only") {
                return Ok(ExitCode::SUCCESS);
            }
            let outcome = runner
                .run_created(&run_id)
                .await
                .map_err(|e| e.to_string())?;
            Ok(report(&outcome))
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
                force: false,
            };
            let outcome = runner
                .resume(&run, options)
                .await
                .map_err(|e| e.to_string())?;
            Ok(report(&outcome))
        }
        _ => Err("usage: weft-store-durable-run start|resume --store URL …".into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("weft-store-durable-run: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(main_async(args)) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("weft-store-durable-run: {message}");
            ExitCode::from(2)
        }
    }
}
