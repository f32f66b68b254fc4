//! The apalis backend over the project's queue scripts: it hands apalis one
//! claimed job at a time, only when the worker has a free slot (apalis asks
//! for a task only after the concurrency layer is ready), and while the
//! queue is empty waits for a wake-up (see [`super::wake`]) instead of
//! polling.
//!
//! The one local buffer is the [`Handoff`]: jobs claimed in the round trip
//! that acknowledged others ([`super::ack`]), one per slot those
//! acknowledgements freed, plus — while jobs are short — up to
//! `claim_ahead` more. Each is picked up as soon as a slot asks for work; a
//! job that waits there longer than [`CLAIM_AHEAD_HOLD`] is handed back to
//! the queue (at its place in line, attempt not counted), so a worker never
//! sits on a job another worker could run. At shutdown whatever is left
//! there is handed back too.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use apalis_core::backend::{Backend, BackendConfig};
use apalis_core::task::Task;
use apalis_core::worker::context::WorkerContext;
use compactor_producer::metrics::names;
use compactor_producer::queue::{ClaimOutcome, ClaimedJob};
use futures::future::BoxFuture;
use tokio::sync::Notify;
use tracing::{debug, warn};

use super::Shared;

/// Longest a claimed job may wait in the [`Handoff`] for a slot before it
/// is handed back to the queue. A job claimed for a freed slot is taken
/// within microseconds; one claimed ahead waits for the next slot to free,
/// which for short jobs (see `ack::SHORT_JOB`) is well inside this.
pub(crate) const CLAIM_AHEAD_HOLD: Duration = Duration::from_millis(25);

/// Jobs claimed for slots that acknowledgements freed, or ahead of them
/// (see [`super::ack`]); the fetcher hands them out, oldest first, before
/// claiming. Whoever pushes wakes the fetcher through [`Shared::wake`].
#[derive(Debug, Default)]
pub(crate) struct Handoff {
    jobs: Mutex<VecDeque<(Instant, ClaimedJob)>>,
    /// Wakes [`expire`] when a job arrives.
    arrived: Notify,
}

impl Handoff {
    fn jobs(&self) -> MutexGuard<'_, VecDeque<(Instant, ClaimedJob)>> {
        // Nothing panics while holding the lock.
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn push(&self, job: ClaimedJob) {
        self.jobs().push_back((Instant::now(), job));
        self.arrived.notify_one();
    }

    fn pop(&self) -> Option<ClaimedJob> {
        self.jobs().pop_front().map(|(_, job)| job)
    }

    pub(crate) fn len(&self) -> usize {
        self.jobs().len()
    }

    pub(crate) fn drain(&self) -> Vec<ClaimedJob> {
        self.jobs().drain(..).map(|(_, job)| job).collect()
    }

    /// Takes the jobs that arrived before `cutoff`; the arrival time of the
    /// oldest one left, if any.
    fn take_older_than(&self, cutoff: Instant) -> (Vec<ClaimedJob>, Option<Instant>) {
        let mut jobs = self.jobs();
        let mut old = Vec::new();
        while jobs.front().is_some_and(|(at, _)| *at < cutoff) {
            if let Some((_, job)) = jobs.pop_front() {
                old.push(job);
            }
        }
        (old, jobs.front().map(|(at, _)| *at))
    }
}

/// Hands back jobs that waited in the [`Handoff`] longer than
/// [`CLAIM_AHEAD_HOLD`]. Runs through the shutdown grace period too (a
/// settle call under way when shutdown began may still bring jobs), until
/// in-flight jobs are done or handed back; the runtime then hands back
/// whatever is left.
pub(crate) async fn expire(shared: Arc<Shared>) {
    loop {
        tokio::select! {
            () = shared.handoff.arrived.notified() => {}
            () = shared.hand_back.cancelled() => return,
        }
        // (`checked_sub` fails only within 25 ms of boot.)
        while let Some(cutoff) = Instant::now().checked_sub(CLAIM_AHEAD_HOLD) {
            let (old, oldest) = shared.handoff.take_older_than(cutoff);
            if !old.is_empty() {
                debug!(
                    jobs = old.len(),
                    "claimed-ahead jobs found no slot; handed back"
                );
                release_unstarted(&shared, old).await;
            }
            let Some(oldest) = oldest else { break };
            tokio::select! {
                () = tokio::time::sleep_until((oldest + CLAIM_AHEAD_HOLD).into()) => {}
                () = shared.hand_back.cancelled() => return,
            }
        }
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
        // Until a wake-up (a job announced, or handed off), the next delayed
        // job is due, or the check interval passes: whichever comes first.
        tokio::select! {
            () = shared.wake.notified() => {}
            () = tokio::time::sleep(wait) => {}
            () = shared.stop.cancelled() => return None,
        }
    }
}

/// Pause between claims while Redis fails: 100 ms doubling to 5 s.
pub(crate) fn error_backoff() -> impl Iterator<Item = Duration> {
    compactor_producer::backoff::reconnect(Duration::from_millis(100), Duration::from_secs(5))
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

/// Hands `jobs` (leased, never started) back to the queue.
pub(crate) async fn release_unstarted(shared: &Shared, jobs: Vec<ClaimedJob>) {
    for job in jobs {
        match shared.queue.release(&job).await {
            Ok(false) => {}
            Ok(true) => {
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
