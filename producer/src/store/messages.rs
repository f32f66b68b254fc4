//! Appending messages and reading the un-compacted ones in pages.
//!
//! An append is idempotent per client id: a message whose `client_id` names
//! a message the workstream already stores is not stored again, and its
//! stored id is returned in its place, so a client that retries an append
//! (after a timeout, a 503, a crash) never duplicates what the first try
//! stored.

use std::collections::HashMap;

use compactor_shared::message::parts_from_json;
use compactor_shared::{EntityKey, Message, MessageId, Part, Role};
use sea_orm::sea_query::{Expr, ExprTrait, Query};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, QueryTrait, Select, Statement,
};

use super::branches::Tip;
use super::compacted::{compacted_of, uncompacted_of};
use super::convert::{encode_parts, now, role_from_str, to_i64, to_u64};
use super::entities::{message, workstream};
use super::workstreams::{ensure, insert_if_missing, WorkstreamRow};
use super::{Store, StoreError};

/// A message to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    pub role: Role,
    pub parts: Vec<Part>,
    pub pinned: bool,
    /// Estimated tokens (the caller's estimator); summed into the
    /// workstream's `uncompacted_tokens`.
    pub token_estimate: u64,
    /// The client's id for the message, unique per workstream: a message
    /// whose id is stored already is not stored again. At most
    /// [`CLIENT_ID_MAX_BYTES`] bytes (the column's size).
    pub client_id: Option<String>,
}

/// Longest client id, in bytes.
pub const CLIENT_ID_MAX_BYTES: usize = 255;

/// What [`Store::append_messages`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub workstream_id: i64,
    /// The ids of the messages, in the order they were given: assigned
    /// now, or, for a message whose client id was stored already, the
    /// stored message's.
    pub ids: Vec<MessageId>,
    /// The workstream's `uncompacted_tokens` after the append.
    pub uncompacted_tokens: u64,
    /// How many of the messages were stored already (by client id) and not
    /// stored again.
    pub already_stored: usize,
    /// The branch the append left (its parent forked off the head's
    /// branch): a `summarize_branch` job is due for it.
    pub abandoned: Option<super::AbandonedBranch>,
}

/// Rows per `INSERT … VALUES` statement (SQLite's appends, memory entries).
/// A message binds 8 values; SQLite builds
/// before 3.32 allow 999 bound parameters per statement (later ones 32,766,
/// PostgreSQL 65,535), so 120 rows stay under every limit.
pub(crate) const INSERT_BATCH_ROWS: usize = 120;

/// Client ids looked up per `IN (…)` list (under every bound-parameter
/// limit, with the workstream id).
const LOOKUP_BATCH: usize = 500;

/// Where a message of an append ends up.
enum Slot {
    /// Stored already: this id.
    Stored(MessageId),
    /// Inserted now: position among the inserted messages.
    New(usize),
    /// Repeats the client id of an earlier message of the same append: the
    /// same message (position in the request).
    Repeat(usize),
}

/// A stored message, as far as a client id check needs it.
struct StoredByClientId {
    id: i64,
    role: String,
    parts: String,
    pinned: bool,
}

impl Store {
    /// Appends messages to the workstream of `key` (created when missing),
    /// in one transaction: the messages, `uncompacted_tokens += Σ
    /// estimates`, `last_message_id` = the newest id, and
    /// `just_auto_compacted = false` (the chat moved on). Any number of
    /// messages: they are inserted in batches under the databases'
    /// bound-parameter limits.
    ///
    /// A message whose client id is stored already (or given earlier in the
    /// same call) is not stored again: its stored id stands in its place,
    /// and nothing about the workstream changes for it. The same client id
    /// with other content (role, parts, pinned) is a
    /// [`StoreError::ClientIdConflict`], and nothing is stored.
    pub async fn append_messages(
        &self,
        key: &EntityKey,
        messages: &[NewMessage],
    ) -> Result<Appended, StoreError> {
        self.append_messages_at(key, None, messages).await
    }

