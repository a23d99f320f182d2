//! Who may drive a run (RUNTIME.md §6). A process owns a run through
//!
//! 1. an **OS advisory lock** on a per-host lock file (`File::try_lock`): the kernel
//!    releases it when the process dies, however it dies, so an owner on this machine that was
//!    killed is known dead at once — `kill -9` then `weft resume` needs no wait and no
//!    `--force` — and two processes on this machine can never both drive a run;
//! 2. a **lease** in the store (owner, deadline, epoch) claimed with one conditional UPDATE
//!    and renewed by a heartbeat task, so an owner on another machine is presumed alive until
//!    its lease lapses;
//! 3. a **fence**: every write of the owner checks the epoch it claimed, so a stopped owner
//!    that wakes up after another took over has its next write rejected and stops.
//!
//! `WEFT_HOST_ID` overrides the host name (containers sharing a PostgreSQL store; tests that
//! play a second machine); `WEFT_LEASE_TTL_MS` the lease length (default 30 s).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use weft_store::lease::{Claim, Fence, Leases as _};
use weft_store::{Lease, Store};

use crate::error::RunError;

/// The default lease length.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

/// This machine's name as owners record it.
pub fn host_id() -> String {
    if let Ok(host) = std::env::var("WEFT_HOST_ID")
        && !host.trim().is_empty()
    {
        return host.trim().to_owned();
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn lease_ttl() -> Duration {
    std::env::var("WEFT_LEASE_TTL_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map_or(DEFAULT_LEASE_TTL, Duration::from_millis)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The folder of the lock files of `store`'s runs on `host`: beside a SQLite file, in the
/// temporary folder for a server store.
fn lock_dir(store: &Store, host: &str) -> PathBuf {
    let location = store.location();
    let base = match location.strip_prefix("sqlite:") {
        Some(path) => Path::new(path)
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
            .join("locks"),
        None => std::env::temp_dir().join(format!(
            "weft-locks-{}",
            &crate::spec::hex(&sha(location.as_bytes()))[..16]
        )),
    };
    base.join(sanitize(host))
}

fn sha(bytes: &[u8]) -> Vec<u8> {
    use sha2::{Digest as _, Sha256};
    Sha256::digest(bytes).to_vec()
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The OS lock of one run on this host, held while the value lives.
#[derive(Debug)]
struct LocalLock {
    _file: File,
}

impl LocalLock {
    /// `Ok(None)` when a live process on this host holds it.
    fn try_acquire(dir: &Path, run_id: &str) -> Result<Option<LocalLock>, RunError> {
        let io = |e: std::io::Error| RunError::Lock {
            path: dir.display().to_string(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let path = dir.join(format!("{}.lock", sanitize(run_id)));
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(LocalLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
        }
    }
}

/// A run owned by this process: its fence (attach it to every write with
/// [`Store::fenced`]), the OS lock and the heartbeat. Dropping it stops the heartbeat and
/// releases the OS lock; [`Ownership::release`] also gives the lease up.
#[derive(Debug)]
pub struct Ownership {
    fence: Arc<Fence>,
    store: Store,
    heartbeat: JoinHandle<()>,
    _lock: LocalLock,
}

impl Ownership {
    /// Claims `run_id` for this process.
    ///
    /// # Errors
    /// [`RunError::Owned`] when a live process on this machine holds it, or another machine
    /// holds an unexpired lease; storage failures.
    pub async fn claim(store: &Store, run_id: &str) -> Result<Ownership, RunError> {
        let host = host_id();
        let owned = |lease: Lease| RunError::Owned {
            run: run_id.to_owned(),
            owner: lease.owner.unwrap_or_else(|| "another process".into()),
        };
        let Some(lock) = LocalLock::try_acquire(&lock_dir(store, &host), run_id)? else {
            let lease = store.lease(run_id).await?.unwrap_or_default();
            return Err(owned(lease));
        };
        let ttl = lease_ttl();
        let claim = Claim {
            owner: format!("{host}/{}/{:08x}", std::process::id(), fastrand::u32(..)),
            host,
            local_owner_dead: true,
            ttl_ms: i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX),
            now_ms: now_ms(),
        };
        let lease = match store.claim(run_id, &claim).await? {
            Ok(lease) => lease,
            Err(holder) => return Err(owned(holder)),
        };
        let fence = Arc::new(Fence::new(run_id, lease.epoch));
        let heartbeat = tokio::spawn(heartbeat(store.clone(), fence.clone(), ttl));
        Ok(Ownership {
            fence,
            store: store.clone(),
            heartbeat,
            _lock: lock,
        })
    }

    /// The fence of this ownership.
    pub fn fence(&self) -> &Arc<Fence> {
        &self.fence
    }

    /// Gives the run up: the lease is cleared (anyone may resume it at once), the heartbeat
    /// stops, the OS lock is released.
    pub async fn release(self) {
        self.heartbeat.abort();
        if let Err(error) = self.store.release(&self.fence).await {
            tracing::debug!(%error, "releasing a run's lease failed");
        }
    }
}

impl Drop for Ownership {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

/// Renews the lease every third of its length; a rejected renewal (another owner) fires
/// the fence's `lost` token, which stops the run.
async fn heartbeat(store: Store, fence: Arc<Fence>, ttl: Duration) {
    let period = (ttl / 3).max(Duration::from_millis(10));
    loop {
        tokio::time::sleep(period).await;
        let until = now_ms() + i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        match store.renew(&fence, until).await {
            Ok(()) => {}
            Err(weft_store::StoreError::Fenced { .. }) => {
                fence.lost().cancel();
                return;
            }
            Err(error) => tracing::warn!(%error, "renewing a run's lease failed"),
        }
    }
}

/// The status to show for a stored run: a `running` run whose owner is gone — on this
/// machine its OS lock is free, elsewhere its lease lapsed — reads as `interrupted`.
pub fn effective_status(store: &Store, run: &weft_store::RunRecord) -> weft_store::RunStatus {
    use weft_store::RunStatus;
    if run.status != RunStatus::Running {
        return run.status;
    }
    let host = host_id();
    let owner_here = run
        .lease
        .owner
        .as_deref()
        .map_or(run.owner_host.as_deref() == Some(host.as_str()), |owner| {
            owner.starts_with(&format!("{host}/"))
        });
    if owner_here {
        // The lock is free only when no live process here holds it.
        match LocalLock::try_acquire(&lock_dir(store, &host), &run.run_id) {
            Ok(Some(_)) => RunStatus::Interrupted,
            _ => RunStatus::Running,
        }
    } else if run.lease.until_ms.is_some_and(|until| until < now_ms()) {
        RunStatus::Interrupted
    } else {
        RunStatus::Running
    }
}
