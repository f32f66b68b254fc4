//! The periodic sweep every worker process runs: put job records whose set
//! lost their entry back in it, return jobs whose lease expired (their
//! worker crashed, was killed, or hung) to the queue, dead-letter those
//! that keep stalling, and sample queue depth and pause state for the
//! gauges. Every process
//! sweeps; the scripts hand each job to exactly one of them.

use std::sync::Arc;

use compactor_producer::events::catalogue::QueueOp;
use tracing::warn;

use super::{DeadLettered, Shared};
use crate::events::{DepthSampled, InternalEvent, LeasesSwept, PauseSampled};

/// Runs until the runtime stops.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut ticker = tokio::time::interval(shared.config.check_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = shared.stop.cancelled() => return,
        }
        repair(&shared).await;
        recover(&shared).await;
        sample_depth(&shared).await;
    }
}

/// Keys of the Redis keyspace one repair step looks at.
const REPAIR_STEP_KEYS: u32 = 1_000;

/// Repair steps per sweep at most: a walk over 10,000 keys per sweep and
/// process, a few milliseconds of Redis time.
const REPAIR_STEPS_PER_SWEEP: u32 = 10;

/// Walks on over the queue's job records (see
/// `compactor_producer::queue::Queue::repair_step`): a waiting record
/// missing from the waiting set goes back in line, a running record
/// missing from the running set is tracked again at its lease deadline, so
/// the recovery that follows returns it if that has passed. Runs before
/// recovery for that reason.
async fn repair(shared: &Shared) {
    for _ in 0..REPAIR_STEPS_PER_SWEEP {
        match shared.queue.repair_step(REPAIR_STEP_KEYS).await {
            Ok(r) => {
                if r.repaired() > 0 {
                    warn!(
                        requeued = r.requeued,
                        relisted = r.relisted,
                        "job records missing from their set were put back (Redis lost entries)"
                    );
                }
                if r.walk_ended {
                    return;
                }
            }
            Err(error) => {
                // Counted with recovery, the sweep it is a part of.
                shared.count_error(QueueOp::Recover, &error);
                return;
            }
        }
    }
}

async fn recover(shared: &Shared) {
    let queue = shared.queue_label();
    let batch = shared.config.recovery_batch;
    loop {
        match shared.queue.recover_listing(batch).await {
            Ok((r, dead)) => {
                LeasesSwept {
                    queue: &queue,
                    recovered: r.recovered,
                    dead_lettered: r.dead_lettered,
                }
                .emit();
                announce_stalled(shared, &dead).await;
                if r.recovered + r.dead_lettered < u64::from(batch) {
                    return;
                }
            }
            Err(error) => {
                shared.count_error(QueueOp::Recover, &error);
                return;
            }
        }
    }
}

/// Tells the dead-letter hook of each job the sweep dead-lettered for
/// stalling, read back from its dead letter (the copy kept for the
/// operator). A dead letter gone already (purged or retried meanwhile) or
/// whose payload this build cannot read names no workstream: logged, no
/// event.
async fn announce_stalled(shared: &Shared, entries: &[String]) {
    let Some(hook) = &shared.on_dead_letter else {
        return;
    };
    for entry in entries {
        let letter = match shared.queue.dead_letter(entry).await {
            Ok(Some(letter)) => letter,
            Ok(None) => continue,
            Err(error) => {
                shared.count_error(QueueOp::Recover, &error);
                continue;
            }
        };
        let Some(payload) = letter.decoded_payload() else {
            warn!(
                entry = entry.as_str(),
                "a stalled job's payload is unreadable: no dead_lettered event"
            );
            continue;
        };
        hook(&DeadLettered {
            key: payload.key,
            job_id: letter.job_id,
            attempt: letter.attempts,
            trigger: payload.trigger.label(),
            reason: letter.reason,
        })
        .await;
    }
}

async fn sample_depth(shared: &Shared) {
    let queue = shared.queue_label();
    match shared.queue.counts().await {
        Ok(counts) => DepthSampled {
            queue: &queue,
            counts,
        }
        .emit(),
        // Logged once, by the failure's event.
        Err(error) => {
            shared.count_error(QueueOp::Counts, &error);
        }
    }
    match shared.queue.pause_state().await {
        Ok(state) => PauseSampled {
            queue: &queue,
            state: &state,
        }
        .emit(),
        Err(error) => {
            shared.count_error(QueueOp::Counts, &error);
        }
    }
}
