//! Command-line flags (clap derive). Validation only: no I/O happens here.

use clap::{Parser, Subcommand};

use crate::commands;

/// Weft: an agent runtime. Run agents, try a model, and inspect or convert threads.
#[derive(Debug, Parser)]
#[command(
    name = "weft",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_help = "Examples:\n  weft init demo && weft run demo \"Add a greeting file\"\n  weft runs list\n  weft resume RUN\n  weft llm --model openai:gpt-4o-mini \"Say hi\"\n  weft llm --model openai-compatible:llama3.2 --base-url http://127.0.0.1:11434/v1 --stream \"Tell me a joke\"\n  weft thread validate thread.json\n\nExit codes: 0 success, 1 the work failed (provider error, invalid input, the agent failed), 2 usage error, 3 a resume stopped on an uncertain tool call, 4 a run suspended awaiting a decision (weft approve / weft deny), 5 another process drives the run, 130 interrupted."
)]
pub(crate) struct Cli {
    /// Print what Weft sends to and receives from providers over HTTP (method, URL, headers,
    /// bodies; keys redacted) on stderr. `WEFT_LOG=debug` does the same.
    #[arg(long, short = 'v', global = true)]
    pub(crate) verbose: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands of `weft`.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Ask a model one question: the quickest way to try a provider.
    Llm(commands::llm::LlmArgs),
    /// Embed texts with an embedding model and print the vectors as JSON.
    Embed(commands::embed::EmbedArgs),
    /// Validate, hash, canonicalize and convert ThreadProtocol threads.
    #[command(subcommand)]
    Thread(commands::thread::ThreadCommand),
    /// Runs recorded in the store: `list`, `show RUN`, `delete RUN`, `prune --older-than 7d`.
    #[command(subcommand)]
    Runs(commands::runs::RunsCommand),
    /// Print a run's event log (`--follow` to keep watching).
    Events(commands::events::EventsArgs),
    /// Checkpoints of a thread: `list THREAD`.
    #[command(subcommand)]
    Checkpoints(commands::checkpoints::CheckpointsCommand),
    /// Continue an interrupted or suspended run from its latest checkpoint.
    Resume(commands::resume::ResumeArgs),
    /// Start a new thread from a checkpoint of a run's thread (then `weft run --continue`).
    Fork(commands::fork::ForkArgs),
    /// Approve a tool call a suspended run waits on (then `weft resume RUN`).
    Approve(commands::decide::ApproveArgs),
    /// Deny a tool call a suspended run waits on; the model gets the reason.
    Deny(commands::decide::DenyArgs),
    /// Run an agent of a Standard Agents project (the main job).
    Run(commands::run::RunArgs),
    /// Chat with a project's agent: one run per message typed (or piped), each going on
    /// with the conversation (`weft run --continue`); /exit or end of input ends it. Takes
    /// `weft run`'s flags.
    Chat(commands::run::RunArgs),
    /// Scaffold a project with example agents and scripted models.
    Init(commands::init::InitArgs),
    /// Local models: `list` what is available and where, `install` (assemble) the default one.
    #[command(subcommand)]
    Models(commands::models::ModelsCommand),
    /// A harness hook (Claude Code, Cursor, Codex): reads its JSON on stdin, answers in its
    /// format; exit codes follow the harness's contract (2 = deny), not the table above.
    Hook(commands::hook::HookArgs),
    /// Harness hook registration: `install --harness claude|cursor`, `doctor`.
    #[command(subcommand)]
    Hooks(commands::hooks::HooksCommand),
    /// The gate's policy database: `add`, `list`, `remove`, `enable`, `disable`, `check`, `audit`.
    #[command(subcommand)]
    Policy(commands::policy::PolicyCommand),
    /// Worktrees under `.worktrees/NNN-<slug>/`: `create`, `ensure`, `pr`, `finish`, `list`.
    #[command(subcommand)]
    Worktree(commands::worktree::WorktreeCommand),
    /// The Universal Agent Protocol's §6 conformance items for this repository: `check`.
    #[command(subcommand)]
    Compliance(commands::compliance::ComplianceCommand),
    /// The completion checklist of weft.toml: `check`.
    #[command(subcommand)]
    Completion(commands::compliance::CompletionCommand),
    /// Compare the schemas and API contracts (JSON Schema, OpenAPI, SQL DDL) of BASE with HEAD
    /// (default: the working tree); exit 1 when a change is breaking.
    #[command(
        name = "schema-diff",
        after_help = "Breaking: a removed property, path, operation, parameter, table or column; a changed type; a newly required field or parameter; a removed enum value; a new NOT NULL column without a default; a removed contract file.\n\nExamples:\n  weft schema-diff main\n  weft schema-diff v1.2.0 HEAD --json\n\nExit codes: 0 no breaking change, 1 a breaking change, 2 not a git repository or an unknown revision."
    )]
    SchemaDiff(commands::schema_diff::SchemaDiffArgs),
    /// The decision loop's ACT step: `classify TEXT` (category, tool to act with, memory queries).
    #[command(subcommand)]
    Task(commands::task::TaskCommand),
    /// The run store: `gc` drops orphaned rows and gives the space back.
    #[command(subcommand)]
    Store(commands::store::StoreCommand),
    /// Agent memory (daily log, working cache, semantic, archive): `query`, `store`,
    /// `promote`, `correct`, `maintain`, `close`, `status`.
    #[command(subcommand)]
    Memory(commands::memory::MemoryCommand),
    /// Run the verifier ladder (build → type-check → test → lint) and iterate the project's
    /// agent until every required rung passes (`--max-iterations`).
    Deliver(commands::deliver::DeliverArgs),
    /// API tokens for `weft serve`: `create NAME [--read-only]` (prints the secret once),
    /// `list`, `revoke ID_OR_NAME`.
    #[command(
        subcommand,
        long_about = "API tokens for `weft serve`: `create NAME [--read-only]` (prints the secret once), `list`, `revoke ID_OR_NAME`.\n\n\
A token is what a client of `weft serve` (the web page, a LangGraph or AI SDK client, a script) presents to use the \
server: `Authorization: Bearer TOKEN`, or `?token=TOKEN` in the page's URL. `weft serve` checks it on every request, \
streams included: 401 without a valid token. A read-only token (`--read-only`) can read threads, runs and events but \
not start, stop or decide a run (403). Tokens live in the project's store (the one `weft serve PROJECT` uses: \
PROJECT/.weft/weft.db, or --store / WEFT_DATABASE_URL); only a hash of each secret is kept, so a secret is shown \
once, when it is created. A revoked token is refused from the next request on.",
        after_help = "Examples:\n  weft tokens create laptop\n  weft tokens create dashboard --read-only\n  weft tokens list\n  weft tokens revoke dashboard\n\n\
Exit codes: 0 done, 2 a usage error (an invalid or taken name, an unknown token, no project or store)."
    )]
    Tokens(commands::tokens::TokensCommand),
    /// Standard Agents variables: `list` what agents declare and what a thread lacks,
    /// `set NAME=VALUE [--secret] --thread ID`, `unset NAME --thread ID`.
    #[command(
        subcommand,
        after_help = "A required variable without a value stops `weft run` before anything is recorded (exit 2); secret values are encrypted in the store and never listed.\n\n\
Examples:\n  weft variables list --thread th-123\n  weft variables set REGION=eu-west-1 --thread th-123\n  \
printf %s \"$TOKEN\" | weft variables set API_TOKEN --secret --thread th-123\n  weft run --continue th-123 \"Hello\"\n\n\
Exit codes: 0 done, 2 a usage error, 3 (list) a required variable is missing."
    )]
    Variables(commands::variables::VariablesCommand),
    /// Model Context Protocol: `list PROJECT` the MCP servers' tools, `serve PROJECT` the
    /// project's agents as MCP tools over stdio.
    #[command(subcommand)]
    Mcp(commands::mcp::McpCommand),
    /// Serve the project's agents over HTTP: a chat API for the Vercel AI SDK's `useChat`,
    /// run events as SSE, and a web page to chat, approve calls and watch runs.
    Serve(commands::serve::ServeArgs),
}
