//! The API a chat backend calls: store messages, finish a turn (which
//! requests compaction when the workstream is over its trigger), wait for
//! the requested compaction, and build the next turn's context.
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
//! // Before the next model call: wait (bounded) for the compaction the turn
//! // requested, if any; the answer says what happened.
//! compactor.wait_until_ready(&key, Duration::from_secs(5)).await?;
//! let context = compactor.build_context(&key).await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use compactor_shared::config::EngineConfig;
use compactor_shared::context::BuiltContext;
use compactor_shared::message::MAX_INPUT_DEPTH;
use compactor_shared::trigger::{Measure, Usage};
use compactor_shared::{CharEstimator, EntityKey, Message, MessageId, Part, Role, TokenEstimator};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use crate::events::{
    CommitSeenWithoutQueue, EventNotWritten, InternalEvent, QueueUnreadableWhileWaiting,
    ReleaseSubscriptionPending, TurnFinalized, WaitEnded,
};
use crate::events::{CompactionEvent, EventOutcome};
use crate::queue::{
    EnqueueOutcome, JobStage, JobState, Payload, PayloadError, Queue, QueueConfig, QueueError,
    Trigger,
};
use crate::ready::{Released, Releases};
use crate::settings::{DatabaseSettings, RedisSettings};
use crate::store::{
    EventKind, Lease, NewEvent, NewMessage, RunOutcome, SchemaStatus, Store, StoreError,
    WorkstreamRow, CLIENT_ID_MAX_BYTES,
};

mod branches;
mod byte_lru;
mod cancel;
mod kept_compacted;
mod kept_tails;
mod named;
mod turn_context;

pub use branches::{BranchLeft, HeadOutcome};
pub use cancel::JobCancelled;
pub use named::Named;

/// Largest message accepted, as JSON (a bigger one is an error, not a
/// truncation: the caller decides what to drop).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How long a waiter goes without looking again while nothing is
/// announced: the safety net under the announcements (a worker that died
/// while the job was queued, an announcement lost with a connection).
/// Coarse on purpose: announcements wake waiters, this only bounds how
/// stale an answer can get when they cannot.
pub const WAIT_RECHECK_EVERY: Duration = Duration::from_secs(2);

/// How often a waiter looks again while Redis does not answer. Besides, it
/// looks the moment the release subscription is back (Redis returned), so
/// this only bounds the wait when the subscription is slower to return.
pub const WAIT_OUTAGE_RECHECK_EVERY: Duration = Duration::from_millis(500);

/// While the queue does not answer a waiter (Redis frozen), the waiter
/// reads the workstream's row after this, then at most every
/// [`WAIT_ROW_POLL_MAX`] with as much again of jitter: a commit that lands
/// during a Redis outage ends the wait within a second, not when Redis
/// returns.
pub const WAIT_ROW_POLL_MIN: Duration = Duration::from_millis(200);
/// See [`WAIT_ROW_POLL_MIN`].
pub const WAIT_ROW_POLL_MAX: Duration = Duration::from_millis(400);

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
    /// A client id (given, or derived from an idempotency key) names a
    /// stored message with other content; nothing was stored.
    #[error("message {index}: client id {client_id:?} already names a message with other content")]
    ClientIdConflict { index: usize, client_id: String },
    /// Manual-compaction instructions the queue would refuse (too long).
    #[error("instructions: {0}")]
    InvalidInstructions(#[source] PayloadError),
    /// A context could not be written as JSON (a bug: every stored value
    /// can be).
    #[error("the context could not be written as JSON: {0}")]
    Encode(#[source] serde_json::Error),
}

/// A message as app code hands it over (the store assigns its id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IncomingMessage {
    pub role: Role,
    #[cfg_attr(feature = "openapi", schema(min_items = 1))]
    pub parts: Vec<Part>,
    /// Never compacted.
    #[serde(default)]
    pub pinned: bool,
    /// The client's own id for the message (1-255 bytes, no control
    /// characters), unique within the workstream: an append that carries
    /// a client id the workstream stores already does not store that
    /// message again and answers with the stored message's id. Lets a
    /// client retry an append safely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 255,
            pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"
        )
    )]
    pub client_id: Option<String>,
}

impl IncomingMessage {
    /// A message of `parts`, not pinned, without a client id.
    pub fn new(role: Role, parts: Vec<Part>) -> IncomingMessage {
        IncomingMessage {
            role,
            parts,
            pinned: false,
            client_id: None,
        }
    }

    /// A message with one text part.
    pub fn text(role: Role, text: impl Into<String>) -> IncomingMessage {
        IncomingMessage::new(role, vec![Part::text(text)])
    }

