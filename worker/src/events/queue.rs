//! The runtime's dealings with the Redis queue.

use compactor_producer::events::catalogue::{names, DeadLetterReason, QueueOp, QueueState};
use compactor_producer::metrics::OTHER_DOMAIN;
use compactor_producer::queue::{PauseState, QueueCounts, QueueError};
use tracing::{info, warn};

use super::InternalEvent;

/// A Redis operation of the runtime failed (each try of a retried step
/// counts). Logged once, here: callers add no line of their own.
#[derive(Debug)]
pub(crate) struct QueueOpFailed<'a> {
    pub queue: &'a str,
    pub op: QueueOp,
    pub error: &'a QueueError,
}

impl InternalEvent for QueueOpFailed<'_> {
    fn emit(&self) {
        warn!(op = self.op.as_str(), error = %self.error, "queue operation failed");
        metrics::counter!(names::QUEUE_ERRORS_TOTAL, "queue" => self.queue.to_owned(), "op" => self.op.as_str())
            .increment(1);
    }
}

/// A lease this worker held is gone (`what`: when it noticed): another
/// worker may run the job now.
#[derive(Debug)]
pub(crate) struct LeaseLost<'a> {
    pub queue: &'a str,
    pub what: &'static str,
}

impl InternalEvent for LeaseLost<'_> {
    fn emit(&self) {
        warn!(what = self.what, "lease lost");
        metrics::counter!(names::LEASES_LOST_TOTAL, "queue" => self.queue.to_owned()).increment(1);
    }
}

/// A queue entry that could not be read was dead-lettered (its domain is
/// unknown: `other`).
#[derive(Debug)]
pub(crate) struct UnusableEntryDeadLettered<'a> {
    pub queue: &'a str,
    pub entry: &'a str,
    pub error: &'a str,
}

impl InternalEvent for UnusableEntryDeadLettered<'_> {
    fn emit(&self) {
        warn!(
            entry = self.entry,
            error = self.error,
            "unusable queue entry dead-lettered"
        );
        metrics::counter!(names::JOBS_DEAD_LETTERED_TOTAL, "queue" => self.queue.to_owned(), "domain" => OTHER_DOMAIN, "reason" => DeadLetterReason::Unusable.as_str())
            .increment(1);
    }
}

/// One batch of the recovery sweep: jobs whose lease expired went back to
/// the queue, those whose workers kept dying to the dead letters.
#[derive(Debug)]
pub(crate) struct LeasesSwept<'a> {
    pub queue: &'a str,
    pub recovered: u64,
    pub dead_lettered: u64,
}

impl InternalEvent for LeasesSwept<'_> {
    fn emit(&self) {
        if self.recovered > 0 || self.dead_lettered > 0 {
            info!(
                recovered = self.recovered,
                dead_lettered = self.dead_lettered,
                "expired leases swept"
            );
        }
        metrics::counter!(names::JOBS_RECOVERED_TOTAL, "queue" => self.queue.to_owned())
            .increment(self.recovered);
        metrics::counter!(names::JOBS_DEAD_LETTERED_TOTAL, "queue" => self.queue.to_owned(), "domain" => OTHER_DOMAIN, "reason" => DeadLetterReason::Stalled.as_str())
            .increment(self.dead_lettered);
    }
}

/// The queue's depth, sampled for the gauges (metrics only).
#[derive(Debug)]
pub(crate) struct DepthSampled<'a> {
    pub queue: &'a str,
    pub counts: QueueCounts,
}

impl InternalEvent for DepthSampled<'_> {
    fn emit(&self) {
        let c = self.counts;
        for (state, n) in [
            (QueueState::Waiting, c.waiting),
            (QueueState::Running, c.running),
            (QueueState::Done, c.done),
            (QueueState::Dead, c.dead),
        ] {
            metrics::gauge!(names::QUEUE_DEPTH, "queue" => self.queue.to_owned(), "state" => state.as_str())
                .set(n as f64);
        }
        metrics::gauge!(names::DEAD_LETTER_SIZE, "queue" => self.queue.to_owned())
            .set(c.dead as f64);
    }
}

/// What is paused and the oldest waiting job's age, sampled with the
/// depth (metrics only).
#[derive(Debug)]
pub(crate) struct PauseSampled<'a> {
    pub queue: &'a str,
    pub state: &'a PauseState,
}

impl InternalEvent for PauseSampled<'_> {
    fn emit(&self) {
        let oldest = self.state.oldest_waiting_ms.unwrap_or(0) as f64 / 1000.0;
        metrics::gauge!(names::QUEUE_OLDEST_WAITING_SECONDS, "queue" => self.queue.to_owned())
            .set(oldest);
        let runnable = self.state.oldest_runnable_ms.unwrap_or(0) as f64 / 1000.0;
        metrics::gauge!(names::QUEUE_OLDEST_RUNNABLE_SECONDS, "queue" => self.queue.to_owned())
            .set(runnable);
        metrics::gauge!(names::QUEUE_PAUSED, "queue" => self.queue.to_owned())
            .set(if self.state.queue_paused { 1.0 } else { 0.0 });
        metrics::gauge!(names::QUEUE_PAUSED_DOMAINS, "queue" => self.queue.to_owned())
            .set(self.state.paused_domains.len() as f64);
    }
}

