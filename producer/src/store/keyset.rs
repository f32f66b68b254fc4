//! "The messages of a workstream after id X", written so that every plan
//! walks the `(workstream_id, id)` index.
//!
//! - **The index.** sqlx prepares every statement, and after five runs
//!   PostgreSQL may switch to the statement's generic plan, which cannot
//!   see the values. For that plan the primary key (`id > X` in id order,
//!   the workstream checked row by row) looks as cheap as the
//!   `(workstream_id, id)` index, and it walks every message *of every
//!   workstream* appended after X: on a scratch table of 50 workstreams ×
//!   10,000 messages, 51 ms to find 3 rows, against 0.4 ms through the
//!   index. `workstream_id = W AND (workstream_id, id) > (W, X)` is a bound
//!   only that index can serve, so every plan takes it
//!   ([`after_in_workstream_sql`]). A plain `id > X` beside it brings the
//!   primary key back into the generic plan (a test sees it chosen on an
//!   analyzed table).
//! - **Where the walk starts.** Given `workstream_id = W`, PostgreSQL 15
//!   positions the scan by that equality and a bound on `id` alone: the row
//!   comparison is then checked entry by entry from the workstream's first
//!   message. For the read of what a turn appended that walk is the
//!   workstream's own index entries up to X, never another workstream's;
//!   for a compaction reading a long history page by page it was quadratic
//!   (a page of the last thousand of a million messages read 3,800 index
//!   pages, 22–29 ms). A compaction's page above the watermark therefore
//!   also bounds `id` by the greater of X and the watermark
//!   ([`from_in_workstream_sql`]), an expression with the watermark's
//!   sub-select in it, which the generic plan does not take for a cheap
//!   primary-key range (a test checks both, on a fresh and on an analyzed
//!   table). SQLite seeks by `workstream_id = W AND id > …` as well; it
//!   uses a row comparison only to bound the index's first column.

use sea_orm::DbBackend;

/// `messages` rows of workstream `workstream` with an id above `after`,
/// inside the workstream's index in every plan (see the module docs). Both
/// are numbered placeholders or expressions, each written twice.
pub(crate) fn after_in_workstream_sql(workstream: &str, after: &str) -> String {
    format!("workstream_id = {workstream} AND (workstream_id, id) > ({workstream}, {after})")
}

/// [`after_in_workstream_sql`], the index scan starting at `start` (an id
/// at or above `after`; see the module docs).
pub(crate) fn from_in_workstream_sql(workstream: &str, after: &str, start: &str) -> String {
    format!(
        "{} AND id > {start}",
        after_in_workstream_sql(workstream, after)
    )
}

/// The greater of two integer expressions.
pub(crate) fn greatest(backend: DbBackend, a: &str, b: &str) -> String {
    match backend {
        DbBackend::Postgres => format!("GREATEST({a}, {b})"),
        _ => format!("MAX({a}, {b})"),
    }
}
