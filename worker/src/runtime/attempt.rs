//! One attempt of a claimed job, as it passes through the runtime's
//! layers (`layers`): the request every layer's service takes, the
//! ways an attempt can stop short of success (every layer's error), and the
//! innermost service, which runs the [`JobHandler`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use compactor_producer::events::catalogue::RunOutcome;
use compactor_producer::queue::ClaimedJob;
use tokio_util::sync::CancellationToken;

use super::handler::{Job, JobError, JobHandler};

/// The request of the attempt's layers.
#[derive(Debug)]
pub(crate) struct Attempt {
    /// Shared with the acknowledgement, which needs the job once the
    /// attempt has ended.
    pub(crate) job: Arc<ClaimedJob>,
    /// The job's `domain` metric label (`metrics::domain_label`: `other`
    /// unless allowed), taken once so every metric of the attempt agrees.
    pub(crate) domain: String,
    /// When the lock duration is over. Set when the attempt begins, not by
    /// the timeout layer that enforces it, because the handler must know it
    /// too: it cuts work short to leave time to commit.
    pub(crate) deadline: tokio::time::Instant,
    /// Cancelled once the handler's future is gone, finished or dropped by
    /// a layer that ended the attempt: this reaches work the handler
    /// spawned.
    pub(crate) cancel: CancellationToken,
}

/// Why an attempt stopped without succeeding: the error of every layer.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The handler failed.
    Failed(JobError),
    /// The handler panicked; treated as a retryable failure.
    Panicked(String),
    /// The attempt ran longer than the lock duration.
    TimedOut,
    /// Renewal failed (how: refused, or Redis unreachable for longer than
    /// the lease): someone else may hold the job now. Logged once, with
    /// how, when the attempt is acknowledged.
    LeaseLost(&'static str),
    /// Shutdown grace period over: hand the job back unfinished.
    HandBack,
}

impl Stop {
    /// How the attempt ended, in the catalogue's one mapping: its
    /// `outcome` label, and through [`RunOutcome::failure_reason`] the
    /// `reason` it fails under.
    pub(crate) fn outcome(&self) -> RunOutcome {
        match self {
            Stop::Failed(JobError::Retryable { .. }) => RunOutcome::Error,
            Stop::Failed(JobError::Permanent { .. }) => RunOutcome::Permanent,
            Stop::Failed(JobError::Unavailable { .. }) => RunOutcome::Unavailable,
            Stop::Panicked(_) => RunOutcome::Panic,
            Stop::TimedOut => RunOutcome::Timeout,
            Stop::LeaseLost(_) => RunOutcome::LeaseLost,
            Stop::HandBack => RunOutcome::Released,
        }
    }
}

/// How an attempt ended.
pub(crate) type Outcome = Result<(), Stop>;

/// The `outcome` of the run-time histogram.
pub(crate) fn run_outcome(outcome: &Outcome) -> RunOutcome {
    match outcome {
        Ok(()) => RunOutcome::Completed,
        Err(stop) => stop.outcome(),
    }
}

/// The innermost service: runs the handler on the attempt.
pub(crate) struct HandlerService<H> {
    handler: Arc<H>,
    /// Attempts in all (the retry policy's), told to the handler.
    max_attempts: u32,
}

impl<H> HandlerService<H> {
    pub(crate) fn new(handler: Arc<H>, max_attempts: u32) -> HandlerService<H> {
        HandlerService {
            handler,
            max_attempts,
        }
    }
}

impl<H> Clone for HandlerService<H> {
    fn clone(&self) -> Self {
        HandlerService {
            handler: Arc::clone(&self.handler),
            max_attempts: self.max_attempts,
        }
    }
}

impl<H: JobHandler> tower::Service<Attempt> for HandlerService<H> {
    type Response = ();
    type Error = Stop;
    type Future = Pin<Box<dyn Future<Output = Outcome> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Stop>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, attempt: Attempt) -> Self::Future {
        let handler = Arc::clone(&self.handler);
        let job = Job::from_claim(
            &attempt.job,
            self.max_attempts,
            attempt.deadline,
            attempt.cancel.clone(),
        );
        // Dropped with this future, however it ends.
        let cancel_on_end = attempt.cancel.drop_guard();
        Box::pin(async move {
            let _cancel_on_end = cancel_on_end;
            handler.run(job).await.map_err(Stop::Failed)
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use compactor_producer::queue::{ClaimedJob, Payload, Trigger};
    use compactor_shared::EntityKey;
    use tokio_util::sync::CancellationToken;

    use super::{Attempt, HandlerService, Stop};
    use crate::runtime::handler::{Job, JobError, JobHandler};

    /// An attempt of a made-up job, its lock duration `lock` from now.
    pub(crate) fn attempt(lock: Duration) -> Attempt {
        let key = EntityKey::parse("unit", "e1").expect("a valid key");
        let job = ClaimedJob {
            payload: Payload::new(key.clone(), Trigger::Auto).expect("a valid payload"),
            key,
            job_id: 1,
            attempt: 1,
            lease_token: "token".into(),
            enqueued_at_ms: 0,
            queue_wait: Duration::ZERO,
        };
        Attempt {
            job: Arc::new(job),
            domain: "other".into(),
            deadline: tokio::time::Instant::now() + lock,
            cancel: CancellationToken::new(),
        }
    }

    /// A handler that never finishes.
    pub(crate) struct Forever;

    impl JobHandler for Forever {
        async fn run(&self, _job: Job) -> Result<(), JobError> {
            std::future::pending().await
        }
    }

    /// A handler that panics.
    pub(crate) struct Panics;

    impl JobHandler for Panics {
        async fn run(&self, _job: Job) -> Result<(), JobError> {
            panic!("handler bug")
        }
    }

    /// The handler service over `handler`.
    pub(crate) fn service<H: JobHandler>(handler: H) -> HandlerService<H> {
        HandlerService::new(Arc::new(handler), 2)
    }

    #[tokio::test]
    async fn the_handler_sees_the_attempt_and_its_failure_is_the_outcome() {
        struct Fails;
        impl JobHandler for Fails {
            async fn run(&self, job: Job) -> Result<(), JobError> {
                assert_eq!((job.job_id, job.attempt, job.max_attempts), (1, 1, 2));
                assert_eq!(job.lease_token, "token");
                Err(JobError::permanent("bad payload"))
            }
        }
        let attempt = attempt(Duration::from_secs(60));
        let cancel = attempt.cancel.clone();
        let outcome = tower::Service::call(&mut service(Fails), attempt).await;
        assert!(matches!(
            outcome,
            Err(Stop::Failed(JobError::Permanent { .. }))
        ));
        assert!(cancel.is_cancelled(), "work the handler spawned is told");
    }
}