    /// The same message with the client's id for it.
    pub fn with_client_id(mut self, client_id: impl Into<String>) -> IncomingMessage {
        self.client_id = Some(client_id.into());
        self
    }
}

/// Longest idempotency key, in bytes.
pub const IDEMPOTENCY_KEY_MAX_BYTES: usize = 200;

/// A key that makes one append request safe to retry (the
/// `Idempotency-Key` header of the HTTP API): the `i`-th message of the
/// request gets the client id `<key>#<i>` unless it has its own, so every
/// try of the same request names the same messages. 1-200 bytes of
/// printable ASCII (a UUID fits).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

/// Why an idempotency key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid idempotency key: use 1-{IDEMPOTENCY_KEY_MAX_BYTES} bytes of printable ASCII")]
pub struct IdempotencyKeyError;

impl IdempotencyKey {
    pub fn parse(key: &str) -> Result<IdempotencyKey, IdempotencyKeyError> {
        let ok = !key.is_empty()
            && key.len() <= IDEMPOTENCY_KEY_MAX_BYTES
            && key.bytes().all(|b| (0x20..0x7f).contains(&b));
        if ok {
            Ok(IdempotencyKey(key.to_owned()))
        } else {
            Err(IdempotencyKeyError)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The client id of the `index`-th message of a request with this key.
    pub fn client_id(&self, index: usize) -> String {
        format!("{}#{index}", self.0)
    }
}

/// What `append_messages` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppendOutcome {
    /// The messages' ids, in the order given (for a message stored by an
    /// earlier try, the id it was stored under then).
    pub ids: Vec<MessageId>,
    /// Estimated tokens of the un-compacted messages now.
    pub uncompacted_tokens: u64,
    /// How many of the messages an earlier try had stored already (by
    /// client id); they were not stored again.
    pub already_stored: usize,
}

/// What `finalize_turn` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
        /// `auto`, or `reactive` when the context would not fit the
        /// model's window at all (it then runs ahead of automatic
        /// requests).
        trigger: String,
        enqueue: EnqueueOutcome,
    },
    /// Over the trigger, but the last compactions failed or did not help:
    /// automatic requests are held back until new messages or a manual
    /// request arrive.
    BreakerOpen {
        current_tokens: u64,
        consecutive_failures: u32,
    },
    /// Over the trigger, but the request could not be queued: Redis did
    /// not answer. The turn itself is stored; the context stays
    /// uncompacted until a later turn (or a worker's reconciliation sweep)
    /// requests the compaction again.
    Unavailable {
        current_tokens: u64,
        threshold_tokens: Option<u64>,
        /// What failed (the operation and the Redis error; never a URL).
        reason: String,
    },
}

impl TurnOutcome {
    /// Bounded label for metrics and output.
    pub fn label(&self) -> &'static str {
        self.result().as_str()
    }
}

/// What a wait covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum WaitMode {
    /// The whole requested compaction: queued, running, and backing off
    /// between attempts (and a follow-up requested meanwhile).
    #[default]
    Requested,
    /// Only a compaction that holds the workstream now (its entity lease):
    /// a queued job, or one backing off, is not waited for.
    Running,
}

impl WaitMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitMode::Requested => "requested",
            WaitMode::Running => "running",
        }
    }
}

/// Where a requested compaction stood when a wait gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum WaitPhase {
    /// Waiting for a worker to take it.
    Queued,
    /// Waiting, and the queue or the workstream's domain is paused: it
    /// runs once an operator resumes it (`compactor queue resume`).
    Paused,
    /// A worker runs it.
    Running,
    /// An attempt failed; waiting for the retry delay to pass.
    BackingOff,
}

/// What a wait saw. Serialized (HTTP `/wait`, `compactor wait --json`) as
/// `{"outcome": "ready" | "compacted" | "timed_out" | "no_live_worker",
/// "waited_ms": …, …}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Readiness {
    /// Nothing is requested or pending: build the context. `event`: what
    /// the last run that ended during the wait did (skipped, failed,
    /// conflict), if one did and it did not commit.
    Ready {
        #[serde(rename = "waited_ms", serialize_with = "as_millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        waited: Duration,
        event: Option<CompactionEvent>,
    },
    /// The compaction waited for committed (and nothing is pending now):
    /// build the context, it is compacted. `event`: what it did.
    Compacted {
        #[serde(rename = "waited_ms", serialize_with = "as_millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        waited: Duration,
        event: CompactionEvent,
    },
    /// The timeout passed with the compaction still pending, in `phase`:
    /// proceed with the context as it is. `job_id`: the queue's job, when
    /// there is one (a lease can be held without).
    TimedOut {
        #[serde(rename = "waited_ms", serialize_with = "as_millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        waited: Duration,
        phase: WaitPhase,
        job_id: Option<u64>,
    },
    /// A compaction is requested, but no worker is live to run it: answered
    /// at once instead of waiting out the timeout. Proceed with the context
    /// as it is.
    NoLiveWorker {
        #[serde(rename = "waited_ms", serialize_with = "as_millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        waited: Duration,
        phase: WaitPhase,
        job_id: u64,
    },
}

