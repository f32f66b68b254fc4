//! The `/v1/queue/dead-letters` routes: operators list dead letters by
//! reason, domain and age, and retry or purge them in bulk (as `compactor
//! dlq` does), with a dry run that counts and shows a sample first. Behind
//! the bearer token like every `/v1` route; a bulk operation without a
//! filter needs `"all": true`, so a stray POST cannot purge everything.

use std::time::Duration;

use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use compactor_producer::client::record_requested;
use compactor_producer::queue::{
    member_domain, reason_kind, BulkAction, BulkReport, DeadCursor, DeadFilter, DeadLetter,
    DeadReason,
};
use serde::{Deserialize, Serialize};
use tracing::info;
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{JsonBody, QueryParams};
use super::AppState;

/// Dead letters per page when `limit` is not given.
pub const DEFAULT_PAGE: usize = 50;
/// Most dead letters per page.
pub const MAX_PAGE: usize = 500;
/// Longest age a filter takes (ten years, in seconds): far past any
/// `queue.dead_max_age`.
const MAX_AGE_SECS: u64 = 10 * 365 * 24 * 3600;

/// Query of `GET /v1/queue/dead-letters`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// Only letters of this kind of reason: `exhausted`, `permanent`,
    /// `stalled`, `unusable`, `cancelled`, or the first word of a reason.
    #[param(pattern = "^[a-z][a-z_]{0,31}$")]
    reason: Option<String>,
    /// Only letters of this domain.
    #[param(pattern = "^[a-z][a-z0-9_-]{0,31}$")]
    domain: Option<String>,
    /// Only letters dead for at least this many seconds.
    #[param(minimum = 1, maximum = 315_360_000)]
    older_than_secs: Option<u64>,
    /// Letters per page (default 50, at most 500).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<usize>,
    /// Where the page starts (`next_cursor` of the previous page).
    #[param(pattern = "^[0-9]{1,19}:[A-Za-z0-9_.:-]{1,400}[|][0-9]{1,19}$")]
    cursor: Option<String>,
}

/// One page of dead letters, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DeadLettersPage {
    dead_letters: Vec<DeadLetterView>,
    /// Pass as `cursor` for the next page; `null` when no letter is left
    /// to look at. A page with a filter may be short and still have one
    /// (a page looks at a bounded number of letters).
    next_cursor: Option<String>,
}

/// A dead-lettered job.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DeadLetterView {
    /// Its id, `<member>|<job_id>`: what `entry` names.
    entry: String,
    /// The job's member: `compact:{domain}:{entity}`, or
    /// `branch:{domain}:{entity}:{leaf}` for a branch summary's job.
    member: String,
    domain: String,
    job_id: u64,
    attempts: u32,
    /// Times its lease expired.
    stalls: u32,
    /// Why it died, as recorded.
    reason: String,
    /// The kind of `reason`: `exhausted`, `permanent`, `stalled`,
    /// `unusable` or `cancelled`.
    kind: String,
    failed_at: DateTime<Utc>,
}

impl From<DeadLetter> for DeadLetterView {
    fn from(d: DeadLetter) -> DeadLetterView {
        let failed_at = i64::try_from(d.failed_at_ms)
            .ok()
            .and_then(DateTime::<Utc>::from_timestamp_millis)
            .unwrap_or_default();
        DeadLetterView {
            domain: member_domain(&d.member).to_owned(),
            kind: reason_kind(&d.reason).to_owned(),
            entry: d.entry,
            member: d.member,
            job_id: d.job_id,
            attempts: d.attempts,
            stalls: d.stalls,
            reason: d.reason,
            failed_at,
        }
    }
}

#[utoipa::path(
    get,
    path = "/v1/queue/dead-letters",
    tag = "queue",
    operation_id = "listDeadLetters",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of dead letters, newest first.", body = DeadLettersPage),
        (status = 400, description = "Invalid query.", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 503, description = "Redis did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `GET /v1/queue/dead-letters`: dead letters, by reason, domain and age.
///
/// Newest first. Paginated by cursor: pass the answer's `next_cursor` as
/// `cursor`.
pub(super) async fn list(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<ListQuery>,
) -> Result<Json<DeadLettersPage>, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::InvalidQuery(format!(
            "limit: {limit} is not within 1-{MAX_PAGE}"
        )));
    }
    let filter = filter(
        query.reason.as_deref(),
        query.domain.as_deref(),
        query.older_than_secs,
        None,
    )
    .map_err(ApiError::InvalidQuery)?;
    let cursor = query
        .cursor
        .as_deref()
        .map(DeadCursor::parse)
        .transpose()
        .map_err(|e| ApiError::InvalidQuery(e.to_string()))?;
    let page = state
        .compactor()
        .queue()
        .dead_letters_page(&filter, cursor, limit)
        .await?;
    Ok(Json(DeadLettersPage {
        dead_letters: page.letters.into_iter().map(Into::into).collect(),
        next_cursor: page.next_cursor.map(|c| c.to_string()),
    }))
}

