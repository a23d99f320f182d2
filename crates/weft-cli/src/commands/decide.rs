//! `weft approve RUN ID` and `weft deny RUN ID --reason "…"`: decide a tool call a run is
//! waiting on (a call the project's `requiresApproval` lists, or an uncertain call after a
//! crash). ID is the decision's id (`d-…`, printed when the run suspended and by
//! `weft runs show`), or the call's id when one pending decision has it. The decision takes
//! effect when the run resumes (`weft resume RUN`). Exit codes: 0 decided, 2 no such pending
//! decision (or run).

use std::process::ExitCode;

use clap::Args;
use serde_json::json;
use weft_store::Verdict;

use super::runs::{StoreArgs, open_store, runtime};

/// `weft approve` flags.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  weft approve RUN d-1a2b3c4d        let the call run, then: weft resume RUN\n  weft approve RUN call_7 --json     by the call's id, as JSON\n\n\
Exit codes: 0 approved, 2 no such pending decision (the message lists the pending ones)."
)]
pub(crate) struct ApproveArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The run id.
    run: String,
    /// The decision's id (`d-…`), or the id of the call it is about.
    id: String,
}

/// `weft deny` flags.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  weft deny RUN d-1a2b3c4d --reason \"not on the production database\"\n\n\
The model receives the reason as the call's error result and can try something else. \
Exit codes: 0 denied, 2 no such pending decision."
)]
pub(crate) struct DenyArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Why: the model receives it as the call's error result.
    #[arg(long, default_value = "")]
    reason: String,
    /// The run id.
    run: String,
    /// The decision's id (`d-…`), or the id of the call it is about.
    id: String,
}

/// Runs `weft approve`.
pub(crate) fn approve(args: ApproveArgs) -> anyhow::Result<ExitCode> {
    decide(&args.store, &args.run, &args.id, Verdict::Approve)
}

/// Runs `weft deny`.
pub(crate) fn deny(args: DenyArgs) -> anyhow::Result<ExitCode> {
    decide(&args.store, &args.run, &args.id, Verdict::Deny(args.reason))
}

fn decide(store: &StoreArgs, run: &str, id: &str, verdict: Verdict) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async move {
        let runtime = super::run::runtime(open_store(store).await?, weft_provider::pricing::Prices::builtin());
        match runtime.decide(run, id, verdict).await {
            Ok(decision) => {
                let pending = runtime
                    .decisions(run)
                    .await?
                    .into_iter()
                    .filter(|d| d.status == weft_store::DecisionStatus::Pending)
                    .count();
                if store.json {
                    println!(
                        "{}",
                        json!({"type": "decision", "runId": run, "decision": decision, "pending": pending,
                               "next": format!("weft resume {run}")})
                    );
                } else {
                    println!(
                        "{} {} ({} {}) of run {run}",
                        decision.status.as_str(),
                        decision.id,
                        decision.tool_name,
                        super::run::clip(&decision.arguments.to_string(), 100)
                    );
                    if pending > 0 {
                        println!("{pending} more pending: see weft runs show {run}");
                    }
                    println!("continue with: weft resume {run}");
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => {
                eprintln!("weft: {error}");
                Ok(ExitCode::from(error.exit_code()))
            }
        }
    })
}
