//! Settling: the worker's one round trip per batch. `settle.lua` completes
//! the jobs that finished since the last call (adding the follow-ups
//! requested while they ran) and leases due jobs to fill the slots they
//! freed. Claiming one job ([`Queue::claim`]), completing one
//! ([`Queue::complete`]) and both at once ([`Queue::complete_and_claim`])
//! are short forms of the same call, so there is a single claim path and a
//! single completion path.

use std::time::Duration;

use redis::Value;

use super::claim::{ClaimOutcome, ClaimedJob};
use super::convert::{millis, parse_id};
use super::error::{redis_error, QueueError};
use super::handle::Queue;

/// Most jobs one [`Queue::settle`] call completes, and most it claims (the
/// scripts pass batches to variadic commands, which must stay far below
/// Lua's stack limit).
pub const MAX_SETTLE_BATCH: usize = 128;

/// What one [`Queue::settle`] call did.
#[derive(Debug)]
pub struct Settled {
    /// One per finished job, in the order they were given.
    pub completions: Vec<Completion>,
    /// At most as many as were wanted: jobs now leased to the worker, and
    /// unusable entries taken off the queue (never [`ClaimOutcome::Empty`]).
    pub claimed: Vec<ClaimOutcome>,
    /// When fewer were claimed than wanted: how soon the next delayed job
    /// is due, if one is waiting.
    pub next_due_in: Option<Duration>,
}

/// Result of completing a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    Done,
    /// A request arrived while it ran: this follow-up job was added.
    FollowUpAdded {
        job_id: u64,
    },
    /// The lease was no longer held (expired and reclaimed): nothing changed.
    LeaseLost,
}

impl Queue {
    /// Acknowledges `finished` jobs as completed and leases up to `wanted`
    /// due jobs to `worker`, in one round trip: a busy worker settles every
    /// job that finished since its last call and fills the slots they
    /// freed. A finished job whose lease was lost is left untouched
    /// ([`Completion::LeaseLost`]).
    pub async fn settle(
        &self,
        finished: &[&ClaimedJob],
        wanted: usize,
        worker: &str,
    ) -> Result<Settled, QueueError> {
        for len in [finished.len(), wanted] {
            if len > MAX_SETTLE_BATCH {
                return Err(QueueError::BatchTooLarge {
                    op: "settle",
                    len,
                    max: MAX_SETTLE_BATCH,
                });
            }
        }
        let mut invocation = self.scripts.settle.prepare_invoke();
        invocation
            .key(self.keys.running())
            .key(self.keys.waiting())
            .key(self.keys.done())
            .key(self.keys.seq())
            .key(self.keys.urgent())
            .arg(self.keys.prefix())
            .arg(self.keys.wake_channel())
            .arg(self.config.done_max_count)
            .arg(millis(self.config.done_max_age))
            .arg(millis(self.config.lease_ttl))
            .arg(worker)
            .arg(nonce())
            .arg(wanted)
            .arg(finished.len());
        for job in finished {
            invocation.arg(job.member()).arg(&job.lease_token);
        }
        let mut conn = self.conn.clone();
        let (completions, entries, next_due): (Vec<Vec<String>>, Vec<Vec<Value>>, String) =
            invocation
                .invoke_async(&mut conn)
                .await
                .map_err(redis_error("settle"))?;
        if completions.len() != finished.len() {
            return Err(QueueError::Protocol {
                op: "settle",
                detail: format!(
                    "{} completions for {} finished jobs",
                    completions.len(),
                    finished.len()
                ),
            });
        }
        let completions = completions
            .iter()
            .map(|c| completion(c, "settle"))
            .collect::<Result<Vec<_>, _>>()?;
        let mut claimed = Vec::with_capacity(entries.len());
        for entry in entries {
            claimed.push(self.claim_entry(entry).await);
        }
        Ok(Settled {
            completions,
            claimed,
            next_due_in: next_due.parse::<u64>().ok().map(Duration::from_millis),
        })
    }

