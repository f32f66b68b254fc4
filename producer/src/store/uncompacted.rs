//! Streaming a workstream's un-compacted messages to a compaction, page by
//! page, in one round trip per page.
//!
//! A compaction reads the whole un-compacted history twice (shapes, then
//! content), in keyset pages bounded in count and in tokens so that memory
//! stays bounded however long the history is. Each page used to cost four
//! statements: the branch check, the ids and estimates that decide where
//! the token bound cuts, the branch check again, and the rows. Now:
//!
//! - the branch check (and, for a branched workstream, its path) is made
//!   once per reader — once per pass of a job, not per page; the path read
//!   then stays the one the job planned on, whatever is appended meanwhile;
//! - a page of an unbranched workstream is one statement: a window
//!   function over the keyset page keeps the rows within the token bound
//!   (always the first), and only the columns a message needs are read;
//! - a long history on PostgreSQL is read with the statement's generic
//!   plan ([`UncompactedReader::long_history`]): right after a bulk append
//!   the table's statistics lag (a table never analyzed yet estimates a few
//!   hundred rows), and the custom plan for "the next thousand after id X"
//!   became a bitmap scan of *every* remaining message plus a sort, per
//!   page — quadratic in the history; the generic plan walks the index and
//!   stops after the page, whatever the statistics say.

use compactor_shared::{Message, MessageId};
use sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait, Value};
use tokio::task::JoinHandle;

use super::{Store, StoreError};

const OP: &str = "uncompacted_page";

/// The un-compacted messages of one workstream, read in keyset pages (see
/// the module docs). Made by [`Store::uncompacted_reader`]; it owns its
/// handle on the pool, so a page can be read on another task (a job reads
/// the next page while its engine works on this one).
#[derive(Debug)]
pub struct UncompactedReader {
    store: Store,
    workstream_id: i64,
    /// `None`: not looked at yet; `Some(None)`: unbranched; `Some(Some(p))`:
    /// the path of the head, `(id, estimate)` oldest first.
    path: Option<Option<Vec<(i64, i64)>>>,
    /// Pages are read with the generic plan (PostgreSQL).
    generic_plan: bool,
    /// The last message of a page that held every message left when it was
    /// read: the page after it is empty without asking the database (each
    /// pass of a compaction ends by asking for it).
    ended_at: Option<MessageId>,
}

/// Un-compacted tokens from which a history counts as long (see
/// [`UncompactedReader::long_history`]): about a hundred pages' worth of
/// the e2e conversation's messages.
pub const LONG_HISTORY_TOKENS: u64 = 100_000;

impl Store {
    /// A reader of the workstream's un-compacted messages. It looks at the
    /// workstream's branches on its first page and keeps what it saw.
    pub fn uncompacted_reader(&self, workstream_id: i64) -> UncompactedReader {
        UncompactedReader {
            store: self.clone(),
            workstream_id,
            path: None,
            generic_plan: false,
            ended_at: None,
        }
    }

    /// PostgreSQL's generic plan for a compaction's page of an unbranched
    /// workstream (the statement [`UncompactedReader`] reads a long
    /// history with), run: see [`convert::explain_generic`]. Both of its
    /// index scans must start at `after` (the one above the watermark: at
    /// the greater of the two), never at the workstream's first message.
    /// For tests and diagnosis (`None` on SQLite).
    ///
    /// [`convert::explain_generic`]: super::convert::explain_generic
    #[doc(hidden)]
    pub async fn uncompacted_page_generic_plan(
        &self,
        workstream_id: i64,
        after: Option<MessageId>,
        limit: u64,
        max_tokens: u64,
    ) -> Result<Option<String>, StoreError> {
        if self.db.get_database_backend() != DbBackend::Postgres || limit == 0 {
            return Ok(None);
        }
        let statement =
            bounded_page_statement(DbBackend::Postgres, workstream_id, after, limit, max_tokens);
        super::convert::explain_generic(&self.db, statement, "uncompacted_page_plan")
            .await
            .map(Some)
    }
}

impl UncompactedReader {
    /// Tells the reader how long the history is (the workstream's
    /// `uncompacted_tokens`): from [`LONG_HISTORY_TOKENS`] on, on
    /// PostgreSQL, each page is read in a short read-only transaction with
    /// `plan_cache_mode = force_generic_plan` (see the module docs). Three
    /// more round trips per page, which a page of a long history amortizes;
    /// a short one (most compactions) keeps one statement per page.
    pub fn long_history(mut self, uncompacted_tokens: u64) -> Self {
        self.generic_plan = uncompacted_tokens >= LONG_HISTORY_TOKENS
            && self.store.db.get_database_backend() == DbBackend::Postgres;
        self
    }

