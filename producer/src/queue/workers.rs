//! The registry of live workers: each worker process registers itself on
//! the queue and renews its entry with a heartbeat; an entry that is not
//! renewed in time runs out, so the registry lists exactly the processes
//! that were alive a moment ago.
//!
//! Why: a chat backend that waits for a requested compaction must know
//! whether anyone will run it. With no live worker, a queued job waits for
//! ever, and the honest answer is "no live worker" at once, not a wait for
//! the whole timeout (see `Compactor::wait`). Operators read the same
//! entries to see who serves a queue.
//!
//! Layout (every key under the queue's hash tag, so a Redis Cluster keeps
//! them in the queue's slot): the sorted set `Keys::workers` scores each
//! worker id by the server time its registration runs out; the hash
//! `Keys::worker` describes the worker and expires with it. Liveness is
//! decided on the Redis server's clock, so skewed worker clocks agree.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;

use super::convert::millis;
use super::error::{redis_error, QueueError};
use super::handle::Queue;

/// What a worker says about itself when it registers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerRegistration {
    /// Unique per process start (`<name>-<pid>-<start>`); the `worker`
    /// field of the jobs it runs names it too.
    pub id: String,
    /// The configured name (`[worker] name`).
    pub name: String,
    pub host: String,
    pub pid: u32,
    /// The worker's build (its crate version).
    pub version: String,
    /// Jobs it runs at once.
    pub concurrency: u32,
    /// Wall-clock time (unix ms, the worker's clock) it started.
    pub started_at_ms: u64,
}

/// A registered worker whose registration has not run out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerInfo {
    #[serde(flatten)]
    pub registration: WorkerRegistration,
    /// Server time (unix ms) of its last heartbeat.
    pub heartbeat_at_ms: u64,
    /// Server time (unix ms) its registration runs out unless renewed.
    pub expires_at_ms: u64,
}

impl Queue {
    /// Registers `worker`, or renews its registration, for `ttl`: it counts
    /// as live until `ttl` after this call (by the Redis server's clock)
    /// unless it beats again. Workers beat well within their TTL.
    pub async fn heartbeat(
        &self,
        worker: &WorkerRegistration,
        ttl: Duration,
    ) -> Result<(), QueueError> {
        let mut conn = self.conn.clone();
        let _: i64 = self
            .scripts
            .heartbeat
            .key(self.keys().workers())
            .key(self.keys().worker(&worker.id))
            .arg(&worker.id)
            .arg(millis(ttl))
            .arg("name")
            .arg(&worker.name)
            .arg("host")
            .arg(&worker.host)
            .arg("pid")
            .arg(worker.pid)
            .arg("version")
            .arg(&worker.version)
            .arg("concurrency")
            .arg(worker.concurrency)
            .arg("started_at")
            .arg(worker.started_at_ms)
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("heartbeat"))?;
        Ok(())
    }

    /// Removes a worker's registration (it is stopping and takes no more
    /// jobs). `false` when it was not registered (any more).
    pub async fn deregister(&self, worker_id: &str) -> Result<bool, QueueError> {
        let mut conn = self.conn.clone();
        let (removed,): (u64,) = redis::pipe()
            .cmd("ZREM")
            .arg(self.keys().workers())
            .arg(worker_id)
            .del(self.keys().worker(worker_id))
            .ignore()
            .query_async(&mut conn)
            .await
            .map_err(redis_error("deregister"))?;
        Ok(removed > 0)
    }

    /// The workers whose registration has not run out, in no particular
    /// order.
    pub async fn live_workers(&self) -> Result<Vec<WorkerInfo>, QueueError> {
        let mut conn = self.conn.clone();
        let ids: Vec<String> = self
            .scripts
            .workers
            .key(self.keys().workers())
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("live_workers"))?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.hgetall(self.keys().worker(id));
        }
        let records: Vec<HashMap<String, String>> = pipe
            .query_async(&mut conn)
            .await
            .map_err(redis_error("live_workers"))?;
        // A record that expired between the two reads is not listed.
        Ok(ids
            .into_iter()
            .zip(records)
            .filter(|(_, r)| !r.is_empty())
            .map(|(id, r)| worker_info(id, &r))
            .collect())
    }
}

/// Reads a registry hash; fields that are missing or unreadable (written by
/// hand, or by another build) read as empty or zero rather than hiding the
/// worker.
pub(super) fn worker_info(id: String, record: &HashMap<String, String>) -> WorkerInfo {
    let text = |f: &str| record.get(f).cloned().unwrap_or_default();
    let number = |f: &str| {
        record
            .get(f)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    WorkerInfo {
        registration: WorkerRegistration {
            id,
            name: text("name"),
            host: text("host"),
            pid: u32::try_from(number("pid")).unwrap_or(0),
            version: text("version"),
            concurrency: u32::try_from(number("concurrency")).unwrap_or(0),
            started_at_ms: number("started_at"),
        },
        heartbeat_at_ms: number("heartbeat_at"),
        expires_at_ms: number("expires_at"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::{Keys, QueueName};

    #[test]
    fn a_record_with_missing_fields_still_names_its_worker() {
        let mut record = HashMap::new();
        record.insert("name".to_owned(), "w".to_owned());
        record.insert("pid".to_owned(), "not a number".to_owned());
        let info = worker_info("w-1".to_owned(), &record);
        assert_eq!(info.registration.id, "w-1");
        assert_eq!(info.registration.name, "w");
        assert_eq!(info.registration.pid, 0);
        assert_eq!(info.heartbeat_at_ms, 0);
    }

    #[test]
    fn worker_keys_share_the_queue_hash_tag() {
        let keys = Keys::new(&QueueName::parse("q").unwrap());
        assert_eq!(keys.workers(), "{cq:q}:workers");
        assert_eq!(keys.worker("w-1"), "{cq:q}:worker:w-1");
    }
}