    /// Takes the oldest due job of the urgent lane, else of the normal
    /// lane, if any, with a lease for `worker`.
    pub async fn claim(&self, worker: &str) -> Result<ClaimOutcome, QueueError> {
        let settled = self.settle(&[], 1, worker).await?;
        Ok(first_claim(settled))
    }

    /// Completes `job` and claims the next due job for `worker`, in one
    /// round trip.
    pub async fn complete_and_claim(
        &self,
        job: &ClaimedJob,
        worker: &str,
    ) -> Result<(Completion, ClaimOutcome), QueueError> {
        let mut settled = self.settle(&[job], 1, worker).await?;
        let completion = settled.completions.remove(0);
        Ok((completion, first_claim(settled)))
    }

    /// Marks `job` finished, adding its follow-up if one was requested.
    pub async fn complete(&self, job: &ClaimedJob) -> Result<Completion, QueueError> {
        let mut settled = self.settle(&[job], 0, "").await?;
        Ok(settled.completions.remove(0))
    }
}

/// The first claim entry of a settle reply, or why there was none.
fn first_claim(settled: Settled) -> ClaimOutcome {
    settled
        .claimed
        .into_iter()
        .next()
        .unwrap_or(ClaimOutcome::Empty {
            next_due_in: settled.next_due_in,
        })
}

/// Reads one completion of a settle reply: `{'done'}`, `{'lost'}` or
/// `{'followup', job_id}`.
fn completion(reply: &[String], op: &'static str) -> Result<Completion, QueueError> {
    match reply.first().map(String::as_str) {
        Some("done") => Ok(Completion::Done),
        Some("lost") => Ok(Completion::LeaseLost),
        Some("followup") => Ok(Completion::FollowUpAdded {
            job_id: parse_id(reply.get(1), op)?,
        }),
        other => Err(QueueError::Protocol {
            op,
            detail: format!("unknown outcome {other:?}"),
        }),
    }
}

/// A per-claim nonce so lease tokens of different claims never repeat,
/// even if a job id and attempt did (e.g. after Redis lost its data).
fn nonce() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}{:x}{n:x}", std::process::id(), t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|p| (*p).to_owned()).collect()
    }

    #[test]
    fn each_completion_reply_reads_as_its_completion() {
        assert_eq!(
            completion(&reply(&["done"]), "settle").unwrap(),
            Completion::Done
        );
        assert_eq!(
            completion(&reply(&["lost"]), "settle").unwrap(),
            Completion::LeaseLost
        );
        assert_eq!(
            completion(&reply(&["followup", "9"]), "settle").unwrap(),
            Completion::FollowUpAdded { job_id: 9 }
        );
        assert!(completion(&reply(&["followup"]), "settle").is_err());
        assert!(completion(&reply(&["finished"]), "settle").is_err());
        assert!(completion(&[], "settle").is_err());
    }

    #[test]
    fn an_empty_claim_says_when_the_next_job_is_due() {
        let settled = |claimed| Settled {
            completions: Vec::new(),
            claimed,
            next_due_in: Some(Duration::from_millis(40)),
        };
        let outcome = first_claim(settled(Vec::new()));
        assert!(matches!(
            outcome,
            ClaimOutcome::Empty { next_due_in: Some(d) } if d == Duration::from_millis(40)
        ));
        let unusable = ClaimOutcome::Unusable {
            member: "compact:chat:1".into(),
            error: "orphan".into(),
        };
        let outcome = first_claim(settled(vec![unusable]));
        assert!(matches!(outcome, ClaimOutcome::Unusable { .. }));
    }

    #[test]
    fn nonces_never_repeat_in_a_process() {
        let nonces: std::collections::HashSet<String> = (0..1000).map(|_| nonce()).collect();
        assert_eq!(nonces.len(), 1000);
    }
}
