//! The `weft` command: the thin binary that parses arguments, calls the library crates and
//! maps their outcome to an exit code.
//!
//! Exit codes used by every subcommand:
//! - `0`: success (for `validate`: the input is valid);
//! - `1`: the work failed (a provider error, an invalid thread, a failed agent);
//! - `2`: a usage error (bad flags, unreadable input file, bad model reference);
//! - `130`: interrupted by Ctrl-C.

mod args;
mod commands;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // `weft __sandbox-exec …` (hidden): the OS sandbox helper of `run_command`; it must run
    // before any thread exists.
    weft_sandbox::run_helper_if_requested();
    // Every retry of a provider call is said on stderr before its wait.
    weft_provider::set_retry_observer(std::sync::Arc::new(
        |notice: &weft_provider::RetryNotice| {
            eprintln!("weft: {}", notice.describe());
        },
    ));
    let cli = args::Cli::parse();
    if cli.verbose || commands::verbose_from_environment() {
        weft_provider::trace::set_http_trace(std::sync::Arc::new(
            |trace: &weft_provider::trace::HttpTrace| {
                for line in trace.describe().lines() {
                    eprintln!("weft: http: {line}");
                }
            },
        ));
    }
    let code = match commands::dispatch(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("weft: {error:#}");
            ExitCode::from(2)
        }
    };
    // The last spans of a traced run are exported before the process ends, whatever its code.
    commands::telemetry::finish();
    code
}
