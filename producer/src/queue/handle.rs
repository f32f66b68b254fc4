//! [`Queue`], the handle every operation hangs off: connecting (one server
//! or a cluster), loading the scripts, and `PING`. The operations
//! themselves are `impl Queue` blocks in the module of each operation.

use std::sync::Arc;

use super::config::QueueConfig;
use super::conn::{Conn, Endpoints, PubSubNode};
use super::error::{redis_error, QueueError};
use super::keys::Keys;
use super::scripts::Scripts;
use crate::settings::RedisSettings;

/// A handle on one queue. Cheap to clone; clones share one multiplexed
/// connection (one per node on a Redis Cluster), which reconnects by itself
/// after Redis restarts or the network drops (the commands in flight at
/// that moment fail).
#[derive(Clone)]
pub struct Queue {
    pub(super) keys: Keys,
    pub(super) config: QueueConfig,
    /// Nodes a subscription may use, tried in order.
    pub(super) pubsub: Arc<[PubSubNode]>,
    pub(super) conn: Conn,
    pub(super) scripts: Arc<Scripts>,
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
            scripts: Arc::new(Scripts::new()),
        };
        // Every script on the server (see [`Scripts::load`]); a call that
        // later finds its code gone loads it again itself.
        queue.scripts.load(&queue.conn).await?;
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
}
