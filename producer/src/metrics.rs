//! Names of every metric the queue and the worker record, in one place, so
//! dashboards, alerts and code cannot drift apart.
//!
//! Conventions (ARCHITECTURE.md §6): the `compactor_` prefix, `_total` for
//! counters, `_seconds` for durations, and labels of bounded cardinality:
//! `queue` (the configured queue name), `domain`, `outcome`, `reason`, `state`,
//! `op` — never an entity id.
//!
//! The `domain` label comes from callers (any HTTP client names its own
//! domain), so it is bounded by an allow-list ([`MetricsSettings::domains`],
//! `[metrics] domains` of the worker's configuration): an allowed domain is
//! its own label value, every other domain is [`OTHER_DOMAIN`]. Every
//! series is created at zero at start-up for the allowed domains and
//! `other` ([`labels`] lists the other label values), so Prometheus'
//! `increase()` sees the first event of each.

use std::collections::BTreeSet;
use std::sync::{PoisonError, RwLock};

use compactor_shared::EntityKey;
use serde::{Deserialize, Serialize};

/// Metric names.
pub mod names {
    /// Counter: compaction requests by `outcome` (added, coalesced,
    /// followup, error).
    pub const ENQUEUE_TOTAL: &str = "compactor_enqueue_total";
    /// Counter: attempts started.
    pub const JOBS_STARTED_TOTAL: &str = "compactor_jobs_started_total";
    /// Counter: attempts that succeeded.
    pub const JOBS_COMPLETED_TOTAL: &str = "compactor_jobs_completed_total";
    /// Counter: attempts that failed, by `reason` (error, permanent,
    /// timeout, panic, lease_lost).
    pub const JOBS_FAILED_TOTAL: &str = "compactor_jobs_failed_total";
    /// Counter: failed attempts scheduled to run again.
    pub const JOBS_RETRIED_TOTAL: &str = "compactor_jobs_retried_total";
    /// Counter: jobs moved to the dead-letter set, by `reason` (permanent,
    /// exhausted, unusable, stalled).
    pub const JOBS_DEAD_LETTERED_TOTAL: &str = "compactor_jobs_dead_lettered_total";
    /// Counter: jobs whose lease expired (worker crashed or hung), returned
    /// to the queue.
    pub const JOBS_RECOVERED_TOTAL: &str = "compactor_jobs_recovered_total";
    /// Counter: jobs handed back unfinished at shutdown.
    pub const JOBS_RELEASED_TOTAL: &str = "compactor_jobs_released_total";
    /// Counter: leases lost while running (the attempt was cancelled).
    pub const LEASES_LOST_TOTAL: &str = "compactor_leases_lost_total";
    /// Counter: Redis operations of the worker that failed, by `op`.
    pub const QUEUE_ERRORS_TOTAL: &str = "compactor_queue_errors_total";
    /// Gauge: jobs by `state` (waiting, running, done, dead).
    pub const QUEUE_DEPTH: &str = "compactor_queue_depth";
    /// Gauge: dead-lettered jobs kept.
    pub const DEAD_LETTER_SIZE: &str = "compactor_dead_letter_size";
    /// Histogram: run time of one attempt, by `outcome`.
    pub const JOB_RUN_SECONDS: &str = "compactor_job_run_seconds";
    /// Histogram: time from being added to being claimed.
    pub const JOB_QUEUE_WAIT_SECONDS: &str = "compactor_job_queue_wait_seconds";

