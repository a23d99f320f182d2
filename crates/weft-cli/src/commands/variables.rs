//! `weft variables list|set|unset|boot`: Standard Agents variables — what an agent declares
//! (required, secret, scoped), what a thread has, what is missing — and a thread's values,
//! kept in the project's store (secrets encrypted; see `weft_standard::variables`); `boot`
//! starts a subagent call deferred for missing variables (agents §7.8), as `POST
//! /threads/{parent}/variables/{request}` of `weft serve` does. Exit codes: 0 done, 2 a
//! usage error (no project, an unknown agent, a bad name), and `list` exits 3 when a
//! required variable is missing, so scripts can check before `weft run`.

use std::io::{IsTerminal as _, Read as _};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::json;
use weft_standard::Project;
use weft_standard::variables::{self, Declared, Env};
use weft_store::{Store, ThreadRecord, ThreadVariables as _, Threads as _, VariableKind};

use super::runs::runtime;

/// Where: `--project`, `--store`, `--json`.
#[derive(Debug, Args)]
pub(crate) struct VariableStoreArgs {
    /// The project (default: the nearest folder upward holding `weft.toml`). Its store is
    /// `PROJECT/.weft/weft.db` unless --store or WEFT_DATABASE_URL says otherwise.
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// The store: `sqlite:PATH` or `postgres://…`.
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `weft variables` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum VariablesCommand {
    /// List the variables the project's agents declare, and with --thread which have a value
    /// there and which required ones are missing. Never a secret's value.
    #[command(
        after_help = "Resolution, lowest precedence first: the process environment, weft.toml's env, the prompt's env, \
the tool's env, the agent's env, the thread's values (its own, else inherited from its parent thread unless the agent \
declares the variable scoped).\n\n\
Examples:\n  weft variables list\n  weft variables list --agent researcher --thread th-123 --json\n\n\
Exit codes: 0 nothing required is missing, 3 a required variable is missing, 2 a usage error."
    )]
    List {
        #[command(flatten)]
        store: VariableStoreArgs,
        /// Only this agent (default: every agent).
        #[arg(long)]
        agent: Option<String>,
        /// The thread whose values count (default: none, as for a new thread).
        #[arg(long, value_name = "ID")]
        thread: Option<String>,
    },
    /// Set a variable on a thread (creating the thread when it does not exist yet, so a new
    /// conversation can be prepared before `weft run --continue ID`).
    #[command(
        after_help = "NAME=VALUE sets the value given; NAME alone reads the value from standard input (so a secret \
stays out of the shell's history and the process list).\n\n\
Examples:\n  weft variables set REGION=eu-west-1 --thread th-123\n  \
printf %s \"$TOKEN\" | weft variables set API_TOKEN --secret --thread th-123\n\n\
A --secret value is encrypted in the store with the key in WEFT_SECRET_KEY, WEFT_SECRET_KEY_FILE, or \
weft-secret.key beside a SQLite database (created, mode 0600, on first use).\n\n\
Exit codes: 0 set, 2 a usage error."
    )]
    Set {
        #[command(flatten)]
        store: VariableStoreArgs,
        /// `NAME=VALUE`, or `NAME` to read the value from standard input.
        assignment: String,
        /// The thread.
        #[arg(long, value_name = "ID")]
        thread: String,
        /// Store the value as a secret (encrypted, never listed, redacted from events).
        #[arg(long)]
        secret: bool,
    },
    /// Boot a subagent call deferred for missing variables (the `subagent_env_required`
    /// error its parent's model read): its values are set on its thread (the request id)
    /// with `weft variables set`, then the child runs with the call's original arguments and
    /// its result is queued on the parent thread.
    #[command(
        after_help = "Examples:\n  weft variables set DB_URL=pg://… --thread vr-0123456789abcdef\n  \
weft variables boot vr-0123456789abcdef --thread th-parent\n\n\
Exit codes: the child run's (0 completed, 1 failed, 130 interrupted, …), 2 a usage error \
(no such request, one booted already, a name taken), 3 required variables are still missing."
    )]
    Boot {
        #[command(flatten)]
        store: VariableStoreArgs,
        /// The request (`requestId` of the error).
        request: String,
        /// The parent thread (whose call was deferred).
        #[arg(long, value_name = "ID")]
        thread: String,
    },
    /// Remove a variable from a thread.
    #[command(after_help = "Exit codes: 0 removed (or was not set), 2 a usage error.")]
    Unset {
        #[command(flatten)]
        store: VariableStoreArgs,
        /// The variable's name.
        name: String,
        /// The thread.
        #[arg(long, value_name = "ID")]
        thread: String,
    },
}

