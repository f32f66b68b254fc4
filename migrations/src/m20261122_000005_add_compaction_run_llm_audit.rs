//! `compaction_runs` says why a run was degraded and how many LLM calls it
//! made: `degraded_reason` (null unless degraded: `llm_unavailable`,
//! `llm_refused`, `invalid_output`, `llm_unhealthy`, `context_length`),
//! `llm_calls` (requests sent, retries included) and `llm_failed_calls`
//! (those that gave no usable answer).
//!
//! Additive only: rows written before keep working (no reason, zero
//! calls). SQLite alters one column per statement, so each column is its
//! own `ALTER TABLE`.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let columns = [
            ColumnDef::new(CompactionRuns::DegradedReason)
                .string_len(32)
                .null()
                .to_owned(),
            ColumnDef::new(CompactionRuns::LlmCalls)
                .integer()
                .not_null()
                .default(0)
                .to_owned(),
            ColumnDef::new(CompactionRuns::LlmFailedCalls)
                .integer()
                .not_null()
                .default(0)
                .to_owned(),
        ];
        for mut column in columns {
            manager
                .alter_table(
                    Table::alter()
                        .table(CompactionRuns::Table)
                        .add_column(&mut column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [
            CompactionRuns::LlmFailedCalls,
            CompactionRuns::LlmCalls,
            CompactionRuns::DegradedReason,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(CompactionRuns::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden, Clone, Copy)]
enum CompactionRuns {
    Table,
    DegradedReason,
    LlmCalls,
    LlmFailedCalls,
}
