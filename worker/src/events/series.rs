//! Every series the process can record, created at zero at start-up (see
//! `observability`): each label is bounded and known then — queue,
//! provider, route, the catalogue's label values, and `domain` through the
//! allow-list — so a scrape shows them, and `rate()` and `increase()` see
//! their first increment, before anything happened. It is the one place
//! that records for no event, so it lives with the events.

use compactor_producer::events::catalogue::{
    labels, names, BacklogState, DeadLetterReason, DeliveryOutcome, EventKind, HookOutcome,
    LlmOutcome, QueueKey, QueueOp, TokenDirection,
};
use compactor_producer::metrics::{domain_labels, OTHER_DOMAIN};
use compactor_producer::store::DegradedReason;
use compactor_shared::parse::{ParseProblem, Rejection};

/// Sets `compactor_build_info` and creates at zero the queue's, the
/// runtime's, the compaction job's, the chat side's (for every labelled
/// domain and `other`) and the admin API's series (for `routes`).
pub(crate) fn create_series(queue: &str, routes: impl IntoIterator<Item = &'static str>) {
    let q = || queue.to_owned();
    metrics::gauge!(names::BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);

    // The queue's and the runtime's.
    for outcome in labels::ENQUEUE_OUTCOMES {
        metrics::counter!(names::ENQUEUE_TOTAL, "queue" => q(), "outcome" => outcome).increment(0);
    }
    metrics::counter!(names::JOBS_RECOVERED_TOTAL, "queue" => q()).increment(0);
    metrics::counter!(names::JOBS_RELEASED_TOTAL, "queue" => q()).increment(0);
    metrics::counter!(names::LEASES_LOST_TOTAL, "queue" => q()).increment(0);
    metrics::counter!(names::RECONCILE_REQUESTED_TOTAL, "queue" => q()).increment(0);
    for op in QueueOp::LABELS {
        metrics::counter!(names::QUEUE_ERRORS_TOTAL, "queue" => q(), "op" => op).increment(0);
    }
    for key in QueueKey::LABELS {
        metrics::counter!(names::QUEUE_WRONG_TYPE_KEYS_TOTAL, "queue" => q(), "key" => key)
            .increment(0);
    }
    for op in labels::NOTIFY_OPS {
        metrics::counter!(names::NOTIFY_ERRORS_TOTAL, "op" => op).increment(0);
    }

    // Per domain: the runtime's, the compaction job's, the chat side's.
    for domain in domain_labels() {
        let d = || domain.clone();
        metrics::counter!(names::JOBS_STARTED_TOTAL, "queue" => q(), "domain" => d()).increment(0);
        metrics::counter!(names::JOBS_COMPLETED_TOTAL, "queue" => q(), "domain" => d())
            .increment(0);
        metrics::counter!(names::JOBS_RETRIED_TOTAL, "queue" => q(), "domain" => d()).increment(0);
        for reason in labels::FAILURE_REASONS {
            metrics::counter!(names::JOBS_FAILED_TOTAL, "queue" => q(), "domain" => d(), "reason" => reason)
                .increment(0);
        }
        for reason in DeadLetterReason::ALL {
            // The runtime's own dead letters (unusable, stalled) have no
            // domain to tell: they are `other` only.
            if reason.domain_unknown() && domain != OTHER_DOMAIN {
                continue;
            }
            metrics::counter!(names::JOBS_DEAD_LETTERED_TOTAL, "queue" => q(), "domain" => d(), "reason" => reason.as_str())
                .increment(0);
        }
        for (outcome, degraded) in labels::COMPACTION_OUTCOMES {
            metrics::counter!(names::COMPACTIONS_TOTAL, "domain" => d(), "outcome" => outcome, "degraded" => degraded)
                .increment(0);
        }
        metrics::counter!(names::FENCE_CONFLICTS_TOTAL, "domain" => d()).increment(0);
        metrics::counter!(names::ENTITY_LEASES_LOST_TOTAL, "domain" => d()).increment(0);
        metrics::counter!(names::BREAKER_SKIPS_TOTAL, "domain" => d()).increment(0);
        for outcome in labels::TURN_OUTCOMES {
            metrics::counter!(names::TURNS_TOTAL, "domain" => d(), "outcome" => outcome)
                .increment(0);
        }
        metrics::counter!(names::LEASE_WAIT_TIMEOUTS_TOTAL, "domain" => d()).increment(0);
    }

    // The admin API's, by route template.
    for listener in ["api", "probes", "proxy"] {
        metrics::counter!(names::HTTP_CONNECTIONS_SHED_TOTAL, "listener" => listener).increment(0);
    }
    for route in routes {
        for status in labels::HTTP_STATUS_CLASSES {
            metrics::counter!(names::HTTP_REQUESTS_TOTAL, "route" => route, "status" => status)
                .increment(0);
        }
    }
}

