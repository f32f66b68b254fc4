//! `messages`: every message of every workstream, never deleted.
//!
//! The global autoincrement id is the engine's `MessageId`: ids only grow,
//! so within a workstream they order its messages, and a compaction's
//! watermark is simply the newest id it covered. The index serves the hot
//! query, "this workstream's un-compacted messages after id X, in order".

use sea_orm_migration::prelude::*;

use crate::m20261122_000001_create_workstreams::Workstreams;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Messages::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(Messages::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(Messages::WorkstreamId)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(Messages::Role).string_len(16).not_null())
                    // JSON array of `compactor_shared::Part`.
                    .col(ColumnDef::new(Messages::Parts).text().not_null())
                    .col(
                        ColumnDef::new(Messages::TokenEstimate)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Messages::Pinned)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(
                        ColumnDef::new(Messages::IsCompacted)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(
                        ColumnDef::new(Messages::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_messages_workstream")
                            .from(Messages::Table, Messages::WorkstreamId)
                            .to(Workstreams::Table, Workstreams::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_messages_workstream_compacted_id")
                    .table(Messages::Table)
                    .col(Messages::WorkstreamId)
                    .col(Messages::IsCompacted)
                    .col(Messages::Id)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Messages::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    Id,
    WorkstreamId,
    Role,
    Parts,
    TokenEstimate,
    Pinned,
    IsCompacted,
    CreatedAt,
}
