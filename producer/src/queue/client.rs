//! The queue client: requests from app code, and the claim / renew /
//! complete steps a worker takes.

use std::time::Duration;

use compactor_shared::EntityKey;
use futures::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use redis::{Script, Value};
use serde::{Deserialize, Serialize};

use super::conn::{Conn, Endpoints, PubSubNode};
use super::keys::{Keys, QueueName};
use super::payload::{Payload, PayloadError, Trigger};
use crate::metrics::names;
use crate::settings::RedisSettings;

/// Queue settings shared by producers and workers: the `[queue]` section
/// of the configuration (durations as `"30s"`, `"500ms"`, `"7days"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    pub name: QueueName,
    /// How long a claimed job's lease lasts without renewal.
    #[serde(with = "humantime_serde")]
    pub lease_ttl: Duration,
    /// Finished-job records kept at most…
    pub done_max_count: u64,
    /// …and for at most this long.
    #[serde(with = "humantime_serde")]
    pub done_max_age: Duration,
    /// Dead-lettered jobs kept at most…
    pub dead_max_count: u64,
    /// …and for at most this long.
    #[serde(with = "humantime_serde")]
    pub dead_max_age: Duration,
    /// Expired leases one job may have before it is dead-lettered.
    pub max_stalls: u32,
    /// How long connecting to Redis may take before it is an error.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// How long one command may wait for its reply before it is an error
    /// (so an unreachable Redis fails a request instead of hanging it).
    #[serde(with = "humantime_serde")]
    pub response_timeout: Duration,
}

/// Why a queue setting was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid queue setting {field}: {problem}")]
pub struct QueueConfigError {
    pub field: &'static str,
    pub problem: &'static str,
}

impl QueueConfig {
    /// Checks each setting is usable.
    pub fn validate(&self) -> Result<(), QueueConfigError> {
        let bad = |field, problem| Err(QueueConfigError { field, problem });
        if self.lease_ttl < Duration::from_millis(1) {
            return bad("lease_ttl", "must be at least 1ms");
        }
        if self.done_max_count == 0 || self.dead_max_count == 0 {
            return bad("done_max_count / dead_max_count", "must be at least 1");
        }
        if self.done_max_age.is_zero() || self.dead_max_age.is_zero() {
            return bad("done_max_age / dead_max_age", "must be positive");
        }
        if self.connect_timeout.is_zero() || self.response_timeout.is_zero() {
            return bad(
                "connect_timeout / response_timeout",
                "must be positive, or an unreachable Redis hangs requests",
            );
        }
        Ok(())
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            name: QueueName::default(),
            lease_ttl: Duration::from_secs(30),
            done_max_count: 10_000,
            done_max_age: Duration::from_secs(24 * 3600),
            dead_max_count: 10_000,
            dead_max_age: Duration::from_secs(7 * 24 * 3600),
            max_stalls: 3,
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(5),
        }
    }
}

/// What a compaction request did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum EnqueueOutcome {
    /// A new job was added.
    Added { job_id: u64 },
    /// A job for the entity was waiting; the request joined it.
    Coalesced { job_id: u64 },
    /// A job for the entity is running; one follow-up will run after it.
    /// Serialized `followup`, the word of the HTTP API and the metrics.
    #[serde(rename = "followup")]
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
    /// How long it waited between being added and this claim (server clock).
    pub queue_wait: Duration,
}

/// Result of a claim.
#[derive(Debug)]
pub enum ClaimOutcome {
    Claimed(ClaimedJob),
    /// Nothing may run now; `next_due_in` is how soon a delayed job
    /// becomes due (by the server clock), if one is waiting.
    Empty {
        next_due_in: Option<Duration>,
    },
    /// A queue entry that cannot run was taken off the queue: a payload
    /// that does not decode is dead-lettered with the error as its reason
    /// (never retried); an entry whose job record is gone is dropped.
    Unusable {
        member: String,
        error: String,
    },
}

/// Most jobs one [`Queue::settle`] call completes, and most it claims (the
/// scripts pass batches to variadic commands, which must stay far below
/// Lua's stack limit).
pub const MAX_SETTLE_BATCH: usize = 128;

