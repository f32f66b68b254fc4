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
        /// What the server refused, when it answered with a refusal that
        /// no retry can change (credentials, database name); `None` for an
        /// outage.
        refused: Option<Refusal>,
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
    /// long for a lock), as opposed to a corrupt row, a statement the
    /// database refused, or credentials it refuses.
    pub fn is_transient(&self) -> bool {
        self.unavailable().is_some() || self.is_statement_timeout()
    }

    /// Why the database could not serve the call, when it is an outage
    /// that retrying later may get past, in words a client may be shown
    /// (never the driver's text: it can name hosts and certificates): see
    /// [`Unavailable`]. A statement timeout is not one: see
    /// [`StoreError::is_statement_timeout`].
    pub fn unavailable(&self) -> Option<Unavailable> {
        match self {
            StoreError::Connect { refused: None, .. } => Some(Unavailable::Unreachable),
            StoreError::ConnectTimeout { .. } => Some(Unavailable::Unreachable),
            StoreError::Db { source, .. } => unavailable(source),
            _ => None,
        }
    }

    /// What the database refused, when no retry can change it until an
    /// operator does: the credentials or the database name of
    /// `[database] url` (see [`Refusal`]).
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            StoreError::Connect { refused, .. } => *refused,
            StoreError::Db {
                source: DbErr::Conn(sea_orm::RuntimeErr::SqlxError(e)),
                ..
            } => Refusal::of(e),
            _ => None,
        }
    }

    /// The operation that failed (`append`, `build_context`, …), when known.
    pub fn op(&self) -> Option<&'static str> {
        match self {
            StoreError::Db { op, .. } => Some(op),
            _ => None,
        }
    }

    /// Whether a statement ran out of `[database] statement_timeout`.
    pub fn is_statement_timeout(&self) -> bool {
        matches!(self, StoreError::Db { source, .. } if statement_timed_out(source))
    }
}

/// Why the database could not serve a call that may succeed later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// No connection could be made (refused, unreachable, timed out).
    Unreachable,
    /// A connection broke under the call (reset, closed, TLS cut), or
    /// the server said it is shutting down or cannot take connections now.
    ConnectionLost,
    /// Every pooled connection stayed busy past the acquire timeout.
    PoolExhausted,
}

impl Unavailable {
    pub fn as_str(self) -> &'static str {
        match self {
            Unavailable::Unreachable => "database unreachable",
            Unavailable::ConnectionLost => "connection to the database lost",
            Unavailable::PoolExhausted => "no database connection free",
        }
    }
}

/// What the database refused when the worker connected, that no retry
/// changes until an operator does: a start-up with it exits 2 (systemd's
/// `RestartPreventExitStatus`), a call meeting it fails without a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The user or password of `[database] url` (SQLSTATE class 28: no
    /// such role, a wrong password, no `pg_hba.conf` entry).
    Credentials,
    /// The database `[database] url` names does not exist (3D000).
    UnknownDatabase,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Credentials => "the database refused the credentials of [database] url",
            Refusal::UnknownDatabase => "the database [database] url names does not exist",
        }
    }

    /// The refusal a connection attempt's error is, from the server's
    /// SQLSTATE.
    pub fn of(error: &sea_orm::sqlx::Error) -> Option<Refusal> {
        let code = error.as_database_error()?.code()?;
        if code.starts_with("28") {
            Some(Refusal::Credentials)
        } else if code == "3D000" {
            Some(Refusal::UnknownDatabase)
        } else {
            None
        }
    }
}

/// The kind of a failed call, from the driver's error kind and the
/// server's SQLSTATE: a lost or unreachable connection and an exhausted
/// pool may pass; anything else (a constraint, a bad statement, a row that
/// does not decode, credentials the server refuses, a statement timeout,
/// which is a kind of its own) is not an outage.
fn unavailable(error: &DbErr) -> Option<Unavailable> {
    use sea_orm::sqlx::Error as Sqlx;
    use sea_orm::RuntimeErr;
    if statement_timed_out(error) {
        return None;
    }
    let sqlx = match error {
        DbErr::ConnectionAcquire(_) => return Some(Unavailable::PoolExhausted),
        DbErr::Conn(RuntimeErr::SqlxError(e))
        | DbErr::Exec(RuntimeErr::SqlxError(e))
        | DbErr::Query(RuntimeErr::SqlxError(e)) => e,
        DbErr::Conn(_) => return Some(Unavailable::Unreachable),
        _ => return None,
    };
    match sqlx.as_ref() {
        Sqlx::PoolTimedOut => Some(Unavailable::PoolExhausted),
        Sqlx::Io(_) | Sqlx::Tls(_) | Sqlx::Protocol(_) | Sqlx::PoolClosed | Sqlx::WorkerCrashed => {
            Some(Unavailable::ConnectionLost)
        }
        Sqlx::Database(db) => {
            let code = db.code().unwrap_or_default();
            // Class 08: connection exception; 57P01-57P03: the server is
            // shutting down, crashed, or cannot take connections yet;
            // 53300: too many connections.
            let lost = code.starts_with("08")
                || matches!(code.as_ref(), "57P01" | "57P02" | "57P03" | "53300");
            if lost {
                Some(Unavailable::ConnectionLost)
            } else if Refusal::of(sqlx).is_some() {
                None
            } else {
                // Refused while connecting for another reason (retried).
                matches!(error, DbErr::Conn(_)).then_some(Unavailable::Unreachable)
            }
        }
        // Anything else that failed the connection itself.
        _ => matches!(error, DbErr::Conn(_)).then_some(Unavailable::Unreachable),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sea_orm::sqlx::Error as Sqlx;
    use sea_orm::{DbErr, RuntimeErr};

    use super::*;

    fn exec(error: Sqlx) -> StoreError {
        StoreError::Db {
            op: "append_messages",
            source: DbErr::Exec(RuntimeErr::SqlxError(Arc::new(error))),
        }
    }

    #[test]
    fn a_connection_lost_under_a_statement_is_unavailable_and_says_so_without_the_driver() {
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let lost = exec(Sqlx::Io(reset));
        assert_eq!(lost.unavailable(), Some(Unavailable::ConnectionLost));
        assert!(lost.is_transient());
        assert_eq!(lost.op(), Some("append_messages"));
        assert_eq!(
            exec(Sqlx::Protocol("unexpected end".into())).unavailable(),
            Some(Unavailable::ConnectionLost)
        );
        assert_eq!(
            exec(Sqlx::PoolTimedOut).unavailable(),
            Some(Unavailable::PoolExhausted)
        );
        assert_eq!(
            exec(Sqlx::PoolClosed).unavailable(),
            Some(Unavailable::ConnectionLost)
        );
        assert_eq!(
            Unavailable::ConnectionLost.as_str(),
            "connection to the database lost"
        );
    }

    #[test]
    fn a_refused_statement_or_a_missing_row_is_not_an_outage() {
        assert_eq!(exec(Sqlx::RowNotFound).unavailable(), None);
        assert_eq!(
            exec(Sqlx::InvalidArgument("bad".into())).unavailable(),
            None
        );
        assert!(!exec(Sqlx::ColumnNotFound("x".into())).is_transient());
    }
}
