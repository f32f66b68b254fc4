//! The API a chat backend calls: store messages, finish a turn (which
//! requests compaction when the workstream is over its trigger), wait for a
//! running compaction, and build the next turn's context.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use compactor_producer::client::{ClientSettings, Compactor, IncomingMessage};
//! use compactor_shared::{EntityKey, Part, Role};
//!
//! let compactor = Compactor::connect(&ClientSettings::default()).await?;
//! let key = EntityKey::parse("chat", "7f3c")?;
//! compactor
//!     .append_messages(&key, vec![IncomingMessage::text(Role::User, "hello")])
//!     .await?;
//! compactor.finalize_turn(&key, None).await?;
//! // Before the next model call:
//! compactor.wait_until_ready(&key, Duration::from_secs(5)).await?;
//! let context = compactor.build_context(&key).await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use compactor_shared::config::EngineConfig;
use compactor_shared::context::{self, BuiltContext, ContextInput};
use compactor_shared::message::MAX_INPUT_DEPTH;
use compactor_shared::trigger::{Measure, Usage};
use compactor_shared::{CharEstimator, EntityKey, Message, MessageId, Part, Role, TokenEstimator};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use crate::events::CompactionEvent;
use crate::metrics::names;
use crate::queue::{
    EnqueueOutcome, JobState, Payload, PayloadError, Queue, QueueConfig, QueueError, Trigger,
};
use crate::ready::{Released, Releases};
use crate::settings::{DatabaseSettings, RedisSettings};
use crate::store::{
    HistoryWindow, Lease, NewMessage, SchemaStatus, Store, StoreError, WorkstreamRow,
};

/// Largest message accepted, as JSON (a bigger one is an error, not a
/// truncation: the caller decides what to drop).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Messages read per database round trip when building a context.
const PAGE_SIZE: u64 = 1_000;

/// The sections of the configuration a client needs (others are ignored).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClientSettings {
    pub engine: EngineConfig,
    pub queue: QueueConfig,
    pub database: DatabaseSettings,
    pub redis: RedisSettings,
}

/// Client failures.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error("invalid engine configuration: {0}")]
    Config(String),
    #[error(
        "the database schema is behind this build (pending: {pending}): run `compactor migrate`"
    )]
    SchemaBehind { pending: String },
    #[error(
        "the database schema is newer than this build (unknown: {unknown}): upgrade compactor"
    )]
    SchemaAhead { unknown: String },
    #[error("unknown workstream {0}")]
    UnknownWorkstream(EntityKey),
    #[error("message {index}: {reason}")]
    InvalidMessage { index: usize, reason: String },
    /// Manual-compaction instructions the queue would refuse (too long).
    #[error("instructions: {0}")]
    InvalidInstructions(#[source] PayloadError),
}

/// A message as app code hands it over (the store assigns its id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncomingMessage {
    pub role: Role,
    pub parts: Vec<Part>,
    /// Never compacted.
    #[serde(default)]
    pub pinned: bool,
}

impl IncomingMessage {
    /// A message with one text part.
    pub fn text(role: Role, text: impl Into<String>) -> IncomingMessage {
        IncomingMessage {
            role,
            parts: vec![Part::text(text)],
            pinned: false,
        }
    }
}

/// What `append_messages` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppendOutcome {
    pub ids: Vec<MessageId>,
    /// Estimated tokens of the un-compacted messages now.
    pub uncompacted_tokens: u64,
}

/// What `finalize_turn` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum TurnOutcome {
    /// Under the trigger: nothing requested.
    NotDue {
        current_tokens: u64,
        threshold_tokens: Option<u64>,
    },
    /// Over the trigger: compaction requested.
    Requested {
        current_tokens: u64,
        threshold_tokens: Option<u64>,
        enqueue: EnqueueOutcome,
    },
    /// Over the trigger, but the last compactions failed or did not help:
    /// automatic requests are held back until new messages or a manual
    /// request arrive.
    BreakerOpen {
        current_tokens: u64,
        consecutive_failures: u32,
    },
}