    /// [`Store::append_messages`] after `parent`: the first new message
    /// continues `parent` (`None`: the head), the others it, and the head
    /// moves to the newest. A parent that is not the head forks (see the
    /// `branches` module): [`Appended::abandoned`] is the branch left. A
    /// parent that is not the workstream's is a
    /// [`StoreError::InvalidParent`], one behind the last compaction a
    /// [`StoreError::BehindCompaction`]; nothing is stored then.
    pub async fn append_messages_at(
        &self,
        key: &EntityKey,
        parent: Option<MessageId>,
        messages: &[NewMessage],
    ) -> Result<Appended, StoreError> {
        const OP: &str = "append_messages";
        // Encode before opening the transaction: a value that cannot be
        // stored fails without having locked anything.
        let encoded: Vec<String> = messages
            .iter()
            .map(|m| encode_parts(OP, &m.parts))
            .collect::<Result<_, _>>()?;

        let txn = self.begin_write(OP).await?;
        if messages.is_empty() {
            let ws = ensure(&txn, key, OP).await?;
            txn.commit().await.map_err(StoreError::db(OP))?;
            return Ok(Appended {
                workstream_id: ws.id,
                ids: Vec::new(),
                uncompacted_tokens: ws.uncompacted_tokens,
                already_stored: 0,
                abandoned: None,
            });
        }
        // Lock the workstream row before reading client ids or allocating
        // message ids (see the module docs of `store`): concurrent appends
        // to one workstream commit in id order, and two tries of one append
        // cannot both find its client ids missing. The locking statement
        // also reads everything the append needs of the row.
        let ws = lock_for_append(&txn, key, OP).await?;
        // Without client ids there is nothing to look up.
        let stored = if messages.iter().any(|m| m.client_id.is_some()) {
            stored_by_client_id(&txn, ws.id, messages, OP).await?
        } else {
            HashMap::new()
        };
        let slots = place(messages, &encoded, &stored, OP)?;
        let fresh: Vec<usize> = slots
            .iter()
            .enumerate()
            .filter_map(|(i, slot)| matches!(slot, Slot::New(_)).then_some(i))
            .collect();

        let mut new_ids = Vec::new();
        let mut uncompacted = ws.uncompacted_tokens;
        let plan = if fresh.is_empty() {
            super::branches::AppendPlan::default()
        } else {
            super::branches::plan_append(&txn, ws.id, &ws.tip, parent, OP).await?
        };
        if !fresh.is_empty() {
            let rows = NewRows {
                workstream_id: ws.id,
                messages,
                encoded: &encoded,
                fresh: &fresh,
                first_parent: plan.first_parent,
            };
            let added: u64 = fresh.iter().fold(0u64, |sum, &i| {
                sum.saturating_add(messages[i].token_estimate)
            });
            let postgres = txn.get_database_backend() == DbBackend::Postgres;
            if postgres && !plan.recount {
                // The common case in one statement: insert, then update
                // the row from what the insert returned.
                let update = RowUpdate {
                    added: to_i64(added),
                    branched: plan.branched,
                };
                (new_ids, uncompacted) = insert_unnest(&txn, &rows, Some(update), OP).await?;
            } else {
                new_ids = if postgres {
                    insert_unnest(&txn, &rows, None, OP).await?.0
                } else {
                    insert_values(&txn, &rows, OP).await?
                };
                let newest = new_ids.last().map_or(0, |id| id.0);
                let tokens = if plan.recount {
                    let recounted =
                        super::branches::path_tokens(&txn, ws.id, ws.tip.watermark, newest, OP)
                            .await?;
                    Expr::value(recounted)
                } else {
                    Expr::col(workstream::Column::UncompactedTokens).add(to_i64(added))
                };
                uncompacted = update_row(&txn, ws.id, tokens, plan.branched, newest, OP).await?;
            }
            if new_ids.len() != fresh.len() {
                return Err(StoreError::Db {
                    op: OP,
                    source: sea_orm::DbErr::Custom(format!(
                        "{} ids returned for {} inserted messages",
                        new_ids.len(),
                        fresh.len()
                    )),
                });
            }
        }
        let mut ids: Vec<MessageId> = Vec::with_capacity(messages.len());
        for slot in &slots {
            let id = match *slot {
                Slot::Stored(id) => id,
                // Checked above: one id per inserted message.
                Slot::New(n) => new_ids[n],
                // An earlier position: its id is known by now.
                Slot::Repeat(first) => ids[first],
            };
            ids.push(id);
        }
        txn.commit().await.map_err(StoreError::db(OP))?;
        Ok(Appended {
            workstream_id: ws.id,
            ids,
            uncompacted_tokens: to_u64(uncompacted),
            already_stored: messages.len() - fresh.len(),
            abandoned: plan.abandoned,
        })
    }

    /// One keyset page of the workstream's un-compacted messages: ids
    /// greater than `after` (`None`: from the start), ascending, at most
    /// `limit`. Pass the last id of a page as `after` of the next; an empty
    /// page is the end. Keyset (not offset) paging stays fast however long
    /// the history is and never skips or repeats a message when others are
    /// appended meanwhile.
    ///
    /// A row whose role or parts do not decode is a
    /// [`StoreError::CorruptRow`], never skipped.
    pub async fn uncompacted_page(
        &self,
        workstream_id: i64,
        after: Option<MessageId>,
        limit: u64,
    ) -> Result<Vec<Message>, StoreError> {
        // A page bounded in count only: the compaction reader's page (the
        // same keyset bounds, the same branch handling) with no token bound.
        self.uncompacted_reader(workstream_id)
            .page_within(after, limit, u64::MAX)
            .await
    }
}

/// What [`Store::context_history`] read: the messages, oldest first, each
/// with its stored estimate, and the window they are.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextHistory {
    pub messages: Vec<Message>,
    /// Per message: its `token_estimate` as stored (what the load bound
    /// counts).
    pub estimates: Vec<u64>,
    pub window: HistoryWindow,
}

impl ContextHistory {
    /// The rows, in the order given, decoded; the window: all of them.
    fn of_rows(rows: impl Iterator<Item = ContentRow>) -> Result<ContextHistory, StoreError> {
        let mut messages = Vec::new();
        let mut estimates = Vec::new();
        for (id, estimate, role, parts, pinned) in rows {
            messages.push(row_message(id, &role, &parts, pinned)?);
            estimates.push(to_u64(estimate));
        }
        Ok(ContextHistory {
            window: HistoryWindow {
                first: messages.first().map(|m| m.id),
                messages: messages.len() as u64,
                omitted_messages: 0,
                omitted_tokens: 0,
            },
            messages,
            estimates,
        })
    }
}

/// Where a bounded read of the un-compacted history starts, and what the
/// bound leaves out ([`Store::uncompacted_window`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryWindow {
    /// The oldest un-compacted message to load; `None` when there is none.
    pub first: Option<MessageId>,
    /// Messages in the window (`first` and every newer un-compacted one).
    pub messages: u64,
    /// Older un-compacted messages the bound leaves out (0: none).
    pub omitted_messages: u64,
    /// Their estimated tokens.
    pub omitted_tokens: u64,
}

