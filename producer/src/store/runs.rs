//! `compaction_runs`: the audit row every attempt leaves behind.

use chrono::{DateTime, Utc};
use compactor_shared::{EntityKey, MessageId};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};

use super::convert::{to_i32, to_i64, to_u32, to_u64};
use super::entities::compaction_run::{self, Column, Entity};
use super::workstreams::id_of;
use super::{Store, StoreError};
pub use crate::events::catalogue::HookOutcome;

/// How an attempt ended. Stored as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// Committed, and the workstream is below its trigger again.
    Committed,
    /// Committed, but the workstream is still over its trigger (counts
    /// towards the breaker).
    NoProgress,
    /// The attempt failed before it could commit.
    Failed,
    /// The fenced commit was refused (lease lost or watermark moved).
    Conflict,
    /// The pre-compaction hook answered "skip": nothing was compacted and
    /// the workstream is as it was.
    Skipped,
}

impl RunOutcome {
    pub const ALL: [RunOutcome; 5] = [
        RunOutcome::Committed,
        RunOutcome::NoProgress,
        RunOutcome::Failed,
        RunOutcome::Conflict,
        RunOutcome::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Committed => "committed",
            RunOutcome::NoProgress => "no_progress",
            RunOutcome::Failed => "failed",
            RunOutcome::Conflict => "conflict",
            RunOutcome::Skipped => "skipped",
        }
    }

    pub fn parse(s: &str) -> Option<RunOutcome> {
        RunOutcome::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

/// Why the extractive summarizer stood in for the LLM on a degraded run.
/// Stored as its snake_case name (`degraded_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DegradedReason {
    /// The LLM could not be reached or failed: connection, timeout, 5xx,
    /// rate limit, a malformed reply, the attempt's deadline.
    LlmUnavailable,
    /// The provider refused the request: the key (401/403), the model
    /// name or the request itself (another 4xx).
    LlmRefused,
    /// The LLM answered, but its answers were rejected by the checks
    /// (no sections, nothing but placeholders, cut off at the output
    /// limit, …).
    InvalidOutput,
    /// The LLM was not asked: the provider is marked unhealthy after
    /// consecutive failures, until a probe succeeds.
    LlmUnhealthy,
    /// Even the smallest chunk is too long for the model's context.
    ContextLength,
}

impl DegradedReason {
    pub const ALL: [DegradedReason; 5] = [
        DegradedReason::LlmUnavailable,
        DegradedReason::LlmRefused,
        DegradedReason::InvalidOutput,
        DegradedReason::LlmUnhealthy,
        DegradedReason::ContextLength,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DegradedReason::LlmUnavailable => "llm_unavailable",
            DegradedReason::LlmRefused => "llm_refused",
            DegradedReason::InvalidOutput => "invalid_output",
            DegradedReason::LlmUnhealthy => "llm_unhealthy",
            DegradedReason::ContextLength => "context_length",
        }
    }

    pub fn parse(s: &str) -> Option<DegradedReason> {
        DegradedReason::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl std::fmt::Display for DegradedReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run to record; a recorded one is a [`RunRow`], which holds it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NewRun {
    pub job_id: i64,
    pub attempt: u32,
    /// `auto`, `reactive`, `manual` or `follow_up`.
    pub trigger: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub outcome: RunOutcome,
    /// The extractive fallback wrote the summary (the LLM was unavailable).
    pub degraded: bool,
    /// Why, when `degraded`.
    pub degraded_reason: Option<DegradedReason>,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub messages_compacted: u64,
    pub chunks: u32,
    pub rollups: u32,
    /// Candidate evidence lines (verbatim lines of the compacted messages,
    /// and the evidence shown before) kept for the next context, and left
    /// out; 0 on runs that computed no compaction (failed, skipped).
    pub evidence_kept: u64,
    pub evidence_dropped: u64,
    /// The model asked (as the server reported it, else as configured);
    /// `None` for the extractive summarizer.
    pub llm_model: Option<String>,
    /// Requests sent to the LLM, retries included.
    pub llm_calls: u32,
    /// Of those, the ones that gave no usable answer: HTTP or connection
    /// failures, and answers rejected by the checks.
    pub llm_failed_calls: u32,
    /// Tokens the server reported, failed and rejected calls included.
    pub llm_tokens_in: u64,
    pub llm_tokens_out: u64,
    /// Why the attempt failed; on a degraded run, why the LLM's summary was
    /// not used.
    pub error: Option<String>,
    /// The rendered summary the run produced.
    pub summary: Option<String>,
    /// What the pre-compaction hook did (nothing recorded without a hook).
    #[serde(flatten)]
    pub hook: RunHook,
}

/// What the pre-compaction hook did on a run: both `None` when no hook
/// is configured (and on rows written before hooks existed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunHook {
    #[serde(rename = "hook_outcome", serialize_with = "hook_outcome_label")]
    pub outcome: Option<HookOutcome>,
    /// How long the call took.
    #[serde(rename = "hook_duration_ms")]
    pub duration_ms: Option<u64>,
}

