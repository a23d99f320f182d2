//! `weft resume RUN [--rerun-uncertain]`: continues an interrupted run from its latest
//! checkpoint to its end, re-using every recorded model response and tool result. A run
//! started by `weft run` goes on as the Standard Agents session it was (its stop rules,
//! handoffs, both `dual_ai` sides, from the project snapshot it recorded), with the same live
//! view or `--json` lines. Exit codes are those of the command that started the run: 0
//! completed, 1 failed, 2 usage/storage error, 3 stopped on an uncertain call (re-run it
//! with `--rerun-uncertain`), 5 another live process drives the run, 130 interrupted again.

use std::process::ExitCode;

use clap::Args;
use weft_runtime::ResumeOptions;
use weft_runtime::spec::{Program, RunSpec};
use weft_store::Runs as _;

use super::runs::{StoreArgs, open_store, runtime};

/// `weft resume` flags.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  weft resume RUN                    go on where RUN stopped, live\n  weft resume RUN --json             the same, as JSON\n  weft resume RUN --rerun-uncertain  approve re-running a call that was in flight at the crash\n\n\
A run started by `weft run` goes on as the same session: its stop rules, handoffs and both dual_ai sides, from the latest checkpoints \
and the project definitions it recorded (a project changed since is reported). Recorded model responses and tool results are re-used: \
the model is not asked again for a recorded step, and a recorded call never runs again. A run whose process was killed on this machine \
can be resumed at once; one driven by another live process is refused (exit 5).\n\n\
Exit codes: 0 completed, 1 failed, 2 usage or storage error, 3 stopped on an uncertain call (see --rerun-uncertain), \
5 another live process drives the run, 130 interrupted."
)]
pub(crate) struct ResumeArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Re-run tool calls that were in flight when the run stopped (you approve that their
    /// side effects may happen twice).
    #[arg(long)]
    rerun_uncertain: bool,
    /// Model prices for the resume's new model calls, over Weft's table, the project's
    /// `pricing` key and the run's own `--pricing` (the format of `weft run --pricing`).
    /// Calls recorded before keep the price recorded with them.
    #[arg(long, value_name = "FILE")]
    pricing: Option<std::path::PathBuf>,
    /// Accepted for compatibility; ownership is decided by the run's lock and lease.
    #[arg(long, hide = true)]
    force: bool,
    /// The run id.
    run: String,
}

/// Runs `weft resume`.
pub(crate) fn run(args: ResumeArgs) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async move {
        let store = open_store(&args.store).await?;
        let record = store
            .run(&args.run)
            .await?
            .ok_or_else(|| anyhow::anyhow!("run {:?} not found", args.run))?;
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
        // The project's prices, then the run's recorded --pricing, then this --pricing.
        let prices = super::pricing::project_prices(project.as_ref()).and_then(|p| {
            Ok((p, super::pricing::pricing_file(args.pricing.as_deref())?))
        });
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
    })
}
