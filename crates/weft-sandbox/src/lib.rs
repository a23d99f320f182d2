//! Weft's OS sandbox: one [`Sandbox`] type, a per-use [`Policy`], for every process Weft starts
//! for an agent (`run_command` today; hook scripts, gate checks, test commands and MCP servers
//! can use the same type with their own policies).
//!
//! # How it confines (Linux)
//! Weft's own code holds no `unsafe`: the restrictions are applied by a small helper mode of
//! the running program (`weft __sandbox-exec POLICY`), which [`Sandbox::command`] starts in
//! place of the command. The helper ([`helper_main`]):
//! 1. sets its parent-death signal (`SIGKILL`), and joins a fresh cgroup with `pids.max` and
//!    `memory.limit_in_bytes` when the cgroup tree is writable (root on cgroup v1; otherwise
//!    rlimits alone: `RLIMIT_NPROC` binds for a non-root user);
//! 2. unshares user, mount, PID, IPC, UTS and (unless the policy allows the network) network
//!    namespaces, maps its uid/gid, and starts itself again as PID 1 of the new PID namespace;
//! 3. that init builds a new root on a tmpfs: the system's program folders read-only
//!    (`/usr`, `/bin`, `/sbin`, `/lib*`, a short list of `/etc` entries), a few `/dev` nodes,
//!    a fresh `/proc`, a private size-capped `/tmp` that holds `HOME`, and (mode `workspace`)
//!    the workspace read-write at its own path, with the protected paths read-only or hidden
//!    under it; then `pivot_root`s into it, so nothing else of the host (its `/root/.ssh`, the
//!    files beside the workspace, listening Unix sockets) is even named;
//! 4. applies rlimits (`RLIMIT_NPROC`, `RLIMIT_DATA`, `RLIMIT_FSIZE`, `RLIMIT_CPU`,
//!    `RLIMIT_CORE`), then Landlock as a second wall (read-only system folders, read-write
//!    workspace and `/tmp`, no TCP bind/connect unless allowed, abstract Unix sockets and
//!    signals scoped to the sandbox; a Landlocked process can no longer mount or unmount);
//! 5. runs the command with its scrubbed environment and waits for it; when the command ends,
//!    the init exits, and the kernel kills everything left in the PID namespace (a `sleep 100 &`
//!    does not outlive the call). Killing the helper (timeout, cancel, or Weft itself dying:
//!    parent-death signals) takes the whole tree down the same way.
//!
//! Where none of this can be set up (not Linux, no Landlock, no user namespaces),
//! [`Sandbox::check`] says so and callers refuse to run commands unless the mode is
//! [`Mode::None`].

#[cfg(target_os = "linux")]
mod linux;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The first argument of the helper mode: `PROGRAM __sandbox-exec POLICY_JSON`.
pub const HELPER_ARG: &str = "__sandbox-exec";

/// Exit code of the helper when it could not set the sandbox up (its stderr says why,
/// prefixed with [`HELPER_ERROR_PREFIX`]).
pub const SETUP_FAILED: i32 = 125;

/// The prefix of the helper's own error messages on stderr.
pub const HELPER_ERROR_PREFIX: &str = "weft-sandbox: ";

/// How much a sandboxed process may see and do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Read-write workspace (minus the protected paths), read-only system folders, no network
    /// unless the policy allows it. The default.
    #[default]
    Workspace,
    /// No filesystem beyond a private scratch `/tmp` (and the read-only system folders needed
    /// to start programs), no network. The runtime spec's `sandboxed: true`.
    Strict,
    /// No sandbox at all: the command runs as Weft's own user in the workspace, with only the
    /// scrubbed environment. Explicit, and announced by `weft run`.
    None,
}

impl Mode {
    /// The mode's name, as written in `weft.toml` and `--sandbox`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Workspace => "workspace",
            Mode::Strict => "strict",
            Mode::None => "none",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "workspace" => Ok(Mode::Workspace),
            "strict" => Ok(Mode::Strict),
            "none" => Ok(Mode::None),
            other => Err(format!(
                "unknown sandbox mode {other:?}: use \"workspace\", \"strict\" or \"none\""
            )),
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a protected path inside the workspace becomes in the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protection {
    /// Visible, not writable (the project's definition files).
    ReadOnly,
    /// Neither readable nor writable: an empty read-only stand-in (the run store).
    Hidden,
}

/// Resource limits of one sandboxed command (its whole process tree where cgroups are
/// available; per process through rlimits otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Processes (and threads) at once.
    pub max_processes: u64,
    /// Memory, in bytes.
    pub memory_bytes: u64,
    /// The largest file a process may write, in bytes.
    pub file_size_bytes: u64,
    /// CPU seconds per process.
    pub cpu_seconds: u64,
    /// Size of the private `/tmp` (which holds `HOME`), in bytes.
    pub tmp_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_processes: 512,
            memory_bytes: 4 << 30,
            file_size_bytes: 1 << 30,
            cpu_seconds: 900,
            tmp_bytes: 512 << 20,
        }
    }
}

