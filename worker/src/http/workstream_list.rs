//! `GET /v1/workstreams`: workstreams listed for operators by state —
//! breaker open, over the compaction trigger, degraded last time —
//! narrowed by domain and entity id prefix, in key order, a page at a
//! time (as `compactor workstreams` lists them).

use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use compactor_producer::store::{
    WorkstreamListing, WorkstreamPage, WorkstreamQuery, WorkstreamStateFilter,
};
use compactor_shared::EntityKey;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::QueryParams;
use super::AppState;

/// Workstreams per page when `limit` is not given.
pub const DEFAULT_PAGE: u64 = 50;
/// Most workstreams per page.
pub const MAX_PAGE: u64 = 500;

/// A state to list workstreams by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum StateParam {
    /// The circuit breaker is open: auto-compaction is suspended after
    /// failures in a row, until a newer message or a manual request.
    BreakerOpen,
    /// The estimated context is at least the compaction trigger.
    OverTrigger,
    /// The last compaction run was degraded.
    Degraded,
}

impl From<StateParam> for WorkstreamStateFilter {
    fn from(s: StateParam) -> WorkstreamStateFilter {
        match s {
            StateParam::BreakerOpen => WorkstreamStateFilter::BreakerOpen,
            StateParam::OverTrigger => WorkstreamStateFilter::OverTrigger,
            StateParam::Degraded => WorkstreamStateFilter::Degraded,
        }
    }
}

/// Query of `GET /v1/workstreams`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// Only workstreams in this state.
    #[param(inline)]
    state: Option<StateParam>,
    /// Only workstreams of this domain.
    #[param(pattern = "^[a-z][a-z0-9_-]{0,31}$")]
    domain: Option<String>,
    /// Only entity ids starting with this (case-sensitive).
    #[param(pattern = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")]
    q: Option<String>,
    /// Workstreams per page (default 50, at most 500).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u64>,
    /// The page after this workstream (`next_cursor` of the previous page,
    /// `<domain>/<entity>`).
    #[param(pattern = "^[a-z][a-z0-9_-]{0,31}/[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")]
    cursor: Option<String>,
}

// Also what `compactor workstreams --json` prints.
/// One page of workstreams, in key order.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkstreamsPage {
    pub workstreams: Vec<WorkstreamView>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

impl From<WorkstreamPage> for WorkstreamsPage {
    fn from(page: WorkstreamPage) -> WorkstreamsPage {
        WorkstreamsPage {
            next_cursor: page.next_after.as_ref().map(cursor_of),
            workstreams: page.workstreams.into_iter().map(Into::into).collect(),
        }
    }
}

/// A workstream, as operators look at it.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkstreamView {
    pub domain: String,
    pub entity_id: String,
    /// Stored messages not folded into the summary yet.
    pub uncompacted_messages: u64,
    pub uncompacted_tokens: u64,
    pub summary_tokens: u64,
    pub compactions: i64,
    /// Failed or no-progress runs in a row.
    pub consecutive_failures: u32,
    /// `open` (auto-compaction suspended) or `closed`.
    pub breaker: String,
    /// The newest compaction run; `null` before the first.
    pub last_run: Option<LastRunView>,
}

/// A workstream's newest compaction run.
#[derive(Debug, Serialize, ToSchema)]
pub struct LastRunView {
    pub finished_at: DateTime<Utc>,
    /// `committed`, `no_progress`, `failed`, `conflict` or `skipped`.
    pub outcome: String,
    pub degraded: bool,
    /// Why, when degraded.
    pub degraded_reason: Option<String>,
}

impl From<WorkstreamListing> for WorkstreamView {
    fn from(w: WorkstreamListing) -> WorkstreamView {
        WorkstreamView {
            domain: w.key.domain().to_owned(),
            entity_id: w.key.entity_id().to_owned(),
            uncompacted_messages: w.uncompacted_messages,
            uncompacted_tokens: w.uncompacted_tokens,
            summary_tokens: w.summary_tokens,
            compactions: w.compactions,
            consecutive_failures: w.consecutive_failures,
            breaker: if w.breaker_open { "open" } else { "closed" }.to_owned(),
            last_run: w.last_run.map(|r| LastRunView {
                finished_at: r.finished_at,
                outcome: r.outcome.as_str().to_owned(),
                degraded: r.degraded,
                degraded_reason: r.degraded_reason.map(|d| d.as_str().to_owned()),
            }),
        }
    }
}

#[utoipa::path(
    get,
    path = "/v1/workstreams",
    tag = "workstreams",
    operation_id = "listWorkstreams",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of workstreams, in key order.", body = WorkstreamsPage),
        (status = 400, description = "Invalid query.", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 503, description = "The database did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `GET /v1/workstreams`: workstreams by state, domain and entity prefix.
///
/// In key order (domain, then entity id); paginated by key: pass the
/// answer's `next_cursor` as `cursor`.
pub(super) async fn list(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<ListQuery>,
) -> Result<Json<WorkstreamsPage>, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::InvalidQuery(format!(
            "limit: {limit} is not within 1-{MAX_PAGE}"
        )));
    }
    let query = WorkstreamQuery {
        state: query.state.map(Into::into),
        domain: query
            .domain
            .as_deref()
            .map(|d| parse_part(d, "x").map(|k| k.domain().to_owned()))
            .transpose()?,
        entity_prefix: query
            .q
            .as_deref()
            .map(|q| parse_part("x", q).map(|k| k.entity_id().to_owned()))
            .transpose()?,
        after: query.cursor.as_deref().map(parse_cursor).transpose()?,
        limit,
        trigger_tokens: state.compactor().engine().trigger.threshold(),
    };
    let page = state.compactor().store().list_workstreams(&query).await?;
    Ok(Json(WorkstreamsPage::from(page)))
}

/// A workstream's cursor, `<domain>/<entity>` (neither holds a `/`).
pub fn cursor_of(key: &EntityKey) -> String {
    format!("{}/{}", key.domain(), key.entity_id())
}

fn parse_cursor(raw: &str) -> Result<EntityKey, ApiError> {
    let bad = || {
        ApiError::InvalidQuery(format!(
            "cursor {:?} is not <domain>/<entity>",
            raw.chars().take(40).collect::<String>()
        ))
    };
    let (domain, entity) = raw.split_once('/').ok_or_else(bad)?;
    EntityKey::parse(domain, entity).map_err(|_| bad())
}

/// A domain or an entity prefix, checked as keys check theirs.
fn parse_part(domain: &str, entity: &str) -> Result<EntityKey, ApiError> {
    EntityKey::parse(domain, entity).map_err(|e| ApiError::InvalidQuery(e.to_string()))
}
