//! `GET /v1/workstreams/{domain}/{entity}/recall`: find compacted (and
//! un-compacted) messages of a workstream by their words
//! ([`compactor_producer::recall`]).

use axum::extract::State;
use axum::Json;
use compactor_producer::recall::{Recall, RecallLimit, RecallQuery};
use serde::Deserialize;
use utoipa::IntoParams;

use super::error::{ApiError, ErrorBody};
use super::extract::{QueryParams, Workstream, WorkstreamPath};
use super::AppState;

/// Query of `GET …/recall`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct RecallParams {
    /// The words to find (all must match), at most 512 characters and 16
    /// words; words made only of ASCII punctuation are ignored, so `q`
    /// needs one character that is neither that nor whitespace or a control
    /// character (the pattern). Matching is exact per word,
    /// case-insensitive, without stemming.
    #[param(
        min_length = 1,
        max_length = 512,
        pattern = r"[^\s\x00-\x1f\x7f-\x9f!-/:-@\[-`{-~]"
    )]
    q: String,
    /// Most messages returned, newest first (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u64>,
}

#[utoipa::path(
    get,
    path = "/v1/workstreams/{domain}/{entity}/recall",
    tag = "workstreams",
    operation_id = "recall",
    params(WorkstreamPath, RecallParams),
    responses(
        (status = 200, description = "The matching messages, verbatim, newest first, each with the compaction run that folded it (`folded_by`, `null` while un-compacted).", body = Recall),
        (status = 400, description = "Invalid key, or `q` without a word, over 512 characters or 16 words, or `limit` out of range (`invalid_query`).", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 404, description = "No such workstream.", body = ErrorBody),
        (status = 503, description = "The database did not answer, the schema is not current, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `GET …/recall`: search a workstream's messages.
///
/// Compaction never deletes a message; recall finds it again. Returns the
/// newest messages containing every word of `q` (compacted or not), with
/// their ids (the `#N` a context's exact values point at) and the
/// compaction run that folded each.
pub(super) async fn recall(
    State(state): State<AppState>,
    Workstream(key): Workstream,
    QueryParams(params): QueryParams<RecallParams>,
) -> Result<Json<Recall>, ApiError> {
    let query = RecallQuery::parse(&params.q).map_err(|e| ApiError::InvalidQuery(e.to_string()))?;
    let limit = match params.limit {
        Some(limit) => {
            RecallLimit::new(limit).map_err(|e| ApiError::InvalidQuery(e.to_string()))?
        }
        None => RecallLimit::default(),
    };
    Ok(Json(state.compactor().recall(&key, &query, limit).await?))
}
