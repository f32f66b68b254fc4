//! One attempt of one job: the tower service apalis calls for each claimed
//! job. It runs the handler under the job's lease — renewed by a heartbeat,
//! capped by the lock duration, cancelled the moment the lease is lost or
//! the shutdown grace period ends — and then acknowledges the outcome to
//! the queue: complete, retry later, dead-letter, or hand back.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use apalis_core::task::Task;
use compactor_producer::metrics::{domain_label, names};
use compactor_producer::queue::{ClaimedJob, FailAction, Failure, QueueError};
use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, info_span, warn, Instrument, Span};

use super::ack::AckRequest;
use super::handler::{Job, JobError, JobHandler};
use super::Shared;

/// The apalis service running jobs with handler `H`.
pub(crate) struct JobService<H> {
    shared: Arc<Shared>,
    handler: Arc<H>,
}

impl<H> Clone for JobService<H> {
    fn clone(&self) -> Self {
        JobService {
            shared: Arc::clone(&self.shared),
            handler: Arc::clone(&self.handler),
        }
    }
}

impl<H> JobService<H> {
    pub(crate) fn new(shared: Arc<Shared>, handler: Arc<H>) -> JobService<H> {
        JobService { shared, handler }
    }
}

impl<H: JobHandler> tower::Service<Task<ClaimedJob>> for JobService<H> {
    type Response = ();
    /// Never returned: every outcome is acknowledged to the queue here.
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<(), Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, task: Task<ClaimedJob>) -> Self::Future {
        let job = task.args;
        let span = info_span!(
            "job",
            queue = %self.shared.queue_label(),
            domain = %job.key.domain(),
            entity_id = %job.key.entity_id(),
            job_id = job.job_id,
            attempt = job.attempt,
            trigger = job.payload.trigger.label(),
            // How long the attempt ran: set when it ends, so the lines
            // about its outcome (retry, dead letter, hand-back) carry it.
            duration_ms = tracing::field::Empty,
        );
        let shared = Arc::clone(&self.shared);
        let handler = Arc::clone(&self.handler);
        Box::pin(
            async move {
                run_attempt(&shared, handler.as_ref(), job).await;
                Ok(())
            }
            .instrument(span),
        )
    }
}

/// How an attempt ended.
#[derive(Debug)]
enum Outcome {
    Succeeded,
    Failed(JobError),
    /// The handler panicked; treated as a retryable failure.
    Panicked(String),
    /// The attempt ran longer than the lock duration.
    TimedOut,
    /// Renewal failed: someone else may hold the entity now.
    LeaseLost,
    /// Shutdown grace period over: hand the job back unfinished.
    HandBack,
}

impl Outcome {
    fn label(&self) -> &'static str {
        match self {
            Outcome::Succeeded => "completed",
            Outcome::Failed(JobError::Retryable { .. }) => "error",
            Outcome::Failed(JobError::Permanent { .. }) => "permanent",
            Outcome::Failed(JobError::Unavailable { .. }) => "unavailable",
            Outcome::Panicked(_) => "panic",
            Outcome::TimedOut => "timeout",
            Outcome::LeaseLost => "lease_lost",
            Outcome::HandBack => "released",
        }
    }
}

async fn run_attempt<H: JobHandler>(shared: &Arc<Shared>, handler: &H, job: ClaimedJob) {
    let queue = shared.queue_label();
    let domain = domain_label(job.key.domain());
    metrics::counter!(names::JOBS_STARTED_TOTAL, "queue" => queue.clone(), "domain" => domain.clone())
        .increment(1);
    metrics::histogram!(names::JOB_QUEUE_WAIT_SECONDS, "queue" => queue.clone(), "domain" => domain.clone())
        .record(job.queue_wait.as_secs_f64());
    debug!(
        waited_ms = crate::telemetry::millis(job.queue_wait),
        "attempt started"
    );

    let cancel = CancellationToken::new();
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + shared.config.lock_duration;
    let attempt = Job::from_claim(
        &job,
        shared.config.retry.max_attempts,
        deadline,
        cancel.clone(),
    );
    let work = AssertUnwindSafe(handler.run(attempt)).catch_unwind();
    shared.running.fetch_add(1, Ordering::Relaxed);
    let outcome = tokio::select! {
        result = work => match result {
            Ok(Ok(())) => Outcome::Succeeded,
            Ok(Err(error)) => Outcome::Failed(error),
            Err(panic) => Outcome::Panicked(panic_message(panic.as_ref())),
        },
        () = heartbeat(shared, &job) => Outcome::LeaseLost,
        () = tokio::time::sleep_until(deadline) => Outcome::TimedOut,
        () = shared.hand_back.cancelled() => Outcome::HandBack,
    };
    shared.running.fetch_sub(1, Ordering::Relaxed);
    // The handler's future is dropped by now; this reaches work it spawned.
    cancel.cancel();
    let elapsed = started.elapsed();
    Span::current().record("duration_ms", crate::telemetry::millis(elapsed));
    shared.acks.record_run(elapsed);
    metrics::histogram!(names::JOB_RUN_SECONDS, "queue" => queue.clone(), "domain" => domain.clone(), "outcome" => outcome.label())
        .record(elapsed.as_secs_f64());
    acknowledge(shared, job, outcome, domain).await;
}

