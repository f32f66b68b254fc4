//! The `/v1/workstreams/{domain}/{entity}/…` routes: the client API
//! ([`compactor_producer::client::Compactor`]) over HTTP, for chat backends
//! written in any language. Shapes are in the OpenAPI document generated
//! from these handlers (`GET /openapi.json`, `docs/openapi.json`).

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use compactor_producer::client::{
    AppendOutcome, IncomingMessage, Readiness, TurnContext, TurnOutcome, WaitMode, WorkstreamStatus,
};
use compactor_producer::queue::EnqueueOutcome;
use compactor_shared::trigger::Usage;
use compactor_shared::MessageId;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{
    IdempotencyKeyHeader, JsonBody, OptionalJson, QueryParams, Workstream, WorkstreamPath,
};
use super::AppState;

/// `timeout_ms` of `/wait` when none is given.
pub const DEFAULT_WAIT_MS: u64 = 10_000;
/// Longest `/wait` accepted: beyond this, proxies and load balancers
/// commonly cut idle requests, and a chat turn should not stall longer.
pub const MAX_WAIT_MS: u64 = 60_000;

/// Body of `POST …/messages`. `messages` may be empty only with
/// `"finalize": true`, and `usage` is only read with it: the document
/// states both (`constrain_append_request`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "messages": [
        {"role": "user", "parts": [{"type": "text", "text": "Why does the deploy fail?"}]},
        {"role": "assistant", "parts": [{"type": "text", "text": "The migration 0042 times out."}]}
    ],
    "finalize": true
}))]
pub(super) struct AppendRequest {
    /// The messages to store, in order (at least one unless `finalize`).
    messages: Vec<IncomingMessage>,
    /// Also end the turn (`finalize_turn`) after storing the messages:
    /// one round trip for the common "store the turn, then let compactor
    /// decide" step.
    #[serde(default)]
    finalize: bool,
    /// Usage the provider reported for the last step (only with
    /// `finalize`).
    #[serde(default)]
    usage: Option<Usage>,
    /// The message the first message continues (a message of the
    /// workstream; absent: the head). One off the head's branch forks: the
    /// head moves to the last message, and the branch left is summarized
    /// (`summarize_branch`). 400 `invalid_parent` for a message that is not
    /// the workstream's; 409 `branch_conflict` for one a compaction folded.
    #[serde(default)]
    parent_id: Option<MessageId>,
}

