//! Reconciliation: the database is the source of truth, the queue only a
//! work list. Should Redis lose its data (a restart without persistence, a
//! failover, an eviction), workstreams over their trigger would never be
//! compacted again until their next turn. A sweep finds them — over the
//! trigger, no live lease, no job waiting or running, breaker closed — and
//! requests their compaction again. A job record that says waiting or
//! running while its set lost the entry (an eviction) would count as in
//! hand and never run: the sweep puts it back in its set (see
//! `queue::Queue::repair_jobs`). Running it when nothing was lost only
//! reads: every candidate already has its job.
//!
//! A branch the head left is summarized by a `summarize_branch` job
//! requested after the change committed, best effort: when Redis did not
//! take it, the branch had no summary until the head left it again. The
//! sweep also looks at every branched workstream, and requests the job of
//! each branch left without a summary and without a job waiting, running
//! or dead-lettered.

use chrono::Utc;
use compactor_shared::config::EngineConfig;
use compactor_shared::trigger::Measure;
use compactor_shared::EntityKey;
use serde::Serialize;

use crate::client::turn_trigger;
use crate::events::{InternalEvent, Reconciled};
use crate::queue::{EnqueueOutcome, JobState, Queue, QueueError, Trigger};
use crate::store::{Store, StoreError};

/// Workstreams read per database round trip.
const PAGE: u64 = 500;

/// What a sweep found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Reconciliation {
    /// Workstreams over their trigger.
    pub over_trigger: u64,
    /// Of those, compaction requested again (no job existed).
    pub requested: u64,
    /// Being compacted now (a live lease) or with a job waiting or running.
    pub in_hand: u64,
    /// Of those over the trigger, with a job record the queue's sets had
    /// lost: put back in line (waiting), or tracked again at its lease
    /// deadline so recovery returns it (running). Not counted in hand.
    pub repaired: u64,
    /// Held back by their circuit breaker.
    pub breaker_open: u64,
    /// Their last job is in the dead-letter set: an operator decides.
    pub dead_lettered: u64,
    /// Branches left without a summary or a job: their `summarize_branch`
    /// job requested again.
    pub branches_requested: u64,
}

/// Why a sweep stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
}

/// One sweep over every workstream (see the module docs).
pub async fn reconcile(
    store: &Store,
    queue: &Queue,
    engine: &EngineConfig,
) -> Result<Reconciliation, ReconcileError> {
    let mut report = Reconciliation {
        branches_requested: unsummarized_branches(store, queue).await?,
        ..Reconciliation::default()
    };
    // An unlimited model (no threshold) is never over its trigger.
    let Some(threshold) = engine.trigger.threshold() else {
        return Ok(report);
    };
    let mut after = None;
    loop {
        let page = store.workstreams_over(threshold, after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        let now_ms = Utc::now().timestamp_millis();
        let mut lost: Vec<(EntityKey, Trigger)> = Vec::new();
        let mut queued: Vec<EntityKey> = Vec::new();
        for ws in &page {
            let tokens = ws.summary_tokens.saturating_add(ws.uncompacted_tokens);
            if !engine.trigger.evaluate(&Measure::estimated(tokens)).due {
                continue;
            }
            report.over_trigger += 1;
            if ws.breaker_open() {
                report.breaker_open += 1;
                continue;
            }
            if ws.lease_live(now_ms).is_some() {
                report.in_hand += 1;
                continue;
            }
            match queue.job_state(&ws.key).await? {
                Some(JobState::Waiting { .. } | JobState::Running { .. }) => {
                    queued.push(ws.key.clone());
                }
                Some(JobState::Dead { .. }) => report.dead_lettered += 1,
                // Reactive when the context is past the window, as the
                // turn that lost it would have asked.
                Some(JobState::Done { .. }) | None => lost.push((
                    ws.key.clone(),
                    turn_trigger(tokens, engine.trigger.context_window()),
                )),
            }
        }
        if !queued.is_empty() {
            let repair = queue.repair_jobs(&queued).await?;
            report.repaired += repair.repaired();
            report.in_hand += queued.len() as u64 - repair.repaired();
        }
        if !lost.is_empty() {
            for (outcome, (key, trigger)) in queue.enqueue_many(&lost).await?.iter().zip(&lost) {
                crate::client::record_requested(store, key, trigger, outcome).await;
                match outcome {
                    EnqueueOutcome::Added { .. } => report.requested += 1,
                    // A request raced us: it is in hand all the same.
                    EnqueueOutcome::Coalesced { .. } | EnqueueOutcome::FollowUpRecorded { .. } => {
                        report.in_hand += 1
                    }
                }
            }
        }
        if (page.len() as u64) < PAGE {
            break;
        }
    }
    Reconciled {
        queue: queue.config().name.as_str(),
        repaired: report.repaired,
        requested: report.requested,
        branches_requested: report.branches_requested,
    }
    .emit();
    Ok(report)
}

/// Requests the `summarize_branch` job of every branch left without a
/// summary whose job is not waiting, running or dead-lettered (an
/// operator decides on those); how many it requested.
async fn unsummarized_branches(store: &Store, queue: &Queue) -> Result<u64, ReconcileError> {
    let mut requested = 0;
    let mut after = None;
    loop {
        let page = store.branched_workstreams(after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        for ws in &page {
            for branch in store.unsummarized_branches(ws.id).await? {
                match queue.branch_job_state(&ws.key, branch.leaf).await? {
                    Some(
                        JobState::Waiting { .. } | JobState::Running { .. } | JobState::Dead { .. },
                    ) => {}
                    Some(JobState::Done { .. }) | None => {
                        queue
                            .request_branch_summary(&ws.key, branch.leaf, branch.branch_point)
                            .await?;
                        requested += 1;
                    }
                }
            }
        }
        if (page.len() as u64) < PAGE {
            break;
        }
    }
    Ok(requested)
}