impl HistoryWindow {
    /// Whether the bound left messages out.
    pub fn truncated(&self) -> bool {
        self.omitted_messages > 0
    }
}

impl Store {
    /// The newest un-compacted messages of the workstream that fit the
    /// store's [`HistoryBound`](super::HistoryBound): at most
    /// `max_messages`, and at most `max_tokens` of estimates (the newest
    /// message always fits). Reads ids and estimates only, newest first,
    /// and at most one row past the bound; only when the bound cuts does a
    /// second statement count what it left out. Load the window with
    /// [`Store::uncompacted_page`] from `first`.
    pub async fn uncompacted_window(
        &self,
        workstream_id: i64,
    ) -> Result<HistoryWindow, StoreError> {
        const OP: &str = "uncompacted_window";
        let bound = self.history;
        if let Some(path) = super::branches::current_path(&self.db, workstream_id, OP).await? {
            return Ok(super::branches::path_window(
                &path,
                bound.max_messages,
                bound.max_tokens,
            ));
        }
        self.linear_window(workstream_id, OP).await
    }

    /// [`Store::uncompacted_window`] of a linear workstream.
    async fn linear_window(
        &self,
        workstream_id: i64,
        op: &'static str,
    ) -> Result<HistoryWindow, StoreError> {
        let bound = self.history;
        let sizes: Vec<(i64, i64)> = uncompacted_sizes(self.backend(), workstream_id)
            .order_by_desc(message::Column::Id)
            .limit(bound.max_messages.saturating_add(1))
            .into_tuple()
            .all(&self.db)
            .await
            .map_err(StoreError::db(op))?;
        let mut window = newest_within(sizes.iter().copied(), bound);
        if window.messages < sizes.len() as u64 {
            self.count_omitted(workstream_id, &mut window, op).await?;
        }
        Ok(window)
    }

    /// Fills in what `window` leaves out: every un-compacted message older
    /// than its first (a second statement, run only when the bound cut).
    async fn count_omitted(
        &self,
        workstream_id: i64,
        window: &mut HistoryWindow,
        op: &'static str,
    ) -> Result<(), StoreError> {
        let Some(first) = window.first else {
            return Ok(());
        };
        // The count is at least 1 here; `SUM` is cast because PostgreSQL
        // sums BIGINT into NUMERIC.
        let left_out: Option<(i64, Option<i64>)> = message::Entity::find()
            .select_only()
            .expr_as(Expr::col(message::Column::Id).count(), "messages")
            .expr_as(
                Expr::col(message::Column::TokenEstimate)
                    .sum()
                    .cast_as("BIGINT"),
                "tokens",
            )
            .filter(message::Column::WorkstreamId.eq(workstream_id))
            .filter(uncompacted_of(self.backend(), workstream_id))
            .filter(message::Column::Id.lt(first.0))
            .into_tuple()
            .one(&self.db)
            .await
            .map_err(StoreError::db(op))?;
        let (messages, tokens) = left_out.unwrap_or_default();
        window.omitted_messages = to_u64(messages);
        window.omitted_tokens = to_u64(tokens.unwrap_or_default());
        Ok(())
    }

    /// What a context loads of the workstream's un-compacted history: the
    /// messages (oldest first) and the window they are, the same as
    /// [`Store::uncompacted_window`] and then [`Store::uncompacted_page`]s
    /// from its first message would give, in as few statements as the
    /// history allows, for the workstream row `ws` as just read: its
    /// `uncompacted_tokens` (the count its trigger reads) decides the
    /// window, and a row without a head (linear) skips the look at the
    /// head.
    ///
    /// Why not pages: a turn's read of 10k messages in pages of a thousand
    /// took 11 page statements, each after a look at the workstream's head
    /// (two round trips per page) — most of the latency of `GET …/context`.
    /// The bound caps what one read holds anyway, so the window is read in
    /// one statement:
    ///
    /// - A linear workstream whose count is within `max_tokens`: the newest
    ///   `max_messages + 1` un-compacted messages, newest first. All of
    ///   them when they are within `max_messages` (no token cut, as the
    ///   count says they fit); else the window is cut from these same rows
    ///   by the rule of [`Store::uncompacted_window`], and only its rows
    ///   are decoded.
    /// - A linear workstream over `max_tokens`: the window from ids and
    ///   estimates first (most of the rows may be left out: their content is
    ///   never read), then its messages in one statement.
    /// - A branched workstream: its current path is read once, and the
    ///   window's messages by id.
    ///
    /// A row whose role or parts do not decode is a
    /// [`StoreError::CorruptRow`], never skipped.
    pub async fn context_history(&self, ws: &WorkstreamRow) -> Result<ContextHistory, StoreError> {
        const OP: &str = "context_history";
        let bound = self.history;
        let (workstream_id, uncompacted_tokens) = (ws.id, ws.uncompacted_tokens);
        let path = if ws.head_message_id.is_some() {
            super::branches::current_path(&self.db, workstream_id, OP).await?
        } else {
            None
        };
        if let Some(path) = path {
            let fits =
                uncompacted_tokens <= bound.max_tokens && path.len() as u64 <= bound.max_messages;
            let window = if fits {
                HistoryWindow {
                    first: path.first().map(|&(id, _)| MessageId(id)),
                    messages: path.len() as u64,
                    omitted_messages: 0,
                    omitted_tokens: 0,
                }
            } else {
                super::branches::path_window(&path, bound.max_messages, bound.max_tokens)
            };
            let from = window.first.map_or(i64::MAX, |f| f.0);
            let ids: Vec<MessageId> = path
                .iter()
                .filter(|&&(id, _)| id >= from)
                .map(|&(id, _)| MessageId(id))
                .collect();
            let messages = self.messages_by_ids(workstream_id, &ids).await?;
            let estimate_of: HashMap<i64, i64> = path.iter().copied().collect();
            let estimates = messages
                .iter()
                .map(|m| to_u64(estimate_of.get(&m.id.0).copied().unwrap_or(0)))
                .collect();
            let window = if fits {
                HistoryWindow {
                    first: messages.first().map(|m| m.id),
                    messages: messages.len() as u64,
                    ..window
                }
            } else {
                window
            };
            return Ok(ContextHistory {
                messages,
                estimates,
                window,
            });
        }
        if uncompacted_tokens <= bound.max_tokens {
            let rows: Vec<ContentRow> = uncompacted_content(self.backend(), workstream_id)
                .order_by_desc(message::Column::Id)
                .limit(bound.max_messages.saturating_add(1))
                .into_tuple()
                .all(&self.db)
                .await
                .map_err(StoreError::db(OP))?;
            let read = rows.len() as u64;
            let mut window = if read <= bound.max_messages {
                HistoryWindow {
                    first: rows.last().map(|r| MessageId(r.0)),
                    messages: read,
                    omitted_messages: 0,
                    omitted_tokens: 0,
                }
            } else {
                newest_within(rows.iter().map(|r| (r.0, r.1)), bound)
            };
            let kept = usize::try_from(window.messages).unwrap_or(usize::MAX);
            let mut history = ContextHistory::of_rows(rows.into_iter().take(kept).rev())?;
            if window.messages < read {
                self.count_omitted(workstream_id, &mut window, OP).await?;
            }
            history.window = window;
            return Ok(history);
        }
        let window = self.linear_window(workstream_id, OP).await?;
        let Some(first) = window.first else {
            return Ok(ContextHistory {
                messages: Vec::new(),
                estimates: Vec::new(),
                window,
            });
        };
        // Everything from the window's first message on, as pages from it
        // would read (messages appended meanwhile included).
        let rows: Vec<ContentRow> = uncompacted_content(self.backend(), workstream_id)
            .filter(message::Column::Id.gte(first.0))
            .order_by_asc(message::Column::Id)
            .into_tuple()
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        let mut history = ContextHistory::of_rows(rows.into_iter())?;
        history.window = window;
        Ok(history)
    }

