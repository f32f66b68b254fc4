//! Request metrics of the admin API: `compactor_http_requests_total` and
//! `compactor_http_request_seconds`, by `route` and `status`.
//!
//! The `route` label is the route *template* axum matched
//! (`/v1/workstreams/{domain}/{entity}/wait`), never the request's path,
//! and every path no route matches is [`labels::UNMATCHED_ROUTE`]; the
//! `status` label is the class (`2xx`, `4xx`, `5xx`). So no caller can
//! create a label value: the series are the routes times the classes,
//! created at zero at start-up (`observability::register_known_series`).
//! The console's pages (`/ui/…`, HTML, not routes of the API's table)
//! count under the one route `/ui`, whose series appear on first use.

use std::sync::LazyLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use compactor_producer::metrics::labels;

use crate::events::{InternalEvent, RequestServed};

/// Counts the request and records how long its answer took (until the
/// response head; a body is written after).
pub(super) async fn record(request: Request, next: Next) -> Response {
    let route: &'static str = match request.extensions().get::<MatchedPath>() {
        Some(matched) => route_label(matched.as_str()),
        None => labels::UNMATCHED_ROUTE,
    };
    let started = Instant::now();
    let response = next.run(request).await;
    let status = status_class(response.status());
    RequestServed {
        route,
        status,
        elapsed: started.elapsed(),
    }
    .emit();
    response
}

/// The route label of every console (`/ui`) request.
pub const CONSOLE_ROUTE: &str = "/ui";

/// The route templates of the table, read once.
static ROUTES: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    super::served_routes()
        .into_iter()
        .map(|(_, route)| route)
        .collect()
});

/// The served route whose template is `matched`: a `&'static str` of the
/// route table, so a label value is never built from the request. A
/// template not in the table (none is) counts as unmatched.
fn route_label(matched: &str) -> &'static str {
    // The console's pages are one route for the metrics: its paths are
    // not the API's, and a label per page would add series for nothing.
    if matched == CONSOLE_ROUTE || matched.starts_with("/ui/") {
        return CONSOLE_ROUTE;
    }
    ROUTES
        .iter()
        .copied()
        .find(|route| *route == matched)
        .unwrap_or(labels::UNMATCHED_ROUTE)
}

/// `2xx`, `4xx`, …: the label of `status`'s class.
pub(crate) fn status_class(status: StatusCode) -> &'static str {
    match status.as_u16() {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_labelled_by_class() {
        assert_eq!(status_class(StatusCode::OK), "2xx");
        assert_eq!(status_class(StatusCode::ACCEPTED), "2xx");
        assert_eq!(status_class(StatusCode::NOT_FOUND), "4xx");
        assert_eq!(status_class(StatusCode::SERVICE_UNAVAILABLE), "5xx");
    }

    #[test]
    fn routes_are_labelled_by_their_template_only() {
        assert_eq!(
            route_label("/v1/workstreams/{domain}/{entity}/wait"),
            "/v1/workstreams/{domain}/{entity}/wait"
        );
        assert_eq!(route_label("/metrics"), "/metrics");
        assert_eq!(route_label("/v1/workstreams/chat/42/wait"), "unmatched");
        assert_eq!(route_label("/ui"), "/ui");
        assert_eq!(route_label("/ui/workstreams/{domain}/{entity}"), "/ui");
    }
}