fn hook_outcome_label<S: serde::Serializer>(
    outcome: &Option<HookOutcome>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match outcome {
        Some(o) => s.serialize_str(o.as_str()),
        None => s.serialize_none(),
    }
}

/// A recorded run: the run as it was recorded, with its row id and
/// workstream. Serialized flat (`{"id": …, "workstream_id": …, "job_id": …}`),
/// as the CLI's `--json` prints it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunRow {
    pub id: i64,
    pub workstream_id: i64,
    /// `degraded_reason` is `None` on rows written before the reason was
    /// recorded, the LLM call counts are 0 on rows written before calls
    /// were counted, and the evidence counts on rows written before
    /// evidence lines were counted.
    #[serde(flatten)]
    pub run: NewRun,
}

impl Store {
    /// The workstream's runs, newest first, at most `limit` (none when the
    /// workstream does not exist).
    pub async fn runs(&self, key: &EntityKey, limit: u64) -> Result<Vec<RunRow>, StoreError> {
        const OP: &str = "runs";
        let Some(workstream_id) = id_of(&self.db, key, OP).await? else {
            return Ok(Vec::new());
        };
        Entity::find()
            .filter(Column::WorkstreamId.eq(workstream_id))
            .order_by_desc(Column::Id)
            .limit(limit)
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?
            .into_iter()
            .map(to_row)
            .collect()
    }

    /// One page of the workstream's runs, newest first: at most `limit`,
    /// only those older than run `before` when given (the previous page's
    /// last id: a cursor that stays correct while new runs are written).
    pub async fn runs_page(
        &self,
        key: &EntityKey,
        before: Option<i64>,
        limit: u64,
    ) -> Result<Vec<RunRow>, StoreError> {
        const OP: &str = "runs_page";
        let Some(workstream_id) = id_of(&self.db, key, OP).await? else {
            return Ok(Vec::new());
        };
        let mut query = Entity::find().filter(Column::WorkstreamId.eq(workstream_id));
        if let Some(before) = before {
            query = query.filter(Column::Id.lt(before));
        }
        query
            .order_by_desc(Column::Id)
            .limit(limit)
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?
            .into_iter()
            .map(to_row)
            .collect()
    }

    /// Run `id` of workstream `workstream_id`, if it is one of its runs.
    pub async fn run_of(&self, workstream_id: i64, id: i64) -> Result<Option<RunRow>, StoreError> {
        Entity::find_by_id(id)
            .filter(Column::WorkstreamId.eq(workstream_id))
            .one(&self.db)
            .await
            .map_err(StoreError::db("run_of"))?
            .map(to_row)
            .transpose()
    }

    /// The newest run of `workstream_id` older than run `before` that
    /// wrote a summary: what a run's summary is compared with (runs that
    /// failed or were skipped wrote none, so they are passed over).
    pub async fn previous_summary_run(
        &self,
        workstream_id: i64,
        before: i64,
    ) -> Result<Option<RunRow>, StoreError> {
        Entity::find()
            .filter(Column::WorkstreamId.eq(workstream_id))
            .filter(Column::Id.lt(before))
            .filter(Column::Summary.is_not_null())
            .order_by_desc(Column::Id)
            .one(&self.db)
            .await
            .map_err(StoreError::db("previous_summary_run"))?
            .map(to_row)
            .transpose()
    }

    /// Records a run outside of any commit (e.g. a job that found nothing
    /// to do). The fenced commit and the failure path record theirs
    /// themselves.
    pub async fn record_run(&self, workstream_id: i64, run: &NewRun) -> Result<i64, StoreError> {
        insert_run(&self.db, workstream_id, run, "record_run").await
    }
}

pub(crate) async fn insert_run<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    run: &NewRun,
    op: &'static str,
) -> Result<i64, StoreError> {
    insert_run_at(db, workstream_id, run, None, op).await
}

