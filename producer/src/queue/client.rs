//! The queue client: requests from app code, and the claim / renew /
//! complete steps a worker takes.

use std::time::Duration;

use compactor_shared::EntityKey;
use redis::aio::MultiplexedConnection;
use redis::{Script, Value};

use super::keys::{Keys, QueueName};
use super::payload::{Payload, PayloadError, Trigger};

/// Queue settings shared by producers and workers.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    pub name: QueueName,
    /// How long a claimed job's lease lasts without renewal.
    pub lease_ttl: Duration,
    /// Finished-job records kept at most…
    pub done_max_count: u64,
    /// …and for at most this long.
    pub done_max_age: Duration,
    /// Wake-up tokens kept at most (idle workers need one each).
    pub signal_cap: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            name: QueueName::default(),
            lease_ttl: Duration::from_secs(30),
            done_max_count: 10_000,
            done_max_age: Duration::from_secs(24 * 3600),
            signal_cap: 1_024,
        }
    }
}

/// What a compaction request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnqueueOutcome {
    /// A new job was added.
    Added { job_id: u64 },
    /// A job for the entity was waiting; the request joined it.
    Coalesced { job_id: u64 },
    /// A job for the entity is running; one follow-up will run after it.
    FollowUpRecorded { job_id: u64 },
}

impl EnqueueOutcome {
    /// Bounded label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            EnqueueOutcome::Added { .. } => "added",
            EnqueueOutcome::Coalesced { .. } => "coalesced",
            EnqueueOutcome::FollowUpRecorded { .. } => "followup",
        }
    }
}

/// A job a worker holds the lease of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedJob {
    pub key: EntityKey,
    pub payload: Payload,
    pub job_id: u64,
    /// 1 on the first attempt.
    pub attempt: u32,
    /// Fences the job's final commit: only the holder of this token may
    /// complete the job.
    pub lease_token: String,
    /// Server time (ms) the job was added at.
    pub enqueued_at_ms: u64,
}

/// Result of a claim.
#[derive(Debug)]
pub enum ClaimOutcome {
    Claimed(ClaimedJob),
    /// Nothing may run now; `next_at_ms` is when a delayed job becomes due.
    Empty {
        next_at_ms: Option<u64>,
    },
    /// A queue entry with a payload that cannot be used was removed from the
    /// queue; the caller must record it (it is not retried).
    Unusable {
        member: String,
        error: String,
    },
}

/// Result of completing a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    Done,
    /// A request arrived while it ran: this follow-up job was added.
    FollowUpAdded {
        job_id: u64,
    },
    /// The lease was no longer held (expired and reclaimed): nothing changed.
    LeaseLost,
}

/// State of an entity's job, as seen by inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Waiting {
        job_id: u64,
    },
    Running {
        job_id: u64,
        attempt: u32,
        followup_pending: bool,
    },
    Done {
        job_id: u64,
    },
}

/// How many jobs are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    pub waiting: u64,
    pub running: u64,
    pub done: u64,
}

/// Queue failures. Redis errors carry the operation that failed; the URL
/// is never part of an error (it may hold a password).
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("cannot connect to Redis at {target}: {source}")]
    Connect {
        target: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("Redis {op} failed: {source}")]
    Redis {
        op: &'static str,
        #[source]
        source: redis::RedisError,
    },
    #[error("unexpected reply to {op}: {detail}")]
    Protocol { op: &'static str, detail: String },
    #[error(transparent)]
    Payload(#[from] PayloadError),
}

struct Scripts {
    enqueue: Script,
    claim: Script,
    renew: Script,
    complete: Script,
}

impl Scripts {
    fn new() -> Scripts {
        Scripts {
            enqueue: Script::new(include_str!("scripts/enqueue.lua")),
            claim: Script::new(include_str!("scripts/claim.lua")),
            renew: Script::new(include_str!("scripts/renew.lua")),
            complete: Script::new(include_str!("scripts/complete.lua")),
        }
    }
}

/// A handle on one queue. Cheap to clone; clones share one multiplexed
/// connection.
#[derive(Clone)]
pub struct Queue {
    keys: Keys,
    config: QueueConfig,
    conn: MultiplexedConnection,
    scripts: std::sync::Arc<Scripts>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("queue", &self.config.name)
            .finish_non_exhaustive()
    }
}