    /// Counter: compaction jobs by `outcome` (committed, no_progress,
    /// skipped, conflict, failed) and `degraded` (true when the offline
    /// summarizer stood in for the LLM).
    pub const COMPACTIONS_TOTAL: &str = "compactor_compactions_total";
    /// Histogram: estimated context tokens of a committed compaction, by
    /// `stage` (before, after).
    pub const COMPACTION_TOKENS: &str = "compactor_compaction_tokens";
    /// Histogram: messages folded into the summary per committed compaction.
    pub const COMPACTION_MESSAGES: &str = "compactor_compaction_messages";
    /// Histogram: summarizer chunks per committed compaction.
    pub const COMPACTION_CHUNKS: &str = "compactor_compaction_chunks";
    /// Histogram: rollup passes per committed compaction.
    pub const COMPACTION_ROLLUPS: &str = "compactor_compaction_rollups";
    /// Counter: commits refused by the fence (lease lost or another run
    /// committed first); each one is a wasted run.
    pub const FENCE_CONFLICTS_TOTAL: &str = "compactor_fence_conflicts_total";
    /// Counter: entity (database) leases lost while a compaction ran.
    pub const ENTITY_LEASES_LOST_TOTAL: &str = "compactor_entity_leases_lost_total";
    /// Counter: automatic requests not enqueued because the entity's
    /// circuit breaker is open (3 failed or fruitless compactions in a row).
    pub const BREAKER_SKIPS_TOTAL: &str = "compactor_breaker_skips_total";
    /// Counter: `finalize_turn` calls, by `outcome` (not_due, requested,
    /// breaker_open, unavailable: due, but Redis did not take the request).
    pub const TURNS_TOTAL: &str = "compactor_turns_total";
    /// Histogram: how long chat requests waited for a requested compaction
    /// (`Compactor::wait`), by `outcome` (ready, compacted, timeout,
    /// no_live_worker, polled: a zero-timeout wait that found the
    /// compaction pending).
    pub const LEASE_WAIT_SECONDS: &str = "compactor_lease_wait_seconds";
    /// Counter: waits that ended at their timeout with the compaction still
    /// pending. Polls (a wait with a zero timeout: the client asked whether
    /// a compaction is pending, not to wait for it) are not counted: they
    /// end as `outcome="polled"` in [`LEASE_WAIT_SECONDS`].
    pub const LEASE_WAIT_TIMEOUTS_TOTAL: &str = "compactor_lease_wait_timeouts_total";
    /// Counter: release announcements that could not be published, or
    /// subscriptions to them that broke, by `op`.
    pub const NOTIFY_ERRORS_TOTAL: &str = "compactor_notify_errors_total";
    /// Counter: compactions a reconciliation sweep requested again because
    /// the queue had lost them (Redis lost its data).
    pub const RECONCILE_REQUESTED_TOTAL: &str = "compactor_reconcile_requested_total";

    /// Counter: requests the admin HTTP API answered, by `route` (the
    /// matched route template, `unmatched` for any other path) and
    /// `status` (class: 2xx, 4xx, 5xx).
    pub const HTTP_REQUESTS_TOTAL: &str = "compactor_http_requests_total";
    /// Histogram: time to answer one admin HTTP request (until the
    /// response head), by `route` and `status`.
    pub const HTTP_REQUEST_SECONDS: &str = "compactor_http_request_seconds";
    /// Gauge: 1, labelled with the `version` of the running build.
    pub const BUILD_INFO: &str = "compactor_build_info";
}