    /// The un-compacted messages of a linear workstream after `after`, in
    /// order, at most `limit` (one statement): what was appended to a
    /// history read before (see `client::kept_tails`), with their stored
    /// estimates; its `window` says only how many were read. A branched
    /// workstream's path is not considered.
    ///
    /// A row whose role or parts do not decode is a
    /// [`StoreError::CorruptRow`], never skipped.
    pub async fn appended_after(
        &self,
        workstream_id: i64,
        after: MessageId,
        limit: u64,
    ) -> Result<ContextHistory, StoreError> {
        const OP: &str = "appended_after";
        let rows = self
            .db
            .query_all_raw(appended_after_statement(
                self.backend(),
                workstream_id,
                after,
                limit,
            ))
            .await
            .map_err(StoreError::db(OP))?;
        let rows = rows
            .iter()
            .map(|row| {
                let column = |name| row.try_get_by::<i64, _>(name).map_err(StoreError::db(OP));
                Ok((
                    column("id")?,
                    column("token_estimate")?,
                    row.try_get_by::<String, _>("role")
                        .map_err(StoreError::db(OP))?,
                    row.try_get_by::<String, _>("parts")
                        .map_err(StoreError::db(OP))?,
                    row.try_get_by::<bool, _>("pinned")
                        .map_err(StoreError::db(OP))?,
                ))
            })
            .collect::<Result<Vec<ContentRow>, StoreError>>()?;
        ContextHistory::of_rows(rows.into_iter())
    }

    /// PostgreSQL's generic plan for [`Store::appended_after`], run
    /// (`EXPLAIN (ANALYZE, BUFFERS)`: see [`convert::explain_generic`]). It
    /// must start its walk of the workstream's index at `after` (see
    /// `store::keyset`). For tests and diagnosis (`None` on SQLite).
    ///
    /// [`convert::explain_generic`]: super::convert::explain_generic
    #[doc(hidden)]
    pub async fn appended_after_generic_plan(
        &self,
        workstream_id: i64,
        after: MessageId,
        limit: u64,
    ) -> Result<Option<String>, StoreError> {
        if self.backend() != DbBackend::Postgres {
            return Ok(None);
        }
        let statement = appended_after_statement(DbBackend::Postgres, workstream_id, after, limit);
        super::convert::explain_generic(&self.db, statement, "appended_after_plan")
            .await
            .map(Some)
    }

    /// `[database] context_cache_bytes`: how much un-compacted history a
    /// client over this store keeps between context reads.
    pub fn context_cache_bytes(&self) -> u64 {
        self.kept_bytes
    }

    /// [`Store::uncompacted_page`], also bounded in size: it stops before
    /// the message that would take the page's token estimates past
    /// `max_tokens` (a page always has at least one message). A job reads
    /// pages of a thousand short messages, or of a few huge ones, with the
    /// same memory. One page of an [`UncompactedReader`](super::UncompactedReader),
    /// which a job keeps for all its pages.
    pub async fn uncompacted_page_within(
        &self,
        workstream_id: i64,
        after: Option<MessageId>,
        limit: u64,
        max_tokens: u64,
    ) -> Result<Vec<Message>, StoreError> {
        self.uncompacted_reader(workstream_id)
            .page_within(after, limit, max_tokens)
            .await
    }
}

