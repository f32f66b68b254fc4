//! `workstreams`.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "workstreams")]
pub(crate) struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub domain: String,
    pub entity_id: String,
    #[sea_orm(column_type = "Text", nullable)]
    pub compaction_summary: Option<String>,
    pub summary_tokens: i64,
    #[sea_orm(column_type = "Text")]
    pub state: String,
    #[sea_orm(column_type = "Text", nullable)]
    pub memory_block_summary: Option<String>,
    pub last_compacted_message_id: Option<i64>,
    pub uncompacted_tokens: i64,
    pub last_message_id: Option<i64>,
    pub is_compacting: bool,
    pub lease_owner: Option<String>,
    pub lease_deadline_ms: Option<i64>,
    pub version: i64,
    pub compactions: i64,
    pub consecutive_failures: i32,
    pub breaker_message_id: Option<i64>,
    pub just_auto_compacted: bool,
    pub last_compacted_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// The leaf of the current branch; NULL: linear (the newest message).
    pub head_message_id: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
