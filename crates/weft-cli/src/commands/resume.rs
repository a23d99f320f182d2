//! `weft resume RUN [--rerun-uncertain]`: continues an interrupted run from its latest
//! checkpoint to its end, re-using every recorded model response and tool result. A run
//! started by `weft run` goes on as the Standard Agents session it was (its stop rules,
//! handoffs, both `dual_ai` sides, from the project snapshot it recorded), with the same live
//! view or `--json` lines. Exit codes are those of the command that started the run: 0
//! completed, 1 failed, 2 usage/storage error, 3 stopped on an uncertain call (re-run it
//! with `--rerun-uncertain`, or decide it with `weft approve` / `weft deny`), 4 suspended
//! awaiting a decision, 5 another live process drives the run, 130 interrupted again.

use std::process::ExitCode;

use clap::Args;
use weft_runtime::ResumeOptions;
use weft_runtime::spec::{Program, RunSpec};
use weft_store::Verdict;

use super::runs::{StoreArgs, open_store, runtime};

/// `weft resume` flags.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  weft resume RUN                    go on where RUN stopped, live\n  weft resume RUN --json             the same, as JSON\n  weft resume RUN --rerun-uncertain  approve re-running a call that was in flight at the crash\n\n\
A run started by `weft run` goes on as the same session: its stop rules, handoffs and both dual_ai sides, from the latest checkpoints \
and the project definitions it recorded (a project changed since is reported). Recorded model responses and tool results are re-used: \
the model is not asked again for a recorded step, and a recorded call never runs again. A run whose process was killed on this machine \
can be resumed at once; one driven by another live process is refused (exit 5).\n\n\
Calls waiting for a decision are decided with `weft approve RUN ID` / `weft deny RUN ID --reason \"…\"` before the resume, \
or here with --approve ID / --deny ID (repeatable; --reason goes with the denials). --rerun-uncertain approves every uncertain call.\n\n\
Exit codes: 0 completed, 1 failed, 2 usage or storage error (or no such pending decision), 3 stopped on an uncertain call \
(see --rerun-uncertain), 4 suspended awaiting a decision, 5 another live process drives the run, 130 interrupted."
)]
pub(crate) struct ResumeArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Re-run tool calls that were in flight when the run stopped (you approve that their
    /// side effects may happen twice).
    #[arg(long)]
    rerun_uncertain: bool,
    /// Approve the pending decision ID (or call id) before resuming.
    #[arg(long, value_name = "ID")]
    approve: Vec<String>,
    /// Deny the pending decision ID (or call id) before resuming; the model gets --reason.
    #[arg(long, value_name = "ID")]
    deny: Vec<String>,
    /// The reason given to the model for the calls denied with --deny.
    #[arg(long, default_value = "")]
    reason: String,
    /// Never ask on the terminal: a call that needs approval suspends the run (exit 4).
    #[arg(long)]
    no_input: bool,
    /// Model prices for the resume's new model calls, over Weft's table, the project's
    /// `pricing` key and the run's own `--pricing` (the format of `weft run --pricing`).
    /// Calls recorded before keep the price recorded with them.
    #[arg(long, value_name = "FILE")]
    pricing: Option<std::path::PathBuf>,
    /// Accepted for compatibility; ownership is decided by the run's lock and lease.
    #[arg(long, hide = true)]
    force: bool,
    /// The run id (or a unique prefix of it).
    run: String,
}

/// Runs `weft resume`.
pub(crate) fn run(args: ResumeArgs) -> anyhow::Result<ExitCode> {
    let tokio = runtime()?;
    let code = tokio.block_on(resume(args));
    // An approval question left unanswered (the run was stopped) must not keep the process.
    tokio.shutdown_background();
    code
}

async fn resume(args: ResumeArgs) -> anyhow::Result<ExitCode> {
    {
        let store = open_store(&args.store).await?;
        let record = super::runs::resolve_run(&store, &args.run).await?;
        let args = ResumeArgs {
            run: record.run_id.clone(),
            ..args
        };
        let spec = RunSpec::from_stored(&record.spec)
            .map_err(|e| anyhow::anyhow!("the spec of run {} cannot be read: {e}", args.run))?;
        let mut project = None;
        let agent = match &spec.program {
            Program::Session(session) => {
                if let Ok(loaded) = weft_standard::Project::load(session.project_folder()) {
                    let mode = session.sandbox.as_deref().and_then(|m| m.parse().ok());
                    super::confine::announce(&loaded, mode);
                    project = Some(loaded);
                }
                let changed = weft_standard::changed_since_start(session);
                if !changed.is_empty() {
                    eprintln!(
                        "weft: warning: the project changed since run {} started ({}); the run goes on with the definitions it recorded",
                        args.run,
                        changed.join(", ")
                    );
                }
                session.agent.clone()
            }
            Program::Agent(agent) => agent.role.clone(),
        };
        super::telemetry::start(
            &project
                .as_ref()
                .and_then(|p| p.telemetry().ok())
                .unwrap_or_default(),
        );
        // The project's prices, then the run's recorded --pricing, then this --pricing.
        let prices = super::pricing::project_prices(project.as_ref())
            .and_then(|p| Ok((p, super::pricing::pricing_file(args.pricing.as_deref())?)));
        let (prices, pricing) = match prices {
            Ok(prices) => prices,
            Err(message) => {
                eprintln!("weft: {message}");
                return Ok(ExitCode::from(2));
            }
        };
        let mut runtime = super::run::runtime(store, prices);
        if let Some(table) = pricing {
            runtime = runtime.with_price_override(table);
        }
        let runtime = super::run::interactive(runtime, args.no_input);
        let verdicts = args.approve.iter().map(|id| (id, Verdict::Approve)).chain(
            args.deny
                .iter()
                .map(|id| (id, Verdict::Deny(args.reason.clone()))),
        );
        for (id, verdict) in verdicts {
            if let Err(error) = runtime.decide(&args.run, id, verdict).await {
                eprintln!("weft: {error}");
                return Ok(ExitCode::from(error.exit_code()));
            }
        }
        let options = ResumeOptions {
            rerun_uncertain: args.rerun_uncertain,
        };
        match runtime.resume(&args.run, options, true).await {
            Ok(handle) => {
                super::run::present(&runtime, handle, &agent, args.store.json, true).await
            }
            Err(error) => {
                eprintln!("weft: {error}");
                Ok(ExitCode::from(error.exit_code()))
            }
        }
    }
}
