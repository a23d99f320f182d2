//! The Linux helper: namespaces, a new root, rlimits, cgroups, Landlock. Everything here runs
//! in the helper process (`PROGRAM __sandbox-exec …`), never in Weft's own process.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::Signal;
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{Pid, getgid, getppid, getuid, pivot_root, sethostname};

use crate::{
    HELPER_ARG, HELPER_ERROR_PREFIX, Limits, Mode, Policy, Protection, Request, SETUP_FAILED,
};

/// System folders every sandboxed program may read and execute.
const SYSTEM_DIRS: [&str; 7] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Entries of `/etc` programs need (dynamic linker, users, locale, certificates, Debian's
/// alternatives); the rest of `/etc` (e.g. `shadow`, `ssh/`) stays out of the sandbox.
const ETC_ENTRIES: [&str; 22] = [
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "hosts",
    "host.conf",
    "nsswitch.conf",
    "resolv.conf",
    "gai.conf",
    "localtime",
    "timezone",
    "ssl",
    "ca-certificates",
    "protocols",
    "services",
    "mime.types",
    "os-release",
    "profile",
    "inputrc",
    "terminfo",
];

/// Device nodes bound into the sandbox's `/dev`.
const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// Whether Landlock and user namespaces are there.
pub(crate) fn probe() -> Result<(), String> {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| r.create())
        .map_err(|e| format!("Landlock is not available in this kernel: {e}"))?;
    if !Path::new("/proc/self/ns/user").exists() {
        return Err("this kernel has no user namespaces".into());
    }
    if fs::read_to_string("/proc/sys/user/max_user_namespaces").is_ok_and(|m| m.trim() == "0") {
        return Err(
            "user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0)".into(),
        );
    }
    Ok(())
}

fn fail(message: impl std::fmt::Display) -> i32 {
    eprintln!("{HELPER_ERROR_PREFIX}{message}");
    SETUP_FAILED
}

/// `__sandbox-exec REQUEST` (outer stage) or `__sandbox-exec --init REQUEST` (PID 1).
pub(crate) fn helper(rest: &[OsString]) -> i32 {
    match rest {
        [json] => outer(json),
        [flag, json] if flag == "--init" => init(json),
        _ => fail("usage: __sandbox-exec REQUEST_JSON"),
    }
}

fn parse(json: &OsString) -> Result<Request, String> {
    let text = json.to_str().ok_or("the request is not UTF-8")?;
    serde_json::from_str(text).map_err(|e| format!("bad request: {e}"))
}

fn code_of(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(SETUP_FAILED)
}

/// Outer stage: dies with Weft, joins a cgroup, unshares the namespaces, starts the init.
fn outer(json: &OsString) -> i32 {
    let request = match parse(json) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        return fail(format!("cannot set the parent-death signal: {e}"));
    }
    if u32::try_from(getppid().as_raw()).ok() != Some(request.parent_pid) {
        return fail("the program that asked for the command is gone");
    }
    let cgroup = Cgroup::join(&request.policy.limits);
    let (uid, gid) = (getuid(), getgid());
    let mut flags = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    if !request.policy.network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    let result = unshare(flags)
        .map_err(|e| format!("cannot create namespaces: {e}"))
        .and_then(|()| {
            fs::write("/proc/self/setgroups", "deny")
                .and_then(|()| fs::write("/proc/self/uid_map", format!("0 {uid} 1")))
                .and_then(|()| fs::write("/proc/self/gid_map", format!("0 {gid} 1")))
                .map_err(|e| format!("cannot map the user: {e}"))
        })
        .and_then(|()| {
            Command::new("/proc/self/exe")
                .arg(HELPER_ARG)
                .arg("--init")
                .arg(json)
                .status()
                .map_err(|e| format!("cannot start the sandbox: {e}"))
        });
    if let Some(cgroup) = cgroup {
        cgroup.leave();
    }
    match result {
        Ok(status) => code_of(status),
        Err(e) => fail(e),
    }
}

