//! `memory_block_entries`.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "memory_block_entries")]
pub(crate) struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub workstream_id: i64,
    #[sea_orm(column_type = "Text")]
    pub content: String,
    pub folded: bool,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
