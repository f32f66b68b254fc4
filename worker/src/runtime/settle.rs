//! Pipelined group acknowledgement. A job that succeeds hands its
//! completion to [`Acks`] and frees its slot at once; the completion is
//! settled in the background, together with every other job that finished
//! meanwhile, in one `settle` round trip that also claims jobs for the
//! slots that are free by then (and, for short jobs, `claim_ahead` more:
//! see [`Handoff`](super::handoff::Handoff)). Under load one round trip
//! settles dozens of jobs; an idle worker pays one round trip per job, as
//! it would alone.
//!
//! Why the slot does not wait for the round trip: a slot that waits idles
//! for a whole round trip per job, which caps a worker at `concurrency`
//! jobs per round trip however short the jobs are. The job's entity stays
//! leased until the completion lands (Redis still says "running"), so the
//! one-run-per-entity rule and the fenced commit are unaffected; a
//! completion whose round trip fails is retried on its own for as long as
//! its lease lasts, after which recovery re-runs the job (at-least-once).
//!
//! At most [`MAX_IN_FLIGHT`] settle calls are on their way at once; each
//! keeps settling until nothing is pending. Each claims what brings the
//! jobs this worker holds unstarted or running up to `concurrency`, plus,
//! for short jobs, what its slots finish in one settle round trip (at most
//! `claim_ahead`: see [`ahead`]), counting what other calls are claiming,
//! so a worker never leases more than that. Claimed jobs go to the
//! [`Handoff`](super::handoff::Handoff) and the fetcher is woken; while a
//! settle call is under way the fetcher does not claim on its own (that
//! call claims for the slot).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use compactor_producer::events::catalogue::QueueOp;
use compactor_producer::queue::{ClaimOutcome, ClaimedJob, Completion, MAX_SETTLE_BATCH};
use tokio_util::task::TaskTracker;
use tracing::Span;

use super::retry::with_retries;
use super::Shared;
use crate::events::{InternalEvent, JobCompleted};

/// Most settle calls on their way at once. Two, so that while one round
/// trip is under way the next batch is already being sent.
const MAX_IN_FLIGHT: usize = 2;

/// Claim ahead only while the median of the last [`RECENT_RUNS`] attempts
/// ran this briefly: then a job claimed ahead starts within a fraction of
/// [`super::handoff::CLAIM_AHEAD_HOLD`]. Compactions (LLM calls, seconds)
/// never qualify, so they are never leased before a slot is free. A median,
/// not a mean: one attempt stretched by the OS descheduling its thread
/// must not switch claiming ahead off.
const SHORT_JOB: Duration = Duration::from_millis(5);

/// Attempts the claim-ahead decision looks back on.
const RECENT_RUNS: usize = 15;

/// Completions not yet settled, and the settle calls under way.
#[derive(Debug, Default)]
pub(crate) struct Acks {
    state: Mutex<AckState>,
    /// The settle tasks, so shutdown can wait for every completion.
    tasks: TaskTracker,
    /// Run times of the last attempts (µs), oldest overwritten first.
    recent_runs: Mutex<RecentRuns>,
    /// How long a settle call takes, µs, smoothed (see [`ahead`]); 0 until
    /// one has returned.
    round_trip_us: AtomicU64,
}

#[derive(Debug, Default)]
struct RecentRuns {
    us: [u64; RECENT_RUNS],
    /// Attempts recorded so far (the next slot is `count % RECENT_RUNS`).
    count: usize,
}

impl RecentRuns {
    fn median(&self) -> Option<u64> {
        let n = self.count.min(RECENT_RUNS);
        if n == 0 {
            return None;
        }
        let mut us = self.us;
        let recent = &mut us[..n];
        recent.sort_unstable();
        Some(recent[n / 2])
    }
}

#[derive(Debug, Default)]
struct AckState {
    pending: Vec<AckRequest>,
    /// Settle tasks running.
    settling: usize,
    /// Jobs the settle calls under way are claiming.
    claiming: usize,
}

/// A finished job waiting for its completion to be settled.
#[derive(Debug)]
pub(crate) struct AckRequest {
    pub(crate) job: Arc<ClaimedJob>,
    /// The job's `domain` metric label (`metrics::domain_label`: `other`
    /// unless allowed).
    pub(crate) domain: String,
    /// The attempt's span: the outcome is logged inside it.
    pub(crate) span: Span,
}