/// PID 1 of the new namespaces: builds the root, limits itself, runs the command.
fn init(json: &OsString) -> i32 {
    let request = match parse(json) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        return fail(format!("cannot set the parent-death signal: {e}"));
    }
    let policy = &request.policy;
    if let Err(e) = build_root(policy) {
        return fail(e);
    }
    let _ = sethostname("weft-sandbox");
    if let Err(e) = set_rlimits(&policy.limits) {
        return fail(e);
    }
    if let Err(e) = landlock(policy) {
        return fail(e);
    }
    let invocation = &request.invocation;
    let Some(program) = invocation.argv.first() else {
        return fail("no program to run");
    };
    let cwd = match policy.mode {
        Mode::Workspace => invocation.cwd.clone(),
        _ => PathBuf::from("/tmp/home"),
    };
    // An absolute program lets std spawn without a fork of this (large) process.
    let mut command = Command::new(find_program(program, &invocation.env));
    command
        .args(&invocation.argv[1..])
        .env_clear()
        .envs(invocation.env.iter().map(|(k, v)| (k, v)))
        .env("HOME", "/tmp/home")
        .env("TMPDIR", "/tmp")
        .current_dir(&cwd);
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("{HELPER_ERROR_PREFIX}cannot start {program}: {e}");
            return 127;
        }
    };
    let main = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    // Reap every orphan; stop when the command itself ends. Exiting then makes the kernel kill
    // whatever is left in the PID namespace.
    loop {
        match waitpid(None::<Pid>, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == main => return code,
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == main => return 128 + signal as i32,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return fail(format!("cannot wait for the command: {e}")),
        }
    }
}

/// `program` looked up in the invocation's `PATH` (as the shell would), when it has no `/`.
fn find_program(program: &str, env: &[(String, String)]) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or("/usr/bin:/bin", |(_, v)| v.as_str());
    path.split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from(program))
}

fn sys(what: &str, path: &Path, e: impl std::fmt::Display) -> String {
    format!("cannot {what} {}: {e}", path.display())
}

/// `path` (absolute) under `root`.
fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

fn bind(source: &Path, target: &Path) -> Result<(), String> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| sys("bind-mount", source, e))
}

/// Remounts a bind mount read-only, keeping the flags the kernel locks in a user namespace.
fn remount_read_only(target: &Path) -> Result<(), String> {
    let current = statvfs(target)
        .map_err(|e| sys("inspect", target, e))?
        .flags();
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    for (fs_flag, ms_flag) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if current.contains(fs_flag) {
            flags |= ms_flag;
        }
    }
    mount(None::<&str>, target, None::<&str>, flags, None::<&str>)
        .map_err(|e| sys("make read-only", target, e))
}

/// Makes `source` visible read-only at the same path under `root` (symlinks are copied).
fn expose_read_only(root: &Path, source: &Path) -> Result<(), String> {
    let Ok(meta) = fs::symlink_metadata(source) else {
        return Ok(());
    };
    let target = under(root, source);
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(|e| sys("create", parent, e))?;
    }
    if meta.file_type().is_symlink() {
        let link = fs::read_link(source).map_err(|e| sys("read", source, e))?;
        return match symlink(&link, &target) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(sys("link", &target, e)),
        };
    }
    make_mount_point(&target, meta.is_dir())?;
    bind(source, &target)?;
    remount_read_only(&target)
}

fn make_mount_point(target: &Path, dir: bool) -> Result<(), String> {
    if dir {
        fs::create_dir_all(target).map_err(|e| sys("create", target, e))
    } else if target.exists() {
        Ok(())
    } else {
        fs::write(target, b"").map_err(|e| sys("create", target, e))
    }
}

fn tmpfs(target: &Path, options: &str, flags: MsFlags) -> Result<(), String> {
    mount(
        Some("tmpfs"),
        target,
        Some("tmpfs"),
        flags | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options),
    )
    .map_err(|e| sys("mount a tmpfs on", target, e))
}

/// The folder the new root is mounted on (in this private mount namespace only).
fn root_mount_point() -> PathBuf {
    std::env::temp_dir().join(format!("weft-sandbox-root-{}", getuid()))
}

