//! The event outbox: an event written in the transaction that caused it.

use tracing::{debug, warn};

use super::catalogue::{names, EventKind};
use super::InternalEvent;
use crate::store::StoreError;

/// An event was written to the outbox (its transaction committed).
#[derive(Debug)]
pub(crate) struct EventWritten<'a> {
    pub kind: EventKind,
    pub event_id: &'a str,
}

impl InternalEvent for EventWritten<'_> {
    fn emit(&self) {
        debug!(
            kind = self.kind.as_str(),
            event_id = self.event_id,
            "event written to the outbox"
        );
        metrics::counter!(names::EVENTS_WRITTEN_TOTAL, "kind" => self.kind.as_str()).increment(1);
    }
}

/// An event that follows a change made in Redis (a request the queue
/// took, a job it dead-lettered) could not be written: it is lost (the
/// change itself stands).
#[derive(Debug)]
pub struct EventNotWritten<'a> {
    pub kind: EventKind,
    pub error: &'a StoreError,
}

impl InternalEvent for EventNotWritten<'_> {
    fn emit(&self) {
        warn!(
            kind = self.kind.as_str(),
            error = %self.error,
            "event not written to the outbox: it is lost"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::capture::{capture, Value};

    #[test]
    fn a_written_event_is_counted_by_kind() {
        let recorded = capture(|| {
            EventWritten {
                kind: EventKind::CompactionStarted,
                event_id: "e",
            }
            .emit()
        });
        recorded.assert_one(
            names::EVENTS_WRITTEN_TOTAL,
            &[("kind", "compaction.started")],
            Value::Counter(1),
        );
    }
}