/// A job went back to the queue unfinished, its attempt not counted: at
/// shutdown while it ran (logged), or claimed ahead and never started
/// (not logged: it never ran).
#[derive(Debug)]
pub(crate) struct JobHandedBack<'a> {
    pub queue: &'a str,
    pub was_running: bool,
}

impl InternalEvent for JobHandedBack<'_> {
    fn emit(&self) {
        if self.was_running {
            info!("handed back at shutdown");
        }
        metrics::counter!(names::JOBS_RELEASED_TOTAL, "queue" => self.queue.to_owned())
            .increment(1);
    }
}

#[cfg(test)]
mod tests {
    use compactor_producer::events::capture::{capture, Value};

    use super::*;

    const Q: &str = "events-queue";

    #[test]
    fn queue_failures_count_under_their_op() {
        let error = QueueError::Protocol {
            op: "claim",
            detail: "refused".to_owned(),
        };
        let recorded = capture(|| {
            for op in [QueueOp::Claim, QueueOp::Claim, QueueOp::Counts] {
                QueueOpFailed {
                    queue: Q,
                    op,
                    error: &error,
                }
                .emit();
            }
        });
        recorded.assert_one(
            names::QUEUE_ERRORS_TOTAL,
            &[("queue", Q), ("op", "claim")],
            Value::Counter(2),
        );
        recorded.assert_one(
            names::QUEUE_ERRORS_TOTAL,
            &[("queue", Q), ("op", "counts")],
            Value::Counter(1),
        );
        assert_eq!(recorded.len(), 2);
    }

    #[test]
    fn lost_leases_and_hand_backs_count_per_queue() {
        let recorded = capture(|| {
            LeaseLost {
                queue: Q,
                what: "attempt cancelled",
            }
            .emit();
            for was_running in [true, false] {
                JobHandedBack {
                    queue: Q,
                    was_running,
                }
                .emit();
            }
        });
        recorded.assert_one(names::LEASES_LOST_TOTAL, &[("queue", Q)], Value::Counter(1));
        recorded.assert_one(
            names::JOBS_RELEASED_TOTAL,
            &[("queue", Q)],
            Value::Counter(2),
        );
        assert_eq!(recorded.len(), 2);
    }

    #[test]
    fn the_runtime_dead_letters_without_a_domain_as_other() {
        let recorded = capture(|| {
            UnusableEntryDeadLettered {
                queue: Q,
                entry: "garbage",
                error: "not a job",
            }
            .emit();
            LeasesSwept {
                queue: Q,
                recovered: 3,
                dead_lettered: 2,
            }
            .emit();
        });
        recorded.assert_one(
            names::JOBS_DEAD_LETTERED_TOTAL,
            &[("queue", Q), ("domain", "other"), ("reason", "unusable")],
            Value::Counter(1),
        );
        recorded.assert_one(
            names::JOBS_DEAD_LETTERED_TOTAL,
            &[("queue", Q), ("domain", "other"), ("reason", "stalled")],
            Value::Counter(2),
        );
        recorded.assert_one(
            names::JOBS_RECOVERED_TOTAL,
            &[("queue", Q)],
            Value::Counter(3),
        );
        assert_eq!(recorded.len(), 3);
    }

    #[test]
    fn depth_sets_one_gauge_per_state_and_the_dead_letter_size() {
        let recorded = capture(|| {
            DepthSampled {
                queue: Q,
                counts: QueueCounts {
                    waiting: 4,
                    running: 3,
                    done: 2,
                    dead: 1,
                    ..QueueCounts::default()
                },
            }
            .emit();
        });
        for (state, n) in [
            ("waiting", 4.0),
            ("running", 3.0),
            ("done", 2.0),
            ("dead", 1.0),
        ] {
            recorded.assert_one(
                names::QUEUE_DEPTH,
                &[("queue", Q), ("state", state)],
                Value::Gauge(n),
            );
        }
        recorded.assert_one(names::DEAD_LETTER_SIZE, &[("queue", Q)], Value::Gauge(1.0));
        assert_eq!(recorded.len(), 5);
    }

    #[test]
    fn pause_sets_the_paused_gauges_and_the_oldest_age_in_seconds() {
        use compactor_producer::queue::PausedDomain;
        use compactor_shared::Domain;
        let state = PauseState {
            queue_paused: true,
            queue_paused_for_ms: Some(10),
            paused_domains: vec![PausedDomain {
                domain: Domain::parse("chat").unwrap(),
                paused_for_ms: 5,
                parked: 2,
            }],
            oldest_waiting_ms: Some(2500),
            oldest_runnable_ms: Some(750),
        };
        let recorded = capture(|| {
            PauseSampled {
                queue: Q,
                state: &state,
            }
            .emit();
        });
        recorded.assert_one(
            names::QUEUE_OLDEST_WAITING_SECONDS,
            &[("queue", Q)],
            Value::Gauge(2.5),
        );
        recorded.assert_one(
            names::QUEUE_OLDEST_RUNNABLE_SECONDS,
            &[("queue", Q)],
            Value::Gauge(0.75),
        );
        recorded.assert_one(names::QUEUE_PAUSED, &[("queue", Q)], Value::Gauge(1.0));
        recorded.assert_one(
            names::QUEUE_PAUSED_DOMAINS,
            &[("queue", Q)],
            Value::Gauge(1.0),
        );
        assert_eq!(recorded.len(), 4);
    }
}
