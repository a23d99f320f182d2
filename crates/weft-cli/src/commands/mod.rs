//! One module per subcommand; each is a few dozen lines calling the library crates.

pub(crate) mod llm;
pub(crate) mod thread;

use std::process::ExitCode;

use crate::args::{Cli, Command};

/// Runs the parsed command and returns its exit code.
pub(crate) fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Thread(command) => thread::run(command),
        Command::Llm(args) => llm::run(args),
    }
}