/// What one use of the sandbox allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The mode.
    pub mode: Mode,
    /// The folder the command may read and write (mode `workspace`); absolute.
    pub workspace: Option<PathBuf>,
    /// Paths under the workspace that stay read-only or hidden.
    pub protected: Vec<(PathBuf, Protection)>,
    /// Whether the command may use the network (TCP/UDP to anywhere; no network namespace).
    pub network: bool,
    /// Extra folders visible read-only (absolute), beyond the system's program folders.
    pub read_only: Vec<PathBuf>,
    /// Resource limits.
    pub limits: Limits,
}

impl Policy {
    /// A policy of `mode` over `workspace`, with the default limits and no network.
    pub fn new(mode: Mode, workspace: impl Into<PathBuf>) -> Self {
        Policy {
            mode,
            workspace: Some(workspace.into()),
            protected: Vec::new(),
            network: false,
            read_only: Vec::new(),
            limits: Limits::default(),
        }
    }
}

/// One command to run in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invocation {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The whole environment (nothing else is passed; `HOME` and `TMPDIR` are set by the
    /// sandbox in modes other than `none`).
    pub env: Vec<(String, String)>,
    /// The working folder (absolute; inside the workspace, or ignored in mode `strict`).
    pub cwd: PathBuf,
}

/// What the helper reads: the policy, the command, and who its parent is.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Request {
    policy: Policy,
    invocation: Invocation,
    /// Weft's pid: the helper stops if its parent is already gone.
    parent_pid: u32,
}

/// Why a sandboxed command cannot be started.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SandboxError {
    /// This system cannot confine commands.
    #[error(
        "no sandbox can be set up here ({0}); commands are refused. Set sandbox = \"none\" in weft.toml (or pass --sandbox none) to run them unconfined"
    )]
    Unavailable(String),
    /// The policy is unusable.
    #[error("invalid sandbox policy: {0}")]
    Policy(String),
    /// The helper program cannot be found.
    #[error("cannot find the sandbox helper: {0}")]
    Helper(String),
}

/// The sandbox: a policy and the helper program that applies it.
#[derive(Debug, Clone)]
pub struct Sandbox {
    policy: Policy,
    helper: Option<PathBuf>,
}

impl Sandbox {
    /// A sandbox applying `policy`, with the running program as the helper (it must call
    /// [`run_helper_if_requested`] first thing in `main`, as `weft` does).
    pub fn new(policy: Policy) -> Self {
        Sandbox {
            policy,
            helper: None,
        }
    }

