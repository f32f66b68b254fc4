//! `compaction_runs` says what the pre-compaction hook did on a run:
//! `hook_outcome` (null when no hook is configured: `proceed`,
//! `instructions`, `context`, `replaced`, `skipped`, `timeout`,
//! `unreachable`, `http_error`, `malformed`, `invalid_replacement`) and
//! `hook_duration_ms` (how long the call took; null without a call).
//!
//! Additive only: rows written before, and runs of workers without a
//! hook, keep both null. SQLite alters one column per statement, so each
//! column is its own `ALTER TABLE`.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let columns = [
            ColumnDef::new(CompactionRuns::HookOutcome)
                .string_len(32)
                .null()
                .to_owned(),
            ColumnDef::new(CompactionRuns::HookDurationMs)
                .big_integer()
                .null()
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
        for column in [CompactionRuns::HookDurationMs, CompactionRuns::HookOutcome] {
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
    HookOutcome,
    HookDurationMs,
}
