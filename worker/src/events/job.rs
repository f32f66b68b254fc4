//! One attempt's life in the runtime, and how its job ends.

use std::time::Duration;

use compactor_producer::events::catalogue::{names, DeadLetterReason, FailureReason, RunOutcome};
use compactor_producer::queue::FailAction;
use tracing::{debug, error, info, warn};

use super::InternalEvent;

/// An attempt started, after `waited` in line (`domain`: the job's label,
/// through the allow-list).
#[derive(Debug)]
pub(crate) struct AttemptStarted<'a> {
    pub queue: &'a str,
    pub domain: &'a str,
    pub waited: Duration,
}

impl InternalEvent for AttemptStarted<'_> {
    fn emit(&self) {
        metrics::counter!(names::JOBS_STARTED_TOTAL, "queue" => self.queue.to_owned(), "domain" => self.domain.to_owned())
            .increment(1);
        metrics::histogram!(names::JOB_QUEUE_WAIT_SECONDS, "queue" => self.queue.to_owned(), "domain" => self.domain.to_owned())
            .record(self.waited.as_secs_f64());
        debug!(
            waited_ms = crate::telemetry::millis(self.waited),
            "attempt started"
        );
    }
}

/// An attempt's handler returned (or was stopped) after `elapsed`. Metrics
/// only: the outcome's own lines carry the span's `duration_ms`.
#[derive(Debug)]
pub(crate) struct AttemptEnded<'a> {
    pub queue: &'a str,
    pub domain: &'a str,
    pub outcome: RunOutcome,
    pub elapsed: Duration,
}

impl InternalEvent for AttemptEnded<'_> {
    fn emit(&self) {
        metrics::histogram!(names::JOB_RUN_SECONDS, "queue" => self.queue.to_owned(), "domain" => self.domain.to_owned(), "outcome" => self.outcome.as_str())
            .record(self.elapsed.as_secs_f64());
    }
}

/// An attempt failed for `reason`. Metrics only: what follows (retry,
/// dead letter, lost lease) is logged by its own event.
#[derive(Debug)]
pub(crate) struct AttemptFailed<'a> {
    pub queue: &'a str,
    pub domain: &'a str,
    pub reason: FailureReason,
}

impl InternalEvent for AttemptFailed<'_> {
    fn emit(&self) {
        metrics::counter!(names::JOBS_FAILED_TOTAL, "queue" => self.queue.to_owned(), "domain" => self.domain.to_owned(), "reason" => self.reason.as_str())
            .increment(1);
    }
}

/// The queue took a succeeded job as done; `follow_up`: the job the
/// follow-up requested while it ran was queued as.
#[derive(Debug)]
pub(crate) struct JobCompleted<'a> {
    pub queue: &'a str,
    pub domain: &'a str,
    pub follow_up: Option<u64>,
}

impl InternalEvent for JobCompleted<'_> {
    fn emit(&self) {
        match self.follow_up {
            None => debug!("completed"),
            Some(job_id) => info!(followup_job_id = job_id, "completed; follow-up added"),
        }
        metrics::counter!(names::JOBS_COMPLETED_TOTAL, "queue" => self.queue.to_owned(), "domain" => self.domain.to_owned())
            .increment(1);
    }
}

/// A failed attempt's job runs again later: `action` is how the retry
/// policy decided (a retry, counted, or a postponement, not counted).
#[derive(Debug)]
pub(crate) struct RetryScheduled<'a> {
    pub queue: &'a str,
    pub domain: &'a str,
    pub action: FailAction,
    /// Why the attempt failed (the error, no message content).
    pub reason: &'a str,
}

impl InternalEvent for RetryScheduled<'_> {
    fn emit(&self) {
        let reason = self.reason;
        match self.action {
            FailAction::Retry { delay } => {
                warn!(delay_ms = crate::telemetry::millis(delay), %reason, "attempt failed; retry scheduled");
            }
            FailAction::Postpone { delay } => {
                warn!(delay_ms = crate::telemetry::millis(delay), %reason, "a service the job needs is unavailable; postponed, attempt not counted");
            }
            FailAction::DeadLetter => {}
        }
        metrics::counter!(names::JOBS_RETRIED_TOTAL, "queue" => self.queue.to_owned(), "domain" => self.domain.to_owned())
            .increment(1);
    }
}

