//! The pre-compaction hook answered, or failed (the compaction then went
//! ahead without it).

use std::time::Duration;

use compactor_producer::events::catalogue::{names, HookOutcome};
use tracing::{debug, warn};

use super::InternalEvent;

/// One call of the hook ended with `outcome` after `elapsed`; `error`
/// says why a failed one failed (never the URL, never message text).
#[derive(Debug)]
pub(crate) struct HookCalled<'a> {
    pub outcome: HookOutcome,
    pub elapsed: Duration,
    pub error: Option<&'a str>,
}

impl InternalEvent for HookCalled<'_> {
    fn emit(&self) {
        let duration_ms = crate::telemetry::millis(self.elapsed);
        match self.error {
            Some(error) => warn!(
                outcome = self.outcome.as_str(),
                duration_ms, error, "the pre-compaction hook failed; compacting without it"
            ),
            None => debug!(
                outcome = self.outcome.as_str(),
                duration_ms, "the pre-compaction hook answered"
            ),
        }
        metrics::counter!(names::HOOK_CALLS_TOTAL, "outcome" => self.outcome.as_str()).increment(1);
        metrics::histogram!(names::HOOK_CALL_SECONDS, "outcome" => self.outcome.as_str())
            .record(self.elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use compactor_producer::events::capture::{capture, Value};

    use super::*;

    #[test]
    fn calls_are_counted_and_timed_by_outcome() {
        let recorded = capture(|| {
            HookCalled {
                outcome: HookOutcome::Timeout,
                elapsed: Duration::from_millis(250),
                error: Some("no answer within 200ms"),
            }
            .emit()
        });
        let outcome = [("outcome", "timeout")];
        recorded.assert_one(names::HOOK_CALLS_TOTAL, &outcome, Value::Counter(1));
        recorded.assert_one(
            names::HOOK_CALL_SECONDS,
            &outcome,
            Value::Histogram(vec![0.25]),
        );
    }
}
