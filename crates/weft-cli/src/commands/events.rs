//! `weft events RUN [--follow] [--json]`: a run's event log, in log order.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use weft_runtime::ownership::effective_status;
use weft_store::{EventLog, EventQuery, EventRecord, RunStatus, Runs};

use super::runs::{StoreArgs, open_store, runtime};

/// `weft events` flags.
#[derive(Debug, Args)]
pub(crate) struct EventsArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Keep printing new events until the run ends.
    #[arg(long)]
    follow: bool,
    /// Only these event types (repeatable; an unknown type is an error).
    #[arg(long = "type", value_name = "TYPE")]
    types: Vec<String>,
    /// Print whole payloads (the text view clips each to one short line; `--json` never
    /// clips).
    #[arg(long)]
    full: bool,
    /// The run id (or a unique prefix of it).
    run: String,
}

/// The event types a run's log holds (`weft_store::event_type` and the session's own).
const KNOWN_TYPES: [&str; 14] = [
    weft_store::event_type::RUN_START,
    weft_store::event_type::TURN_START,
    weft_store::event_type::TURN_END,
    weft_store::event_type::TOOL_CALL_START,
    weft_store::event_type::TOOL_CALL_END,
    weft_store::event_type::TOOL_CALL_REPLAYED,
    weft_store::event_type::TOOL_CALL_REFUSED,
    weft_store::event_type::RECOVERY,
    weft_store::event_type::COMPLETION,
    weft_store::event_type::ERROR,
    weft_store::event_type::ROUTING,
    weft_store::event_type::CHECKPOINT,
    "agent.handoff",
    "session.status",
];

/// Most characters of a payload in the text view (without `--full`).
const PAYLOAD_CHARS: usize = 140;

/// Prints one event; `Ok(false)` when stdout is closed (`weft events RUN | head`).
fn print(event: &EventRecord, json: bool, full: bool) -> anyhow::Result<bool> {
    use std::io::Write as _;
    let line = if json {
        serde_json::to_string(event)?
    } else {
        let payload = event.payload.to_string();
        let payload = if full || payload.chars().count() <= PAYLOAD_CHARS {
            payload
        } else {
            format!(
                "{}…",
                payload.chars().take(PAYLOAD_CHARS).collect::<String>()
            )
        };
        format!(
            "{}  turn {:>3}  {:<18} {}{payload}",
            event.timestamp,
            event.turn,
            event.event_type,
            event
                .tool_call_id
                .as_deref()
                .map(|c| format!("[{c}] "))
                .unwrap_or_default(),
        )
    };
    match writeln!(std::io::stdout().lock(), "{line}") {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Runs `weft events`.
pub(crate) fn run(args: EventsArgs) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async move {
        let store = open_store(&args.store).await?;
        let Some(record) = super::runs::find_run(&store, &args.run).await? else {
            eprintln!("weft: run {} not found in {}", args.run, store.location());
            return Ok(ExitCode::from(1));
        };
        let args = EventsArgs {
            run: record.run_id,
            ..args
        };
        for kind in &args.types {
            if !KNOWN_TYPES.contains(&kind.as_str()) {
                anyhow::bail!(
                    "unknown event type {kind:?} for --type; the types are: {}",
                    KNOWN_TYPES.join(", ")
                );
            }
        }
        let mut after = None;
        loop {
            let events = store
                .events(&EventQuery {
                    run_id: Some(args.run.clone()),
                    types: args.types.clone(),
                    after_seq: after,
                    ..EventQuery::default()
                })
                .await?;
            for event in &events {
                if !print(event, args.store.json, args.full)? {
                    return Ok(ExitCode::SUCCESS);
                }
                after = Some(event.seq);
            }
            if !args.follow {
                break;
            }
            let running = store
                .run(&args.run)
                .await?
                .is_some_and(|r| effective_status(&store, &r) == RunStatus::Running);
            if !running && events.is_empty() {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = tokio::signal::ctrl_c() => return Ok(ExitCode::from(130)),
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
