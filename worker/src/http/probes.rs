//! `/healthz`, `/readyz` and `/metrics`: what orchestrators and Prometheus
//! call. Open (no token), and cheap.

use std::future::Future;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use compactor_producer::store::SchemaStatus;
use serde::Serialize;
use serde_json::json;

use super::error::error_body;
use super::AppState;

/// `GET /healthz`: the process is alive and serving (a liveness probe
/// must not depend on Redis or the database, or their outage would get
/// every worker restarted).
pub(super) async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// The result of each readiness check: `"ok"` or what failed.
#[derive(Debug, Serialize)]
struct Checks {
    redis: String,
    database: String,
    schema: String,
}

const OK: &str = "ok";

/// `GET /readyz`: 200 when Redis answers a PING, the database a trivial
/// query, and its schema is the one this build expects; else 503 saying
/// which failed. Each check is bounded by `admin.ready_timeout`, and they
/// run at once, so a dead host cannot hang the probe. Also 503 once the
/// worker is shutting down, so traffic moves away during the drain.
pub(super) async fn readyz(State(state): State<AppState>) -> Response {
    let limit = state.ready_timeout();
    let compactor = state.compactor();
    let redis = bounded(limit, async {
        compactor.queue().ping().await.map_err(|e| e.to_string())
    });
    let database = bounded(limit, async {
        let store = compactor.store();
        store.ping().await.map_err(|e| e.to_string())?;
        store.schema_status().await.map_err(|e| e.to_string())
    });
    let (redis, database) = tokio::join!(redis, database);
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
    let checks = Checks {
        redis: redis.err().unwrap_or_else(|| OK.to_owned()),
        database,
        schema,
    };
    let mut failed: Vec<String> = [
        ("redis", &checks.redis),
        ("database", &checks.database),
        ("schema", &checks.schema),
    ]
    .into_iter()
    .filter(|(_, result)| result.as_str() != OK)
    .map(|(name, result)| format!("{name}: {result}"))
    .collect();
    if state.shutdown().is_cancelled() {
        failed.insert(0, "the worker is shutting down".to_owned());
    }
    if failed.is_empty() {
        return (
            StatusCode::OK,
            Json(json!({ "ready": true, "checks": checks })),
        )
            .into_response();
    }
    let mut body = error_body("not_ready", &failed.join("; "));
    body["ready"] = json!(false);
    body["checks"] = json!(checks);
    (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
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

/// `GET /metrics`: the Prometheus text exposition of every family.
pub(super) async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics().render(),
    )
        .into_response()
}
