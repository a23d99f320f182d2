//! `weft resume RUN [--rerun-uncertain]`: continues an interrupted run from its latest
//! checkpoint to its end, re-using every recorded tool result. A run started by `weft run`
//! goes on as the Standard Agents session it was (its stop rules, handoffs, both `dual_ai`
//! sides), with the same live view or `--json` lines. Exit codes are those of the command
//! that started the run: 0 completed, 1 failed, 2 usage/storage error, 3 stopped on an
//! uncertain call (re-run it with `--rerun-uncertain`), 130 interrupted again.

use std::process::ExitCode;

use clap::Args;
use serde_json::json;
use weft_store::Runs as _;
use weft_store::run::{Preparation, Prepared, ResumeOptions, RunOutcome, Runner, ToolRegistry};

use super::runs::{StoreArgs, runtime};

/// `weft resume` flags.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  weft resume RUN                    go on where RUN stopped, live\n  weft resume RUN --json             the same, as JSON\n  weft resume RUN --rerun-uncertain  approve re-running a call that was in flight at the crash\n\n\
A run started by `weft run` goes on as the same session: its stop rules, handoffs and both dual_ai sides, from the latest checkpoints. \
Recorded tool results are re-used, never re-run.\n\n\
Exit codes: 0 completed, 1 failed, 2 usage or storage error, 3 stopped on an uncertain call (see --rerun-uncertain), 130 interrupted."
)]
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

/// What `weft run` recorded about a project run (the `standard` key of its spec).
struct ProjectRun {
    project: weft_standard::Project,
    agent: String,
    model: Option<String>,
    /// `--workspace` of the run (default: the project folder).
    workspace: Option<std::path::PathBuf>,
    /// `--sandbox` of the run.
    sandbox: Option<weft_tools::Mode>,
}

/// The project run `run_id` was started as, when `weft run` started it.
fn project_run(record: &weft_store::RunRecord) -> anyhow::Result<Option<ProjectRun>> {
    let Some(standard) = record.spec.get("standard") else {
        return Ok(None);
    };
    let run_id = &record.run_id;
    let dir = standard["project"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("run {run_id} records a project without a folder"))?;
    let agent = standard["agent"].as_str().unwrap_or_default().to_owned();
    let project = weft_standard::Project::load(dir)
        .map_err(|e| anyhow::anyhow!("cannot load the project of run {run_id} from {dir}: {e}"))?;
    anyhow::ensure!(
        project.agent(&agent).is_some(),
        "the project in {dir} has no agent {agent:?} any more"
    );
    Ok(Some(ProjectRun {
        project,
        agent,
        model: standard["model"].as_str().map(str::to_owned),
        workspace: standard["workspace"].as_str().map(Into::into),
        sandbox: serde_json::from_value(standard["sandbox"].clone()).unwrap_or(None),
    }))
}

/// Runs `weft resume`.
pub(crate) fn run(args: ResumeArgs) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async move {
        let store_url = super::location::store_url(args.store.store.as_deref(), None)?;
        let store = super::location::open_existing(&store_url).await?;
        let record = store
            .run(&args.run)
            .await?
            .ok_or_else(|| anyhow::anyhow!("run {:?} not found", args.run))?;
        let options = ResumeOptions {
            rerun_uncertain: args.rerun_uncertain,
            force: args.force,
        };
        let providers = super::run::providers();
        let outcome = match project_run(&record)? {
            // A project run goes on as a Standard Agents session (stop rules, handoffs,
            // dual_ai sides) from its latest checkpoints; its tools come from the project.
            Some(p) => {
                let runner =
                    Runner::new(store.clone(), ToolRegistry::new()).with_providers(providers);
                match runner.prepare(&args.run, options, true, &[]).await? {
                    Preparation::Ready(prepared) => {
                        return resume_project(&p, &store_url, store, *prepared, args.store.json)
                            .await;
                    }
                    Preparation::Finished(outcome) => outcome,
                }
            }
            None => {
                Runner::new(store, ToolRegistry::with_builtins())
                    .with_providers(providers)
                    .resume(&args.run, options)
                    .await?
            }
        };
        report(&outcome, args.store.json);
        Ok(ExitCode::from(outcome.exit_code()))
    })
}

/// Goes on with a project run from its latest checkpoints (side B's too), live.
async fn resume_project(
    p: &ProjectRun,
    store_url: &weft_store::StoreUrl,
    store: weft_store::Store,
    prepared: Prepared,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let Prepared {
        record,
        spec,
        store: run_store,
        context,
        checkpoint,
    } = prepared;
    let agent = p
        .project
        .agent(&p.agent)
        .ok_or_else(|| anyhow::anyhow!("the project has no agent {:?}", p.agent))?;
    let side_b = run_store
        .latest_checkpoint(&format!("{}.sideB", record.thread_id))
        .await?;
    // Checkpoints record the run's usage up to them: the later one of the two sides has
    // the larger total.
    let total = |u: &Option<weft_provider::TokenUsage>| {
        u.as_ref().map_or(0, |u| u.input_tokens + u.output_tokens)
    };
    let base_usage = [Some(&checkpoint), side_b.as_ref()]
        .into_iter()
        .flatten()
        .map(|c| c.checkpoint.usage.clone())
        .max_by_key(total)
        .flatten()
        .unwrap_or_default();
    let state_b = side_b.map(|c| c.checkpoint.state);
    let workspace = std::fs::canonicalize(p.workspace.as_deref().unwrap_or(p.project.dir()))?;
    let confinement = super::confine::for_run(&p.project, store_url, p.sandbox);
    super::run::execute(
        &p.project,
        agent,
        super::run::Execution {
            store,
            record,
            run_store,
            context,
            durability: spec.durability,
            model_override: p.model.clone(),
            json,
            workspace,
            confinement,
            state_a: checkpoint.checkpoint.state,
            state_b,
            base_usage,
            resumed: true,
        },
    )
    .await
}

/// Prints how a resume ended (for runs that are not project runs, and for resumes that
/// stopped before running anything).
fn report(outcome: &RunOutcome, json: bool) {
    if json {
        let v = match outcome {
            RunOutcome::Completed { run_id, output } => {
                json!({"run_id": run_id, "status": "completed", "output": output})
            }
            RunOutcome::Failed { run_id, error } => {
                json!({"run_id": run_id, "status": "failed", "error": error})
            }
            RunOutcome::NeedsApproval { run_id, calls } => {
                json!({"run_id": run_id, "status": "interrupted",
                "uncertain_calls": calls.iter().map(|c| json!({"tool_call_id": c.tool_call_id, "tool": c.tool_name})).collect::<Vec<_>>()})
            }
        };
        println!("{v}");
    } else {
        match outcome {
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
}