/// A message row as a context reads it: id, estimate, role, parts, pinned.
type ContentRow = (i64, i64, String, String, bool);

/// The workstream's un-compacted messages, `id` and `token_estimate`
/// selected (callers order and bound it).
fn uncompacted_sizes(backend: DbBackend, workstream_id: i64) -> Select<message::Entity> {
    message::Entity::find()
        .select_only()
        .column(message::Column::Id)
        .column(message::Column::TokenEstimate)
        .filter(message::Column::WorkstreamId.eq(workstream_id))
        .filter(uncompacted_of(backend, workstream_id))
}

/// [`uncompacted_sizes`] and the rest of a [`ContentRow`].
fn uncompacted_content(backend: DbBackend, workstream_id: i64) -> Select<message::Entity> {
    uncompacted_sizes(backend, workstream_id)
        .column(message::Column::Role)
        .column(message::Column::Parts)
        .column(message::Column::Pinned)
}

/// The statement of [`Store::appended_after`]: written by hand, so that
/// the keyset bound's placeholders are the same parameters each time it
/// names them (`store::keyset`).
fn appended_after_statement(
    backend: DbBackend,
    workstream_id: i64,
    after: MessageId,
    limit: u64,
) -> Statement {
    let p = |n| super::convert::placeholder(backend, n);
    let sql = format!(
        "SELECT id, token_estimate, role, parts, pinned FROM messages \
         WHERE {bound} AND (kept OR id > {watermark}) ORDER BY id LIMIT {limit}",
        bound = super::keyset::after_in_workstream_sql(&p(1), &p(2)),
        watermark = super::compacted::watermark_of(&p(1)),
        limit = p(3),
    );
    let values: [sea_orm::Value; 3] = [workstream_id.into(), after.0.into(), to_i64(limit).into()];
    Statement::from_sql_and_values(backend, sql, values)
}

/// The newest messages of `sizes` (`(id, estimate)`, newest first) within
/// `bound`: at most `max_messages`, and at most `max_tokens` of estimates
/// (the newest message always fits). Nothing about what it leaves out.
pub(crate) fn newest_within(
    sizes: impl Iterator<Item = (i64, i64)>,
    bound: super::HistoryBound,
) -> HistoryWindow {
    let mut window = HistoryWindow {
        first: None,
        messages: 0,
        omitted_messages: 0,
        omitted_tokens: 0,
    };
    let mut tokens: u64 = 0;
    for (id, estimate) in sizes {
        let estimate = to_u64(estimate);
        let full = window.messages == bound.max_messages
            || (window.messages > 0 && tokens.saturating_add(estimate) > bound.max_tokens);
        if full {
            break;
        }
        window.messages += 1;
        tokens = tokens.saturating_add(estimate);
        window.first = Some(MessageId(id));
    }
    window
}

pub(crate) fn to_message(m: message::Model) -> Result<Message, StoreError> {
    row_message(m.id, &m.role, &m.parts, m.pinned)
}

/// A message from its columns.
pub(crate) fn row_message(
    id: i64,
    role: &str,
    parts: &str,
    pinned: bool,
) -> Result<Message, StoreError> {
    const TABLE: &str = "messages";
    let role = role_from_str(role).ok_or_else(|| StoreError::CorruptRow {
        table: TABLE,
        id,
        detail: format!("role: unknown role {role:?}"),
    })?;
    let parts = parts_from_json(parts).map_err(|err| StoreError::CorruptRow {
        table: TABLE,
        id,
        detail: format!("parts: {err}"),
    })?;
    Ok(Message {
        id: MessageId(id),
        role,
        parts,
        pinned,
    })
}

/// Whether `id` is a message of the workstream; the previous estimate and
/// compaction flag if so. Used inside transactions.
pub(crate) async fn estimate_of<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    id: MessageId,
    op: &'static str,
) -> Result<Option<(i64, bool)>, StoreError> {
    message::Entity::find_by_id(id.0)
        .filter(message::Column::WorkstreamId.eq(workstream_id))
        .select_only()
        .column(message::Column::TokenEstimate)
        .expr_as(
            compacted_of(db.get_database_backend(), workstream_id),
            "compacted",
        )
        .into_tuple::<(i64, bool)>()
        .one(db)
        .await
        .map_err(StoreError::db(op))
}

/// The workstream row of an append, as the statement that locked it read
/// it.
struct Locked {
    id: i64,
    uncompacted_tokens: i64,
    tip: Tip,
}

/// Locks the row of the workstream of `key` (created when missing) and
/// reads what an append needs of it, in one statement: `UPDATE … SET
/// updated_at … RETURNING …` takes the row lock and returns the row as it
/// is under the lock. A missing workstream is inserted (a no-op when a
/// concurrent caller inserted it first) and then locked the same way.
async fn lock_for_append<C: ConnectionTrait>(
    db: &C,
    key: &EntityKey,
    op: &'static str,
) -> Result<Locked, StoreError> {
    if let Some(locked) = try_lock(db, key, op).await? {
        return Ok(locked);
    }
    insert_if_missing(db, key, op).await?;
    try_lock(db, key, op).await?.ok_or(StoreError::Db {
        op,
        source: sea_orm::DbErr::RecordNotFound(format!("workstream {key} after insert")),
    })
}

