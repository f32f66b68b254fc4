//! The outbox relay: events put on the stream, webhook deliveries, the
//! backlog.

use compactor_producer::events::catalogue::{names, BacklogState, DeliveryOutcome};
use compactor_producer::store::{DeliveryResult, OutboxBacklog};
use tracing::{debug, info, warn};

use super::InternalEvent;

/// A relay round relayed events; `streamed` of them went on the stream.
#[derive(Debug)]
pub(crate) struct EventsRelayed<'a> {
    pub queue: &'a str,
    pub streamed: usize,
}

impl InternalEvent for EventsRelayed<'_> {
    fn emit(&self) {
        debug!(streamed = self.streamed, "events relayed");
        metrics::counter!(names::EVENTS_STREAMED_TOTAL, "queue" => self.queue.to_owned())
            .increment(self.streamed as u64);
    }
}

/// One webhook delivery attempt ended. `endpoint` is the webhook's name.
#[derive(Debug)]
pub(crate) struct DeliveryAttempted<'a> {
    pub endpoint: &'a str,
    pub event_id: &'a str,
    pub attempt: u32,
    pub result: &'a DeliveryResult,
}

impl DeliveryAttempted<'_> {
    fn outcome(&self) -> DeliveryOutcome {
        match self.result {
            DeliveryResult::Delivered { .. } => DeliveryOutcome::Delivered,
            DeliveryResult::Failed {
                retry_at_ms: Some(_),
                ..
            } => DeliveryOutcome::Retried,
            DeliveryResult::Failed {
                retry_at_ms: None, ..
            } => DeliveryOutcome::Failed,
        }
    }
}

impl InternalEvent for DeliveryAttempted<'_> {
    fn emit(&self) {
        let outcome = self.outcome();
        match self.result {
            DeliveryResult::Delivered { status } => debug!(
                endpoint = self.endpoint,
                event_id = self.event_id,
                attempt = self.attempt,
                status,
                "event delivered"
            ),
            DeliveryResult::Failed { status, error, .. } if outcome == DeliveryOutcome::Retried => {
                info!(
                    endpoint = self.endpoint,
                    event_id = self.event_id,
                    attempt = self.attempt,
                    status,
                    error = error.as_str(),
                    "event delivery failed; tried again later"
                );
            }
            DeliveryResult::Failed { status, error, .. } => warn!(
                endpoint = self.endpoint,
                event_id = self.event_id,
                attempt = self.attempt,
                status,
                error = error.as_str(),
                "event delivery gave up: failed (retry with `compactor events retry`)"
            ),
        }
        metrics::counter!(names::EVENT_DELIVERIES_TOTAL, "endpoint" => self.endpoint.to_owned(), "outcome" => outcome.as_str())
            .increment(1);
    }
}

/// The outbox's backlog, sampled for the gauges (metrics only).
#[derive(Debug)]
pub(crate) struct OutboxSampled<'a> {
    pub queue: &'a str,
    pub backlog: OutboxBacklog,
    pub now_ms: i64,
}

impl InternalEvent for OutboxSampled<'_> {
    fn emit(&self) {
        let b = self.backlog;
        for (state, n) in [
            (BacklogState::Unrelayed, b.unrelayed),
            (BacklogState::Pending, b.pending),
            (BacklogState::Failed, b.failed),
        ] {
            metrics::gauge!(names::EVENTS_BACKLOG, "state" => state.as_str()).set(n as f64);
        }
        let age_ms = b
            .oldest_undelivered_ms
            .map_or(0, |oldest| self.now_ms.saturating_sub(oldest).max(0));
        metrics::gauge!(names::EVENTS_OLDEST_UNDELIVERED_SECONDS, "queue" => self.queue.to_owned())
            .set(age_ms as f64 / 1000.0);
    }
}

/// A step of the relay failed (the database or Redis did not answer); the
/// next round tries again.
pub(crate) struct RelayStepFailed<'a> {
    pub step: &'static str,
    pub error: &'a dyn std::fmt::Display,
}

impl InternalEvent for RelayStepFailed<'_> {
    fn emit(&self) {
        warn!(step = self.step, error = %self.error, "event relay step failed; tried again next round");
    }
}

#[cfg(test)]
mod tests {
    use compactor_producer::events::capture::{capture, Value};

    use super::*;

    #[test]
    fn deliveries_are_counted_by_endpoint_name_and_outcome() {
        let retried = DeliveryResult::Failed {
            status: Some(503),
            error: "HTTP 503".into(),
            retry_at_ms: Some(1),
        };
        let recorded = capture(|| {
            DeliveryAttempted {
                endpoint: "audit",
                event_id: "e",
                attempt: 1,
                result: &retried,
            }
            .emit()
        });
        recorded.assert_one(
            names::EVENT_DELIVERIES_TOTAL,
            &[("endpoint", "audit"), ("outcome", "retried")],
            Value::Counter(1),
        );
    }

    #[test]
    fn the_backlog_sets_its_gauges_and_the_oldest_age() {
        let recorded = capture(|| {
            OutboxSampled {
                queue: "q",
                backlog: OutboxBacklog {
                    unrelayed: 1,
                    pending: 2,
                    failed: 3,
                    oldest_undelivered_ms: Some(1_000),
                },
                now_ms: 31_000,
            }
            .emit()
        });
        recorded.assert_one(
            names::EVENTS_BACKLOG,
            &[("state", "failed")],
            Value::Gauge(3.0),
        );
        recorded.assert_one(
            names::EVENTS_OLDEST_UNDELIVERED_SECONDS,
            &[("queue", "q")],
            Value::Gauge(30.0),
        );
    }
}