impl Acks {
    fn state(&self) -> MutexGuard<'_, AckState> {
        // No code panics while holding the lock; a poisoned lock still
        // holds consistent data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues the completion of a succeeded job and returns at once; a
    /// settle task (started here if fewer than [`MAX_IN_FLIGHT`] run)
    /// settles it and claims a job for the slot it frees.
    pub(crate) fn complete(&self, shared: &Arc<Shared>, request: AckRequest) {
        let start = {
            let mut state = self.state();
            state.pending.push(request);
            let start = state.settling < MAX_IN_FLIGHT;
            if start {
                state.settling += 1;
            }
            start
        };
        if start {
            let shared = Arc::clone(shared);
            self.tasks.spawn(async move { settle_all(&shared).await });
        }
    }

    /// Whether settle calls are under way; the last one claims for every
    /// slot free by then, so the fetcher waits for it instead of claiming.
    pub(crate) fn settling(&self) -> bool {
        self.state().settling > 0
    }

    /// Records how long an attempt ran (for the claim-ahead decision).
    pub(crate) fn record_run(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let mut recent = self.recent_runs.lock().unwrap_or_else(|e| e.into_inner());
        let slot = recent.count % RECENT_RUNS;
        recent.us[slot] = us;
        recent.count = recent.count.wrapping_add(1);
    }

    /// The median run time of the last attempts, µs, when they are short
    /// enough to claim jobs ahead of free slots (until any have run: none).
    fn short_run_us(&self) -> Option<u64> {
        let recent = self.recent_runs.lock().unwrap_or_else(|e| e.into_inner());
        recent
            .median()
            .filter(|us| *us < SHORT_JOB.as_micros() as u64)
    }

    /// Records how long a settle call took: an eighth of the way from the
    /// smoothed value to this one (the first call sets it), so one call
    /// slowed by a descheduled thread moves it little.
    fn record_round_trip(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        // Only settle tasks write it, and a lost update between two of
        // them costs one sample: no compare-and-swap loop.
        let old = self.round_trip_us.load(Ordering::Relaxed);
        let new = if old == 0 { us } else { old - old / 8 + us / 8 };
        self.round_trip_us.store(new.max(1), Ordering::Relaxed);
    }