/// `redis://user:secret@host:6379/0` → `redis://***@host:6379/0`.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

impl Queue {
    /// Connects and loads the scripts.
    pub async fn connect(redis_url: &str, config: QueueConfig) -> Result<Queue, QueueError> {
        let connect_err = |source| QueueError::Connect {
            target: redact(redis_url),
            source,
        };
        let client = redis::Client::open(redis_url).map_err(connect_err)?;
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(connect_err)?;
        let queue = Queue {
            keys: Keys::new(&config.name),
            config,
            conn,
            scripts: std::sync::Arc::new(Scripts::new()),
        };
        queue.load_scripts().await?;
        Ok(queue)
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// `SCRIPT LOAD`s every script, so pipelines can call them by SHA.
    async fn load_scripts(&self) -> Result<(), QueueError> {
        let mut conn = self.conn.clone();
        for script in [
            &self.scripts.enqueue,
            &self.scripts.claim,
            &self.scripts.renew,
            &self.scripts.complete,
        ] {
            script
                .prepare_invoke()
                .load_async(&mut conn)
                .await
                .map_err(|source| QueueError::Redis {
                    op: "SCRIPT LOAD",
                    source,
                })?;
        }
        Ok(())
    }

    fn enqueue_invocation(
        &self,
        key: &EntityKey,
        trigger: Trigger,
    ) -> Result<redis::ScriptInvocation<'_>, QueueError> {
        let manual = trigger.is_manual();
        let followup_trigger = if manual {
            trigger.clone()
        } else {
            Trigger::FollowUp
        };
        let payload = Payload::new(key.clone(), trigger)?.encode();
        let followup = Payload::new(key.clone(), followup_trigger)?.encode();
        let mut inv = self.scripts.enqueue.prepare_invoke();
        inv.key(self.keys.job(key))
            .key(self.keys.waiting())
            .key(self.keys.signal())
            .key(self.keys.seq())
            .arg(Keys::member(key))
            .arg(payload)
            .arg(followup)
            .arg(if manual { "1" } else { "0" })
            .arg(self.config.signal_cap.max(1));
        Ok(inv)
    }

    /// Requests a compaction of `key`, in one round trip.
    pub async fn request_compaction(
        &self,
        key: &EntityKey,
        trigger: Trigger,
    ) -> Result<EnqueueOutcome, QueueError> {
        let inv = self.enqueue_invocation(key, trigger)?;
        let mut conn = self.conn.clone();
        let reply: Vec<String> =
            inv.invoke_async(&mut conn)
                .await
                .map_err(|source| QueueError::Redis {
                    op: "enqueue",
                    source,
                })?;
        enqueue_outcome(&reply)
    }

