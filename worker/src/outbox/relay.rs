//! The relay: a task of each worker that moves events out of the outbox.
//!
//! Each round it
//! 1. claims events not relayed yet, adds them to the Redis Stream (when
//!    `[events] stream` is on) and marks them relayed, creating one
//!    delivery per configured webhook in the same transaction;
//! 2. claims due deliveries of the configured webhooks and posts each
//!    event, signed; a 2xx marks it delivered, anything else (or no answer
//!    within the webhook's timeout) schedules the next attempt with
//!    exponential backoff, until `max_attempts`, then it is `failed`;
//! 3. now and then, prunes events delivered everywhere and older than the
//!    retention, and samples the backlog gauges.
//!
//! It runs beside the compaction jobs and shares nothing with them but the
//! database: a webhook that is down slows only its own deliveries. It
//! sleeps `poll_interval` between rounds unless woken (a commit of this
//! worker wakes it) or a round found a full batch.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use compactor_producer::queue::{Queue, StreamEntry};
use compactor_producer::store::{DeliveryResult, DueDelivery, Store};
use futures::stream::{self, StreamExt};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::{EventsSettings, WebhookSecret};
use super::sign::signature;
use crate::events::{
    DeliveryAttempted, EventsRelayed, InternalEvent, OutboxSampled, RelayStepFailed,
};

/// Events relayed per round.
const RELAY_BATCH: u64 = 100;
/// Deliveries claimed per round…
const DELIVERY_BATCH: u64 = 32;
/// …of which this many are in flight at once.
const DELIVERY_CONCURRENCY: usize = 8;
/// How long a claim on an event holds before another relay may take it
/// (this one died between claiming and relaying).
const EVENT_CLAIM: Duration = Duration::from_secs(30);
/// Claims on deliveries hold this much longer than the longest timeout.
const DELIVERY_CLAIM_MARGIN: Duration = Duration::from_secs(30);
/// How often the backlog gauges are sampled and old events pruned.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(10);
/// The longest error text recorded on a delivery.
const ERROR_CHARS: usize = 300;

/// One configured webhook, ready to post to.
#[derive(Debug, Clone)]
pub struct Webhook {
    pub name: String,
    pub url: String,
    pub secret: WebhookSecret,
    pub timeout: Duration,
}

/// The relay of one worker (see the module docs).
pub struct Relay {
    store: Store,
    queue: Queue,
    settings: EventsSettings,
    webhooks: Arc<[Webhook]>,
    /// The webhooks' names, as stored on their deliveries.
    endpoints: Vec<String>,
    http: reqwest::Client,
    /// Unique per process start: the claims this relay holds.
    owner: String,
    wake: Arc<Notify>,
}

impl Relay {
    pub fn new(
        store: Store,
        queue: Queue,
        settings: EventsSettings,
        webhooks: Vec<Webhook>,
        owner: String,
        wake: Arc<Notify>,
    ) -> Relay {
        let endpoints = webhooks.iter().map(|w| w.name.clone()).collect();
        // No redirects: a webhook that moved must be reconfigured, not
        // followed (the signature is for the configured receiver).
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Relay {
            store,
            queue,
            settings,
            webhooks: webhooks.into(),
            endpoints,
            http,
            owner,
            wake,
        }
    }

    /// Runs rounds until `shutdown` is cancelled (a round in progress
    /// finishes first: its deliveries are recorded, not left claimed).
    pub async fn run(self, shutdown: CancellationToken) {
        let mut housekeeping_at = Instant::now();
        loop {
            let busy = self.round().await;
            if Instant::now() >= housekeeping_at {
                self.housekeeping().await;
                housekeeping_at = Instant::now() + HOUSEKEEPING_EVERY;
            }
            if shutdown.is_cancelled() {
                return;
            }
            if busy {
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep(self.settings.poll_interval) => {}
                () = self.wake.notified() => {}
                () = shutdown.cancelled() => return,
            }
        }
    }

    /// One round: relay, then deliver. `true` when either found a full
    /// batch (more may be waiting: go again at once).
    pub async fn round(&self) -> bool {
        let relayed = self.relay().await;
        let delivered = self.deliver().await;
        relayed >= RELAY_BATCH as usize || delivered >= DELIVERY_BATCH as usize
    }

    /// Step 1: events to the stream, deliveries created. Returns how many
    /// events were claimed.
    async fn relay(&self) -> usize {
        let claimed = match self
            .store
            .claim_unrelayed(&self.owner, RELAY_BATCH, EVENT_CLAIM)
            .await
        {
            Ok(claimed) => claimed,
            Err(error) => {
                RelayStepFailed {
                    step: "claim events",
                    error: &error,
                }
                .emit();
                return 0;
            }
        };
        if claimed.is_empty() {
            return 0;
        }
        if self.settings.stream {
            let bodies: Vec<String> = claimed.iter().map(|u| u.event.to_json()).collect();
            let entries: Vec<StreamEntry<'_>> = claimed
                .iter()
                .zip(&bodies)
                .map(|(u, json)| StreamEntry {
                    id: &u.event.id,
                    kind: &u.event.kind,
                    json,
                })
                .collect();
            if let Err(error) = self
                .queue
                .add_events(&entries, self.settings.stream_maxlen)
                .await
            {
                // Still claimed by this relay: the next round tries again.
                RelayStepFailed {
                    step: "add to the stream",
                    error: &error,
                }
                .emit();
                return 0;
            }
        }
        // The whole batch in one transaction: a compaction writes two
        // events, and a busy worker's relay finds dozens at a time.
        let row_ids: Vec<i64> = claimed.iter().map(|u| u.row_id).collect();
        let relayed = match self
            .store
            .mark_many_relayed(&row_ids, &self.endpoints)
            .await
        {
            Ok(marked) => marked,
            Err(error) => {
                RelayStepFailed {
                    step: "mark relayed",
                    error: &error,
                }
                .emit();
                0
            }
        };
        EventsRelayed {
            queue: self.queue.config().name.as_str(),
            streamed: if self.settings.stream { relayed } else { 0 },
        }
        .emit();
        claimed.len()
    }

