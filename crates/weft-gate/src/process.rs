//! Running an external command (an enforcer, a completion check) with a time limit,
//! capturing its output.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a finished (or stopped) command left.
#[derive(Debug, Clone)]
pub(crate) struct Finished {
    /// The exit code; `None` when killed by a signal or stopped at the time limit.
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) timed_out: bool,
}

/// Runs `command` (already split into program and arguments) in `dir`, waiting at most
/// `limit`. A program that cannot start is an `Err` with the reason.
pub(crate) fn run(
    program: &str,
    args: &[String],
    dir: &Path,
    envs: &[(&str, &str)],
    limit: Duration,
) -> Result<Finished, String> {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_string(&mut text);
        }
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(s) = stderr.as_mut() {
            let _ = s.read_to_string(&mut text);
        }
        text
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() >= limit => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("cannot wait for {program}: {e}")),
        }
    };
    Ok(Finished {
        code: if timed_out {
            None
        } else {
            status.and_then(|s| s.code())
        },
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
        timed_out,
    })
}

/// Runs a command line through `sh -c` in `dir`.
pub(crate) fn run_shell(line: &str, dir: &Path, limit: Duration) -> Result<Finished, String> {
    run("sh", &["-c".to_owned(), line.to_owned()], dir, &[], limit)
}

/// The last `lines` lines of `text`.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
