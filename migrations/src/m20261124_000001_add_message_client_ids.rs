//! `messages.client_id`: the id a client gave a message, so that a retried
//! append stores nothing twice. Unique per workstream (a unique index on
//! `(workstream_id, client_id)`); optional, and messages without one may
//! repeat as before: both PostgreSQL and SQLite let a unique index hold any
//! number of NULLs.
//!
//! Additive: existing rows get NULL, and a build that does not know the
//! column keeps working on a migrated database.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// Longest client id, in bytes (as checked by the client before storing).
const CLIENT_ID_MAX: u32 = 255;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Messages::Table)
                    .add_column(
                        ColumnDef::new(Messages::ClientId)
                            .string_len(CLIENT_ID_MAX)
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_messages_workstream_client_id")
                    .table(Messages::Table)
                    .col(Messages::WorkstreamId)
                    .col(Messages::ClientId)
                    .unique()
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name("idx_messages_workstream_client_id")
                    .table(Messages::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Messages::Table)
                    .drop_column(Messages::ClientId)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    WorkstreamId,
    ClientId,
}
