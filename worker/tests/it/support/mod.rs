//! Shared by the worker's integration tests, built on `compactor-testkit`:
//! a queue of its own per test (the producer's tests' `TestQueue`), short
//! timings, a handler made of a closure, requesting a job and waiting for
//! its state.

// The end-to-end tests include this module too (by `#[path]`) and use
// part of it.
#![allow(dead_code, unused_imports, unreachable_pub)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use compactor_producer::queue::{EnqueueOutcome, JobState, Queue, QueueConfig, Trigger};
use compactor_shared::EntityKey;
use compactor_worker::runtime::{Job, JobError, JobHandler, Runtime, RuntimeConfig, RuntimeError};
use futures::future::BoxFuture;
use tokio::sync::oneshot;

pub use compactor_testkit::eventually;
pub use queue::TestQueue;

#[path = "../../../../producer/tests/it/support/queue.rs"]
mod queue;

/// Short timings so the lifecycle shows within a test's patience.
pub fn fast_queue() -> QueueConfig {
    QueueConfig {
        lease_ttl: Duration::from_millis(1_000),
        ..QueueConfig::default()
    }
}

pub fn fast_runtime() -> RuntimeConfig {
    let mut config = RuntimeConfig {
        name: "test".to_owned(),
        renew_interval: Duration::from_millis(200),
        check_interval: Duration::from_millis(200),
        shutdown_grace: Duration::from_secs(5),
        ..RuntimeConfig::default()
    };
    config.retry.base_delay = Duration::from_millis(100);
    config
}

pub fn key(entity: &str) -> EntityKey {
    EntityKey::parse("chat", entity).unwrap()
}

/// A handler made of a closure.
pub struct FnHandler(
    pub Arc<dyn Fn(Job) -> BoxFuture<'static, Result<(), JobError>> + Send + Sync>,
);

impl FnHandler {
    pub fn new<F, Fut>(f: F) -> FnHandler
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), JobError>> + Send + 'static,
    {
        FnHandler(Arc::new(move |job| Box::pin(f(job))))
    }
}

impl JobHandler for FnHandler {
    fn run(&self, job: Job) -> impl std::future::Future<Output = Result<(), JobError>> + Send {
        (self.0)(job)
    }
}

/// A handler whose first run fails permanently ("unknown workstream") and
/// every later one succeeds, counting its runs in `runs`: a dead letter
/// that the operator's retry then clears, on one Redis or a cluster.
pub fn fails_permanently_once(runs: &Arc<AtomicU32>) -> FnHandler {
    let runs = runs.clone();
    FnHandler::new(move |_job| {
        let runs = runs.clone();
        async move {
            if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(JobError::permanent("unknown workstream"))
            } else {
                Ok(())
            }
        }
    })
}

/// A runtime running in the background; `stop` shuts it down gracefully.
pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), RuntimeError>>,
}

impl Running {
    pub fn start(queue: &Queue, config: RuntimeConfig, handler: FnHandler) -> Running {
        let (tx, rx) = oneshot::channel::<()>();
        let runtime = Runtime::new(queue.clone(), config, handler).unwrap();
        let task = tokio::spawn(runtime.run(async move {
            let _ = rx.await;
        }));
        Running {
            stop: Some(tx),
            task,
        }
    }

    /// Sends the shutdown signal without waiting for the runtime to stop.
    pub fn signal(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }

    pub async fn stop(mut self) {
        self.signal();
        tokio::time::timeout(Duration::from_secs(30), &mut self.task)
            .await
            .expect("the runtime stops")
            .expect("the runtime task does not panic")
            .expect("the runtime stops cleanly");
    }
}

/// The operator's retry of the dead letter `entry` (of `key`'s job, whose
/// handler is [`fails_permanently_once`]) once the cause is fixed: the job
/// is queued again, runs a second time and succeeds, and no dead letter is
/// left.
pub async fn retry_the_dead_letter(queue: &Queue, entry: &str, key: &EntityKey, runs: &AtomicU32) {
    let retried = queue.retry_dead(entry).await.expect("the retry is queued");
    assert!(matches!(retried, Some(EnqueueOutcome::Added { .. })));
    until_done(queue, key, "the retried job ran").await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let dead = queue
        .dead_letters(10)
        .await
        .expect("dead letters are listed");
    assert!(dead.is_empty());
}

/// Requests a compaction of `key` as an automatic trigger would: how a
/// test gives the worker a job.
pub async fn request(queue: &Queue, key: &EntityKey) -> EnqueueOutcome {
    queue
        .request_compaction(key, Trigger::Auto)
        .await
        .expect("the request is queued")
}

/// `key`'s job state as the queue has it now.
pub async fn state(queue: &Queue, key: &EntityKey) -> Option<JobState> {
    queue.job_state(key).await.expect("the job state is read")
}

/// Requests a compaction of each entity in turn and waits (5 s each) until
/// that very job is done before the next: each request finds the worker
/// idle, so only a wake-up, not a poll, can be this fast. `what` names
/// the wait when it fails.
pub async fn enqueue_each_until_done(queue: &Queue, entities: &[&str], what: &str) {
    compactor_testkit::one_at_a_time(
        entities.iter().copied(),
        what,
        Duration::from_secs(5),
        |entity| async move {
            let outcome = request(queue, &key(entity)).await;
            let EnqueueOutcome::Added { job_id } = outcome else {
                panic!("{outcome:?}")
            };
            job_id
        },
        |entity, job_id| async move {
            state(queue, &key(entity)).await == Some(JobState::Done { job_id })
        },
    )
    .await;
}

/// Waits until `key`'s job is done (its latest run completed).
pub async fn until_done(queue: &Queue, key: &EntityKey, what: &str) {
    until_state(queue, key, what, |s| {
        matches!(s, Some(JobState::Done { .. }))
    })
    .await;
}

/// Waits until `key`'s latest job was dead-lettered.
pub async fn until_dead(queue: &Queue, key: &EntityKey, what: &str) {
    until_state(queue, key, what, |s| {
        matches!(s, Some(JobState::Dead { .. }))
    })
    .await;
}

async fn until_state(
    queue: &Queue,
    key: &EntityKey,
    what: &str,
    wanted: impl Fn(&Option<JobState>) -> bool,
) {
    eventually(what, Duration::from_secs(10), || async {
        wanted(&queue.job_state(key).await.unwrap())
    })
    .await;
}
