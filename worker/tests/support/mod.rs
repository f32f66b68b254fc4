//! Shared by the worker's integration tests: a queue of its own per test
//! (deleted on drop), a handler made of a closure, private Redis servers.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)] // test code

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use compactor_producer::queue::{JobState, Queue, QueueConfig, QueueName};
use compactor_shared::EntityKey;
use compactor_worker::runtime::{Job, JobError, JobHandler, RuntimeConfig};
use futures::future::BoxFuture;

pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

pub fn unique_name() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "wtest-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    )
}

/// A queue with a unique name; its keys are deleted on drop.
pub struct TestQueue {
    pub queue: Queue,
    pub url: String,
    prefix: String,
}

impl TestQueue {
    pub async fn new(config: QueueConfig) -> TestQueue {
        TestQueue::at(&redis_url(), config).await
    }

    pub async fn at(url: &str, config: QueueConfig) -> TestQueue {
        let config = QueueConfig {
            name: QueueName::parse(&unique_name()).unwrap(),
            ..config
        };
        let queue = Queue::connect(url, config).await.unwrap();
        let prefix = queue.keys().prefix().to_owned();
        TestQueue {
            queue,
            url: url.to_owned(),
            prefix,
        }
    }

    pub fn name(&self) -> &str {
        self.queue.config().name.as_str()
    }

    /// A plain connection for poking at the queue's keys.
    pub async fn raw(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }
}

impl Drop for TestQueue {
    fn drop(&mut self) {
        let Ok(client) = redis::Client::open(self.url.as_str()) else {
            return;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
            return;
        };
        // The prefix is `{cq:<validated name>}:`: no glob characters.
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}*", self.prefix))
            .query(&mut conn)
            .unwrap_or_default();
        if !keys.is_empty() {
            let _: Result<(), _> = redis::cmd("DEL").arg(keys).query(&mut conn);
        }
    }
}

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

/// Polls `check` every 20 ms until it is true; panics after `limit`.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {limit:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
