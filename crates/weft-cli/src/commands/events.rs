//! `weft events RUN [--follow] [--after SEQ] [--json]`: a run's event log, in `seq` order —
//! the same objects `weft run --json` prints live. A subagent's events carry its agent path
//! (`agentPath`: `parent/child`), which the text view shows in brackets.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use weft_runtime::event::{EventKind, RunEvent, UiStreamEncoder};
use weft_runtime::ownership::effective_status;
use weft_store::{EventLog, EventQuery, RunStatus, Runs};

use super::runs::{StoreArgs, open_store, runtime};

/// `weft events` flags.
#[derive(Debug, Args)]
pub(crate) struct EventsArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Keep printing new events until the run ends (rejoin a live run; with --after, from
    /// where a viewer left off).
    #[arg(long)]
    follow: bool,
    /// Only events after this seq (the `seq` of the last event already seen).
    #[arg(long, value_name = "SEQ")]
    after: Option<u64>,
    /// Print the run's assistant message as the Vercel AI SDK's UI message stream (SSE
    /// `data:` lines of chunks, then `data: [DONE]`) instead of the events.
    #[arg(long, conflicts_with = "types")]
    ui_stream: bool,
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

/// Most characters of a payload in the text view (without `--full`).
const PAYLOAD_CHARS: usize = 140;

/// Prints one event; `Ok(false)` when stdout is closed (`weft events RUN | head`).
fn print(event: &RunEvent, json: bool, full: bool) -> anyhow::Result<bool> {
    use std::io::Write as _;
    let line = if json {
        serde_json::to_string(event)?
    } else {
        let (kind, payload) = event.kind.clone().into_parts();
        let payload = payload.to_string();
        let payload = if full || payload.chars().count() <= PAYLOAD_CHARS {
            payload
        } else {
            format!(
                "{}…",
                payload.chars().take(PAYLOAD_CHARS).collect::<String>()
            )
        };
        // A subagent's events name it (`[lead/reviewer]`); the root agent's do not.
        let agent = if event.agent.depth() > 0 {
            format!("[{}] ", event.agent)
        } else {
            String::new()
        };
        format!(
            "{:>4}  {}  turn {:>3}  {agent}{:<18} {}{payload}",
            event.seq,
            event.timestamp,
            event.turn,
            kind,
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
            if !EventKind::TYPES.contains(&kind.as_str()) {
                anyhow::bail!(
                    "unknown event type {kind:?} for --type; the types are: {}",
                    EventKind::TYPES.join(", ")
                );
            }
        }
        let mut after = args.after;
        let mut encoder = args.ui_stream.then(|| UiStreamEncoder::new(&args.run));
        loop {
            let events = store
                .events(&EventQuery {
                    run_id: Some(args.run.clone()),
                    types: args.types.clone(),
                    after_seq: after,
                    ..EventQuery::default()
                })
                .await?;
            for record in &events {
                after = Some(record.seq);
                let event = RunEvent::from_record(record.clone());
                let printed = match &mut encoder {
                    Some(encoder) => print_chunks(&encoder.push(&event))?,
                    None => print(&event, args.store.json, args.full)?,
                };
                if !printed {
                    return Ok(ExitCode::SUCCESS);
                }
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
        if let Some(encoder) = &mut encoder
            && print_chunks(&encoder.finish())?
        {
            println!("data: [DONE]\n");
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Prints UI message stream chunks as SSE `data:` lines; `Ok(false)` when stdout is closed.
fn print_chunks(chunks: &[weft_thread::ui_stream::UiChunk]) -> anyhow::Result<bool> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    for chunk in chunks {
        match write!(out, "data: {}\n\n", chunk.to_value()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(false),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}
