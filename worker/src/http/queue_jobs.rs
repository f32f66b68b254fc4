//! The `/v1/queue/…` routes of single jobs and workers: operators page
//! through the jobs of one state, look a job up by the id its logs show,
//! cancel a waiting or running job, and list the workers (as `compactor
//! queue jobs|job|cancel|workers` do). Behind the bearer token like every
//! `/v1` route.

use axum::extract::{Path, State};
use axum::Json;
use compactor_producer::queue::{
    CancelThen, JobCursor, JobSummary, JobView, WorkerStatus, MAX_JOBS_PAGE,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{JsonBody, QueryParams};
use super::AppState;

/// Jobs per page when `limit` is not given.
pub const DEFAULT_JOBS_PAGE: usize = 50;

/// Query of `GET /v1/queue/jobs`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct JobsQuery {
    /// Which jobs (default `waiting`).
    #[param(inline)]
    state: Option<JobView>,
    /// Jobs per page (default 50, at most 500).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u64>,
    /// The page after this position (`next_cursor` of the previous page).
    #[param(pattern = "^[urncd]:[0-9]{1,20}:[!-~]{1,400}$")]
    cursor: Option<String>,
}

/// One page of jobs.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct JobsPage {
    state: JobView,
    jobs: Vec<JobSummary>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    next_cursor: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/queue/jobs",
    tag = "queue",
    operation_id = "listJobs",
    params(JobsQuery),
    responses(
        (status = 200, description = "A page of jobs.", body = JobsPage),
        (status = 400, description = "Invalid query (state, limit or cursor).", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 503, description = "Redis did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `GET /v1/queue/jobs`: the jobs of one state, a page at a time.
///
/// `waiting` (due now) and `delayed` (a retry's back-off) jobs in claim
/// order, urgent lane first; `running` jobs by lease deadline, with the
/// worker holding each; `done` and `dead` jobs newest first. Each with its
/// workstream, kind, trigger, attempts, age and last error. The cursor is
/// a position, not an offset: jobs that leave ahead of it do not shift
/// the next page.
pub(super) async fn list(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<JobsQuery>,
) -> Result<Json<JobsPage>, ApiError> {
    let view = query.state.unwrap_or(JobView::Waiting);
    let limit = query.limit.unwrap_or(DEFAULT_JOBS_PAGE as u64);
    let limit = usize::try_from(limit)
        .ok()
        .filter(|l| (1..=MAX_JOBS_PAGE).contains(l))
        .ok_or_else(|| {
            ApiError::InvalidQuery(format!("limit: {limit} is not within 1-{MAX_JOBS_PAGE}"))
        })?;
    let cursor = query.cursor.as_deref().map(JobCursor::parse).transpose()?;
    let page = state
        .compactor()
        .queue()
        .list_jobs(view, limit, cursor.as_ref())
        .await?;
    Ok(Json(JobsPage {
        state: view,
        jobs: page.jobs,
        next_cursor: page.next_cursor,
    }))
}

/// A job id of the path: digits only, else not a job.
fn job_id(raw: &str) -> Result<u64, ApiError> {
    raw.parse().map_err(|_| {
        ApiError::UnknownJob(format!(
            "no job {}",
            raw.chars().take(40).collect::<String>()
        ))
    })
}

#[utoipa::path(
    get,
    path = "/v1/queue/jobs/{id}",
    tag = "queue",
    operation_id = "getJob",
    params(("id" = u64, Path, description = "The job id its logs show.")),
    responses(
        (status = 200, description = "The job.", body = JobSummary),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 404, description = "No such job (or it was trimmed with the done and dead sets): `unknown_job`.", body = ErrorBody),
        (status = 503, description = "Redis did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `GET /v1/queue/jobs/{id}`: one job by the id its logs show.
pub(super) async fn get_one(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<JobSummary>, ApiError> {
    let id = job_id(&raw)?;
    match state.compactor().queue().job(id).await? {
        Some(job) => Ok(Json(job)),
        None => Err(ApiError::UnknownJob(format!("no job {id}"))),
    }
}

/// Body of `POST /v1/queue/jobs/{id}/cancel`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CancelRequest {
    /// `dead` (default): dead-lettered with reason `cancelled`, retryable
    /// like any dead letter; `requeue`: back in line at its place, the
    /// cancelled attempt not counted.
    #[serde(default = "dead")]
    then: CancelThen,
}

fn dead() -> CancelThen {
    CancelThen::Dead
}

/// What a cancel did.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CancelReply {
    job_id: u64,
    /// `waiting` or `running`: what the job was.
    was: JobView,
    then: CancelThen,
    /// The cancelled attempt held the workstream's entity lease and lost
    /// it: its commit cannot land.
    entity_lease_revoked: bool,
    /// A follow-up requested while it ran, added now (`then: dead`).
    followup_job_id: Option<u64>,
}

#[utoipa::path(
    post,
    path = "/v1/queue/jobs/{id}/cancel",
    tag = "queue",
    operation_id = "cancelJob",
    params(("id" = u64, Path, description = "The job id its logs show.")),
    request_body = CancelRequest,
    responses(
        (status = 200, description = "Cancelled.", body = CancelReply),
        (status = 400, description = "Invalid body.", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 404, description = "No such job: `unknown_job`.", body = ErrorBody),
        (status = 409, description = "The job is done or dead already: `job_finished`.", body = ErrorBody),
        (status = 503, description = "Redis or the database did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `POST /v1/queue/jobs/{id}/cancel`: cancel a waiting or running job.
///
/// A running job's lease is revoked (its worker's next renewal cancels the
/// attempt) and so is the workstream's entity lease it held, so its commit
/// cannot land. The job is then dead-lettered with reason `cancelled` or
/// requeued, as `then` says.
pub(super) async fn cancel(
    State(state): State<AppState>,
    Path(raw): Path<String>,
    JsonBody(body): JsonBody<CancelRequest>,
) -> Result<Json<CancelReply>, ApiError> {
    let id = job_id(&raw)?;
    let done = state.compactor().cancel_job(id, body.then).await?;
    Ok(Json(CancelReply {
        job_id: id,
        was: done.cancelled.was,
        then: done.cancelled.then,
        entity_lease_revoked: done.entity_lease_revoked,
        followup_job_id: done.cancelled.followup_job_id,
    }))
}

/// The workers of the queue.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct WorkersList {
    /// Live workers first, then gone ones, each by id.
    workers: Vec<WorkerStatus>,
}

#[utoipa::path(
    get,
    path = "/v1/queue/workers",
    tag = "queue",
    operation_id = "listWorkers",
    responses(
        (status = 200, description = "The workers.", body = WorkersList),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 503, description = "Redis did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `GET /v1/queue/workers`: the workers serving the queue.
///
/// Each with its name, host, pid, version, concurrency, the jobs whose
/// lease it holds and the age of its last heartbeat; one that missed its
/// heartbeats (or holds leases without a registration) is `gone`.
pub(super) async fn workers(State(state): State<AppState>) -> Result<Json<WorkersList>, ApiError> {
    let workers = state.compactor().queue().workers_overview().await?;
    Ok(Json(WorkersList { workers }))
}

#[cfg(test)]
mod tests {
    use compactor_producer::queue::JOB_CURSOR_PATTERN;

    /// The document states the cursor's form as the queue parses it: what
    /// matches the pattern is accepted (schemathesis sends such cursors).
    #[test]
    fn the_documented_cursor_pattern_is_the_queues() {
        let doc = super::super::openapi::document();
        let params = doc["paths"]["/v1/queue/jobs"]["get"]["parameters"]
            .as_array()
            .unwrap();
        let cursor = params.iter().find(|p| p["name"] == "cursor").unwrap();
        assert_eq!(cursor["schema"]["pattern"], JOB_CURSOR_PATTERN);
    }
}
