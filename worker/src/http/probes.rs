//! `/healthz`, `/readyz`, `/readyz/worker` and `/metrics`: what
//! orchestrators, monitoring and Prometheus call. Open (no token), and
//! cheap.
//!
//! - `/healthz`: alive (no dependency checked: a liveness probe must not
//!   restart workers for a database or Redis outage).
//! - `/readyz`: the chat routes can be served (the database and its
//!   schema). The Service's readiness probe.
//! - `/readyz/worker`: compaction jobs can be run (the queue's Redis, the
//!   runtime not shutting down). Reported apart, for monitoring.

use std::future::Future;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use compactor_producer::store::SchemaStatus;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ErrorBody, ErrorCode, ErrorDetail};
use super::AppState;

/// `GET /healthz`: liveness.
///
/// The process is alive and serving (a liveness probe must not depend on
/// Redis or the database, or their outage would get every worker
/// restarted).
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "probes",
    security(()),
    responses((status = 200, description = "Alive.", body = Health)),
)]
pub(super) async fn healthz() -> Json<Health> {
    Json(Health { status: OK })
}

/// The body of `/healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Health {
    /// Always `ok`.
    #[schema(value_type = String, pattern = "^ok$")]
    status: &'static str,
}

const OK: &str = "ok";

/// The result of each check of `/readyz`: `"ok"` or what failed.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ChatChecks {
    database: String,
    schema: String,
}

/// `GET /readyz`: readiness of the chat routes (the readiness probe).
///
/// 200 when the database answers a trivial query and its schema is the
/// one this build expects; else 503 saying which failed. Redis is not
/// checked: appending and `/context` need only the database, so a Redis
/// outage must not take every pod out of its Service (the worker side
/// reports it apart, on `/readyz/worker`). Each check is bounded by `admin.ready_timeout`, so a
/// dead host cannot hang the probe. Also 503 once the worker is shutting
/// down, so traffic moves away during the drain.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "probes",
    security(()),
    responses(
        (status = 200, description = "Ready.", body = ChatReadiness),
        (status = 503, description = "Not ready (`not_ready`): `error.message` and `checks` say which check failed.", body = ChatReadiness),
    ),
)]
pub(super) async fn readyz(State(state): State<AppState>) -> Response {
    let compactor = state.compactor();
    let database = bounded(state.ready_timeout(), async {
        let store = compactor.store();
        store.ping().await.map_err(|e| e.to_string())?;
        store.schema_status().await.map_err(|e| e.to_string())
    })
    .await;
    let (database, schema) = match database {
        Ok(SchemaStatus::Current) => (OK.to_owned(), OK.to_owned()),
        Ok(SchemaStatus::Behind { pending }) => (
            OK.to_owned(),
            format!(
                "behind this build (pending: {}): run `compactor migrate`",
                pending.join(", ")
            ),
        ),
        Ok(SchemaStatus::Ahead { unknown }) => (
            OK.to_owned(),
            format!(
                "newer than this build (unknown: {}): upgrade compactor-worker",
                unknown.join(", ")
            ),
        ),
        Err(e) => (e, "not checked: the database did not answer".to_owned()),
    };
    let checks = ChatChecks { database, schema };
    let failed = failures(
        &state,
        [("database", &checks.database), ("schema", &checks.schema)],
    );
    let error = not_ready(failed);
    answer(
        error.is_none(),
        ChatReadiness {
            ready: error.is_none(),
            error,
            checks,
        },
    )
}

/// The body of `/readyz`: `ready`, each check, and (503) the error.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ChatReadiness {
    /// 503 only: `not_ready`, naming the failed checks.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorDetail>,
    ready: bool,
    checks: ChatChecks,
}

/// The result of each check of `/readyz/worker`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct WorkerChecks {
    /// The queue's Redis answers a PING: `ok`, or what failed.
    redis: String,
    runtime: RuntimeState,
}

/// Whether the worker runtime takes jobs.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub(super) enum RuntimeState {
    #[serde(rename = "running")]
    Running,
    #[serde(rename = "shutting down")]
    ShuttingDown,
}

/// The body of `/readyz/worker`: `ready`, each check, and (503) the error.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct WorkerReadiness {
    /// 503 only: `not_ready`, naming the failed checks.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorDetail>,
    ready: bool,
    checks: WorkerChecks,
}

/// `GET /readyz/worker`: health of the worker side (compaction jobs).
///
/// 200 when the queue's Redis answers (within `admin.ready_timeout`) and
/// the runtime is not shutting down; else 503 saying which failed. For
/// dashboards and alerts, not for a Service's readiness: a Redis outage
/// stops compactions, not the chat routes.
#[utoipa::path(
    get,
    path = "/readyz/worker",
    tag = "probes",
    security(()),
    responses(
        (status = 200, description = "Jobs can run.", body = WorkerReadiness),
        (status = 503, description = "Not ready (`not_ready`): `error.message` and `checks` say which check failed.", body = WorkerReadiness),
    ),
)]
pub(super) async fn worker_readyz(State(state): State<AppState>) -> Response {
    let compactor = state.compactor();
    let redis = bounded(state.ready_timeout(), async {
        compactor.queue().ping().await.map_err(|e| e.to_string())
    })
    .await;
    let checks = WorkerChecks {
        redis: redis.err().unwrap_or_else(|| OK.to_owned()),
        runtime: if state.shutdown().is_cancelled() {
            RuntimeState::ShuttingDown
        } else {
            RuntimeState::Running
        },
    };
    let failed = failures(&state, [("redis", &checks.redis)]);
    let error = not_ready(failed);
    answer(
        error.is_none(),
        WorkerReadiness {
            ready: error.is_none(),
            error,
            checks,
        },
    )
}

/// The failed checks as `name: why`, the shutdown first.
fn failures<'a>(
    state: &AppState,
    checks: impl IntoIterator<Item = (&'a str, &'a String)>,
) -> Vec<String> {
    let mut failed: Vec<String> = checks
        .into_iter()
        .filter(|(_, result)| result.as_str() != OK)
        .map(|(name, result)| format!("{name}: {result}"))
        .collect();
    if state.shutdown().is_cancelled() {
        failed.insert(0, "the worker is shutting down".to_owned());
    }
    failed
}

/// `not_ready` naming what failed, if anything did.
fn not_ready(failed: Vec<String>) -> Option<ErrorDetail> {
    (!failed.is_empty()).then(|| ErrorBody::new(ErrorCode::NotReady, failed.join("; ")).error)
}

/// 200 when ready, else 503, with the body saying why.
fn answer(ready: bool, body: impl Serialize) -> Response {
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// `check`, or an error saying it did not finish within `limit`.
async fn bounded<T>(
    limit: Duration,
    check: impl Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(limit, check)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {limit:?}")))
}

/// `GET /metrics`: Prometheus metrics.
///
/// The text exposition of every family, and the process metrics read at
/// this scrape.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "probes",
    security(()),
    responses((
        status = 200,
        description = "Every `compactor_*` family (docs/OPERATIONS.md, \"Metrics\"), and the process metrics.",
        body = String,
        content_type = "text/plain",
    )),
)]
pub(super) async fn metrics(State(state): State<AppState>) -> Response {
    let mut text = state.metrics().render();
    text.push_str(&crate::observability::process::render());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
