//! `GET /v1/workstreams/{domain}/{entity}/runs`: the workstream's
//! compaction runs (the audit trail `compactor runs` prints), newest
//! first, with what the pre-compaction hook did on each.

use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use compactor_producer::store::RunRow;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{QueryParams, Workstream, WorkstreamPath};
use super::AppState;

/// Runs per page when `limit` is not given.
pub const DEFAULT_PAGE: u64 = 20;
/// Most runs per page.
pub const MAX_PAGE: u64 = 500;

/// Query of `GET …/runs`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct RunsQuery {
    /// The page after this run id (`next_before` of the previous page).
    before: Option<i64>,
    /// Runs per page (default 20, at most 500).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u64>,
}

/// One page of runs, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RunsPage {
    runs: Vec<RunView>,
    /// Pass as `before` for the next page; `null` on the last page.
    next_before: Option<i64>,
}

/// One attempt at compacting the workstream.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RunView {
    id: i64,
    job_id: i64,
    attempt: u32,
    /// `auto`, `reactive`, `manual` or `follow_up`.
    trigger: String,
    started_at: DateTime<Utc>,
    finished_at: DateTime<Utc>,
    /// `committed`, `no_progress`, `failed`, `conflict`, or `skipped` (the
    /// pre-compaction hook said skip).
    outcome: String,
    /// The extractive summarizer stood in for the LLM.
    degraded: bool,
    /// Why, when degraded.
    degraded_reason: Option<String>,
    tokens_before: u64,
    tokens_after: u64,
    messages_compacted: u64,
    /// Candidate evidence lines (verbatim lines of the compacted messages,
    /// and the evidence shown before) kept for the next context; 0 on a
    /// run that computed no compaction, and on runs recorded before they
    /// were counted.
    evidence_kept: u64,
    /// Candidate evidence lines left out: no budget, nothing new, or a
    /// repeat.
    evidence_dropped: u64,
    llm_calls: u32,
    /// What the pre-compaction hook did (`null` without a hook):
    /// `proceed`, `instructions`, `context`, `replaced`, `skipped`, or a
    /// failure the compaction went on without — `timeout`, `unreachable`,
    /// `http_error`, `malformed`, `invalid_replacement`.
    hook_outcome: Option<String>,
    /// How long the hook took to answer.
    hook_duration_ms: Option<u64>,
    /// Why the attempt failed (on a degraded run: why the LLM's summary
    /// was not used).
    error: Option<String>,
}

impl From<RunRow> for RunView {
    fn from(row: RunRow) -> RunView {
        let run = row.run;
        RunView {
            id: row.id,
            job_id: run.job_id,
            attempt: run.attempt,
            trigger: run.trigger,
            started_at: run.started_at,
            finished_at: run.finished_at,
            outcome: run.outcome.as_str().to_owned(),
            degraded: run.degraded,
            degraded_reason: run.degraded_reason.map(|r| r.as_str().to_owned()),
            tokens_before: run.tokens_before,
            tokens_after: run.tokens_after,
            messages_compacted: run.messages_compacted,
            evidence_kept: run.evidence_kept,
            evidence_dropped: run.evidence_dropped,
            llm_calls: run.llm_calls,
            hook_outcome: run.hook.outcome.map(|o| o.as_str().to_owned()),
            hook_duration_ms: run.hook.duration_ms,
            error: run.error,
        }
    }
}

#[utoipa::path(
    get,
    path = "/v1/workstreams/{domain}/{entity}/runs",
    tag = "workstreams",
    operation_id = "runs",
    params(WorkstreamPath, RunsQuery),
    responses(
        (status = 200, description = "A page of runs, newest first.", body = RunsPage),
        (status = 400, description = "Invalid key or query.", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 404, description = "No such workstream.", body = ErrorBody),
        (status = 503, description = "The database did not answer, the schema is not current, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `GET …/runs`: the workstream's compaction runs.
///
/// One row per attempt, newest first: trigger, outcome, tokens before and
/// after, evidence lines kept and dropped, degraded, and what the
/// pre-compaction hook did. Paginated by id: pass the answer's
/// `next_before` as `before`.
pub(super) async fn list(
    State(state): State<AppState>,
    Workstream(key): Workstream,
    QueryParams(query): QueryParams<RunsQuery>,
) -> Result<Json<RunsPage>, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::InvalidQuery(format!(
            "limit: {limit} is not within 1-{MAX_PAGE}"
        )));
    }
    let store = state.compactor().store();
    if store.workstream_lean(&key).await?.is_none() {
        return Err(ApiError::UnknownWorkstream(format!(
            "{}/{}",
            key.domain(),
            key.entity_id()
        )));
    }
    let runs: Vec<RunView> = store
        .runs_page(&key, query.before, limit)
        .await?
        .into_iter()
        .map(RunView::from)
        .collect();
    let next_before = (runs.len() as u64 == limit)
        .then(|| runs.last().map(|r| r.id))
        .flatten();
    Ok(Json(RunsPage { runs, next_before }))
}
