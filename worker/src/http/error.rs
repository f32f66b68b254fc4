//! The API's one error type and its JSON form:
//! `{"error": {"code": "…", "message": "…"}}`, with the status that says
//! whose fault it is (4xx: the request; 503: a dependency; 500: this
//! program).
//!
//! Logging: a 5xx is logged with its message (Redis and database errors,
//! which carry operation names and redacted URLs, never message content).
//! A 4xx is logged with its code only: its message may quote the request
//! body back (serde names the offending value), and bodies are
//! conversations.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use compactor_producer::client::ClientError;
use compactor_producer::queue::QueueError;
use compactor_producer::store::StoreError;
use serde::Serialize;
use tracing::{debug, error, warn};
use utoipa::ToSchema;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The domain or entity id in the path is not a valid workstream key.
    #[error("{0}")]
    InvalidKey(String),
    /// The body is not JSON, or not the JSON this route takes.
    #[error("{0}")]
    InvalidBody(String),
    /// A message of the body was refused (no parts, too large).
    #[error("{0}")]
    InvalidMessage(String),
    /// The query string is malformed or out of range.
    #[error("{0}")]
    InvalidQuery(String),
    /// A header the route reads (`Idempotency-Key`) is malformed.
    #[error("{0}")]
    InvalidHeader(String),
    /// A client id (or an idempotency key) names a stored message with
    /// other content.
    #[error("{0}")]
    ClientIdConflict(String),
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("no workstream {0}")]
    UnknownWorkstream(String),
    /// No event delivery has this id.
    #[error("no event delivery {0}")]
    UnknownDelivery(String),
    /// The message a head move names is not a message of the workstream.
    #[error("{0}")]
    UnknownMessage(String),
    /// The parent an append names is not a message of the workstream.
    #[error("{0}")]
    InvalidParent(String),
    /// The head cannot move there now: the message was folded by a
    /// compaction, or a compaction runs and the move would leave a branch.
    #[error("{0}")]
    BranchConflict(String),
    /// No queue job has this id (any more).
    #[error("{0}")]
    UnknownJob(String),
    /// The job to cancel is done or dead already.
    #[error("{0}")]
    JobFinished(String),
    #[error("no route {0}")]
    NotFound(String),
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    RedisUnavailable(String),
    #[error("{0}")]
    DatabaseUnavailable(String),
    /// A statement outlasted `[database] statement_timeout`.
    #[error("{0}")]
    DatabaseTimeout(String),
    /// The database schema is not the one this build expects.
    #[error("{0}")]
    SchemaMismatch(String),
    /// A key of the queue holds another Redis type than the queue keeps
    /// there (named in the message): nothing was changed, and retrying
    /// will not help until an operator moves the key aside.
    #[error("{0}")]
    QueueKeyWrongType(String),
    /// The worker is stopping; a long poll ends early.
    #[error("the worker is shutting down")]
    ShuttingDown,
    /// The request did not finish within its bound (`admin.request_timeout`,
    /// or a long poll's own timeout plus a margin): a dependency is stuck.
    #[error("{0}")]
    RequestTimeout(String),
    /// Too many requests of this kind at once (`admin.max_long_polls`):
    /// refused at once with `Retry-After`, not queued.
    #[error("{0}")]
    Overloaded(String),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The stable, machine-readable code (in the OpenAPI document's
    /// [`ErrorCode`] schema).
    pub fn code(&self) -> &'static str {
        self.error_code().as_str()
    }

    /// The code as the typed value the OpenAPI document lists.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            ApiError::InvalidKey(_) => ErrorCode::InvalidKey,
            ApiError::InvalidBody(_) => ErrorCode::InvalidBody,
            ApiError::InvalidMessage(_) => ErrorCode::InvalidMessage,
            ApiError::InvalidQuery(_) => ErrorCode::InvalidQuery,
            ApiError::InvalidHeader(_) => ErrorCode::InvalidHeader,
            ApiError::ClientIdConflict(_) => ErrorCode::ClientIdConflict,
            ApiError::Unauthorized(_) => ErrorCode::Unauthorized,
            ApiError::UnknownWorkstream(_) => ErrorCode::UnknownWorkstream,
            ApiError::UnknownDelivery(_) => ErrorCode::UnknownDelivery,
            ApiError::UnknownMessage(_) => ErrorCode::UnknownMessage,
            ApiError::InvalidParent(_) => ErrorCode::InvalidParent,
            ApiError::BranchConflict(_) => ErrorCode::BranchConflict,
            ApiError::UnknownJob(_) => ErrorCode::UnknownJob,
            ApiError::JobFinished(_) => ErrorCode::JobFinished,
            ApiError::NotFound(_) => ErrorCode::NotFound,
            ApiError::MethodNotAllowed => ErrorCode::MethodNotAllowed,
            ApiError::PayloadTooLarge(_) => ErrorCode::PayloadTooLarge,
            ApiError::RedisUnavailable(_) => ErrorCode::RedisUnavailable,
            ApiError::DatabaseUnavailable(_) => ErrorCode::DatabaseUnavailable,
            ApiError::DatabaseTimeout(_) => ErrorCode::DatabaseTimeout,
            ApiError::SchemaMismatch(_) => ErrorCode::SchemaMismatch,
            ApiError::QueueKeyWrongType(_) => ErrorCode::QueueKeyWrongType,
            ApiError::ShuttingDown => ErrorCode::ShuttingDown,
            ApiError::RequestTimeout(_) => ErrorCode::RequestTimeout,
            ApiError::Overloaded(_) => ErrorCode::Overloaded,
            ApiError::Internal(_) => ErrorCode::Internal,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidKey(_)
            | ApiError::InvalidBody(_)
            | ApiError::InvalidMessage(_)
            | ApiError::InvalidQuery(_)
            | ApiError::InvalidHeader(_) => StatusCode::BAD_REQUEST,
            ApiError::ClientIdConflict(_)
            | ApiError::BranchConflict(_)
            | ApiError::JobFinished(_) => StatusCode::CONFLICT,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::UnknownWorkstream(_)
            | ApiError::UnknownDelivery(_)
            | ApiError::UnknownMessage(_)
            | ApiError::UnknownJob(_)
            | ApiError::NotFound(_)
            // A parent this workstream does not have: not found, from
            // the workstream's point of view.
            | ApiError::InvalidParent(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RedisUnavailable(_)
            | ApiError::DatabaseUnavailable(_)
            | ApiError::DatabaseTimeout(_)
            | ApiError::SchemaMismatch(_)
            | ApiError::ShuttingDown
            | ApiError::RequestTimeout(_)
            | ApiError::Overloaded(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::QueueKeyWrongType(_) | ApiError::Internal(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

impl From<ClientError> for ApiError {
    fn from(error: ClientError) -> ApiError {
        match error {
            ClientError::UnknownWorkstream(key) => {
                ApiError::UnknownWorkstream(format!("{}/{}", key.domain(), key.entity_id()))
            }
            ClientError::InvalidMessage { .. } => ApiError::InvalidMessage(error.to_string()),
            ClientError::ClientIdConflict { .. } => ApiError::ClientIdConflict(error.to_string()),
            ClientError::InvalidInstructions(_) => ApiError::InvalidBody(error.to_string()),
            ClientError::Store(e) => e.into(),
            ClientError::Queue(e) => e.into(),
            ClientError::SchemaBehind { .. } | ClientError::SchemaAhead { .. } => {
                ApiError::SchemaMismatch(error.to_string())
            }
            ClientError::Config(_) | ClientError::Encode(_) => {
                ApiError::Internal(error.to_string())
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        match error {
            StoreError::UnknownMessage { .. } => {
                return ApiError::UnknownMessage(error.to_string())
            }
            StoreError::InvalidParent { .. } => return ApiError::InvalidParent(error.to_string()),
            StoreError::BehindCompaction { .. } | StoreError::CompactionRunning { .. } => {
                return ApiError::BranchConflict(error.to_string())
            }
            _ => {}
        }
        // The kind and the operation, never the driver's text (it can
        // name hosts, certificates, statements and the values in them):
        // that goes to the log.
        let op = error.op().unwrap_or("database");
        if let Some(why) = error.unavailable() {
            return ApiError::DatabaseUnavailable(format!(
                "{op}: {}; try again shortly",
                why.as_str()
            ));
        }
        if error.is_statement_timeout() {
            return ApiError::DatabaseTimeout(format!(
                "{op}: a statement outlasted [database] statement_timeout (a lock held \
                 elsewhere, or a slow database); try again shortly"
            ));
        }
        if let Some(refusal) = error.refusal() {
            error!(%error, "the database refuses the worker's connection");
            return ApiError::Internal(format!(
                "{op}: {}; an operator must fix it",
                refusal.as_str()
            ));
        }
        match error {
            StoreError::Db { .. } | StoreError::Connect { .. } => {
                error!(%error, "a database call failed");
                ApiError::Internal(format!(
                    "{op}: the database refused the call; the worker's log has the details"
                ))
            }
            // Our own words (a corrupt row, an encoding failure).
            _ => ApiError::Internal(error.to_string()),
        }
    }
}

impl From<QueueError> for ApiError {
    fn from(error: QueueError) -> ApiError {
        match error {
            QueueError::Connect { .. } | QueueError::Redis { .. } => {
                ApiError::RedisUnavailable(error.to_string())
            }
            QueueError::WrongType { .. } => ApiError::QueueKeyWrongType(error.to_string()),
            // A payload the queue refuses was built from the request.
            QueueError::Payload(_) => ApiError::InvalidBody(error.to_string()),
            QueueError::JobNotFound { .. } => ApiError::UnknownJob(error.to_string()),
            QueueError::JobFinished { .. } => ApiError::JobFinished(error.to_string()),
            QueueError::InvalidCursor { .. } | QueueError::InvalidLimit { .. } => {
                ApiError::InvalidQuery(error.to_string())
            }
            _ => ApiError::Internal(error.to_string()),
        }
    }
}

/// `Retry-After` of an [`ApiError::Overloaded`], in seconds: a long poll
/// slot frees as soon as any wait ends, so a short pause is enough.
pub const RETRY_AFTER_SECS: &str = "1";

/// `Retry-After` of a 503 for Redis or the database being unavailable, in
/// seconds: long enough that clients retrying together do not hammer a
/// service coming back, short enough for a restart or a failover.
pub const RETRY_AFTER_UNAVAILABLE_SECS: &str = "2";

/// Every code an error body can carry: the `/v1` routes' errors (`ApiError`),
/// and `not_ready` of the readiness probes. By status: 400 `invalid_key`,
/// `invalid_body`, `invalid_message`, `invalid_query`, `invalid_header`;
/// 401 `unauthorized`; 404 `unknown_workstream`, `unknown_delivery`,
/// `unknown_message`, `invalid_parent`, `unknown_job`, `not_found`; 405
/// `method_not_allowed`; 409 `client_id_conflict`, `branch_conflict`,
/// `job_finished`; 413
/// `payload_too_large`; 500 `internal`, `queue_key_wrong_type`; 503 `redis_unavailable`,
/// `database_unavailable`, `database_timeout`, `schema_mismatch`, `shutting_down`,
/// `not_ready`, `request_timeout`, `overloaded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: the domain or entity of the path is not a valid key.
    InvalidKey,
    /// 400: the body is not JSON, or not the JSON the route takes.
    InvalidBody,
    /// 400: a message was refused (no parts, too large).
    InvalidMessage,
    /// 400: the query string is malformed or out of range.
    InvalidQuery,
    /// 400: `Idempotency-Key` is malformed.
    InvalidHeader,
    /// 409: a client id names a stored message with other content.
    ClientIdConflict,
    /// 401: the bearer token is missing or wrong.
    Unauthorized,
    /// 404: no such workstream.
    UnknownWorkstream,
    /// 404: no such event delivery.
    UnknownDelivery,
    /// 404: the message a head move names is not the workstream's.
    UnknownMessage,
    /// 404: the parent an append names is not a message of the workstream.
    InvalidParent,
    /// 409: the head cannot move there (compacted), or not now (a
    /// compaction runs and the move would leave a branch).
    BranchConflict,
    /// 404: no queue job has this id (any more).
    UnknownJob,
    /// 409: the job is done or dead already: it cannot be cancelled.
    JobFinished,
    /// 404: no such route.
    NotFound,
    /// 405: the route does not take this method.
    MethodNotAllowed,
    /// 413: the body is larger than `admin.max_body_bytes`.
    PayloadTooLarge,
    /// 503: Redis did not answer.
    RedisUnavailable,
    /// 503: the database did not answer (unreachable, the connection
    /// lost, no pooled connection free), with `Retry-After`.
    DatabaseUnavailable,
    /// 503: a statement outlasted `database.statement_timeout` (a lock
    /// held elsewhere, a slow database), with `Retry-After`.
    DatabaseTimeout,
    /// 503: the database schema is not the one this build expects.
    SchemaMismatch,
    /// 503: the worker is stopping.
    ShuttingDown,
    /// 503: a readiness check failed.
    NotReady,
    /// 503: the request outlasted its bound (`admin.request_timeout`).
    RequestTimeout,
    /// 503: too many long polls at once (with `Retry-After`).
    Overloaded,
    /// 500: a fault of this program.
    Internal,
    /// 500: a key of the queue in Redis holds another type than the queue
    /// keeps there (a hand edit, or another program's key of the same
    /// name); the message names it. Nothing was changed; retrying does
    /// not help until an operator moves the key aside.
    QueueKeyWrongType,
}

impl ErrorCode {
    /// Every code, for tests and documentation.
    pub const ALL: [ErrorCode; 27] = [
        ErrorCode::InvalidKey,
        ErrorCode::InvalidBody,
        ErrorCode::InvalidMessage,
        ErrorCode::InvalidQuery,
        ErrorCode::InvalidHeader,
        ErrorCode::ClientIdConflict,
        ErrorCode::Unauthorized,
        ErrorCode::UnknownWorkstream,
        ErrorCode::UnknownDelivery,
        ErrorCode::UnknownMessage,
        ErrorCode::InvalidParent,
        ErrorCode::BranchConflict,
        ErrorCode::UnknownJob,
        ErrorCode::JobFinished,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::PayloadTooLarge,
        ErrorCode::RedisUnavailable,
        ErrorCode::DatabaseUnavailable,
        ErrorCode::DatabaseTimeout,
        ErrorCode::SchemaMismatch,
        ErrorCode::ShuttingDown,
        ErrorCode::NotReady,
        ErrorCode::RequestTimeout,
        ErrorCode::Overloaded,
        ErrorCode::Internal,
        ErrorCode::QueueKeyWrongType,
    ];

    /// The code as it is sent (its serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidKey => "invalid_key",
            ErrorCode::InvalidBody => "invalid_body",
            ErrorCode::InvalidMessage => "invalid_message",
            ErrorCode::InvalidQuery => "invalid_query",
            ErrorCode::InvalidHeader => "invalid_header",
            ErrorCode::ClientIdConflict => "client_id_conflict",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::UnknownWorkstream => "unknown_workstream",
            ErrorCode::UnknownDelivery => "unknown_delivery",
            ErrorCode::UnknownMessage => "unknown_message",
            ErrorCode::InvalidParent => "invalid_parent",
            ErrorCode::BranchConflict => "branch_conflict",
            ErrorCode::UnknownJob => "unknown_job",
            ErrorCode::JobFinished => "job_finished",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::RedisUnavailable => "redis_unavailable",
            ErrorCode::DatabaseUnavailable => "database_unavailable",
            ErrorCode::DatabaseTimeout => "database_timeout",
            ErrorCode::SchemaMismatch => "schema_mismatch",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::NotReady => "not_ready",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::Internal => "internal",
            ErrorCode::QueueKeyWrongType => "queue_key_wrong_type",
        }
    }
}

/// The body of every error: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorDetail {
    pub code: ErrorCode,
    /// For people: what was refused and why (it may quote the request).
    pub message: String,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code,
                message: message.into(),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let code = self.code();
        let message = self.to_string();
        let body = ErrorBody::new(self.error_code(), message.as_str());
        if status.is_server_error() {
            warn!(code, error = %message, "admin request failed");
        } else {
            debug!(code, "admin request refused");
        }
        let mut response = (status, Json(body)).into_response();
        let retry_after = match self {
            ApiError::Overloaded(_) => Some(RETRY_AFTER_SECS),
            ApiError::RedisUnavailable(_)
            | ApiError::DatabaseUnavailable(_)
            | ApiError::DatabaseTimeout(_) => Some(RETRY_AFTER_UNAVAILABLE_SECS),
            _ => None,
        };
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static(secs));
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"compactor\""),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use compactor_producer::store::StoreError;
    use sea_orm::sqlx::Error as Sqlx;
    use sea_orm::{DbErr, RuntimeErr};

    use super::{ApiError, ErrorCode};

    fn failed(error: Sqlx) -> ApiError {
        ApiError::from(StoreError::Db {
            op: "append_messages",
            source: DbErr::Exec(RuntimeErr::SqlxError(Arc::new(error))),
        })
    }

    #[test]
    fn a_database_error_reaches_the_client_as_its_kind_and_operation_never_the_drivers_text() {
        let lost = failed(Sqlx::Io(std::io::Error::other(
            "tls close_notify from db-7.internal",
        )));
        assert_eq!(lost.error_code(), ErrorCode::DatabaseUnavailable);
        assert_eq!(
            lost.to_string(),
            "append_messages: connection to the database lost; try again shortly"
        );
        let refused = failed(Sqlx::ColumnNotFound("secret_column_of_users".into()));
        assert_eq!(refused.error_code(), ErrorCode::Internal);
        assert!(
            refused.to_string().starts_with("append_messages: "),
            "{refused}"
        );
        assert!(!refused.to_string().contains("secret_column"), "{refused}");
    }

    /// docs/BAD_INPUT.md lists every code with its status (issue 36, item
    /// 2: every refusal documented with its code).
    #[test]
    fn every_error_code_is_listed_in_bad_input_md_with_its_status() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/BAD_INPUT.md"),
        )
        .unwrap();
        let table = doc
            .split_once("## Every error code")
            .map(|(_, rest)| rest)
            .expect("the section");
        for code in ErrorCode::ALL {
            let status = match code {
                ErrorCode::NotReady => 503,
                other => {
                    assert_eq!(error_of(other).error_code(), other);
                    error_of(other).status().as_u16()
                }
            };
            let row = format!("| `{}` | {status} |", code.as_str());
            assert!(table.contains(&row), "no row {row}");
        }
    }

    /// An error of each code (`NotReady` is the probes' own body).
    fn error_of(code: ErrorCode) -> ApiError {
        let m = String::new;
        match code {
            ErrorCode::InvalidKey => ApiError::InvalidKey(m()),
            ErrorCode::InvalidBody => ApiError::InvalidBody(m()),
            ErrorCode::InvalidMessage => ApiError::InvalidMessage(m()),
            ErrorCode::InvalidQuery => ApiError::InvalidQuery(m()),
            ErrorCode::InvalidHeader => ApiError::InvalidHeader(m()),
            ErrorCode::ClientIdConflict => ApiError::ClientIdConflict(m()),
            ErrorCode::Unauthorized => ApiError::Unauthorized("no token"),
            ErrorCode::UnknownWorkstream => ApiError::UnknownWorkstream(m()),
            ErrorCode::UnknownDelivery => ApiError::UnknownDelivery(m()),
            ErrorCode::UnknownMessage => ApiError::UnknownMessage(m()),
            ErrorCode::InvalidParent => ApiError::InvalidParent(m()),
            ErrorCode::BranchConflict => ApiError::BranchConflict(m()),
            ErrorCode::UnknownJob => ApiError::UnknownJob(m()),
            ErrorCode::JobFinished => ApiError::JobFinished(m()),
            ErrorCode::NotFound => ApiError::NotFound(m()),
            ErrorCode::MethodNotAllowed => ApiError::MethodNotAllowed,
            ErrorCode::PayloadTooLarge => ApiError::PayloadTooLarge(m()),
            ErrorCode::RedisUnavailable => ApiError::RedisUnavailable(m()),
            ErrorCode::DatabaseUnavailable => ApiError::DatabaseUnavailable(m()),
            ErrorCode::DatabaseTimeout => ApiError::DatabaseTimeout(m()),
            ErrorCode::SchemaMismatch => ApiError::SchemaMismatch(m()),
            ErrorCode::ShuttingDown => ApiError::ShuttingDown,
            ErrorCode::RequestTimeout => ApiError::RequestTimeout(m()),
            ErrorCode::Overloaded => ApiError::Overloaded(m()),
            ErrorCode::Internal => ApiError::Internal(m()),
            ErrorCode::QueueKeyWrongType => ApiError::QueueKeyWrongType(m()),
            ErrorCode::NotReady => ApiError::Internal(m()),
        }
    }

    #[test]
    fn every_error_code_is_sent_as_its_documented_name() {
        for code in ErrorCode::ALL {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::from(code.as_str())
            );
        }
    }
}
