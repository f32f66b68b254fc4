//! The `/v1/queue` routes: an operator sees the queue at a glance (jobs by
//! state, what is paused, how long the oldest job has waited, how many
//! workers are live) and pauses or resumes it, whole or one domain (as
//! `compactor queue stats|pause|resume` do). Behind the bearer token like
//! every `/v1` route.

use axum::extract::State;
use axum::Json;
use compactor_producer::queue::{PauseScope, PauseState, Queue, QueueCounts};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::{info, info_span, Instrument};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::OptionalJson;
use super::AppState;

/// The queue at a glance.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct QueueOverview {
    /// The queue's name (`[queue] name`).
    queue: String,
    /// Jobs by state; paused jobs count as waiting.
    counts: QueueCounts,
    /// What is paused, and the age of the oldest waiting job.
    #[serde(flatten)]
    pause: PauseState,
    /// Workers whose registration has not run out.
    live_workers: u64,
}

#[utoipa::path(
    get,
    path = "/v1/queue",
    tag = "queue",
    operation_id = "queueOverview",
    responses(
        (status = 200, description = "Jobs by state, what is paused, the oldest waiting job's age and the live workers.", body = QueueOverview),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 503, description = "Redis did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `GET /v1/queue`: the queue at a glance.
///
/// `counts.waiting` includes paused jobs (`counts.waiting_parked`: those a
/// claim has set aside because their domain is paused). `oldest_waiting_ms`
/// counts from when the job could first run, so a job backing off before
/// its retry is not old.
pub(super) async fn overview(
    State(state): State<AppState>,
) -> Result<Json<QueueOverview>, ApiError> {
    let queue = state.compactor().queue();
    let counts = queue.counts().await?;
    let pause = queue.pause_state().await?;
    let live_workers = queue.live_workers().await?.len() as u64;
    Ok(Json(QueueOverview {
        queue: queue.config().name.as_str().to_owned(),
        counts,
        pause,
        live_workers,
    }))
}

/// Body of `POST /v1/queue/pause` and `POST /v1/queue/resume`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PauseRequest {
    /// Only this domain's jobs; absent or `null`: the whole queue.
    #[serde(default)]
    #[schema(pattern = "^[a-z][a-z0-9_-]{0,31}$", example = "chat")]
    domain: Option<String>,
}

impl PauseRequest {
    /// The scope of a body read as any JSON: an object (serde would also
    /// take a struct written as an array, which the document refuses), or
    /// nothing (`null`, an empty body) for the whole queue.
    fn scope_of(body: Value) -> Result<PauseScope, ApiError> {
        let request: PauseRequest = match body {
            Value::Null => PauseRequest::default(),
            Value::Object(_) => {
                serde_json::from_value(body).map_err(|e| ApiError::InvalidBody(e.to_string()))?
            }
            _ => {
                return Err(ApiError::InvalidBody(
                    "the body must be a JSON object, like {\"domain\": \"chat\"}".to_owned(),
                ))
            }
        };
        PauseScope::parse(request.domain.as_deref())
            .map_err(|e| ApiError::InvalidBody(format!("domain: {e}")))
    }
}

#[utoipa::path(
    post,
    path = "/v1/queue/pause",
    tag = "queue",
    operation_id = "pauseQueue",
    request_body(content = Option<PauseRequest>, description = "Optional; an empty body is `{}`: the whole queue."),
    responses(
        (status = 200, description = "Paused (or paused already): the state it leaves.", body = PauseState),
        (status = 400, description = "Invalid body (a domain that is not one).", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 413, description = "The body is larger than `admin.max_body_bytes`.", body = ErrorBody),
        (status = 503, description = "Redis did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `POST /v1/queue/pause`: pause the queue, or one domain.
///
/// No paused job is claimed; they stay waiting, and requests for their
/// workstreams still coalesce into them. Running jobs finish. Pausing
/// twice changes nothing (paused since the first time).
pub(super) async fn pause(
    State(state): State<AppState>,
    OptionalJson(body): OptionalJson<Value>,
) -> Result<Json<PauseState>, ApiError> {
    let scope = PauseRequest::scope_of(body)?;
    control(state.compactor().queue(), Action::Pause, &scope).await
}

#[utoipa::path(
    post,
    path = "/v1/queue/resume",
    tag = "queue",
    operation_id = "resumeQueue",
    request_body(content = Option<PauseRequest>, description = "Optional; an empty body is `{}`: the whole queue."),
    responses(
        (status = 200, description = "Resumed (or running already): the state it leaves.", body = PauseState),
        (status = 400, description = "Invalid body (a domain that is not one).", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 413, description = "The body is larger than `admin.max_body_bytes`.", body = ErrorBody),
        (status = 503, description = "Redis did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `POST /v1/queue/resume`: resume the queue, or one domain.
///
/// Idle workers are woken and the held jobs start at once, in their
/// lanes' order. A domain paused on its own stays paused when the queue
/// resumes, and the other way round.
pub(super) async fn resume(
    State(state): State<AppState>,
    OptionalJson(body): OptionalJson<Value>,
) -> Result<Json<PauseState>, ApiError> {
    let scope = PauseRequest::scope_of(body)?;
    control(state.compactor().queue(), Action::Resume, &scope).await
}

/// What an operator asked of the queue.
#[derive(Debug, Clone, Copy)]
enum Action {
    Pause,
    Resume,
}

/// Pauses or resumes `scope`, with one line for the audit trail.
async fn control(
    queue: &Queue,
    action: Action,
    scope: &PauseScope,
) -> Result<Json<PauseState>, ApiError> {
    let span = info_span!("queue_control", action = ?action, scope = %scope);
    async {
        let state = match action {
            Action::Pause => queue.pause(scope).await?,
            Action::Resume => queue.resume(scope).await?,
        };
        info!("queue control applied by the admin API");
        Ok(Json(state))
    }
    .instrument(span)
    .await
}