/// What one [`Queue::settle`] call did.
#[derive(Debug)]
pub struct Settled {
    /// One per finished job, in the order they were given.
    pub completions: Vec<Completion>,
    /// At most as many as were wanted: jobs now leased to the worker, and
    /// unusable entries taken off the queue (never [`ClaimOutcome::Empty`]).
    pub claimed: Vec<ClaimOutcome>,
    /// When fewer were claimed than wanted: how soon the next delayed job
    /// is due, if one is waiting.
    pub next_due_in: Option<Duration>,
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

/// What to do with a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailAction {
    /// Run it again after this delay.
    Retry { delay: Duration },
    /// Run it again after this delay without counting the attempt: the job
    /// did not fail, a service it needs (the database) was unavailable.
    Postpone { delay: Duration },
    /// Give up: move it to the dead-letter set.
    DeadLetter,
}

/// Result of failing an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    RetryScheduled,
    DeadLettered,
    /// Dead-lettered, and the follow-up requested while it ran was added.
    DeadLetteredFollowUpAdded {
        job_id: u64,
    },
    LeaseLost,
}

/// Result of one recovery sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Jobs whose lease expired, returned to the queue.
    pub recovered: u64,
    /// Jobs over the stall bound, dead-lettered.
    pub dead_lettered: u64,
}

/// A dead-lettered job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadLetter {
    /// Its id in the dead-letter set, `<member>|<job_id>`.
    pub entry: String,
    /// The entity's job key, `compact:{domain}:{entity_id}`.
    pub member: String,
    pub job_id: u64,
    pub attempts: u32,
    pub stalls: u32,
    pub reason: String,
    pub failed_at_ms: u64,
    /// The payload as stored (it may be the reason it died).
    pub payload: String,
}

/// State of an entity's job, as seen by inspection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// The last job of the entity was dead-lettered.
    Dead {
        job_id: u64,
    },
}

