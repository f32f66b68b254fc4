//! The Prometheus recorder behind `/metrics` (ARCHITECTURE.md §6).
//!
//! [`install`] makes a `metrics-exporter-prometheus` recorder the process's
//! global recorder once and hands out its [`PrometheusHandle`] (the admin
//! HTTP API renders it). Histograms are real Prometheus histograms — not
//! the exporter's default summaries, which cannot be aggregated across
//! workers — with buckets chosen per family for the ranges it really
//! covers ([`HISTOGRAM_BUCKETS`]).
//!
//! [`register_known_series`] creates, at zero, the series whose labels are
//! all known at start-up (queue, provider, bounded op / reason values), so
//! a scrape shows them — and `rate()` and `increase()` see their first
//! increment — before anything happened. Series labelled by `domain` come
//! into being when a workstream of that domain first records them.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use compactor_producer::metrics::names;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use tracing::warn;

use crate::llm::metrics as llm_metrics;
use crate::llm::Provider;
use crate::runtime::QUEUE_ERROR_OPS;

/// From milliseconds to ten minutes: queue waits (a job claimed at once,
/// or after a backlog drains) and chat-side waits on a running compaction.
const WAIT_SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0, 600.0,
];

/// From 50 ms to ten minutes: one job attempt (an instant extractive run
/// up to the 5-minute lock duration) and one LLM request (up to a slow
/// model's two-minute timeout, and beyond when configured).
const RUN_SECONDS: &[f64] = &[
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 180.0, 300.0, 600.0,
];

/// From 100 tokens to a million: a context before and after compaction.
const TOKENS: &[f64] = &[
    100.0,
    250.0,
    500.0,
    1_000.0,
    2_500.0,
    5_000.0,
    10_000.0,
    25_000.0,
    50_000.0,
    100_000.0,
    200_000.0,
    500_000.0,
    1_000_000.0,
];

/// Messages folded by one compaction: a few to a 100,000-message backlog.
const MESSAGES: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1_000.0, 2_500.0, 5_000.0, 10_000.0,
    25_000.0, 50_000.0, 100_000.0,
];

/// Summarizer chunks of one compaction (120,000 chars each).
const CHUNKS: &[f64] = &[
    1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1_000.0,
];

/// Rollup passes of one compaction: usually none.
const ROLLUPS: &[f64] = &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0];

/// The buckets of every histogram family. A histogram missing here would
/// be rendered as a summary (a unit test checks none is).
pub const HISTOGRAM_BUCKETS: &[(&str, &[f64])] = &[
    (names::JOB_QUEUE_WAIT_SECONDS, WAIT_SECONDS),
    (names::LEASE_WAIT_SECONDS, WAIT_SECONDS),
    (names::JOB_RUN_SECONDS, RUN_SECONDS),
    (llm_metrics::LLM_REQUEST_SECONDS, RUN_SECONDS),
    (names::COMPACTION_TOKENS, TOKENS),
    (names::COMPACTION_MESSAGES, MESSAGES),
    (names::COMPACTION_CHUNKS, CHUNKS),
    (names::COMPACTION_ROLLUPS, ROLLUPS),
];

