//! The worker runtime: apalis (`Monitor`, `WorkerBuilder`, tower layers)
//! driving the project's Redis queue.
//!
//! - [`backend`]: an apalis backend that claims a job only when a slot is
//!   free and, while the queue is empty, waits for a wake-up (no polling).
//! - [`handoff`]: jobs claimed for slots about to free, waiting for them.
//! - [`wake`]: the subscription that wakes an idle worker when a job is
//!   announced.
//! - [`layers`]: the service apalis calls for each job, as tower layers
//!   around the handler: acknowledgement (complete, retry with backoff,
//!   dead-letter, hand back), metrics, the shutdown grace period, the lock
//!   duration, the lease heartbeat, panic capture.
//! - [`attempt`]: what passes through those layers, and the innermost
//!   service, which runs the [`JobHandler`].
//! - [`lease`]: the one heartbeat loop, for the job's lease and the
//!   compaction's entity lease alike.
//! - [`settle`]: completions of many jobs, and claims for the slots they
//!   freed, settled in one round trip.
//! - [`retry`]: backoff (attempts, queue steps, reconnects) and
//!   `Retry-After`.
//! - [`sweep`]: recovery of expired leases and queue-depth gauges.
//! - [`registry`]: this process's entry in the queue's worker registry
//!   (heartbeat), so chat requests know a worker is live to run their jobs.
//!
//! Shutdown: when the future given to [`Runtime::run`] resolves, workers
//! stop claiming; in-flight jobs have `shutdown_grace` to finish, then they
//! are cancelled and handed back to the queue (their attempt not counted).

mod attempt;
mod backend;
pub mod handler;
mod handoff;
mod layers;
pub(crate) mod lease;
mod registry;
pub mod retry;
mod settle;
mod sweep;
mod wake;

use std::future::Future;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::{Monitor, WorkerBuilder, WorkerBuilderExt};
use compactor_producer::events::catalogue::QueueOp;
use compactor_producer::queue::{Queue, QueueError};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::events::{InternalEvent, LeaseLost, QueueOpFailed, UnusableEntryDeadLettered};

pub use handler::{Job, JobError, JobHandler};
pub use retry::RetryPolicy;

use backend::QueueBackend;
use handoff::Handoff;

/// Settings of the worker runtime: the `[worker]` section of the
/// configuration (the queue's own are in
/// [`compactor_producer::queue::QueueConfig`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Worker name; each process start adds a unique suffix, so a restarted
    /// worker with the same name never collides with its former self.
    pub name: String,
    /// Jobs run at once by this process.
    pub concurrency: usize,
    /// How often a running job's lease is renewed (well below the lease TTL).
    #[serde(with = "humantime_serde")]
    pub renew_interval: Duration,
    /// Longest one attempt may hold its entity (the seed's lock duration);
    /// longer attempts are cancelled and count as a retryable failure.
    #[serde(with = "humantime_serde")]
    pub lock_duration: Duration,
    /// Longest idle wait between claims (the fallback should a wake-up be
    /// missed), the period of the recovery sweep (a crashed worker's job is
    /// back within lease TTL + this), of the wake-up connection's liveness
    /// check, and of the worker registry's heartbeat (at least every
    /// second; a worker that stops beating drops out of the registry after
    /// three intervals, or a lease TTL if that is longer).
    #[serde(with = "humantime_serde")]
    pub check_interval: Duration,
    /// How long in-flight jobs may run on after a shutdown signal before
    /// they are handed back.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
    /// Expired leases handled per recovery call.
    pub recovery_batch: u32,
    /// Lease the next job in the round trip that acknowledges one.
    pub claim_on_complete: bool,
    /// Most jobs leased ahead of free slots, in the same round trips,
    /// while attempts are short (the median of the last 15 under 5 ms):
    /// as many as the slots finish in one settle round trip, up to this.
    /// A slot that frees then starts its next job without waiting for
    /// Redis, and each round trip settles a batch. A job claimed ahead that
    /// finds no free slot within 25 ms is handed back to the queue. Long
    /// jobs (compactions) are never claimed ahead. 0 disables.
    pub claim_ahead: usize,
    /// Retries of failed attempts.
    pub retry: RetryPolicy,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            name: "compactor-worker".to_owned(),
            concurrency: 2,
            renew_interval: Duration::from_secs(10),
            lock_duration: Duration::from_secs(300),
            check_interval: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(30),
            recovery_batch: 100,
            claim_on_complete: true,
            claim_ahead: 64,
            retry: RetryPolicy::default(),
        }
    }
}