async fn try_lock<C: ConnectionTrait>(
    db: &C,
    key: &EntityKey,
    op: &'static str,
) -> Result<Option<Locked>, StoreError> {
    use workstream::Column;
    let mut update = workstream::Entity::update_many()
        .col_expr(Column::UpdatedAt, Expr::value(now()))
        .filter(Column::Domain.eq(key.domain()))
        .filter(Column::EntityId.eq(key.entity_id()))
        .into_query();
    update.returning(Query::returning().columns([
        Column::Id,
        Column::UncompactedTokens,
        Column::HeadMessageId,
        Column::LastMessageId,
        Column::LastCompactedMessageId,
        Column::IsCompacting,
        Column::LeaseDeadlineMs,
    ]));
    let Some(row) = db.query_one(&update).await.map_err(StoreError::db(op))? else {
        return Ok(None);
    };
    let read = || -> Result<Locked, sea_orm::DbErr> {
        Ok(Locked {
            id: row.try_get("", "id")?,
            uncompacted_tokens: row.try_get("", "uncompacted_tokens")?,
            tip: Tip {
                head: row.try_get("", "head_message_id")?,
                last: row.try_get("", "last_message_id")?,
                watermark: row.try_get("", "last_compacted_message_id")?,
                compacting: row.try_get("", "is_compacting")?,
                lease_deadline_ms: row.try_get("", "lease_deadline_ms")?,
            },
        })
    };
    read().map(Some).map_err(StoreError::db(op))
}

/// The messages an append inserts: `fresh` indexes `messages` (and
/// `encoded`, their parts); the first continues `first_parent`.
struct NewRows<'a> {
    workstream_id: i64,
    messages: &'a [NewMessage],
    encoded: &'a [String],
    fresh: &'a [usize],
    first_parent: Option<i64>,
}

/// What an append changes on its workstream row after the insert:
/// `uncompacted_tokens += added`, `last_message_id` (and, when
/// `branched`, `head_message_id`) = the newest message, and
/// `just_auto_compacted = false` (the chat moved on).
struct RowUpdate {
    added: i64,
    branched: bool,
}

/// The insert of [`insert_unnest`]: `$1` the workstream, `$2` the time,
/// `$3`…`$8` the columns as arrays (in their text form, cast here).
macro_rules! insert_unnest_sql {
    () => {
        "INSERT INTO messages \
         (workstream_id, role, parts, token_estimate, pinned, created_at, client_id, \
          parent_id) \
         SELECT $1, m.role, m.parts, m.token_estimate, m.pinned, $2, m.client_id, \
          m.parent_id \
         FROM UNNEST($3::text::text[], $4::text::text[], $5::text::bigint[], \
          $6::text::boolean[], $7::text::text[], $8::text::bigint[]) \
          AS m(role, parts, token_estimate, pinned, client_id, parent_id) \
         RETURNING id"
    };
}

/// The insert alone.
const INSERT_UNNEST: &str = insert_unnest_sql!();

/// The insert and the [`RowUpdate`] (`$9` added tokens, `$10` branched)
/// in one statement: the update reads the newest id from the insert's
/// `RETURNING`; every id comes back with the row's new
/// `uncompacted_tokens`.
const INSERT_UNNEST_AND_UPDATE: &str = concat!(
    "WITH ins AS (",
    insert_unnest_sql!(),
    "), upd AS (UPDATE workstreams SET \
       uncompacted_tokens = uncompacted_tokens + $9, \
       just_auto_compacted = FALSE, \
       last_message_id = (SELECT max(id) FROM ins), \
       head_message_id = CASE WHEN $10 THEN (SELECT max(id) FROM ins) \
                              ELSE head_message_id END \
       WHERE id = $1 RETURNING uncompacted_tokens) \
     SELECT ins.id, upd.uncompacted_tokens FROM ins CROSS JOIN upd"
);

/// PostgreSQL: one `INSERT … SELECT … FROM UNNEST(…)` for the whole batch,
/// each column bound as one array (in its text form): the same few
/// parameters however many rows, one statement text (prepared once per
/// connection), and no bound-parameter limit. `UNNEST` yields the rows in
/// array order, and ids are allocated in the order rows are inserted.
///
/// With `update`, the same statement updates the workstream row
/// ([`INSERT_UNNEST_AND_UPDATE`]) and its `uncompacted_tokens` is
/// returned; without, the second value is 0.
async fn insert_unnest<C: ConnectionTrait>(
    db: &C,
    rows: &NewRows<'_>,
    update: Option<RowUpdate>,
    op: &'static str,
) -> Result<(Vec<MessageId>, i64), StoreError> {
    let n = rows.fresh.len();
    let mut roles = PgArray::with_capacity(n * 12);
    let mut parts =
        PgArray::with_capacity(rows.fresh.iter().map(|&i| rows.encoded[i].len() + 8).sum());
    let mut tokens = PgArray::with_capacity(n * 8);
    let mut pinned = PgArray::with_capacity(n * 2);
    let mut client_ids = PgArray::with_capacity(n * 8);
    let mut parents = PgArray::with_capacity(n * 5);
    for (k, &i) in rows.fresh.iter().enumerate() {
        let m = &rows.messages[i];
        roles.text(Some(m.role.as_str()));
        parts.text(Some(&rows.encoded[i]));
        tokens.raw(Some(&to_i64(m.token_estimate).to_string()));
        pinned.raw(Some(if m.pinned { "t" } else { "f" }));
        client_ids.text(m.client_id.as_deref());
        let parent = if k == 0 { rows.first_parent } else { None };
        parents.raw(parent.map(|p| p.to_string()).as_deref());
    }
    let mut values: Vec<sea_orm::Value> = vec![
        rows.workstream_id.into(),
        now().into(),
        roles.finish().into(),
        parts.finish().into(),
        tokens.finish().into(),
        pinned.finish().into(),
        client_ids.finish().into(),
        parents.finish().into(),
    ];
    let sql = match &update {
        Some(update) => {
            values.push(update.added.into());
            values.push(update.branched.into());
            INSERT_UNNEST_AND_UPDATE
        }
        None => INSERT_UNNEST,
    };
    let returned = db
        .query_all_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            sql,
            values,
        ))
        .await
        .map_err(StoreError::db(op))?;
    let uncompacted = match (&update, returned.first()) {
        (Some(_), Some(row)) => row
            .try_get::<i64>("", "uncompacted_tokens")
            .map_err(StoreError::db(op))?,
        _ => 0,
    };
    Ok((sorted_ids(&returned, op)?, uncompacted))
}

