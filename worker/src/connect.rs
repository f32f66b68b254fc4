//! Connecting to the queue at start-up, waiting for Redis if it is not up
//! yet (a worker started before Redis, or during a Redis restart, should
//! come up on its own rather than crash-loop). What waiting cannot mend is
//! not waited for: a URL that can never work, and credentials Redis
//! refuses ([`is_auth_failure`]).

use std::time::Duration;

use compactor_producer::queue::{Queue, QueueConfig, QueueError};
use compactor_producer::settings::RedisSettings;
use tracing::warn;

/// Connects as `redis` says (one server, or a Redis Cluster through its
/// seed nodes), retrying with backoff (250 ms doubling to 10 s) until it
/// succeeds or `give_up` resolves; then the last error is returned. A URL
/// that can never work (several URLs without `cluster = true`) and refused
/// credentials fail at once.
pub async fn connect_with_retry<G>(
    redis: &RedisSettings,
    config: QueueConfig,
    give_up: G,
) -> Result<Queue, QueueError>
where
    G: std::future::Future<Output = ()>,
{
    let mut delays =
        compactor_producer::backoff::reconnect(Duration::from_millis(250), Duration::from_secs(10));
    tokio::pin!(give_up);
    loop {
        match Queue::connect_with(redis, config.clone()).await {
            Ok(queue) => return Ok(queue),
            Err(error @ (QueueError::Url { .. } | QueueError::Config(_))) => return Err(error),
            Err(error) if is_auth_failure(&error) => return Err(error),
            Err(error) => {
                let delay = delays.next().unwrap_or(Duration::from_secs(10));
                warn!(
                    %error,
                    retry_in_ms = crate::telemetry::millis(delay),
                    "Redis not reachable yet"
                );
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = &mut give_up => return Err(error),
                }
            }
        }
    }
}

/// Whether Redis refused the credentials: a wrong password or user
/// (`WRONGPASS`, or the client's "authentication failed"), or none given to
/// a server that requires one (`NOAUTH`, or — when the first command is
/// larger than Redis lets an unauthenticated client send, as loading the
/// queue's scripts is — "Protocol error: unauthenticated bulk length").
/// Retrying cannot mend these; the worker stops with the error instead of
/// waiting for ever.
pub fn is_auth_failure(error: &QueueError) -> bool {
    let (QueueError::Connect { source, .. } | QueueError::Redis { source, .. }) = error else {
        return false;
    };
    source.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(source.code(), Some("NOAUTH" | "WRONGPASS"))
        || source
            .to_string()
            .contains("Protocol error: unauthenticated")
}
