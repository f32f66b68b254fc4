//! The stored search vector is computed when a message's content changes,
//! not on every update of its row (PostgreSQL).
//!
//! Why: `messages.search` was a stored generated column, and PostgreSQL
//! computes a stored generated column again on *every* `UPDATE` of the
//! row, whichever columns it sets. A compaction's marking (`is_compacted`,
//! `compacted_by_run_id`) therefore re-ran `compactor_message_search_text`
//! (parse the parts JSON, collect the text) for each of the messages it
//! compacted: the largest part of the marking statement, itself the most
//! expensive statement of a compaction (docs/BENCHMARK_NOTES.md, issue 17).
//!
//! Now `search` is a plain column, kept by a `BEFORE INSERT OR UPDATE OF
//! parts` trigger with the same expression: computed on append and when a
//! message's parts are rewritten (pruning), and left alone by marking.
//! `ALTER COLUMN … DROP EXPRESSION` keeps the stored vectors and the index
//! (no rewrite, no rebuild). SQLite already works this way (its FTS
//! triggers fire on `UPDATE OF parts` only) and is unchanged.

use sea_orm_migration::prelude::*;

use crate::m20261127_000002_add_message_search::search_vector;
use crate::m20261127_000005_scope_message_search::SCOPED_SEARCH;
use crate::m20261127_000006_bound_search_pending_list::PENDING_LIST_KB;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

fn postgres_up() -> Vec<String> {
    vec![
        "ALTER TABLE messages ALTER COLUMN search DROP EXPRESSION IF EXISTS".to_owned(),
        format!(
            "CREATE OR REPLACE FUNCTION compactor_message_search_refresh() RETURNS trigger \
             LANGUAGE plpgsql AS $fn$ BEGIN NEW.search := {}; RETURN NEW; END $fn$",
            search_vector("NEW.parts")
        ),
        "DROP TRIGGER IF EXISTS messages_search_refresh ON messages".to_owned(),
        "CREATE TRIGGER messages_search_refresh BEFORE INSERT OR UPDATE OF parts ON messages \
         FOR EACH ROW EXECUTE FUNCTION compactor_message_search_refresh()"
            .to_owned(),
    ]
}

/// Back to the generated column: PostgreSQL 15 cannot give a column its
/// expression back, so the column (and the index over it) is made again.
fn postgres_down() -> Vec<String> {
    vec![
        "DROP TRIGGER IF EXISTS messages_search_refresh ON messages".to_owned(),
        "DROP FUNCTION IF EXISTS compactor_message_search_refresh()".to_owned(),
        "DROP INDEX IF EXISTS idx_messages_search_scoped".to_owned(),
        "ALTER TABLE messages DROP COLUMN IF EXISTS search".to_owned(),
        format!(
            "ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS \
             ({}) STORED",
            search_vector("parts")
        ),
        format!(
            "CREATE INDEX IF NOT EXISTS idx_messages_search_scoped ON messages \
             USING gin ({SCOPED_SEARCH}) \
             WITH (fastupdate = on, gin_pending_list_limit = {PENDING_LIST_KB})"
        ),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::on_postgres(manager, postgres_up()).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::on_postgres(manager, postgres_down()).await
    }
}
