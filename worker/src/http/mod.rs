//! The worker's admin HTTP API (axum), so chat backends in any language can
//! use compactor, and operators can probe and scrape it.
//!
//! - `/v1/workstreams` ([`workstream_list`]): workstreams listed by state
//!   (breaker open, over the trigger, degraded), domain and entity prefix.
//! - `/v1/workstreams/{domain}/{entity}/…` ([`workstreams`]): messages
//!   (and ending a turn), compact, status, context, wait, the
//!   compaction runs ([`runs`]) and recall ([`recall`]). Behind the bearer
//!   token when one is configured (`auth`); a listen address beyond
//!   loopback without one refuses to start (`[admin]` settings).
//! - `/v1/events/deliveries…` ([`events`]): webhook deliveries of
//!   compaction events, listed and retried. Behind the token too.
//! - `/v1/queue/dead-letters…` ([`dead_letters`]): dead letters listed
//!   by reason, domain and age, retried or purged in bulk. Behind the
//!   token too.
//! - `/v1/queue…` (`queue_control`): the queue at a glance, paused and
//!   resumed. Behind the token too.
//! - `/v1/queue/jobs…`, `/v1/queue/workers` ([`queue_jobs`]): jobs by
//!   state, by id, cancelled; the workers. Behind the token too.
//! - `/ui/…` ([`console`]): the operator's web console (HTML), behind
//!   the same token through a login form and a session cookie.
//! - `/metrics`, `/healthz`, `/readyz`, `/readyz/worker` (`probes`), and
//!   `/openapi.json` ([`openapi`]): open.
//!
//! Bounded everywhere: connections (a limit, header-read and idle
//! timeouts: `server`), requests (a timeout, a limit on long polls, a body
//! limit that answers without reading: [`limits`]).
//!
//! Every error is JSON, `{"error": {"code", "message"}}` ([`error`]);
//! malformed requests are refused by the extractors of [`extract`]. The
//! routes and their shapes are in the OpenAPI document generated from the
//! handlers ([`openapi`]); a test checks that it names exactly the routes
//! of [`served_routes`].

mod access_log;
mod auth;
mod branches;
pub mod console;
pub mod dead_letters;
pub mod descriptors;
pub mod error;
pub mod events;
pub mod extract;
pub mod limits;
pub mod openapi;
mod probes;
mod queue_control;
pub mod queue_jobs;
pub mod recall;
mod request_metrics;
pub mod runs;
mod server;
pub mod workstream_list;
pub mod workstreams;

pub(crate) use request_metrics::status_class;
/// The one route label of every console page (see `request_metrics`).
pub use request_metrics::CONSOLE_ROUTE;

pub use server::{AdminServer, ConnectionLimits, Listener};

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{Method, Uri};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use compactor_producer::client::Compactor;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower_http::limit::RequestBodyLimitLayer;
use tracing::{debug, info_span, Instrument};

use crate::settings::{AdminSettings, AdminToken};
use error::ApiError;

/// What the handlers share. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    compactor: Compactor,
    metrics: PrometheusHandle,
    token: Option<AdminToken>,
    /// The worker's shutdown signal: long polls end on it and `/readyz`
    /// turns 503, while the server itself keeps answering until the worker
    /// has drained (so `/metrics` covers the drain).
    shutdown: CancellationToken,
    ready_timeout: Duration,
    /// How long one bulk dead-letter call works before it answers with
    /// where it stopped (`AdminSettings::bulk_budget`).
    bulk_budget: Duration,
}

impl AppState {
    pub fn new(
        compactor: Compactor,
        metrics: PrometheusHandle,
        token: Option<AdminToken>,
        shutdown: CancellationToken,
        ready_timeout: Duration,
        bulk_budget: Duration,
    ) -> AppState {
        AppState(Arc::new(Inner {
            compactor,
            metrics,
            token,
            shutdown,
            ready_timeout,
            bulk_budget,
        }))
    }

    pub(crate) fn compactor(&self) -> &Compactor {
        &self.0.compactor
    }

