//! What an attempt's run tells: its start (counted, with how long the job
//! waited in line), its run time by outcome (the histogram, and the span's
//! `duration_ms` that the outcome's log lines carry), and the state the
//! group acknowledgement claims by: how many attempts run now, and how long
//! the last ones ran (claiming ahead only pays for short jobs).
//!
//! Inside the acknowledgement layer: the slot counts as free, and the run
//! as recorded, before the outcome is told to the queue.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tracing::Span;

use super::around::{AroundAttempt, Run};
use crate::events::{AttemptEnded, AttemptStarted, InternalEvent};
use crate::runtime::attempt::{run_outcome, Attempt, Outcome};
use crate::runtime::Shared;

#[derive(Clone)]
pub(crate) struct Measure {
    shared: Arc<Shared>,
}

impl Measure {
    pub(crate) fn new(shared: Arc<Shared>) -> Measure {
        Measure { shared }
    }
}

impl AroundAttempt for Measure {
    fn around<F>(&self, attempt: Attempt, inner: impl FnOnce(Attempt) -> F) -> Run
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        let queue = shared.queue_label();
        let domain = attempt.domain.clone();
        let waited = attempt.job.queue_wait;
        let run = inner(attempt);
        Box::pin(async move {
            AttemptStarted {
                queue: &queue,
                domain: &domain,
                waited,
            }
            .emit();
            let started = Instant::now();
            shared.running.fetch_add(1, Ordering::Relaxed);
            let outcome = run.await;
            shared.running.fetch_sub(1, Ordering::Relaxed);
            let elapsed = started.elapsed();
            Span::current().record("duration_ms", crate::telemetry::millis(elapsed));
            shared.acks.record_run(elapsed);
            AttemptEnded {
                queue: &queue,
                domain: &domain,
                outcome: run_outcome(&outcome),
                elapsed,
            }
            .emit();
            outcome
        })
    }
}
