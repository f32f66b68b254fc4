//! The transactional outbox of compaction events: `events` (one row per
//! state change, written in the transaction that makes the change) and
//! `event_deliveries` (one row per event per configured webhook).
//!
//! A worker's relay reads `events` rows not yet relayed, puts each on the
//! Redis Stream and creates its deliveries; it then delivers due
//! deliveries and records the outcome. Rows stay until every delivery of
//! their event succeeded, then are pruned after a retention period (the
//! foreign key cascades to the deliveries).
//!
//! Times the relay compares (`*_ms`) are Unix milliseconds on the
//! application clock, like `workstreams.lease_deadline_ms`: integers
//! compare the same on both backends (SQLite stores timestamps as text of
//! varying precision). Claims (`claimed_by`, `claimed_until_ms`) let several
//! workers share the work without row locks: a row is taken by a
//! compare-and-set, and a claim left by a crashed worker expires.
//!
//! Additive only: new tables, nothing else changes.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Events::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(Events::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    // A UUID v4: what consumers deduplicate on.
                    .col(ColumnDef::new(Events::EventId).string_len(36).not_null())
                    // compaction.requested | started | completed | failed | dead_lettered
                    .col(ColumnDef::new(Events::Kind).string_len(48).not_null())
                    .col(ColumnDef::new(Events::Domain).string_len(32).not_null())
                    .col(ColumnDef::new(Events::EntityId).string_len(128).not_null())
                    // JSON object: the event's `data`.
                    .col(ColumnDef::new(Events::Payload).text().not_null())
                    .col(ColumnDef::new(Events::CreatedAtMs).big_integer().not_null())
                    // When a relay put it on the stream and created its
                    // deliveries; NULL until then.
                    .col(ColumnDef::new(Events::StreamedAtMs).big_integer().null())
                    .col(ColumnDef::new(Events::ClaimedBy).string_len(64).null())
                    .col(ColumnDef::new(Events::ClaimedUntilMs).big_integer().null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_events_event_id")
                    .table(Events::Table)
                    .col(Events::EventId)
                    .unique()
                    .if_not_exists()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_events_streamed_at_ms")
                    .table(Events::Table)
                    .col(Events::StreamedAtMs)
                    .col(Events::Id)
                    .if_not_exists()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(EventDeliveries::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(EventDeliveries::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(EventDeliveries::EventRowId)
                            .big_integer()
                            .not_null(),
                    )
                    // The webhook's configured name (never its URL).
                    .col(
                        ColumnDef::new(EventDeliveries::Endpoint)
                            .string_len(64)
                            .not_null(),
                    )
                    // pending | delivered | failed
                    .col(
                        ColumnDef::new(EventDeliveries::State)
                            .string_len(16)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(EventDeliveries::Attempts)
                            .integer()
                            .not_null()
                            .default(0),
                    )
                    .col(
                        ColumnDef::new(EventDeliveries::NextAttemptAtMs)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(EventDeliveries::LastStatus).integer().null())
                    .col(ColumnDef::new(EventDeliveries::LastError).text().null())
                    .col(
                        ColumnDef::new(EventDeliveries::DeliveredAtMs)
                            .big_integer()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(EventDeliveries::ClaimedBy)
                            .string_len(64)
                            .null(),
                    )
                    .col(
                        ColumnDef::new(EventDeliveries::ClaimedUntilMs)
                            .big_integer()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(EventDeliveries::CreatedAtMs)
                            .big_integer()
                            .not_null(),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_event_deliveries_event")
                            .from(EventDeliveries::Table, EventDeliveries::EventRowId)
                            .to(Events::Table, Events::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_event_deliveries_event_endpoint")
                    .table(EventDeliveries::Table)
                    .col(EventDeliveries::EventRowId)
                    .col(EventDeliveries::Endpoint)
                    .unique()
                    .if_not_exists()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_event_deliveries_state_due")
                    .table(EventDeliveries::Table)
                    .col(EventDeliveries::State)
                    .col(EventDeliveries::NextAttemptAtMs)
                    .if_not_exists()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(EventDeliveries::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(Events::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden, Clone, Copy)]
enum Events {
    Table,
    Id,
    EventId,
    Kind,
    Domain,
    EntityId,
    Payload,
    CreatedAtMs,
    StreamedAtMs,
    ClaimedBy,
    ClaimedUntilMs,
}

#[derive(DeriveIden, Clone, Copy)]
enum EventDeliveries {
    Table,
    Id,
    EventRowId,
    Endpoint,
    State,
    Attempts,
    NextAttemptAtMs,
    LastStatus,
    LastError,
    DeliveredAtMs,
    ClaimedBy,
    ClaimedUntilMs,
    CreatedAtMs,
}
