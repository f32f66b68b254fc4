//! Cancelling a job for an operator, both halves of its fence: the queue
//! revokes the job's lease (`Queue::cancel`), then the database's entity
//! lease held under the same token is revoked, so the compaction the
//! cancelled attempt was running cannot commit — its commit is fenced on
//! that lease's owner, and writes nothing once the owner is gone (a
//! `conflict` run, as when a stalled run's lease is taken over).
//!
//! Order: the queue first, so no new attempt of the job starts under the
//! old token; the database second. An attempt that had already committed
//! before the cancel reached the database released its lease with the
//! commit: [`JobCancelled::entity_lease_revoked`] is then false, and the
//! job's work is done even though the queue records it cancelled.

use serde::Serialize;
use tracing::info;

use super::{ClientError, Compactor};
use crate::queue::{CancelThen, Cancelled};
use compactor_shared::EntityKey;

/// What cancelling a job did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobCancelled {
    #[serde(flatten)]
    pub cancelled: Cancelled,
    /// The cancelled attempt held the workstream's entity lease and lost
    /// it: its commit cannot land. False for a waiting job, a branch
    /// summary (it takes no entity lease), or an attempt that had not
    /// taken the lease (its next renewal of the queue lease cancels it) or
    /// had already let it go.
    pub entity_lease_revoked: bool,
}

impl Compactor {
    /// Cancels job `job_id` (see the module docs): dead-lettered with
    /// reason `cancelled`, or requeued, as `then` says.
    pub async fn cancel_job(
        &self,
        job_id: u64,
        then: CancelThen,
    ) -> Result<JobCancelled, ClientError> {
        let cancelled = self.queue().cancel(job_id, then).await?;
        let mut entity_lease_revoked = false;
        if let (Some(token), Ok(key)) = (
            cancelled.revoked_lease.as_deref(),
            cancelled.member.parse::<EntityKey>(),
        ) {
            if let Some(ws) = self.store().workstream_lean(&key).await? {
                entity_lease_revoked = self.store().release_lease(ws.id, token).await?;
            }
        }
        info!(
            job_id,
            was = cancelled.was.as_str(),
            then = then.as_str(),
            entity_lease_revoked,
            "job cancelled by an operator"
        );
        Ok(JobCancelled {
            cancelled,
            entity_lease_revoked,
        })
    }
}
