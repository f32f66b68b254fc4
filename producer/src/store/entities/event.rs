//! `events` (the outbox).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "events")]
pub(crate) struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub event_id: String,
    pub kind: String,
    pub domain: String,
    pub entity_id: String,
    #[sea_orm(column_type = "Text")]
    pub payload: String,
    pub created_at_ms: i64,
    pub streamed_at_ms: Option<i64>,
    pub claimed_by: Option<String>,
    pub claimed_until_ms: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