impl Readiness {
    /// `ready`, `compacted`, `timed_out` or `no_live_worker`.
    pub fn label(&self) -> &'static str {
        match self {
            Readiness::Ready { .. } => "ready",
            Readiness::Compacted { .. } => "compacted",
            Readiness::TimedOut { .. } => "timed_out",
            Readiness::NoLiveWorker { .. } => "no_live_worker",
        }
    }

    /// How long the wait took.
    pub fn waited(&self) -> Duration {
        match self {
            Readiness::Ready { waited, .. }
            | Readiness::Compacted { waited, .. }
            | Readiness::TimedOut { waited, .. }
            | Readiness::NoLiveWorker { waited, .. } => *waited,
        }
    }

    /// Whether nothing is pending any more (`ready` or `compacted`): the
    /// context is as compacted as it will get for this turn.
    pub fn is_settled(&self) -> bool {
        matches!(self, Readiness::Ready { .. } | Readiness::Compacted { .. })
    }
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What one look of a wait saw first: the queue's answer, or a commit in
/// the workstream's row while the queue had not answered yet.
enum Looked {
    Queue(Result<Option<Pending>, ClientError>),
    /// Boxed: a row is far larger than the queue's answer.
    Committed(Box<WorkstreamRow>),
}

/// A compaction still pending, as one look saw it.
struct Pending {
    phase: WaitPhase,
    job_id: Option<u64>,
    /// No worker is live to move it on.
    no_live_worker: bool,
    /// When to look again at the latest, announcement or not (a lease
    /// deadline: its holder may have died).
    look_again_at: Option<Instant>,
}

/// What the announcements told a waiter so far.
#[derive(Default)]
struct Heard {
    /// The last run that ended.
    last: Option<CompactionEvent>,
    /// The last run that committed.
    committed: Option<CompactionEvent>,
}

