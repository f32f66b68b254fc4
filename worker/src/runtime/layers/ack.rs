//! Acknowledgement, the outermost of the runtime's layers (the service
//! apalis calls, inside its concurrency limit): it opens the attempt's
//! span, starts the [`Attempt`], and tells the queue how
//! it ended — a success joins the group acknowledgement
//! ([`settle`](crate::runtime::settle)) and frees the slot at once; a
//! failure is retried later or dead-lettered, by the retry policy; a lost
//! lease is only counted (the job is someone else's now); a job still
//! running when the shutdown grace ended is handed back.
//!
//! Redis errors are retried for as long as the lease would last; if they
//! persist, the lease expires and recovery returns the job to the queue (no
//! outcome is lost, at worst the job runs once more). So the service never
//! fails: apalis sees every job succeed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use apalis_core::task::Task;
use compactor_producer::events::catalogue::DeadLetterReason;
use compactor_producer::events::catalogue::QueueOp;
use compactor_producer::metrics::domain_label;
use compactor_producer::queue::{ClaimedJob, FailAction, Failure};
use tokio_util::sync::CancellationToken;
use tower::{Layer, Service};
use tracing::{info_span, Instrument, Span};

use crate::events::{AttemptFailed, InternalEvent, JobDeadLettered, JobHandedBack, RetryScheduled};
use crate::runtime::attempt::{Attempt, Outcome, Stop};
use crate::runtime::handler::JobError;
use crate::runtime::retry::with_retries;
use crate::runtime::settle::AckRequest;
use crate::runtime::Shared;

#[derive(Clone)]
pub(crate) struct AckLayer {
    shared: Arc<Shared>,
}

impl AckLayer {
    pub(crate) fn new(shared: Arc<Shared>) -> AckLayer {
        AckLayer { shared }
    }
}

impl<S> Layer<S> for AckLayer {
    type Service = Ack<S>;

    fn layer(&self, inner: S) -> Ack<S> {
        Ack {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

#[derive(Clone)]
pub(crate) struct Ack<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Service<Task<ClaimedJob>> for Ack<S>
where
    S: Service<Attempt, Response = (), Error = Stop>,
    S::Future: Send + 'static,
{
    type Response = ();
    /// Never returned: every outcome is acknowledged to the queue here.
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<(), Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // No layer refuses work: the handler runs whatever it is given.
        self.inner.poll_ready(cx).map(|_| Ok(()))
    }

    fn call(&mut self, task: Task<ClaimedJob>) -> Self::Future {
        let job = Arc::new(task.args);
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
        let domain = domain_label(job.key.domain());
        let attempt = Attempt {
            job: Arc::clone(&job),
            domain: domain.clone(),
            deadline: tokio::time::Instant::now() + self.shared.config.lock_duration,
            cancel: CancellationToken::new(),
        };
        let run = {
            let _entered = span.enter();
            self.inner.call(attempt)
        };
        let shared = Arc::clone(&self.shared);
        Box::pin(
            async move {
                let outcome = run.await;
                acknowledge(&shared, job, domain, outcome).await;
                Ok(())
            }
            .instrument(span),
        )
    }
}

/// Tells the queue how the attempt ended. `domain`: the job's metric
/// label.
async fn acknowledge(shared: &Arc<Shared>, job: Arc<ClaimedJob>, domain: String, outcome: Outcome) {
    match outcome {
        Ok(()) => {
            let span = Span::current();
            shared
                .acks
                .complete(shared, AckRequest { job, domain, span });
        }
        // Not a failure: the job goes back to the queue unfinished.
        Err(Stop::HandBack) => hand_back(shared, &job).await,
        Err(stop) => {
            if let Some(reason) = stop.outcome().failure_reason() {
                AttemptFailed {
                    queue: &shared.queue_label(),
                    domain: &domain,
                    reason,
                }
                .emit();
            }
            let lost = match stop {
                Stop::LeaseLost(what) => what,
                _ => "attempt cancelled",
            };
            match failure(stop, shared.config.lock_duration) {
                Some(error) => fail(shared, &job, &error, &domain).await,
                // Another worker may hold the job now: it is not ours to fail.
                None => shared.lease_lost(lost),
            }
        }
    }
}

/// The failure to record for an attempt that stopped; `None` when there is
/// none to record (the lease was lost, or the job handed back).
fn failure(stop: Stop, lock_duration: Duration) -> Option<JobError> {
    match stop {
        Stop::Failed(error) => Some(error),
        Stop::Panicked(message) => {
            Some(JobError::retryable(format!("handler panicked: {message}")))
        }
        Stop::TimedOut => Some(JobError::retryable(format!(
            "attempt ran longer than the lock duration ({lock_duration:?})"
        ))),
        Stop::LeaseLost(_) | Stop::HandBack => None,
    }
}

/// Hands the job back to the queue at shutdown, its attempt not counted.
async fn hand_back(shared: &Shared, job: &ClaimedJob) {
    match with_retries(shared, QueueOp::Release, || shared.queue.release(job)).await {
        Some(true) => {
            JobHandedBack {
                queue: &shared.queue_label(),
                was_running: true,
            }
            .emit();
        }
        Some(false) => shared.lease_lost("lease gone before hand-back"),
        None => {}
    }
}

/// Fails the job by the retry policy: retry later, postpone, or
/// dead-letter. `domain`: the job's metric label.
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
        DeadLetterReason::Permanent
    } else {
        DeadLetterReason::Exhausted
    };
    match with_retries(shared, QueueOp::Fail, || {
        shared.queue.fail(job, action, &reason)
    })
    .await
    {
        Some(Failure::RetryScheduled) => RetryScheduled {
            queue: &queue,
            domain,
            action,
            reason: &reason,
        }
        .emit(),
        Some(Failure::DeadLettered | Failure::DeadLetteredFollowUpAdded { .. }) => {
            JobDeadLettered {
                queue: &queue,
                domain,
                reason: dead_reason,
                message: &reason,
            }
            .emit();
            if let Some(hook) = &shared.on_dead_letter {
                hook(&crate::runtime::DeadLettered {
                    key: job.key.clone(),
                    job_id: job.job_id,
                    attempt: job.attempt,
                    trigger: job.payload.trigger.label(),
                    reason,
                })
                .await;
            }
        }
        Some(Failure::LeaseLost) => shared.lease_lost("failed after the lease was lost"),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::failure;
    use crate::runtime::attempt::Stop;
    use crate::runtime::handler::JobError;

    #[test]
    fn stops_are_failed_with_a_reason_unless_the_job_is_no_longer_ours() {
        let lock = Duration::from_secs(300);
        assert_eq!(
            failure(Stop::Panicked("index out of bounds".into()), lock),
            Some(JobError::retryable("handler panicked: index out of bounds"))
        );
        assert_eq!(
            failure(Stop::TimedOut, lock),
            Some(JobError::retryable(
                "attempt ran longer than the lock duration (300s)"
            ))
        );
        assert_eq!(
            failure(Stop::Failed(JobError::permanent("bad")), lock),
            Some(JobError::permanent("bad"))
        );
        assert_eq!(failure(Stop::LeaseLost("renewal refused"), lock), None);
        assert_eq!(failure(Stop::HandBack, lock), None);
    }
}