/// How many jobs are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QueueCounts {
    pub waiting: u64,
    pub running: u64,
    pub done: u64,
    pub dead: u64,
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
    /// `[redis] url` cannot be used as given (the URLs shown redacted).
    #[error("unusable Redis URL {target}: {problem}")]
    Url {
        target: String,
        problem: &'static str,
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
    #[error(transparent)]
    Config(#[from] QueueConfigError),
    #[error("{op}: {len} jobs in one call, at most {MAX_SETTLE_BATCH} allowed")]
    BatchTooLarge { op: &'static str, len: usize },
}

impl QueueError {
    /// Whether Redis could not be reached or did not answer (as opposed to
    /// an answer this build does not understand, or a refused request):
    /// retrying later may succeed.
    pub fn is_unavailable(&self) -> bool {
        match self {
            QueueError::Connect { .. } => true,
            QueueError::Redis { source, .. } => {
                source.is_io_error()
                    || !matches!(source.retry_method(), redis::RetryMethod::NoRetry)
            }
            _ => false,
        }
    }
}

pub(super) struct Scripts {
    enqueue: Script,
    settle: Script,
    renew: Script,
    fail: Script,
    recover: Script,
    release: Script,
    /// The worker registry (`workers` module).
    pub(super) heartbeat: Script,
    pub(super) workers: Script,
    /// A job's progress, for chat-side waiters (`progress` module).
    pub(super) progress: Script,
    /// Puts records back in their set (`repair` module).
    pub(super) repair: Script,
}

/// Builds a script from `scripts/<name>.lua` with the shared prelude
/// (`scripts/prelude.lua`: server time, adding, completing, claiming and
/// dead-lettering jobs).
macro_rules! script {
    ($name:literal) => {
        Script::new(concat!(
            include_str!("scripts/prelude.lua"),
            include_str!(concat!("scripts/", $name, ".lua"))
        ))
    };
}

impl Scripts {
    fn new() -> Scripts {
        Scripts {
            enqueue: script!("enqueue"),
            settle: script!("settle"),
            renew: script!("renew"),
            fail: script!("fail"),
            recover: script!("recover"),
            release: script!("release"),
            heartbeat: script!("heartbeat"),
            workers: script!("workers"),
            progress: script!("progress"),
            repair: script!("repair"),
        }
    }
}

/// A handle on one queue. Cheap to clone; clones share one multiplexed
/// connection (one per node on a Redis Cluster), which reconnects by itself
/// after Redis restarts or the network drops (the commands in flight at
/// that moment fail).
#[derive(Clone)]
pub struct Queue {
    keys: Keys,
    config: QueueConfig,
    /// Nodes a subscription may use, tried in order.
    pubsub: std::sync::Arc<[PubSubNode]>,
    pub(super) conn: Conn,
    pub(super) scripts: std::sync::Arc<Scripts>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("queue", &self.config.name)
            .finish_non_exhaustive()
    }
}

impl Queue {
    /// Connects to one Redis server at `redis_url` and loads the scripts.
    /// For a Redis Cluster, see [`Queue::connect_with`].
    pub async fn connect(redis_url: &str, config: QueueConfig) -> Result<Queue, QueueError> {
        Queue::open(Endpoints::single(redis_url)?, config).await
    }

    /// Connects as `[redis]` says: to one server, or with `cluster = true`
    /// to a Redis Cluster through its seed nodes (`url` is then a
    /// comma-separated list; any reachable node will do). Loads the
    /// scripts.
    pub async fn connect_with(
        redis: &RedisSettings,
        config: QueueConfig,
    ) -> Result<Queue, QueueError> {
        Queue::open(Endpoints::from_settings(redis)?, config).await
    }

    async fn open(endpoints: Endpoints, config: QueueConfig) -> Result<Queue, QueueError> {
        config.validate()?;
        let conn = endpoints.connect(&config).await?;
        let queue = Queue {
            keys: Keys::new(&config.name),
            config,
            pubsub: endpoints.pubsub.into(),
            conn,
            scripts: std::sync::Arc::new(Scripts::new()),
        };
        queue.load_scripts().await?;
        Ok(queue)
    }

    /// `PING`: whether Redis answers on the queue's connection (readiness
    /// probes). On a cluster the client sends it to every primary, and all
    /// must answer: a cluster missing a primary refuses commands anyway
    /// (full slot coverage). Bounded by `response_timeout` like every
    /// command.
    pub async fn ping(&self) -> Result<(), QueueError> {
        let mut conn = self.conn.clone();
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(redis_error("ping"))?;
        Ok(())
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// `SCRIPT LOAD`s every script, so pipelines can call them by SHA. On a
    /// cluster the client sends `SCRIPT LOAD` to every node, so whichever
    /// node owns the queue's slot (now, or after a failover) has them.
    async fn load_scripts(&self) -> Result<(), QueueError> {
        let mut conn = self.conn.clone();
        for script in [
            &self.scripts.enqueue,
            &self.scripts.settle,
            &self.scripts.renew,
            &self.scripts.fail,
            &self.scripts.recover,
            &self.scripts.release,
            &self.scripts.heartbeat,
            &self.scripts.workers,
            &self.scripts.progress,
            &self.scripts.repair,
        ] {
            script
                .prepare_invoke()
                .load_async(&mut conn)
                .await
                .map_err(redis_error("SCRIPT LOAD"))?;
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
            .key(self.keys.seq())
            .key(self.keys.running())
            .arg(Keys::member(key))
            .arg(payload)
            .arg(followup)
            .arg(if manual { "1" } else { "0" })
            .arg(self.keys.wake_channel());
        Ok(inv)
    }

    /// Requests a compaction of `key`, in one round trip.
    pub async fn request_compaction(
        &self,
        key: &EntityKey,
        trigger: Trigger,
    ) -> Result<EnqueueOutcome, QueueError> {
        let result = self.enqueue_one(key, trigger).await;
        self.count_enqueue(&result);
        result
    }

    async fn enqueue_one(
        &self,
        key: &EntityKey,
        trigger: Trigger,
    ) -> Result<EnqueueOutcome, QueueError> {
        let inv = self.enqueue_invocation(key, trigger)?;
        let mut conn = self.conn.clone();
        let reply: Vec<String> = inv
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("enqueue"))?;
        enqueue_outcome(&reply)
    }

    fn count_enqueue(&self, result: &Result<EnqueueOutcome, QueueError>) {
        let outcome = match result {
            Ok(outcome) => outcome.label(),
            Err(_) => "error",
        };
        metrics::counter!(names::ENQUEUE_TOTAL, "queue" => self.config.name.as_str().to_owned(), "outcome" => outcome)
            .increment(1);
    }

    /// Subscribes to the queue's wake-up channel on a connection of its
    /// own: an idle worker waits on it instead of polling.
    pub async fn subscribe_wakeups(&self) -> Result<Subscription, QueueError> {
        self.subscribe(Channel::Exact(self.keys.wake_channel()))
            .await
    }

    /// Subscribes to the release announcements of every entity of the
    /// queue (see [`Queue::publish_release`]): chat-side waiters listen on
    /// one such subscription per process.
    pub async fn subscribe_releases(&self) -> Result<Subscription, QueueError> {
        self.subscribe(Channel::Pattern(self.keys.released_pattern()))
            .await
    }

    /// Announces that `key`'s entity lease was released (its compaction
    /// ended, one way or another), with what happened as the message.
    /// Returns how many subscribers received it.
    pub async fn publish_release(
        &self,
        key: &EntityKey,
        event: &crate::events::CompactionEvent,
    ) -> Result<u64, QueueError> {
        let message = serde_json::to_string(event).map_err(|e| QueueError::Protocol {
            op: "publish_release",
            detail: e.to_string(),
        })?;
        let mut conn = self.conn.clone();
        redis::cmd("PUBLISH")
            .arg(self.keys.released_channel(key))
            .arg(message)
            .query_async(&mut conn)
            .await
            .map_err(redis_error("publish_release"))
    }

    /// Subscribes on a connection of its own to the first node that
    /// answers: the server, or the first reachable seed of a cluster (a
    /// classic `PUBLISH` reaches every node of a cluster, so any one sees
    /// every announcement).
    async fn subscribe(&self, channel: Channel) -> Result<Subscription, QueueError> {
        let mut last_error = None;
        for node in self.pubsub.iter() {
            match self.subscribe_at(node, &channel).await {
                Ok(subscription) => return Ok(subscription),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or(QueueError::Protocol {
            op: "subscribe",
            detail: "no Redis node to subscribe on".into(),
        }))
    }

    async fn subscribe_at(
        &self,
        node: &PubSubNode,
        channel: &Channel,
    ) -> Result<Subscription, QueueError> {
        let subscribe = async {
            let mut pubsub = node.client.get_async_pubsub().await?;
            match channel {
                Channel::Exact(name) => pubsub.subscribe(name).await?,
                Channel::Pattern(pattern) => pubsub.psubscribe(pattern).await?,
            }
            Ok(pubsub)
        };
        let pubsub = tokio::time::timeout(self.config.connect_timeout, subscribe)
            .await
            .map_err(|_| QueueError::Protocol {
                op: "subscribe",
                detail: format!(
                    "no answer from {} within {:?}",
                    node.target, self.config.connect_timeout
                ),
            })?
            .map_err(|source| QueueError::Connect {
                target: node.target.clone(),
                source,
            })?;
        let (sink, stream) = pubsub.split();
        Ok(Subscription {
            sink,
            stream,
            response_timeout: self.config.response_timeout,
        })
    }

    /// Requests compactions of many entities in one pipelined round trip.
    /// Outcomes are in request order.
    pub async fn enqueue_many(
        &self,
        requests: &[(EntityKey, Trigger)],
    ) -> Result<Vec<EnqueueOutcome>, QueueError> {
        let result = self.enqueue_many_unrecorded(requests).await;
        match &result {
            Ok(outcomes) => {
                for outcome in outcomes {
                    self.count_enqueue(&Ok(outcome.clone()));
                }
            }
            Err(_) => {
                let label = self.config.name.as_str().to_owned();
                metrics::counter!(names::ENQUEUE_TOTAL, "queue" => label, "outcome" => "error")
                    .increment(requests.len() as u64);
            }
        }
        result
    }

    async fn enqueue_many_unrecorded(
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
                    .map_err(redis_error("enqueue_many"))?
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

    /// Acknowledges `finished` jobs as completed and leases up to `wanted`
    /// due jobs to `worker`, in one round trip: a busy worker settles every
    /// job that finished since its last call and fills the slots they
    /// freed. A finished job whose lease was lost is left untouched
    /// ([`Completion::LeaseLost`]).
    pub async fn settle(
        &self,
        finished: &[&ClaimedJob],
        wanted: usize,
        worker: &str,
    ) -> Result<Settled, QueueError> {
        for len in [finished.len(), wanted] {
            if len > MAX_SETTLE_BATCH {
                return Err(QueueError::BatchTooLarge { op: "settle", len });
            }
        }
        let mut invocation = self.scripts.settle.prepare_invoke();
        invocation
            .key(self.keys.running())
            .key(self.keys.waiting())
            .key(self.keys.done())
            .key(self.keys.seq())
            .arg(self.keys.prefix())
            .arg(self.keys.wake_channel())
            .arg(self.config.done_max_count)
            .arg(millis(self.config.done_max_age))
            .arg(millis(self.config.lease_ttl))
            .arg(worker)
            .arg(nonce())
            .arg(wanted)
            .arg(finished.len());
        for job in finished {
            invocation.arg(Keys::member(&job.key)).arg(&job.lease_token);
        }
        let mut conn = self.conn.clone();
        let (completions, entries, next_due): (Vec<Vec<String>>, Vec<Vec<Value>>, String) =
            invocation
                .invoke_async(&mut conn)
                .await
                .map_err(redis_error("settle"))?;
        if completions.len() != finished.len() {
            return Err(QueueError::Protocol {
                op: "settle",
                detail: format!(
                    "{} completions for {} finished jobs",
                    completions.len(),
                    finished.len()
                ),
            });
        }
        let completions = completions
            .iter()
            .map(|c| completion(c, "settle"))
            .collect::<Result<Vec<_>, _>>()?;
        let mut claimed = Vec::with_capacity(entries.len());
        for entry in entries {
            claimed.push(self.claim_entry(entry).await);
        }
        Ok(Settled {
            completions,
            claimed,
            next_due_in: next_due.parse::<u64>().ok().map(Duration::from_millis),
        })
    }

    /// Takes the oldest due job, if any, with a lease for `worker`.
    pub async fn claim(&self, worker: &str) -> Result<ClaimOutcome, QueueError> {
        let settled = self.settle(&[], 1, worker).await?;
        Ok(first_claim(settled))
    }

    /// Completes `job` and claims the next due job for `worker`, in one
    /// round trip.
    pub async fn complete_and_claim(
        &self,
        job: &ClaimedJob,
        worker: &str,
    ) -> Result<(Completion, ClaimOutcome), QueueError> {
        let mut settled = self.settle(&[job], 1, worker).await?;
        let completion = settled.completions.remove(0);
        Ok((completion, first_claim(settled)))
    }

    /// Interprets one claim entry of `settle.lua` (see `claim_some` in the
    /// prelude). Never fails: the script has run by now (jobs are leased,
    /// completions applied), so a problem with one entry must not turn the
    /// whole reply into an error. An entry that cannot be read is reported
    /// as unusable and left leased: its lease expires and recovery returns
    /// it. A payload that does not decode is dead-lettered at once.
    async fn claim_entry(&self, entry: Vec<Value>) -> ClaimOutcome {
        let text = |i: usize| -> Option<String> {
            match entry.get(i)? {
                Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
                Value::SimpleString(s) => Some(s.clone()),
                Value::Int(n) => Some(n.to_string()),
                _ => None,
            }
        };
        let number = |i: usize| text(i).and_then(|s| s.parse::<u64>().ok());
        let member = text(1).unwrap_or_default();
        let unusable = |error: String| ClaimOutcome::Unusable {
            member: member.clone(),
            error,
        };
        match text(0).as_deref() {
            Some("orphan") => unusable("queue entry without a job record".into()),
            Some("claimed") => {
                let Some(token) = text(5) else {
                    return unusable("claim reply without a lease token".into());
                };
                let raw = match entry.get(2) {
                    Some(Value::BulkString(b)) => b.as_slice(),
                    _ => &[],
                };
                let payload = match Payload::decode(raw) {
                    Ok(p) => p,
                    Err(e) => {
                        // Never retried: the payload will not get better.
                        let error = e.to_string();
                        if let Err(failed) = self
                            .fail_raw(&member, &token, FailAction::DeadLetter, &error)
                            .await
                        {
                            // Left leased: recovery returns it, and the next
                            // claim dead-letters it again.
                            return unusable(format!("{error} (not dead-lettered yet: {failed})"));
                        }
                        return unusable(error);
                    }
                };
                let (Some(job_id), Some(attempt), Some(enqueued_at_ms), Some(waited)) =
                    (number(3), number(4), number(6), number(7))
                else {
                    return unusable(format!("unreadable claim reply {entry:?}"));
                };
                ClaimOutcome::Claimed(ClaimedJob {
                    key: payload.key.clone(),
                    job_id,
                    attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
                    lease_token: token,
                    enqueued_at_ms,
                    queue_wait: Duration::from_millis(waited),
                    payload,
                })
            }
            other => unusable(format!("unknown claim outcome {other:?}")),
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
            .map_err(redis_error("renew"))?;
        Ok(reply == "ok")
    }

    /// Marks `job` finished, adding its follow-up if one was requested.
    pub async fn complete(&self, job: &ClaimedJob) -> Result<Completion, QueueError> {
        let mut settled = self.settle(&[job], 0, "").await?;
        Ok(settled.completions.remove(0))
    }

    /// Ends a failed attempt of `job`: schedules a retry or dead-letters it
    /// with `reason` (keep it short and free of message content).
    pub async fn fail(
        &self,
        job: &ClaimedJob,
        action: FailAction,
        reason: &str,
    ) -> Result<Failure, QueueError> {
        self.fail_raw(&Keys::member(&job.key), &job.lease_token, action, reason)
            .await
    }

    async fn fail_raw(
        &self,
        member: &str,
        token: &str,
        action: FailAction,
        reason: &str,
    ) -> Result<Failure, QueueError> {
        let (delay, counted): (i64, &str) = match action {
            FailAction::Retry { delay } => {
                (i64::try_from(delay.as_millis()).unwrap_or(i64::MAX), "1")
            }
            FailAction::Postpone { delay } => {
                (i64::try_from(delay.as_millis()).unwrap_or(i64::MAX), "0")
            }
            FailAction::DeadLetter => (-1, "1"),
        };
        let reason: String = reason.chars().take(1_000).collect();
        let mut conn = self.conn.clone();
        let reply: Vec<String> = self
            .scripts
            .fail
            .key(self.keys.job_of_member(member))
            .key(self.keys.running())
            .key(self.keys.waiting())
            .key(self.keys.dead())
            .key(self.keys.seq())
            .arg(member)
            .arg(token)
            .arg(delay)
            .arg(reason)
            .arg(self.config.dead_max_count.max(1))
            .arg(millis(self.config.dead_max_age))
            .arg(self.keys.wake_channel())
            .arg(self.keys.prefix())
            .arg(counted)
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("fail"))?;
        match reply.first().map(String::as_str) {
            Some("retry") => Ok(Failure::RetryScheduled),
            Some("dead") => Ok(Failure::DeadLettered),
            Some("dead_followup") => Ok(Failure::DeadLetteredFollowUpAdded {
                job_id: parse_id(reply.get(1), "fail")?,
            }),
            Some("lost") => Ok(Failure::LeaseLost),
            other => Err(QueueError::Protocol {
                op: "fail",
                detail: format!("unknown outcome {other:?}"),
            }),
        }
    }

    /// Hands `job` back to the queue without counting its attempt (for a
    /// graceful shutdown that cannot wait for it). `false` when the lease
    /// was no longer held.
    pub async fn release(&self, job: &ClaimedJob) -> Result<bool, QueueError> {
        let mut conn = self.conn.clone();
        let reply: String = self
            .scripts
            .release
            .key(self.keys.job(&job.key))
            .key(self.keys.running())
            .key(self.keys.waiting())
            .arg(Keys::member(&job.key))
            .arg(&job.lease_token)
            .arg(self.keys.wake_channel())
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("release"))?;
        Ok(reply == "released")
    }

    /// Returns jobs with an expired lease to the queue (at most `batch` per
    /// call), dead-lettering those over `max_stalls`. Safe to run from every
    /// worker concurrently: each expired job is handled once.
    pub async fn recover(&self, batch: u32) -> Result<Recovery, QueueError> {
        let mut conn = self.conn.clone();
        let (recovered, dead_lettered): (u64, u64) = self
            .scripts
            .recover
            .key(self.keys.running())
            .key(self.keys.waiting())
            .key(self.keys.dead())
            .key(self.keys.seq())
            .arg(self.keys.prefix())
            .arg(self.config.max_stalls)
            .arg(batch.max(1))
            .arg(self.config.dead_max_count.max(1))
            .arg(millis(self.config.dead_max_age))
            .arg(self.keys.wake_channel())
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("recover"))?;
        Ok(Recovery {
            recovered,
            dead_lettered,
        })
    }

    /// The newest dead-lettered jobs, newest first.
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, QueueError> {
        let mut conn = self.conn.clone();
        let redis_err = redis_error("dead_letters");
        let stop = isize::try_from(limit)
            .unwrap_or(isize::MAX)
            .saturating_sub(1);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let entries: Vec<String> = redis::cmd("ZREVRANGE")
            .arg(self.keys.dead())
            .arg(0)
            .arg(stop)
            .query_async(&mut conn)
            .await
            .map_err(redis_err)?;
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for entry in &entries {
            pipe.hgetall(self.keys.dead_record(entry));
        }
        let records: Vec<std::collections::HashMap<String, String>> =
            pipe.query_async(&mut conn).await.map_err(redis_err)?;
        // An entry whose record expired (its age bound passed before a
        // sweep trimmed the set) is not shown.
        Ok(entries
            .into_iter()
            .zip(records)
            .filter(|(_, r)| !r.is_empty())
            .map(|(entry, r)| {
                let num = |f: &str| r.get(f).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
                DeadLetter {
                    member: r
                        .get("member")
                        .cloned()
                        .unwrap_or_else(|| entry.split('|').next().unwrap_or_default().to_owned()),
                    job_id: num("job_id"),
                    attempts: u32::try_from(num("attempts")).unwrap_or(u32::MAX),
                    stalls: u32::try_from(num("stalls")).unwrap_or(u32::MAX),
                    reason: r.get("reason").cloned().unwrap_or_default(),
                    failed_at_ms: num("failed_at"),
                    payload: r.get("payload").cloned().unwrap_or_default(),
                    entry,
                }
            })
            .collect())
    }

    /// Requests the entity of a dead-lettered job again (with the trigger
    /// it had, or a manual one if its payload is unusable) and removes the
    /// dead letter. `None` when there is no such entry.
    pub async fn retry_dead(&self, entry: &str) -> Result<Option<EnqueueOutcome>, QueueError> {
        let mut conn = self.conn.clone();
        let record: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
            .arg(self.keys.dead_record(entry))
            .query_async(&mut conn)
            .await
            .map_err(redis_error("retry_dead"))?;
        let Some(member) = record.get("member").cloned() else {
            // No record (never was, or it expired): nothing to retry, and
            // an index entry left without its record goes.
            self.purge_dead(Some(entry)).await?;
            return Ok(None);
        };
        let key: EntityKey = member.parse().map_err(|e| QueueError::Protocol {
            op: "retry_dead",
            detail: format!("dead letter {entry:?} names no valid entity: {e}"),
        })?;
        let trigger = record
            .get("payload")
            .and_then(|p| Payload::decode(p.as_bytes()).ok())
            .map_or(Trigger::Manual { instructions: None }, |p| p.trigger);
        let outcome = self.request_compaction(&key, trigger).await?;
        self.purge_dead(Some(entry)).await?;
        Ok(Some(outcome))
    }

    /// Deletes one dead letter, or all of them; returns how many.
    pub async fn purge_dead(&self, entry: Option<&str>) -> Result<u64, QueueError> {
        let mut conn = self.conn.clone();
        let redis_err = redis_error("purge_dead");
        let entries: Vec<String> = match entry {
            Some(e) => vec![e.to_owned()],
            None => redis::cmd("ZRANGE")
                .arg(self.keys.dead())
                .arg(0)
                .arg(-1)
                .query_async(&mut conn)
                .await
                .map_err(redis_err)?,
        };
        let mut removed = 0;
        for chunk in entries.chunks(500) {
            let mut pipe = redis::pipe();
            pipe.cmd("ZREM").arg(self.keys.dead()).arg(chunk);
            for e in chunk {
                pipe.del(self.keys.dead_record(e)).ignore();
            }
            let (n,): (u64,) = pipe.query_async(&mut conn).await.map_err(redis_err)?;
            removed += n;
        }
        Ok(removed)
    }

    /// The state of `key`'s job, if there is one.
    pub async fn job_state(&self, key: &EntityKey) -> Result<Option<JobState>, QueueError> {
        let mut conn = self.conn.clone();
        let fields: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(self.keys.job(key))
            .arg(&["state", "job_id", "attempts", "followup"])
            .query_async(&mut conn)
            .await
            .map_err(redis_error("job_state"))?;
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
            Some("dead") => Ok(Some(JobState::Dead { job_id: job_id()? })),
            Some(other) => Err(QueueError::Protocol {
                op: "job_state",
                detail: format!("unknown state {other:?}"),
            }),
        }
    }

    /// Job counts by state.
    pub async fn counts(&self) -> Result<QueueCounts, QueueError> {
        let mut conn = self.conn.clone();
        let (waiting, running, done, dead): (u64, u64, u64, u64) = redis::pipe()
            .zcard(self.keys.waiting())
            .zcard(self.keys.running())
            .zcard(self.keys.done())
            .zcard(self.keys.dead())
            .query_async(&mut conn)
            .await
            .map_err(redis_error("counts"))?;
        Ok(QueueCounts {
            waiting,
            running,
            done,
            dead,
        })
    }
}

/// The first claim entry of a settle reply, or why there was none.
fn first_claim(settled: Settled) -> ClaimOutcome {
    settled
        .claimed
        .into_iter()
        .next()
        .unwrap_or(ClaimOutcome::Empty {
            next_due_in: settled.next_due_in,
        })
}

/// What a subscription listens to.
enum Channel {
    Exact(String),
    Pattern(String),
}

/// One message received on a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub channel: String,
    pub payload: Vec<u8>,
}

