//! One module per subcommand; each is a few dozen lines calling the library crates.

pub(crate) mod checkpoints;
pub(crate) mod compliance;
pub(crate) mod confine;
pub(crate) mod deliver;
pub(crate) mod embed;
pub(crate) mod events;
pub(crate) mod hook;
pub(crate) mod hooks;
pub(crate) mod init;
pub(crate) mod llm;
pub(crate) mod location;
pub(crate) mod memory;
pub(crate) mod models;
pub(crate) mod policy;
pub(crate) mod resume;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod signals;
pub(crate) mod thread;
pub(crate) mod worktree;

use std::process::ExitCode;

use crate::args::{Cli, Command};

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
        Command::Run(args) => run::run(args),
        Command::Init(args) => init::run(args),
        Command::Models(command) => models::run(command),
        Command::Hook(args) => hook::run(args),
        Command::Hooks(command) => hooks::run(command),
        Command::Policy(command) => policy::run(command),
        Command::Worktree(command) => worktree::run(command),
        Command::Compliance(command) => compliance::run(command),
        Command::Completion(command) => compliance::run_completion(command),
        Command::Memory(command) => memory::run(command),
        Command::Deliver(args) => deliver::run(args),
    }
}