    /// The next page: un-compacted messages with ids greater than `after`
    /// (`None`: from the oldest), ascending, at most `limit` of them, and
    /// stopping before the message that would take the page's stored
    /// estimates past `max_tokens` (a page always has at least one message
    /// while any is left). An empty page is the end.
    ///
    /// A row whose role or parts do not decode is a
    /// [`StoreError::CorruptRow`], never skipped.
    pub async fn page_within(
        &mut self,
        after: Option<MessageId>,
        limit: u64,
        max_tokens: u64,
    ) -> Result<Vec<Message>, StoreError> {
        if self.path.is_none() {
            let path =
                super::branches::current_path(&self.store.db, self.workstream_id, OP).await?;
            self.path = Some(path);
        }
        if let Some(Some(path)) = &self.path {
            let take = super::branches::path_take(path, after, limit, max_tokens);
            if take == 0 {
                return Ok(Vec::new());
            }
            return self
                .store
                .path_page(path, self.workstream_id, after, take)
                .await;
        }
        if after.is_some() && after == self.ended_at {
            return Ok(Vec::new());
        }
        let (page, rest) = if self.generic_plan {
            let txn = self.store.db.begin().await.map_err(StoreError::db(OP))?;
            txn.execute_unprepared("SET LOCAL plan_cache_mode = force_generic_plan")
                .await
                .map_err(StoreError::db(OP))?;
            let read = bounded_page(&txn, self.workstream_id, after, limit, max_tokens).await?;
            txn.commit().await.map_err(StoreError::db(OP))?;
            read
        } else {
            bounded_page(&self.store.db, self.workstream_id, after, limit, max_tokens).await?
        };
        if rest == Rest::None {
            self.ended_at = page.last().map(|m| m.id);
        }
        Ok(page)
    }
}

/// Whether messages were left after a page when it was read.
#[derive(Debug, PartialEq, Eq)]
enum Rest {
    /// The page held every message left.
    None,
    /// More may follow (the page was full, or cut at its token bound).
    Maybe,
}

/// The statement of [`bounded_page`] (`limit` above 0).
fn bounded_page_statement(
    backend: DbBackend,
    workstream_id: i64,
    after: Option<MessageId>,
    limit: u64,
    max_tokens: u64,
) -> Statement {
    // Numbered: each value is bound once and used where it is needed.
    let p = |n| super::convert::placeholder(backend, n);
    // The keyset page is the first `limit` ids after `after` of the two
    // ranges un-compacted messages are (see `store::compacted`): the kept
    // ones below the watermark (their partial index), then every id above
    // it (the index on (workstream_id, id)), that scan starting at the
    // greater of `after` and the watermark; neither walks compacted
    // history nor the pages read before (the bounds of `store::keyset`,
    // which keep a generic plan on those indexes). Then the running sum
    // of estimates over the page: the first row always, the others while
    // the sum stays within the bound (estimates are never negative, so the
    // rows kept are a prefix). `total`, the keyset page's size, says
    // whether the rows returned are all there was.
    let columns = "id, role, parts, pinned, token_estimate";
    let watermark = super::compacted::watermark_of(&p(1));
    let (ws, after_id) = (p(1), p(2));
    let kept_after = super::keyset::after_in_workstream_sql(&ws, &after_id);
    let above = super::keyset::from_in_workstream_sql(
        &ws,
        &after_id,
        &super::keyset::greatest(backend, &after_id, &watermark),
    );
    let sql = format!(
        "SELECT id, role, parts, pinned, total FROM (\
           SELECT id, role, parts, pinned, \
             ROW_NUMBER() OVER (ORDER BY id) AS n, \
             COUNT(*) OVER () AS total, \
             SUM(token_estimate) OVER (ORDER BY id) AS running \
           FROM (SELECT {columns} FROM (\
               SELECT {columns} FROM (SELECT {columns} FROM messages \
                 WHERE kept AND {kept_after} \
                 ORDER BY id LIMIT {limit}) AS below \
               UNION ALL \
               SELECT {columns} FROM (SELECT {columns} FROM messages \
                 WHERE {above} \
                 ORDER BY id LIMIT {limit}) AS above\
             ) AS ranges ORDER BY id LIMIT {limit}) AS page\
         ) AS bounded \
         WHERE n = 1 OR running <= {max_tokens} ORDER BY id",
        limit = p(3),
        max_tokens = p(4),
    );
    let values: [Value; 4] = [
        workstream_id.into(),
        after.map_or(i64::MIN, |a| a.0).into(),
        i64::try_from(limit).unwrap_or(i64::MAX).into(),
        i64::try_from(max_tokens).unwrap_or(i64::MAX).into(),
    ];
    Statement::from_sql_and_values(backend, sql, values)
}

