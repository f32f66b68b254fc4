//! `compaction_runs`.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "compaction_runs")]
pub(crate) struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub workstream_id: i64,
    pub job_id: i64,
    pub attempt: i32,
    pub trigger: String,
    pub started_at: DateTimeUtc,
    pub finished_at: DateTimeUtc,
    pub outcome: String,
    pub degraded: bool,
    pub degraded_reason: Option<String>,
    pub tokens_before: i64,
    pub tokens_after: i64,
    pub messages_compacted: i64,
    pub chunks: i32,
    pub rollups: i32,
    pub llm_model: Option<String>,
    pub llm_calls: i32,
    pub llm_failed_calls: i32,
    pub llm_tokens_in: i64,
    pub llm_tokens_out: i64,
    #[sea_orm(column_type = "Text", nullable)]
    pub error: Option<String>,
    #[sea_orm(column_type = "Text", nullable)]
    pub summary: Option<String>,
    pub hook_outcome: Option<String>,
    pub hook_duration_ms: Option<i64>,
    /// The watermark a committed run wrote (NULL for every other outcome):
    /// recall's "folded by" is the committed run with the lowest watermark
    /// at or above a compacted message.
    pub watermark: Option<i64>,
    /// Candidate evidence lines the run kept for the next context, and
    /// left out (0 on rows written before they were counted).
    pub evidence_kept: i64,
    pub evidence_dropped: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
