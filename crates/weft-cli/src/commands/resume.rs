//! `weft resume RUN [--rerun-uncertain]`: continues an interrupted run from its latest
//! checkpoint to its end, re-using every recorded tool result. Exit codes are those of the
//! command that started the run: 0 completed, 1 failed, 2 usage/storage error, 3 stopped on
//! an uncertain call (re-run it with `--rerun-uncertain`).

use std::process::ExitCode;

use clap::Args;
use serde_json::json;
use weft_store::run::{ResumeOptions, RunOutcome, Runner, ToolRegistry};

use super::runs::{StoreArgs, open_store, runtime};

/// `weft resume` flags.
#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Re-run tool calls that were in flight when the run stopped (you approve that their
    /// side effects may happen twice).
    #[arg(long)]
    rerun_uncertain: bool,
    /// Resume even if the recorded owner process still looks alive.
    #[arg(long)]
    force: bool,
    /// The run id.
    run: String,
}

/// The tools a run needs: a run started by `weft run` records its project and agent (the
/// `standard` key of its spec), whose prompts' tools are rebuilt the same way; other runs
/// use the registry's built-in tools.
async fn registry_for(store: &weft_store::Store, run_id: &str) -> anyhow::Result<ToolRegistry> {
    use weft_store::Runs as _;
    let record = store.run(run_id).await?;
    let standard = record
        .as_ref()
        .and_then(|r| r.spec.get("standard"))
        .cloned();
    let Some(standard) = standard else {
        return Ok(ToolRegistry::with_builtins());
    };
    let dir = standard["project"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("run {run_id} records a project without a folder"))?;
    let name = standard["agent"].as_str().unwrap_or_default();
    let project = weft_standard::Project::load(dir)
        .map_err(|e| anyhow::anyhow!("cannot load the project of run {run_id} from {dir}: {e}"))?;
    let agent = project
        .agent(name)
        .ok_or_else(|| anyhow::anyhow!("the project in {dir} has no agent {name:?} any more"))?;
    Ok(super::run::registry(&project, agent))
}

/// Runs `weft resume`.
pub(crate) fn run(args: ResumeArgs) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async move {
        let store = open_store(&args.store).await?;
        let registry = registry_for(&store, &args.run).await?;
        let runner = Runner::new(store, registry).with_providers(super::run::providers());
        let outcome = runner
            .resume(
                &args.run,
                ResumeOptions {
                    rerun_uncertain: args.rerun_uncertain,
                    force: args.force,
                },
            )
            .await?;
        if args.store.json {
            let v = match &outcome {
                RunOutcome::Completed { run_id, output } => json!({"run_id": run_id, "status": "completed", "output": output}),
                RunOutcome::Failed { run_id, error } => json!({"run_id": run_id, "status": "failed", "error": error}),
                RunOutcome::NeedsApproval { run_id, calls } => json!({"run_id": run_id, "status": "interrupted",
                    "uncertain_calls": calls.iter().map(|c| json!({"tool_call_id": c.tool_call_id, "tool": c.tool_name})).collect::<Vec<_>>()}),
            };
            println!("{v}");
        } else {
            match &outcome {
                RunOutcome::Completed { output, .. } => println!("{output}"),
                RunOutcome::Failed { run_id, error } => eprintln!("weft: run {run_id} failed: {error}"),
                RunOutcome::NeedsApproval { run_id, calls } => {
                    for c in calls {
                        eprintln!(
                            "weft: run {run_id}: tool call {} ({}) was in flight when the run stopped and may have had its effect; re-run it with `weft resume {run_id} --rerun-uncertain`",
                            c.tool_call_id, c.tool_name
                        );
                    }
                }
            }
        }
        Ok(ExitCode::from(outcome.exit_code()))
    })
}
