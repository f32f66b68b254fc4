//! `POST /v1/workstreams/{domain}/{entity}/head`: moving the head of a
//! workstream to another message (appending after a parent is a field of
//! `POST …/messages`). See `compactor_producer::client::Compactor::move_head`.

use axum::extract::State;
use axum::Json;
use compactor_producer::client::HeadOutcome;
use compactor_shared::MessageId;
use serde::Deserialize;
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::{JsonBody, Workstream, WorkstreamPath};
use super::AppState;

/// Body of `POST …/head`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"message_id": 42}))]
pub(super) struct HeadRequest {
    /// The new head: a message of the workstream, not folded by a
    /// compaction.
    message_id: MessageId,
}

#[utoipa::path(
    post,
    path = "/v1/workstreams/{domain}/{entity}/head",
    tag = "workstreams",
    operation_id = "moveHead",
    params(WorkstreamPath),
    request_body = HeadRequest,
    responses(
        (status = 200, description = "Moved. `abandoned` is the branch left behind (its summary is requested: `branch_job`), `null` when the new head continues the old one.", body = HeadOutcome),
        (status = 400, description = "Invalid key or body.", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 404, description = "No such workstream (`unknown_workstream`), or the message is not one of its (`unknown_message`).", body = ErrorBody),
        (status = 409, description = "`branch_conflict`: the message was folded by a compaction (or forks before it), or a compaction runs and the move would leave a branch (retry after it).", body = ErrorBody),
        (status = 413, description = "The body is larger than `admin.max_body_bytes`.", body = ErrorBody),
        (status = 503, description = "The database did not answer, the schema is not current, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `POST …/head`: move the head to another message.
///
/// The context (`/context`) and compaction follow the path from the first
/// message to the head. When the new head does not continue the old one,
/// the branch left (from the common ancestor to the old head) is
/// summarized by a `summarize_branch` job, once per abandoned leaf, and
/// the summary is shown in the contexts of paths through its branch point.
pub(super) async fn move_head(
    State(state): State<AppState>,
    Workstream(key): Workstream,
    JsonBody(body): JsonBody<HeadRequest>,
) -> Result<Json<HeadOutcome>, ApiError> {
    Ok(Json(
        state.compactor().move_head(&key, body.message_id).await?,
    ))
}