    /// Step 2: due deliveries posted. Returns how many were claimed.
    async fn deliver(&self) -> usize {
        if self.webhooks.is_empty() {
            return 0;
        }
        let longest = self
            .webhooks
            .iter()
            .map(|w| w.timeout)
            .max()
            .unwrap_or_default();
        let due = match self
            .store
            .claim_due_deliveries(
                &self.owner,
                &self.endpoints,
                DELIVERY_BATCH,
                longest + DELIVERY_CLAIM_MARGIN,
            )
            .await
        {
            Ok(due) => due,
            Err(error) => {
                RelayStepFailed {
                    step: "claim deliveries",
                    error: &error,
                }
                .emit();
                return 0;
            }
        };
        let claimed = due.len();
        stream::iter(due)
            .for_each_concurrent(DELIVERY_CONCURRENCY, |delivery| async move {
                self.deliver_one(delivery).await;
            })
            .await;
        claimed
    }

    async fn deliver_one(&self, delivery: DueDelivery) {
        let Some(hook) = self.webhooks.iter().find(|w| w.name == delivery.endpoint) else {
            return;
        };
        let attempt = delivery.attempts.saturating_add(1);
        let (status, error) = self.post(hook, &delivery).await;
        let result = match (status, error) {
            (Some(status), None) => DeliveryResult::Delivered { status },
            (status, error) => {
                let retry_at_ms = (attempt < self.settings.max_attempts).then(|| {
                    Utc::now().timestamp_millis().saturating_add(
                        i64::try_from(backoff(&self.settings, attempt).as_millis())
                            .unwrap_or(i64::MAX),
                    )
                });
                DeliveryResult::Failed {
                    status,
                    error: error.unwrap_or_default(),
                    retry_at_ms,
                }
            }
        };
        DeliveryAttempted {
            endpoint: &hook.name,
            event_id: &delivery.event.id,
            attempt,
            result: &result,
        }
        .emit();
        if let Err(error) = self
            .store
            .finish_delivery(delivery.id, &self.owner, &result)
            .await
        {
            // The claim expires and the delivery is tried again: at least
            // once, never lost.
            RelayStepFailed {
                step: "record a delivery",
                error: &error,
            }
            .emit();
        }
    }

    /// Posts the event; `(Some(status), None)` on a 2xx, else the status
    /// (if one came) and why it failed. Errors never name the URL.
    async fn post(&self, hook: &Webhook, delivery: &DueDelivery) -> (Option<u16>, Option<String>) {
        let body = delivery.event.to_json();
        let timestamp = Utc::now().timestamp();
        let signature = signature(hook.secret.key(), &delivery.event.id, timestamp, &body);
        let sent = self
            .http
            .post(&hook.url)
            .timeout(hook.timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &delivery.event.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await;
        match sent {
            Ok(response) => {
                let status = response.status();
                if status.is_success() {
                    (Some(status.as_u16()), None)
                } else {
                    (Some(status.as_u16()), Some(format!("HTTP {status}")))
                }
            }
            Err(error) => {
                let error = error.without_url();
                let what = if error.is_timeout() {
                    format!("no answer within {:?}", hook.timeout)
                } else {
                    error.to_string()
                };
                (None, Some(what.chars().take(ERROR_CHARS).collect()))
            }
        }
    }

    /// Step 3: prune, and sample the gauges.
    async fn housekeeping(&self) {
        let retention_ms = i64::try_from(self.settings.retention.as_millis()).unwrap_or(i64::MAX);
        let before = Utc::now().timestamp_millis().saturating_sub(retention_ms);
        if let Err(error) = self.store.prune_events(before).await {
            RelayStepFailed {
                step: "prune",
                error: &error,
            }
            .emit();
        }
        match self.store.outbox_backlog().await {
            Ok(backlog) => OutboxSampled {
                queue: self.queue.config().name.as_str(),
                backlog,
                now_ms: Utc::now().timestamp_millis(),
            }
            .emit(),
            Err(error) => RelayStepFailed {
                step: "sample the backlog",
                error: &error,
            }
            .emit(),
        }
    }
}

/// The delay after failed attempt number `attempt` (1 after the first):
/// the base delay doubled per attempt, capped.
fn backoff(settings: &EventsSettings, attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(1).min(30);
    settings
        .retry_base_delay
        .saturating_mul(1u32 << doublings)
        .min(settings.retry_max_delay)
}

#[cfg(test)]
mod tests {
    use super::backoff;

    #[test]
    fn backoff_doubles_from_the_base_up_to_the_cap() {
        let settings = super::EventsSettings {
            retry_base_delay: std::time::Duration::from_secs(2),
            retry_max_delay: std::time::Duration::from_secs(10),
            ..super::EventsSettings::default()
        };
        let delays: Vec<u64> = (1..=5)
            .map(|attempt| backoff(&settings, attempt).as_secs())
            .collect();
        assert_eq!(delays, [2, 4, 8, 10, 10]);
        assert_eq!(backoff(&settings, 200).as_secs(), 10);
    }
}
