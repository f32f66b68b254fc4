//! Pub/sub: idle workers wait on the queue's wake-up channel instead of
//! polling, and chat-side waiters learn that an entity's compaction ended
//! from its release channel. A subscription holds a connection of its own
//! (a subscribed connection can send nothing else), and checks with `PING`
//! that the connection is alive, because a subscription on a dead
//! connection would otherwise wait in silence.

use std::time::Duration;

use compactor_shared::EntityKey;
use futures::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use redis::Value;

use super::conn::PubSubNode;
use super::error::{redis_error, QueueError};
use super::handle::Queue;
use crate::events::CompactionEvent;

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

impl Queue {
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
        event: &CompactionEvent,
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
}
