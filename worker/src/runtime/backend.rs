//! The apalis backend over the project's queue scripts: it hands apalis one
//! claimed job at a time, only when the worker has a free slot (apalis asks
//! for a task only after the concurrency layer is ready), and while the
//! queue is empty waits for a wake-up (see [`super::wake`]) instead of
//! polling.
//!
//! Before claiming, the fetcher looks in the
//! [`Handoff`](super::handoff::Handoff): jobs claimed for
//! it in the round trip that acknowledged others. While that round trip is
//! under way it does not claim on its own (the round trip claims for the
//! slot). When the worker stops, the claim under way and whatever is left
//! in the handoff go back to the queue.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use apalis_core::backend::{Backend, BackendConfig};
use apalis_core::task::Task;
use apalis_core::worker::context::WorkerContext;
use compactor_producer::events::catalogue::QueueOp;
use compactor_producer::queue::{ClaimOutcome, ClaimedJob};
use futures::future::BoxFuture;

use super::handoff::release_unstarted;
use super::retry::reconnect_backoff;
use super::Shared;

/// Why the backend never fails: Redis errors are retried inside the fetcher
/// (with backoff, counted and logged) so a Redis restart never ends a worker.
pub(crate) type BackendError = std::convert::Infallible;

/// The apalis backend of one worker.
pub(crate) struct QueueBackend {
    shared: Arc<Shared>,
    fetch: Option<BoxFuture<'static, Option<ClaimedJob>>>,
    close: Option<BoxFuture<'static, ()>>,
}

impl std::fmt::Debug for QueueBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueBackend")
            .field("worker", &self.shared.worker_id)
            .finish_non_exhaustive()
    }
}

impl QueueBackend {
    pub(crate) fn new(shared: Arc<Shared>) -> QueueBackend {
        QueueBackend {
            shared,
            fetch: None,
            close: None,
        }
    }
}

/// Claims the next job for this worker, waiting as long as it takes.
/// `None` once the runtime is stopping.
async fn next_job(shared: Arc<Shared>) -> Option<ClaimedJob> {
    let mut errors = reconnect_backoff();
    loop {
        if let Some(job) = shared.handoff.pop() {
            return Some(job);
        }
        if shared.stop.is_cancelled() {
            return None;
        }
        if shared.acks.settling() {
            // A settle call claims for this slot: wait for its answer rather
            // than lease a second job for the same slot.
            tokio::select! {
                () = shared.wake.notified() => {}
                () = shared.stop.cancelled() => return None,
            }
            continue;
        }
        let wait = match shared.queue.claim(&shared.worker_id).await {
            Ok(ClaimOutcome::Claimed(job)) => return Some(job),
            Ok(ClaimOutcome::Unusable { member, error }) => {
                shared.count_unusable(&member, &error);
                continue;
            }
            Ok(ClaimOutcome::Empty { next_due_in }) => {
                errors = reconnect_backoff();
                next_due_in.map_or(shared.config.check_interval, |due| {
                    due.min(shared.config.check_interval)
                })
            }
            Err(error) => {
                shared.count_error(QueueOp::Claim, &error);
                let delay = errors.next().unwrap_or(Duration::from_secs(5));
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = shared.stop.cancelled() => return None,
                }
                continue;
            }
        };
        // Until a wake-up (a job announced, or handed off), the next delayed
        // job is due, or the check interval passes: whichever comes first.
        tokio::select! {
            () = shared.wake.notified() => {}
            () = tokio::time::sleep(wait) => {}
            () = shared.stop.cancelled() => return None,
        }
    }
}

/// Hands back jobs this worker leased but never started: the fetch that was
/// under way when shutdown began, and jobs claimed ahead.
async fn close(shared: Arc<Shared>, fetch: Option<BoxFuture<'static, Option<ClaimedJob>>>) {
    let mut unstarted = Vec::new();
    if let Some(fetch) = fetch {
        // `stop` is cancelled, so this returns at once (after an in-flight
        // claim, whose job must not be left leased).
        unstarted.extend(fetch.await);
    }
    unstarted.extend(shared.handoff.drain());
    release_unstarted(&shared, unstarted).await;
}

impl Backend for QueueBackend {
    type Task = Task<ClaimedJob>;
    type Error = BackendError;

    fn poll_ready(
        &mut self,
        _cx: &mut Context<'_>,
        _worker: &WorkerContext,
    ) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        _worker: &WorkerContext,
    ) -> Poll<Option<Result<Self::Task, Self::Error>>> {
        let shared = &self.shared;
        let fetch = self
            .fetch
            .get_or_insert_with(|| Box::pin(next_job(Arc::clone(shared))));
        match Pin::new(fetch).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(job) => {
                self.fetch = None;
                Poll::Ready(job.map(|job| Ok(Task::new(job))))
            }
        }
    }

    fn poll_close(
        &mut self,
        cx: &mut Context<'_>,
        _worker: &WorkerContext,
    ) -> Poll<Result<(), Self::Error>> {
        // apalis closes the backend only when the worker stops.
        self.shared.stop.cancel();
        let shared = &self.shared;
        let fetch = self.fetch.take();
        let close = self
            .close
            .get_or_insert_with(|| Box::pin(close(Arc::clone(shared), fetch)));
        Pin::new(close).poll(cx).map(Ok)
    }
}

impl BackendConfig for QueueBackend {
    type Args = ClaimedJob;
    type Id = apalis_core::task::task_id::RandomId;
    type Kind = apalis_core::backend::finalize::Ephemeral;
    type Config = ();
    type Layer = tower::layer::util::Identity;

    fn config(&self) -> &Self::Config {
        &()
    }

    fn middleware(&mut self, _worker: &mut WorkerContext) -> Self::Layer {
        tower::layer::util::Identity::new()
    }
}