/// States in the document what [`append`] refuses beyond the types: an
/// empty `messages` or a `usage` without `"finalize": true` (JSON Schema:
/// either `finalize` is `true`, or `messages` has an item and `usage` is
/// absent or null).
pub(super) fn constrain_append_request(schema: &mut serde_json::Value) {
    schema["anyOf"] = serde_json::json!([
        {
            "required": ["finalize"],
            "properties": {"finalize": {"const": true}}
        },
        {
            "properties": {
                "finalize": {"const": false},
                "messages": {"minItems": 1},
                "usage": {"type": "null"}
            }
        }
    ]);
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct AppendResponse {
    /// The messages' ids in the order given; a message an earlier try
    /// stored (same client id) keeps the id it got then.
    ids: Vec<MessageId>,
    uncompacted_tokens: u64,
    /// How many of the messages an earlier try had stored already.
    already_stored: usize,
    /// What ending the turn did; only with `finalize: true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    turn: Option<TurnOutcome>,
}

#[utoipa::path(
    post,
    path = "/v1/workstreams/{domain}/{entity}/messages",
    tag = "workstreams",
    operation_id = "appendMessages",
    params(
        WorkstreamPath,
        (
            "Idempotency-Key" = Option<String>,
            Header,
            description = "Makes the request safe to retry: message `i` without a `client_id` of its own is named `<key>#<i>` (1-200 bytes of printable ASCII; anything else is a 400 `invalid_header`).",
            min_length = 1,
            max_length = 200,
            pattern = "^[!-~]([ -~]*[!-~])?$",
        ),
    ),
    request_body = AppendRequest,
    responses(
        (status = 200, description = "Stored (and, with `finalize`, the turn ended; `turn.outcome` is `unavailable` when Redis did not take the compaction request).", body = AppendResponse),
        (status = 400, description = "Invalid key, body, message or header.", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 404, description = "`finalize` with no messages, for a workstream that does not exist; or a `parent_id` that is not one of the workstream's messages (`invalid_parent`).", body = ErrorBody),
        (status = 409, description = "A client id names a stored message with other content (`client_id_conflict`), or `parent_id` was folded by a compaction or would leave a branch while one runs (`branch_conflict`); nothing was stored.", body = ErrorBody),
        (status = 413, description = "The body is larger than `admin.max_body_bytes`.", body = ErrorBody),
        (status = 503, description = "The database did not answer, the schema is not current, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `POST …/messages`: append messages (and optionally end the turn).
///
/// Stores the messages in order, in one transaction (the workstream is
/// created on first use); with `finalize`, then ends the turn: the
/// workstream is measured against its trigger and a compaction is
/// requested when it is over. An empty `messages` with `finalize` ends a
/// turn that added nothing (404 for a workstream that does not exist).
///
/// Safe to retry: messages with a `client_id`, or every message of a
/// request with an `Idempotency-Key`, are stored once however often the
/// request is sent, and answered with the same ids. Once the messages are
/// stored the answer is 200 even when Redis cannot take the compaction
/// request (`turn.outcome: "unavailable"`): a 503 would tell the client to
/// send again what is already stored.
pub(super) async fn append(
    State(state): State<AppState>,
    Workstream(key): Workstream,
    IdempotencyKeyHeader(idempotency_key): IdempotencyKeyHeader,
    JsonBody(body): JsonBody<AppendRequest>,
) -> Result<Json<AppendResponse>, ApiError> {
    if body.usage.is_some() && !body.finalize {
        return Err(ApiError::InvalidBody(
            "usage is only read with \"finalize\": true".to_owned(),
        ));
    }
    let compactor = state.compactor();
    let appended = if body.messages.is_empty() {
        if !body.finalize {
            return Err(ApiError::InvalidBody(
                "messages: give at least one message, or \"finalize\": true".to_owned(),
            ));
        }
        // The database only: ending a turn must not need Redis to say
        // what is stored.
        let ws = compactor
            .store()
            .workstream_lean(&key)
            .await?
            .ok_or_else(|| {
                ApiError::UnknownWorkstream(format!("{}/{}", key.domain(), key.entity_id()))
            })?;
        AppendOutcome {
            ids: Vec::new(),
            uncompacted_tokens: ws.uncompacted_tokens,
            already_stored: 0,
        }
    } else if let Some(idempotency_key) = &idempotency_key {
        compactor
            .append_messages_once_after(&key, idempotency_key, body.parent_id, body.messages)
            .await?
    } else {
        compactor
            .append_messages_after(&key, body.parent_id, body.messages)
            .await?
    };
    let turn = if body.finalize {
        Some(compactor.finalize_turn(&key, body.usage).await?)
    } else {
        None
    };
    Ok(Json(AppendResponse {
        ids: appended.ids,
        uncompacted_tokens: appended.uncompacted_tokens,
        already_stored: appended.already_stored,
        turn,
    }))
}

/// Body of `POST …/compact` (optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CompactRequest {
    /// Focus instructions for the summarizer ("keep the API decisions").
    #[serde(default)]
    instructions: Option<String>,
}

#[utoipa::path(
    post,
    path = "/v1/workstreams/{domain}/{entity}/compact",
    tag = "workstreams",
    operation_id = "compactNow",
    params(WorkstreamPath),
    request_body(content = Option<CompactRequest>, description = "Optional; an empty body is `{}`."),
    responses(
        (status = 202, description = "Requested: a new job, joined a waiting one, or recorded to run once after the running one.", body = EnqueueOutcome),
        (status = 400, description = "Invalid key or body (instructions over 4,096 bytes).", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 404, description = "No such workstream.", body = ErrorBody),
        (status = 413, description = "The body is larger than `admin.max_body_bytes`.", body = ErrorBody),
        (status = 503, description = "Redis or the database did not answer, the schema is not current, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `POST …/compact`: request a compaction now.
///
/// Whatever the size, with optional focus instructions for the
/// summarizer; also closes the circuit breaker. 202: the job runs in the
/// background; `/wait` or `/status` follow it.
pub(super) async fn compact(
    State(state): State<AppState>,
    Workstream(key): Workstream,
    OptionalJson(body): OptionalJson<CompactRequest>,
) -> Result<Response, ApiError> {
    let outcome = state
        .compactor()
        .compact_now(&key, body.instructions)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(outcome)).into_response())
}

#[utoipa::path(
    get,
    path = "/v1/workstreams/{domain}/{entity}/status",
    tag = "workstreams",
    operation_id = "status",
    params(WorkstreamPath),
    responses(
        (status = 200, description = "The status.", body = WorkstreamStatus),
        (status = 400, description = "Invalid key.", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 404, description = "No such workstream.", body = ErrorBody),
        (status = 503, description = "Redis or the database did not answer, the schema is not current, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `GET …/status`: compaction status of a workstream.
///
/// Lease, last compaction, breaker, and the queue's job
/// (`"job"`: `null`, or `{"state": "waiting" | "running" | "done" | "dead",
/// "job_id", …}` with `attempt` and `followup_pending` while running).
pub(super) async fn status(
    State(state): State<AppState>,
    Workstream(key): Workstream,
) -> Result<Json<WorkstreamStatus>, ApiError> {
    Ok(Json(state.compactor().status(&key).await?))
}

#[utoipa::path(
    get,
    path = "/v1/workstreams/{domain}/{entity}/context",
    tag = "workstreams",
    operation_id = "context",
    params(WorkstreamPath),
    responses(
        (status = 200, description = "The context: the summary, structured state, exact values and memory as the first message, then the un-compacted messages (bounded by `database.context_max_messages` and `context_max_tokens`: past the bound only the newest, and `truncated`).", body = TurnContext),
        (status = 400, description = "Invalid key.", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 404, description = "No such workstream.", body = ErrorBody),
        (status = 503, description = "The database did not answer, the schema is not current, or the request outlasted `admin.request_timeout`.", body = ErrorBody),
    ),
)]
/// `GET …/context`: the next turn's context.
///
/// What to send the model next: the summary, structured state, exact
/// values and memory as the first message, then the un-compacted
/// messages. Tool halves whose partner is gone are turned into text; the
/// summary is shrunk if the whole would overflow the window.
pub(super) async fn context(
    State(state): State<AppState>,
    Workstream(key): Workstream,
) -> Result<Response, ApiError> {
    let json = state.compactor().context_json(&key).await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], json).into_response())
}