/// Why a runtime configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid worker setting {field}: {problem}")]
pub struct RuntimeConfigError {
    pub field: &'static str,
    pub problem: String,
}

impl RuntimeConfig {
    /// Checks the settings against each other and the queue's lease TTL.
    pub fn validate(&self, lease_ttl: Duration) -> Result<(), RuntimeConfigError> {
        let bad = |field, problem: String| Err(RuntimeConfigError { field, problem });
        if self.concurrency == 0 {
            return bad("concurrency", "must be at least 1".into());
        }
        if self.renew_interval.is_zero() || self.renew_interval * 2 > lease_ttl {
            return bad(
                "renew_interval",
                format!(
                    "{:?} must be positive and at most half the lease TTL ({lease_ttl:?}), \
                     so one missed renewal does not lose the lease",
                    self.renew_interval
                ),
            );
        }
        if self.lock_duration < self.renew_interval {
            return bad(
                "lock_duration",
                "must be at least the renew interval".into(),
            );
        }
        if self.check_interval.is_zero() {
            return bad("check_interval", "must be positive".into());
        }
        if self.retry.max_attempts == 0 {
            return bad("retry.max_attempts", "must be at least 1".into());
        }
        if self.claim_ahead > compactor_producer::queue::MAX_SETTLE_BATCH {
            return bad(
                "claim_ahead",
                format!(
                    "must be at most {}",
                    compactor_producer::queue::MAX_SETTLE_BATCH
                ),
            );
        }
        if self.recovery_batch == 0 {
            return bad("recovery_batch", "must be at least 1".into());
        }
        if self.name.is_empty() || self.name.len() > 64 {
            return bad("name", "must be 1-64 characters".into());
        }
        Ok(())
    }
}

/// What every worker of a runtime shares.
pub(crate) struct Shared {
    queue: Queue,
    config: RuntimeConfig,
    /// `<name>-<pid>-<start>`: unique per process start.
    worker_id: String,
    /// Cancelled when shutdown begins: claim nothing more.
    stop: CancellationToken,
    /// Cancelled when the grace period ends: hand in-flight jobs back.
    hand_back: CancellationToken,
    handoff: Handoff,
    /// A permit here means "claim again": a job was announced on the
    /// queue's channel ([`wake`]) or handed off ([`settle`]). One stored
    /// permit covers any number of announcements; the fetcher is its only
    /// waiter.
    wake: Notify,
    /// Succeeded jobs being acknowledged together.
    acks: settle::Acks,
    /// Attempts whose handler is running now.
    running: AtomicUsize,
    /// Told about each job the failure path dead-lettered.
    on_dead_letter: Option<DeadLetterHook>,
}

impl Shared {
    fn queue_label(&self) -> String {
        self.queue.config().name.as_str().to_owned()
    }

    fn count_error(&self, op: QueueOp, error: &QueueError) {
        QueueOpFailed {
            queue: &self.queue_label(),
            op,
            error,
        }
        .emit();
    }

    /// A lease this worker held is gone (`what`: when it noticed): another
    /// worker may run the job now.
    fn lease_lost(&self, what: &'static str) {
        LeaseLost {
            queue: &self.queue_label(),
            what,
        }
        .emit();
    }

    fn count_unusable(&self, member: &str, error: &str) {
        UnusableEntryDeadLettered {
            queue: &self.queue_label(),
            entry: member,
            error,
        }
        .emit();
    }
}

/// Every `op` label Redis failures of the runtime are counted under
/// (`compactor_queue_errors_total`): the catalogue's [`QueueOp`], which
/// `count_error` takes, so the two cannot disagree.
pub const QUEUE_ERROR_OPS: [&str; QueueOp::COUNT] = QueueOp::LABELS;

/// A unique worker identity for this process start.
fn worker_id(name: &str) -> String {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    format!("{name}-{}-{started:x}", std::process::id())
}

/// Called after the queue dead-lettered a job: one that failed (its last
/// attempt, or a permanent error) or one the sweep found stalled past
/// `max_stalls`. The worker writes `compaction.dead_lettered` to the event
/// outbox here.
pub type DeadLetterHook =
    Arc<dyn Fn(&DeadLettered) -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// A job the queue dead-lettered, as a [`DeadLetterHook`] is told of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLettered {
    pub key: compactor_shared::EntityKey,
    pub job_id: u64,
    /// Attempts made (a stalled job's count excludes the stalls).
    pub attempt: u32,
    /// The trigger's label ([`compactor_shared::payload::Trigger::label`]).
    pub trigger: &'static str,
    /// The reason the queue recorded.
    pub reason: String,
}

