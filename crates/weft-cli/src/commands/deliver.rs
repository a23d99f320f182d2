//! `weft deliver [PROJECT_DIR] [INSTRUCTION]`: the convergence loop of weft-deliver — the
//! verifier ladder (build → type-check → test → lint from weft.toml) at the baseline, then
//! the project's agent run until every required rung passes, at most `--max-iterations`
//! times. Exit codes: 0 delivered, 1 not delivered (the cap was reached), 2 usage or
//! definition error (no ladder, no agent), 130 interrupted.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use serde_json::json;
use weft_deliver::{DeliverEvent, DeliverOptions, Stage, deliver};

/// `weft deliver` flags.
#[derive(Debug, Args)]
#[command(
    after_help = "The ladder comes from weft.toml: [completion] build, typeCheck, lint and \
[project] testCommand (or [completion] tests); rungs listed in [completion] optional never block.\n\n\
Exit codes: 0 delivered, 1 not delivered within --max-iterations, 2 usage or definition error, 130 interrupted."
)]
pub(crate) struct DeliverArgs {
    /// At most this many agent runs.
    #[arg(long, default_value_t = weft_deliver::DEFAULT_MAX_ITERATIONS, value_parser = clap::value_parser!(u32).range(1..=50))]
    max_iterations: u32,
    /// The agent (default: the project's default agent).
    #[arg(long)]
    agent: Option<String>,
    /// The model for every prompt, as PROVIDER:MODEL.
    #[arg(long, short = 'm')]
    model: Option<String>,
    /// The folder the agent and the ladder work in (default: the project folder).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// How the agent's commands are sandboxed: workspace, strict or none.
    #[arg(long, value_name = "MODE")]
    sandbox: Option<weft_tools::Mode>,
    /// Each run's step limit.
    #[arg(long, value_name = "N")]
    max_steps: Option<u64>,
    /// The store: `sqlite:PATH` or `postgres://…`.
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Print one JSON line per step and the report.
    #[arg(long)]
    json: bool,
    /// `[PROJECT_DIR] [INSTRUCTION]`: the project folder (default: the working directory) and
    /// the task (default: make the failing rungs pass).
    #[arg(value_name = "ARGS", num_args = 0..=2)]
    args: Vec<String>,
}

fn stage(stage: Stage) -> &'static str {
    match stage {
        Stage::Baseline => "baseline",
        Stage::AfterChanges => "after changes",
        Stage::AfterFix => "after fix",
    }
}

/// Runs `weft deliver`.
pub(crate) fn run(args: DeliverArgs) -> anyhow::Result<ExitCode> {
    let (dir, instruction) = match args.args.as_slice() {
        [] => (PathBuf::from("."), String::new()),
        [one] if std::path::Path::new(one).join("weft.toml").is_file() => {
            (PathBuf::from(one), String::new())
        }
        [one] => (PathBuf::from("."), one.clone()),
        [dir, instruction] => (PathBuf::from(dir), instruction.clone()),
        _ => anyhow::bail!("give at most a project folder and an instruction"),
    };
    let project = match super::location::load_project(&dir)? {
        Ok(project) => project,
        Err(code) => return Ok(code),
    };
    super::telemetry::start(&project.telemetry().unwrap_or_default());
    let prices = match super::pricing::project_prices(Some(&project)) {
        Ok(prices) => prices,
        Err(message) => {
            eprintln!("weft: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    let runtime = super::runs::runtime()?;
    runtime.block_on(async move {
        let store_url = super::location::store_url(args.store.as_deref(), Some(project.dir()))?;
        let store = super::location::open_or_create(&store_url).await?;
        super::confine::announce(&project, args.sandbox);
        let runtime = super::run::runtime(store, prices);
        let mut options = DeliverOptions::new(instruction).max_iterations(args.max_iterations);
        options.agent = args.agent.clone();
        options.model = args.model.clone();
        options.workspace = args.workspace.clone();
        options.sandbox = args.sandbox.map(|m| m.as_str().to_owned());
        options.budget.max_steps = args.max_steps;
        let cancel = options.cancel.clone();
        let watcher = tokio::spawn(super::signals::stop_on_signals(cancel));
        let json = args.json;
        let max = args.max_iterations;
        let result = deliver(&runtime, &project, &options, |event| {
            if json {
                let line = match event {
                    DeliverEvent::Verified(v) => json!({"type": "verified", "verification": v}),
                    DeliverEvent::RunStarted { iteration, run_id } => {
                        json!({"type": "run_start", "iteration": iteration, "runId": run_id})
                    }
                    DeliverEvent::RunEnded(i) => json!({"type": "run_end", "iteration": i}),
                };
                println!("{line}");
                return;
            }
            match event {
                DeliverEvent::Verified(v) => {
                    println!("{}: {}", stage(v.stage), v.ladder.summary());
                    let failures = v.ladder.failures();
                    if !failures.is_empty() {
                        for line in failures.lines().take(12) {
                            println!("    {line}");
                        }
                    }
                }
                DeliverEvent::RunStarted { iteration, run_id } => {
                    println!("iteration {iteration}/{max}: run {run_id}");
                }
                DeliverEvent::RunEnded(i) => {
                    let error = i.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
                    println!("    run {} {} after {} steps{error}", i.run_id, i.status, i.steps);
                }
            }
        })
        .await;
        watcher.abort();
        let report = match result {
            Ok(report) => report,
            Err(error) => {
                eprintln!("weft: {error}");
                return Ok(ExitCode::from(error.exit_code()));
            }
        };
        if json {
            println!("{}", json!({"type": "report", "report": report, "exitCode": report.exit_code()}));
        } else {
            let runs = report.iterations.len();
            let word = match report.outcome {
                weft_deliver::Outcome::Delivered if runs == 0 => {
                    "delivered: every required rung already passes (no agent run)".to_owned()
                }
                weft_deliver::Outcome::Delivered => format!(
                    "delivered after {runs} iteration{}",
                    if runs == 1 { "" } else { "s" }
                ),
                weft_deliver::Outcome::NotDelivered => format!(
                    "not delivered: a required rung still fails after {runs} iteration{} (--max-iterations {max})",
                    if runs == 1 { "" } else { "s" }
                ),
                weft_deliver::Outcome::Interrupted => {
                    "interrupted (the current run can be resumed with weft resume)".to_owned()
                }
            };
            println!("{word}");
        }
        Ok::<_, anyhow::Error>(ExitCode::from(report.exit_code()))
    })
    .context("weft deliver")
}