/// What `Compactor::build_context` returns: the context for the next
/// turn, and whether the un-compacted history it was built from was over
/// the load bound (`[database] context_max_messages` / `context_max_tokens`).
/// Serialized flat: the fields of `BuiltContext`, then these.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// Un-compacted histories kept between context reads.
    tails: kept_tails::HistoryCache,
    /// Summaries and states kept between context reads.
    compacted: kept_compacted::CompactedCache,
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
            ReleaseSubscriptionPending { waited: limit }.emit();
        }
        Compactor {
            inner: Arc::new(Inner {
                estimator: CharEstimator::new(engine.chars_per_token),
                queue,
                tails: kept_tails::HistoryCache::new(store.context_cache_bytes()),
                compacted: kept_compacted::CompactedCache::new(store.context_cache_bytes() / 4),
                store,
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
    /// in one transaction. A message whose client id the workstream stores
    /// already is not stored again (its stored id is returned); the same
    /// client id with other content is a [`ClientError::ClientIdConflict`].
    pub async fn append_messages(
        &self,
        key: &EntityKey,
        messages: Vec<IncomingMessage>,
    ) -> Result<AppendOutcome, ClientError> {
        self.append_messages_at(key, None, messages).await
    }

    /// [`Compactor::append_messages`] after `parent` (`branches` module).
    async fn append_messages_at(
        &self,
        key: &EntityKey,
        parent: Option<MessageId>,
        messages: Vec<IncomingMessage>,
    ) -> Result<AppendOutcome, ClientError> {
        let mut rows = Vec::with_capacity(messages.len());
        for (index, m) in messages.into_iter().enumerate() {
            if let Some(client_id) = &m.client_id {
                check_client_id(client_id)
                    .map_err(|reason| ClientError::InvalidMessage { index, reason })?;
            }
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
                client_id: m.client_id,
            });
        }
        let appended = match self
            .inner
            .store
            .append_messages_at(key, parent, &rows)
            .await
        {
            Ok(appended) => appended,
            Err(StoreError::ClientIdConflict {
                client_id, index, ..
            }) => return Err(ClientError::ClientIdConflict { index, client_id }),
            Err(e) => return Err(e.into()),
        };
        self.request_branch_summary(key, appended.abandoned).await;
        Ok(AppendOutcome {
            ids: appended.ids,
            uncompacted_tokens: appended.uncompacted_tokens,
            already_stored: appended.already_stored,
        })
    }

    /// [`Compactor::append_messages`], safe to retry with the same `key`:
    /// each message without a client id of its own is named by its place
    /// in the request (`<key>#<index>`), so a retry stores nothing twice
    /// and answers with the same ids.
    pub async fn append_messages_once(
        &self,
        key: &EntityKey,
        idempotency_key: &IdempotencyKey,
        messages: Vec<IncomingMessage>,
    ) -> Result<AppendOutcome, ClientError> {
        let messages = messages
            .into_iter()
            .enumerate()
            .map(|(i, mut m)| {
                if m.client_id.is_none() {
                    m.client_id = Some(idempotency_key.client_id(i));
                }
                m
            })
            .collect();
        self.append_messages(key, messages).await
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
    /// trigger: [`Trigger::Reactive`] when the context it would build no
    /// longer fits the model's window at all (see [`turn_trigger`]), so it
    /// runs ahead of automatic requests, else [`Trigger::Auto`].
    pub async fn finalize_turn(
        &self,
        key: &EntityKey,
        usage: Option<Usage>,
    ) -> Result<TurnOutcome, ClientError> {
        let outcome = self.request_if_due(key, usage).await?;
        TurnFinalized {
            key,
            outcome: &outcome,
        }
        .emit();
        Ok(outcome)
    }

    /// What [`Compactor::finalize_turn`] does, without counting a turn:
    /// for a caller that must make sure a compaction is requested before
    /// a turn ends (the proxy, facing a context over the window).
    pub async fn request_if_due(
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
            TurnOutcome::BreakerOpen {
                current_tokens: decision.current_tokens,
                consecutive_failures: ws.consecutive_failures,
            }
        } else {
            let trigger = turn_trigger(current, self.inner.engine.trigger.context_window());
            let label = trigger.label();
            match request_recorded(&self.inner.store, &self.inner.queue, key, &trigger).await {
                Ok(enqueue) => TurnOutcome::Requested {
                    current_tokens: decision.current_tokens,
                    threshold_tokens: decision.threshold_tokens,
                    trigger: label.to_owned(),
                    enqueue,
                },
                // The turn is stored either way: say that the request could
                // not be queued rather than fail what did succeed.
                Err(error) if error.is_unavailable() => TurnOutcome::Unavailable {
                    current_tokens: decision.current_tokens,
                    threshold_tokens: decision.threshold_tokens,
                    reason: error.to_string(),
                },
                Err(error) => return Err(error.into()),
            }
        };
        Ok(outcome)
    }

    /// Requests a compaction now, whatever the size, as
    /// [`Compactor::compact_now`] does (ahead of automatic ones), for a
    /// context the model refused as longer than its window whatever the
    /// estimate said. Unlike `compact_now` it leaves an open circuit
    /// breaker open (`None`: nothing requested), so a workstream whose
    /// compactions keep failing is not retried on every refusal.
    pub async fn compact_refused(
        &self,
        key: &EntityKey,
    ) -> Result<Option<EnqueueOutcome>, ClientError> {
        let ws = self.workstream(key).await?;
        if ws.breaker_open() {
            return Ok(None);
        }
        let trigger = Trigger::Manual { instructions: None };
        let outcome = request_recorded(&self.inner.store, &self.inner.queue, key, &trigger).await?;
        Ok(Some(outcome))
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
        let outcome = request_recorded(&self.inner.store, &self.inner.queue, key, &trigger).await?;
        Ok(outcome)
    }

    /// [`Compactor::wait`] for the whole requested compaction
    /// ([`WaitMode::Requested`]).
    pub async fn wait_until_ready(
        &self,
        key: &EntityKey,
        timeout: Duration,
    ) -> Result<Readiness, ClientError> {
        self.wait(key, WaitMode::Requested, timeout).await
    }

    /// Waits, at most `timeout`, until nothing `mode` covers is pending for
    /// the workstream, and says what it waited for (see [`Readiness`]).
    ///
    /// Woken by announcements, not by polling: the worker announces the end
    /// of every run that held the workstream (with what it did), and the
    /// queue announces every job that settles (finished, retried later or
    /// dead-lettered). Besides, a waiter looks again at the deadline of a
    /// lease (its holder may have died) and every [`WAIT_RECHECK_EVERY`]
    /// (a lost announcement, a worker gone while the job was queued).
    ///
    /// A Redis outage does not end the wait: while the queue cannot be
    /// read, the waiter holds on (looking again every
    /// [`WAIT_OUTAGE_RECHECK_EVERY`]), and looks the moment the release
    /// subscription is re-established, so what changed while Redis was
    /// down (announcements published then are lost) is seen as soon as
    /// Redis is back. Only an outage that lasts the whole timeout is an
    /// error (the queue's, [`QueueError::is_unavailable`]).
    ///
    /// With [`WaitMode::Requested`], a job that is queued or backing off
    /// while no worker is live is answered at once with
    /// [`Readiness::NoLiveWorker`]. [`WaitMode::Running`] looks at the
    /// entity lease only (never at Redis), as waits did before requested
    /// compactions were followed.
    pub async fn wait(
        &self,
        key: &EntityKey,
        mode: WaitMode,
        timeout: Duration,
    ) -> Result<Readiness, ClientError> {
        let started = Instant::now();
        let give_up = started + timeout;
        // Listen before looking, so an announcement between the two is not
        // lost.
        let mut releases = self.inner.releases.subscribe();
        let member = key.job_key();
        let mut heard = Heard::default();
        let mut compactions_before = None;
        loop {
            let ws = self.workstream(key).await?;
            let before = *compactions_before.get_or_insert(ws.compactions);
            // The queue answers in a millisecond; while it does not (Redis
            // frozen), the workstream's row is watched too, so a commit that
            // lands meanwhile ends the wait without waiting for Redis.
            let looked = tokio::select! {
                biased;
                pending = self.pending(key, &ws, mode) => Looked::Queue(pending),
                committed = self.commit_in_row(key, before) => Looked::Committed(Box::new(committed?)),
            };
            let (ws, looked) = match looked {
                Looked::Queue(pending) => (ws, pending),
                Looked::Committed(fresh) => {
                    CommitSeenWithoutQueue.emit();
                    (*fresh, Ok(None))
                }
            };
            let pending = match looked {
                Ok(pending) => pending,
                // Redis down, and the row already shows a commit since the
                // wait began: that is what the waiter waits for.
                Err(ClientError::Queue(error))
                    if error.is_unavailable() && ws.compactions > before =>
                {
                    CommitSeenWithoutQueue.emit();
                    None
                }
                Err(ClientError::Queue(error))
                    if error.is_unavailable() && Instant::now() < give_up =>
                {
                    QueueUnreadableWhileWaiting { error: &error }.emit();
                    let wake_at = give_up.min(Instant::now() + WAIT_OUTAGE_RECHECK_EVERY);
                    wait_for_news(&mut releases, &member, &mut heard, wake_at).await;
                    continue;
                }
                Err(error) => return Err(error),
            };
            let readiness = match pending {
                None => self.settled(key, &ws, before, heard, started).await?,
                Some(p) if p.no_live_worker => Readiness::NoLiveWorker {
                    waited: started.elapsed(),
                    phase: p.phase,
                    job_id: p.job_id.unwrap_or(0),
                },
                Some(p) if Instant::now() >= give_up => Readiness::TimedOut {
                    waited: started.elapsed(),
                    phase: p.phase,
                    job_id: p.job_id,
                },
                Some(p) => {
                    let mut wake_at = give_up.min(Instant::now() + WAIT_RECHECK_EVERY);
                    if let Some(at) = p.look_again_at {
                        wake_at = wake_at.min(at);
                    }
                    wait_for_news(&mut releases, &member, &mut heard, wake_at).await;
                    continue;
                }
            };
            WaitEnded {
                key,
                timeout,
                readiness: &readiness,
            }
            .emit();
            return Ok(readiness);
        }
    }

    /// Resolves with the workstream's row once it shows a commit since the
    /// wait began (`compactions` past `before`), looking every
    /// [`WAIT_ROW_POLL_MIN`] to twice [`WAIT_ROW_POLL_MAX`] (jittered, so
    /// many waiters do not read together). Raced against the queue's
    /// answer, which normally comes first, so it reads the row only while
    /// Redis is slow to answer.
    async fn commit_in_row(
        &self,
        key: &EntityKey,
        before: i64,
    ) -> Result<WorkstreamRow, ClientError> {
        let mut pauses = crate::backoff::reconnect(WAIT_ROW_POLL_MIN, WAIT_ROW_POLL_MAX);
        loop {
            tokio::time::sleep(pauses.next().unwrap_or(WAIT_ROW_POLL_MAX)).await;
            let ws = self.workstream(key).await?;
            if ws.compactions > before {
                return Ok(ws);
            }
        }
    }

    /// What is still pending for the workstream, as `mode` sees it; `None`
    /// when nothing is.
    async fn pending(
        &self,
        key: &EntityKey,
        ws: &WorkstreamRow,
        mode: WaitMode,
    ) -> Result<Option<Pending>, ClientError> {
        let now_ms = Utc::now().timestamp_millis();
        let lease_end = ws.lease_live(now_ms).map(|lease| {
            let left = u64::try_from(lease.deadline_ms.saturating_sub(now_ms)).unwrap_or(0);
            // Just past it: a dead holder's lease has expired by then.
            Instant::now() + Duration::from_millis(left + 5)
        });
        let held = |job_id| Pending {
            phase: WaitPhase::Running,
            job_id,
            no_live_worker: false,
            look_again_at: lease_end,
        };
        if mode == WaitMode::Running {
            return Ok(lease_end.map(|_| held(None)));
        }
        let progress = self.inner.queue.job_progress(key).await?;
        let nobody = progress.live_workers == 0;
        Ok(match progress.stage {
            // Someone holds the workstream: the pending job's run, or one
            // the queue no longer knows (a finished job's record is not the
            // one waited for).
            Some(JobStage::Waiting { job_id, .. } | JobStage::Running { job_id, .. })
                if lease_end.is_some() =>
            {
                Some(held(Some(job_id)))
            }
            None | Some(JobStage::Done { .. } | JobStage::Dead { .. }) => {
                lease_end.map(|_| held(None))
            }
            Some(JobStage::Waiting {
                job_id,
                due_in,
                paused,
                ..
            }) => Some(Pending {
                phase: if paused {
                    WaitPhase::Paused
                } else if due_in.is_zero() {
                    WaitPhase::Queued
                } else {
                    WaitPhase::BackingOff
                },
                job_id: Some(job_id),
                no_live_worker: nobody,
                look_again_at: None,
            }),
            // Claimed; the run takes the workstream in a moment, or has
            // just let go of it and the queue is being told. A run whose
            // queue lease ran out with no worker live has nobody to finish
            // or recover it.
            Some(JobStage::Running {
                job_id, lease_left, ..
            }) => Some(Pending {
                phase: WaitPhase::Running,
                job_id: Some(job_id),
                no_live_worker: nobody && lease_left.is_zero(),
                look_again_at: None,
            }),
        })
    }

    /// The answer once nothing is pending: compacted when a run committed
    /// during the wait (announced, or seen in the workstream's counter
    /// when the announcement was missed), ready otherwise.
    async fn settled(
        &self,
        key: &EntityKey,
        ws: &WorkstreamRow,
        compactions_before: i64,
        heard: Heard,
        started: Instant,
    ) -> Result<Readiness, ClientError> {
        let event = match heard.committed {
            Some(event) => Some(event),
            None if ws.compactions > compactions_before => {
                Some(self.last_committed_event(key, ws).await?)
            }
            None => None,
        };
        let waited = started.elapsed();
        Ok(match event {
            Some(event) => Readiness::Compacted { waited, event },
            None => Readiness::Ready {
                waited,
                event: heard.last,
            },
        })
    }

    /// What the workstream's newest commit did, from its audit row (for a
    /// waiter that missed the announcement).
    async fn last_committed_event(
        &self,
        key: &EntityKey,
        ws: &WorkstreamRow,
    ) -> Result<CompactionEvent, ClientError> {
        let runs = self.inner.store.runs(key, 20).await?;
        let run = runs.into_iter().find(|r| {
            matches!(
                r.run.outcome,
                RunOutcome::Committed | RunOutcome::NoProgress
            )
        });
        Ok(match run {
            Some(run) => CompactionEvent {
                domain: key.domain().to_owned(),
                entity_id: key.entity_id().to_owned(),
                outcome: EventOutcome::Compacted,
                trigger: run.run.trigger,
                job_id: u64::try_from(run.run.job_id).unwrap_or(0),
                attempt: run.run.attempt,
                tokens_before: run.run.tokens_before,
                tokens_after: run.run.tokens_after,
                messages_compacted: run.run.messages_compacted,
                chunks: run.run.chunks,
                rollups: run.run.rollups,
                evidence_kept: run.run.evidence_kept,
                evidence_dropped: run.run.evidence_dropped,
                degraded: run.run.degraded,
                error: None,
            },
            // The commit writes its run row in its own transaction, so this
            // is a row deleted by hand: say what the workstream says.
            None => CompactionEvent {
                domain: key.domain().to_owned(),
                entity_id: key.entity_id().to_owned(),
                outcome: EventOutcome::Compacted,
                trigger: String::new(),
                job_id: 0,
                attempt: 0,
                tokens_before: 0,
                tokens_after: ws.summary_tokens.saturating_add(ws.uncompacted_tokens),
                messages_compacted: 0,
                chunks: 0,
                rollups: 0,
                evidence_kept: 0,
                evidence_dropped: 0,
                degraded: false,
                error: None,
            },
        })
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

    /// The workstream of `key` without its summary and state: no caller
    /// here reads them (a context reads them through `kept_compacted`),
    /// and every turn's finalize would send and decode them for nothing
    /// (at 10k messages, a megabyte).
    async fn workstream(&self, key: &EntityKey) -> Result<WorkstreamRow, ClientError> {
        self.inner
            .store
            .workstream_lean(key)
            .await?
            .ok_or_else(|| ClientError::UnknownWorkstream(key.clone()))
    }
}

/// Waits until an announcement concerns `member` (recording what it says),
/// the subscription is re-established or lags (announcements may be lost:
/// look again), or `wake_at`.
async fn wait_for_news(
    releases: &mut tokio::sync::broadcast::Receiver<Released>,
    member: &str,
    heard: &mut Heard,
    wake_at: Instant,
) {
    loop {
        tokio::select! {
            received = releases.recv() => match received {
                Ok(Released::Entity { member: m, event }) if m == member => {
                    if let Some(event) = event {
                        if event.outcome == EventOutcome::Compacted {
                            heard.committed = Some(event.clone());
                        }
                        heard.last = Some(event);
                    }
                    return;
                }
                Ok(Released::Entity { .. }) => continue,
                Ok(Released::Resync) | Err(RecvError::Lagged(_)) => return,
                Err(RecvError::Closed) => {
                    tokio::time::sleep_until(wake_at).await;
                    return;
                }
            },
            () = tokio::time::sleep_until(wake_at) => return,
        }
    }
}

/// Writes `compaction.requested` to the outbox after the queue took a
/// request that adds a run (`added`, or a follow-up of the running job);
/// a request coalesced into a waiting job changes nothing and writes no
/// event. The queue's change is in Redis, so the event follows it rather
/// than sharing its transaction: should this write fail (or the process
/// die just before it), that event is lost. The failure is logged and the
/// request still succeeds: the compaction was requested.
pub async fn record_requested(
    store: &Store,
    key: &EntityKey,
    trigger: &Trigger,
    outcome: &EnqueueOutcome,
) {
    let Some(event) = requested_event(key, trigger, outcome) else {
        return;
    };
    if let Err(error) = store.record_event(&event).await {
        lost(&event, &error);
    }
}

/// Logs and counts a `compaction.requested` event that could not be
/// written (the request itself stands).
fn lost(event: &NewEvent, error: &StoreError) {
    EventNotWritten {
        kind: event.kind,
        error,
    }
    .emit();
}

/// The `compaction.requested` event of a request the queue answered with
/// `outcome`; none for a coalesced request (it changed nothing).
fn requested_event(
    key: &EntityKey,
    trigger: &Trigger,
    outcome: &EnqueueOutcome,
) -> Option<NewEvent> {
    let job_id = match outcome {
        EnqueueOutcome::Added { job_id } | EnqueueOutcome::FollowUpRecorded { job_id } => *job_id,
        EnqueueOutcome::Coalesced { .. } => return None,
    };
    Some(NewEvent::new(
        EventKind::CompactionRequested,
        key,
        serde_json::json!({
            "trigger": trigger.label(),
            "job_id": job_id,
            "enqueue": outcome.label(),
        }),
    ))
}

/// Requests a compaction of `key` and writes its `compaction.requested`
/// event ([`record_requested`]), holding the workstream's row from before
/// the request until the event is written ([`Store::hold_for_request`]):
/// the worker that picks the job up waits for the row to take the lease,
/// so its `compaction.started` never comes before the request's event.
/// A database that does not answer does not stop the request: the event
/// is then written (or, failing that, logged as lost) as
/// [`record_requested`] writes it.
pub async fn request_recorded(
    store: &Store,
    queue: &Queue,
    key: &EntityKey,
    trigger: &Trigger,
) -> Result<EnqueueOutcome, QueueError> {
    let held = store.hold_for_request(key).await;
    let outcome = queue.request_compaction(key, trigger.clone()).await;
    let event = outcome
        .as_ref()
        .ok()
        .and_then(|o| requested_event(key, trigger, o));
    record_held(store, held, event).await;
    outcome
}

/// Retries a dead letter (`entry`: `<member>|<job id>`) as
/// [`request_recorded`] requests: the workstream's row held from before
/// the request until its `compaction.requested` event is written, so the
/// worker that takes the job again cannot write `compaction.started`
/// first. The entity, the trigger (`None`: a branch summary's job, no
/// event) and the outcome; `None` when there is no such letter.
pub async fn retry_dead_recorded(
    store: &Store,
    queue: &Queue,
    entry: &str,
) -> Result<Option<(EntityKey, Option<Trigger>, EnqueueOutcome)>, QueueError> {
    let key = entry
        .rsplit_once('|')
        .and_then(|(member, _)| member.parse::<EntityKey>().ok());
    let held = match &key {
        Some(key) => store.hold_for_request(key).await,
        None => Ok(None),
    };
    let retried = queue.retry_dead_request(entry).await;
    let event = match &retried {
        Ok(Some((key, Some(trigger), outcome))) => requested_event(key, trigger, outcome),
        _ => None,
    };
    record_held(store, held, event).await;
    retried
}

/// Writes `event` (a request's `compaction.requested`, if it has one) in
/// the transaction `held` holds the workstream's row in, then lets the row
/// go; without a held row (the database did not answer, or had no row
/// yet), in a statement of its own, as [`record_requested`] writes it.
async fn record_held(
    store: &Store,
    held: Result<Option<crate::store::HeldRequest>, StoreError>,
    event: Option<NewEvent>,
) {
    let Ok(Some(held)) = held else {
        if let Some(event) = event {
            if let Err(error) = store.record_event(&event).await {
                lost(&event, &error);
            }
        }
        return;
    };
    match event {
        Some(event) => {
            if let Err(error) = held.record(&event).await {
                lost(&event, &error);
            }
        }
        // Nothing to write; a failed rollback ends with the connection.
        None => {
            let _ = held.release().await;
        }
    }
}

/// Checks a client id: 1-255 bytes, no control characters.
/// The trigger of a turn's request: [`Trigger::Reactive`] when the
/// `context_tokens` of the context `build_context` would return (the
/// estimate the trigger measures: the preamble and the un-compacted
/// messages) are over the model's `context_window` — the next model call
/// cannot take it, so the compaction is urgent — else [`Trigger::Auto`].
/// A window of 0 is an unlimited model: never reactive.
pub fn turn_trigger(context_tokens: u64, context_window: u64) -> Trigger {
    if context_window > 0 && context_tokens > context_window {
        Trigger::Reactive
    } else {
        Trigger::Auto
    }
}

fn check_client_id(client_id: &str) -> Result<(), String> {
    if client_id.is_empty() || client_id.len() > CLIENT_ID_MAX_BYTES {
        return Err(format!(
            "client_id: {} bytes, use 1-{CLIENT_ID_MAX_BYTES}",
            client_id.len()
        ));
    }
    if client_id.chars().any(char::is_control) {
        return Err("client_id: control characters are not allowed".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_keys_name_each_message_of_a_request() {
        let key = IdempotencyKey::parse("7d1c-req 42").unwrap();
        assert_eq!(key.client_id(0), "7d1c-req 42#0");
        assert_eq!(key.client_id(11), "7d1c-req 42#11");
        for bad in ["", "caf\u{e9}", "a\nb", &"k".repeat(201)] {
            assert!(IdempotencyKey::parse(bad).is_err(), "{bad:?}");
        }
        assert!(IdempotencyKey::parse(&"k".repeat(200)).is_ok());
    }

    #[test]
    fn a_turn_is_reactive_only_when_its_context_is_over_the_window() {
        assert_eq!(turn_trigger(150_000, 200_000), Trigger::Auto);
        assert_eq!(turn_trigger(200_000, 200_000), Trigger::Auto, "it fits");
        assert_eq!(turn_trigger(200_001, 200_000), Trigger::Reactive);
        assert_eq!(turn_trigger(u64::MAX, 0), Trigger::Auto, "unlimited");
    }

    #[test]
    fn client_ids_are_bounded_and_printable() {
        assert!(check_client_id("m-1").is_ok());
        assert!(check_client_id(&"x".repeat(255)).is_ok());
        assert!(check_client_id("").is_err());
        assert!(check_client_id(&"x".repeat(256)).is_err());
        assert!(check_client_id("a\u{0}b").is_err());
    }

    #[test]
    fn waits_serialize_with_their_outcome_and_phase() {
        let timed_out = Readiness::TimedOut {
            waited: Duration::from_millis(1_500),
            phase: WaitPhase::BackingOff,
            job_id: Some(7),
        };
        assert_eq!(
            serde_json::to_value(&timed_out).unwrap(),
            serde_json::json!({"outcome": "timed_out", "waited_ms": 1500, "phase": "backing_off", "job_id": 7})
        );
        let ready = Readiness::Ready {
            waited: Duration::ZERO,
            event: None,
        };
        assert_eq!(
            serde_json::to_value(&ready).unwrap(),
            serde_json::json!({"outcome": "ready", "waited_ms": 0, "event": null})
        );
        let nobody = Readiness::NoLiveWorker {
            waited: Duration::from_millis(3),
            phase: WaitPhase::Queued,
            job_id: 9,
        };
        assert_eq!(
            serde_json::to_value(&nobody).unwrap(),
            serde_json::json!({"outcome": "no_live_worker", "waited_ms": 3, "phase": "queued", "job_id": 9})
        );
    }
}