    /// Waits until every queued completion is settled (shutdown: after the
    /// last job finished, so nothing is queued any more).
    pub(crate) async fn drain(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// One settle task: settles batches until nothing is pending.
async fn settle_all(shared: &Arc<Shared>) {
    loop {
        let (batch, wanted) = {
            let mut state = shared.acks.state();
            if state.pending.is_empty() {
                state.settling -= 1;
                drop(state);
                // The fetcher may be waiting for this task to end.
                shared.wake.notify_one();
                return;
            }
            let n = state.pending.len().min(MAX_SETTLE_BATCH);
            let batch: Vec<AckRequest> = state.pending.drain(..n).collect();
            let wanted = wanted(shared, state.claiming);
            state.claiming += wanted;
            (batch, wanted)
        };
        settle(shared, batch, wanted).await;
    }
}

/// Jobs to claim: enough to bring the jobs this worker holds (running,
/// waiting in the handoff, being claimed) up to its concurrency, plus
/// [`ahead`]; none once shutdown began.
fn wanted(shared: &Shared, claiming: usize) -> usize {
    if !shared.config.claim_on_complete || shared.stop.is_cancelled() {
        return 0;
    }
    let ahead = ahead(
        shared.config.concurrency,
        shared.config.claim_ahead,
        shared.acks.short_run_us(),
        shared.acks.round_trip_us.load(Ordering::Relaxed),
    );
    let held = shared.running.load(Ordering::Relaxed) + shared.handoff.len() + claiming;
    (shared.config.concurrency + ahead)
        .saturating_sub(held)
        .min(MAX_SETTLE_BATCH)
}

/// Jobs to lease ahead of free slots: while attempts are short (median
/// `run_us`), as many as the `concurrency` slots finish in one settle round
/// trip (`round_trip_us`), at most `cap` (`claim_ahead`); none for long
/// jobs. A slot that frees then finds its next job here instead of idling
/// for a round trip, and each call settles and claims a batch instead of
/// one job, which is what a job costs Redis: the call's own work (the
/// clock, the pause record, the lanes' reads) is paid once per batch. At
/// most one round trip of work is held, so a job claimed ahead starts far
/// inside [`super::handoff::CLAIM_AHEAD_HOLD`] and another worker is never
/// kept waiting for it. Before the first round trip is timed, one job per
/// slot.
fn ahead(concurrency: usize, cap: usize, run_us: Option<u64>, round_trip_us: u64) -> usize {
    let Some(run_us) = run_us else {
        return 0;
    };
    if round_trip_us == 0 {
        return concurrency.min(cap);
    }
    let per_slot = round_trip_us.div_ceil(run_us.max(1));
    let jobs = usize::try_from(per_slot)
        .unwrap_or(usize::MAX)
        .saturating_mul(concurrency);
    jobs.min(cap)
}

/// Settles one batch and claims `wanted` jobs.
async fn settle(shared: &Arc<Shared>, batch: Vec<AckRequest>, wanted: usize) {
    let jobs: Vec<&ClaimedJob> = batch.iter().map(|r| &*r.job).collect();
    let sent = Instant::now();
    let result = shared.queue.settle(&jobs, wanted, &shared.worker_id).await;
    if result.is_ok() {
        shared.acks.record_round_trip(sent.elapsed());
    }
    // Claimed jobs are in the handoff before the claim is counted done, so
    // the fetcher, once woken, finds them there.
    let completions: Vec<Option<Completion>> = match result {
        Ok(settled) => {
            for claimed in settled.claimed {
                match claimed {
                    ClaimOutcome::Claimed(job) => shared.handoff.push(job),
                    ClaimOutcome::Unusable { member, error } => {
                        shared.count_unusable(&member, &error);
                    }
                    ClaimOutcome::Empty { .. } => {}
                }
            }
            settled.completions.into_iter().map(Some).collect()
        }
        Err(error) => {
            shared.count_error(QueueOp::Settle, &error);
            vec![None; batch.len()]
        }
    };
    {
        let mut state = shared.acks.state();
        state.claiming -= wanted;
    }
    // Whatever happened, the fetcher looks again: at a claimed job, or, if
    // none came, at the queue itself.
    shared.wake.notify_one();
    for (request, completion) in batch.into_iter().zip(completions) {
        let completion = match completion {
            Some(completion) => Some(completion),
            // The group call failed: this job completes itself, retrying
            // for as long as its lease lasts.
            None => {
                with_retries(shared, QueueOp::Complete, || {
                    shared.queue.complete(&request.job)
                })
                .await
            }
        };
        record(shared, &request, completion);
    }
}

/// Counts and logs how a completion ended, inside the attempt's span.
fn record(shared: &Shared, request: &AckRequest, completion: Option<Completion>) {
    let _entered = request.span.enter();
    let completed = |follow_up| {
        JobCompleted {
            queue: &shared.queue_label(),
            domain: &request.domain,
            follow_up,
        }
        .emit();
    };
    match completion {
        Some(Completion::Done) => completed(None),
        Some(Completion::FollowUpAdded { job_id }) => completed(Some(job_id)),
        Some(Completion::LeaseLost) => {
            shared.lease_lost("completed after the lease was lost");
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::ahead;

    #[test]
    fn short_jobs_are_claimed_ahead_for_one_round_trip_of_work() {
        // 2 slots, 10 µs jobs, 150 µs round trips: each slot finishes 15
        // jobs while a call is on its way.
        assert_eq!(ahead(2, 64, Some(10), 150), 30);
        // A part of a job counts as one.
        assert_eq!(ahead(2, 64, Some(100), 150), 4);
        // Never more than the cap.
        assert_eq!(ahead(50, 64, Some(10), 150), 64);
        // A job longer than the round trip: one per slot.
        assert_eq!(ahead(3, 64, Some(4_000), 150), 3);
        // Before a round trip was timed: one per slot.
        assert_eq!(ahead(2, 64, Some(10), 0), 2);
        assert_eq!(ahead(8, 4, Some(10), 0), 4);
    }

    #[test]
    fn long_jobs_and_a_zero_cap_claim_nothing_ahead() {
        assert_eq!(ahead(2, 64, None, 150), 0);
        assert_eq!(ahead(2, 0, Some(10), 150), 0);
    }
}
