//! The `/v1/events/deliveries` routes: operators list webhook deliveries
//! of compaction events and retry failed ones (as `compactor events`
//! does). Behind the bearer token like every `/v1` route.

use axum::extract::{Path, State};
use axum::Json;
use compactor_producer::store::{DeliveryFilter, DeliveryRow, DeliveryState, RetryOutcome};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::QueryParams;
use super::AppState;

/// Deliveries per page when `limit` is not given.
pub const DEFAULT_PAGE: u64 = 100;
/// Most deliveries per page.
pub const MAX_PAGE: u64 = 1_000;

/// Query of `GET /v1/events/deliveries`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct DeliveriesQuery {
    /// Only deliveries in this state.
    #[param(inline)]
    state: Option<DeliveryState>,
    /// Only deliveries to this webhook (its configured name).
    endpoint: Option<String>,
    /// The page after this delivery id (`next_after` of the previous page).
    after: Option<i64>,
    /// Deliveries per page (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1_000)]
    limit: Option<u64>,
}

/// One page of deliveries, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DeliveriesPage {
    deliveries: Vec<DeliveryRow>,
    /// Pass as `after` for the next page; `null` on the last page.
    next_after: Option<i64>,
}

#[utoipa::path(
    get,
    path = "/v1/events/deliveries",
    tag = "events",
    operation_id = "listDeliveries",
    params(DeliveriesQuery),
    responses(
        (status = 200, description = "A page of deliveries, oldest first.", body = DeliveriesPage),
        (status = 400, description = "Invalid query.", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 503, description = "The database did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `GET /v1/events/deliveries`: webhook deliveries of compaction events.
///
/// Each is one event to one configured webhook: `pending` (tried again at
/// `next_attempt_at`), `delivered`, or `failed` (gave up after
/// `events.max_attempts`; retry it). Paginated by id: pass the answer's
/// `next_after` as `after`.
pub(super) async fn list(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<DeliveriesQuery>,
) -> Result<Json<DeliveriesPage>, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::InvalidQuery(format!(
            "limit: {limit} is not within 1-{MAX_PAGE}"
        )));
    }
    let filter = DeliveryFilter {
        state: query.state,
        endpoint: query.endpoint,
        after: query.after,
        limit,
    };
    let deliveries = state.compactor().store().deliveries(&filter).await?;
    let next_after = (deliveries.len() as u64 == limit)
        .then(|| deliveries.last().map(|d| d.id))
        .flatten();
    Ok(Json(DeliveriesPage {
        deliveries,
        next_after,
    }))
}

/// What a retry of one delivery did.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RetriedOne {
    id: i64,
    /// `requeued`: pending again, due now, its attempts counted from 0;
    /// `already_delivered`: nothing to do.
    outcome: String,
}

#[utoipa::path(
    post,
    path = "/v1/events/deliveries/{id}/retry",
    tag = "events",
    operation_id = "retryDelivery",
    params(("id" = i64, Path, description = "The delivery's id.")),
    responses(
        (status = 200, description = "Requeued (or delivered already).", body = RetriedOne),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 404, description = "No such delivery.", body = ErrorBody),
        (status = 503, description = "The database did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `POST /v1/events/deliveries/{id}/retry`: retry one delivery.
///
/// A `failed` (or `pending`) delivery is pending again, due now, with its
/// attempts counted from 0; a workers' relay posts it within its poll
/// interval.
pub(super) async fn retry_one(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<RetriedOne>, ApiError> {
    let unknown = || ApiError::UnknownDelivery(raw.chars().take(40).collect());
    let id: i64 = raw.parse().map_err(|_| unknown())?;
    let outcome = match state.compactor().store().retry_delivery(id).await? {
        RetryOutcome::Requeued => "requeued".to_owned(),
        RetryOutcome::AlreadyDelivered => "already_delivered".to_owned(),
        RetryOutcome::NotFound => return Err(unknown()),
    };
    Ok(Json(RetriedOne { id, outcome }))
}

/// Query of `POST /v1/events/deliveries/retry`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct RetryQuery {
    /// Which deliveries: `failed` (the only state retried in bulk).
    #[param(inline)]
    state: RetriedState,
    /// Only deliveries to this webhook.
    endpoint: Option<String>,
}

// A type of its own, so the document and the parser refuse any other
// state alike.
/// The states retried in bulk: only `failed` (a pending delivery is
/// retried anyway; a delivered one is not sent again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum RetriedState {
    Failed,
}

/// What a bulk retry did.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RetriedMany {
    /// Deliveries pending again.
    requeued: u64,
}

#[utoipa::path(
    post,
    path = "/v1/events/deliveries/retry",
    tag = "events",
    operation_id = "retryDeliveries",
    params(RetryQuery),
    responses(
        (status = 200, description = "How many failed deliveries are pending again.", body = RetriedMany),
        (status = 400, description = "Invalid query (`state` must be `failed`).", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 503, description = "The database did not answer, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `POST /v1/events/deliveries/retry?state=failed`: retry every failed
/// delivery (of one webhook, with `endpoint`).
pub(super) async fn retry_failed(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<RetryQuery>,
) -> Result<Json<RetriedMany>, ApiError> {
    // Any other state is refused by the parser (400), as the document says.
    let RetryQuery {
        state: RetriedState::Failed,
        endpoint,
    } = query;
    let requeued = state
        .compactor()
        .store()
        .retry_failed_deliveries(endpoint.as_deref())
        .await?;
    Ok(Json(RetriedMany { requeued }))
}
