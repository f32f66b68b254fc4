//! The end of a chat request's wait for a compaction.

use std::time::Duration;

use compactor_shared::EntityKey;
use tracing::debug;

use super::catalogue::{names, WaitOutcome};
use super::InternalEvent;
use crate::client::Readiness;
use crate::metrics::domain_label;

/// `Compactor::wait` on `key` with `timeout` ended in `readiness`. A wait
/// with a zero timeout that found the compaction pending is a poll
/// (`polled`): the client asked whether one is pending and chose not to
/// wait, so it is no timeout — the timeout counter (and the alert on it)
/// counts only waits that waited and gave up.
#[derive(Debug)]
pub(crate) struct WaitEnded<'a> {
    pub key: &'a EntityKey,
    pub timeout: Duration,
    pub readiness: &'a Readiness,
}

impl WaitEnded<'_> {
    /// The `outcome` label of [`names::LEASE_WAIT_SECONDS`].
    pub(crate) fn outcome(&self) -> WaitOutcome {
        match self.readiness {
            Readiness::Ready { .. } => WaitOutcome::Ready,
            Readiness::Compacted { .. } => WaitOutcome::Compacted,
            Readiness::TimedOut { .. } if self.timeout.is_zero() => WaitOutcome::Polled,
            Readiness::TimedOut { .. } => WaitOutcome::Timeout,
            Readiness::NoLiveWorker { .. } => WaitOutcome::NoLiveWorker,
        }
    }
}

impl InternalEvent for WaitEnded<'_> {
    fn emit(&self) {
        let outcome = self.outcome();
        let waited = self.readiness.waited();
        let domain = domain_label(self.key.domain());
        debug!(
            outcome = outcome.as_str(),
            waited_ms = waited.as_millis() as u64,
            timeout_ms = self.timeout.as_millis() as u64,
            "wait for compaction ended"
        );
        metrics::histogram!(names::LEASE_WAIT_SECONDS, "domain" => domain.clone(), "outcome" => outcome.as_str())
            .record(waited.as_secs_f64());
        if outcome == WaitOutcome::Timeout {
            metrics::counter!(names::LEASE_WAIT_TIMEOUTS_TOTAL, "domain" => domain).increment(1);
        }
    }
}

/// The queue could not be read while waiting on a compaction (Redis down):
/// the wait holds on and looks again, until its timeout. Debug level and
/// no metric: it repeats for the outage, whose errors the worker counts.
#[derive(Debug)]
pub(crate) struct QueueUnreadableWhileWaiting<'a> {
    pub error: &'a crate::queue::QueueError,
}

impl InternalEvent for QueueUnreadableWhileWaiting<'_> {
    fn emit(&self) {
        debug!(error = %self.error, "queue unreadable while waiting; holding on");
    }
}

/// A wait ended on a commit it saw in the workstream's row while the
/// queue could not tell it (Redis down or frozen). Info level: rare, and
/// the one place a wait answers without the queue.
#[derive(Debug)]
pub(crate) struct CommitSeenWithoutQueue;

impl InternalEvent for CommitSeenWithoutQueue {
    fn emit(&self) {
        tracing::info!(
            "a commit seen in the workstream's row ended a wait while the queue did not answer"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::WaitPhase;
    use crate::events::capture::{capture, Value};

    fn timed_out() -> Readiness {
        Readiness::TimedOut {
            waited: Duration::from_millis(1500),
            phase: WaitPhase::Running,
            job_id: Some(7),
        }
    }

    #[test]
    fn a_timeout_is_timed_and_counted() {
        let key = EntityKey::parse("events-wait-unlisted", "e").unwrap();
        let readiness = timed_out();
        let recorded = capture(|| {
            WaitEnded {
                key: &key,
                timeout: Duration::from_secs(1),
                readiness: &readiness,
            }
            .emit()
        });
        recorded.assert_one(
            names::LEASE_WAIT_SECONDS,
            &[("domain", "other"), ("outcome", "timeout")],
            Value::Histogram(vec![1.5]),
        );
        recorded.assert_one(
            names::LEASE_WAIT_TIMEOUTS_TOTAL,
            &[("domain", "other")],
            Value::Counter(1),
        );
        assert_eq!(recorded.len(), 2, "{recorded:?}");
    }

    #[test]
    fn a_poll_is_timed_but_no_timeout_and_an_allowed_domain_is_its_own_label() {
        crate::metrics::allow_domains(["events-wait-listed"]);
        let key = EntityKey::parse("events-wait-listed", "e").unwrap();
        let readiness = timed_out();
        let recorded = capture(|| {
            WaitEnded {
                key: &key,
                timeout: Duration::ZERO,
                readiness: &readiness,
            }
            .emit()
        });
        recorded.assert_one(
            names::LEASE_WAIT_SECONDS,
            &[("domain", "events-wait-listed"), ("outcome", "polled")],
            Value::Histogram(vec![1.5]),
        );
        assert_eq!(recorded.len(), 1, "{recorded:?}");
    }
}