/// The [`RowUpdate`] as a statement of its own, with `tokens` the new
/// `uncompacted_tokens` (added, or recounted when the path changed);
/// returns it.
async fn update_row<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    tokens: Expr,
    branched: bool,
    newest: i64,
    op: &'static str,
) -> Result<i64, StoreError> {
    let mut update = workstream::Entity::update_many()
        .col_expr(workstream::Column::UncompactedTokens, tokens)
        .col_expr(workstream::Column::JustAutoCompacted, Expr::value(false))
        .col_expr(workstream::Column::LastMessageId, Expr::value(Some(newest)));
    if branched {
        update = update.col_expr(workstream::Column::HeadMessageId, Expr::value(Some(newest)));
    }
    let mut update = update
        .filter(workstream::Column::Id.eq(workstream_id))
        .into_query();
    update.returning_col(workstream::Column::UncompactedTokens);
    let row = db
        .query_one(&update)
        .await
        .map_err(StoreError::db(op))?
        .ok_or(StoreError::UnknownWorkstream { op, workstream_id })?;
    row.try_get::<i64>("", "uncompacted_tokens")
        .map_err(StoreError::db(op))
}

/// SQLite: multi-row `INSERT … VALUES` in batches of
/// [`INSERT_BATCH_ROWS`] (under its bound-parameter limit).
async fn insert_values<C: ConnectionTrait>(
    db: &C,
    rows: &NewRows<'_>,
    op: &'static str,
) -> Result<Vec<MessageId>, StoreError> {
    let created_at = now();
    let mut ids = Vec::with_capacity(rows.fresh.len());
    for (b, batch) in rows.fresh.chunks(INSERT_BATCH_ROWS).enumerate() {
        let models = batch.iter().enumerate().map(|(k, &i)| {
            let m = &rows.messages[i];
            message::ActiveModel {
                workstream_id: Set(rows.workstream_id),
                role: Set(m.role.as_str().to_owned()),
                parts: Set(rows.encoded[i].clone()),
                token_estimate: Set(to_i64(m.token_estimate)),
                pinned: Set(m.pinned),
                created_at: Set(created_at),
                client_id: Set(m.client_id.clone()),
                parent_id: Set(if b == 0 && k == 0 {
                    rows.first_parent
                } else {
                    None
                }),
                ..Default::default()
            }
        });
        let mut insert = message::Entity::insert_many(models).into_query();
        insert.returning_col(message::Column::Id);
        let returned = db.query_all(&insert).await.map_err(StoreError::db(op))?;
        ids.extend(sorted_ids(&returned, op)?);
    }
    Ok(ids)
}