/// Builds the sandbox's filesystem and `pivot_root`s into it.
fn build_root(policy: &Policy) -> Result<(), String> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make the mounts private: {e}"))?;
    let root = root_mount_point();
    fs::create_dir_all(&root).map_err(|e| sys("create", &root, e))?;
    tmpfs(&root, "mode=0755,size=16m", MsFlags::empty())?;
    for dir in SYSTEM_DIRS {
        expose_read_only(&root, Path::new(dir))?;
    }
    let etc = root.join("etc");
    fs::create_dir_all(&etc).map_err(|e| sys("create", &etc, e))?;
    for entry in ETC_ENTRIES {
        expose_read_only(&root, &Path::new("/etc").join(entry))?;
    }
    // /dev: a few nodes and the /proc/self/fd links.
    let dev = root.join("dev");
    fs::create_dir_all(&dev).map_err(|e| sys("create", &dev, e))?;
    for name in DEVICES {
        let source = Path::new("/dev").join(name);
        if source.exists() {
            let target = dev.join(name);
            make_mount_point(&target, false)?;
            bind(&source, &target)?;
        }
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        symlink(target, dev.join(link)).map_err(|e| sys("link", &dev.join(link), e))?;
    }
    // A fresh /proc for the new PID namespace (best effort: some containers forbid it).
    let proc_dir = root.join("proc");
    fs::create_dir_all(&proc_dir).map_err(|e| sys("create", &proc_dir, e))?;
    let _ = mount(
        Some("proc"),
        &proc_dir,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    );
    // The private /tmp, holding HOME.
    let tmp = root.join("tmp");
    fs::create_dir_all(&tmp).map_err(|e| sys("create", &tmp, e))?;
    tmpfs(
        &tmp,
        &format!("mode=1777,size={}", policy.limits.tmp_bytes.max(1 << 20)),
        MsFlags::empty(),
    )?;
    let home = tmp.join("home");
    fs::create_dir_all(&home).map_err(|e| sys("create", &home, e))?;
    // The extra read-only folders after the private /tmp, so one under /tmp stays visible.
    for extra in &policy.read_only {
        expose_read_only(&root, extra)?;
    }
    let empty = root.join(".weft-empty");
    fs::write(&empty, b"").map_err(|e| sys("create", &empty, e))?;
    if policy.mode == Mode::Workspace {
        let workspace = policy
            .workspace
            .as_deref()
            .ok_or("mode workspace needs a workspace")?;
        let target = under(&root, workspace);
        fs::create_dir_all(&target).map_err(|e| sys("create", &target, e))?;
        bind(workspace, &target)?;
        for (path, protection) in &policy.protected {
            if !path.starts_with(workspace) || path == workspace {
                continue;
            }
            let Ok(meta) = fs::symlink_metadata(path) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                continue;
            }
            let target = under(&root, path);
            match protection {
                Protection::ReadOnly => {
                    bind(path, &target)?;
                    remount_read_only(&target)?;
                }
                Protection::Hidden if meta.is_dir() => {
                    tmpfs(&target, "mode=0555,size=4k", MsFlags::MS_RDONLY)?;
                }
                Protection::Hidden => {
                    bind(&empty, &target)?;
                    remount_read_only(&target)?;
                }
            }
        }
    }
    let old = root.join(".old");
    fs::create_dir_all(&old).map_err(|e| sys("create", &old, e))?;
    pivot_root(&root, &old).map_err(|e| format!("cannot pivot_root: {e}"))?;
    std::env::set_current_dir("/").map_err(|e| format!("cannot enter the new root: {e}"))?;
    umount2("/.old", MntFlags::MNT_DETACH)
        .map_err(|e| format!("cannot detach the old root: {e}"))?;
    let _ = fs::remove_dir("/.old");
    // The root itself is read-only; /tmp and the workspace are their own mounts.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_BIND
            | MsFlags::MS_REMOUNT
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make the root read-only: {e}"))?;
    Ok(())
}

fn set_rlimits(limits: &Limits) -> Result<(), String> {
    for (resource, value) in [
        (Resource::RLIMIT_NPROC, limits.max_processes),
        (Resource::RLIMIT_DATA, limits.memory_bytes),
        (Resource::RLIMIT_FSIZE, limits.file_size_bytes),
        (Resource::RLIMIT_CPU, limits.cpu_seconds),
        (Resource::RLIMIT_CORE, 0),
    ] {
        setrlimit(resource, value, value).map_err(|e| format!("cannot set {resource:?}: {e}"))?;
    }
    Ok(())
}

