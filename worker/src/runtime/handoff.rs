//! The one local buffer of claimed jobs: jobs claimed in the round trip
//! that acknowledged others, one per slot those acknowledgements freed,
//! plus — while jobs are short — up to `claim_ahead` more. Each is picked
//! up as soon as a slot asks for work; a job that waits here longer than
//! [`CLAIM_AHEAD_HOLD`] is handed back to the queue (at its place in line,
//! attempt not counted), so a worker never sits on a job another worker
//! could run. At shutdown whatever is left here is handed back too.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use compactor_producer::queue::ClaimedJob;
use tokio::sync::Notify;
use tracing::{debug, warn};

use super::Shared;
use crate::events::{InternalEvent, JobHandedBack};

/// Longest a claimed job may wait in the [`Handoff`] for a slot before it
/// is handed back to the queue. A job claimed for a freed slot is taken
/// within microseconds; one claimed ahead waits for the next slot to free,
/// which for short jobs (see `settle::SHORT_JOB`) is well inside this.
pub(crate) const CLAIM_AHEAD_HOLD: Duration = Duration::from_millis(25);

/// Jobs claimed for slots that acknowledgements freed, or ahead of them;
/// the fetcher hands them out, oldest first, before claiming. Whoever pushes wakes the fetcher through [`Shared::wake`].
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

    pub(crate) fn pop(&self) -> Option<ClaimedJob> {
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

/// Hands `jobs` (leased, never started) back to the queue.
pub(crate) async fn release_unstarted(shared: &Shared, jobs: Vec<ClaimedJob>) {
    for job in jobs {
        match shared.queue.release(&job).await {
            Ok(false) => {}
            Ok(true) => {
                JobHandedBack {
                    queue: &shared.queue_label(),
                    was_running: false,
                }
                .emit();
            }
            Err(error) => {
                // Its lease expires and recovery returns it to the queue.
                warn!(job_id = job.job_id, %error, "could not hand back an unstarted job");
            }
        }
    }
}
