//! "Compacted" is derived from the workstream's watermark instead of being
//! written on every compacted message.
//!
//! Why: a commit marked each message it folded (`is_compacted = true`,
//! `compacted_by_run_id`). On PostgreSQL every marked message is a new row
//! version inserted again into every index of `messages` (the flag is in
//! one, so the update cannot be HOT): 14 µs a row, half of a 1M-message
//! compaction and ~1.9 ms of a 200-message one (docs/BENCHMARK_NOTES.md,
//! issue 17), plus the dead rows vacuum has to clean up afterwards.
//!
//! Now a message is compacted when its id is at or below its workstream's
//! `last_compacted_message_id` and it is not `kept`. A commit flags only
//! the messages it keeps below the new watermark (pinned ones and their
//! tool partners: a few), and the watermark only moves forward, so a
//! commit writes the same few rows however long the span it folds.
//!
//! - `messages.kept`: kept un-compacted below the watermark; a partial
//!   index `(workstream_id, id) WHERE kept` finds them without walking
//!   compacted history.
//! - `compaction_runs.watermark`: the watermark a committed run wrote;
//!   recall's "folded by" is the committed run with the lowest watermark
//!   at or above the message (indexed per workstream).
//! - `messages.is_compacted`, `messages.compacted_by_run_id` and the index
//!   over the flag are dropped.
//!
//! Backfill: a run's watermark is the newest message it marked (the same
//! answer for every message it folded); a message un-compacted below its
//! workstream's watermark becomes `kept`. `down` writes the flags back
//! from the same rules.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// The kept messages of a workstream, by id (only they are in it).
const CREATE_KEPT_INDEX: &str =
    "CREATE INDEX IF NOT EXISTS idx_messages_kept ON messages (workstream_id, id) WHERE kept";

/// Committed runs of a workstream by the watermark they wrote.
const CREATE_RUN_WATERMARK_INDEX: &str = "CREATE INDEX IF NOT EXISTS \
     idx_compaction_runs_workstream_watermark ON compaction_runs (workstream_id, watermark) \
     WHERE watermark IS NOT NULL";

/// `UPDATE … FROM` (PostgreSQL, and SQLite since 3.33): each run that
/// marked messages gets the newest of them as its watermark.
const BACKFILL_RUN_WATERMARKS: &str = "UPDATE compaction_runs SET watermark = folded.newest \
     FROM (SELECT compacted_by_run_id AS run_id, MAX(id) AS newest FROM messages \
           WHERE compacted_by_run_id IS NOT NULL GROUP BY compacted_by_run_id) AS folded \
     WHERE compaction_runs.id = folded.run_id";

const BACKFILL_KEPT: &str = "UPDATE messages SET kept = TRUE \
     WHERE is_compacted = FALSE AND id <= (SELECT w.last_compacted_message_id \
       FROM workstreams w WHERE w.id = messages.workstream_id)";

const RESTORE_FLAGS: &str = "UPDATE messages SET is_compacted = TRUE \
     WHERE kept = FALSE AND id <= (SELECT w.last_compacted_message_id \
       FROM workstreams w WHERE w.id = messages.workstream_id)";

const RESTORE_FOLDED_BY: &str = "UPDATE messages SET compacted_by_run_id = \
     (SELECT r.id FROM compaction_runs r WHERE r.workstream_id = messages.workstream_id \
        AND r.watermark >= messages.id ORDER BY r.watermark LIMIT 1) \
     WHERE is_compacted = TRUE";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Messages::Table)
                    .add_column(
                        ColumnDef::new(Messages::Kept)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(CompactionRuns::Table)
                    .add_column(
                        ColumnDef::new(CompactionRuns::Watermark)
                            .big_integer()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        for sql in [
            BACKFILL_RUN_WATERMARKS,
            BACKFILL_KEPT,
            CREATE_KEPT_INDEX,
            CREATE_RUN_WATERMARK_INDEX,
            "DROP INDEX IF EXISTS idx_messages_workstream_compacted_id",
        ] {
            db.execute_unprepared(sql).await?;
        }
        // One column per statement: SQLite alters one thing at a time.
        for column in [Messages::IsCompacted, Messages::CompactedByRunId] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Messages::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Messages::Table)
                    .add_column(
                        ColumnDef::new(Messages::IsCompacted)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Messages::Table)
                    .add_column(
                        ColumnDef::new(Messages::CompactedByRunId)
                            .big_integer()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        for sql in [
            RESTORE_FLAGS,
            RESTORE_FOLDED_BY,
            "CREATE INDEX IF NOT EXISTS idx_messages_workstream_compacted_id \
             ON messages (workstream_id, is_compacted, id)",
            "DROP INDEX IF EXISTS idx_compaction_runs_workstream_watermark",
            "DROP INDEX IF EXISTS idx_messages_kept",
        ] {
            db.execute_unprepared(sql).await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(CompactionRuns::Table)
                    .drop_column(CompactionRuns::Watermark)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Messages::Table)
                    .drop_column(Messages::Kept)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    Kept,
    IsCompacted,
    CompactedByRunId,
}

#[derive(DeriveIden)]
enum CompactionRuns {
    Table,
    Watermark,
}
