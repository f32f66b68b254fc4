//! Storage: the workstreams, their messages, memory-block entries and the
//! audit trail of compaction runs, in PostgreSQL or SQLite (sea-orm).
//!
//! [`Store`] is the repository: every read and write of the service goes
//! through one of its methods, each of which is one statement or one
//! transaction, so callers never hold a transaction across an LLM call.
//!
//! # Concurrency
//!
//! The workstream row is the unit of concurrency control. Appends lock it
//! (by updating it) *before* they allocate message ids, so ids of one
//! workstream are committed in the order they were allocated: a reader that
//! has seen message 12 will never later see a message 11 appear. A
//! compaction job takes the row's lease ([`Store::take_lease`]) and commits
//! with a conditional update of the row, fenced on the lease owner and on
//! the watermark it loaded ([`Store::commit`]): a job whose lease was taken
//! over, or that raced another job, gets a
//! [`CommitOutcome::Conflict`] and has written nothing.
//!
//! On SQLite every writing transaction starts with `BEGIN IMMEDIATE`, so two
//! writers queue on the database lock (with a busy timeout) instead of one
//! of them failing when it upgrades a read lock; on PostgreSQL the row lock
//! of the conditional update does the same.
//!
//! # Bounds
//!
//! No statement runs for ever: PostgreSQL cancels one after
//! `[database] statement_timeout`, and a SQLite statement waits at most
//! that long for a lock (either is a [`StoreError::is_transient`] error: a
//! locked row or a stalled server fails the request, it does not hold it).
//! Reads of un-compacted history are bounded by [`HistoryBound`].
//!
//! # Layout
//! - `error`: [`StoreError`].
//! - `entities`: the sea-orm entities (private).
//! - `schema`: migrating and [`SchemaStatus`].
//! - `workstreams`: [`WorkstreamRow`], ensure/get, the breaker.
//! - `messages`: appending and paging messages.
//! - `memory`: memory-block entries.
//! - `lease`: the entity lease.
//! - `branches`: the message tree, the head, and branch summaries.
//! - `commit`: the fenced commit and the failure path.
//! - `runs`: the `compaction_runs` audit rows.
//! - `outbox`: the transactional outbox of events and their webhook
//!   deliveries.
//! - `recall`: full-text search of a workstream's messages (recall).
//! - `workstream_search`: finding workstreams by domain and entity id
//!   (the console's search).

use std::time::Duration;

use crate::settings::DatabaseSettings;
use sea_orm::sqlx::sqlite::SqliteJournalMode;
use sea_orm::{
    ConnectOptions, Database, DatabaseConnection, DatabaseTransaction, DbBackend,
    SqliteTransactionMode, TransactionOptions, TransactionTrait,
};

mod branches;
mod commit;
mod compacted;
mod convert;
mod entities;
mod error;
mod keyset;
mod lease;
mod memory;
mod messages;
mod outbox;
mod recall;
mod runs;
mod schema;
mod uncompacted;
mod workstream_list;
mod workstream_search;
mod workstreams;

pub use crate::events::catalogue::EventKind;
pub use crate::redact::{redact_url, split_url_list};
pub use branches::{AbandonedBranch, BranchInput, BranchSummaryRow, HeadMoved, NewBranchSummary};
pub use commit::{Commit, CommitOutcome, ConflictReason, MemoryFold, PrunedMessage};
pub use error::{Refusal, StoreError, Unavailable};
pub use lease::{Lease, LeaseTaken};
pub use memory::MemoryEntry;
#[cfg(test)]
pub(crate) use messages::newest_within;
pub use messages::{Appended, ContextHistory, HistoryWindow, NewMessage, CLIENT_ID_MAX_BYTES};
pub use outbox::{
    DeliveryFilter, DeliveryResult, DeliveryRow, DeliveryState, DueDelivery, EventRecord,
    HeldRequest, NewEvent, OutboxBacklog, RetryOutcome, Unrelayed,
};
pub use runs::{DegradedReason, HookOutcome, NewRun, RunHook, RunOutcome, RunRow};
pub use schema::SchemaStatus;
pub use uncompacted::{ReadAheadPages, UncompactedReader, LONG_HISTORY_TOKENS};
pub use workstream_list::{
    LastRun, WorkstreamListing, WorkstreamPage, WorkstreamQuery, WorkstreamStateFilter,
};
pub use workstream_search::{WorkstreamSearch, MAX_SEARCH_RESULTS};
pub use workstreams::{Compacted, WorkstreamRow, BREAKER_THRESHOLD};

/// How long connecting may take before it is a [`StoreError::ConnectTimeout`]
/// (and how long an operation waits for a pooled connection).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A pooled connection idle at least this long is pinged before it is
/// handed out (see [`Store::connect_with`]).
const PING_IF_IDLE_FOR: Duration = Duration::from_secs(10);
/// Connections of a SQLite file pool: WAL lets readers run beside the one
/// writer; more connections would only queue on the write lock.
const SQLITE_POOL_SIZE: u32 = 4;

/// The repository. Cheap to clone (it shares one connection pool).
#[derive(Clone, Debug)]
pub struct Store {
    db: DatabaseConnection,
    history: HistoryBound,
    /// `[database] context_cache_bytes`, for the client over this store.
    kept_bytes: u64,
}

/// How much un-compacted history one context read loads at most
/// (`[database] context_max_messages` / `context_max_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryBound {
    pub max_messages: u64,
    pub max_tokens: u64,
}