/// Renews the lease every `renew_interval` and resolves only when it is
/// lost: renewal refused (expired and reclaimed), or Redis unreachable for
/// longer than the lease lasts.
async fn heartbeat(shared: &Shared, job: &ClaimedJob) {
    let ttl = shared.queue.config().lease_ttl;
    let every = shared.config.renew_interval;
    // The lease runs from when a renewal was *sent* (Redis set the deadline
    // no earlier), so count from then, and give up a renewal interval
    // before it would end: this attempt stops before anyone may reclaim it.
    let mut held_until = Instant::now() + ttl;
    loop {
        tokio::time::sleep(every).await;
        let sent = Instant::now();
        match shared.queue.renew(job).await {
            Ok(true) => held_until = sent + ttl,
            Ok(false) => {
                warn!("lease lost: renewal refused");
                return;
            }
            Err(error) => {
                shared.count_error("renew", &error);
                if Instant::now() + every >= held_until {
                    warn!("lease lost: Redis unreachable for longer than the lease");
                    return;
                }
            }
        }
    }
}

/// Tells the queue how the attempt ended. A success is queued for the
/// group acknowledgement ([`super::ack`]) and frees the slot at once; the
/// other outcomes are told here. Redis errors are retried for as long as
/// the lease would last; if they persist, the lease expires and recovery
/// returns the job to the queue (no outcome is lost, at worst the job runs
/// once more).
async fn acknowledge(shared: &Arc<Shared>, job: ClaimedJob, outcome: Outcome, domain: String) {
    let queue = shared.queue_label();
    let failed = |reason: &'static str| {
        metrics::counter!(names::JOBS_FAILED_TOTAL, "queue" => queue.clone(), "domain" => domain.clone(), "reason" => reason)
            .increment(1);
    };
    match outcome {
        Outcome::Succeeded => shared.acks.complete(
            shared,
            AckRequest {
                job,
                domain,
                span: Span::current(),
            },
        ),
        Outcome::LeaseLost => {
            failed("lease_lost");
            lease_lost(shared, "attempt cancelled");
        }
        Outcome::HandBack => {
            match with_retries(shared, "release", || shared.queue.release(&job)).await {
                Some(true) => {
                    info!("handed back at shutdown");
                    metrics::counter!(names::JOBS_RELEASED_TOTAL, "queue" => queue.clone())
                        .increment(1);
                }
                Some(false) => lease_lost(shared, "lease gone before hand-back"),
                None => {}
            }
        }
        Outcome::Failed(error) => {
            failed(match error {
                JobError::Permanent { .. } => "permanent",
                JobError::Unavailable { .. } => "unavailable",
                JobError::Retryable { .. } => "error",
            });
            fail(shared, &job, &error, &domain).await;
        }
        Outcome::Panicked(message) => {
            failed("panic");
            let error = JobError::retryable(format!("handler panicked: {message}"));
            fail(shared, &job, &error, &domain).await;
        }
        Outcome::TimedOut => {
            failed("timeout");
            let error = JobError::retryable(format!(
                "attempt ran longer than the lock duration ({:?})",
                shared.config.lock_duration
            ));
            fail(shared, &job, &error, &domain).await;
        }
    }
}

/// `domain`: the job's metric label.
async fn fail(shared: &Shared, job: &ClaimedJob, error: &JobError, domain: &str) {
    let queue = shared.queue_label();
    let action = shared.config.retry.decide(job.attempt, error);
    let reason = match (&action, error) {
        (FailAction::DeadLetter, JobError::Retryable { reason, .. }) => {
            format!("gave up after {} attempts: {reason}", job.attempt)
        }
        (_, error) => error.to_string(),
    };
    let dead_reason = if matches!(error, JobError::Permanent { .. }) {
        "permanent"
    } else {
        "exhausted"
    };
    match with_retries(shared, "fail", || shared.queue.fail(job, action, &reason)).await {
        Some(Failure::RetryScheduled) => {
            match action {
                FailAction::Retry { delay } => {
                    warn!(delay_ms = crate::telemetry::millis(delay), %reason, "attempt failed; retry scheduled");
                }
                FailAction::Postpone { delay } => {
                    warn!(delay_ms = crate::telemetry::millis(delay), %reason, "a service the job needs is unavailable; postponed, attempt not counted");
                }
                FailAction::DeadLetter => {}
            }
            metrics::counter!(names::JOBS_RETRIED_TOTAL, "queue" => queue, "domain" => domain.to_owned())
                .increment(1);
        }
        Some(Failure::DeadLettered | Failure::DeadLetteredFollowUpAdded { .. }) => {
            error!(%reason, "dead-lettered");
            metrics::counter!(names::JOBS_DEAD_LETTERED_TOTAL, "queue" => queue, "domain" => domain.to_owned(), "reason" => dead_reason)
                .increment(1);
        }
        Some(Failure::LeaseLost) => lease_lost(shared, "failed after the lease was lost"),
        None => {}
    }
}

pub(crate) fn lease_lost(shared: &Shared, what: &'static str) {
    warn!(what, "lease lost");
    metrics::counter!(names::LEASES_LOST_TOTAL, "queue" => shared.queue_label()).increment(1);
}

/// Runs a queue step, retrying Redis errors with a short backoff for at
/// most one lease TTL. `None` when it never succeeded.
pub(crate) async fn with_retries<T, F, Fut>(shared: &Shared, op: &'static str, step: F) -> Option<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, QueueError>>,
{
    let give_up = Instant::now() + shared.queue.config().lease_ttl;
    let mut delay = Duration::from_millis(50);
    loop {
        match step().await {
            Ok(value) => return Some(value),
            Err(error) => {
                shared.count_error(op, &error);
                if Instant::now() + delay >= give_up {
                    error!(op, %error, "queue step failed; the lease will expire and recovery will re-run the job");
                    return None;
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned());
    message.chars().take(200).collect()
}
