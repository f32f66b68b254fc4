//! Which messages are compacted: those at or below their workstream's
//! watermark (`last_compacted_message_id`) that are not `kept`.
//!
//! Nothing marks a compacted message (migration
//! `m20261127_000008_compacted_below_watermark` says why): a commit moves
//! the watermark and flags the few messages it keeps below it. Every read
//! of "un-compacted" goes through the conditions here, so the rule lives in
//! one place. Kept messages are always at or below the watermark (a
//! commit keeps only messages of the span it folds, and the watermark only
//! moves forward), so "un-compacted" is two disjoint id ranges: the kept
//! ones, found through their partial index, then everything above the
//! watermark.

use sea_orm::sea_query::{Expr, SimpleExpr};
use sea_orm::DbBackend;

use super::convert::custom_placeholder;

/// The watermark of the workstream whose id is the placeholder `param`
/// (no watermark: 0, below every id), read in the statement that uses it,
/// so the statement sees the watermark and the messages of one snapshot.
pub(crate) fn watermark_of(param: &str) -> String {
    format!(
        "COALESCE((SELECT last_compacted_message_id FROM workstreams \
         WHERE workstreams.id = {param}), 0)"
    )
}

/// `messages` rows of workstream `workstream_id` that are un-compacted
/// (add the `workstream_id` filter too: this condition does not).
pub(crate) fn uncompacted_of(backend: DbBackend, workstream_id: i64) -> SimpleExpr {
    Expr::cust_with_values(
        format!(
            "(messages.kept OR messages.id > {})",
            watermark_of(&custom_placeholder(backend, 1))
        ),
        [workstream_id],
    )
}

/// Whether a `messages` row of workstream `workstream_id` is compacted, as
/// a selected boolean.
pub(crate) fn compacted_of(backend: DbBackend, workstream_id: i64) -> SimpleExpr {
    Expr::cust_with_values(
        format!(
            "(NOT messages.kept AND messages.id <= {})",
            watermark_of(&custom_placeholder(backend, 1))
        ),
        [workstream_id],
    )
}
