//! The job's lease: renewed every `renew_interval` while the attempt runs;
//! when it is lost — a renewal refused, or Redis unreachable for longer
//! than the lease lasts — the attempt is cancelled ([`Stop::LeaseLost`]),
//! because another worker may be running the job by then.

use std::future::Future;
use std::sync::Arc;

use compactor_producer::events::catalogue::QueueOp;
use compactor_producer::queue::ClaimedJob;

use super::around::{AroundAttempt, Run};
use crate::runtime::attempt::{Attempt, Outcome, Stop};
use crate::runtime::lease::{self, Lost};
use crate::runtime::Shared;

#[derive(Clone)]
pub(crate) struct Heartbeat {
    shared: Arc<Shared>,
}

impl Heartbeat {
    pub(crate) fn new(shared: Arc<Shared>) -> Heartbeat {
        Heartbeat { shared }
    }
}

impl AroundAttempt for Heartbeat {
    fn around<F>(&self, attempt: Attempt, inner: impl FnOnce(Attempt) -> F) -> Run
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        let job = Arc::clone(&attempt.job);
        let run = inner(attempt);
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
