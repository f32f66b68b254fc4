//! `compaction_runs` says what a run did with the candidate evidence lines
//! (verbatim lines of the compacted messages, and the evidence the context
//! held before, that may be shown in the next context): `evidence_kept`
//! (chosen for the context) and `evidence_dropped` (left out: no budget,
//! nothing new, or a repeat).
//!
//! Additive only: rows written before, and runs that committed nothing,
//! read 0 for both. SQLite alters one column per statement, so each column
//! is its own `ALTER TABLE`.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [
            CompactionRuns::EvidenceKept,
            CompactionRuns::EvidenceDropped,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(CompactionRuns::Table)
                        .add_column(ColumnDef::new(column).big_integer().not_null().default(0))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [
            CompactionRuns::EvidenceDropped,
            CompactionRuns::EvidenceKept,
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
    EvidenceKept,
    EvidenceDropped,
}
