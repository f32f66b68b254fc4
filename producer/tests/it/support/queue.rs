//! `TestQueue`: a queue of a test's own on a Redis, its keys deleted on
//! drop. The worker's tests use this file too (by `#[path]`): one
//! `TestQueue` for the workspace, next to the `Queue` it wraps.

#![allow(dead_code, unreachable_pub)]

use compactor_producer::queue::{Queue, QueueConfig, QueueName};
use compactor_shared::EntityKey;
use compactor_testkit::{redis_url, unique_name};

/// A queue with a unique name on a Redis; its keys are deleted on drop, so
/// tests run in parallel and re-run.
pub struct TestQueue {
    pub queue: Queue,
    /// The Redis it is on.
    pub url: String,
}

impl TestQueue {
    /// With the default settings on the machine's Redis.
    pub async fn new() -> TestQueue {
        TestQueue::with(QueueConfig::default()).await
    }

    /// With `config` (its name replaced by a unique one) on the machine's
    /// Redis.
    pub async fn with(config: QueueConfig) -> TestQueue {
        TestQueue::at(&redis_url(), config).await
    }

    /// With `config` (its name replaced by a unique one) on the Redis at
    /// `url`.
    pub async fn at(url: &str, config: QueueConfig) -> TestQueue {
        let config = QueueConfig {
            name: QueueName::parse(&unique_name("test")).unwrap(),
            ..config
        };
        let queue = Queue::connect(url, config).await.unwrap();
        TestQueue {
            queue,
            url: url.to_owned(),
        }
    }

    pub fn name(&self) -> &str {
        self.queue.config().name.as_str()
    }

    /// A plain connection for poking at the queue's keys.
    pub async fn raw(&self) -> redis::aio::MultiplexedConnection {
        compactor_testkit::redis::connection(&self.url).await
    }
}

impl Drop for TestQueue {
    fn drop(&mut self) {
        compactor_testkit::redis::delete_prefix(&self.url, self.queue.keys().prefix());
    }
}

/// `n` distinct entities, `bench:e0` to `bench:e<n-1>` (for backlogs).
pub fn entity_keys(n: usize) -> Vec<EntityKey> {
    (0..n)
        .map(|i| EntityKey::parse("bench", &format!("e{i}")).unwrap())
        .collect()
}