    pub(crate) fn metrics(&self) -> &PrometheusHandle {
        &self.0.metrics
    }

    pub(crate) fn token(&self) -> Option<&AdminToken> {
        self.0.token.as_ref()
    }

    pub(crate) fn shutdown(&self) -> &CancellationToken {
        &self.0.shutdown
    }

    pub(crate) fn ready_timeout(&self) -> Duration {
        self.0.ready_timeout
    }

    pub(crate) fn bulk_budget(&self) -> Duration {
        self.0.bulk_budget
    }
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Needs the bearer token when one is configured.
    Token,
    Open,
}

/// How long a route may take ([`limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// `admin.request_timeout`.
    Request,
    /// A long poll: its own timeout plus a margin, and at most
    /// `admin.max_long_polls` at once.
    LongPoll,
}

/// Every route: the one table the router is built from and
/// [`served_routes`] reads.
fn table() -> Vec<(Method, &'static str, Access, Bound, MethodRouter<AppState>)> {
    vec![
        (
            Method::GET,
            "/v1/workstreams",
            Access::Token,
            Bound::Request,
            get(workstream_list::list),
        ),
        (
            Method::POST,
            "/v1/workstreams/{domain}/{entity}/messages",
            Access::Token,
            Bound::Request,
            post(workstreams::append),
        ),
        (
            Method::POST,
            "/v1/workstreams/{domain}/{entity}/compact",
            Access::Token,
            Bound::Request,
            post(workstreams::compact),
        ),
        (
            Method::POST,
            "/v1/workstreams/{domain}/{entity}/head",
            Access::Token,
            Bound::Request,
            post(branches::move_head),
        ),
        (
            Method::GET,
            "/v1/workstreams/{domain}/{entity}/status",
            Access::Token,
            Bound::Request,
            get(workstreams::status),
        ),
        (
            Method::GET,
            "/v1/workstreams/{domain}/{entity}/context",
            Access::Token,
            Bound::Request,
            get(workstreams::context),
        ),
        (
            Method::GET,
            "/v1/workstreams/{domain}/{entity}/wait",
            Access::Token,
            Bound::LongPoll,
            get(workstreams::wait),
        ),
        (
            Method::GET,
            "/v1/workstreams/{domain}/{entity}/runs",
            Access::Token,
            Bound::Request,
            get(runs::list),
        ),
        (
            Method::GET,
            "/v1/workstreams/{domain}/{entity}/recall",
            Access::Token,
            Bound::Request,
            get(recall::recall),
        ),
        (
            Method::GET,
            "/v1/events/deliveries",
            Access::Token,
            Bound::Request,
            get(events::list),
        ),
        (
            Method::POST,
            "/v1/events/deliveries/{id}/retry",
            Access::Token,
            Bound::Request,
            post(events::retry_one),
        ),
        (
            Method::POST,
            "/v1/events/deliveries/retry",
            Access::Token,
            Bound::Request,
            post(events::retry_failed),
        ),
        (
            Method::GET,
            "/v1/queue/dead-letters",
            Access::Token,
            Bound::Request,
            get(dead_letters::list),
        ),
        (
            Method::POST,
            "/v1/queue/dead-letters/retry",
            Access::Token,
            Bound::Request,
            post(dead_letters::retry),
        ),
        (
            Method::POST,
            "/v1/queue/dead-letters/purge",
            Access::Token,
            Bound::Request,
            post(dead_letters::purge),
        ),
        (
            Method::GET,
            "/v1/queue",
            Access::Token,
            Bound::Request,
            get(queue_control::overview),
        ),
        (
            Method::POST,
            "/v1/queue/pause",
            Access::Token,
            Bound::Request,
            post(queue_control::pause),
        ),
        (
            Method::POST,
            "/v1/queue/resume",
            Access::Token,
            Bound::Request,
            post(queue_control::resume),
        ),
        (
            Method::GET,
            "/v1/queue/jobs",
            Access::Token,
            Bound::Request,
            get(queue_jobs::list),
        ),
        (
            Method::GET,
            "/v1/queue/jobs/{id}",
            Access::Token,
            Bound::Request,
            get(queue_jobs::get_one),
        ),
        (
            Method::POST,
            "/v1/queue/jobs/{id}/cancel",
            Access::Token,
            Bound::Request,
            post(queue_jobs::cancel),
        ),
        (
            Method::GET,
            "/v1/queue/workers",
            Access::Token,
            Bound::Request,
            get(queue_jobs::workers),
        ),
        (
            Method::GET,
            "/metrics",
            Access::Open,
            Bound::Request,
            get(probes::metrics),
        ),
        (
            Method::GET,
            "/healthz",
            Access::Open,
            Bound::Request,
            get(probes::healthz),
        ),
        (
            Method::GET,
            "/readyz",
            Access::Open,
            Bound::Request,
            get(probes::readyz),
        ),
        (
            Method::GET,
            "/readyz/worker",
            Access::Open,
            Bound::Request,
            get(probes::worker_readyz),
        ),
        (
            Method::GET,
            "/openapi.json",
            Access::Open,
            Bound::Request,
            get(openapi::openapi_json),
        ),
    ]
}