/// Body of `POST /v1/queue/dead-letters/retry` and `…/purge`: a filter
/// (its fields narrow together) or `"all": true`, and whether to only
/// count.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BulkRequest {
    /// Letters of this kind of reason (see the listing's `reason`).
    #[schema(pattern = "^[a-z][a-z_]{0,31}$")]
    reason: Option<String>,
    /// Letters of this domain.
    #[schema(pattern = "^[a-z][a-z0-9_-]{0,31}$")]
    domain: Option<String>,
    /// Letters dead for at least this many seconds.
    #[schema(minimum = 1, maximum = 315_360_000)]
    #[serde(default, deserialize_with = "optional_whole_number")]
    older_than_secs: Option<u64>,
    /// One letter, `<member>|<job_id>` (as listed).
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,400}[|][0-9]{1,19}$")]
    entry: Option<String>,
    /// Every letter: needed when no filter is given.
    #[serde(default)]
    all: bool,
    /// Only count (and show a sample of) the letters that would be
    /// affected.
    dry_run: bool,
    /// Where the previous call of the same operation stopped (its
    /// `next_cursor`): go on from there.
    #[schema(pattern = "^[0-9]{1,19}:[A-Za-z0-9_.:-]{1,400}[|][0-9]{1,19}$")]
    after: Option<String>,
}

/// An optional whole number, also written as a float without a fraction.
fn optional_whole_number<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct Whole(#[serde(deserialize_with = "compactor_shared::trigger::whole_number")] u64);
    Ok(Option::<Whole>::deserialize(deserializer)?.map(|Whole(n)| n))
}

/// What the derive cannot say of [`BulkRequest`]: at least one filter
/// (a non-null field) or `"all": true` (the 400 the handler answers
/// otherwise). Called by the OpenAPI document's builder.
pub(super) fn constrain_bulk_request(schema: &mut serde_json::Value) {
    let mut any: Vec<serde_json::Value> = [
        ("reason", "string"),
        ("domain", "string"),
        ("older_than_secs", "integer"),
        ("entry", "string"),
    ]
    .into_iter()
    .map(|(field, kind)| {
        serde_json::json!({
            "required": [field],
            "properties": {field: {"type": kind}}
        })
    })
    .collect();
    any.push(serde_json::json!({
        "required": ["all"],
        "properties": {"all": {"const": true}}
    }));
    schema["anyOf"] = serde_json::Value::Array(any);
}

impl BulkRequest {
    fn filter(&self) -> Result<DeadFilter, ApiError> {
        let filter = filter(
            self.reason.as_deref(),
            self.domain.as_deref(),
            self.older_than_secs,
            self.entry.as_deref(),
        )
        .map_err(ApiError::InvalidBody)?;
        if filter.is_empty() && !self.all {
            return Err(ApiError::InvalidBody(
                "name a filter (reason, domain, older_than_secs, entry), or pass \"all\": true"
                    .to_owned(),
            ));
        }
        Ok(filter)
    }

    fn after(&self) -> Result<Option<DeadCursor>, ApiError> {
        self.after
            .as_deref()
            .map(DeadCursor::parse)
            .transpose()
            .map_err(|e| ApiError::InvalidBody(format!("after: {e}")))
    }
}

/// What a bulk retry did (or, dry, would do).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RetryReport {
    /// Letters that matched.
    matched: u64,
    /// Letters requested again and removed (0 in a dry run).
    retried: u64,
    /// Matched letters that could not be requested again (they stay).
    skipped: u64,
    dry_run: bool,
    /// The first matching letters, oldest first (at most 10).
    sample: Vec<DeadLetterView>,
    /// Set when this call stopped before the end, to answer within
    /// `admin.request_timeout`: send the same body again with `after` set
    /// to it. The counts are this call's. `null`: no letter is left.
    next_cursor: Option<String>,
}

/// What a bulk purge did (or, dry, would do).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PurgeReport {
    /// Letters that matched.
    matched: u64,
    /// Letters deleted (0 in a dry run).
    purged: u64,
    dry_run: bool,
    /// The first matching letters, oldest first (at most 10).
    sample: Vec<DeadLetterView>,
    /// As a retry's: where to go on from, `null` when done.
    next_cursor: Option<String>,
}

