//! Compaction requests answered by the queue.

use tracing::debug;

use super::catalogue::{names, EnqueueResult};
use super::InternalEvent;
use crate::queue::QueueError;

/// `requests` compaction requests to `queue` got the same answer: one
/// `request_compaction`, or the outcomes of an `enqueue_many` batch one
/// by one. Logged at debug level: a chat backend makes one per turn.
#[derive(Debug)]
pub(crate) struct CompactionRequested<'a> {
    pub queue: &'a str,
    pub result: EnqueueResult,
    pub requests: u64,
}

impl InternalEvent for CompactionRequested<'_> {
    fn emit(&self) {
        debug!(
            queue = self.queue,
            outcome = self.result.as_str(),
            requests = self.requests,
            "compaction requested"
        );
        metrics::counter!(names::ENQUEUE_TOTAL, "queue" => self.queue.to_owned(), "outcome" => self.result.as_str())
            .increment(self.requests);
    }
}

/// `requests` compaction requests to `queue` failed (Redis did not answer
/// or refused them): counted as `outcome="error"`. Logged at debug level
/// only: the error is returned to the caller, which reports it once.
#[derive(Debug)]
pub(crate) struct EnqueueFailed<'a> {
    pub queue: &'a str,
    pub requests: u64,
    pub error: &'a QueueError,
}

impl InternalEvent for EnqueueFailed<'_> {
    fn emit(&self) {
        let outcome = EnqueueResult::Error;
        debug!(
            queue = self.queue,
            outcome = outcome.as_str(),
            requests = self.requests,
            error = %self.error,
            "compaction request failed"
        );
        metrics::counter!(names::ENQUEUE_TOTAL, "queue" => self.queue.to_owned(), "outcome" => outcome.as_str())
            .increment(self.requests);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::capture::{capture, Value};

    #[test]
    fn a_request_counts_its_outcome_under_its_queue() {
        let recorded = capture(|| {
            CompactionRequested {
                queue: "q1",
                result: EnqueueResult::FollowUp,
                requests: 3,
            }
            .emit()
        });
        recorded.assert_one(
            names::ENQUEUE_TOTAL,
            &[("queue", "q1"), ("outcome", "followup")],
            Value::Counter(3),
        );
    }

    #[test]
    fn a_failed_request_counts_as_error() {
        let error = QueueError::Protocol {
            op: "enqueue",
            detail: "bad".to_owned(),
        };
        let recorded = capture(|| {
            EnqueueFailed {
                queue: "q2",
                requests: 2,
                error: &error,
            }
            .emit()
        });
        recorded.assert_one(
            names::ENQUEUE_TOTAL,
            &[("queue", "q2"), ("outcome", "error")],
            Value::Counter(2),
        );
    }
}
