//! The access log: one line per admin request with its method, matched
//! route, status and `duration_ms` (a JSON number), at info for the `/v1`
//! API and unknown routes, at debug for the probes and `/metrics` (which
//! Kubernetes and Prometheus call every few seconds).
//!
//! The route is the template (`/v1/workstreams/{domain}/{entity}/context`),
//! never the path: paths carry entity ids and whatever a caller typed.
//! Bodies, query strings and headers (the bearer token) are never logged.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::{debug, info};

use crate::telemetry::millis;

/// Routes polled by machines: logged at debug.
const POLLED: [&str; 4] = ["/healthz", "/readyz", "/readyz/worker", "/metrics"];

/// The middleware (`axum::middleware::from_fn`). Added with
/// `Router::layer`, it runs after routing, so the matched route is known.
pub(super) async fn log(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let duration_ms = millis(started.elapsed());
    if POLLED.contains(&route.as_str()) {
        debug!(method = %method, route, status, duration_ms, "admin request");
    } else {
        info!(method = %method, route, status, duration_ms, "admin request");
    }
    response
}
