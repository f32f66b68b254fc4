//! Recall scoped to a workstream inside the index: on PostgreSQL, the
//! full-text GIN index of `m20261127_000002` is replaced by one over the
//! message's `search` vector plus one lexeme naming its workstream,
//! `ws <workstream_id>` (the expression [`SCOPED_SEARCH`]).
//!
//! Why: recall always asks for one workstream's matches. A GIN index on
//! `search` alone answers "which messages have this term" for the whole
//! table, and the workstream is then checked row by row in the heap: a
//! term frequent in *other* workstreams but absent from this one cost a
//! heap visit per foreign match (505 ms for 10,000 of them at 1M messages;
//! 7 ms with this index, see BENCHMARKS.md). Querying
//! `SCOPED_SEARCH @@ (terms && 'ws <id>')` makes GIN intersect the term's
//! posting list with the workstream's inside the index.
//!
//! The workstream lexeme contains a space, which PostgreSQL's text parser
//! never leaves inside a lexeme, so no message text can produce it (and a
//! user query cannot name it: `plainto_tsquery` splits at the space). An
//! expression index needs no extension (a composite GIN index on
//! `(workstream_id, search)` would need `btree_gin`) and no table rewrite:
//! the stored `search` column is reused. Building it reads the table once
//! (21 s at 1M messages on the 2-core test machine).
//!
//! `fastupdate = off`: with GIN's default pending list, appends add their
//! entries to an unsorted list (up to 4 MB) that every search then scans
//! whole — measured: a recall that takes 0.7 ms on a clean index took
//! 8.5 ms behind 20,000 pending messages, and ~50 ms p50 on a loaded
//! machine after a bulk append. A chat backend appends all the time, so
//! the list is never empty; each append updating the index directly keeps
//! recall's latency flat, for a steady cost per append (the chat-path
//! bench measures appends).
//!
//! The unscoped index is dropped: every recall of this build names its
//! workstream, and one GIN index per append is cheaper than two. A build
//! from before this migration still recalls correctly, only without an
//! index for its older-matches step (slow on a big table) — a rolling
//! upgrade should not leave old builds serving recall for long.
//!
//! SQLite is unchanged (its FTS5 table is joined by rowid).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// The indexed expression; the recall query (`producer/src/store/recall.rs`)
/// must spell it the same way for PostgreSQL to use the index.
pub(crate) const SCOPED_SEARCH: &str =
    "(search || array_to_tsvector(ARRAY['ws ' || workstream_id::text]))";

fn postgres_up() -> [String; 2] {
    [
        format!(
            "CREATE INDEX IF NOT EXISTS idx_messages_search_scoped ON messages \
             USING gin ({SCOPED_SEARCH}) WITH (fastupdate = off)"
        ),
        "DROP INDEX IF EXISTS idx_messages_search".to_owned(),
    ]
}

const POSTGRES_DOWN: [&str; 2] = [
    "CREATE INDEX IF NOT EXISTS idx_messages_search ON messages USING gin (search)",
    "DROP INDEX IF EXISTS idx_messages_search_scoped",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::on_postgres(manager, postgres_up()).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::on_postgres(manager, POSTGRES_DOWN).await
    }
}
