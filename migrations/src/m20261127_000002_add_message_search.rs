//! Recall of compacted history: a full-text index over what a user would
//! search in a message (its text, reasoning, tool output, tool call input
//! and file names), and `messages.compacted_by_run_id`, the compaction run
//! that folded a message.
//!
//! - **PostgreSQL**: a stored generated column `search tsvector` computed by
//!   `to_tsvector('simple', compactor_message_search_text(parts))` and a GIN
//!   index on it. The `simple` configuration lowercases and splits but
//!   neither stems nor drops stop words: recall looks for exact values
//!   (ids, codes, names, "INV-2024-0042"), which stemming would blur and a
//!   stop-word list could drop. The text is cut at
//!   [`INDEXED_CHARS`] characters so a huge tool output can never exceed
//!   PostgreSQL's 1 MB `tsvector` limit (which would fail the append).
//! - **SQLite**: an FTS5 table `messages_search` (`unicode61`, diacritics
//!   kept, like `simple`) kept in step by triggers on `messages`, and
//!   backfilled with the existing rows. It is *contentless with delete*
//!   (`content=''`, `contentless_delete=1`) rather than external-content:
//!   the indexed text is derived from the parts JSON, not a column, and an
//!   external-content table needs the exact old text to delete a row (a
//!   derived text that ever differed would corrupt the index silently);
//!   contentless-delete removes a row by its id. Needs SQLite 3.43 or newer
//!   (the bundled one is).
//! - Both: an index on `(workstream_id, id)`, so "the newest matches of
//!   this workstream" can walk a workstream's messages backwards and stop
//!   after `LIMIT` rows when a term is common (a rare term is served by the
//!   full-text index instead; the planner picks).
//!
//! Additive: a new nullable column, a generated column, an index and a
//! function on PostgreSQL; a virtual table and triggers on SQLite. Builds
//! that do not know them keep working (they never name them, and the
//! triggers maintain the index whoever writes).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// Characters of a message's text that are indexed (the rest is stored
/// and returned, only not searchable): well under PostgreSQL's 1 MB
/// `tsvector` bound whatever the text.
pub(crate) const INDEXED_CHARS: u32 = 100_000;

/// PostgreSQL: the searchable text of a `parts` JSON array. `IMMUTABLE`,
/// as a generated column requires. A JSON `\u0000` escape (which `jsonb`
/// refuses) becomes a space first; escaped backslashes are set aside for that
/// step so `\\u0000` (a backslash, then "u0000") is left alone: serde_json
/// never writes a raw control character, so `chr(1)` cannot occur in its
/// output.
fn postgres_function() -> String {
    format!(
        r#"CREATE OR REPLACE FUNCTION compactor_message_search_text_of(parts text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
{}
$fn$"#,
        postgres_search_select()
    )
}

/// The `SELECT` of [`postgres_function`]: the searchable text of `parts`
/// (also run inline by `m20261127_000006`'s faster safe function).
pub(crate) fn postgres_search_select() -> String {
    format!(
        r#"SELECT left(coalesce(string_agg(concat_ws(' ',
           e->>'text', e->>'output', e->>'uri', e->>'name',
           (SELECT string_agg(s #>> '{{}}', ' ')
              FROM jsonb_path_query(e->'input', 'lax $.** ? (@.type() == "string")') AS s)),
         ' ' ORDER BY i), ''), {INDEXED_CHARS})
  FROM jsonb_array_elements(
         replace(replace(replace(parts, '\\', chr(1)), '\u0000', ' '), chr(1), '\\')::jsonb)
       WITH ORDINALITY AS t(e, i)"#
    )
}

/// PostgreSQL: [`postgres_function`] that never fails: a row whose
/// `parts` is not a JSON array (only a hand-made or corrupt row can be) is
/// indexed as empty rather than refused, so the index never blocks a
/// write or an update of other columns.
pub(crate) const POSTGRES_SAFE_FUNCTION: &str = r#"CREATE OR REPLACE FUNCTION compactor_message_search_text(parts text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
  RETURN compactor_message_search_text_of(parts);
EXCEPTION WHEN others THEN
  RETURN '';
END
$fn$"#;

