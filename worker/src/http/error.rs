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
use serde_json::json;
use tracing::{debug, warn};

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
    /// The database schema is not the one this build expects.
    #[error("{0}")]
    SchemaMismatch(String),
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
    /// The stable, machine-readable code (documented in docs/openapi.yaml).
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidKey(_) => "invalid_key",
            ApiError::InvalidBody(_) => "invalid_body",
            ApiError::InvalidMessage(_) => "invalid_message",
            ApiError::InvalidQuery(_) => "invalid_query",
            ApiError::InvalidHeader(_) => "invalid_header",
            ApiError::ClientIdConflict(_) => "client_id_conflict",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::UnknownWorkstream(_) => "unknown_workstream",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::RedisUnavailable(_) => "redis_unavailable",
            ApiError::DatabaseUnavailable(_) => "database_unavailable",
            ApiError::SchemaMismatch(_) => "schema_mismatch",
            ApiError::ShuttingDown => "shutting_down",
            ApiError::RequestTimeout(_) => "request_timeout",
            ApiError::Overloaded(_) => "overloaded",
            ApiError::Internal(_) => "internal",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidKey(_)
            | ApiError::InvalidBody(_)
            | ApiError::InvalidMessage(_)
            | ApiError::InvalidQuery(_)
            | ApiError::InvalidHeader(_) => StatusCode::BAD_REQUEST,
            ApiError::ClientIdConflict(_) => StatusCode::CONFLICT,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::UnknownWorkstream(_) | ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RedisUnavailable(_)
            | ApiError::DatabaseUnavailable(_)
            | ApiError::SchemaMismatch(_)
            | ApiError::ShuttingDown
            | ApiError::RequestTimeout(_)
            | ApiError::Overloaded(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
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
            ClientError::Config(_) => ApiError::Internal(error.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        if error.is_transient() {
            ApiError::DatabaseUnavailable(error.to_string())
        } else {
            ApiError::Internal(error.to_string())
        }
    }
}

impl From<QueueError> for ApiError {
    fn from(error: QueueError) -> ApiError {
        match error {
            QueueError::Connect { .. } | QueueError::Redis { .. } => {
                ApiError::RedisUnavailable(error.to_string())
            }
            // A payload the queue refuses was built from the request.
            QueueError::Payload(_) => ApiError::InvalidBody(error.to_string()),
            _ => ApiError::Internal(error.to_string()),
        }
    }
}

/// `Retry-After` of an [`ApiError::Overloaded`], in seconds: a long poll
/// slot frees as soon as any wait ends, so a short pause is enough.
pub const RETRY_AFTER_SECS: &str = "1";

/// The JSON body of an error.
pub fn error_body(code: &str, message: &str) -> serde_json::Value {
    json!({ "error": { "code": code, "message": message } })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let code = self.code();
        let message = self.to_string();
        if status.is_server_error() {
            warn!(code, error = %message, "admin request failed");
        } else {
            debug!(code, "admin request refused");
        }
        let mut response = (status, Json(error_body(code, &message))).into_response();
        if matches!(self, ApiError::Overloaded(_)) {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECS),
            );
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
