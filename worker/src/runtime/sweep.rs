//! The periodic sweep every worker process runs: put job records whose set
//! lost their entry back in it, return jobs whose lease expired (their
//! worker crashed, was killed, or hung) to the queue, dead-letter those
//! that keep stalling, and sample queue depth for the gauges. Every process
//! sweeps; the scripts hand each job to exactly one of them.

use std::sync::Arc;

use compactor_producer::metrics::{names, OTHER_DOMAIN};
use tracing::{info, warn};

use super::Shared;

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
                shared.count_error("recover", &error);
                return;
            }
        }
    }
}

async fn recover(shared: &Shared) {
    let queue = shared.queue_label();
    let batch = shared.config.recovery_batch;
    loop {
        match shared.queue.recover(batch).await {
            Ok(r) => {
                if r.recovered > 0 || r.dead_lettered > 0 {
                    info!(
                        recovered = r.recovered,
                        dead_lettered = r.dead_lettered,
                        "expired leases swept"
                    );
                }
                metrics::counter!(names::JOBS_RECOVERED_TOTAL, "queue" => queue.clone())
                    .increment(r.recovered);
                metrics::counter!(names::JOBS_DEAD_LETTERED_TOTAL, "queue" => queue.clone(), "domain" => OTHER_DOMAIN, "reason" => "stalled")
                    .increment(r.dead_lettered);
                if r.recovered + r.dead_lettered < u64::from(batch) {
                    return;
                }
            }
            Err(error) => {
                shared.count_error("recover", &error);
                return;
            }
        }
    }
}

async fn sample_depth(shared: &Shared) {
    let queue = shared.queue_label();
    match shared.queue.counts().await {
        Ok(c) => {
            for (state, n) in [
                ("waiting", c.waiting),
                ("running", c.running),
                ("done", c.done),
                ("dead", c.dead),
            ] {
                metrics::gauge!(names::QUEUE_DEPTH, "queue" => queue.clone(), "state" => state)
                    .set(n as f64);
            }
            metrics::gauge!(names::DEAD_LETTER_SIZE, "queue" => queue).set(c.dead as f64);
        }
        Err(error) => {
            warn!(%error, "queue depth not sampled");
            shared.count_error("counts", &error);
        }
    }
}
