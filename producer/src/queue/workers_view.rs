//! The operator's table of workers: every worker of the registry
//! (`workers`) with what it runs now, and those whose heartbeat ran out
//! shown as gone rather than silently left out. Read-only pipelines.
//!
//! The registry can tell a worker is gone for a while only: its set entry
//! stays until the next heartbeat of any worker prunes it, and a running
//! job's record keeps naming the worker that holds its lease until the
//! recovery sweep returns the job. Both are shown, as gone.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::error::{redis_error, QueueError};
use super::handle::Queue;
use super::workers::worker_info;

/// One worker as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerStatus {
    /// Its registry id (`<name>-<pid>-<start>`); running jobs name it.
    pub id: String,
    /// Empty when its registration expired along with its description.
    pub name: String,
    pub host: String,
    pub pid: u32,
    pub version: String,
    pub concurrency: u32,
    /// Jobs whose lease it holds now.
    pub running_jobs: u32,
    /// Since its last heartbeat (ms, server clock); `None` when its
    /// description expired.
    pub heartbeat_age_ms: Option<u64>,
    /// Its registration ran out: it missed its heartbeats (it died or
    /// lost Redis). Its jobs return to the queue when their leases expire.
    pub gone: bool,
}

/// The first read: the server's `TIME`, the registry's entries with their
/// expiry, the running set's members.
type ServerTimeAndSets = ((u64, u64), Vec<(String, f64)>, Vec<String>);

impl Queue {
    /// Every worker the registry or a running job names, live ones first,
    /// then by id.
    pub async fn workers_overview(&self) -> Result<Vec<WorkerStatus>, QueueError> {
        let redis_err = redis_error("workers_overview");
        let mut conn = self.conn.clone();
        let ((secs, micros), registered, running): ServerTimeAndSets = redis::pipe()
            .cmd("TIME")
            .cmd("ZRANGE")
            .arg(self.keys().workers())
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .cmd("ZRANGE")
            .arg(self.keys().running())
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .map_err(redis_err)?;
        let now = secs * 1_000 + micros / 1_000;
        let mut pipe = redis::pipe();
        for (id, _) in &registered {
            pipe.hgetall(self.keys().worker(id));
        }
        for member in &running {
            pipe.hget(self.keys().job_of_member(member), "worker");
        }
        let mut records: Vec<HashMap<String, String>> = Vec::new();
        let mut holders: Vec<Option<String>> = Vec::new();
        if !registered.is_empty() || !running.is_empty() {
            let mut replies: Vec<redis::Value> =
                pipe.query_async(&mut conn).await.map_err(redis_err)?;
            let rest = replies.split_off(registered.len().min(replies.len()));
            // A reply of another shape (a key of another type) reads as
            // nothing known, not as a failure of the whole table.
            records = replies
                .into_iter()
                .map(|v| redis::from_redis_value(v).unwrap_or_default())
                .collect();
            holders = rest
                .into_iter()
                .map(|v| redis::from_redis_value(v).unwrap_or_default())
                .collect();
        }
        let mut jobs: BTreeMap<String, u32> = BTreeMap::new();
        for holder in holders.into_iter().flatten() {
            *jobs.entry(holder).or_default() += 1;
        }
        let mut out: Vec<WorkerStatus> = Vec::new();
        for ((id, expires_at), record) in registered.into_iter().zip(records) {
            let running_jobs = jobs.remove(&id).unwrap_or(0);
            let described = !record.is_empty();
            let info = worker_info(id, &record).registration;
            out.push(WorkerStatus {
                running_jobs,
                heartbeat_age_ms: described.then(|| {
                    let beat = record
                        .get("heartbeat_at")
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                    now.saturating_sub(beat)
                }),
                // Scores are whole server milliseconds.
                gone: (expires_at as u64) <= now,
                id: info.id,
                name: info.name,
                host: info.host,
                pid: info.pid,
                version: info.version,
                concurrency: info.concurrency,
            });
        }
        // Leases held by workers no longer registered at all.
        for (id, running_jobs) in jobs {
            out.push(WorkerStatus {
                id,
                name: String::new(),
                host: String::new(),
                pid: 0,
                version: String::new(),
                concurrency: 0,
                running_jobs,
                heartbeat_age_ms: None,
                gone: true,
            });
        }
        out.sort_by(|a, b| a.gone.cmp(&b.gone).then_with(|| a.id.cmp(&b.id)));
        Ok(out)
    }
}