impl Store {
    /// [`Store::connect_with`] with every setting but the URL at its default.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        Store::connect_with(&DatabaseSettings::for_url(url)).await
    }

    /// Connects to `sqlite://path/to/file.db?mode=rwc` (the file is created
    /// when missing; WAL, foreign keys and a busy timeout are switched on so
    /// concurrent writers wait instead of failing) or `postgres://…`, with
    /// `settings.statement_timeout` on every connection of the pool
    /// (PostgreSQL's `statement_timeout`; SQLite's busy timeout).
    ///
    /// Bounded by [`CONNECT_TIMEOUT`]: an unreachable database is a typed
    /// error, not a hang. Errors show the URL with its password redacted.
    pub async fn connect_with(settings: &DatabaseSettings) -> Result<Store, StoreError> {
        let url = settings.url.expose();
        let statement_timeout = settings.statement_timeout;
        let mut options = ConnectOptions::new(url.to_owned());
        options
            .connect_timeout(CONNECT_TIMEOUT)
            .acquire_timeout(CONNECT_TIMEOUT)
            // The pool's default pings every connection it hands out: one
            // more round trip per statement outside a transaction and per
            // `BEGIN` (a third of a compaction's round trips). Only a
            // connection idle long enough to have been dropped by the
            // server or a proxy is pinged; a dead hot one fails its
            // statement, which is a transient error the caller retries.
            .test_before_acquire_if_idle_for(PING_IF_IDLE_FOR)
            .sqlx_logging(false);
        if url.starts_with("sqlite:") {
            // An in-memory database exists once per connection: it must
            // have exactly one.
            let in_memory = url.contains(":memory:") || url.contains("mode=memory");
            options
                .max_connections(if in_memory { 1 } else { SQLITE_POOL_SIZE })
                .map_sqlx_sqlite_opts(move |o| {
                    o.create_if_missing(true)
                        .journal_mode(SqliteJournalMode::Wal)
                        .foreign_keys(true)
                        .busy_timeout(statement_timeout)
                });
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            probe_postgres(url).await?;
            // A startup option of every pooled connection (after any
            // `options` of the URL, so this setting wins), in milliseconds.
            let millis = statement_timeout.as_millis().max(1);
            options.map_sqlx_postgres_opts(move |o| o.options([("statement_timeout", millis)]));
        }
        // The pool's acquire timeout bounds the attempt already; the outer
        // timeout also covers whatever happens before the pool is built.
        let attempt = Database::connect(options);
        let history = HistoryBound {
            max_messages: settings.context_max_messages,
            max_tokens: settings.context_max_tokens,
        };
        match tokio::time::timeout(CONNECT_TIMEOUT + Duration::from_secs(2), attempt).await {
            Ok(Ok(db)) => Ok(Store {
                db,
                history,
                kept_bytes: settings.context_cache_bytes,
            }),
            Ok(Err(err)) => Err(StoreError::Connect {
                url: redact_url(url),
                detail: crate::redact::scrub(&err.to_string(), url),
                refused: match &err {
                    sea_orm::DbErr::Conn(sea_orm::RuntimeErr::SqlxError(e)) => Refusal::of(e),
                    _ => None,
                },
            }),
            Err(_) => Err(StoreError::ConnectTimeout {
                url: redact_url(url),
                after: CONNECT_TIMEOUT,
            }),
        }
    }

    /// The underlying connection, for what the repository does not cover
    /// (tests, ad-hoc admin queries). Writing through it bypasses the
    /// fences of this module.
    pub fn connection(&self) -> &DatabaseConnection {
        &self.db
    }

    /// A trivial round trip to the database (readiness probes): fails when
    /// no pooled connection can be had or the server does not answer.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.db.ping().await.map_err(StoreError::db("ping"))
    }

    /// How much un-compacted history one context read loads at most.
    pub fn history_bound(&self) -> HistoryBound {
        self.history
    }

    /// Which database this store talks to.
    pub fn backend(&self) -> DbBackend {
        self.db.get_database_backend()
    }

    /// Closes the pool (waits for connections in use to be returned).
    pub async fn close(self) -> Result<(), StoreError> {
        self.db.close().await.map_err(StoreError::db("close"))
    }

    /// Starts a transaction that will write: `BEGIN IMMEDIATE` on SQLite,
    /// so it takes the write lock up front (waiting up to the busy timeout)
    /// rather than failing with `SQLITE_BUSY` when a read turns into a write.
    async fn begin_write(&self, op: &'static str) -> Result<DatabaseTransaction, StoreError> {
        self.db
            .begin_with_options(TransactionOptions {
                sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
                ..TransactionOptions::default()
            })
            .await
            .map_err(StoreError::db(op))
    }
}

/// One direct connection before the pool is built. The pool retries a
/// refused connection until its acquire timeout and then reports only
/// "pool timed out"; this attempt fails at once with the real reason
/// (connection refused, authentication failed, unknown database).
async fn probe_postgres(url: &str) -> Result<(), StoreError> {
    use sea_orm::sqlx::postgres::PgConnectOptions;
    use sea_orm::sqlx::{ConnectOptions as _, Connection as _};

    let connect_error = |err: sea_orm::sqlx::Error| StoreError::Connect {
        url: redact_url(url),
        detail: crate::redact::scrub(&err.to_string(), url),
        refused: Refusal::of(&err),
    };
    let attempt = async {
        let options: PgConnectOptions = url.parse().map_err(connect_error)?;
        let conn = options.connect().await.map_err(connect_error)?;
        // The probe's own connection is not needed any more; failing to
        // close it politely is not a reason to refuse the database.
        let _ = conn.close().await;
        Ok(())
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
        Ok(result) => result,
        Err(_) => Err(StoreError::ConnectTimeout {
            url: redact_url(url),
            after: CONNECT_TIMEOUT,
        }),
    }
}
