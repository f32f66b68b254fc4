//! The `/v1/workstreams/{domain}/{entity}/…` routes: the client API
//! ([`compactor_producer::client::Compactor`]) over HTTP, for chat backends
//! written in any language. Shapes are documented in `docs/openapi.yaml`.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use compactor_producer::client::{
    AppendOutcome, IncomingMessage, Readiness, TurnOutcome, WaitMode, WorkstreamStatus,
};
use compactor_producer::queue::EnqueueOutcome;
use compactor_shared::trigger::Usage;
use compactor_shared::MessageId;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{IdempotencyKeyHeader, JsonBody, OptionalJson, QueryParams, Workstream};
use super::AppState;

/// `timeout_ms` of `/wait` when none is given.
pub const DEFAULT_WAIT_MS: u64 = 10_000;
/// Longest `/wait` accepted: beyond this, proxies and load balancers
/// commonly cut idle requests, and a chat turn should not stall longer.
pub const MAX_WAIT_MS: u64 = 60_000;

/// Body of `POST …/messages`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AppendRequest {
    messages: Vec<IncomingMessage>,
    /// Also end the turn (`finalize_turn`) after storing the messages:
    /// one round trip for the common "store the turn, then let compactor
    /// decide" step.
    #[serde(default)]
    finalize: bool,
    /// Usage the provider reported for the last step (with `finalize`).
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Serialize)]
pub(super) struct AppendResponse {
    /// The messages' ids in the order given; a message an earlier try
    /// stored (same client id) keeps the id it got then.
    ids: Vec<MessageId>,
    uncompacted_tokens: u64,
    /// How many of the messages an earlier try had stored already.
    already_stored: usize,
    /// What ending the turn did; only with `finalize: true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    turn: Option<TurnJson>,
}

/// [`TurnOutcome`] with what the enqueue did (the Rust type leaves it out
/// of its JSON).
#[derive(Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum TurnJson {
    NotDue {
        current_tokens: u64,
        threshold_tokens: Option<u64>,
    },
    Requested {
        current_tokens: u64,
        threshold_tokens: Option<u64>,
        enqueue: EnqueueJson,
    },
    BreakerOpen {
        current_tokens: u64,
        consecutive_failures: u32,
    },
    /// Due, but Redis did not take the request: the messages are stored,
    /// the compaction is not requested.
    Unavailable {
        current_tokens: u64,
        threshold_tokens: Option<u64>,
        reason: String,
    },
}

impl From<TurnOutcome> for TurnJson {
    fn from(outcome: TurnOutcome) -> TurnJson {
        match outcome {
            TurnOutcome::NotDue {
                current_tokens,
                threshold_tokens,
            } => TurnJson::NotDue {
                current_tokens,
                threshold_tokens,
            },
            TurnOutcome::Requested {
                current_tokens,
                threshold_tokens,
                enqueue,
            } => TurnJson::Requested {
                current_tokens,
                threshold_tokens,
                enqueue: enqueue.into(),
            },
            TurnOutcome::BreakerOpen {
                current_tokens,
                consecutive_failures,
            } => TurnJson::BreakerOpen {
                current_tokens,
                consecutive_failures,
            },
            TurnOutcome::Unavailable {
                current_tokens,
                threshold_tokens,
                reason,
            } => TurnJson::Unavailable {
                current_tokens,
                threshold_tokens,
                reason,
            },
        }
    }
}

/// What a compaction request did: `added`, `coalesced` (into a waiting
/// job) or `followup` (recorded to run after the running one).
#[derive(Debug, Serialize)]
struct EnqueueJson {
    outcome: &'static str,
    job_id: u64,
}

impl From<EnqueueOutcome> for EnqueueJson {
    fn from(outcome: EnqueueOutcome) -> EnqueueJson {
        let job_id = match outcome {
            EnqueueOutcome::Added { job_id }
            | EnqueueOutcome::Coalesced { job_id }
            | EnqueueOutcome::FollowUpRecorded { job_id } => job_id,
        };
        EnqueueJson {
            outcome: outcome.label(),
            job_id,
        }
    }
}

/// `POST …/messages`: stores the messages in order, in one transaction
/// (the workstream is created on first use); with `finalize`, then ends
/// the turn. An empty `messages` with `finalize` ends a turn that added
/// nothing (404 for a workstream that does not exist).
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
        let ws = compactor.store().workstream(&key).await?.ok_or_else(|| {
            ApiError::UnknownWorkstream(format!("{}/{}", key.domain(), key.entity_id()))
        })?;
        AppendOutcome {
            ids: Vec::new(),
            uncompacted_tokens: ws.uncompacted_tokens,
            already_stored: 0,
        }
    } else if let Some(idempotency_key) = &idempotency_key {
        compactor
            .append_messages_once(&key, idempotency_key, body.messages)
            .await?
    } else {
        compactor.append_messages(&key, body.messages).await?
    };
    let turn = if body.finalize {
        Some(compactor.finalize_turn(&key, body.usage).await?.into())
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
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CompactRequest {
    /// Focus instructions for the summarizer ("keep the API decisions").
    #[serde(default)]
    instructions: Option<String>,
}

/// `POST …/compact`: requests a compaction now, whatever the size (and
/// closes the circuit breaker). 202: the job runs in the background; `/wait`
/// or `/status` follow it.
pub(super) async fn compact(
    State(state): State<AppState>,
    Workstream(key): Workstream,
    OptionalJson(body): OptionalJson<CompactRequest>,
) -> Result<Response, ApiError> {
    let outcome = state
        .compactor()
        .compact_now(&key, body.instructions)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(EnqueueJson::from(outcome))).into_response())
}

/// `GET …/status`: lease, last compaction, breaker, and the queue's job
/// (`"job"`: `null`, or `{"state": "waiting" | "running" | "done" | "dead",
/// "job_id", …}` with `attempt` and `followup_pending` while running).
pub(super) async fn status(
    State(state): State<AppState>,
    Workstream(key): Workstream,
) -> Result<Json<WorkstreamStatus>, ApiError> {
    Ok(Json(state.compactor().status(&key).await?))
}

/// `GET …/context`: what to send the model next (summary first, then the
/// un-compacted messages).
pub(super) async fn context(
    State(state): State<AppState>,
    Workstream(key): Workstream,
) -> Result<Response, ApiError> {
    let context = state.compactor().build_context(&key).await?;
    Ok(Json(context).into_response())
}

/// Query of `GET …/wait`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WaitQuery {
    timeout_ms: Option<u64>,
    /// `requested` (the default): the whole requested compaction;
    /// `running`: only one that holds the workstream now.
    #[serde(default)]
    mode: WaitMode,
}

/// `GET …/wait?timeout_ms=N&mode=requested|running`: a long poll that
/// returns as soon as nothing `mode` covers is pending (`ready`, or
/// `compacted` when the requested compaction committed, with what it did),
/// at once when a compaction is queued but no worker is live
/// (`no_live_worker`), or after `timeout_ms` (`timed_out`, with the phase
/// the compaction was in): all 200, `outcome` says which (the JSON of
/// [`Readiness`]). 503 when the worker begins shutting down.
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
