//! `weft thread …`: ThreadProtocol commands (validate, hash, canonicalize, convert), and
//! `weft thread export RUN|THREAD` (a stored run's thread, built by weft-runtime's
//! `transcript`), and `weft thread state|terminate THREAD` (weft-runtime's `ThreadState` and
//! `Runtime::terminate`), and `weft thread schedule|effects|cancel-effect` (weft-runtime's
//! scheduled effects).
//!
//! Every command reads a file or `-` (standard input) and writes its result to standard output;
//! diagnostics go to standard error. Exit codes: `0` success, `1` invalid input (not JSON, not
//! a valid thread, not a readable stream), `2` usage errors (bad flags, unreadable file).

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use serde_json::Value;
use weft_runtime::transcript::Transcript;
use weft_thread::canonical::{CanonicalOptions, canonicalize};
use weft_thread::clock::{Clock, FixedClock, SystemClock};
use weft_thread::ui_stream::{self, AssemblerOptions, EncodeOptions, ThreadDefaults};
use weft_thread::{HashOptions, Report, Thread, Timestamp, hash_thread, pydantic_ai, validate};

/// `weft thread` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum ThreadCommand {
    /// Validate a thread: exit 0 when valid (warnings allowed), 1 when invalid.
    Validate {
        /// The thread JSON file, or `-` for standard input.
        file: String,
        /// Print the findings as JSON on standard output.
        #[arg(long)]
        json: bool,
    },
    /// Print the canonical hash of a valid thread: `sha256:<hex>`.
    Hash {
        /// The thread JSON file, or `-` for standard input.
        file: String,
        /// Include `meta:*` members, events and parts in the hash.
        #[arg(long)]
        include_meta: bool,
    },
    /// Print the canonical form (RFC 8785 JCS) of a valid thread, the bytes that are hashed.
    Canonicalize {
        /// The thread JSON file, or `-` for standard input.
        file: String,
        /// Keep `meta:*` members, events and parts.
        #[arg(long)]
        include_meta: bool,
    },
    /// Build a thread from a UI message stream (SSE or JSON lines); complete turns only.
    FromUiStream {
        /// The stream file, or `-` for standard input.
        file: String,
        /// Agent of turns the stream does not attribute.
        #[arg(long, default_value = "assistant")]
        agent_id: String,
        /// Use this ISO 8601 instant as the receipt time of every chunk (reproducible output).
        #[arg(long)]
        received_at: Option<String>,
    },
    /// Encode a valid thread as a UI message stream (SSE, v5 chunk set, ends with `[DONE]`).
    ToUiStream {
        /// The thread JSON file, or `-` for standard input.
        file: String,
    },
    /// Build a thread from the Pydantic AI `ModelMessages` JSON of one agent run.
    FromPydanticAi {
        /// The agent that ran.
        #[arg(long)]
        agent_id: String,
        /// The ModelMessages JSON file, or `-` for standard input.
        file: String,
    },
    /// Export a run's thread (as it stood when the run ended: earlier runs of the thread
    /// included) or a thread (as of its latest checkpoint) as a ThreadProtocol thread:
    /// every side's messages, tool calls and results, handoffs. Exit codes: 0 written, 2 no
    /// such run or thread.
    Export {
        /// A run id (or a unique prefix of one), or a thread id.
        origin: String,
        /// Write the thread to this file instead of standard output.
        #[arg(short, long, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
        /// The store: `sqlite:PATH` or `postgres://…` (default: WEFT_DATABASE_URL, else the
        /// project's `.weft/weft.db`).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// Print a stored thread's state as JSON (Standard Agents `ThreadState`: `threadId`,
    /// `agentId`, `userId`, `createdAt` and `terminated` in microseconds, `children` — its
    /// subagents' registry). Exit codes: 0 printed, 2 no such thread.
    State {
        /// The thread id.
        thread: String,
        /// The store: `sqlite:PATH` or `postgres://…` (default: WEFT_DATABASE_URL, else the
        /// project's `.weft/weft.db`).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// Terminate a stored thread: its runs this process drives stop, its queue is emptied,
    /// its parent's registry marks it `terminated`, and it takes no new run or queued
    /// message. Prints its state. Exit codes: 0 terminated, 2 no such thread.
    Terminate {
        /// The thread id.
        thread: String,
        /// The store: `sqlite:PATH` or `postgres://…` (default: WEFT_DATABASE_URL, else the
        /// project's `.weft/weft.db`).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// Schedule an effect on a stored thread (Standard Agents `scheduleEffect`): a call of
    /// the thread's agent's tool TOOL with `--args`, due `--in` a duration (default now) or
    /// `--at` a time. `weft serve` on the same store fires it when it is due (within a few
    /// seconds of that when scheduled from another process): the call joins the thread's
    /// run in progress, or a run starts for it. Exit codes: 0 scheduled, 2 no such thread,
    /// a terminated thread or bad arguments.
    Schedule {
        /// The thread id.
        thread: String,
        /// The tool the effect calls.
        tool: String,
        /// Its arguments, a JSON object.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
        /// Due after this long (`90s`, `10m`, `2h`, `7d`).
        #[arg(long = "in", value_name = "DURATION", value_parser = weft_runtime::budget::parse_duration, conflicts_with = "at")]
        delay: Option<std::time::Duration>,
        /// Due at this time (RFC 3339, e.g. `2030-01-01T09:00:00Z`).
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
        /// Print the effect as JSON.
        #[arg(long)]
        json: bool,
        /// The store: `sqlite:PATH` or `postgres://…` (default: WEFT_DATABASE_URL, else the
        /// project's `.weft/weft.db`).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// List a stored thread's scheduled effects, soonest first (Standard Agents
    /// `getScheduledEffects`). Exit codes: 0 listed, 2 no such thread.
    Effects {
        /// The thread id.
        thread: String,
        /// Only the effects calling this tool.
        #[arg(long)]
        name: Option<String>,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
        /// The store: `sqlite:PATH` or `postgres://…` (default: WEFT_DATABASE_URL, else the
        /// project's `.weft/weft.db`).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// Cancel a scheduled effect (Standard Agents `removeScheduledEffect`): it never fires.
    /// Exit codes: 0 cancelled, 2 no such effect scheduled (it fired or was cancelled).
    CancelEffect {
        /// The effect id (`e-…`).
        effect: String,
        /// The store: `sqlite:PATH` or `postgres://…` (default: WEFT_DATABASE_URL, else the
        /// project's `.weft/weft.db`).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// Print the Pydantic AI `ModelMessages` JSON of a valid thread as one agent sees it.
    ToPydanticAi {
        /// The viewing agent.
        #[arg(long)]
        agent_id: String,
        /// The thread JSON file, or `-` for standard input.
        file: String,
    },
}

/// Runs one `weft thread` subcommand.
pub(crate) fn run(command: ThreadCommand) -> anyhow::Result<ExitCode> {
    match command {
        ThreadCommand::Validate { file, json } => validate_command(&file, json),
        ThreadCommand::Hash { file, include_meta } => {
            let Some(value) = read_valid_thread(&file)? else {
                return Ok(invalid());
            };
            let options = HashOptions {
                include_meta,
                ..HashOptions::default()
            };
            write_stdout(&format!("{}\n", hash_thread(&value, options)))
        }
        ThreadCommand::Canonicalize { file, include_meta } => {
            let Some(value) = read_valid_thread(&file)? else {
                return Ok(invalid());
            };
            let mut bytes = canonicalize(&value, CanonicalOptions { include_meta });
            bytes.push(b'\n');
            std::io::stdout()
                .write_all(&bytes)
                .context("writing standard output")?;
            Ok(ExitCode::SUCCESS)
        }
        ThreadCommand::FromUiStream {
            file,
            agent_id,
            received_at,
        } => {
            let clock: Box<dyn Clock> = match received_at {
                Some(text) => match Timestamp::parse(&text) {
                    Ok(instant) => Box::new(FixedClock(instant)),
                    Err(error) => anyhow::bail!("--received-at {text:?}: {error}"),
                },
                None => Box::new(SystemClock),
            };
            from_ui_stream(&file, agent_id, clock.as_ref())
        }
        ThreadCommand::ToUiStream { file } => {
            let Some(thread) = read_typed_thread(&file)? else {
                return Ok(invalid());
            };
            let chunks = ui_stream::encode_thread(&thread, &EncodeOptions::default());
            write_stdout(&ui_stream::to_sse(&chunks))
        }
        ThreadCommand::FromPydanticAi { agent_id, file } => {
            let text = read_input(&file)?;
            let value: Value = match serde_json::from_str(&text) {
                Ok(value) => value,
                Err(error) => return Ok(fail(format_args!("the input is not JSON: {error}"))),
            };
            let turn = match pydantic_ai::from_agent_run(&value, &agent_id) {
                Ok(turn) => turn,
                Err(error) => return Ok(fail(format_args!("{error}"))),
            };
            let thread = ui_stream::default_thread(
                vec![weft_thread::Turn::Agent(turn)],
                &ThreadDefaults::default(),
                &SystemClock,
            );
            print_thread(&thread)
        }
        ThreadCommand::Export {
            origin,
            output,
            store,
        } => export(&origin, output.as_deref(), store),
        ThreadCommand::State { thread, store } => thread_state(&thread, store, false),
        ThreadCommand::Terminate { thread, store } => thread_state(&thread, store, true),
        ThreadCommand::Schedule {
            thread,
            tool,
            args,
            delay,
            at,
            json,
            store,
        } => schedule(&thread, &tool, &args, (delay, at.as_deref()), json, store),
        ThreadCommand::Effects {
            thread,
            name,
            json,
            store,
        } => effects(&thread, name.as_deref(), json, store),
        ThreadCommand::CancelEffect { effect, store } => cancel_effect(&effect, store),
        ThreadCommand::ToPydanticAi { agent_id, file } => {
            let Some(thread) = read_typed_thread(&file)? else {
                return Ok(invalid());
            };
            let output = pydantic_ai::thread_to_model_messages(&thread, &agent_id);
            for skipped in &output.skipped {
                let message = skipped
                    .message
                    .map(|index| format!(" message {index}"))
                    .unwrap_or_default();
                eprintln!(
                    "weft: warning: turn {}{message}: {} has no Pydantic AI form; left out",
                    skipped.turn, skipped.kind
                );
            }
            let text =
                serde_json::to_string_pretty(&output.messages).context("serializing messages")?;
            write_stdout(&format!("{text}\n"))
        }
    }
}

/// `weft thread export`: the thread of a run (or a thread id) as ThreadProtocol JSON.
fn export(
    origin: &str,
    output: Option<&std::path::Path>,
    store: Option<String>,
) -> anyhow::Result<ExitCode> {
    let args = super::runs::StoreArgs { store, json: false };
    super::runs::runtime()?.block_on(async move {
        let store = super::runs::open_store(&args).await?;
        let (thread, run) = match super::runs::find_run(&store, origin).await? {
            Some(run) => (run.thread_id.clone(), Some(run)),
            None => (origin.to_owned(), None),
        };
        let transcript = match Transcript::load(&store, &thread, run.as_ref()).await {
            Ok(transcript) => transcript,
            Err(weft_runtime::RunError::UnknownThread(_)) => {
                eprintln!(
                    "weft: no run or thread {origin:?} with a conversation in {}",
                    store.location()
                );
                return Ok(ExitCode::from(2));
            }
            Err(error) => return Err(error.into()),
        };
        let text =
            serde_json::to_string_pretty(&transcript.to_thread()).context("serializing thread")?;
        match output {
            Some(path) => {
                std::fs::write(path, format!("{text}\n"))
                    .with_context(|| format!("cannot write {}", path.display()))?;
                Ok(ExitCode::SUCCESS)
            }
            None => write_stdout(&format!("{text}\n")),
        }
    })
}

/// `weft thread state` / `weft thread terminate`: a thread's `ThreadState` as JSON.
fn thread_state(thread: &str, store: Option<String>, terminate: bool) -> anyhow::Result<ExitCode> {
    let args = super::runs::StoreArgs { store, json: false };
    super::runs::runtime()?.block_on(async move {
        let store = super::runs::open_store(&args).await?;
        let runtime = weft_runtime::Runtime::new(store);
        let state = if terminate {
            runtime.terminate(thread).await
        } else {
            runtime.thread_state(thread).await
        };
        match state {
            Ok(state) => {
                let text = serde_json::to_string_pretty(&state).context("serializing state")?;
                write_stdout(&format!("{text}\n"))
            }
            Err(weft_runtime::RunError::UnknownThread(_)) => {
                eprintln!(
                    "weft: no thread {thread:?} in {}",
                    runtime.store().location()
                );
                Ok(ExitCode::from(2))
            }
            Err(error) => Err(error.into()),
        }
    })
}

/// An effect as the commands print it (`--json`): as `weft serve`'s API shows it.
fn effect_json(effect: &weft_store::ScheduledEffect) -> Value {
    serde_json::json!({
        "id": effect.id,
        "thread_id": effect.thread_id,
        "name": effect.call.name,
        "arguments": effect.call.arguments,
        "due_at": due_text(effect.due_at),
        "created_at": effect.created_at,
    })
}

fn due_text(micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// `weft thread schedule`.
fn schedule(
    thread: &str,
    tool: &str,
    args: &str,
    (delay, at): (Option<std::time::Duration>, Option<&str>),
    json: bool,
    store: Option<String>,
) -> anyhow::Result<ExitCode> {
    let arguments: Value = match serde_json::from_str(args) {
        Ok(value) => value,
        Err(error) => {
            eprintln!("weft: --args is not JSON: {error}");
            return Ok(ExitCode::from(2));
        }
    };
    let due_at = match at {
        Some(at) => match chrono::DateTime::parse_from_rfc3339(at) {
            Ok(time) => time.timestamp_micros(),
            Err(error) => {
                eprintln!("weft: --at {at:?} is not an RFC 3339 time: {error}");
                return Ok(ExitCode::from(2));
            }
        },
        None => {
            let delay = delay.unwrap_or_default();
            weft_runtime::schedule::now_micros()
                .saturating_add(i64::try_from(delay.as_micros()).unwrap_or(i64::MAX / 2))
        }
    };
    let args = super::runs::StoreArgs { store, json };
    super::runs::runtime()?.block_on(async move {
        let store = super::runs::open_store(&args).await?;
        let runtime = weft_runtime::Runtime::new(store);
        match runtime
            .schedule_effect(thread, tool, arguments, due_at)
            .await
        {
            Ok(effect) if json => write_stdout(&format!("{}\n", effect_json(&effect))),
            Ok(effect) => write_stdout(&format!(
                "scheduled {} on thread {thread}: {tool} at {}\n",
                effect.id,
                due_text(effect.due_at)
            )),
            Err(
                error @ (weft_runtime::RunError::UnknownThread(_)
                | weft_runtime::RunError::Terminated(_)
                | weft_runtime::RunError::Refused(_)),
            ) => {
                eprintln!("weft: {error}");
                Ok(ExitCode::from(2))
            }
            Err(error) => Err(error.into()),
        }
    })
}

/// `weft thread effects`.
fn effects(
    thread: &str,
    name: Option<&str>,
    json: bool,
    store: Option<String>,
) -> anyhow::Result<ExitCode> {
    let args = super::runs::StoreArgs { store, json };
    super::runs::runtime()?.block_on(async move {
        let store = super::runs::open_store(&args).await?;
        let runtime = weft_runtime::Runtime::new(store);
        match runtime.scheduled_effects(thread, name).await {
            Ok(effects) if json => {
                let list: Vec<Value> = effects.iter().map(effect_json).collect();
                write_stdout(&format!("{}\n", Value::Array(list)))
            }
            Ok(effects) => {
                let mut text = String::new();
                for effect in &effects {
                    text.push_str(&format!(
                        "{}  {}  {} {}\n",
                        effect.id,
                        due_text(effect.due_at),
                        effect.call.name,
                        effect.call.arguments
                    ));
                }
                if effects.is_empty() {
                    text.push_str("no scheduled effects\n");
                }
                write_stdout(&text)
            }
            Err(weft_runtime::RunError::UnknownThread(_)) => {
                eprintln!(
                    "weft: no thread {thread:?} in {}",
                    runtime.store().location()
                );
                Ok(ExitCode::from(2))
            }
            Err(error) => Err(error.into()),
        }
    })
}

/// `weft thread cancel-effect`.
fn cancel_effect(effect: &str, store: Option<String>) -> anyhow::Result<ExitCode> {
    let args = super::runs::StoreArgs { store, json: false };
    super::runs::runtime()?.block_on(async move {
        let store = super::runs::open_store(&args).await?;
        let runtime = weft_runtime::Runtime::new(store);
        if runtime.remove_scheduled_effect(effect).await? {
            write_stdout(&format!("cancelled {effect}\n"))
        } else {
            eprintln!("weft: no effect {effect:?} is scheduled (it fired or was cancelled)");
            Ok(ExitCode::from(2))
        }
    })
}

fn invalid() -> ExitCode {
    ExitCode::from(1)
}

fn fail(message: std::fmt::Arguments<'_>) -> ExitCode {
    eprintln!("weft: {message}");
    invalid()
}

fn write_stdout(text: &str) -> anyhow::Result<ExitCode> {
    std::io::stdout()
        .write_all(text.as_bytes())
        .context("writing standard output")?;
    Ok(ExitCode::SUCCESS)
}

/// Reads a file or standard input; failures are usage errors (exit 2).
fn read_input(file: &str) -> anyhow::Result<String> {
    let mut text = String::new();
    if file == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading standard input")?;
    } else {
        text = std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))?;
    }
    Ok(text)
}

fn print_findings(report: &Report) {
    for finding in &report.findings {
        eprintln!("{finding}");
    }
}

fn summary(report: &Report) -> String {
    let errors = report.errors().count();
    let warnings = report.warnings().count();
    format!("{errors} error(s), {warnings} warning(s)")
}

fn validate_command(file: &str, json: bool) -> anyhow::Result<ExitCode> {
    let text = read_input(file)?;
    let report = weft_thread::validate_json(&text);
    let code = if report.is_valid() {
        ExitCode::SUCCESS
    } else {
        invalid()
    };
    if json {
        let output = serde_json::json!({
            "valid": report.is_valid(),
            "errors": report.errors().count(),
            "warnings": report.warnings().count(),
            "findings": report.findings,
        });
        write_stdout(&format!(
            "{}\n",
            serde_json::to_string_pretty(&output).context("serializing findings")?
        ))?;
    } else {
        print_findings(&report);
        if report.is_valid() {
            write_stdout(&format!("valid: {}\n", summary(&report)))?;
        } else {
            eprintln!("weft: invalid thread: {}", summary(&report));
        }
    }
    Ok(code)
}

/// Reads and validates a thread; prints findings and returns `None` when it is invalid.
fn read_valid_thread(file: &str) -> anyhow::Result<Option<Value>> {
    let text = read_input(file)?;
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(error) => {
            eprintln!("weft: the input is not JSON: {error}");
            return Ok(None);
        }
    };
    let report = validate(&value);
    if !report.is_valid() {
        print_findings(&report);
        eprintln!("weft: invalid thread: {}", summary(&report));
        return Ok(None);
    }
    Ok(Some(value))
}

fn read_typed_thread(file: &str) -> anyhow::Result<Option<Thread>> {
    let Some(value) = read_valid_thread(file)? else {
        return Ok(None);
    };
    match Thread::from_value(value) {
        Ok(thread) => Ok(Some(thread)),
        Err(error) => {
            eprintln!("weft: {error}");
            Ok(None)
        }
    }
}

fn print_thread(thread: &Thread) -> anyhow::Result<ExitCode> {
    let text = serde_json::to_string_pretty(thread).context("serializing thread")?;
    write_stdout(&format!("{text}\n"))
}

fn from_ui_stream(file: &str, agent_id: String, clock: &dyn Clock) -> anyhow::Result<ExitCode> {
    let text = read_input(file)?;
    let chunks = match ui_stream::parse_stream(&text) {
        Ok(chunks) => chunks,
        Err(error) => return Ok(fail(format_args!("not a UI message stream: {error}"))),
    };
    let options = AssemblerOptions {
        default_agent_id: agent_id,
        ..AssemblerOptions::default()
    };
    let assembled =
        match ui_stream::assemble_thread(chunks, options, &ThreadDefaults::default(), clock) {
            Ok(assembled) => assembled,
            Err(error) => return Ok(fail(format_args!("{error}"))),
        };
    for interruption in &assembled.interruptions {
        eprintln!(
            "weft: warning: discarded a partial turn of {} ({:?})",
            interruption.agent_id, interruption.reason
        );
    }
    for error in &assembled.stream_errors {
        eprintln!("weft: warning: stream error outside a turn: {error}");
    }
    print_thread(&assembled.thread)
}