/// What `wait_until_ready` saw.
#[derive(Debug, Clone, PartialEq)]
pub enum Readiness {
    /// No compaction holds the workstream (any more).
    Ready {
        waited: Duration,
        /// What the compaction that just ended did, when one was waited for.
        event: Option<CompactionEvent>,
    },
    /// The timeout passed with a compaction still running: proceed with
    /// the context as it is.
    TimedOut { waited: Duration },
}

/// What [`Compactor::build_context`] returns: the context for the next
/// turn, and whether the un-compacted history it was built from was over
/// the load bound (`[database] context_max_messages` / `context_max_tokens`).
/// Serialized flat: the fields of [`BuiltContext`], then these.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnContext {
    #[serde(flatten)]
    pub context: BuiltContext,
    /// Older un-compacted messages were left out: the context holds the
    /// newest ones within the bound (its compactions are failing or far
    /// behind; see `/status`).
    pub truncated: bool,
    /// How many un-compacted messages were left out (0 unless truncated).
    pub omitted_messages: u64,
    /// Their estimated tokens.
    pub omitted_tokens: u64,
}

impl TurnContext {
    /// The context itself.
    pub fn into_inner(self) -> BuiltContext {
        self.context
    }
}

/// The context's fields read through: `turn.messages`, `turn.tokens`.
impl std::ops::Deref for TurnContext {
    type Target = BuiltContext;

    fn deref(&self) -> &BuiltContext {
        &self.context
    }
}

/// A workstream's compaction status (for operators).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkstreamStatus {
    pub domain: String,
    pub entity_id: String,
    /// A live entity lease: a compaction is running.
    pub lease: Option<Lease>,
    pub last_compacted_at: Option<DateTime<Utc>>,
    pub last_compacted_message_id: Option<MessageId>,
    pub compactions: i64,
    pub consecutive_failures: u32,
    pub breaker_open: bool,
    pub summary_tokens: u64,
    pub uncompacted_tokens: u64,
    /// The queue's view: waiting, running (with a follow-up pending), done,
    /// dead.
    pub job: Option<JobState>,
}

/// The client. Cheap to clone; clones share connections and the release
/// subscription.
#[derive(Clone, Debug)]
pub struct Compactor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    queue: Queue,
    engine: EngineConfig,
    estimator: CharEstimator,
    releases: Releases,
}

impl Compactor {
    /// Connects to the database (whose schema must be current) and to Redis.
    pub async fn connect(settings: &ClientSettings) -> Result<Compactor, ClientError> {
        settings
            .engine
            .validate()
            .map_err(|e| ClientError::Config(e.to_string()))?;
        settings.database.validate().map_err(ClientError::Config)?;
        let store = Store::connect_with(&settings.database).await?;
        match store.schema_status().await? {
            SchemaStatus::Current => {}
            SchemaStatus::Behind { pending } => {
                return Err(ClientError::SchemaBehind {
                    pending: pending.join(", "),
                })
            }
            SchemaStatus::Ahead { unknown } => {
                return Err(ClientError::SchemaAhead {
                    unknown: unknown.join(", "),
                })
            }
        }
        let queue = Queue::connect_with(&settings.redis, settings.queue.clone()).await?;
        Ok(Compactor::from_parts(store, queue, settings.engine.clone()).await)
    }

