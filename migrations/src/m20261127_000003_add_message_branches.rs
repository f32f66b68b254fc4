//! Message branches: a workstream's messages may fork.
//!
//! - `messages.parent_id`: the message a message continues. NULL means
//!   "the workstream's previous message" (the next lower id), which is what
//!   every message stored before this migration, and every append that
//!   names no parent, means: existing workstreams are one linear branch.
//! - `workstreams.head_message_id`: the leaf of the current branch. NULL
//!   means linear (the newest message is the head).
//! - `branch_summaries`: one row per abandoned branch (unique per
//!   `(workstream, leaf)`), attached at its branch point: the summary text,
//!   the files read and modified on it (JSON), and its token estimate.
//!
//! Additive: existing rows get NULL, and a build that does not know the
//! columns keeps working on a migrated database.

use sea_orm_migration::prelude::*;

use crate::m20261122_000001_create_workstreams::Workstreams;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters one at a time.
        manager
            .alter_table(
                Table::alter()
                    .table(Messages::Table)
                    .add_column(ColumnDef::new(Messages::ParentId).big_integer().null())
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Workstreams::Table)
                    .add_column(
                        ColumnDef::new(BranchColumns::HeadMessageId)
                            .big_integer()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(BranchSummaries::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(BranchSummaries::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(BranchSummaries::WorkstreamId)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BranchSummaries::BranchPointId)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BranchSummaries::LeafId)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(BranchSummaries::Summary).text().not_null())
                    // JSON of `compactor_shared::branch::FileOps`.
                    .col(ColumnDef::new(BranchSummaries::FileOps).text().not_null())
                    .col(
                        ColumnDef::new(BranchSummaries::Tokens)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BranchSummaries::Messages)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BranchSummaries::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_branch_summaries_workstream")
                            .from(BranchSummaries::Table, BranchSummaries::WorkstreamId)
                            .to(Workstreams::Table, Workstreams::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_branch_summaries_workstream_leaf")
                    .table(BranchSummaries::Table)
                    .col(BranchSummaries::WorkstreamId)
                    .col(BranchSummaries::LeafId)
                    .unique()
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(BranchSummaries::Table).to_owned())
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Workstreams::Table)
                    .drop_column(BranchColumns::HeadMessageId)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Messages::Table)
                    .drop_column(Messages::ParentId)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    ParentId,
}

#[derive(DeriveIden)]
enum BranchColumns {
    HeadMessageId,
}

#[derive(DeriveIden)]
enum BranchSummaries {
    Table,
    Id,
    WorkstreamId,
    BranchPointId,
    LeafId,
    Summary,
    FileOps,
    Tokens,
    Messages,
    CreatedAt,
}
