//! The full-text index takes appends in bulk again, through a short
//! pending list: `fastupdate = on` with `gin_pending_list_limit = 256`
//! (kB) on PostgreSQL's `idx_messages_search_scoped`.
//!
//! Why: `m20261127_000005` turned GIN's pending list off so recall never
//! scans a long unsorted list (the default limit is 4 MB: a recall behind
//! 20,000 pending messages took 8.5 ms instead of 0.7 ms). But then every
//! new row version is merged into the posting lists of each of its
//! lexemes one by one, and a message gets a new row version on append
//! *and* when a compaction marks it compacted: measured on the chat path,
//! about 0.3 ms per appended message and 0.1 ms per compacted one, most of
//! a compaction's database time (docs/BENCHMARK_NOTES.md, issue 17). With
//! a pending list bounded at 256 kB (about a thousand messages' entries),
//! inserts append to the list and a full list is merged in one sorted
//! pass, while a search scans at most those 256 kB.
//!
//! `ALTER INDEX … SET` changes only the storage parameters: no rebuild.
//!
//! And the search text is computed three times cheaper per row:
//! `compactor_message_search_text` (the stored `search` column's function,
//! run on every insert *and* every update of a message, a compaction's
//! marking included) keeps its `EXCEPTION` guard (a hand-written row whose
//! `parts` is not JSON is indexed as empty, never refused) but runs the
//! `SELECT` itself instead of calling `compactor_message_search_text_of`:
//! inside the guard's subtransaction, PL/pgSQL set the called SQL function
//! up again on every row (parsed and planned: 116 µs a row, against 38 µs
//! with the statement's plan cached by PL/pgSQL; measured on 20,000 tool
//! calls). Same text, same `IMMUTABLE` function: stored vectors stay valid.
//! SQLite is unchanged.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

use crate::m20261127_000002_add_message_search::{postgres_search_select, POSTGRES_SAFE_FUNCTION};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// The pending list's bound, in kB (PostgreSQL's minimum is 64).
pub(crate) const PENDING_LIST_KB: u32 = 256;

/// `compactor_message_search_text` with the search `SELECT` inline (see
/// the module docs).
fn postgres_safe_function() -> String {
    format!(
        r#"CREATE OR REPLACE FUNCTION compactor_message_search_text(parts text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
  found text;
BEGIN
  {} INTO found;
  RETURN found;
EXCEPTION WHEN others THEN
  RETURN '';
END
$fn$"#,
        postgres_search_select()
    )
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        if db.get_database_backend() == DbBackend::Postgres {
            db.execute_unprepared(&format!(
                "ALTER INDEX IF EXISTS idx_messages_search_scoped \
                 SET (fastupdate = on, gin_pending_list_limit = {PENDING_LIST_KB})"
            ))
            .await?;
            db.execute_unprepared(&postgres_safe_function()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        if db.get_database_backend() == DbBackend::Postgres {
            db.execute_unprepared(POSTGRES_SAFE_FUNCTION).await?;
            // Flush what is pending, then back to direct updates.
            db.execute_unprepared(
                "ALTER INDEX IF EXISTS idx_messages_search_scoped \
                 SET (fastupdate = off); \
                 ALTER INDEX IF EXISTS idx_messages_search_scoped \
                 RESET (gin_pending_list_limit)",
            )
            .await?;
        }
        Ok(())
    }
}
