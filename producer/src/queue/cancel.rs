//! Cancelling a job by id, for an operator (`scripts/cancel.lua`, one
//! atomic step). A waiting job leaves its lane. A running job's lease is
//! revoked: its worker's next renewal is refused, which cancels the
//! attempt (the heartbeat layer of the worker runtime), and whatever the
//! attempt still reports — done, failed, handed back — finds the lease
//! lost and changes nothing. The operator chooses what becomes of the job:
//! a dead letter with reason `cancelled` (listed, retried and purged like
//! any other) or a requeue at its original place in line.
//!
//! A revoked running lease is also marked (`Keys::revoked_lease`, for a
//! few lease TTLs), for an attempt that had not yet taken its entity lease
//! when it was cancelled: it reads the mark once it holds the entity lease
//! and stops before any work ([`Queue::lease_revoked`]).
//!
//! The queue's lease is not what fences the database: the commit of a
//! compaction is fenced by the entity lease in the database, whose owner is
//! this same lease token. [`Cancelled::revoked_lease`] names it, so the
//! caller that holds the store revokes that one too
//! (`Compactor::cancel_job` does), and a commit the cancelled attempt was
//! about to make is refused.

use serde::{Deserialize, Serialize};

use super::convert::millis;
use super::error::{redis_error, QueueError};
use super::handle::Queue;
use super::jobs::JobView;

/// What becomes of a cancelled job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum CancelThen {
    /// Dead-lettered with reason `cancelled`.
    Dead,
    /// Back in its lane at its original place in line (a running job's
    /// attempt is not counted).
    Requeue,
}

impl CancelThen {
    pub fn as_str(self) -> &'static str {
        match self {
            CancelThen::Dead => "dead",
            CancelThen::Requeue => "requeue",
        }
    }
}

/// The reason a cancelled job's dead letter gives.
pub const CANCELLED_REASON: &str = "cancelled";

/// A job that was cancelled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cancelled {
    pub job_id: u64,
    /// Its queue member (`compact:{domain}:{entity_id}`, or a branch's).
    pub member: String,
    /// `waiting` or `running`: what it was when cancelled.
    pub was: JobView,
    pub then: CancelThen,
    /// The lease token revoked (a running job): the owner of the entity
    /// lease in the database too, which the caller revokes as well.
    #[serde(skip)]
    pub revoked_lease: Option<String>,
    /// The follow-up a dead-lettered running job had recorded, added now.
    pub followup_job_id: Option<u64>,
}

/// How many lease TTLs the mark of a revoked lease is kept: longer than an
/// attempt may wait for its entity lease (two TTLs) before it starts.
const REVOKED_MARK_TTLS: u64 = 4;

impl Queue {
    /// Whether an operator revoked the lease `token` (cancelled its job):
    /// an attempt reads it once it holds its entity lease, so one that had
    /// not taken it when the job was cancelled does not start (its queue
    /// lease renewal would stop it a little later; its commit must not
    /// land before).
    pub async fn lease_revoked(&self, token: &str) -> Result<bool, QueueError> {
        let mut conn = self.conn.clone();
        let n: u64 = redis::cmd("EXISTS")
            .arg(self.keys.revoked_lease(token))
            .query_async(&mut conn)
            .await
            .map_err(redis_error("lease_revoked"))?;
        Ok(n > 0)
    }

    /// Cancels job `job_id` (see the module docs). [`QueueError::JobNotFound`]
    /// for an unknown id, [`QueueError::JobFinished`] for a job that is
    /// done or dead already.
    pub async fn cancel(&self, job_id: u64, then: CancelThen) -> Result<Cancelled, QueueError> {
        let mut conn = self.conn.clone();
        let reply: Vec<String> = self
            .scripts
            .cancel
            .key(self.keys.job_ids())
            .key(self.keys.running())
            .key(self.keys.waiting())
            .key(self.keys.urgent())
            .key(self.keys.dead())
            .key(self.keys.seq())
            .key(self.keys.done())
            .arg(self.keys.prefix())
            .arg(job_id)
            .arg(then.as_str())
            .arg(self.config.dead_max_count.max(1))
            .arg(millis(self.config.dead_max_age))
            .arg(self.keys.wake_channel())
            .arg(millis(self.config.lease_ttl).saturating_mul(REVOKED_MARK_TTLS))
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("cancel"))?;
        cancelled(job_id, then, &reply)
    }
}

/// Reads `cancel.lua`'s reply.
fn cancelled(job_id: u64, then: CancelThen, reply: &[String]) -> Result<Cancelled, QueueError> {
    let protocol = || QueueError::Protocol {
        op: "cancel",
        detail: format!("unexpected reply {reply:?}"),
    };
    match reply.first().map(String::as_str) {
        Some("not_found") => Err(QueueError::JobNotFound { job_id }),
        Some("finished") => Err(QueueError::JobFinished {
            job_id,
            state: match reply.get(1).map(String::as_str) {
                Some("dead") => "dead",
                _ => "done",
            },
        }),
        Some("cancelled") => {
            let [_, member, was, token, followup] = reply else {
                return Err(protocol());
            };
            let was = match was.as_str() {
                "running" => JobView::Running,
                "waiting" => JobView::Waiting,
                _ => return Err(protocol()),
            };
            Ok(Cancelled {
                job_id,
                member: member.clone(),
                was,
                then,
                revoked_lease: (!token.is_empty()).then(|| token.clone()),
                followup_job_id: followup.parse().ok(),
            })
        }
        _ => Err(protocol()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|p| (*p).to_owned()).collect()
    }

    #[test]
    fn each_reply_reads_as_its_outcome() {
        let ok = cancelled(
            7,
            CancelThen::Dead,
            &reply(&["cancelled", "compact:a:b", "running", "7:1:x", "8"]),
        )
        .unwrap();
        assert_eq!(ok.was, JobView::Running);
        assert_eq!(ok.revoked_lease.as_deref(), Some("7:1:x"));
        assert_eq!(ok.followup_job_id, Some(8));
        let waiting = cancelled(
            7,
            CancelThen::Requeue,
            &reply(&["cancelled", "compact:a:b", "waiting", "", ""]),
        )
        .unwrap();
        assert_eq!(waiting.revoked_lease, None);
        assert_eq!(waiting.followup_job_id, None);
        assert!(matches!(
            cancelled(7, CancelThen::Dead, &reply(&["not_found"])),
            Err(QueueError::JobNotFound { job_id: 7 })
        ));
        assert!(matches!(
            cancelled(7, CancelThen::Dead, &reply(&["finished", "dead"])),
            Err(QueueError::JobFinished { state: "dead", .. })
        ));
        assert!(matches!(
            cancelled(7, CancelThen::Dead, &reply(&["cancelled", "m"])),
            Err(QueueError::Protocol { .. })
        ));
    }
}
