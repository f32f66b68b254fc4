//! What an attempt's run tells: its start (counted, with how long the job
//! waited in line), its run time by outcome (the histogram, and the span's
//! `duration_ms` that the outcome's log lines carry), and the state the
//! group acknowledgement claims by: how many attempts run now, and how long
//! the last ones ran (claiming ahead only pays for short jobs).
//!
//! Inside the acknowledgement layer: the slot counts as free, and the run
//! as recorded, before the outcome is told to the queue.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tower::{Layer, Service};
use tracing::Span;

use crate::events::{AttemptEnded, AttemptStarted, InternalEvent};
use crate::runtime::attempt::{run_outcome, Attempt, Outcome, Stop};
use crate::runtime::Shared;

#[derive(Clone)]
pub(crate) struct MeasureLayer {
    shared: Arc<Shared>,
}

impl MeasureLayer {
    pub(crate) fn new(shared: Arc<Shared>) -> MeasureLayer {
        MeasureLayer { shared }
    }
}

impl<S> Layer<S> for MeasureLayer {
    type Service = Measure<S>;

    fn layer(&self, inner: S) -> Measure<S> {
        Measure {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

#[derive(Clone)]
pub(crate) struct Measure<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Service<Attempt> for Measure<S>
where
    S: Service<Attempt, Response = (), Error = Stop>,
    S::Future: Send + 'static,
{
    type Response = ();
    type Error = Stop;
    type Future = Pin<Box<dyn Future<Output = Outcome> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Stop>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, attempt: Attempt) -> Self::Future {
        let shared = Arc::clone(&self.shared);
        let queue = shared.queue_label();
        let domain = attempt.domain.clone();
        let waited = attempt.job.queue_wait;
        let run = self.inner.call(attempt);
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