/// Landlock: read-only system folders, read-write workspace and /tmp, no TCP unless allowed,
/// abstract Unix sockets and signals scoped to the sandbox.
fn landlock(policy: &Policy) -> Result<(), String> {
    let abi = ABI::V6;
    let error = |e: landlock::RulesetError| format!("cannot apply Landlock: {e}");
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(error)?
        .scope(Scope::from_all(abi))
        .map_err(error)?;
    if !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(error)?;
    }
    let mut created = ruleset.create().map_err(error)?;
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let mut rules: Vec<(PathBuf, landlock::BitFlags<AccessFs>)> = Vec::new();
    for dir in SYSTEM_DIRS.iter().chain(["/etc", "/proc"].iter()) {
        rules.push((PathBuf::from(dir), read));
    }
    for extra in &policy.read_only {
        rules.push((extra.clone(), read));
    }
    for name in DEVICES {
        rules.push((Path::new("/dev").join(name), AccessFs::from_file(abi)));
    }
    rules.push((PathBuf::from("/tmp"), all));
    if policy.mode == Mode::Workspace
        && let Some(workspace) = &policy.workspace
    {
        rules.push((workspace.clone(), all));
    }
    for (path, access) in rules {
        let Ok(fd) = PathFd::new(&path) else {
            continue;
        };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(error)?;
    }
    let status = created.restrict_self().map_err(error)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("Landlock is not enforced by this kernel".into());
    }
    Ok(())
}

/// A cgroup (v1 `pids` and `memory`, or v2) holding the helper and everything it starts.
struct Cgroup {
    /// (the new cgroup folder, the cgroup folder to go back to)
    joined: Vec<(PathBuf, PathBuf)>,
}

impl Cgroup {
    /// Joins a new cgroup with the limits, where the cgroup tree is writable (best effort).
    fn join(limits: &Limits) -> Option<Cgroup> {
        let own = fs::read_to_string("/proc/self/cgroup").ok()?;
        let pid = std::process::id();
        let name = format!("weft-sandbox-{pid}");
        let mut joined = Vec::new();
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let path = path.trim_start_matches('/');
            let (base, files): (PathBuf, Vec<(&str, String)>) = match controllers {
                "pids" => (
                    Path::new("/sys/fs/cgroup/pids").join(path),
                    vec![("pids.max", (limits.max_processes + 2).to_string())],
                ),
                "memory" => (
                    Path::new("/sys/fs/cgroup/memory").join(path),
                    vec![("memory.limit_in_bytes", limits.memory_bytes.to_string())],
                ),
                "" if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() => (
                    Path::new("/sys/fs/cgroup").join(path),
                    vec![
                        ("pids.max", (limits.max_processes + 2).to_string()),
                        ("memory.max", limits.memory_bytes.to_string()),
                    ],
                ),
                _ => continue,
            };
            if !base.join("cgroup.procs").exists() {
                continue;
            }
            remove_stale(&base);
            let dir = base.join(&name);
            if fs::create_dir(&dir).is_err() {
                continue;
            }
            let limited = files
                .iter()
                .all(|(file, value)| fs::write(dir.join(file), value).is_ok());
            if limited && fs::write(dir.join("cgroup.procs"), pid.to_string()).is_ok() {
                joined.push((dir, base));
            } else {
                let _ = fs::remove_dir(&dir);
            }
        }
        (!joined.is_empty()).then_some(Cgroup { joined })
    }

    /// Goes back to the original cgroups and removes the new ones.
    fn leave(self) {
        let pid = std::process::id().to_string();
        for (dir, base) in self.joined {
            let _ = fs::write(base.join("cgroup.procs"), &pid);
            // The PID namespace's last processes may still be exiting: retry briefly.
            for _ in 0..100 {
                match fs::remove_dir(&dir) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {}
                    _ => break,
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
    }
}

/// Removes empty `weft-sandbox-PID` cgroups whose helper is gone (killed before cleaning up).
fn remove_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("weft-sandbox-")) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = fs::remove_dir(entry.path());
        }
    }
}
