//! Appending messages and reading the un-compacted ones in pages.

use compactor_shared::{EntityKey, Message, MessageId, Part, Role};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, QueryTrait,
};

use super::convert::{decode, encode_parts, now, role_from_str, to_i64, to_u64};
use super::entities::{message, workstream};
use super::workstreams::ensure;
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
}

/// What [`Store::append_messages`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub workstream_id: i64,
    /// The ids assigned, in the order the messages were given.
    pub ids: Vec<MessageId>,
    /// The workstream's `uncompacted_tokens` after the append.
    pub uncompacted_tokens: u64,
}

/// Rows per `INSERT` statement. A message binds 7 values; SQLite builds
/// before 3.32 allow 999 bound parameters per statement (later ones 32,766,
/// PostgreSQL 65,535), so 128 rows stay under every limit.
pub(crate) const INSERT_BATCH_ROWS: usize = 128;

impl Store {
    /// Appends messages to the workstream of `key` (created when missing),
    /// in one transaction: the messages, `uncompacted_tokens += Σ
    /// estimates`, `last_message_id` = the newest id, and
    /// `just_auto_compacted = false` (the chat moved on). Any number of
    /// messages: they are inserted in batches under the databases'
    /// bound-parameter limits.
    pub async fn append_messages(
        &self,
        key: &EntityKey,
        messages: &[NewMessage],
    ) -> Result<Appended, StoreError> {
        const OP: &str = "append_messages";
        // Encode before opening the transaction: a value that cannot be
        // stored fails without having locked anything.
        let encoded: Vec<String> = messages
            .iter()
            .map(|m| encode_parts(OP, &m.parts))
            .collect::<Result<_, _>>()?;
        let added: u64 = messages
            .iter()
            .fold(0u64, |sum, m| sum.saturating_add(m.token_estimate));

        let txn = self.begin_write(OP).await?;
        let ws = ensure(&txn, key, OP).await?;
        if messages.is_empty() {
            txn.commit().await.map_err(StoreError::db(OP))?;
            return Ok(Appended {
                workstream_id: ws.id,
                ids: Vec::new(),
                uncompacted_tokens: ws.uncompacted_tokens,
            });
        }
        // Lock the workstream row before allocating ids (see the module
        // docs of `store`): concurrent appends to one workstream commit in
        // id order.
        workstream::Entity::update_many()
            .col_expr(
                workstream::Column::UncompactedTokens,
                Expr::col(workstream::Column::UncompactedTokens).add(to_i64(added)),
            )
            .col_expr(workstream::Column::JustAutoCompacted, Expr::value(false))
            .col_expr(workstream::Column::UpdatedAt, Expr::value(now()))
            .filter(workstream::Column::Id.eq(ws.id))
            .exec(&txn)
            .await
            .map_err(StoreError::db(OP))?;

        let created_at = now();
        let mut ids = Vec::with_capacity(messages.len());
        for (batch, parts) in messages
            .chunks(INSERT_BATCH_ROWS)
            .zip(encoded.chunks(INSERT_BATCH_ROWS))
        {
            let rows = batch
                .iter()
                .zip(parts)
                .map(|(m, parts)| message::ActiveModel {
                    workstream_id: Set(ws.id),
                    role: Set(m.role.as_str().to_owned()),
                    parts: Set(parts.clone()),
                    token_estimate: Set(to_i64(m.token_estimate)),
                    pinned: Set(m.pinned),
                    is_compacted: Set(false),
                    created_at: Set(created_at),
                    ..Default::default()
                });
            let mut insert = message::Entity::insert_many(rows).into_query();
            insert.returning_col(message::Column::Id);
            let returned = txn.query_all(&insert).await.map_err(StoreError::db(OP))?;
            let mut batch_ids = returned
                .iter()
                .map(|row| row.try_get::<i64>("", "id"))
                .collect::<Result<Vec<_>, _>>()
                .map_err(StoreError::db(OP))?;
            // `RETURNING` does not promise an order, but ids are allocated
            // in the order of the VALUES list, so sorted ids are the
            // messages' ids in the order given.
            batch_ids.sort_unstable();
            ids.extend(batch_ids.into_iter().map(MessageId));
        }
        let newest = ids.last().map(|id| id.0);
        workstream::Entity::update_many()
            .col_expr(workstream::Column::LastMessageId, Expr::value(newest))
            .filter(workstream::Column::Id.eq(ws.id))
            .exec(&txn)
            .await
            .map_err(StoreError::db(OP))?;
        let uncompacted = workstream::Entity::find_by_id(ws.id)
            .select_only()
            .column(workstream::Column::UncompactedTokens)
            .into_tuple::<i64>()
            .one(&txn)
            .await
            .map_err(StoreError::db(OP))?
            .unwrap_or_default();
        txn.commit().await.map_err(StoreError::db(OP))?;
        Ok(Appended {
            workstream_id: ws.id,
            ids,
            uncompacted_tokens: to_u64(uncompacted),
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
        let mut query = message::Entity::find()
            .filter(message::Column::WorkstreamId.eq(workstream_id))
            .filter(message::Column::IsCompacted.eq(false));
        if let Some(after) = after {
            query = query.filter(message::Column::Id.gt(after.0));
        }
        query
            .order_by_asc(message::Column::Id)
            .limit(limit)
            .all(&self.db)
            .await
            .map_err(StoreError::db("uncompacted_page"))?
            .into_iter()
            .map(to_message)
            .collect()
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
        let sizes: Vec<(i64, i64)> = message::Entity::find()
            .select_only()
            .column(message::Column::Id)
            .column(message::Column::TokenEstimate)
            .filter(message::Column::WorkstreamId.eq(workstream_id))
            .filter(message::Column::IsCompacted.eq(false))
            .order_by_desc(message::Column::Id)
            .limit(bound.max_messages.saturating_add(1))
            .into_tuple()
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        let mut window = HistoryWindow {
            first: None,
            messages: 0,
            omitted_messages: 0,
            omitted_tokens: 0,
        };
        let mut tokens: u64 = 0;
        for &(id, estimate) in &sizes {
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
        let Some(first) = window
            .first
            .filter(|_| window.messages < sizes.len() as u64)
        else {
            return Ok(window);
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
            .filter(message::Column::IsCompacted.eq(false))
            .filter(message::Column::Id.lt(first.0))
            .into_tuple()
            .one(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        let (messages, tokens) = left_out.unwrap_or_default();
        window.omitted_messages = to_u64(messages);
        window.omitted_tokens = to_u64(tokens.unwrap_or_default());
        Ok(window)
    }

    /// [`Store::uncompacted_page`], also bounded in size: it stops before
    /// the message that would take the page's token estimates past
    /// `max_tokens` (a page always has at least one message). A job reads
    /// pages of a thousand short messages, or of a few huge ones, with the
    /// same memory.
    pub async fn uncompacted_page_within(
        &self,
        workstream_id: i64,
        after: Option<MessageId>,
        limit: u64,
        max_tokens: u64,
    ) -> Result<Vec<Message>, StoreError> {
        let mut sizes = message::Entity::find()
            .select_only()
            .column(message::Column::Id)
            .column(message::Column::TokenEstimate)
            .filter(message::Column::WorkstreamId.eq(workstream_id))
            .filter(message::Column::IsCompacted.eq(false));
        if let Some(after) = after {
            sizes = sizes.filter(message::Column::Id.gt(after.0));
        }
        let sizes: Vec<(i64, i64)> = sizes
            .order_by_asc(message::Column::Id)
            .limit(limit)
            .into_tuple()
            .all(&self.db)
            .await
            .map_err(StoreError::db("uncompacted_page_within"))?;
        let mut total: u64 = 0;
        let mut take: u64 = 0;
        for (_, tokens) in &sizes {
            let tokens = u64::try_from(*tokens).unwrap_or(0);
            if take > 0 && total.saturating_add(tokens) > max_tokens {
                break;
            }
            total = total.saturating_add(tokens);
            take += 1;
        }
        if take == 0 {
            return Ok(Vec::new());
        }
        self.uncompacted_page(workstream_id, after, take).await
    }
}

fn to_message(m: message::Model) -> Result<Message, StoreError> {
    const TABLE: &str = "messages";
    let role = role_from_str(&m.role).ok_or_else(|| StoreError::CorruptRow {
        table: TABLE,
        id: m.id,
        detail: format!("role: unknown role {:?}", m.role),
    })?;
    let parts = decode(TABLE, m.id, "parts", &m.parts)?;
    Ok(Message {
        id: MessageId(m.id),
        role,
        parts,
        pinned: m.pinned,
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
        .column(message::Column::IsCompacted)
        .into_tuple::<(i64, bool)>()
        .one(db)
        .await
        .map_err(StoreError::db(op))
}