/// The ids an `INSERT … RETURNING id` returned, ascending. `RETURNING` does
/// not promise an order, but ids are allocated in the order rows are
/// inserted, so sorted ids are the messages' ids in the order given.
fn sorted_ids(
    returned: &[sea_orm::QueryResult],
    op: &'static str,
) -> Result<Vec<MessageId>, StoreError> {
    let mut ids = returned
        .iter()
        .map(|row| row.try_get::<i64>("", "id"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::db(op))?;
    ids.sort_unstable();
    Ok(ids.into_iter().map(MessageId).collect())
}

/// A one-dimensional PostgreSQL array literal (`{"a","b",NULL}`), bound as
/// text and cast to its array type by the statement.
struct PgArray(String);

impl PgArray {
    fn with_capacity(bytes: usize) -> PgArray {
        let mut s = String::with_capacity(bytes + 2);
        s.push('{');
        PgArray(s)
    }

    fn separate(&mut self) {
        if self.0.len() > 1 {
            self.0.push(',');
        }
    }

    /// An element quoted, so any text (commas, braces, quotes, spaces,
    /// the word NULL) is taken literally: `"` and `\` are escaped.
    fn text(&mut self, value: Option<&str>) {
        self.separate();
        let Some(value) = value else {
            self.0.push_str("NULL");
            return;
        };
        self.0.push('"');
        for c in value.chars() {
            if c == '"' || c == '\\' {
                self.0.push('\\');
            }
            self.0.push(c);
        }
        self.0.push('"');
    }

    /// An element that needs no quoting (a number, `t`/`f`).
    fn raw(&mut self, value: Option<&str>) {
        self.separate();
        self.0.push_str(value.unwrap_or("NULL"));
    }

    fn finish(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

impl Store {
    /// The ids of the workstream's messages named by `client_ids` (those it
    /// stores; one query per [`LOOKUP_BATCH`]). For a caller that names its
    /// messages itself and must learn where a history it resends leaves
    /// the stored one (the proxy).
    pub async fn message_ids_by_client_id(
        &self,
        workstream_id: i64,
        client_ids: &[String],
    ) -> Result<HashMap<String, MessageId>, StoreError> {
        const OP: &str = "message_ids_by_client_id";
        let mut found = HashMap::new();
        for batch in client_ids.chunks(LOOKUP_BATCH) {
            let rows: Vec<(i64, Option<String>)> = message::Entity::find()
                .select_only()
                .column(message::Column::Id)
                .column(message::Column::ClientId)
                .filter(message::Column::WorkstreamId.eq(workstream_id))
                .filter(message::Column::ClientId.is_in(batch.iter().map(String::as_str)))
                .into_tuple()
                .all(&self.db)
                .await
                .map_err(StoreError::db(OP))?;
            found.extend(
                rows.into_iter()
                    .filter_map(|(id, client_id)| Some((client_id?, MessageId(id)))),
            );
        }
        Ok(found)
    }
}

impl Store {
    /// Which of the messages `ids` carry a client id that starts with
    /// `prefix` (one query): how an operator's view tells what a caller
    /// that names its messages in its own way (the proxy) stored.
    pub async fn messages_named_with(
        &self,
        ids: &[MessageId],
        prefix: &str,
    ) -> Result<std::collections::HashSet<MessageId>, StoreError> {
        const OP: &str = "messages_named_with";
        if ids.is_empty() {
            return Ok(std::collections::HashSet::new());
        }
        let rows: Vec<i64> = message::Entity::find()
            .select_only()
            .column(message::Column::Id)
            .filter(message::Column::Id.is_in(ids.iter().map(|id| id.0)))
            .filter(message::Column::ClientId.starts_with(prefix))
            .into_tuple()
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        Ok(rows.into_iter().map(MessageId).collect())
    }
}

/// The workstream's stored messages named by the client ids of `messages`.
async fn stored_by_client_id<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    messages: &[NewMessage],
    op: &'static str,
) -> Result<HashMap<String, StoredByClientId>, StoreError> {
    let mut wanted: Vec<&str> = messages
        .iter()
        .filter_map(|m| m.client_id.as_deref())
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut stored = HashMap::new();
    for batch in wanted.chunks(LOOKUP_BATCH) {
        let rows: Vec<(i64, Option<String>, String, String, bool)> = message::Entity::find()
            .select_only()
            .column(message::Column::Id)
            .column(message::Column::ClientId)
            .column(message::Column::Role)
            .column(message::Column::Parts)
            .column(message::Column::Pinned)
            .filter(message::Column::WorkstreamId.eq(workstream_id))
            .filter(message::Column::ClientId.is_in(batch.iter().copied()))
            .into_tuple()
            .all(db)
            .await
            .map_err(StoreError::db(op))?;
        for (id, client_id, role, parts, pinned) in rows {
            if let Some(client_id) = client_id {
                stored.insert(
                    client_id,
                    StoredByClientId {
                        id,
                        role,
                        parts,
                        pinned,
                    },
                );
            }
        }
    }
    Ok(stored)
}

/// Decides where each message goes: stored already, new, or a repeat of an
/// earlier one of the same append; refuses a client id that names other
/// content.
fn place(
    messages: &[NewMessage],
    encoded: &[String],
    stored: &HashMap<String, StoredByClientId>,
    op: &'static str,
) -> Result<Vec<Slot>, StoreError> {
    let mut slots = Vec::with_capacity(messages.len());
    let mut first_of: HashMap<&str, usize> = HashMap::new();
    let mut fresh = 0;
    for (index, m) in messages.iter().enumerate() {
        let conflict = |client_id: &str| StoreError::ClientIdConflict {
            op,
            client_id: client_id.to_owned(),
            index,
        };
        let Some(client_id) = m.client_id.as_deref() else {
            slots.push(Slot::New(fresh));
            fresh += 1;
            continue;
        };
        if let Some(&first) = first_of.get(client_id) {
            let earlier = &messages[first];
            if earlier.role != m.role || earlier.pinned != m.pinned || earlier.parts != m.parts {
                return Err(conflict(client_id));
            }
            slots.push(Slot::Repeat(first));
            continue;
        }
        first_of.insert(client_id, index);
        match stored.get(client_id) {
            Some(row) => {
                if !same_content(row, m, &encoded[index]) {
                    return Err(conflict(client_id));
                }
                slots.push(Slot::Stored(MessageId(row.id)));
            }
            None => {
                slots.push(Slot::New(fresh));
                fresh += 1;
            }
        }
    }
    Ok(slots)
}

/// Whether a stored message is the one `m` describes. Parts are compared
/// as values when their JSON differs (a row written by another build may
/// spell the same parts differently).
fn same_content(row: &StoredByClientId, m: &NewMessage, encoded: &str) -> bool {
    row.role == m.role.as_str()
        && row.pinned == m.pinned
        && (row.parts == encoded
            || serde_json::from_str::<Vec<Part>>(&row.parts).is_ok_and(|parts| parts == m.parts))
}

#[cfg(test)]
mod tests {
    use super::PgArray;

    #[test]
    fn array_literals_quote_text_and_leave_numbers_bare() {
        let mut text = PgArray::with_capacity(0);
        text.text(Some(r#"a "b" \c"#));
        text.text(None);
        text.text(Some("NULL"));
        text.text(Some(""));
        assert_eq!(text.finish(), r#"{"a \"b\" \\c",NULL,"NULL",""}"#);
        let mut numbers = PgArray::with_capacity(0);
        numbers.raw(Some("12"));
        numbers.raw(None);
        assert_eq!(numbers.finish(), "{12,NULL}");
        assert_eq!(PgArray::with_capacity(0).finish(), "{}");
    }
}