/// The label values of every bounded label, in one place: the code records
/// only these, and start-up creates each series at zero from them.
pub mod labels {
    /// `outcome` of [`super::names::ENQUEUE_TOTAL`].
    pub const ENQUEUE_OUTCOMES: [&str; 4] = ["added", "coalesced", "followup", "error"];
    /// `reason` of [`super::names::JOBS_FAILED_TOTAL`].
    pub const FAILURE_REASONS: [&str; 6] = [
        "error",
        "permanent",
        "unavailable",
        "timeout",
        "panic",
        "lease_lost",
    ];
    /// `reason` of [`super::names::JOBS_DEAD_LETTERED_TOTAL`]: the failed
    /// attempt's own (permanent, exhausted) and the runtime's (an entry
    /// that could not be read, a job whose workers kept dying; their domain
    /// is unknown, so `other`).
    pub const DEAD_LETTER_REASONS: [&str; 4] = ["permanent", "exhausted", "unusable", "stalled"];
    /// `(outcome, degraded)` of [`super::names::COMPACTIONS_TOTAL`]: only
    /// a commit can be degraded.
    pub const COMPACTION_OUTCOMES: [(&str, &str); 7] = [
        ("committed", "false"),
        ("committed", "true"),
        ("no_progress", "false"),
        ("no_progress", "true"),
        ("skipped", "false"),
        ("conflict", "false"),
        ("failed", "false"),
    ];
    /// `outcome` of [`super::names::TURNS_TOTAL`].
    pub const TURN_OUTCOMES: [&str; 4] = ["not_due", "requested", "breaker_open", "unavailable"];
    /// `outcome` of [`super::names::LEASE_WAIT_SECONDS`].
    pub const WAIT_OUTCOMES: [&str; 5] =
        ["ready", "compacted", "timeout", "no_live_worker", "polled"];
    /// `op` of [`super::names::NOTIFY_ERRORS_TOTAL`].
    pub const NOTIFY_OPS: [&str; 2] = ["publish", "subscribe"];
    /// `status` of [`super::names::HTTP_REQUESTS_TOTAL`] created at zero
    /// (the admin API answers no 1xx or 3xx).
    pub const HTTP_STATUS_CLASSES: [&str; 3] = ["2xx", "4xx", "5xx"];
    /// `route` of requests to a path no route matches (never the path
    /// itself: any caller could create label values).
    pub const UNMATCHED_ROUTE: &str = "unmatched";
}

/// The `domain` label of every domain not in the allow-list.
pub const OTHER_DOMAIN: &str = "other";

/// Most domains an allow-list may name (each multiplies the series of
/// every domain-labelled family).
pub const MAX_LABELLED_DOMAINS: usize = 64;

/// `[metrics]`: which domains are metric labels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSettings {
    /// Domains labelled as themselves; every other domain is labelled
    /// [`OTHER_DOMAIN`]. Empty (the default): every domain is `other`.
    pub domains: Vec<String>,
}

impl MetricsSettings {
    /// Each entry a valid domain, not `other`, named once; at most
    /// [`MAX_LABELLED_DOMAINS`].
    pub fn validate(&self) -> Result<(), String> {
        if self.domains.len() > MAX_LABELLED_DOMAINS {
            return Err(format!(
                "metrics.domains: {} domains, at most {MAX_LABELLED_DOMAINS} (each one adds a series to every domain-labelled metric)",
                self.domains.len()
            ));
        }
        let mut seen = BTreeSet::new();
        for domain in &self.domains {
            EntityKey::parse(domain, "x")
                .map_err(|e| format!("metrics.domains: {domain:?}: {e}"))?;
            if domain == OTHER_DOMAIN {
                return Err(format!(
                    "metrics.domains: {OTHER_DOMAIN:?} is the label of every domain not listed"
                ));
            }
            if !seen.insert(domain.as_str()) {
                return Err(format!("metrics.domains: {domain:?} listed twice"));
            }
        }
        Ok(())
    }
}

/// The domains labelled as themselves. Process-wide, as the recorder is:
/// a process that configures several allow-lists (tests running workers
/// side by side) labels the union, which is still bounded by its
/// configuration.
static LABELLED_DOMAINS: RwLock<BTreeSet<String>> = RwLock::new(BTreeSet::new());

/// Adds `domains` to the domains labelled as themselves (the worker calls
/// it at start-up with `[metrics] domains`; a program embedding the client
/// calls it before recording). Names that are not valid domains are
/// ignored: they cannot occur.
pub fn allow_domains<S: AsRef<str>>(domains: impl IntoIterator<Item = S>) {
    let mut allowed = LABELLED_DOMAINS
        .write()
        .unwrap_or_else(PoisonError::into_inner);
    for domain in domains {
        let domain = domain.as_ref();
        if domain != OTHER_DOMAIN && EntityKey::parse(domain, "x").is_ok() {
            allowed.insert(domain.to_owned());
        }
    }
}

/// The `domain` label of `domain`: itself when allowed, else
/// [`OTHER_DOMAIN`] (an empty or unknown domain included).
pub fn domain_label(domain: &str) -> String {
    let allowed = LABELLED_DOMAINS
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    if allowed.contains(domain) {
        domain.to_owned()
    } else {
        OTHER_DOMAIN.to_owned()
    }
}