    /// Requests compactions of many entities in one pipelined round trip.
    /// Outcomes are in request order.
    pub async fn enqueue_many(
        &self,
        requests: &[(EntityKey, Trigger)],
    ) -> Result<Vec<EnqueueOutcome>, QueueError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (key, trigger) in requests {
            let inv = self.enqueue_invocation(key, trigger.clone())?;
            pipe.invoke_script(&inv);
        }
        let mut conn = self.conn.clone();
        let replies: Vec<Vec<String>> = match pipe.query_async(&mut conn).await {
            Ok(r) => r,
            // The server lost its scripts (restart, SCRIPT FLUSH): load and
            // retry once. Enqueue is idempotent per entity, so a partial first
            // run cannot add a job twice.
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.load_scripts().await?;
                pipe.query_async(&mut conn)
                    .await
                    .map_err(|source| QueueError::Redis {
                        op: "enqueue_many",
                        source,
                    })?
            }
            Err(source) => {
                return Err(QueueError::Redis {
                    op: "enqueue_many",
                    source,
                })
            }
        };
        replies.iter().map(|r| enqueue_outcome(r)).collect()
    }

    /// Takes the oldest due job, if any, with a lease for `worker`.
    pub async fn claim(&self, worker: &str) -> Result<ClaimOutcome, QueueError> {
        let nonce = nonce();
        let mut conn = self.conn.clone();
        let reply: Vec<Value> = self
            .scripts
            .claim
            .key(self.keys.waiting())
            .key(self.keys.running())
            .arg(millis(self.config.lease_ttl))
            .arg(worker)
            .arg(self.keys.prefix())
            .arg(nonce)
            .invoke_async(&mut conn)
            .await
            .map_err(|source| QueueError::Redis {
                op: "claim",
                source,
            })?;
        let text = |i: usize| -> Option<String> {
            match reply.get(i)? {
                Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
                Value::SimpleString(s) => Some(s.clone()),
                Value::Int(n) => Some(n.to_string()),
                _ => None,
            }
        };
        let bytes = |i: usize| -> Option<Vec<u8>> {
            match reply.get(i)? {
                Value::BulkString(b) => Some(b.clone()),
                _ => None,
            }
        };
        let protocol = |detail: &str| QueueError::Protocol {
            op: "claim",
            detail: detail.to_owned(),
        };
        match text(0).as_deref() {
            Some("empty") => Ok(ClaimOutcome::Empty {
                next_at_ms: text(1)
                    .and_then(|s| s.parse::<f64>().ok())
                    .map(|f| f as u64),
            }),
            Some("orphan") => Ok(ClaimOutcome::Unusable {
                member: text(1).unwrap_or_default(),
                error: "queue entry without a job record".into(),
            }),
            Some("claimed") => {
                let member = text(1).ok_or_else(|| protocol("member missing"))?;
                let raw = bytes(2).ok_or_else(|| protocol("payload missing"))?;
                let payload = match Payload::decode(&raw) {
                    Ok(p) => p,
                    Err(e) => {
                        return Ok(ClaimOutcome::Unusable {
                            member,
                            error: e.to_string(),
                        })
                    }
                };
                let number = |i: usize, what: &str| -> Result<u64, QueueError> {
                    text(i)
                        .and_then(|s| s.parse::<u64>().ok())
                        .ok_or_else(|| protocol(what))
                };
                Ok(ClaimOutcome::Claimed(ClaimedJob {
                    key: payload.key.clone(),
                    job_id: number(3, "job id")?,
                    attempt: u32::try_from(number(4, "attempt")?).unwrap_or(u32::MAX),
                    lease_token: text(5).ok_or_else(|| protocol("lease token missing"))?,
                    enqueued_at_ms: number(6, "enqueued_at")?,
                    payload,
                }))
            }
            other => Err(protocol(&format!("unknown outcome {other:?}"))),
        }
    }

    /// Extends the lease of `job`. `false` when it is no longer held.
    pub async fn renew(&self, job: &ClaimedJob) -> Result<bool, QueueError> {
        let mut conn = self.conn.clone();
        let reply: String = self
            .scripts
            .renew
            .key(self.keys.job(&job.key))
            .key(self.keys.running())
            .arg(Keys::member(&job.key))
            .arg(&job.lease_token)
            .arg(millis(self.config.lease_ttl))
            .invoke_async(&mut conn)
            .await
            .map_err(|source| QueueError::Redis {
                op: "renew",
                source,
            })?;
        Ok(reply == "ok")
    }

    /// Marks `job` finished, adding its follow-up if one was requested.
    pub async fn complete(&self, job: &ClaimedJob) -> Result<Completion, QueueError> {
        let mut conn = self.conn.clone();
        let reply: Vec<String> = self
            .scripts
            .complete
            .key(self.keys.job(&job.key))
            .key(self.keys.running())
            .key(self.keys.waiting())
            .key(self.keys.signal())
            .key(self.keys.done())
            .key(self.keys.seq())
            .arg(Keys::member(&job.key))
            .arg(&job.lease_token)
            .arg(self.config.done_max_count)
            .arg(millis(self.config.done_max_age))
            .arg(self.config.signal_cap.max(1))
            .invoke_async(&mut conn)
            .await
            .map_err(|source| QueueError::Redis {
                op: "complete",
                source,
            })?;
        match reply.first().map(String::as_str) {
            Some("done") => Ok(Completion::Done),
            Some("lost") => Ok(Completion::LeaseLost),
            Some("followup") => Ok(Completion::FollowUpAdded {
                job_id: parse_id(reply.get(1), "complete")?,
            }),
            other => Err(QueueError::Protocol {
                op: "complete",
                detail: format!("unknown outcome {other:?}"),
            }),
        }
    }

    /// The state of `key`'s job, if there is one.
    pub async fn job_state(&self, key: &EntityKey) -> Result<Option<JobState>, QueueError> {
        let mut conn = self.conn.clone();
        let fields: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(self.keys.job(key))
            .arg(&["state", "job_id", "attempts", "followup"])
            .query_async(&mut conn)
            .await
            .map_err(|source| QueueError::Redis {
                op: "job_state",
                source,
            })?;
        let get = |i: usize| fields.get(i).cloned().flatten();
        let job_id = || parse_id(get(1).as_ref(), "job_state");
        match get(0).as_deref() {
            None => Ok(None),
            Some("waiting") => Ok(Some(JobState::Waiting { job_id: job_id()? })),
            Some("running") => Ok(Some(JobState::Running {
                job_id: job_id()?,
                attempt: get(2).and_then(|a| a.parse().ok()).unwrap_or(0),
                followup_pending: get(3).is_some(),
            })),
            Some("done") => Ok(Some(JobState::Done { job_id: job_id()? })),
            Some(other) => Err(QueueError::Protocol {
                op: "job_state",
                detail: format!("unknown state {other:?}"),
            }),
        }
    }

    /// Job counts by state.
    pub async fn counts(&self) -> Result<QueueCounts, QueueError> {
        let mut conn = self.conn.clone();
        let (waiting, running, done): (u64, u64, u64) = redis::pipe()
            .zcard(self.keys.waiting())
            .zcard(self.keys.running())
            .zcard(self.keys.done())
            .query_async(&mut conn)
            .await
            .map_err(|source| QueueError::Redis {
                op: "counts",
                source,
            })?;
        Ok(QueueCounts {
            waiting,
            running,
            done,
        })
    }
}

fn enqueue_outcome(reply: &[String]) -> Result<EnqueueOutcome, QueueError> {
    let job_id = parse_id(reply.get(1), "enqueue")?;
    match reply.first().map(String::as_str) {
        Some("added") => Ok(EnqueueOutcome::Added { job_id }),
        Some("coalesced") => Ok(EnqueueOutcome::Coalesced { job_id }),
        Some("followup") => Ok(EnqueueOutcome::FollowUpRecorded { job_id }),
        other => Err(QueueError::Protocol {
            op: "enqueue",
            detail: format!("unknown outcome {other:?}"),
        }),
    }
}

fn parse_id(value: Option<&String>, op: &'static str) -> Result<u64, QueueError> {
    value
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| QueueError::Protocol {
            op,
            detail: format!("job id {value:?} is not a number"),
        })
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A per-claim nonce so lease tokens of different claims never repeat,
/// even if a job id and attempt did (e.g. after Redis lost its data).
fn nonce() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}{:x}{n:x}", std::process::id(), t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted() {
        assert_eq!(
            redact("redis://user:secret@host:6379/0"),
            "redis://***@host:6379/0"
        );
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }
}
