//! `workstreams`: one row per `(domain, entity_id)`.
//!
//! The row is also the unit of concurrency control: appends lock it before
//! they allocate message ids, and a compaction commits by a conditional
//! update of it (fenced on the lease owner and the watermark), so every
//! writer of a workstream is serialized on this one row.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Workstreams::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(Workstreams::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(Workstreams::Domain)
                            .string_len(32)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Workstreams::EntityId)
                            .string_len(128)
                            .not_null(),
                    )
                    // JSON of `compactor_shared::Summary`; NULL until the first commit.
                    .col(ColumnDef::new(Workstreams::CompactionSummary).text().null())
                    .col(
                        ColumnDef::new(Workstreams::SummaryTokens)
                            .big_integer()
                            .not_null()
                            .default(0),
                    )
                    // JSON of `compactor_shared::WorkstreamState` (with the user's
                    // statements and the evidence).
                    .col(
                        ColumnDef::new(Workstreams::State)
                            .text()
                            .not_null()
                            .default("{}"),
                    )
                    .col(
                        ColumnDef::new(Workstreams::MemoryBlockSummary)
                            .text()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(Workstreams::LastCompactedMessageId)
                            .big_integer()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(Workstreams::UncompactedTokens)
                            .big_integer()
                            .not_null()
                            .default(0),
                    )
                    .col(
                        ColumnDef::new(Workstreams::LastMessageId)
                            .big_integer()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(Workstreams::IsCompacting)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(ColumnDef::new(Workstreams::LeaseOwner).string().null())
                    // Unix milliseconds on the application's clock.
                    .col(
                        ColumnDef::new(Workstreams::LeaseDeadlineMs)
                            .big_integer()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(Workstreams::Version)
                            .big_integer()
                            .not_null()
                            .default(0),
                    )
                    .col(
                        ColumnDef::new(Workstreams::Compactions)
                            .big_integer()
                            .not_null()
                            .default(0),
                    )
                    .col(
                        ColumnDef::new(Workstreams::ConsecutiveFailures)
                            .integer()
                            .not_null()
                            .default(0),
                    )
                    .col(
                        ColumnDef::new(Workstreams::BreakerMessageId)
                            .big_integer()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(Workstreams::JustAutoCompacted)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(
                        ColumnDef::new(Workstreams::LastCompactedAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(Workstreams::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Workstreams::UpdatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        // The key of the workstream; also the conflict target of the
        // race-safe insert (`ON CONFLICT (domain, entity_id) DO NOTHING`).
        manager
            .create_index(
                Index::create()
                    .name("uq_workstreams_domain_entity_id")
                    .table(Workstreams::Table)
                    .col(Workstreams::Domain)
                    .col(Workstreams::EntityId)
                    .unique()
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Workstreams::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub(crate) enum Workstreams {
    Table,
    Id,
    Domain,
    EntityId,
    CompactionSummary,
    SummaryTokens,
    State,
    MemoryBlockSummary,
    LastCompactedMessageId,
    UncompactedTokens,
    LastMessageId,
    IsCompacting,
    LeaseOwner,
    LeaseDeadlineMs,
    Version,
    Compactions,
    ConsecutiveFailures,
    BreakerMessageId,
    JustAutoCompacted,
    LastCompactedAt,
    CreatedAt,
    UpdatedAt,
}