/// How often histogram samples are folded into their buckets between
/// scrapes (bounds the memory of samples waiting for a scrape).
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// Why the recorder could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the Prometheus recorder: {0}")]
pub struct ObservabilityError(#[from] BuildError);

/// The handle of the recorder this process installed. A `Mutex` rather
/// than a `OnceLock`: building can fail, and two threads installing at
/// once (parallel tests) must both end up with the one recorder that won.
static HANDLE: Mutex<Option<PrometheusHandle>> = Mutex::new(None);

/// Installs the Prometheus recorder as the global recorder, once per
/// process, registers every family's help text, and returns the handle
/// `/metrics` renders. Later calls return the same handle.
///
/// Should another recorder already be global (an embedding program's, a
/// test's own), ours is kept without being installed: `/metrics` then
/// shows nothing, and a warning says why.
pub fn install() -> Result<PrometheusHandle, ObservabilityError> {
    let mut slot = HANDLE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(handle) = slot.as_ref() {
        return Ok(handle.clone());
    }
    let mut builder = PrometheusBuilder::new();
    for (name, buckets) in HISTOGRAM_BUCKETS {
        builder = builder.set_buckets_for_metric(Matcher::Full((*name).to_owned()), buckets)?;
    }
    let recorder = builder.build_recorder();
    let handle = recorder.handle();
    if metrics::set_global_recorder(recorder).is_err() {
        warn!("another metrics recorder is installed already: /metrics will be empty");
    } else {
        compactor_producer::metrics::describe();
        llm_metrics::describe();
        spawn_upkeep(handle.clone());
    }
    *slot = Some(handle.clone());
    Ok(handle)
}

/// Folds histogram samples into their buckets every [`UPKEEP_INTERVAL`].
/// A thread, not a task: the recorder lives as long as the process, longer
/// than any one async runtime (tests start one per test).
fn spawn_upkeep(handle: PrometheusHandle) {
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".to_owned())
        .spawn(move || loop {
            std::thread::sleep(UPKEEP_INTERVAL);
            handle.run_upkeep();
        });
    if let Err(error) = spawned {
        // Scrapes fold the samples too; only memory between scrapes grows.
        warn!(%error, "no metrics upkeep thread");
    }
}

/// Creates, at zero, every series whose labels are known at start-up: the
/// runtime's queue-labelled counters, the release-announcement errors, and
/// the LLM client's series for `provider` (none for the extractive
/// summarizer, which makes no requests).
pub fn register_known_series(queue: &str, provider: Provider) {
    let q = || queue.to_owned();
    metrics::counter!(names::JOBS_RECOVERED_TOTAL, "queue" => q()).increment(0);
    metrics::counter!(names::JOBS_RELEASED_TOTAL, "queue" => q()).increment(0);
    metrics::counter!(names::LEASES_LOST_TOTAL, "queue" => q()).increment(0);
    metrics::counter!(names::RECONCILE_REQUESTED_TOTAL, "queue" => q()).increment(0);
    for op in QUEUE_ERROR_OPS {
        metrics::counter!(names::QUEUE_ERRORS_TOTAL, "queue" => q(), "op" => op).increment(0);
    }
    // The runtime's own dead letters carry no domain (the entry could not
    // be read, or its worker kept dying).
    for reason in ["stalled", "unusable"] {
        metrics::counter!(names::JOBS_DEAD_LETTERED_TOTAL, "queue" => q(), "domain" => "", "reason" => reason)
            .increment(0);
    }
    for op in ["publish", "subscribe"] {
        metrics::counter!(names::NOTIFY_ERRORS_TOTAL, "op" => op).increment(0);
    }
    if provider != Provider::Extractive {
        llm_metrics::register_known_series(provider.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compactor_producer::metrics::{Kind, FAMILIES};

    #[test]
    fn every_histogram_has_increasing_buckets() {
        let histograms = FAMILIES
            .iter()
            .chain(llm_metrics::FAMILIES)
            .filter(|f| f.kind == Kind::Histogram);
        for family in histograms {
            let buckets = HISTOGRAM_BUCKETS
                .iter()
                .find(|(name, _)| *name == family.name)
                .map(|(_, b)| *b)
                .unwrap_or_else(|| panic!("{} has no buckets", family.name));
            assert!(buckets.windows(2).all(|w| w[0] < w[1]), "{}", family.name);
        }
        assert_eq!(HISTOGRAM_BUCKETS.len(), 8);
    }

    #[test]
    fn installing_twice_returns_the_same_recorder() {
        let first = install().unwrap();
        let second = install().unwrap();
        metrics::counter!("compactor_observability_test_total").increment(3);
        assert!(first
            .render()
            .contains("compactor_observability_test_total 3"));
        assert!(second
            .render()
            .contains("compactor_observability_test_total 3"));
    }
}