/// Every value the `domain` label can take now: the allowed domains, then
/// [`OTHER_DOMAIN`].
pub fn domain_labels() -> Vec<String> {
    let allowed = LABELLED_DOMAINS
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    allowed
        .iter()
        .cloned()
        .chain(std::iter::once(OTHER_DOMAIN.to_owned()))
        .collect()
}

/// What kind of metric a family is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One metric family: its name, kind and help text (shown by `/metrics`,
/// checked against the dashboard and the README by tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

const fn family(name: &'static str, kind: Kind, help: &'static str) -> Family {
    Family { name, kind, help }
}

/// Every family recorded by the queue, the worker runtime, the compaction
/// job and the client (the LLM clients list theirs in
/// `compactor_worker::llm::metrics`).
pub const FAMILIES: &[Family] = &[
    family(
        names::ENQUEUE_TOTAL,
        Kind::Counter,
        "Compaction requests, by outcome (added, coalesced, followup, error)",
    ),
    family(
        names::JOBS_STARTED_TOTAL,
        Kind::Counter,
        "Job attempts started",
    ),
    family(
        names::JOBS_COMPLETED_TOTAL,
        Kind::Counter,
        "Job attempts that succeeded",
    ),
    family(
        names::JOBS_FAILED_TOTAL,
        Kind::Counter,
        "Job attempts that failed, by reason",
    ),
    family(
        names::JOBS_RETRIED_TOTAL,
        Kind::Counter,
        "Failed attempts scheduled to run again",
    ),
    family(
        names::JOBS_DEAD_LETTERED_TOTAL,
        Kind::Counter,
        "Jobs moved to the dead-letter set, by reason",
    ),
    family(
        names::JOBS_RECOVERED_TOTAL,
        Kind::Counter,
        "Jobs whose lease expired, returned to the queue",
    ),
    family(
        names::JOBS_RELEASED_TOTAL,
        Kind::Counter,
        "Jobs handed back unfinished or unstarted: at shutdown, or claimed ahead with no slot free in time",
    ),
    family(
        names::LEASES_LOST_TOTAL,
        Kind::Counter,
        "Queue leases lost while running",
    ),
    family(
        names::QUEUE_ERRORS_TOTAL,
        Kind::Counter,
        "Redis operations of the worker that failed, by op",
    ),
    family(
        names::QUEUE_DEPTH,
        Kind::Gauge,
        "Jobs by state (waiting, running, done, dead)",
    ),
    family(
        names::DEAD_LETTER_SIZE,
        Kind::Gauge,
        "Dead-lettered jobs kept",
    ),
    family(
        names::JOB_RUN_SECONDS,
        Kind::Histogram,
        "Run time of one attempt, by outcome",
    ),
    family(
        names::JOB_QUEUE_WAIT_SECONDS,
        Kind::Histogram,
        "Time from a job being added to being claimed",
    ),
    family(
        names::COMPACTIONS_TOTAL,
        Kind::Counter,
        "Compaction jobs, by outcome and whether degraded",
    ),
    family(
        names::COMPACTION_TOKENS,
        Kind::Histogram,
        "Estimated context tokens of a committed compaction, by stage (before, after)",
    ),
    family(
        names::COMPACTION_MESSAGES,
        Kind::Histogram,
        "Messages folded into the summary per committed compaction",
    ),
    family(
        names::COMPACTION_CHUNKS,
        Kind::Histogram,
        "Summarizer chunks per committed compaction",
    ),
    family(
        names::COMPACTION_ROLLUPS,
        Kind::Histogram,
        "Rollup passes per committed compaction",
    ),
    family(
        names::FENCE_CONFLICTS_TOTAL,
        Kind::Counter,
        "Commits refused by the fence (lease lost or another run committed first)",
    ),
    family(
        names::ENTITY_LEASES_LOST_TOTAL,
        Kind::Counter,
        "Entity leases lost while a compaction ran",
    ),
    family(
        names::BREAKER_SKIPS_TOTAL,
        Kind::Counter,
        "Automatic requests held back by an open circuit breaker",
    ),
    family(
        names::TURNS_TOTAL,
        Kind::Counter,
        "finalize_turn calls, by outcome",
    ),
    family(
        names::LEASE_WAIT_SECONDS,
        Kind::Histogram,
        "Time chat requests waited for a running compaction, by outcome",
    ),
    family(
        names::LEASE_WAIT_TIMEOUTS_TOTAL,
        Kind::Counter,
        "Waits that ended at their timeout with the compaction still pending (polls with a zero timeout not counted)",
    ),
    family(
        names::NOTIFY_ERRORS_TOTAL,
        Kind::Counter,
        "Release announcements not published, or subscriptions to them broken, by op",
    ),
    family(
        names::RECONCILE_REQUESTED_TOTAL,
        Kind::Counter,
        "Compactions a reconciliation sweep requested again because the queue had lost them",
    ),
    family(
        names::HTTP_REQUESTS_TOTAL,
        Kind::Counter,
        "Admin HTTP API requests, by route template and status class",
    ),
    family(
        names::HTTP_REQUEST_SECONDS,
        Kind::Histogram,
        "Time to answer one admin HTTP API request, by route template and status class",
    ),
    family(
        names::BUILD_INFO,
        Kind::Gauge,
        "1, labelled with the version of the running build",
    ),
];