/// `(method, path)` of every route the router serves, paths in axum's
/// (and OpenAPI's) `{param}` syntax.
pub fn served_routes() -> Vec<(Method, &'static str)> {
    table()
        .into_iter()
        .map(|(method, path, _, _, _)| (method, path))
        .collect()
}

/// The API's router: each route bounded in time ([`limits`]), the `/v1`
/// routes behind the token check and the body limit, the probes open,
/// JSON for unknown routes and methods, and a span per request.
pub fn router(state: AppState, admin: &AdminSettings) -> Router {
    let long_polls = Arc::new(Semaphore::new(admin.max_long_polls));
    let mut v1 = Router::new();
    let mut open = Router::new();
    for (_, path, access, bound, route) in table() {
        let route = match bound {
            Bound::Request => limits::with_timeout(route, admin.request_timeout),
            Bound::LongPoll => limits::as_long_poll(route, Arc::clone(&long_polls)),
        };
        match access {
            Access::Token => v1 = v1.route(path, route),
            Access::Open => open = open.route(path, route),
        }
    }
    let max_body_bytes = admin.max_body_bytes;
    let v1 = v1
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        // tower-http's limit is the one body limit (axum's default of
        // 2 MB is off).
        .layer(DefaultBodyLimit::disable())
        .layer(RequestBodyLimitLayer::new(max_body_bytes))
        .layer(middleware::from_fn(move |request, next| {
            limits::json_payload_too_large(max_body_bytes, request, next)
        }));
    v1.merge(open)
        .merge(console::router(state.clone(), admin.request_timeout))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn(access_log::log))
        .layer(middleware::from_fn(trace_request))
        .layer(middleware::from_fn(request_metrics::record))
        .with_state(state)
}

/// The paths the probe listener (`admin.health_listen`) serves.
pub const PROBE_PATHS: [&str; 4] = ["/healthz", "/readyz", "/readyz/worker", "/metrics"];

/// The probe listener's router: the routes of [`PROBE_PATHS`] as the API
/// serves them (timed, logged and counted alike), JSON 404 for the rest.
pub fn probe_router(state: AppState, admin: &AdminSettings) -> Router {
    let mut probes = Router::new();
    for (_, path, _, _, route) in table() {
        if PROBE_PATHS.contains(&path) {
            probes = probes.route(path, limits::with_timeout(route, admin.request_timeout));
        }
    }
    probes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn(access_log::log))
        .layer(middleware::from_fn(trace_request))
        .layer(middleware::from_fn(request_metrics::record))
        .with_state(state)
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::NotFound(uri.path().to_owned())
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// One span per request, named by its route template (never the entity
/// id of the path: spans feed log pipelines), and one debug line with the
/// status and duration.
async fn trace_request(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let span = info_span!("admin_request", method = %request.method(), route = %route);
    let started = Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    span.in_scope(|| {
        debug!(
            status = response.status().as_u16(),
            duration_ms = crate::telemetry::millis(started.elapsed()),
            "admin request"
        );
    });
    response
}
