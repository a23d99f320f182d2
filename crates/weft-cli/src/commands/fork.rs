//! `weft fork RUN|THREAD [--at CHECKPOINT]`: a new thread that starts from a checkpoint of
//! another (its latest by default), linked to its origin; go on with
//! `weft run PROJECT --continue NEW_THREAD "…"`. Exit codes: 0 forked, 2 no such thread, run
//! or checkpoint.

use std::process::ExitCode;

use clap::Args;
use serde_json::json;
use weft_runtime::fork::{ForkPoint, fork};

use super::runs::{StoreArgs, open_store, runtime};

/// `weft fork` flags.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  weft fork RUN                 a new thread from RUN's latest checkpoint\n  weft fork RUN --at 3          from checkpoint 3 (see weft checkpoints list RUN)\n  weft run demo --continue NEW_THREAD \"try it another way\"\n\n\
Forks the thread's conversation (side A of a dual_ai session). Exit codes: 0 forked, 2 no such thread, run or checkpoint."
)]
pub(crate) struct ForkArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The checkpoint to start from: its ordinal (`weft checkpoints list`) or its id
    /// (default: the latest).
    #[arg(long, value_name = "CHECKPOINT")]
    at: Option<String>,
    /// A run (id or unique prefix: its thread) or a thread id.
    origin: String,
}

/// Runs `weft fork`.
pub(crate) fn run(args: ForkArgs) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async move {
        let store = open_store(&args.store).await?;
        let origin = match super::runs::find_run(&store, &args.origin).await? {
            Some(run) => run.run_id,
            None => args.origin.clone(),
        };
        let at = match args.at.as_deref() {
            None => ForkPoint::Latest,
            Some(at) => match at.parse::<u64>() {
                Ok(step) => ForkPoint::Ordinal(step),
                Err(_) => ForkPoint::Id(at.to_owned()),
            },
        };
        match fork(&store, &origin, &at).await {
            Ok(forked) => {
                if args.store.json {
                    println!("{}", json!({"type": "fork", "fork": forked}));
                } else {
                    println!(
                        "thread {} forked from {} at checkpoint {} ({} messages)",
                        forked.thread_id,
                        forked.origin_thread_id,
                        forked.checkpoint_step,
                        forked.messages
                    );
                    println!(
                        "continue with: weft run PROJECT --continue {} \"…\"",
                        forked.thread_id
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => {
                eprintln!("weft: {error}");
                Ok(ExitCode::from(2))
            }
        }
    })
}