/// A failed job was moved to the dead letters for `reason` (`message`:
/// what its last attempt failed with).
#[derive(Debug)]
pub(crate) struct JobDeadLettered<'a> {
    pub queue: &'a str,
    pub domain: &'a str,
    pub reason: DeadLetterReason,
    pub message: &'a str,
}

impl InternalEvent for JobDeadLettered<'_> {
    fn emit(&self) {
        error!(reason = %self.message, "dead-lettered");
        metrics::counter!(names::JOBS_DEAD_LETTERED_TOTAL, "queue" => self.queue.to_owned(), "domain" => self.domain.to_owned(), "reason" => self.reason.as_str())
            .increment(1);
    }
}

#[cfg(test)]
mod tests {
    use compactor_producer::events::capture::{capture, Value};

    use super::*;

    const Q: &str = "events-job";
    const D: &str = "chat";

    #[test]
    fn an_attempt_counts_its_start_wait_and_run_time() {
        let recorded = capture(|| {
            AttemptStarted {
                queue: Q,
                domain: D,
                waited: Duration::from_millis(250),
            }
            .emit();
            AttemptEnded {
                queue: Q,
                domain: D,
                outcome: RunOutcome::LeaseLost,
                elapsed: Duration::from_millis(1_500),
            }
            .emit();
        });
        let labels = [("queue", Q), ("domain", D)];
        recorded.assert_one(names::JOBS_STARTED_TOTAL, &labels, Value::Counter(1));
        recorded.assert_one(
            names::JOB_QUEUE_WAIT_SECONDS,
            &labels,
            Value::Histogram(vec![0.25]),
        );
        recorded.assert_one(
            names::JOB_RUN_SECONDS,
            &[("queue", Q), ("domain", D), ("outcome", "lease_lost")],
            Value::Histogram(vec![1.5]),
        );
        assert_eq!(recorded.len(), 3);
    }

    #[test]
    fn every_failed_run_outcome_counts_under_its_reason() {
        let recorded = capture(|| {
            for outcome in RunOutcome::ALL {
                if let Some(reason) = outcome.failure_reason() {
                    AttemptFailed {
                        queue: Q,
                        domain: D,
                        reason,
                    }
                    .emit();
                }
            }
        });
        for reason in FailureReason::LABELS {
            recorded.assert_one(
                names::JOBS_FAILED_TOTAL,
                &[("queue", Q), ("domain", D), ("reason", reason)],
                Value::Counter(1),
            );
        }
        assert_eq!(recorded.len(), FailureReason::COUNT);
    }

    #[test]
    fn a_job_ends_completed_retried_or_dead_lettered() {
        let recorded = capture(|| {
            for follow_up in [None, Some(7)] {
                JobCompleted {
                    queue: Q,
                    domain: D,
                    follow_up,
                }
                .emit();
            }
            for action in [
                FailAction::Retry {
                    delay: Duration::from_secs(1),
                },
                FailAction::Postpone {
                    delay: Duration::from_secs(2),
                },
            ] {
                RetryScheduled {
                    queue: Q,
                    domain: D,
                    action,
                    reason: "boom",
                }
                .emit();
            }
            JobDeadLettered {
                queue: Q,
                domain: D,
                reason: DeadLetterReason::Permanent,
                message: "bad",
            }
            .emit();
        });
        let labels = [("queue", Q), ("domain", D)];
        recorded.assert_one(names::JOBS_COMPLETED_TOTAL, &labels, Value::Counter(2));
        recorded.assert_one(names::JOBS_RETRIED_TOTAL, &labels, Value::Counter(2));
        recorded.assert_one(
            names::JOBS_DEAD_LETTERED_TOTAL,
            &[("queue", Q), ("domain", D), ("reason", "permanent")],
            Value::Counter(1),
        );
        assert_eq!(recorded.len(), 3);
    }
}