/// Runs `weft variables …`.
pub(crate) fn run(command: VariablesCommand) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async move {
        match command {
            VariablesCommand::List {
                store,
                agent,
                thread,
            } => list(&store, agent.as_deref(), thread.as_deref()).await,
            VariablesCommand::Set {
                store,
                assignment,
                thread,
                secret,
            } => set(&store, &assignment, &thread, secret).await,
            VariablesCommand::Unset {
                store,
                name,
                thread,
            } => unset(&store, &name, &thread).await,
            VariablesCommand::Boot {
                store,
                request,
                thread,
            } => boot(&store, &request, &thread).await,
        }
    })
}

fn project_dir(args: &VariableStoreArgs) -> anyhow::Result<PathBuf> {
    match &args.project {
        Some(dir) => Ok(dir.clone()),
        None => {
            let cwd = std::env::current_dir().context("no working directory")?;
            super::location::find_project(&cwd).with_context(|| {
                format!(
                    "no project here (no weft.toml in {} or above): pass --project DIR",
                    cwd.display()
                )
            })
        }
    }
}

async fn open(args: &VariableStoreArgs, create: bool) -> anyhow::Result<Store> {
    let dir = project_dir(args)?;
    let url = super::location::store_url(args.store.as_deref(), Some(&dir))?;
    if create {
        super::location::open_or_create(&url).await
    } else {
        super::location::open_existing(&url).await
    }
}

/// Where a declared variable's value comes from for `agent`, when it has one.
fn source(
    project: &Project,
    env: &Env,
    agent: &weft_standard::AgentDefinition,
    d: &Declared,
) -> Option<&'static str> {
    if env.get(&d.name).is_some() {
        return Some("thread");
    }
    if agent.env.contains_key(&d.name) {
        return Some("agent env");
    }
    let in_definitions = [&agent.side_a]
        .into_iter()
        .chain(agent.side_b.as_ref())
        .filter_map(|side| project.prompt(&side.prompt))
        .any(|prompt| {
            prompt.env.contains_key(&d.name)
                || prompt
                    .tools
                    .iter()
                    .filter_map(|t| project.tool(t.name()))
                    .any(|t| t.env.contains_key(&d.name))
        });
    if in_definitions {
        return Some("prompt or tool env");
    }
    if project.config().env.contains_key(&d.name) {
        return Some("weft.toml env");
    }
    std::env::var(&d.name).is_ok().then_some("environment")
}

