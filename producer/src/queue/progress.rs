//! Where an entity's requested compaction stands, as a chat request that
//! waits on it needs to know: waiting (for its first run, or for its retry
//! delay to pass), running, or finished — and whether any worker is live to
//! move it on. One script reads it all in one round trip, on the Redis
//! server's clock (delays and deadlines come back as durations from now, so
//! the caller's clock does not matter).

use std::time::Duration;

use compactor_shared::EntityKey;

use super::convert::parse_id;
use super::error::{redis_error, QueueError};
use super::handle::Queue;
use super::keys::Keys;

/// The stage of an entity's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStage {
    /// In the waiting set. `attempts`: attempts counted so far (a retry
    /// after a failed one has at least 1); `due_in`: how long until it may
    /// run (zero once it may); `paused`: the queue or the job's domain is
    /// paused, so it runs only once resumed.
    Waiting {
        job_id: u64,
        attempts: u32,
        due_in: Duration,
        paused: bool,
    },
    /// Leased to a worker; `lease_left`: until its queue lease ends unless
    /// renewed (zero once it has expired: its worker may be gone).
    Running {
        job_id: u64,
        attempt: u32,
        lease_left: Duration,
    },
    Done {
        job_id: u64,
    },
    Dead {
        job_id: u64,
    },
}

/// An entity's job, and the workers live to run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobProgress {
    /// `None` when the entity has no job record (never requested, or the
    /// record aged out).
    pub stage: Option<JobStage>,
    /// Workers whose registration has not run out (see the `workers`
    /// module).
    pub live_workers: u64,
}

impl JobProgress {
    /// Whether the job is still to run or running.
    pub fn pending(&self) -> bool {
        matches!(
            self.stage,
            Some(JobStage::Waiting { .. } | JobStage::Running { .. })
        )
    }
}

impl Queue {
    /// Where `key`'s job stands, and how many workers are live.
    pub async fn job_progress(&self, key: &EntityKey) -> Result<JobProgress, QueueError> {
        const OP: &str = "job_progress";
        let mut conn = self.conn.clone();
        let (state, job_id, attempts, due_in, lease_left, live_workers, paused): (
            String,
            String,
            String,
            i64,
            i64,
            u64,
            u8,
        ) = self
            .scripts
            .progress
            .key(self.keys().job(key))
            .key(self.keys().waiting())
            .key(self.keys().workers())
            .key(self.keys().urgent())
            .key(self.keys().paused())
            .arg(Keys::member(key))
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error(OP))?;
        let ms = |v: i64| Duration::from_millis(u64::try_from(v).unwrap_or(0));
        let count = attempts.parse::<u32>().unwrap_or(0);
        let stage = match state.as_str() {
            "" => None,
            "waiting" => Some(JobStage::Waiting {
                job_id: parse_id(Some(&job_id), OP)?,
                attempts: count,
                due_in: ms(due_in),
                paused: paused == 1,
            }),
            "running" => Some(JobStage::Running {
                job_id: parse_id(Some(&job_id), OP)?,
                attempt: count,
                lease_left: ms(lease_left),
            }),
            "done" => Some(JobStage::Done {
                job_id: parse_id(Some(&job_id), OP)?,
            }),
            "dead" => Some(JobStage::Dead {
                job_id: parse_id(Some(&job_id), OP)?,
            }),
            other => {
                return Err(QueueError::Protocol {
                    op: OP,
                    detail: format!("unknown state {other:?}"),
                })
            }
        };
        Ok(JobProgress {
            stage,
            live_workers,
        })
    }
}