    /// A client over connections made elsewhere (the worker's, tests').
    pub async fn from_parts(store: Store, queue: Queue, engine: EngineConfig) -> Compactor {
        let releases = Releases::start(queue.clone());
        let limit = queue.config().connect_timeout;
        if !releases.ready(limit).await {
            tracing::warn!("release subscription not up yet: waiters fall back to lease deadlines");
        }
        Compactor {
            inner: Arc::new(Inner {
                estimator: CharEstimator::new(engine.chars_per_token),
                store,
                queue,
                engine,
                releases,
            }),
        }
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn queue(&self) -> &Queue {
        &self.inner.queue
    }

    pub fn engine(&self) -> &EngineConfig {
        &self.inner.engine
    }

    /// Appends messages to the workstream (created on first use), in order,
    /// in one transaction.
    pub async fn append_messages(
        &self,
        key: &EntityKey,
        messages: Vec<IncomingMessage>,
    ) -> Result<AppendOutcome, ClientError> {
        let mut rows = Vec::with_capacity(messages.len());
        for (index, m) in messages.into_iter().enumerate() {
            if m.parts.is_empty() {
                return Err(ClientError::InvalidMessage {
                    index,
                    reason: "a message needs at least one part".into(),
                });
            }
            let depth = m.parts.iter().map(Part::input_depth).max().unwrap_or(0);
            if depth > MAX_INPUT_DEPTH {
                return Err(ClientError::InvalidMessage {
                    index,
                    reason: format!(
                        "a tool call input nests {depth} levels deep, at most {MAX_INPUT_DEPTH} allowed"
                    ),
                });
            }
            let size = serde_json::to_vec(&m.parts).map_or(usize::MAX, |b| b.len());
            if size > MAX_MESSAGE_BYTES {
                return Err(ClientError::InvalidMessage {
                    index,
                    reason: format!("{size} bytes of parts, at most {MAX_MESSAGE_BYTES} allowed"),
                });
            }
            let message = Message {
                id: MessageId(0),
                role: m.role,
                parts: m.parts,
                pinned: m.pinned,
            };
            let token_estimate = self.inner.estimator.message_tokens(&message);
            rows.push(NewMessage {
                role: message.role,
                parts: message.parts,
                pinned: message.pinned,
                token_estimate,
            });
        }
        let appended = self.inner.store.append_messages(key, &rows).await?;
        Ok(AppendOutcome {
            ids: appended.ids,
            uncompacted_tokens: appended.uncompacted_tokens,
        })
    }

    /// Appends memory entries; returns how many are not folded yet.
    pub async fn append_memory_entries(
        &self,
        key: &EntityKey,
        entries: Vec<String>,
    ) -> Result<u64, ClientError> {
        Ok(self
            .inner
            .store
            .append_memory_entries(key, &entries)
            .await?)
    }

    /// Ends a turn: measures the workstream (the estimate, or `usage` the
    /// provider reported for the last step — never usage from before the
    /// latest compaction) and requests compaction when it is over the
    /// trigger.
    pub async fn finalize_turn(
        &self,
        key: &EntityKey,
        usage: Option<Usage>,
    ) -> Result<TurnOutcome, ClientError> {
        let ws = self.workstream(key).await?;
        let current = ws.summary_tokens.saturating_add(ws.uncompacted_tokens);
        let decision = self.inner.engine.trigger.evaluate(&Measure {
            estimated_tokens: current,
            reported: usage,
        });
        let outcome = if !decision.due {
            TurnOutcome::NotDue {
                current_tokens: decision.current_tokens,
                threshold_tokens: decision.threshold_tokens,
            }
        } else if ws.breaker_open() {
            metrics::counter!(names::BREAKER_SKIPS_TOTAL, "domain" => key.domain().to_owned())
                .increment(1);
            TurnOutcome::BreakerOpen {
                current_tokens: decision.current_tokens,
                consecutive_failures: ws.consecutive_failures,
            }
        } else {
            let enqueue = self
                .inner
                .queue
                .request_compaction(key, Trigger::Auto)
                .await?;
            TurnOutcome::Requested {
                current_tokens: decision.current_tokens,
                threshold_tokens: decision.threshold_tokens,
                enqueue,
            }
        };
        let label = match outcome {
            TurnOutcome::NotDue { .. } => "not_due",
            TurnOutcome::Requested { .. } => "requested",
            TurnOutcome::BreakerOpen { .. } => "breaker_open",
        };
        metrics::counter!(names::TURNS_TOTAL, "domain" => key.domain().to_owned(), "outcome" => label)
            .increment(1);
        Ok(outcome)
    }

    /// Requests a compaction now, whatever the size, with optional focus
    /// instructions for the summarizer. Closes the circuit breaker.
    pub async fn compact_now(
        &self,
        key: &EntityKey,
        instructions: Option<String>,
    ) -> Result<EnqueueOutcome, ClientError> {
        let instructions = instructions.filter(|i| !i.trim().is_empty());
        let trigger = Trigger::Manual { instructions };
        // The payload's own check, before anything changes: a request the
        // queue would refuse must not close the breaker first.
        Payload::new(key.clone(), trigger.clone()).map_err(ClientError::InvalidInstructions)?;
        let ws = self.workstream(key).await?;
        self.inner.store.reset_breaker(ws.id).await?;
        Ok(self.inner.queue.request_compaction(key, trigger).await?)
    }

    /// Returns when no compaction holds the workstream: at once when none
    /// does, else as soon as the running one ends (woken by its release
    /// announcement, or at its lease deadline should the worker have died),
    /// or after `timeout`, whichever comes first.
    pub async fn wait_until_ready(
        &self,
        key: &EntityKey,
        timeout: Duration,
    ) -> Result<Readiness, ClientError> {
        let started = Instant::now();
        let give_up = started + timeout;
        // Listen before looking, so a release between the two is not lost.
        let mut releases = self.inner.releases.subscribe();
        let member = key.job_key();
        let mut event = None;
        loop {
            let ws = self.workstream(key).await?;
            let now_ms = Utc::now().timestamp_millis();
            let Some(lease) = ws.lease_live(now_ms) else {
                let waited = started.elapsed();
                metrics::histogram!(names::LEASE_WAIT_SECONDS, "domain" => key.domain().to_owned(), "outcome" => "ready")
                    .record(waited.as_secs_f64());
                return Ok(Readiness::Ready { waited, event });
            };
            let lease_left_ms =
                u64::try_from(lease.deadline_ms.saturating_sub(now_ms)).unwrap_or(0);
            // A dead worker's lease just expires: look again right after.
            let wake_at = give_up.min(Instant::now() + Duration::from_millis(lease_left_ms + 5));
            loop {
                tokio::select! {
                    received = releases.recv() => match received {
                        Ok(Released::Entity { member: m, event: e }) if m == member => {
                            event = e;
                            break;
                        }
                        Ok(Released::Entity { .. }) => continue,
                        Ok(Released::Resync) | Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => {
                            tokio::time::sleep_until(wake_at).await;
                            break;
                        }
                    },
                    () = tokio::time::sleep_until(wake_at) => break,
                }
            }
            if Instant::now() >= give_up {
                // One last look: it may have been released at the very end.
                let ws = self.workstream(key).await?;
                if ws.lease_live(Utc::now().timestamp_millis()).is_none() {
                    continue;
                }
                let waited = started.elapsed();
                metrics::histogram!(names::LEASE_WAIT_SECONDS, "domain" => key.domain().to_owned(), "outcome" => "timeout")
                    .record(waited.as_secs_f64());
                metrics::counter!(names::LEASE_WAIT_TIMEOUTS_TOTAL, "domain" => key.domain().to_owned())
                    .increment(1);
                return Ok(Readiness::TimedOut { waited });
            }
        }
    }

    /// What to send the model next: the summary, state, exact values and
    /// memory as the first message, then the un-compacted messages (tool
    /// halves whose partner is gone turned into text; the summary shrunk if
    /// the whole would overflow the window).
    ///
    /// The un-compacted messages loaded are bounded (`[database]
    /// context_max_messages` / `context_max_tokens`): past the bound only
    /// the newest are loaded, and the result says so
    /// ([`TurnContext::truncated`], with what was left out) — never a
    /// silent cut, and never of the newest messages.
    pub async fn build_context(&self, key: &EntityKey) -> Result<TurnContext, ClientError> {
        let ws = self.workstream(key).await?;
        let (messages, window) = self.bounded_history(key, &ws).await?;
        let entries: Vec<String> = self
            .inner
            .store
            .unfolded_memory_entries(ws.id)
            .await?
            .into_iter()
            .map(|e| e.content)
            .collect();
        let engine = &self.inner.engine;
        let context = context::build(
            &ContextInput {
                summary: ws.summary.as_ref(),
                state: &ws.state,
                memory_block_summary: ws.memory_block_summary.as_deref(),
                memory_entries: &entries,
                messages: &messages,
                just_auto_compacted: ws.just_auto_compacted,
                context_window: engine.trigger.context_window(),
            },
            &engine.context,
            &self.inner.estimator,
        );
        Ok(TurnContext {
            context,
            truncated: window.truncated(),
            omitted_messages: window.omitted_messages,
            omitted_tokens: window.omitted_tokens,
        })
    }

    /// The un-compacted messages of `ws` that the store's
    /// [`HistoryBound`](crate::store::HistoryBound) lets a context load, and
    /// what it left out.
    ///
    /// Fast path, one round trip for up to a thousand messages: when the
    /// workstream's own count of un-compacted tokens (the one its trigger
    /// reads) is within `max_tokens`, pages are read from the oldest, as
    /// long as they stay within `max_messages`. Past either, the exact
    /// window is computed first ([`Store::uncompacted_window`]: ids and
    /// estimates, newest first) and only it is loaded.
    async fn bounded_history(
        &self,
        key: &EntityKey,
        ws: &WorkstreamRow,
    ) -> Result<(Vec<Message>, HistoryWindow), ClientError> {
        let bound = self.inner.store.history_bound();
        if ws.uncompacted_tokens <= bound.max_tokens {
            if let Some(messages) = self.pages(ws.id, None, Some(bound.max_messages)).await? {
                let window = HistoryWindow {
                    first: messages.first().map(|m| m.id),
                    messages: messages.len() as u64,
                    omitted_messages: 0,
                    omitted_tokens: 0,
                };
                return Ok((messages, window));
            }
        }
        let window = self.inner.store.uncompacted_window(ws.id).await?;
        if window.truncated() {
            tracing::warn!(
                domain = key.domain(),
                omitted_messages = window.omitted_messages,
                omitted_tokens = window.omitted_tokens,
                loaded_messages = window.messages,
                "un-compacted history over [database] context_max_*: only its newest messages are in the context"
            );
        }
        // From the message before the window's first.
        let after = window.first.map(|first| MessageId(first.0 - 1));
        let messages = self.pages(ws.id, after, None).await?.unwrap_or_default();
        Ok((messages, window))
    }

    /// The un-compacted messages of workstream `ws_id` after `after`, read
    /// in pages; `None` as soon as there are more than `cap`.
    async fn pages(
        &self,
        ws_id: i64,
        mut after: Option<MessageId>,
        cap: Option<u64>,
    ) -> Result<Option<Vec<Message>>, ClientError> {
        let mut messages: Vec<Message> = Vec::new();
        loop {
            // Never more than one message past the cap.
            let room = cap.map_or(PAGE_SIZE, |c| (c + 1).saturating_sub(messages.len() as u64));
            let limit = PAGE_SIZE.min(room).max(1);
            let page = self
                .inner
                .store
                .uncompacted_page(ws_id, after, limit)
                .await?;
            after = page.last().map(|m| m.id);
            let full = page.len() as u64 == limit;
            messages.extend(page);
            if cap.is_some_and(|c| messages.len() as u64 > c) {
                return Ok(None);
            }
            if !full {
                return Ok(Some(messages));
            }
        }
    }

    /// The workstream's compaction status and its job's state in the queue.
    pub async fn status(&self, key: &EntityKey) -> Result<WorkstreamStatus, ClientError> {
        let ws = self.workstream(key).await?;
        let job = self.inner.queue.job_state(key).await?;
        let now_ms = Utc::now().timestamp_millis();
        Ok(WorkstreamStatus {
            domain: key.domain().to_owned(),
            entity_id: key.entity_id().to_owned(),
            lease: ws.lease_live(now_ms).cloned(),
            last_compacted_at: ws.last_compacted_at,
            last_compacted_message_id: ws.last_compacted_message_id,
            compactions: ws.compactions,
            consecutive_failures: ws.consecutive_failures,
            breaker_open: ws.breaker_open(),
            summary_tokens: ws.summary_tokens,
            uncompacted_tokens: ws.uncompacted_tokens,
            job,
        })
    }

    async fn workstream(&self, key: &EntityKey) -> Result<WorkstreamRow, ClientError> {
        self.inner
            .store
            .workstream(key)
            .await?
            .ok_or_else(|| ClientError::UnknownWorkstream(key.clone()))
    }
}