async fn list(
    args: &VariableStoreArgs,
    only: Option<&str>,
    thread: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let dir = project_dir(args)?;
    let project = match super::location::load_project(&dir)? {
        Ok(project) => project,
        Err(code) => return Ok(code),
    };
    let agents: Vec<_> = match only {
        Some(name) => vec![
            project
                .agent(name)
                .with_context(|| format!("the project has no agent {name:?}"))?,
        ],
        None => project.agents().collect(),
    };
    let store = match thread {
        Some(_) => Some(open(args, false).await?),
        None => None,
    };
    let mut rows = Vec::new();
    let mut any_missing = false;
    for agent in agents {
        let env = match (&store, thread) {
            (Some(store), Some(thread)) => {
                variables::thread_env(store, &project, thread, agent).await?
            }
            _ => Env::default(),
        };
        let missing: Vec<String> = variables::missing(&project, agent, &env)
            .into_iter()
            .map(|d| d.name)
            .collect();
        any_missing |= !missing.is_empty();
        for d in variables::declared(&project, agent) {
            let from = source(&project, &env, agent, &d);
            rows.push(json!({
                "agent": agent.name,
                "name": d.name,
                "type": d.kind,
                "required": d.required,
                "scoped": d.scoped,
                "description": d.description,
                "declaredBy": d.declared_by,
                "set": from.is_some(),
                "source": from,
                "missing": missing.contains(&d.name),
            }));
        }
    }
    if args.json {
        println!(
            "{}",
            json!({"thread": thread, "variables": rows, "missingRequired": any_missing})
        );
    } else if rows.is_empty() {
        println!("no agent of the project declares variables");
    } else {
        for row in &rows {
            let flags = [
                row["required"]
                    .as_bool()
                    .unwrap_or(false)
                    .then_some("required"),
                (row["type"] == "secret").then_some("secret"),
                row["scoped"].as_bool().unwrap_or(false).then_some("scoped"),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", ");
            let state = if row["missing"].as_bool().unwrap_or(false) {
                "MISSING".to_owned()
            } else {
                row["source"]
                    .as_str()
                    .map_or_else(|| "not set".to_owned(), |s| format!("set ({s})"))
            };
            println!(
                "{:<16} {:<24} {:<28} {}  {}",
                row["agent"].as_str().unwrap_or_default(),
                row["name"].as_str().unwrap_or_default(),
                flags,
                state,
                row["description"].as_str().unwrap_or_default()
            );
        }
        if any_missing {
            let on = thread.unwrap_or("THREAD");
            eprintln!(
                "weft: required variables are missing: set them with `weft variables set NAME=VALUE [--secret] --thread {on}`, \
                 in a definition's env, or in the environment"
            );
        }
    }
    Ok(if any_missing {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

async fn set(
    args: &VariableStoreArgs,
    assignment: &str,
    thread: &str,
    secret: bool,
) -> anyhow::Result<ExitCode> {
    let (name, value) = match assignment.split_once('=') {
        Some((name, value)) => (name.to_owned(), value.to_owned()),
        None => {
            let mut value = String::new();
            anyhow::ensure!(
                !std::io::stdin().is_terminal(),
                "give NAME=VALUE, or pipe the value of {assignment} on standard input"
            );
            std::io::stdin()
                .read_to_string(&mut value)
                .context("cannot read the value")?;
            (
                assignment.to_owned(),
                value.trim_end_matches(['\n', '\r']).to_owned(),
            )
        }
    };
    let store = open(args, true).await?;
    if store.thread(thread).await?.is_none() {
        store.put_thread(&ThreadRecord::new(thread)).await?;
    }
    let kind = if secret {
        VariableKind::Secret
    } else {
        VariableKind::Text
    };
    let record = store.set_variable(thread, &name, &value, kind).await?;
    if args.json {
        println!("{}", serde_json::to_string(&record)?);
    } else {
        eprintln!("set {} ({}) on thread {thread}", record.name, record.kind);
    }
    Ok(ExitCode::SUCCESS)
}

async fn unset(args: &VariableStoreArgs, name: &str, thread: &str) -> anyhow::Result<ExitCode> {
    let store = open(args, false).await?;
    let removed = store.unset_variable(thread, name).await?;
    if args.json {
        println!(
            "{}",
            json!({"thread": thread, "name": name, "removed": removed})
        );
    } else if removed {
        eprintln!("removed {name} from thread {thread}");
    } else {
        eprintln!("{name} was not set on thread {thread}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `weft variables boot REQUEST --thread PARENT` (see [`VariablesCommand::Boot`]).
async fn boot(args: &VariableStoreArgs, request: &str, parent: &str) -> anyhow::Result<ExitCode> {
    use weft_store::VariableRequests as _;
    let dir = project_dir(args)?;
    let project = match super::location::load_project(&dir)? {
        Ok(project) => project,
        Err(code) => return Ok(code),
    };
    let store = open(args, false).await?;
    let Some(pending) = store.variable_request(parent, request).await? else {
        eprintln!("weft: no variable request {request} on thread {parent}");
        return Ok(ExitCode::from(2));
    };
    let Some(agent) = project.agent(&pending.agent) else {
        eprintln!("weft: the project has no agent {:?}", pending.agent);
        return Ok(ExitCode::from(2));
    };
    let base_urls = match weft_standard::preflight::check(
        &project,
        agent,
        None,
        None,
        &super::run::providers(),
        super::models::local_model_check,
    ) {
        Ok(base_urls) => base_urls,
        Err(problems) => {
            eprintln!("weft: {} cannot run: {}", agent.name, problems.join("; "));
            return Ok(ExitCode::from(2));
        }
    };
    let prices = match super::pricing::project_prices(Some(&project)) {
        Ok(prices) => prices,
        Err(message) => {
            eprintln!("weft: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    let runtime = super::run::runtime(store.clone(), prices);
    let launch = weft_standard::Launch {
        base_urls,
        ..weft_standard::Launch::default()
    };
    let (request, handle) =
        match variables::boot_deferred(&runtime, &project, &launch, parent, request).await {
            Ok(booted) => booted,
            Err(variables::BootError::Missing(missing)) => {
                eprintln!("weft: {missing}");
                return Ok(ExitCode::from(3));
            }
            Err(
                error @ (variables::BootError::Unknown(_)
                | variables::BootError::Completed(_)
                | variables::BootError::Duplicate(_)
                | variables::BootError::UnknownAgent(_)
                | variables::BootError::Attachments(_)),
            ) => {
                eprintln!("weft: {error}");
                return Ok(ExitCode::from(2));
            }
            Err(error) => return Err(error.into()),
        };
    let thread = variables::deferred_thread(&request);
    eprintln!(
        "booted {} on thread {thread} (run {})",
        request.agent,
        handle.id()
    );
    let outcome = handle.outcome().await?;
    // Its result goes to the parent thread's queue, as the spec's completion message.
    variables::deliver_deferred(&store, &request, &outcome.end).await?;
    if args.json {
        println!(
            "{}",
            json!({"requestId": request.id, "threadId": thread, "runId": outcome.run_id, "exitCode": outcome.exit_code()})
        );
    } else {
        match &outcome.end {
            weft_runtime::RunEnd::Completed { output } => println!("{output}"),
            weft_runtime::RunEnd::Failed { error } => eprintln!("weft: the child failed: {error}"),
            other => eprintln!("weft: the child's run ended: {other:?}"),
        }
        eprintln!("its result was queued on thread {parent}");
    }
    Ok(ExitCode::from(outcome.exit_code()))
}