#[utoipa::path(
    post,
    path = "/v1/queue/dead-letters/retry",
    tag = "queue",
    operation_id = "retryDeadLetters",
    request_body = BulkRequest,
    responses(
        (status = 200, description = "How many letters matched and were requested again.", body = RetryReport),
        (status = 400, description = "Invalid body, or no filter without `\"all\": true`.", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 503, description = "Redis did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `POST /v1/queue/dead-letters/retry`: request the letters' jobs again.
///
/// Each matching letter is requested again exactly as a single retry is
/// (dedup against a live job of its entity; a `compaction.requested`
/// event for a new job or follow-up) and removed, a batch at a time; each
/// batch's events are written before the next batch is read. Unlike a
/// single retry (the console's button, `compactor dlq retry`), a batch does
/// not hold its workstreams' rows while Redis requests the jobs (a
/// connection each, or SQLite's write lock, for 200 rows): a worker that
/// takes one of its jobs at once may write its `compaction.started` before
/// the batch's events.
///
/// A call works for at most `admin.bulk_call_budget` (half of
/// `admin.request_timeout` unless set), then answers with `next_cursor`:
/// the same body again with `after` set to it goes on from there, so a set
/// of any size is worked through in calls that each end in time (the
/// clients repeat them and add the reports up).
pub(super) async fn retry(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<BulkRequest>,
) -> Result<Json<RetryReport>, ApiError> {
    let filter = body.filter()?;
    let after = body.after()?;
    let (report, next_cursor) =
        bulk(&state, &filter, BulkAction::Retry, body.dry_run, after).await?;
    log_bulk(
        "retry",
        &filter,
        body.dry_run,
        &report,
        next_cursor.is_some(),
    );
    Ok(Json(RetryReport {
        matched: report.matched,
        retried: report.applied,
        skipped: report.skipped,
        dry_run: body.dry_run,
        sample: report.sample.into_iter().map(Into::into).collect(),
        next_cursor,
    }))
}

/// Walks the letters `filter` takes with `action`, from `after`, a batch
/// at a time, writing each batch's `compaction.requested` events (a retry's
/// requests) before the next batch is read, until none is left or the call
/// has worked for its budget. The report, and where the walk stopped when
/// letters are left.
async fn bulk(
    state: &AppState,
    filter: &DeadFilter,
    action: BulkAction,
    dry_run: bool,
    after: Option<DeadCursor>,
) -> Result<(BulkReport, Option<String>), ApiError> {
    let until = tokio::time::Instant::now() + state.bulk_budget();
    let compactor = state.compactor();
    let queue = compactor.queue();
    let mut walk = queue.dead_letters_walk(filter, action, dry_run).await?;
    if let Some(after) = after {
        walk.resume_after(after);
    }
    let mut report = BulkReport::default();
    loop {
        let more = queue.dead_letters_step(&mut walk, &mut report).await?;
        for r in report.retried.drain(..) {
            if let Some(trigger) = &r.trigger {
                record_requested(compactor.store(), &r.key, trigger, &r.outcome).await;
            }
        }
        if !more {
            return Ok((report, None));
        }
        if tokio::time::Instant::now() >= until {
            let next = walk.position().map(ToString::to_string);
            return Ok((report, next));
        }
    }
}

#[utoipa::path(
    post,
    path = "/v1/queue/dead-letters/purge",
    tag = "queue",
    operation_id = "purgeDeadLetters",
    request_body = BulkRequest,
    responses(
        (status = 200, description = "How many letters matched and were deleted.", body = PurgeReport),
        (status = 400, description = "Invalid body, or no filter without `\"all\": true`.", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 503, description = "Redis did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `POST /v1/queue/dead-letters/purge`: delete the letters.
///
/// Bounded per call as a retry is: `next_cursor`, and `after` to go on.
pub(super) async fn purge(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<BulkRequest>,
) -> Result<Json<PurgeReport>, ApiError> {
    let filter = body.filter()?;
    let after = body.after()?;
    let (report, next_cursor) =
        bulk(&state, &filter, BulkAction::Purge, body.dry_run, after).await?;
    log_bulk(
        "purge",
        &filter,
        body.dry_run,
        &report,
        next_cursor.is_some(),
    );
    Ok(Json(PurgeReport {
        matched: report.matched,
        purged: report.applied,
        dry_run: body.dry_run,
        sample: report.sample.into_iter().map(Into::into).collect(),
        next_cursor,
    }))
}

/// A filter from the routes' fields; the message of a refusal.
fn filter(
    reason: Option<&str>,
    domain: Option<&str>,
    older_than_secs: Option<u64>,
    entry: Option<&str>,
) -> Result<DeadFilter, String> {
    let older_than = older_than_secs
        .map(|secs| {
            if (1..=MAX_AGE_SECS).contains(&secs) {
                Ok(Duration::from_secs(secs))
            } else {
                Err(format!(
                    "older_than_secs: {secs} is not within 1-{MAX_AGE_SECS}"
                ))
            }
        })
        .transpose()?;
    Ok(DeadFilter {
        reason: reason
            .map(DeadReason::parse)
            .transpose()
            .map_err(|e| e.to_string())?,
        domain: domain
            .map(DeadFilter::parse_domain)
            .transpose()
            .map_err(|e| e.to_string())?,
        older_than,
        entry: entry
            .map(DeadFilter::parse_entry)
            .transpose()
            .map_err(|e| e.to_string())?,
    })
}

/// An operator's bulk operation, at info: what it chose and how many
/// (reasons and domains are bounded tokens, never message content).
fn log_bulk(op: &str, filter: &DeadFilter, dry_run: bool, report: &BulkReport, cut_short: bool) {
    info!(
        op,
        dry_run,
        reason = filter.reason.as_ref().map(DeadReason::as_str),
        domain = filter.domain.as_deref(),
        older_than_secs = filter.older_than.map(|d| d.as_secs()),
        matched = report.matched,
        applied = report.applied,
        skipped = report.skipped,
        cut_short,
        "dead letters in bulk"
    );
}