/// A pub/sub subscription on a connection of its own (see
/// [`Queue::subscribe_wakeups`] and [`Queue::subscribe_releases`]).
pub struct Subscription {
    sink: PubSubSink,
    stream: PubSubStream,
    response_timeout: Duration,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}

impl Subscription {
    /// Waits for the next message. While none comes, checks every
    /// `check_every` that the connection still answers, because a
    /// subscription on a dead connection would otherwise wait in silence.
    /// An error means the subscription is broken: subscribe again.
    pub async fn next(&mut self, check_every: Duration) -> Result<Notice, QueueError> {
        loop {
            tokio::select! {
                message = self.stream.next() => {
                    return match message {
                        Some(msg) => Ok(Notice {
                            channel: msg.get_channel_name().to_owned(),
                            payload: msg.get_payload_bytes().to_owned(),
                        }),
                        None => Err(QueueError::Protocol {
                            op: "subscribe",
                            detail: "the subscription's connection closed".into(),
                        }),
                    };
                }
                () = tokio::time::sleep(check_every) => {
                    match tokio::time::timeout(self.response_timeout, self.sink.ping::<Value>()).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(source)) => return Err(QueueError::Redis { op: "subscribe", source }),
                        Err(_) => {
                            return Err(QueueError::Protocol {
                                op: "subscribe",
                                detail: format!("no answer to PING within {:?}", self.response_timeout),
                            })
                        }
                    }
                }
            }
        }
    }
}

fn completion(reply: &[String], op: &'static str) -> Result<Completion, QueueError> {
    match reply.first().map(String::as_str) {
        Some("done") => Ok(Completion::Done),
        Some("lost") => Ok(Completion::LeaseLost),
        Some("followup") => Ok(Completion::FollowUpAdded {
            job_id: parse_id(reply.get(1), op)?,
        }),
        other => Err(QueueError::Protocol {
            op,
            detail: format!("unknown outcome {other:?}"),
        }),
    }
}

/// Wraps a Redis error with the operation that failed.
pub(super) fn redis_error(op: &'static str) -> impl Fn(redis::RedisError) -> QueueError + Copy {
    move |source| QueueError::Redis { op, source }
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

pub(super) fn parse_id(value: Option<&String>, op: &'static str) -> Result<u64, QueueError> {
    value
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| QueueError::Protocol {
            op,
            detail: format!("job id {value:?} is not a number"),
        })
}

pub(super) fn millis(d: Duration) -> u64 {
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
    use crate::store::redact_url;

    #[test]
    fn urls_are_redacted() {
        assert_eq!(
            redact_url("redis://user:secret@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
    }
}
