//! `memory_block_entries`: memory-block entries of a workstream. They
//! accumulate until the engine folds the oldest into the workstream's
//! `memory_block_summary`; folded entries are kept (marked), like messages.

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
                    .table(MemoryBlockEntries::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(MemoryBlockEntries::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(MemoryBlockEntries::WorkstreamId)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(MemoryBlockEntries::Content)
                            .text()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(MemoryBlockEntries::Folded)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(
                        ColumnDef::new(MemoryBlockEntries::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_memory_block_entries_workstream")
                            .from(MemoryBlockEntries::Table, MemoryBlockEntries::WorkstreamId)
                            .to(Workstreams::Table, Workstreams::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_memory_block_entries_workstream_folded_id")
                    .table(MemoryBlockEntries::Table)
                    .col(MemoryBlockEntries::WorkstreamId)
                    .col(MemoryBlockEntries::Folded)
                    .col(MemoryBlockEntries::Id)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(MemoryBlockEntries::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum MemoryBlockEntries {
    Table,
    Id,
    WorkstreamId,
    Content,
    Folded,
    CreatedAt,
}
