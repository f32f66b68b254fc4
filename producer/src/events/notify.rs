//! The client's subscription to release announcements failing.

use tracing::{debug, warn};

use super::catalogue::{names, NotifyOp};
use super::InternalEvent;

/// The subscription that wakes waiting chat requests could not be made
/// (`was_up: false`: Redis is down, retried with backoff — logged at debug
/// level, it repeats) or broke (`was_up: true`: re-subscribing — a warning,
/// once per break). Transient either way: waiters poll meanwhile.
#[derive(Debug)]
pub(crate) struct ReleaseSubscriptionFailed<'a> {
    pub error: &'a (dyn std::error::Error + 'a),
    pub was_up: bool,
}

impl InternalEvent for ReleaseSubscriptionFailed<'_> {
    fn emit(&self) {
        let op = NotifyOp::Subscribe;
        if self.was_up {
            warn!(op = op.as_str(), error = %self.error, "release subscription broken; re-subscribing");
        } else {
            debug!(op = op.as_str(), error = %self.error, "cannot subscribe to releases yet");
        }
        metrics::counter!(names::NOTIFY_ERRORS_TOTAL, "op" => op.as_str()).increment(1);
    }
}

/// A new client's release subscription was not up within `waited` (the
/// queue's connect timeout): until it is, waiters wake at lease deadlines
/// instead of at announcements. Log only: the failures behind it are
/// counted by [`ReleaseSubscriptionFailed`].
#[derive(Debug)]
pub(crate) struct ReleaseSubscriptionPending {
    pub waited: std::time::Duration,
}

impl InternalEvent for ReleaseSubscriptionPending {
    fn emit(&self) {
        warn!(
            waited_ms = self.waited.as_millis() as u64,
            "release subscription not up yet: waiters fall back to lease deadlines"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::capture::{capture, Value};

    #[test]
    fn a_failed_or_broken_subscription_counts_once_each() {
        let recorded = capture(|| {
            let error = crate::queue::QueueError::Protocol {
                op: "subscribe",
                detail: "connection refused".to_owned(),
            };
            for was_up in [false, true] {
                ReleaseSubscriptionFailed {
                    error: &error,
                    was_up,
                }
                .emit();
            }
        });
        recorded.assert_one(
            names::NOTIFY_ERRORS_TOTAL,
            &[("op", "subscribe")],
            Value::Counter(2),
        );
    }
}