/// Runtime failures.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Config(#[from] RuntimeConfigError),
    #[error("worker runtime failed: {0}")]
    Monitor(String),
}

/// The worker runtime of one process.
pub struct Runtime<H> {
    queue: Queue,
    config: RuntimeConfig,
    handler: Arc<H>,
    on_dead_letter: Option<DeadLetterHook>,
}

impl<H> std::fmt::Debug for Runtime<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("queue", &self.queue)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<H: JobHandler> Runtime<H> {
    pub fn new(
        queue: Queue,
        config: RuntimeConfig,
        handler: H,
    ) -> Result<Runtime<H>, RuntimeError> {
        config.validate(queue.config().lease_ttl)?;
        Ok(Runtime {
            queue,
            config,
            handler: Arc::new(handler),
            on_dead_letter: None,
        })
    }

    /// Calls `hook` after each job the failure path dead-letters.
    pub fn with_dead_letter_hook(mut self, hook: DeadLetterHook) -> Runtime<H> {
        self.on_dead_letter = Some(hook);
        self
    }

    /// Runs jobs until `shutdown` resolves, then stops gracefully (see the
    /// module docs). Returns once every job is finished or handed back.
    pub async fn run<S>(self, shutdown: S) -> Result<(), RuntimeError>
    where
        S: Future<Output = ()> + Send + 'static,
    {
        let id = worker_id(&self.config.name);
        let grace = self.config.shutdown_grace;
        let concurrency = self.config.concurrency;
        let shared = Arc::new(Shared {
            queue: self.queue,
            config: self.config,
            worker_id: id.clone(),
            stop: CancellationToken::new(),
            hand_back: CancellationToken::new(),
            handoff: Handoff::default(),
            wake: Notify::new(),
            acks: settle::Acks::default(),
            running: AtomicUsize::new(0),
            on_dead_letter: self.on_dead_letter,
        });
        // Live in the registry before the first claim: a chat request that
        // waits on a job from now on counts on this worker.
        let me = registry::registration(&shared);
        registry::register(&shared, &me).await;
        info!(worker = %id, queue = %shared.queue_label(), concurrency, "worker started");
        let heartbeat = tokio::spawn(registry::run(Arc::clone(&shared), me));
        let sweep = tokio::spawn(sweep::run(Arc::clone(&shared)));
        let wake = tokio::spawn(wake::run(Arc::clone(&shared)));
        let expire = tokio::spawn(handoff::expire(Arc::clone(&shared)));

        let signal = {
            let shared = Arc::clone(&shared);
            async move {
                shutdown.await;
                info!(
                    grace_ms = crate::telemetry::millis(grace),
                    "shutting down: no new jobs; in-flight jobs may finish"
                );
                shared.stop.cancel();
                let hand_back = shared.hand_back.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(grace).await;
                    hand_back.cancel();
                });
                Ok(())
            }
        };
        let factory = {
            let shared = Arc::clone(&shared);
            let handler = Arc::clone(&self.handler);
            move |restarts: usize| {
                WorkerBuilder::new(format!("{}-{restarts}", shared.worker_id))
                    .backend(QueueBackend::new(Arc::clone(&shared)))
                    .concurrency(concurrency)
                    .build(layers::attempt_service(&shared, Arc::clone(&handler)))
            }
        };
        let result = Monitor::new()
            .register(factory)
            .run_with_signal(signal)
            .await;
        shared.stop.cancel();
        shared.hand_back.cancel();
        // Every job has finished: settle the last completions.
        shared.acks.drain().await;
        for (task, name) in [
            (heartbeat, "registry heartbeat"),
            (sweep, "recovery sweep"),
            (wake, "wake-up"),
            (expire, "claim-ahead expiry"),
        ] {
            if let Err(error) = task.await {
                warn!(%error, task = name, "runtime task ended abnormally");
            }
        }
        // Jobs claimed for slots freed just as shutdown began, or ahead.
        handoff::release_unstarted(&shared, shared.handoff.drain()).await;
        info!(worker = %id, "worker stopped");
        result.map_err(|e| RuntimeError::Monitor(e.to_string()))
    }
}