/// Creates the event outbox's series at zero: events written of every
/// kind, streamed on `queue`, every delivery outcome of each webhook of
/// `endpoints` (their configured names), and the backlog gauges.
pub(crate) fn create_event_series<'a>(queue: &str, endpoints: impl IntoIterator<Item = &'a str>) {
    for kind in EventKind::LABELS {
        metrics::counter!(names::EVENTS_WRITTEN_TOTAL, "kind" => kind).increment(0);
    }
    metrics::counter!(names::EVENTS_STREAMED_TOTAL, "queue" => queue.to_owned()).increment(0);
    for endpoint in endpoints {
        for outcome in DeliveryOutcome::LABELS {
            metrics::counter!(names::EVENT_DELIVERIES_TOTAL, "endpoint" => endpoint.to_owned(), "outcome" => outcome)
                .increment(0);
        }
    }
    for state in BacklogState::LABELS {
        metrics::gauge!(names::EVENTS_BACKLOG, "state" => state).set(0.0);
    }
    metrics::gauge!(names::EVENTS_OLDEST_UNDELIVERED_SECONDS, "queue" => queue.to_owned()).set(0.0);
}

/// Creates the pre-compaction hook's series at zero, every outcome (a
/// worker with `[hook] url` set).
pub(crate) fn create_hook_series() {
    for outcome in HookOutcome::LABELS {
        metrics::counter!(names::HOOK_CALLS_TOTAL, "outcome" => outcome).increment(0);
    }
}

/// Creates `provider`'s LLM series at zero (every outcome, both
/// directions, every rejection, problem and fallback reason), so they are
/// scraped before the first request, and marks it healthy (a client
/// starts healthy; a later transition corrects it).
pub(crate) fn create_llm_series(provider: &'static str) {
    for outcome in LlmOutcome::LABELS {
        metrics::counter!(names::LLM_REQUESTS_TOTAL, "provider" => provider, "outcome" => outcome)
            .increment(0);
    }
    for direction in TokenDirection::LABELS {
        metrics::counter!(names::LLM_TOKENS_TOTAL, "provider" => provider, "direction" => direction)
            .increment(0);
    }
    metrics::counter!(names::LLM_RETRIES_TOTAL, "provider" => provider).increment(0);
    for reason in Rejection::LABELS {
        metrics::counter!(names::LLM_ANSWERS_REJECTED_TOTAL, "provider" => provider, "reason" => reason)
            .increment(0);
    }
    for problem in ParseProblem::LABELS {
        metrics::counter!(names::LLM_ANSWER_PROBLEMS_TOTAL, "provider" => provider, "problem" => problem)
            .increment(0);
    }
    for reason in DegradedReason::ALL {
        metrics::counter!(names::LLM_FALLBACKS_TOTAL, "provider" => provider, "reason" => reason.as_str())
            .increment(0);
    }
    metrics::gauge!(names::LLM_HEALTHY, "provider" => provider).set(1.0);
}

#[cfg(test)]
mod tests {
    use compactor_producer::events::capture::{capture, Value};

    use super::*;

    #[test]
    fn start_up_creates_catalogue_series_at_zero() {
        let recorded = capture(|| create_series("events-series", ["/metrics"]));
        recorded.assert_one(
            names::QUEUE_ERRORS_TOTAL,
            &[("queue", "events-series"), ("op", "claim")],
            Value::Counter(0),
        );
        recorded.assert_one(
            names::JOBS_DEAD_LETTERED_TOTAL,
            &[
                ("queue", "events-series"),
                ("domain", OTHER_DOMAIN),
                ("reason", "stalled"),
            ],
            Value::Counter(0),
        );
        recorded.assert_one(
            names::HTTP_REQUESTS_TOTAL,
            &[("route", "/metrics"), ("status", "5xx")],
            Value::Counter(0),
        );
        recorded.assert_one(
            names::BUILD_INFO,
            &[("version", env!("CARGO_PKG_VERSION"))],
            Value::Gauge(1.0),
        );
        assert!(!recorded.is_empty());
    }

    #[test]
    fn a_provider_starts_healthy_with_its_series_at_zero() {
        let recorded = capture(|| create_llm_series("anthropic"));
        recorded.assert_one(
            names::LLM_REQUESTS_TOTAL,
            &[("provider", "anthropic"), ("outcome", "ok")],
            Value::Counter(0),
        );
        recorded.assert_one(
            names::LLM_HEALTHY,
            &[("provider", "anthropic")],
            Value::Gauge(1.0),
        );
        assert_eq!(
            recorded.len(),
            LlmOutcome::COUNT
                + TokenDirection::COUNT
                + 1
                + Rejection::LABELS.len()
                + ParseProblem::LABELS.len()
                + DegradedReason::ALL.len()
                + 1
        );
    }
}
