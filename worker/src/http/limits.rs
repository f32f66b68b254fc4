//! The bounds of one request, as tower layers on the routes ([`super::router`]):
//!
//! - **request timeout** (tower's `Timeout`): every route but the long poll
//!   answers within `admin.request_timeout`, else 503 `request_timeout` (a
//!   stuck dependency must not hold the connection and the client for
//!   ever; the database's own `statement_timeout` usually fires first);
//! - **long polls** (`…/wait`): at most `admin.max_long_polls` at once
//!   (tower's `ConcurrencyLimit` on one shared semaphore, behind `LoadShed`:
//!   one more is refused at once with 503 `overloaded` and `Retry-After`,
//!   never queued), each bounded by the `timeout_ms` it asks for plus
//!   [`LONG_POLL_MARGIN`];
//! - **body size** (tower-http's `RequestBodyLimit`): a `Content-Length`
//!   over `admin.max_body_bytes` is answered 413 before any handler runs and
//!   without reading the body — hyper then closes the connection, so a
//!   client cannot make the server read hundreds of megabytes it will throw
//!   away; a chunked body is cut as soon as it passes the limit.
//!
//! Each refusal is the API's JSON error ([`ApiError`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{Query, Request};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use axum::BoxError;
use serde::Deserialize;
use tokio::sync::Semaphore;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::LoadShedLayer;
use tower::timeout::TimeoutLayer;
use tower::ServiceBuilder;

use super::error::ApiError;
use super::workstreams::{DEFAULT_WAIT_MS, MAX_WAIT_MS};
use super::AppState;

/// Room a long poll gets beyond the timeout it asked for: its last look at
/// the workstream after the wait, and the response.
pub const LONG_POLL_MARGIN: Duration = Duration::from_secs(5);

/// `route`, answering 503 `request_timeout` when it takes longer than
/// `limit`.
pub(super) fn with_timeout(
    route: MethodRouter<AppState>,
    limit: Duration,
) -> MethodRouter<AppState> {
    route.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(move |error: BoxError| async move {
                refusal(error, limit)
            }))
            .layer(TimeoutLayer::new(limit)),
    )
}

/// `route` as a long poll: one of at most `slots`' permits while it runs
/// (none free: 503 `overloaded` at once), bounded by its requested timeout
/// plus [`LONG_POLL_MARGIN`].
pub(super) fn as_long_poll(
    route: MethodRouter<AppState>,
    slots: Arc<Semaphore>,
) -> MethodRouter<AppState> {
    route
        .layer::<_, Infallible>(middleware::from_fn(bound_long_poll))
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(|error: BoxError| async move {
                    refusal(error, Duration::ZERO)
                }))
                .layer(LoadShedLayer::new())
                .layer(GlobalConcurrencyLimitLayer::with_semaphore(slots)),
        )
}

/// The error response for what a layer refused.
fn refusal(error: BoxError, limit: Duration) -> Response {
    if error.is::<tower::timeout::error::Elapsed>() {
        ApiError::RequestTimeout(format!(
            "the request did not finish within admin.request_timeout ({limit:?})"
        ))
    } else if error.is::<tower::load_shed::error::Overloaded>() {
        ApiError::Overloaded(
            "too many long polls at once (admin.max_long_polls): retry shortly".to_owned(),
        )
    } else {
        ApiError::Internal(format!("admin API layer: {error}"))
    }
    .into_response()
}

/// The part of the long poll's query its bound needs (the handler checks
/// the whole query and refuses a malformed one).
#[derive(Debug, Deserialize)]
struct RequestedWait {
    timeout_ms: Option<u64>,
}

/// Middleware: the long poll answers within its own timeout (capped at
/// [`MAX_WAIT_MS`]) plus [`LONG_POLL_MARGIN`], else 503 `request_timeout`.
async fn bound_long_poll(request: Request, next: Next) -> Response {
    let requested = Query::<RequestedWait>::try_from_uri(request.uri())
        .ok()
        .and_then(|Query(q)| q.timeout_ms)
        .unwrap_or(DEFAULT_WAIT_MS)
        .min(MAX_WAIT_MS);
    let limit = Duration::from_millis(requested) + LONG_POLL_MARGIN;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::RequestTimeout(format!(
            "the long poll did not finish within its timeout plus {LONG_POLL_MARGIN:?} ({limit:?})"
        ))
        .into_response(),
    }
}

/// Middleware outside tower-http's `RequestBodyLimit`: its 413 (plain
/// text) becomes the API's JSON error, naming the declared size.
pub(super) async fn json_payload_too_large(
    max_body_bytes: usize,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let response = next.run(request).await;
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if response.status() != StatusCode::PAYLOAD_TOO_LARGE || is_json {
        return response;
    }
    let message = match declared {
        Some(declared) => format!(
            "the request body is {declared} bytes; admin.max_body_bytes allows {max_body_bytes}"
        ),
        None => format!("the request body is larger than admin.max_body_bytes ({max_body_bytes})"),
    };
    ApiError::PayloadTooLarge(message).into_response()
}