/// SQLite: the searchable text of the `parts` column `col` (the same
/// fields as on PostgreSQL). A JSON `\u0000` becomes a space as there:
/// SQLite's JSON functions would end the text at the NUL. Parts that are
/// not valid JSON (a corrupt row) are indexed as empty, never an error.
fn sqlite_text(col: &str) -> String {
    let json =
        format!(r#"replace(replace(replace({col}, '\\', char(1)), '\u0000', ' '), char(1), '\\')"#);
    format!(
        r#"CASE WHEN json_valid({json}) THEN (SELECT substr(coalesce(group_concat(concat_ws(' ',
           json_extract(e.value, '$.text'), json_extract(e.value, '$.output'),
           json_extract(e.value, '$.uri'), json_extract(e.value, '$.name'),
           (SELECT group_concat(t.value, ' ') FROM json_tree(e.value, '$.input') AS t
             WHERE t.type = 'text')), ' '), ''), 1, {INDEXED_CHARS})
         FROM json_each({json}) AS e) ELSE '' END"#
    )
}

fn sqlite_up() -> Vec<String> {
    vec![
        "CREATE VIRTUAL TABLE IF NOT EXISTS messages_search USING fts5(body, content='', \
         contentless_delete=1, tokenize='unicode61 remove_diacritics 0')"
            .to_owned(),
        format!(
            "CREATE TRIGGER IF NOT EXISTS messages_search_insert AFTER INSERT ON messages BEGIN \
             INSERT INTO messages_search(rowid, body) VALUES (new.id, {}); END",
            sqlite_text("new.parts")
        ),
        "CREATE TRIGGER IF NOT EXISTS messages_search_delete AFTER DELETE ON messages BEGIN \
         DELETE FROM messages_search WHERE rowid = old.id; END"
            .to_owned(),
        format!(
            "CREATE TRIGGER IF NOT EXISTS messages_search_update AFTER UPDATE OF parts ON messages \
             BEGIN DELETE FROM messages_search WHERE rowid = old.id; \
             INSERT INTO messages_search(rowid, body) VALUES (new.id, {}); END",
            sqlite_text("new.parts")
        ),
        // Backfill: the rows stored before this migration.
        format!(
            "INSERT INTO messages_search(rowid, body) SELECT id, {} FROM messages",
            sqlite_text("messages.parts")
        ),
    ]
}

const SQLITE_DOWN: [&str; 4] = [
    "DROP TRIGGER IF EXISTS messages_search_update",
    "DROP TRIGGER IF EXISTS messages_search_delete",
    "DROP TRIGGER IF EXISTS messages_search_insert",
    "DROP TABLE IF EXISTS messages_search",
];

/// The vector `messages.search` holds for the parts in SQL expression
/// `parts` (the generated column's expression here, the trigger's in
/// `m20261127_000007`).
pub(crate) fn search_vector(parts: &str) -> String {
    format!("to_tsvector('simple'::regconfig, compactor_message_search_text({parts}))")
}

fn postgres_up() -> Vec<String> {
    vec![
        postgres_function(),
        POSTGRES_SAFE_FUNCTION.to_owned(),
        format!(
            "ALTER TABLE messages ADD COLUMN IF NOT EXISTS search tsvector GENERATED ALWAYS AS \
             ({}) STORED",
            search_vector("parts")
        ),
        "CREATE INDEX IF NOT EXISTS idx_messages_search ON messages USING gin (search)".to_owned(),
    ]
}

const POSTGRES_DOWN: [&str; 4] = [
    "DROP INDEX IF EXISTS idx_messages_search",
    "ALTER TABLE messages DROP COLUMN IF EXISTS search",
    "DROP FUNCTION IF EXISTS compactor_message_search_text(text)",
    "DROP FUNCTION IF EXISTS compactor_message_search_text_of(text)",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
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
        manager
            .create_index(
                Index::create()
                    .name("idx_messages_workstream_id")
                    .table(Messages::Table)
                    .col(Messages::WorkstreamId)
                    .col(Messages::Id)
                    .if_not_exists()
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        let statements = match db.get_database_backend() {
            DbBackend::Postgres => postgres_up(),
            DbBackend::Sqlite => sqlite_up(),
            other => {
                return Err(DbErr::Migration(format!(
                    "message search: unsupported backend {other:?}"
                )))
            }
        };
        for sql in statements {
            db.execute_unprepared(&sql).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let statements: &[&str] = match db.get_database_backend() {
            DbBackend::Postgres => &POSTGRES_DOWN,
            _ => &SQLITE_DOWN,
        };
        for sql in statements {
            db.execute_unprepared(sql).await?;
        }
        manager
            .drop_index(
                Index::drop()
                    .name("idx_messages_workstream_id")
                    .table(Messages::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Messages::Table)
                    .drop_column(Messages::CompactedByRunId)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    Id,
    WorkstreamId,
    CompactedByRunId,
}
