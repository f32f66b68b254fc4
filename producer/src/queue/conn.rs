//! The queue's connections: one Redis server or a Redis Cluster.
//!
//! Commands go through [`Conn`], which is either a [`ConnectionManager`]
//! (one server) or a cluster connection, behind one
//! [`redis::aio::ConnectionLike`]: every queue operation has a single code
//! path whatever the deployment, so the cluster cannot drift into a
//! second, less tested implementation. It works on a cluster because every
//! key of a queue shares the hash tag `{cq:<queue>}`: each script call and
//! each pipeline addresses one slot, and the cluster client sends it to the
//! node that serves that slot (following `MOVED`/`ASK` redirections).
//!
//! Subscriptions (wake-ups, release announcements) use classic pub/sub on a
//! dedicated connection to one node: [`Endpoints::pubsub`] lists the nodes
//! to try, in order. In a cluster, a classic `PUBLISH` (also one made
//! inside a script) is broadcast over the cluster bus to every node, so a
//! subscriber on any node sees every announcement, whichever node owns the
//! queue's slot.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::config::QueueConfig;
use super::error::QueueError;
use crate::redact::{redact_url, split_url_list};
use crate::settings::RedisSettings;

/// Attempts of one cluster request (redirections, reconnections and
/// retries after a failover all count), all within `response_timeout`.
const CLUSTER_RETRIES: u32 = 4;

/// The command connection of a queue. Cheap to clone; clones share the
/// underlying multiplexed connection(s).
#[derive(Clone)]
pub(crate) enum Conn {
    /// One server; reconnects by itself after a restart or a network drop.
    Single(ConnectionManager),
    /// A Redis Cluster: one connection per node, routed by slot,
    /// reconnecting and refreshing its slot map by itself.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            Conn::Cluster(conn) => conn.get_db(),
        }
    }
}

/// A node a subscription may connect to.
pub(crate) struct PubSubNode {
    pub(crate) client: redis::Client,
    /// Its URL, redacted (for errors and logs).
    pub(crate) target: String,
}

/// Where a queue connects, parsed from the settings.
pub(crate) struct Endpoints {
    /// Every URL, redacted and comma-joined (for errors and logs).
    pub(crate) target: String,
    urls: Vec<String>,
    cluster: bool,
    /// The nodes subscriptions try, in order: the server, or every seed.
    pub(crate) pubsub: Vec<PubSubNode>,
}

impl Endpoints {
    /// One server at `url`.
    pub(crate) fn single(url: &str) -> Result<Endpoints, QueueError> {
        Endpoints::new(vec![url.trim()], false)
    }

    /// What `[redis]` says: one server, or the seed nodes of a cluster.
    pub(crate) fn from_settings(settings: &RedisSettings) -> Result<Endpoints, QueueError> {
        settings.validate().map_err(|problem| QueueError::Url {
            target: settings.url.redacted(),
            problem,
        })?;
        Endpoints::new(split_url_list(settings.url.expose()), settings.cluster)
    }

    fn new(urls: Vec<&str>, cluster: bool) -> Result<Endpoints, QueueError> {
        let target = urls
            .iter()
            .map(|u| redact_url(u))
            .collect::<Vec<_>>()
            .join(",");
        if urls.is_empty() || urls.iter().any(|u| u.is_empty()) {
            return Err(QueueError::Url {
                target,
                problem: "no Redis URL given",
            });
        }
        let pubsub = urls
            .iter()
            .map(|url| {
                let target = redact_url(url);
                match redis::Client::open(*url) {
                    Ok(client) => Ok(PubSubNode { client, target }),
                    // A URL that does not parse never will: not worth a
                    // retry (the caller's reconnect loop gives up at once).
                    Err(source) if source.kind() == redis::ErrorKind::InvalidClientConfig => {
                        Err(QueueError::Url {
                            target,
                            problem: "not a Redis URL \
                                      (redis://[user:password@]host[:port][/db], or rediss://)",
                        })
                    }
                    Err(source) => Err(QueueError::Connect { target, source }),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Endpoints {
            target,
            urls: urls.into_iter().map(str::to_owned).collect(),
            cluster,
            pubsub,
        })
    }

    /// Opens the command connection, within the configured connect and
    /// response timeouts.
    pub(crate) async fn connect(&self, config: &QueueConfig) -> Result<Conn, QueueError> {
        let connect_err = |source| QueueError::Connect {
            target: self.target.clone(),
            source,
        };
        if !self.cluster {
            let node = self.pubsub.first().ok_or_else(|| QueueError::Url {
                target: self.target.clone(),
                problem: "no Redis URL given",
            })?;
            let conn = node
                .client
                .get_connection_manager_with_config(manager_config(config))
                .await
                .map_err(connect_err)?;
            return Ok(Conn::Single(conn));
        }
        let client = ClusterClientBuilder::new(self.urls.iter().map(String::as_str))
            .connection_timeout(config.connect_timeout)
            .response_timeout(config.response_timeout)
            .retries(CLUSTER_RETRIES)
            .min_retry_wait(50)
            .max_retry_wait(1_000)
            .build()
            .map_err(connect_err)?;
        // Connecting means reaching a seed and reading the slot map from
        // it, then connecting to every node: bound the whole, so that a
        // cluster that accepts connections but never answers cannot hang
        // start-up.
        let bound = config.connect_timeout + config.response_timeout;
        let conn = tokio::time::timeout(bound, client.get_async_connection())
            .await
            .map_err(|_| {
                connect_err(redis::RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("the cluster did not answer within {bound:?}"),
                )))
            })?
            .map_err(connect_err)?;
        Ok(Conn::Cluster(conn))
    }
}

// Nagle stays on (redis-rs's default), unlike the PostgreSQL connections
// (see vendor/README.md): a Redis request is one write, answered at once,
// and the answer carries the ACK, so nothing waits on a delayed ACK; with
// `TCP_NODELAY` two slots' settle calls on the multiplexed connection went
// out as separate segments and the queue benchmark's `complete, claim` at
// concurrency 2 fell from ~10.6k to ~6.1k ops/s (2026-11-27).

/// Connection settings of a single-server connection: bounded connect
/// time and response time, and a few quick reconnect attempts per failure
/// (callers retry on their own schedule beyond that).
fn manager_config(config: &QueueConfig) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(Some(config.response_timeout))
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_urls_need_cluster_mode() {
        let mut settings = RedisSettings::cluster(["redis://a:1", "redis://:pw@b:2"]);
        let endpoints = Endpoints::from_settings(&settings).unwrap();
        assert_eq!(endpoints.pubsub.len(), 2);
        assert_eq!(endpoints.target, "redis://a:1,redis://:***@b:2");
        settings.cluster = false;
        let err = Endpoints::from_settings(&settings).err().unwrap();
        assert!(err.to_string().contains("redis.cluster"), "{err}");
        assert!(!err.to_string().contains("pw"), "{err}");
        let err = Endpoints::from_settings(&RedisSettings::single(" ")).err();
        assert!(matches!(err, Some(QueueError::Url { .. })));
    }
}