/// Query of `GET …/wait`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct WaitQuery {
    /// Longest wait in milliseconds (default 10000).
    #[param(maximum = 60_000)]
    timeout_ms: Option<u64>,
    /// `requested` (the default): the whole requested compaction;
    /// `running`: only one that holds the workstream now.
    #[serde(default)]
    #[param(inline)]
    mode: WaitMode,
}

#[utoipa::path(
    get,
    path = "/v1/workstreams/{domain}/{entity}/wait",
    tag = "workstreams",
    operation_id = "wait",
    params(WorkstreamPath, WaitQuery),
    responses(
        (status = 200, description = "What the wait saw (`outcome`); after `timed_out` or `no_live_worker`, proceed with the context as it is.", body = Readiness),
        (status = 400, description = "Invalid key or query.", body = ErrorBody),
        (status = 401, description = "Missing or invalid bearer token.", body = ErrorBody),
        (status = 404, description = "No such workstream.", body = ErrorBody),
        (
            status = 503,
            description = "Redis or the database did not answer, the worker is shutting down (`shutting_down`), or too many long polls are waiting (`overloaded`, with `Retry-After`).",
            body = ErrorBody,
            headers(("Retry-After" = u32, description = "Seconds to wait before retrying (`overloaded` only).")),
        ),
    ),
)]
/// `GET …/wait`: wait (long poll) for the requested compaction.
///
/// With `mode=requested` (the default), waits for the whole requested
/// compaction: queued, running, and backing off between attempts (and a
/// follow-up requested meanwhile). With `mode=running`, waits only for a
/// compaction that holds the workstream now (its entity lease), and never
/// reads Redis.
///
/// Returns as soon as nothing `mode` covers is pending (`ready`, or
/// `compacted` when the requested compaction committed, with what it
/// did), at once when a compaction is queued but no worker is live
/// (`no_live_worker`), or after `timeout_ms` (`timed_out`, with the phase
/// the compaction was in): all 200, `outcome` says which (`Readiness`).
/// Woken by announcements (the worker's at the end of each run, the
/// queue's when a job settles), at a lease deadline (its holder may have
/// died), and by a coarse re-check every 2 s. 503 when the worker begins
/// shutting down.
pub(super) async fn wait(
    State(state): State<AppState>,
    Workstream(key): Workstream,
    QueryParams(query): QueryParams<WaitQuery>,
) -> Result<Json<Readiness>, ApiError> {
    let timeout_ms = query.timeout_ms.unwrap_or(DEFAULT_WAIT_MS);
    if timeout_ms > MAX_WAIT_MS {
        return Err(ApiError::InvalidQuery(format!(
            "timeout_ms: {timeout_ms} is above the maximum of {MAX_WAIT_MS}"
        )));
    }
    let waiting = state
        .compactor()
        .wait(&key, query.mode, Duration::from_millis(timeout_ms));
    tokio::select! {
        readiness = waiting => Ok(Json(readiness?)),
        () = state.shutdown().cancelled() => Err(ApiError::ShuttingDown),
    }
}
