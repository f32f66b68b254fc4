//! The apalis backend over the project's queue scripts: it hands apalis one
//! claimed job at a time, only when the worker has a free slot (apalis asks
//! for a task only after the concurrency layer is ready, so no job waits
//! leased in a local buffer), and blocks on the queue's wake-up list while
//! the queue is empty instead of polling.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use apalis_core::backend::{Backend, BackendConfig};
use apalis_core::task::Task;
use apalis_core::worker::context::WorkerContext;
use backon::{BackoffBuilder, ExponentialBuilder};
use compactor_producer::metrics::names;
use compactor_producer::queue::{ClaimOutcome, ClaimedJob};
use futures::future::BoxFuture;
use tokio::sync::Notify;
use tracing::{debug, warn};

use super::Shared;

/// Jobs claimed ahead by `complete_and_claim` (one round trip acknowledges a
/// job and leases the next); the fetcher hands them out before claiming.
#[derive(Debug, Default)]
pub(crate) struct Handoff {
    jobs: Mutex<VecDeque<ClaimedJob>>,
    notify: Notify,
}

impl Handoff {
    pub(crate) fn push(&self, job: ClaimedJob) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.push_back(job);
        }
        self.notify.notify_one();
    }

    fn pop(&self) -> Option<ClaimedJob> {
        self.jobs.lock().ok().and_then(|mut jobs| jobs.pop_front())
    }

    fn drain(&self) -> Vec<ClaimedJob> {
        self.jobs
            .lock()
            .map(|mut jobs| jobs.drain(..).collect())
            .unwrap_or_default()
    }
}

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
    let mut errors = error_backoff();
    loop {
        if let Some(job) = shared.handoff.pop() {
            return Some(job);
        }
        if shared.stop.is_cancelled() {
            return None;
        }
        let wait = match shared.queue.claim(&shared.worker_id).await {
            Ok(ClaimOutcome::Claimed(job)) => return Some(job),
            Ok(ClaimOutcome::Unusable { member, error }) => {
                shared.count_unusable(&member, &error);
                continue;
            }
            Ok(ClaimOutcome::Empty { next_due_in }) => {
                errors = error_backoff();
                next_due_in.map_or(shared.config.check_interval, |due| {
                    due.min(shared.config.check_interval)
                })
            }
            Err(error) => {
                shared.count_error("claim", &error);
                let delay = errors.next().unwrap_or(Duration::from_secs(5));
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = shared.stop.cancelled() => return None,
                }
                continue;
            }
        };
        tokio::select! {
            woken = wait_for_work(&shared, wait) => {
                if let Err(delay) = woken {
                    tokio::time::sleep(delay).await;
                }
            }
            () = shared.handoff.notify.notified() => {}
            () = shared.stop.cancelled() => return None,
        }
    }
}

/// Blocks on the wake-up list for at most `wait`. On a Redis error, returns
/// how long to pause before claiming again.
async fn wait_for_work(shared: &Shared, wait: Duration) -> Result<(), Duration> {
    let mut signal = shared.signal.lock().await;
    if signal.is_none() {
        match shared.queue.wake_signal().await {
            Ok(s) => *signal = Some(s),
            Err(error) => {
                shared.count_error("wait", &error);
                return Err(wait.min(Duration::from_secs(1)));
            }
        }
    }
    let Some(s) = signal.as_mut() else {
        return Err(wait);
    };
    match s.wait(wait).await {
        Ok(woken) => {
            debug!(woken, "wake-up wait ended");
            Ok(())
        }
        Err(error) => {
            shared.count_error("wait", &error);
            // The connection reconnects by itself; pause briefly so a dead
            // Redis is not hammered.
            Err(wait.min(Duration::from_millis(500)))
        }
    }
}

/// Pause between claims while Redis fails: 100 ms doubling to 5 s.
fn error_backoff() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .with_jitter()
        .without_max_times()
        .build()
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
    for job in unstarted {
        match shared.queue.release(&job).await {
            Ok(_) => {
                metrics::counter!(names::JOBS_RELEASED_TOTAL, "queue" => shared.queue_label())
                    .increment(1);
            }
            Err(error) => {
                // Its lease expires and recovery returns it to the queue.
                warn!(job_id = job.job_id, %error, "could not hand back an unstarted job");
            }
        }
    }
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
