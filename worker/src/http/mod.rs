//! The worker's admin HTTP API (axum), so chat backends in any language can
//! use compactor, and operators can probe and scrape it.
//!
//! - `/v1/workstreams/{domain}/{entity}/…` ([`workstreams`]): messages
//!   (and ending a turn), compact, status, context, wait. Behind the bearer
//!   token when one is configured (`auth`).
//! - `/metrics`, `/healthz`, `/readyz` (`probes`): open.
//!
//! Every error is JSON, `{"error": {"code", "message"}}` ([`error`]);
//! malformed requests are refused by the extractors of [`extract`]. The
//! routes and their shapes are documented in `docs/openapi.yaml`; a test
//! checks that document names exactly the routes of [`served_routes`].

mod auth;
pub mod error;
pub mod extract;
mod probes;
pub mod workstreams;

use std::net::SocketAddr;
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
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info_span, Instrument};

use crate::settings::AdminToken;
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
}

impl AppState {
    pub fn new(
        compactor: Compactor,
        metrics: PrometheusHandle,
        token: Option<AdminToken>,
        shutdown: CancellationToken,
        ready_timeout: Duration,
    ) -> AppState {
        AppState(Arc::new(Inner {
            compactor,
            metrics,
            token,
            shutdown,
            ready_timeout,
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
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Needs the bearer token when one is configured.
    Token,
    Open,
}

/// Every route: the one table the router is built from and
/// [`served_routes`] reads.
fn table() -> Vec<(Method, &'static str, Access, MethodRouter<AppState>)> {
    vec![
        (
            Method::POST,
            "/v1/workstreams/{domain}/{entity}/messages",
            Access::Token,
            post(workstreams::append),
        ),
        (
            Method::POST,
            "/v1/workstreams/{domain}/{entity}/compact",
            Access::Token,
            post(workstreams::compact),
        ),
        (
            Method::GET,
            "/v1/workstreams/{domain}/{entity}/status",
            Access::Token,
            get(workstreams::status),
        ),
        (
            Method::GET,
            "/v1/workstreams/{domain}/{entity}/context",
            Access::Token,
            get(workstreams::context),
        ),
        (
            Method::GET,
            "/v1/workstreams/{domain}/{entity}/wait",
            Access::Token,
            get(workstreams::wait),
        ),
        (Method::GET, "/metrics", Access::Open, get(probes::metrics)),
        (Method::GET, "/healthz", Access::Open, get(probes::healthz)),
        (Method::GET, "/readyz", Access::Open, get(probes::readyz)),
    ]
}

/// `(method, path)` of every route the router serves, paths in axum's
/// (and OpenAPI's) `{param}` syntax.
pub fn served_routes() -> Vec<(Method, &'static str)> {
    table()
        .into_iter()
        .map(|(method, path, _, _)| (method, path))
        .collect()
}

/// The API's router: the `/v1` routes behind the token check and the body
/// limit, the probes open, JSON for unknown routes and methods, and a span
/// per request.
pub fn router(state: AppState, max_body_bytes: usize) -> Router {
    let mut v1 = Router::new();
    let mut open = Router::new();
    for (_, path, access, route) in table() {
        match access {
            Access::Token => v1 = v1.route(path, route),
            Access::Open => open = open.route(path, route),
        }
    }
    let v1 = v1
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::from_fn(move |request, next| {
            extract::refuse_oversized(max_body_bytes, request, next)
        }));
    v1.merge(open)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn(trace_request))
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
            elapsed_ms = started.elapsed().as_millis(),
            "admin request"
        );
    });
    response
}

/// The admin API bound to its address, not serving yet (so the caller
/// learns the address first: tests bind port 0).
pub struct AdminServer {
    listener: TcpListener,
    router: Router,
}

impl AdminServer {
    /// Binds `addr`.
    pub async fn bind(
        addr: SocketAddr,
        state: AppState,
        max_body_bytes: usize,
    ) -> std::io::Result<AdminServer> {
        let listener = TcpListener::bind(addr).await?;
        Ok(AdminServer {
            listener,
            router: router(state, max_body_bytes),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` is cancelled, then stops accepting and lets the
    /// requests in flight finish.
    pub async fn serve(self, stop: CancellationToken) -> std::io::Result<()> {
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
    }
}
