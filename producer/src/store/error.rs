//! The one error type of the storage layer.
//!
//! Every variant names the operation that failed, so a log line says *what*
//! the service was doing, not only what the driver said. Connection strings
//! are only ever shown redacted ([`redact_url`](crate::redact::redact_url)): a `StoreError` can be
//! logged, returned over the admin API or printed by the CLI without leaking
//! the database password. For the same reason a connection failure keeps the
//! driver's message as scrubbed text instead of the driver error itself
//! (sea-orm repeats the full URL in some of its messages).

use std::time::Duration;

use compactor_shared::MessageId;
use sea_orm::DbErr;

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or refused the connection.
    #[error("cannot connect to the database at {url}: {detail}")]
    Connect {
        /// The connection string, password replaced by `***`.
        url: String,
        /// The driver's message, with the password scrubbed.
        detail: String,
    },
    /// The connection attempt did not finish in time (unreachable host,
    /// firewall dropping packets, a database that accepts but never answers).
    #[error("connecting to the database at {url} did not finish within {after:?}")]
    ConnectTimeout { url: String, after: Duration },
    /// A statement failed (connection lost, constraint violated, …).
    #[error("{op}: {source}")]
    Db {
        op: &'static str,
        #[source]
        source: DbErr,
    },
    /// A stored row does not decode (its JSON, role or outcome is not one
    /// this build understands). Never skipped silently: a row that is left
    /// out of a compaction would be lost from the summary.
    #[error("corrupt row {table}#{id}: {detail}")]
    CorruptRow {
        table: &'static str,
        id: i64,
        detail: String,
    },
    /// A value could not be encoded as JSON for storage.
    #[error("{op}: cannot encode {what} as JSON: {source}")]
    Encode {
        op: &'static str,
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// The workstream id does not exist (deleted, or never created).
    #[error("{op}: workstream {workstream_id} does not exist")]
    UnknownWorkstream {
        op: &'static str,
        workstream_id: i64,
    },
    /// A message of an append carries a client id that names a stored
    /// message (or an earlier message of the same append) with other
    /// content: a client id names one message, for good.
    #[error("{op}: client id {client_id:?} already names a message with other content (message {index} of the request)")]
    ClientIdConflict {
        op: &'static str,
        client_id: String,
        /// Position of the conflicting message in the request (0-based).
        index: usize,
    },
    /// A message the operation names is not a message of the workstream.
    #[error("{op}: message {message_id} does not belong to workstream {workstream_id}")]
    UnknownMessage {
        op: &'static str,
        workstream_id: i64,
        message_id: MessageId,
    },
    /// The parent an append names is not a message of the workstream;
    /// nothing was stored.
    #[error("{op}: parent message {message_id} does not belong to workstream {workstream_id}")]
    InvalidParent {
        op: &'static str,
        workstream_id: i64,
        message_id: MessageId,
    },
    /// The message a head move (or an append's parent) names was folded
    /// into the summary by a compaction, or forks before it: the summary
    /// holds what came after, so it cannot be a head.
    #[error("{op}: message {message_id} is compacted or forks before the last compaction; it cannot be the head")]
    BehindCompaction {
        op: &'static str,
        message_id: MessageId,
    },
    /// The change would abandon a branch while a compaction of the
    /// workstream runs (it is folding the current path): retry after it.
    #[error("{op}: a compaction of the workstream is running; leave the branch after it ends")]
    CompactionRunning { op: &'static str },
}

impl StoreError {
    pub(crate) fn db(op: &'static str) -> impl FnOnce(DbErr) -> StoreError {
        move |source| StoreError::Db { op, source }
    }

    /// Whether retrying later may succeed: the database was unreachable,
    /// the connection pool was exhausted, or a statement ran out of its
    /// `statement_timeout` (PostgreSQL cancelled it, or SQLite waited that
    /// long for a lock), as opposed to a corrupt row or a statement the
    /// database refused.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Connect { .. } | StoreError::ConnectTimeout { .. } => true,
            StoreError::Db { source, .. } => {
                matches!(source, DbErr::Conn(_) | DbErr::ConnectionAcquire(_))
                    || statement_timed_out(source)
            }
            _ => false,
        }
    }

    /// Whether a statement ran out of `[database] statement_timeout`.
    pub fn is_statement_timeout(&self) -> bool {
        matches!(self, StoreError::Db { source, .. } if statement_timed_out(source))
    }
}

/// PostgreSQL's `query_canceled` (SQLSTATE 57014: `statement_timeout`
/// fired), or SQLite's `SQLITE_BUSY` and its extended codes (the busy
/// timeout ran out waiting for another writer's lock).
fn statement_timed_out(error: &DbErr) -> bool {
    use sea_orm::RuntimeErr;
    let (DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e))) = error
    else {
        return false;
    };
    let Some(db) = e.as_database_error() else {
        return false;
    };
    let code = db.code().unwrap_or_default();
    if db
        .try_downcast_ref::<sea_orm::sqlx::sqlite::SqliteError>()
        .is_some()
    {
        // Extended result codes keep the primary code in the low byte.
        return code.parse::<u32>().is_ok_and(|c| c & 0xff == 5);
    }
    code == "57014"
}