/// One keyset page of an unbranched workstream's un-compacted messages,
/// cut at `max_tokens` of stored estimates, in one statement; and whether
/// it held every message left.
async fn bounded_page<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    after: Option<MessageId>,
    limit: u64,
    max_tokens: u64,
) -> Result<(Vec<Message>, Rest), StoreError> {
    if limit == 0 {
        return Ok((Vec::new(), Rest::Maybe));
    }
    let statement = bounded_page_statement(
        db.get_database_backend(),
        workstream_id,
        after,
        limit,
        max_tokens,
    );
    let rows = db
        .query_all_raw(statement)
        .await
        .map_err(StoreError::db(OP))?;
    let total: Option<i64> = match rows.first() {
        Some(row) => Some(row.try_get("", "total").map_err(StoreError::db(OP))?),
        None => None,
    };
    let page = rows
        .iter()
        .map(|row| {
            let id: i64 = row.try_get("", "id").map_err(StoreError::db(OP))?;
            let role: String = row.try_get("", "role").map_err(StoreError::db(OP))?;
            let parts: String = row.try_get("", "parts").map_err(StoreError::db(OP))?;
            let pinned: bool = row.try_get("", "pinned").map_err(StoreError::db(OP))?;
            super::messages::row_message(id, &role, &parts, pinned)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let all =
        total.is_some_and(|t| u64::try_from(t).is_ok_and(|t| t < limit && t == page.len() as u64));
    Ok((page, if all { Rest::None } else { Rest::Maybe }))
}

/// An [`UncompactedReader`] that reads the next page while its caller
/// works on the last one: a compaction's engine is CPU-bound, and reading
/// and decoding the next page on another runtime thread meanwhile hides
/// the database's share of a long history. At most one page is read ahead
/// (memory: two pages instead of one); a page asked for with another
/// `after` than the one read ahead (the start of the next pass) is read
/// then, and the page read ahead dropped. Dropping this stops a read under
/// way.
#[derive(Debug)]
pub struct ReadAheadPages {
    state: Ahead,
    limit: u64,
    max_tokens: u64,
}

#[derive(Debug)]
enum Ahead {
    Idle(UncompactedReader),
    Reading {
        after: MessageId,
        task: JoinHandle<(UncompactedReader, Result<Vec<Message>, StoreError>)>,
    },
    /// A read ahead did not finish (its task panicked or was cancelled):
    /// the reader went with it.
    Lost,
}

impl UncompactedReader {
    /// This reader, reading ahead pages of at most `limit` messages and
    /// `max_tokens` (see [`UncompactedReader::page_within`]).
    pub fn read_ahead(self, limit: u64, max_tokens: u64) -> ReadAheadPages {
        ReadAheadPages {
            state: Ahead::Idle(self),
            limit,
            max_tokens,
        }
    }
}

impl ReadAheadPages {
    /// The page after `after`, as [`UncompactedReader::page_within`] reads
    /// it; then the read of the page after this one starts.
    pub async fn page(&mut self, after: Option<MessageId>) -> Result<Vec<Message>, StoreError> {
        let (mut reader, ready) = match std::mem::replace(&mut self.state, Ahead::Lost) {
            Ahead::Idle(reader) => (reader, None),
            Ahead::Reading { after: ahead, task } => {
                let (reader, page) = task.await.map_err(|e| StoreError::Db {
                    op: OP,
                    source: sea_orm::DbErr::Custom(format!("the page read ahead was lost: {e}")),
                })?;
                (reader, (Some(ahead) == after).then_some(page))
            }
            Ahead::Lost => {
                return Err(StoreError::Db {
                    op: OP,
                    source: sea_orm::DbErr::Custom("an earlier page read ahead was lost".into()),
                })
            }
        };
        let page = match ready {
            Some(page) => page,
            None => reader.page_within(after, self.limit, self.max_tokens).await,
        };
        let page = match page {
            Ok(page) => page,
            Err(e) => {
                self.state = Ahead::Idle(reader);
                return Err(e);
            }
        };
        self.state = match page.last() {
            Some(last) => {
                let next = last.id;
                let (limit, max_tokens) = (self.limit, self.max_tokens);
                Ahead::Reading {
                    after: next,
                    task: tokio::spawn(async move {
                        let page = reader.page_within(Some(next), limit, max_tokens).await;
                        (reader, page)
                    }),
                }
            }
            None => Ahead::Idle(reader),
        };
        Ok(page)
    }
}

impl Drop for ReadAheadPages {
    fn drop(&mut self) {
        if let Ahead::Reading { task, .. } = &self.state {
            task.abort();
        }
    }
}
