//! An index on `workstreams.consecutive_failures`, so operators can list
//! the workstreams whose circuit breaker is open (`GET /v1/workstreams?
//! state=breaker_open`, `compactor workstreams --state breaker_open`)
//! without reading every row: rows at the breaker's threshold are few.
//!
//! Additive: an index only; a build that does not know it keeps working.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

const INDEX: &str = "idx_workstreams_consecutive_failures";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name(INDEX)
                    .table(Workstreams::Table)
                    .col(Workstreams::ConsecutiveFailures)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(INDEX)
                    .table(Workstreams::Table)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Workstreams {
    Table,
    ConsecutiveFailures,
}
