//! `compaction_runs`: one row per compaction attempt, whatever its outcome
//! (committed, no progress, failed, conflict). It is the audit trail: what
//! ran, for which job and attempt, how much it shrank the workstream, which
//! model it used and what summary it produced.

use sea_orm_migration::prelude::*;

use crate::m20261122_000001_create_workstreams::Workstreams;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let big = |col: CompactionRuns| ColumnDef::new(col).big_integer().not_null().to_owned();
        let int = |col: CompactionRuns| ColumnDef::new(col).integer().not_null().to_owned();
        manager
            .create_table(
                Table::create()
                    .table(CompactionRuns::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(CompactionRuns::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(big(CompactionRuns::WorkstreamId))
                    .col(big(CompactionRuns::JobId))
                    .col(int(CompactionRuns::Attempt))
                    // auto | manual | follow_up
                    .col(
                        ColumnDef::new(CompactionRuns::Trigger)
                            .string_len(16)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(CompactionRuns::StartedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(CompactionRuns::FinishedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    // committed | no_progress | failed | conflict
                    .col(
                        ColumnDef::new(CompactionRuns::Outcome)
                            .string_len(16)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(CompactionRuns::Degraded)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(big(CompactionRuns::TokensBefore))
                    .col(big(CompactionRuns::TokensAfter))
                    .col(big(CompactionRuns::MessagesCompacted))
                    .col(int(CompactionRuns::Chunks))
                    .col(int(CompactionRuns::Rollups))
                    .col(ColumnDef::new(CompactionRuns::LlmModel).string().null())
                    .col(big(CompactionRuns::LlmTokensIn))
                    .col(big(CompactionRuns::LlmTokensOut))
                    .col(ColumnDef::new(CompactionRuns::Error).text().null())
                    .col(ColumnDef::new(CompactionRuns::Summary).text().null())
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_compaction_runs_workstream")
                            .from(CompactionRuns::Table, CompactionRuns::WorkstreamId)
                            .to(Workstreams::Table, Workstreams::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_compaction_runs_workstream_id")
                    .table(CompactionRuns::Table)
                    .col(CompactionRuns::WorkstreamId)
                    .col(CompactionRuns::Id)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(CompactionRuns::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden, Clone, Copy)]
enum CompactionRuns {
    Table,
    Id,
    WorkstreamId,
    JobId,
    Attempt,
    Trigger,
    StartedAt,
    FinishedAt,
    Outcome,
    Degraded,
    TokensBefore,
    TokensAfter,
    MessagesCompacted,
    Chunks,
    Rollups,
    LlmModel,
    LlmTokensIn,
    LlmTokensOut,
    Error,
    Summary,
}
