//! Group acknowledgement. A job that finishes while another job's
//! acknowledgement is on its way to Redis joins the next one: a single
//! `settle` call completes every job that finished meanwhile and claims as
//! many new jobs as the slots they free. Under load one round trip settles
//! dozens of jobs; an idle worker pays one round trip per job, as it would
//! alone.
//!
//! There is no acknowledgement task: the first finished jobs (up to
//! [`MAX_IN_FLIGHT`]) settle inline, taking along whatever else is pending,
//! and keep settling until nothing is; the others wait for their answer.
//! Claimed jobs go to the [`Handoff`](super::backend::Handoff) before any
//! finished job is answered, so the slot each one frees finds its next job
//! waiting there.

use std::sync::{Mutex, MutexGuard};

use compactor_producer::queue::{ClaimOutcome, ClaimedJob, Completion, MAX_SETTLE_BATCH};
use tokio::sync::oneshot;

use super::Shared;

/// Most settle calls on their way at once. Two, so the two slots of the
/// default worker never wait on each other's round trip.
const MAX_IN_FLIGHT: usize = 2;

/// Acknowledgements not yet settled, and how many jobs are settling them.
#[derive(Debug, Default)]
pub(crate) struct Acks {
    state: Mutex<AckState>,
}

#[derive(Debug, Default)]
struct AckState {
    pending: Vec<AckRequest>,
    settling: usize,
}

#[derive(Debug)]
struct AckRequest {
    job: ClaimedJob,
    /// `None` when the round trip failed: the job acknowledges itself.
    reply: oneshot::Sender<Option<Completion>>,
}

impl Acks {
    fn state(&self) -> MutexGuard<'_, AckState> {
        // No code panics while holding the lock; a poisoned lock still
        // holds consistent data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Completes `job` together with every other job finishing now (and
    /// claims a job for each freed slot). `None` when that failed; the
    /// caller then completes the job on its own.
    pub(crate) async fn complete(&self, shared: &Shared, job: &ClaimedJob) -> Option<Completion> {
        let (reply, answer) = oneshot::channel();
        let settle_here = {
            let mut state = self.state();
            state.pending.push(AckRequest {
                job: job.clone(),
                reply,
            });
            let free = state.settling < MAX_IN_FLIGHT;
            if free {
                state.settling += 1;
            }
            free
        };
        if settle_here {
            let mut turn = Settling {
                acks: self,
                done: false,
            };
            loop {
                let batch: Vec<AckRequest> = {
                    let mut state = self.state();
                    if state.pending.is_empty() {
                        state.settling -= 1;
                        turn.done = true;
                        break;
                    }
                    let n = state.pending.len().min(MAX_SETTLE_BATCH);
                    state.pending.drain(..n).collect()
                };
                settle(shared, batch).await;
            }
        }
        answer.await.ok().flatten()
    }
}

/// A job's turn at settling; gives the turn up should the job's future be
/// dropped mid-way.
struct Settling<'a> {
    acks: &'a Acks,
    done: bool,
}

impl Drop for Settling<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut state = self.acks.state();
        state.settling -= 1;
        if state.settling == 0 {
            // Nobody would settle these: answer them "failed" (by dropping
            // their senders) so each job completes itself.
            state.pending.clear();
        }
    }
}

async fn settle(shared: &Shared, batch: Vec<AckRequest>) {
    let wanted = if shared.config.claim_on_complete && !shared.stop.is_cancelled() {
        batch.len()
    } else {
        0
    };
    let jobs: Vec<&ClaimedJob> = batch.iter().map(|r| &r.job).collect();
    match shared.queue.settle(&jobs, wanted, &shared.worker_id).await {
        Ok(settled) => {
            let mut handed = false;
            for claimed in settled.claimed {
                match claimed {
                    ClaimOutcome::Claimed(job) => {
                        shared.handoff.push(job);
                        handed = true;
                    }
                    ClaimOutcome::Unusable { member, error } => {
                        shared.count_unusable(&member, &error);
                    }
                    ClaimOutcome::Empty { .. } => {}
                }
            }
            if handed {
                shared.wake.notify_one();
            }
            for (request, completion) in batch.into_iter().zip(settled.completions) {
                let _ = request.reply.send(Some(completion));
            }
        }
        Err(error) => {
            shared.count_error("settle", &error);
            for request in batch {
                let _ = request.reply.send(None);
            }
        }
    }
}
