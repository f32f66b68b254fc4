//! The job's lease: renewed every `renew_interval` while the attempt runs;
//! when it is lost — a renewal refused, or Redis unreachable for longer
//! than the lease lasts — the attempt is cancelled ([`Stop::LeaseLost`]),
//! because another worker may be running the job by then.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use compactor_producer::events::catalogue::QueueOp;
use compactor_producer::queue::ClaimedJob;
use tower::{Layer, Service};

use crate::runtime::attempt::{Attempt, Outcome, Stop};
use crate::runtime::lease::{self, Lost};
use crate::runtime::Shared;

#[derive(Clone)]
pub(crate) struct HeartbeatLayer {
    shared: Arc<Shared>,
}

impl HeartbeatLayer {
    pub(crate) fn new(shared: Arc<Shared>) -> HeartbeatLayer {
        HeartbeatLayer { shared }
    }
}

impl<S> Layer<S> for HeartbeatLayer {
    type Service = Heartbeat<S>;

    fn layer(&self, inner: S) -> Heartbeat<S> {
        Heartbeat {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

#[derive(Clone)]
pub(crate) struct Heartbeat<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Service<Attempt> for Heartbeat<S>
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
        let job = Arc::clone(&attempt.job);
        let run = self.inner.call(attempt);
        Box::pin(async move {
            tokio::select! {
                outcome = run => outcome,
                what = keep_lease(&shared, &job) => Err(Stop::LeaseLost(what)),
            }
        })
    }
}

/// Renews the job's lease; resolves only when it is lost, with how (the
/// acknowledgement logs it, with the lost lease's count).
async fn keep_lease(shared: &Shared, job: &ClaimedJob) -> &'static str {
    let lost = lease::keep(
        shared.queue.config().lease_ttl,
        shared.config.renew_interval,
        move || shared.queue.renew(job),
        move |error| shared.count_error(QueueOp::Renew, error),
    )
    .await;
    match lost {
        Lost::Refused => "renewal refused",
        Lost::Unreachable(_) => "Redis unreachable for longer than the lease",
    }
}