    /// Uses `program` as the helper (`program __sandbox-exec POLICY`), e.g. a test binary.
    #[must_use]
    pub fn with_helper(mut self, program: impl Into<PathBuf>) -> Self {
        self.helper = Some(program.into());
        self
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Whether this system can apply the policy: always for [`Mode::None`]; on Linux when
    /// Landlock and user namespaces are there.
    ///
    /// # Errors
    /// [`SandboxError::Unavailable`] with the reason.
    pub fn check(&self) -> Result<(), SandboxError> {
        if self.policy.mode == Mode::None {
            return Ok(());
        }
        support().clone().map_err(SandboxError::Unavailable)
    }

    /// The command that runs `invocation` under the policy: the helper with the request (or,
    /// in mode `none`, the program itself with the given environment and folder). Callers set
    /// stdio and may convert it to `tokio::process::Command`.
    ///
    /// # Errors
    /// [`SandboxError::Unavailable`], [`SandboxError::Policy`], [`SandboxError::Helper`].
    pub fn command(&self, invocation: &Invocation) -> Result<std::process::Command, SandboxError> {
        let Some(program) = invocation.argv.first() else {
            return Err(SandboxError::Policy("no program to run".into()));
        };
        if self.policy.mode == Mode::None {
            let mut command = std::process::Command::new(program);
            command
                .args(&invocation.argv[1..])
                .env_clear()
                .envs(invocation.env.iter().map(|(k, v)| (k, v)))
                .current_dir(&invocation.cwd);
            return Ok(command);
        }
        self.check()?;
        if self.policy.mode == Mode::Workspace {
            match &self.policy.workspace {
                Some(w) if w.is_absolute() => {}
                _ => {
                    return Err(SandboxError::Policy(
                        "mode workspace needs an absolute workspace folder".into(),
                    ));
                }
            }
        }
        let helper = match &self.helper {
            Some(path) => path.clone(),
            None => std::env::current_exe().map_err(|e| SandboxError::Helper(e.to_string()))?,
        };
        let request = Request {
            policy: self.policy.clone(),
            invocation: invocation.clone(),
            parent_pid: std::process::id(),
        };
        let json =
            serde_json::to_string(&request).map_err(|e| SandboxError::Policy(e.to_string()))?;
        let mut command = std::process::Command::new(helper);
        command.arg(HELPER_ARG).arg(json).env_clear();
        Ok(command)
    }
}

/// Whether this system supports the sandbox (probed once).
fn support() -> &'static Result<(), String> {
    static SUPPORT: OnceLock<Result<(), String>> = OnceLock::new();
    SUPPORT.get_or_init(probe)
}

#[cfg(target_os = "linux")]
fn probe() -> Result<(), String> {
    linux::probe()
}

#[cfg(not(target_os = "linux"))]
fn probe() -> Result<(), String> {
    Err(format!(
        "Weft's sandbox needs Linux (Landlock and namespaces); this is {}",
        std::env::consts::OS
    ))
}

/// If the program was started as the sandbox helper (`PROGRAM __sandbox-exec …`), runs it and
/// exits the process with the command's status; otherwise returns. Call it first thing in
/// `main`, before any thread is started (the helper unshares namespaces, which needs a
/// single-threaded process).
pub fn run_helper_if_requested() {
    let mut args = std::env::args_os();
    let _program = args.next();
    if args.next().as_deref() != Some(std::ffi::OsStr::new(HELPER_ARG)) {
        return;
    }
    let rest: Vec<OsString> = args.collect();
    std::process::exit(helper_main(&rest));
}

/// The helper: `rest` are the arguments after [`HELPER_ARG`]. Returns the exit code.
pub fn helper_main(rest: &[OsString]) -> i32 {
    #[cfg(target_os = "linux")]
    {
        linux::helper(rest)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = rest;
        eprintln!("{HELPER_ERROR_PREFIX}the sandbox needs Linux");
        SETUP_FAILED
    }
}

/// Kills the process group `pgid` (a sandboxed command's helper and everything it started)
/// with `SIGKILL`. Inside the sandbox the PID namespace takes the rest down with it.
pub fn kill_process_group(pgid: u32) {
    #[cfg(unix)]
    {
        if let Ok(pgid) = i32::try_from(pgid) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    #[cfg(not(unix))]
    {
        let _ = pgid;
    }
}

/// Whether any process of the process group `pgid` still exists (zombies included).
pub fn process_group_exists(pgid: u32) -> bool {
    #[cfg(unix)]
    {
        i32::try_from(pgid).is_ok_and(|pgid| {
            nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None).is_ok()
        })
    }
    #[cfg(not(unix))]
    {
        let _ = pgid;
        false
    }
}

/// `path` made absolute against `base` and cleaned of `.`/`..` lexically.
pub fn absolute(base: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for mode in [Mode::Workspace, Mode::Strict, Mode::None] {
            assert_eq!(mode.as_str().parse::<Mode>().unwrap(), mode);
        }
        assert!("off".parse::<Mode>().is_err());
    }

    #[test]
    fn mode_none_runs_the_program_itself() {
        let sandbox = Sandbox::new(Policy::new(Mode::None, "/w"));
        let invocation = Invocation {
            argv: vec!["sh".into(), "-c".into(), "true".into()],
            env: vec![],
            cwd: "/".into(),
        };
        let command = sandbox.command(&invocation).unwrap();
        assert_eq!(command.get_program(), "sh");
    }

    #[test]
    fn absolute_cleans_paths() {
        assert_eq!(
            absolute(Path::new("/a/b"), Path::new("../c/./d")),
            PathBuf::from("/a/c/d")
        );
    }
}
