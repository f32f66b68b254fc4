//! Wake-ups for an idle worker: a task that keeps a subscription to the
//! queue's wake-up channel and turns every announcement into a permit on
//! [`Shared::wake`], which the fetcher waits on between claims.
//!
//! Why pub/sub rather than a blocking pop on a token list: a token list
//! needs each worker to hold a `BLPOP` open only while it is idle, and a
//! `BLPOP` abandoned when work arrives another way stays blocked on the
//! server, swallowing the next token meant for an idle worker. A
//! subscription can simply be ignored while busy; a missed announcement
//! (reconnect) costs at most one check interval, because the fetcher never
//! waits longer than that without claiming.

use std::sync::Arc;

use compactor_producer::events::catalogue::QueueOp;
use tracing::{debug, info};

use super::retry::reconnect_backoff;
use super::Shared;

/// Runs until the runtime stops.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut retry_in = reconnect_backoff();
    let mut connected_before = false;
    loop {
        let subscribed = tokio::select! {
            s = shared.queue.subscribe_wakeups() => s,
            () = shared.stop.cancelled() => return,
        };
        match subscribed {
            Ok(mut subscription) => {
                retry_in = reconnect_backoff();
                if connected_before {
                    info!("wake-up subscription restored");
                }
                connected_before = true;
                // Announcements made while unsubscribed are lost: look once.
                shared.wake.notify_one();
                loop {
                    tokio::select! {
                        woken = subscription.next(shared.config.check_interval) => match woken {
                            Ok(_) => shared.wake.notify_one(),
                            Err(error) => {
                                shared.count_error(QueueOp::Subscribe, &error);
                                break;
                            }
                        },
                        () = shared.stop.cancelled() => return,
                    }
                }
            }
            Err(error) => {
                shared.count_error(QueueOp::Subscribe, &error);
                let delay = retry_in.next().unwrap_or(std::time::Duration::from_secs(5));
                debug!(
                    retry_in_ms = crate::telemetry::millis(delay),
                    "wake-up subscription retry"
                );
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = shared.stop.cancelled() => return,
                }
            }
        }
    }
}