/// [`insert_run`] of a committed run, with the watermark its commit wrote
/// (which says, for recall, which messages it folded).
pub(crate) async fn insert_run_at<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    run: &NewRun,
    watermark: Option<MessageId>,
    op: &'static str,
) -> Result<i64, StoreError> {
    let row = compaction_run::ActiveModel {
        workstream_id: Set(workstream_id),
        job_id: Set(run.job_id),
        attempt: Set(to_i32(run.attempt)),
        trigger: Set(run.trigger.clone()),
        started_at: Set(run.started_at),
        finished_at: Set(run.finished_at),
        outcome: Set(run.outcome.as_str().to_owned()),
        degraded: Set(run.degraded),
        degraded_reason: Set(run.degraded_reason.map(|r| r.as_str().to_owned())),
        tokens_before: Set(to_i64(run.tokens_before)),
        tokens_after: Set(to_i64(run.tokens_after)),
        messages_compacted: Set(to_i64(run.messages_compacted)),
        chunks: Set(to_i32(run.chunks)),
        rollups: Set(to_i32(run.rollups)),
        evidence_kept: Set(to_i64(run.evidence_kept)),
        evidence_dropped: Set(to_i64(run.evidence_dropped)),
        llm_model: Set(run.llm_model.clone()),
        llm_calls: Set(to_i32(run.llm_calls)),
        llm_failed_calls: Set(to_i32(run.llm_failed_calls)),
        llm_tokens_in: Set(to_i64(run.llm_tokens_in)),
        llm_tokens_out: Set(to_i64(run.llm_tokens_out)),
        error: Set(run.error.clone()),
        summary: Set(run.summary.clone()),
        hook_outcome: Set(run.hook.outcome.map(|o| o.as_str().to_owned())),
        hook_duration_ms: Set(run.hook.duration_ms.map(to_i64)),
        watermark: Set(watermark.map(|w| w.0)),
        ..Default::default()
    };
    let res = Entity::insert(row)
        .exec(db)
        .await
        .map_err(StoreError::db(op))?;
    Ok(res.last_insert_id)
}

pub(super) fn to_row(m: compaction_run::Model) -> Result<RunRow, StoreError> {
    let outcome = RunOutcome::parse(&m.outcome).ok_or_else(|| StoreError::CorruptRow {
        table: "compaction_runs",
        id: m.id,
        detail: format!("outcome: unknown outcome {:?}", m.outcome),
    })?;
    let degraded_reason = match m.degraded_reason.as_deref() {
        None => None,
        Some(text) => Some(
            DegradedReason::parse(text).ok_or_else(|| StoreError::CorruptRow {
                table: "compaction_runs",
                id: m.id,
                detail: format!("degraded_reason: unknown reason {text:?}"),
            })?,
        ),
    };
    let hook_outcome = match m.hook_outcome.as_deref() {
        None => None,
        Some(text) => Some(
            HookOutcome::parse(text).ok_or_else(|| StoreError::CorruptRow {
                table: "compaction_runs",
                id: m.id,
                detail: format!("hook_outcome: unknown outcome {text:?}"),
            })?,
        ),
    };
    Ok(RunRow {
        id: m.id,
        workstream_id: m.workstream_id,
        run: NewRun {
            job_id: m.job_id,
            attempt: to_u32(m.attempt),
            trigger: m.trigger,
            started_at: m.started_at,
            finished_at: m.finished_at,
            outcome,
            degraded: m.degraded,
            degraded_reason,
            tokens_before: to_u64(m.tokens_before),
            tokens_after: to_u64(m.tokens_after),
            messages_compacted: to_u64(m.messages_compacted),
            chunks: to_u32(m.chunks),
            rollups: to_u32(m.rollups),
            evidence_kept: to_u64(m.evidence_kept),
            evidence_dropped: to_u64(m.evidence_dropped),
            llm_model: m.llm_model,
            llm_calls: to_u32(m.llm_calls),
            llm_failed_calls: to_u32(m.llm_failed_calls),
            llm_tokens_in: to_u64(m.llm_tokens_in),
            llm_tokens_out: to_u64(m.llm_tokens_out),
            error: m.error,
            summary: m.summary,
            hook: RunHook {
                outcome: hook_outcome,
                duration_ms: m.hook_duration_ms.map(to_u64),
            },
        },
    })
}
