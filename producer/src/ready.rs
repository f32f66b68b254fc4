//! Release announcements, received once per process and handed to every
//! waiting chat request.
//!
//! One pattern subscription (`{cq:<queue>}:released:*`) per [`Releases`]
//! instead of one per waiter: a chat backend may have thousands of requests
//! waiting at once, and Redis connections are not free. A background task
//! keeps the subscription alive (re-subscribing after a drop) and fans the
//! messages out on a broadcast channel; each waiter picks its entity's.

use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use crate::events::{CompactionEvent, InternalEvent, ReleaseSubscriptionFailed};
use crate::queue::Queue;

/// How many announcements a slow waiter may fall behind before it is told
/// it lagged (it then re-checks the database).
const CHANNEL_CAPACITY: usize = 1_024;

/// Liveness check of the subscription's connection while it is quiet: a
/// connection that went dead without closing (a frozen server, a dropped
/// network path) is found within this plus the response timeout.
const CHECK_EVERY: Duration = Duration::from_secs(5);

/// One announcement.
#[derive(Debug, Clone)]
pub(crate) enum Released {
    /// The entity (its member, `compact:{domain}:{entity_id}`) was released;
    /// the event, when it parsed.
    Entity {
        member: String,
        event: Option<CompactionEvent>,
    },
    /// The subscription was (re-)established: announcements may have been
    /// missed, every waiter should look again.
    Resync,
}

/// The process's subscription to release announcements.
#[derive(Debug)]
pub(crate) struct Releases {
    sender: broadcast::Sender<Released>,
    subscribed: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

impl Drop for Releases {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Releases {
    /// Starts listening for `queue`'s releases.
    pub(crate) fn start(queue: Queue) -> Releases {
        let (sender, _) = broadcast::channel(CHANNEL_CAPACITY);
        let (up, subscribed) = watch::channel(false);
        let task = tokio::spawn(listen(queue, sender.clone(), up));
        Releases {
            sender,
            subscribed,
            task,
        }
    }

    /// Waits (at most `limit`) until the subscription is established, so
    /// that a waiter that starts now cannot miss its release.
    pub(crate) async fn ready(&self, limit: Duration) -> bool {
        let mut subscribed = self.subscribed.clone();
        tokio::time::timeout(limit, subscribed.wait_for(|up| *up))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// A receiver of every announcement from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Released> {
        self.sender.subscribe()
    }
}

async fn listen(queue: Queue, sender: broadcast::Sender<Released>, up: watch::Sender<bool>) {
    let mut retry_in = backoff();
    loop {
        match queue.subscribe_releases().await {
            Ok(mut subscription) => {
                retry_in = backoff();
                let _ = up.send(true);
                let _ = sender.send(Released::Resync);
                loop {
                    match subscription.next(CHECK_EVERY).await {
                        Ok(notice) => {
                            let Some(member) = queue.keys().member_of_released(&notice.channel)
                            else {
                                continue;
                            };
                            let event = serde_json::from_slice(&notice.payload).ok();
                            // No receiver is fine: nobody is waiting.
                            let _ = sender.send(Released::Entity {
                                member: member.to_owned(),
                                event,
                            });
                        }
                        Err(error) => {
                            ReleaseSubscriptionFailed {
                                error: &error,
                                was_up: true,
                            }
                            .emit();
                            let _ = up.send(false);
                            break;
                        }
                    }
                }
            }
            Err(error) => {
                ReleaseSubscriptionFailed {
                    error: &error,
                    was_up: false,
                }
                .emit();
                tokio::time::sleep(retry_in.next().unwrap_or(Duration::from_millis(250))).await;
            }
        }
    }
}

/// 50 ms doubling to 250 ms, with jitter (so at most 0.5 s): waiters rely
/// on the subscription coming back right after Redis does (its
/// re-establishment makes every waiter look again), and an attempt against
/// a Redis that is down costs one refused connection.
fn backoff() -> impl Iterator<Item = Duration> {
    crate::backoff::reconnect(Duration::from_millis(50), Duration::from_millis(250))
}
