//! `messages`.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "messages")]
pub(crate) struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub workstream_id: i64,
    pub role: String,
    #[sea_orm(column_type = "Text")]
    pub parts: String,
    pub token_estimate: i64,
    pub pinned: bool,
    /// Kept un-compacted below the workstream's watermark (see
    /// `store::compacted`).
    pub kept: bool,
    pub created_at: DateTimeUtc,
    /// The client's id for the message (unique per workstream), if it gave
    /// one.
    pub client_id: Option<String>,
    /// The message this one continues; NULL: the workstream's previous
    /// message (the next lower id).
    pub parent_id: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
