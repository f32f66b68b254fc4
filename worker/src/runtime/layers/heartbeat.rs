//! The job's lease: renewed every `renew_interval` while the attempt runs;
//! when it is lost — a renewal refused, or Redis unreachable for longer
//! than the lease lasts — the attempt is cancelled ([`Stop::LeaseLost`]),
//! because another worker may be running the job by then.
//!
//! The renewals run in a task of their own, not beside the attempt in its
//! task: an attempt busy on the CPU for longer than the lease (the offline
//! summarizer over a long span, on a slow or loaded machine) would
//! otherwise starve them, lose its lease to the recovery sweep and be
//! cancelled for it, again and again.

use std::future::Future;
use std::sync::Arc;

use compactor_producer::events::catalogue::QueueOp;
use compactor_producer::queue::ClaimedJob;
use tokio_util::task::AbortOnDropHandle;

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
            // Aborted when the attempt ends or is dropped.
            let renewals =
                AbortOnDropHandle::new(tokio::spawn(
                    async move { keep_lease(&shared, &job).await },
                ));
            // A task spawned here sits in this thread's next-task slot,
            // which other threads do not steal from: let it start (it
            // parks on its timer at once) before the attempt may keep
            // this thread busy. Its later wake-ups come from whichever
            // thread drives the timers.
            tokio::task::yield_now().await;
            tokio::select! {
                outcome = run => outcome,
                what = renewals => Err(Stop::LeaseLost(
                    what.unwrap_or("the lease renewals stopped"),
                )),
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
