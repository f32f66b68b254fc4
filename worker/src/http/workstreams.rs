//! The `/v1/workstreams/{domain}/{entity}/…` routes: the client API
//! ([`compactor_producer::client::Compactor`]) over HTTP, for chat backends
//! written in any language. Shapes are documented in `docs/openapi.yaml`.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use compactor_producer::client::{
    AppendOutcome, IncomingMessage, Readiness, TurnOutcome, WorkstreamStatus,
};
use compactor_producer::events::CompactionEvent;
use compactor_producer::queue::{EnqueueOutcome, JobState};
use compactor_shared::trigger::Usage;
use compactor_shared::MessageId;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{JsonBody, OptionalJson, QueryParams, Workstream};
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
    ids: Vec<MessageId>,
    uncompacted_tokens: u64,
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
pub(super) async fn append(
    State(state): State<AppState>,
    Workstream(key): Workstream,
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
        let status = compactor.status(&key).await?;
        AppendOutcome {
            ids: Vec::new(),
            uncompacted_tokens: status.uncompacted_tokens,
        }
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

#[derive(Debug, Serialize)]
pub(super) struct StatusJson {
    #[serde(flatten)]
    status: WorkstreamStatus,
    /// The queue's view of the workstream's job; `null` when it never had
    /// one (or its record aged out).
    job: Option<JobJson>,
}

#[derive(Debug, Serialize)]
struct JobJson {
    /// `waiting`, `running`, `done` or `dead`.
    state: &'static str,
    job_id: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    followup_pending: Option<bool>,
}

impl From<JobState> for JobJson {
    fn from(state: JobState) -> JobJson {
        let plain = |state, job_id| JobJson {
            state,
            job_id,
            attempt: None,
            followup_pending: None,
        };
        match state {
            JobState::Waiting { job_id } => plain("waiting", job_id),
            JobState::Running {
                job_id,
                attempt,
                followup_pending,
            } => JobJson {
                state: "running",
                job_id,
                attempt: Some(attempt),
                followup_pending: Some(followup_pending),
            },
            JobState::Done { job_id } => plain("done", job_id),
            JobState::Dead { job_id } => plain("dead", job_id),
        }
    }
}

/// `GET …/status`: lease, last compaction, breaker, and the queue's job.
pub(super) async fn status(
    State(state): State<AppState>,
    Workstream(key): Workstream,
) -> Result<Json<StatusJson>, ApiError> {
    let mut status = state.compactor().status(&key).await?;
    let job = status.job.take().map(JobJson::from);
    Ok(Json(StatusJson { status, job }))
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
}

#[derive(Debug, Serialize)]
pub(super) struct WaitJson {
    /// No compaction holds the workstream (any more): build the context.
    ready: bool,
    /// The timeout passed with a compaction still running: proceed with
    /// the context as it is.
    timed_out: bool,
    waited_ms: u64,
    /// What the compaction that was waited for did; `null` when none was
    /// running or its announcement was missed.
    event: Option<CompactionEvent>,
}

/// `GET …/wait?timeout_ms=N`: a long poll that returns as soon as no
/// compaction holds the workstream, or after `timeout_ms` (both 200; the
/// body says which), or with 503 when the worker begins shutting down.
pub(super) async fn wait(
    State(state): State<AppState>,
    Workstream(key): Workstream,
    QueryParams(query): QueryParams<WaitQuery>,
) -> Result<Json<WaitJson>, ApiError> {
    let timeout_ms = query.timeout_ms.unwrap_or(DEFAULT_WAIT_MS);
    if timeout_ms > MAX_WAIT_MS {
        return Err(ApiError::InvalidQuery(format!(
            "timeout_ms: {timeout_ms} is above the maximum of {MAX_WAIT_MS}"
        )));
    }
    let waiting = state
        .compactor()
        .wait_until_ready(&key, Duration::from_millis(timeout_ms));
    let readiness = tokio::select! {
        readiness = waiting => readiness?,
        () = state.shutdown().cancelled() => return Err(ApiError::ShuttingDown),
    };
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    Ok(Json(match readiness {
        Readiness::Ready { waited, event } => WaitJson {
            ready: true,
            timed_out: false,
            waited_ms: millis(waited),
            event,
        },
        Readiness::TimedOut { waited } => WaitJson {
            ready: false,
            timed_out: true,
            waited_ms: millis(waited),
            event: None,
        },
    }))
}
