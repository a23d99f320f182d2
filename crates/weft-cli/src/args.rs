//! Command-line flags (clap derive). Validation only: no I/O happens here.

use clap::{Parser, Subcommand};

use crate::commands;

/// Weft: an agent runtime. Run agents, try a model, and inspect or convert threads.
#[derive(Debug, Parser)]
#[command(name = "weft", version, about, long_about = None, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands of `weft`.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Validate, hash, canonicalize and convert ThreadProtocol threads.
    #[command(subcommand)]
    Thread(commands::thread::ThreadCommand),
}
