//! Whether the provider answers at all: one state per client, shared by
//! every job of the worker process (clones of an [`super::LlmClient`]
//! share it).
//!
//! Why: a dead LLM used to cost each compaction its whole retry budget
//! (five requests with backoff, on each of two attempts: about 50 s)
//! before the extractive fallback committed, and every compaction after it
//! paid the same again. Now, after `unhealthy_after` consecutive failed
//! requests the provider is *unhealthy*: the client sends no more requests
//! (a call fails at once with [`super::LlmError::Unhealthy`]), and the
//! compaction job summarizes offline straight away (degraded, reason
//! `llm_unhealthy`). The request that tips the count also ends its own
//! retries, so the compaction that met the outage falls back within a few
//! seconds too.
//!
//! Back to healthy: a background probe, one small request every
//! `probe_interval`, started when the provider turns unhealthy; its first
//! answer ends the outage. A probe rather than letting one compaction
//! through as the trial: no compaction ever waits on a request to a
//! provider that is likely dead (a hung server would hold the trial for a
//! whole request timeout), and the cost is a few tokens per interval, only
//! while the provider is down.
//!
//! What counts as a failure: what shows the provider is not serving us —
//! connection failures, timeouts, 5xx, rate limits, 401/403, malformed
//! replies ([`super::LlmError::counts_against_health`]). A context-length
//! error or another 4xx is about the request, not the provider: it neither
//! counts nor resets. Any answered request resets the count, whatever the
//! answer says (an empty one included): bad answers are the checks'
//! business (the job retries and falls back), not a sign that the provider
//! is down.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// The health of one provider. Lock-free: a few atomics read on every
/// request.
#[derive(Debug)]
pub struct Health {
    /// Failures in a row that make the provider unhealthy; 0: never.
    threshold: u32,
    /// Failed requests since the last answered one.
    failures: AtomicU32,
    unhealthy: AtomicBool,
}

/// What one request changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Nothing.
    None,
    /// This failure made the provider unhealthy (start the probe).
    BecameUnhealthy,
    /// This answer made it healthy again.
    Recovered,
}

impl Health {
    /// Healthy, turning unhealthy after `unhealthy_after` failures in a row
    /// (never when 0).
    pub fn new(unhealthy_after: u32) -> Health {
        Health {
            threshold: unhealthy_after,
            failures: AtomicU32::new(0),
            unhealthy: AtomicBool::new(false),
        }
    }

    /// Whether requests may be sent.
    pub fn is_healthy(&self) -> bool {
        !self.unhealthy.load(Ordering::Acquire)
    }

    /// Failed requests since the last answered one.
    pub fn consecutive_failures(&self) -> u32 {
        self.failures.load(Ordering::Acquire)
    }

    /// A request was answered.
    pub fn succeeded(&self) -> Transition {
        self.failures.store(0, Ordering::Release);
        if self.unhealthy.swap(false, Ordering::AcqRel) {
            Transition::Recovered
        } else {
            Transition::None
        }
    }

    /// A request failed in a way that shows the provider is not serving.
    /// Exactly one caller sees [`Transition::BecameUnhealthy`] per outage,
    /// however many requests fail at once.
    pub fn failed(&self) -> Transition {
        if self.threshold == 0 {
            return Transition::None;
        }
        let failures = self
            .failures
            .fetch_add(1, Ordering::AcqRel)
            .saturating_add(1);
        if failures >= self.threshold && !self.unhealthy.swap(true, Ordering::AcqRel) {
            Transition::BecameUnhealthy
        } else {
            Transition::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_unhealthy_after_the_threshold_and_recovers_on_an_answer() {
        let h = Health::new(3);
        assert!(h.is_healthy());
        assert_eq!(h.failed(), Transition::None);
        assert_eq!(h.failed(), Transition::None);
        assert!(h.is_healthy());
        assert_eq!(h.failed(), Transition::BecameUnhealthy);
        assert!(!h.is_healthy());
        assert_eq!(h.failed(), Transition::None, "one transition per outage");
        assert_eq!(h.consecutive_failures(), 4);
        assert_eq!(h.succeeded(), Transition::Recovered);
        assert!(h.is_healthy());
        assert_eq!(h.consecutive_failures(), 0);
        assert_eq!(h.succeeded(), Transition::None);
    }

    #[test]
    fn an_answer_resets_the_count() {
        let h = Health::new(3);
        h.failed();
        h.failed();
        h.succeeded();
        h.failed();
        h.failed();
        assert!(h.is_healthy(), "failures must be consecutive");
    }

    #[test]
    fn zero_turns_it_off() {
        let h = Health::new(0);
        for _ in 0..100 {
            assert_eq!(h.failed(), Transition::None);
        }
        assert!(h.is_healthy());
    }

    #[test]
    fn concurrent_failures_report_one_transition() {
        let h = std::sync::Arc::new(Health::new(3));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let h = h.clone();
                std::thread::spawn(move || {
                    (0..10)
                        .filter(|_| h.failed() == Transition::BecameUnhealthy)
                        .count()
                })
            })
            .collect();
        let transitions: usize = handles.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(transitions, 1);
    }
}
