//! One module per subcommand; each is a few dozen lines calling the library crates.

pub(crate) mod approver;
pub(crate) mod checkpoints;
pub(crate) mod compliance;
pub(crate) mod compressed;
pub(crate) mod confine;
pub(crate) mod decide;
pub(crate) mod deliver;
pub(crate) mod embed;
pub(crate) mod events;
pub(crate) mod fork;
pub(crate) mod hint;
pub(crate) mod hook;
pub(crate) mod hooks;
pub(crate) mod init;
pub(crate) mod llm;
pub(crate) mod location;
pub(crate) mod mcp;
pub(crate) mod memory;
pub(crate) mod models;
pub(crate) mod policy;
pub(crate) mod pricing;
pub(crate) mod resume;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod schema_diff;
pub(crate) mod serve;
pub(crate) mod signals;
pub(crate) mod store;
pub(crate) mod task;
pub(crate) mod telemetry;
pub(crate) mod thread;
pub(crate) mod tokens;
pub(crate) mod variables;
pub(crate) mod worktree;

use std::process::ExitCode;

use crate::args::{Cli, Command};

/// Whether `WEFT_LOG` asks for the HTTP trace (`debug` or `trace`, alone or in a list such
/// as `info,debug`).
pub(crate) fn verbose_from_environment() -> bool {
    std::env::var("WEFT_LOG").is_ok_and(|value| {
        value.split([',', ' ']).any(|level| {
            matches!(
                level.trim().to_ascii_lowercase().as_str(),
                "debug" | "trace"
            )
        })
    })
}

/// Runs the parsed command and returns its exit code.
pub(crate) fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Thread(command) => thread::run(command),
        Command::Llm(args) => llm::run(args),
        Command::Embed(args) => embed::run(args),
        Command::Runs(command) => runs::run(command),
        Command::Events(args) => events::run(args),
        Command::Checkpoints(command) => checkpoints::run(command),
        Command::Resume(args) => resume::run(args),
        Command::Fork(args) => fork::run(args),
        Command::Approve(args) => decide::approve(args),
        Command::Deny(args) => decide::deny(args),
        Command::Run(args) => run::run(args),
        Command::Chat(args) => run::chat(args),
        Command::Init(args) => init::run(args),
        Command::Models(command) => models::run(command),
        Command::Hook(args) => hook::run(args),
        Command::Hooks(command) => hooks::run(command),
        Command::Policy(command) => policy::run(command),
        Command::Worktree(command) => worktree::run(command),
        Command::Compliance(command) => compliance::run(command),
        Command::Completion(command) => compliance::run_completion(command),
        Command::SchemaDiff(args) => schema_diff::run(args),
        Command::Task(command) => task::run(command),
        Command::Store(command) => store::run(command),
        Command::Memory(command) => memory::run(command),
        Command::Deliver(args) => deliver::run(args),
        Command::Mcp(command) => mcp::run(command),
        Command::Serve(args) => serve::run(args),
        Command::Tokens(command) => tokens::run(command),
        Command::Variables(command) => variables::run(command),
    }
}