/// Registers the help texts of [`FAMILIES`] with the installed recorder.
pub fn describe() {
    describe_families(FAMILIES);
}

/// Registers the help texts of `families` with the installed recorder.
pub fn describe_families(families: &[Family]) {
    for f in families {
        match f.kind {
            Kind::Counter => metrics::describe_counter!(f.name, f.help),
            Kind::Gauge => metrics::describe_gauge!(f.name, f.help),
            Kind::Histogram => metrics::describe_histogram!(f.name, f.help),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_a_family_once_and_follows_the_conventions() {
        let mut seen = std::collections::HashSet::new();
        for f in FAMILIES {
            assert!(seen.insert(f.name), "{} listed twice", f.name);
            assert!(f.name.starts_with("compactor_"), "{}", f.name);
            match f.kind {
                Kind::Counter => assert!(f.name.ends_with("_total"), "{}", f.name),
                Kind::Gauge | Kind::Histogram => assert!(!f.name.ends_with("_total"), "{}", f.name),
            }
        }
        // Every constant in `names` is a family (30 of them).
        assert_eq!(FAMILIES.len(), 30);
    }

    #[test]
    fn domains_outside_the_allow_list_are_other() {
        allow_domains(["metrics-unit-a", "BAD DOMAIN", "other"]);
        assert_eq!(domain_label("metrics-unit-a"), "metrics-unit-a");
        assert_eq!(domain_label("metrics-unit-b"), OTHER_DOMAIN);
        assert_eq!(domain_label(""), OTHER_DOMAIN);
        let all = domain_labels();
        assert!(all.contains(&"metrics-unit-a".to_owned()));
        assert!(!all.iter().any(|d| d == "BAD DOMAIN" || d.is_empty()));
        assert_eq!(all.last().map(String::as_str), Some(OTHER_DOMAIN));
        assert_eq!(all.iter().filter(|d| *d == OTHER_DOMAIN).count(), 1);
    }

    #[test]
    fn allow_lists_are_checked() {
        let list = |d: &[&str]| MetricsSettings {
            domains: d.iter().map(|s| (*s).to_owned()).collect(),
        };
        assert!(list(&[]).validate().is_ok());
        assert!(list(&["chat", "support-bot"]).validate().is_ok());
        for bad in [&["Chat"][..], &["other"], &[""], &["chat", "chat"]] {
            assert!(list(bad).validate().is_err(), "{bad:?}");
        }
        let many: Vec<String> = (0..=MAX_LABELLED_DOMAINS)
            .map(|i| format!("d{i}"))
            .collect();
        assert!(MetricsSettings { domains: many }.validate().is_err());
    }
}
