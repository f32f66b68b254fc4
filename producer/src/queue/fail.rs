//! Ending an attempt without completing it: a failed attempt is retried
//! after the delay the worker chooses, postponed without being counted
//! (a service it needs was down), or dead-lettered; a job the worker
//! cannot wait for (a graceful shutdown) is handed back uncounted. Each is
//! fenced by the lease token, so a worker that lost its lease changes
//! nothing.

use std::time::Duration;

use super::claim::ClaimedJob;
use super::convert::{millis, parse_id};
use super::error::{redis_error, QueueError};
use super::handle::Queue;

/// What to do with a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailAction {
    /// Run it again after this delay.
    Retry { delay: Duration },
    /// Run it again after this delay without counting the attempt: the job
    /// did not fail, a service it needs (the database) was unavailable.
    Postpone { delay: Duration },
    /// Give up: move it to the dead-letter set.
    DeadLetter,
}

/// Result of failing an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    RetryScheduled,
    DeadLettered,
    /// Dead-lettered, and the follow-up requested while it ran was added.
    DeadLetteredFollowUpAdded {
        job_id: u64,
    },
    LeaseLost,
}

impl Queue {
    /// Ends a failed attempt of `job`: schedules a retry or dead-letters it
    /// with `reason` (keep it short and free of message content).
    pub async fn fail(
        &self,
        job: &ClaimedJob,
        action: FailAction,
        reason: &str,
    ) -> Result<Failure, QueueError> {
        self.fail_raw(&job.member(), &job.lease_token, action, reason)
            .await
    }

    /// Hands `job` back to the queue without counting its attempt (for a
    /// graceful shutdown that cannot wait for it). `false` when the lease
    /// was no longer held.
    pub async fn release(&self, job: &ClaimedJob) -> Result<bool, QueueError> {
        let mut conn = self.conn.clone();
        let reply: String = self
            .scripts
            .release
            .key(self.keys.job_of_member(&job.member()))
            .key(self.keys.running())
            .key(self.keys.waiting())
            .key(self.keys.urgent())
            .arg(job.member())
            .arg(&job.lease_token)
            .arg(self.keys.wake_channel())
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("release"))?;
        Ok(reply == "released")
    }

    /// Dead-letters a job leased under `token` that never became a
    /// [`ClaimedJob`] (its payload does not decode; see `claim_entry`).
    pub(super) async fn dead_letter_leased(
        &self,
        member: &str,
        token: &str,
        reason: &str,
    ) -> Result<Failure, QueueError> {
        self.fail_raw(member, token, FailAction::DeadLetter, reason)
            .await
    }

    async fn fail_raw(
        &self,
        member: &str,
        token: &str,
        action: FailAction,
        reason: &str,
    ) -> Result<Failure, QueueError> {
        let (delay, counted) = fail_args(action);
        let reason: String = reason.chars().take(1_000).collect();
        let mut conn = self.conn.clone();
        let reply: Vec<String> = self
            .scripts
            .fail
            .key(self.keys.job_of_member(member))
            .key(self.keys.running())
            .key(self.keys.waiting())
            .key(self.keys.dead())
            .key(self.keys.seq())
            .key(self.keys.urgent())
            .arg(member)
            .arg(token)
            .arg(delay)
            .arg(reason)
            .arg(self.config.dead_max_count.max(1))
            .arg(millis(self.config.dead_max_age))
            .arg(self.keys.wake_channel())
            .arg(self.keys.prefix())
            .arg(counted)
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("fail"))?;
        failure(&reply)
    }
}

/// `fail.lua`'s delay (ms, -1 to dead-letter) and whether the attempt
/// counts (`"1"`) or is postponed (`"0"`).
fn fail_args(action: FailAction) -> (i64, &'static str) {
    match action {
        FailAction::Retry { delay } => (i64::try_from(delay.as_millis()).unwrap_or(i64::MAX), "1"),
        FailAction::Postpone { delay } => {
            (i64::try_from(delay.as_millis()).unwrap_or(i64::MAX), "0")
        }
        FailAction::DeadLetter => (-1, "1"),
    }
}

/// Reads `fail.lua`'s reply: `{'retry'}`, `{'dead'}`,
/// `{'dead_followup', job_id}` or `{'lost'}`.
fn failure(reply: &[String]) -> Result<Failure, QueueError> {
    match reply.first().map(String::as_str) {
        Some("retry") => Ok(Failure::RetryScheduled),
        Some("dead") => Ok(Failure::DeadLettered),
        Some("dead_followup") => Ok(Failure::DeadLetteredFollowUpAdded {
            job_id: parse_id(reply.get(1), "fail")?,
        }),
        Some("lost") => Ok(Failure::LeaseLost),
        other => Err(QueueError::Protocol {
            op: "fail",
            detail: format!("unknown outcome {other:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_postponed_attempt_goes_uncounted() {
        let delay = Duration::from_millis(1_500);
        assert_eq!(fail_args(FailAction::Retry { delay }), (1_500, "1"));
        assert_eq!(fail_args(FailAction::Postpone { delay }), (1_500, "0"));
        assert_eq!(fail_args(FailAction::DeadLetter), (-1, "1"));
        let forever = Duration::MAX;
        assert_eq!(
            fail_args(FailAction::Retry { delay: forever }),
            (i64::MAX, "1")
        );
    }

    #[test]
    fn each_fail_reply_reads_as_its_failure() {
        let reply = |parts: &[&str]| parts.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            failure(&reply(&["retry"])).unwrap(),
            Failure::RetryScheduled
        );
        assert_eq!(failure(&reply(&["dead"])).unwrap(), Failure::DeadLettered);
        assert_eq!(
            failure(&reply(&["dead_followup", "4"])).unwrap(),
            Failure::DeadLetteredFollowUpAdded { job_id: 4 }
        );
        assert_eq!(failure(&reply(&["lost"])).unwrap(), Failure::LeaseLost);
        assert!(failure(&reply(&["dead_followup"])).is_err());
        assert!(failure(&reply(&["gone"])).is_err());
    }
}
