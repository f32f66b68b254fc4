//! `branch_summaries`.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "branch_summaries")]
pub(crate) struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub workstream_id: i64,
    pub branch_point_id: i64,
    pub leaf_id: i64,
    #[sea_orm(column_type = "Text")]
    pub summary: String,
    #[sea_orm(column_type = "Text")]
    pub file_ops: String,
    pub tokens: i64,
    pub messages: i64,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
