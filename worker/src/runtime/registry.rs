//! This process's entry in the queue's worker registry
//! (`compactor_producer::queue::WorkerRegistration`): registered before the
//! first claim, renewed by a heartbeat, removed when shutdown begins (a
//! draining worker takes no more jobs, so a chat request waiting on a
//! queued job must not count on it).
//!
//! Timing: an entry lives for [`MISSED_BEATS`] `check_interval`s, and at
//! least a lease TTL (a worker alive enough to hold leases counts as live;
//! a beat delayed by a loaded machine does not make it look dead); a worker
//! that stops beating (killed, hung, cut off from Redis) drops out within
//! that time. It beats every `check_interval`, and at least every
//! [`MAX_BEAT_PERIOD`]: a Redis that restarted without its data learns of
//! the worker again within that period.

use std::sync::Arc;
use std::time::Duration;

use compactor_producer::events::catalogue::QueueOp;
use compactor_producer::queue::WorkerRegistration;
use tracing::debug;

use super::Shared;

/// `check_interval`s an entry outlives its last beat by (at least).
pub(crate) const MISSED_BEATS: u32 = 3;

/// Longest time between two beats.
pub(crate) const MAX_BEAT_PERIOD: Duration = Duration::from_secs(1);

/// How this process describes itself.
pub(crate) fn registration(shared: &Shared) -> WorkerRegistration {
    let started_at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    WorkerRegistration {
        id: shared.worker_id.clone(),
        name: shared.config.name.clone(),
        host: hostname(),
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        concurrency: u32::try_from(shared.config.concurrency).unwrap_or(u32::MAX),
        started_at_ms,
    }
}

/// Registers once (before the runtime claims anything). A failure is
/// counted and logged; the next beat retries.
pub(crate) async fn register(shared: &Shared, me: &WorkerRegistration) {
    beat(shared, me).await;
}

/// Renews the entry until shutdown begins, then removes it.
pub(crate) async fn run(shared: Arc<Shared>, me: WorkerRegistration) {
    let every = shared.config.check_interval.min(MAX_BEAT_PERIOD);
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = shared.stop.cancelled() => break,
        }
        beat(&shared, &me).await;
    }
    match shared.queue.deregister(&me.id).await {
        Ok(_) => debug!(worker = %me.id, "deregistered"),
        Err(error) => shared.count_error(QueueOp::Deregister, &error),
    }
}

async fn beat(shared: &Shared, me: &WorkerRegistration) {
    let ttl = (shared.config.check_interval * MISSED_BEATS).max(shared.queue.config().lease_ttl);
    if let Err(error) = shared.queue.heartbeat(me, ttl).await {
        shared.count_error(QueueOp::Heartbeat, &error);
    }
}

/// The machine's name: `HOSTNAME` (set in containers), else the kernel's,
/// else empty.
fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_hostname_is_one_trimmed_line() {
        let host = super::hostname();
        assert_eq!(host, host.trim());
        assert!(!host.contains('\n'));
    }
}
