//! The Prometheus recorder behind `/metrics` (ARCHITECTURE.md §6).
//!
//! [`install`] makes a `metrics-exporter-prometheus` recorder the process's
//! global recorder once and hands out its [`PrometheusHandle`] (the admin
//! HTTP API renders it). Histograms are real Prometheus histograms — not
//! the exporter's default summaries, which cannot be aggregated across
//! workers — with buckets chosen per family for the ranges it really
//! covers ([`HISTOGRAM_BUCKETS`]).
//!
//! [`register_known_series`] creates, at zero, every counter series the
//! process can record — each label is bounded and known at start-up:
//! queue, provider, route, the values of `labels`, and `domain` through the
//! allow-list (`[metrics] domains`, every other domain `other`) — so a
//! scrape shows them, and `rate()` and `increase()` see their first
//! increment, before anything happened. It also sets
//! `compactor_build_info`.
//!
//! Process metrics (`process_*`: CPU, memory, file descriptors, start
//! time) are read from `/proc/self` at each scrape ([`process`]).

pub mod process;

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use compactor_producer::metrics::{allow_domains, labels};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use tracing::warn;

use crate::events;
use crate::llm::metrics as llm_metrics;
use crate::llm::Provider;

/// The buckets of every histogram family, from the catalogue (a
/// histogram missing there would be rendered as a summary; a unit test
/// checks none is).
pub use compactor_producer::events::catalogue::HISTOGRAM_BUCKETS;

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
        compactor_producer::metrics::describe_families(compactor_producer::metrics::EVENT_FAMILIES);
        compactor_producer::metrics::describe_families(compactor_producer::metrics::HOOK_FAMILIES);
        compactor_producer::metrics::describe_families(compactor_producer::metrics::PROXY_FAMILIES);
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

/// Creates the pre-compaction hook's series at zero (a worker with a
/// hook configured; see [`crate::hook`]).
pub fn register_hook_series() {
    events::create_hook_series();
}

/// Creates the drop-in proxy's series at zero (a worker with `[proxy]
/// listen` set; see [`crate::proxy`]).
pub fn register_proxy_series() {
    events::create_proxy_series();
}

/// Creates, at zero, every counter series the process can record (see
/// the module doc), after adding `domains` to the labelled domains, and
/// sets `compactor_build_info`. The LLM client's series are created for
/// `provider` (none for the extractive summarizer, which makes no
/// requests), the event outbox's for the webhooks named `endpoints`.
pub fn register_known_series(
    queue: &str,
    provider: Provider,
    domains: &[String],
    endpoints: &[String],
) {
    allow_domains(domains);
    events::create_event_series(queue, endpoints.iter().map(String::as_str));
    let routes = crate::http::served_routes()
        .into_iter()
        .map(|(_, route)| route)
        .chain([crate::http::CONSOLE_ROUTE, labels::UNMATCHED_ROUTE]);
    events::create_series(queue, routes);
    if provider != Provider::Extractive {
        events::create_llm_series(provider.as_str());
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
        assert_eq!(HISTOGRAM_BUCKETS.len(), 13);
    }

    #[test]
    fn installing_twice_returns_the_same_recorder() {
        let first = install().unwrap();
        let second = install().unwrap();
        // A route no table has: no other test records under it.
        let served = events::RequestServed {
            route: "/observability-test",
            status: "2xx",
            elapsed: Duration::from_millis(1),
        };
        for _ in 0..3 {
            events::InternalEvent::emit(&served);
        }
        let line = r#"compactor_http_requests_total{route="/observability-test",status="2xx"} 3"#;
        assert!(first.render().contains(line));
        assert!(second.render().contains(line));
    }
}
