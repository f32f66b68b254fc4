//! "The messages of a workstream after id X", written so that every plan
//! walks the `(workstream_id, id)` index.
//!
//! Why not `workstream_id = ? AND id > ?`: sqlx prepares every statement,
//! and after five runs PostgreSQL may switch to the statement's generic
//! plan, which cannot see the values. For that plan the primary key
//! (`id > ?` in id order, the workstream checked row by row) looks as
//! cheap as the `(workstream_id, id)` index, and it walks every message
//! *of every workstream* appended after X: measured on a scratch table of
//! 50 workstreams × 10,000 messages, 51 ms to find 3 rows, against 0.4 ms
//! through the index. The row comparison `(workstream_id, id) > (?, ?)` is
//! a bound only that index can serve, so both plans take it.

use sea_orm::sea_query::{Expr, SimpleExpr};
use sea_orm::DbBackend;

use super::convert::custom_placeholder;

/// `messages` rows of workstream `workstream_id` with an id above
/// `after` (add the `workstream_id` filter too: it keeps the scan inside
/// the workstream).
pub(crate) fn after_in_workstream(
    backend: DbBackend,
    workstream_id: i64,
    after: i64,
) -> SimpleExpr {
    let p = |n| custom_placeholder(backend, n);
    Expr::cust_with_values(
        format!(
            "(messages.workstream_id, messages.id) > ({}, {})",
            p(1),
            p(2)
        ),
        [workstream_id, after],
    )
}

/// The same bound in SQL written by hand, with the placeholders given.
pub(crate) fn after_in_workstream_sql(workstream: &str, after: &str) -> String {
    format!("(workstream_id, id) > ({workstream}, {after})")
}
