//! `event_deliveries`.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "event_deliveries")]
pub(crate) struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub event_row_id: i64,
    pub endpoint: String,
    pub state: String,
    pub attempts: i32,
    pub next_attempt_at_ms: i64,
    pub last_status: Option<i32>,
    #[sea_orm(column_type = "Text", nullable)]
    pub last_error: Option<String>,
    pub delivered_at_ms: Option<i64>,
    pub claimed_by: Option<String>,
    pub claimed_until_ms: Option<i64>,
    pub created_at_ms: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
