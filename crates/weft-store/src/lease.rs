//! Run ownership (runtime spec §5.9, RUNTIME.md §6): a run is owned through a **lease**
//! (`lease_owner`, `lease_until`, `lease_epoch` on its row) claimed with one conditional
//! UPDATE, and every write of its owner is **fenced** by the epoch it claimed: once another
//! process has claimed the run (a newer epoch), the old owner's next write — checkpoint,
//! ledger, event or run record — is rejected with [`StoreError::Fenced`] and its
//! [`Fence::lost`] token fires, in `async` durability too.
//!
//! Telling whether an owner *on this machine* died is not the store's job: the runtime holds
//! an OS advisory lock while it owns a run and passes [`Claim::local_owner_dead`] when it got
//! that lock, so a run whose owner was killed is taken over at once, without waiting for its
//! lease to lapse.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::error::StoreError;
use crate::model::Lease;
use crate::sql::stmt;
use crate::store::Store;

/// The epoch a run's writer holds; attached to a [`Store`] by [`Store::fenced`].
#[derive(Debug)]
pub struct Fence {
    pub(crate) run_id: String,
    pub(crate) epoch: i64,
    lost: CancellationToken,
}

impl Fence {
    /// A fence for `run_id` at `epoch`.
    pub fn new(run_id: impl Into<String>, epoch: i64) -> Self {
        Fence {
            run_id: run_id.into(),
            epoch,
            lost: CancellationToken::new(),
        }
    }

    /// Cancelled when a write was rejected because another owner claimed the run.
    pub fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    /// The epoch.
    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    /// Checks the stored epoch; a mismatch fires [`Fence::lost`].
    pub(crate) fn check(&self, current: Option<i64>) -> Result<(), StoreError> {
        match current {
            Some(current) if current == self.epoch => Ok(()),
            // A run row that does not exist yet (the creating write) has nothing to fence.
            None if self.epoch == 0 => Ok(()),
            current => {
                self.lost.cancel();
                Err(StoreError::Fenced {
                    run_id: self.run_id.clone(),
                    held: self.epoch,
                    current: current.unwrap_or(-1),
                })
            }
        }
    }
}

/// A request to own a run.
#[derive(Debug, Clone)]
pub struct Claim {
    /// Who claims (`HOST/PID/NONCE`: unique per process and claim).
    pub owner: String,
    /// The claimant's host: an owner on the same host is dead when `local_owner_dead`.
    pub host: String,
    /// The caller holds the run's OS lock on this machine, so no live process here owns it.
    pub local_owner_dead: bool,
    /// How long the lease holds without a renewal.
    pub ttl_ms: i64,
    /// Now, in milliseconds since the Unix epoch.
    pub now_ms: i64,
}

/// Claiming, renewing and releasing run leases.
#[async_trait]
pub trait Leases: Send + Sync {
    /// Claims `run_id` when nobody holds it, its lease lapsed, the claimant held it already,
    /// or its owner was on this host and is dead. Returns the new lease (epoch incremented),
    /// or the current holder's lease when the claim was refused.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::NotFound`] for an unknown run.
    async fn claim(&self, run_id: &str, claim: &Claim) -> Result<Result<Lease, Lease>, StoreError>;

    /// Extends the lease of the holder of `fence`.
    ///
    /// # Errors
    /// [`StoreError::Fenced`] when another owner claimed the run since.
    async fn renew(&self, fence: &Arc<Fence>, until_ms: i64) -> Result<(), StoreError>;

    /// Gives the run up (it stays resumable at once, by anyone).
    ///
    /// # Errors
    /// [`StoreError::Fenced`] when another owner claimed the run since.
    async fn release(&self, fence: &Arc<Fence>) -> Result<(), StoreError>;
}

#[async_trait]
impl Leases for Store {
    async fn claim(&self, run_id: &str, claim: &Claim) -> Result<Result<Lease, Lease>, StoreError> {
        let until = claim.now_ms + claim.ttl_ms;
        let same_host = format!("{}/%", claim.host);
        self.commit(
            None,
            vec![stmt!(
                "UPDATE runs SET lease_owner = $1, lease_until = $2, lease_epoch = lease_epoch + 1 \
             WHERE run_id = $3 AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until < $4 \
             OR lease_owner = $1 OR ($5 = 1 AND lease_owner LIKE $6))",
                claim.owner.as_str(),
                until,
                run_id,
                claim.now_ms,
                claim.local_owner_dead,
                same_host
            )],
        )
        .await?;
        let lease = self
            .lease(run_id)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: "run",
                id: run_id.to_owned(),
            })?;
        Ok(if lease.owner.as_deref() == Some(claim.owner.as_str()) {
            Ok(lease)
        } else {
            Err(lease)
        })
    }

    async fn renew(&self, fence: &Arc<Fence>, until_ms: i64) -> Result<(), StoreError> {
        self.commit(
            Some(fence.clone()),
            vec![stmt!(
                "UPDATE runs SET lease_until = $1 WHERE run_id = $2",
                until_ms,
                fence.run_id.as_str()
            )],
        )
        .await
    }

    async fn release(&self, fence: &Arc<Fence>) -> Result<(), StoreError> {
        self.commit(
            Some(fence.clone()),
            vec![stmt!(
                "UPDATE runs SET lease_owner = NULL, lease_until = NULL WHERE run_id = $1",
                fence.run_id.as_str()
            )],
        )
        .await
    }
}
