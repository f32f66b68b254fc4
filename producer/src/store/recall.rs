//! The recall query: a workstream's messages matching a [`RecallQuery`],
//! newest first, with the run that folded each (see `crate::recall`).
//!
//! The user's terms are always bound parameters: PostgreSQL matches the
//! generated `search` column against `plainto_tsquery('simple', $2)`;
//! SQLite matches the FTS5 table `messages_search` against the
//! quoted-terms expression. Both order by `messages.id DESC` with a
//! `LIMIT`.
//!
//! PostgreSQL runs in two bounded steps (`recall_postgres`): one plain
//! `ORDER BY id DESC LIMIT n` lets the planner walk the workstream
//! backwards for a term it estimates common, and a term common in other
//! workstreams (or in older history) but absent from this one's recent
//! messages then costs a scan of the whole workstream (measured: 1 s at
//! 1M messages). So the walk is confined to the newest
//! [`RECENT_WINDOW`] messages, and only older matches, if still needed,
//! come from the GIN index alone. Both steps match [`SCOPED_SEARCH`], the
//! expression of the GIN index of migration
//! `m20261127_000005_scope_message_search`: the message's vector plus a
//! lexeme naming its workstream, so the index itself keeps other
//! workstreams' matches out (the query ANDs `'ws <id>'` to the terms).

use chrono::{DateTime, Utc};
use compactor_shared::MessageId;
use sea_orm::{ConnectionTrait, DbBackend, QueryResult, Statement, TransactionTrait};

use super::convert::{decode, role_from_str};
use super::{Store, StoreError};
use crate::recall::{FoldedBy, RecallLimit, RecallQuery, RecalledMessage};

const OP: &str = "recall";

/// Messages of a workstream the first PostgreSQL step looks at (the
/// newest): a walk of at most this many rows is fast whatever the term.
pub(crate) const RECENT_WINDOW: i64 = 5_000;

/// The indexed expression of `idx_messages_search_scoped` over the alias
/// `m`, spelled as the migration spells it (PostgreSQL uses an expression
/// index only for the same expression; a test checks the plan).
const SCOPED_SEARCH: &str =
    "(m.search || array_to_tsvector(ARRAY['ws ' || m.workstream_id::text]))";

/// The query matched against [`SCOPED_SEARCH`]: the user's terms (`$2`)
/// and the workstream's lexeme (`$5`, see [`workstream_lexeme`]).
const SCOPED_QUERY: &str = "(plainto_tsquery('simple', $2) && $5::tsquery)";

/// The workstream's lexeme as `tsquery` text: quoted, since it holds a
/// space (which keeps it apart from every lexeme of a message's text).
fn workstream_lexeme(workstream_id: i64) -> String {
    format!("'ws {workstream_id}'")
}

/// The columns of a recalled message over `m` and its workstream's
/// watermark `w.at` ([`watermark_join`]): compacted is derived from the
/// watermark (see `store::compacted`), and the run that folded a compacted
/// message is the committed run of its workstream with the lowest
/// watermark at or above it — looked up per row returned, in the select
/// list, so that only the rows a recall returns pay for it (as a join
/// condition it was tried against every run for every candidate row).
const SELECT: &str = "SELECT m.id, m.role, m.parts, m.pinned, \
         (NOT m.kept AND m.id <= w.at) AS is_compacted, m.created_at, \
         CASE WHEN NOT m.kept AND m.id <= w.at THEN (SELECT f.id FROM compaction_runs f \
           WHERE f.workstream_id = m.workstream_id AND f.watermark >= m.id \
           ORDER BY f.watermark LIMIT 1) END AS compacted_by_run_id, \
         CASE WHEN NOT m.kept AND m.id <= w.at THEN (SELECT f.finished_at FROM compaction_runs f \
           WHERE f.workstream_id = m.workstream_id AND f.watermark >= m.id \
           ORDER BY f.watermark LIMIT 1) END AS folded_at";

/// The one-row watermark `w.at` of the workstream bound as `param`.
fn watermark_join(param: &str) -> String {
    format!(
        "CROSS JOIN (SELECT {} AS at) AS w",
        super::compacted::watermark_of(param)
    )
}

/// Step 1: matches among the newest [`RECENT_WINDOW`] messages (`$4` is
/// the lowest id of that window). Bounded: whichever plan the planner
/// picks (a backwards walk, the GIN index) reads at most the window.
fn postgres_recent() -> String {
    format!(
        "{SELECT} FROM messages m {} \
         WHERE m.workstream_id = $1 AND m.id >= $4 \
           AND {SCOPED_SEARCH} @@ {SCOPED_QUERY} \
         ORDER BY m.id DESC LIMIT $3",
        watermark_join("$1")
    )
}

/// Step 2, when step 1 found fewer than the limit: older matches, found
/// through the GIN index alone. `ORDER BY m.id + 0` is not the order of
/// any index, so the planner cannot choose to walk the whole workstream
/// backwards hoping to meet a match early (which a term frequent
/// elsewhere but rare here would make a full scan); it takes the index's
/// matches and keeps the newest `$3` with a top-N sort on their ids, and
/// only those are read whole (the `MATERIALIZED` set).
fn postgres_older() -> String {
    format!(
        "WITH hits AS MATERIALIZED (SELECT m.id FROM messages m \
             WHERE m.workstream_id = $1 AND m.id < $4 \
               AND {SCOPED_SEARCH} @@ {SCOPED_QUERY} \
             ORDER BY m.id + 0 DESC LIMIT $3) \
         {SELECT} FROM hits JOIN messages m ON m.id = hits.id {} \
         ORDER BY m.id DESC",
        watermark_join("$1")
    )
}

/// The lowest id of the workstream's newest [`RECENT_WINDOW`] messages (0
/// when it has fewer).
const POSTGRES_WINDOW_START: &str = "SELECT coalesce((SELECT id FROM messages \
     WHERE workstream_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1), 0) AS start";

fn sqlite() -> String {
    format!(
        "{SELECT} FROM messages_search JOIN messages m ON m.id = messages_search.rowid \
         {} \
         WHERE messages_search MATCH ?1 AND m.workstream_id = ?2 \
         ORDER BY m.id DESC LIMIT ?3",
        watermark_join("?2")
    )
}

impl Store {
    /// The newest messages of the workstream `workstream_id` that match
    /// every term of `query`, at most `limit`, verbatim.
    pub async fn recall(
        &self,
        workstream_id: i64,
        query: &RecallQuery,
        limit: RecallLimit,
    ) -> Result<Vec<RecalledMessage>, StoreError> {
        let limit = i64::from(limit.get());
        let rows = match self.backend() {
            DbBackend::Postgres => {
                self.recall_postgres(workstream_id, &query.postgres_text(), limit)
                    .await?
            }
            backend => self
                .db
                .query_all_raw(Statement::from_sql_and_values(
                    backend,
                    sqlite(),
                    [
                        query.fts5_match().into(),
                        workstream_id.into(),
                        limit.into(),
                    ],
                ))
                .await
                .map_err(StoreError::db(OP))?,
        };
        rows.iter().map(to_recalled).collect()
    }
}

impl Store {
    /// PostgreSQL in two bounded steps: the newest window, then (only if
    /// it did not fill the limit) older matches through the GIN index.
    async fn recall_postgres(
        &self,
        workstream_id: i64,
        text: &str,
        limit: i64,
    ) -> Result<Vec<QueryResult>, StoreError> {
        let pg = DbBackend::Postgres;
        // One transaction, so its planner setting holds for the three
        // statements: custom plans. A prepared statement's generic plan
        // (which PostgreSQL picks after five runs) cannot see the terms'
        // or the window's selectivity, and for step 2 it ANDs the index
        // hits with every one of the workstream's rows (measured: 873 ms
        // generic, 0.12 ms custom, at 900,000 messages).
        let txn = self.db.begin().await.map_err(StoreError::db(OP))?;
        txn.execute_unprepared("SET LOCAL plan_cache_mode = force_custom_plan")
            .await
            .map_err(StoreError::db(OP))?;
        let start: i64 = txn
            .query_one_raw(Statement::from_sql_and_values(
                pg,
                POSTGRES_WINDOW_START,
                [workstream_id.into(), (RECENT_WINDOW - 1).into()],
            ))
            .await
            .map_err(StoreError::db(OP))?
            .map(|row| row.try_get::<i64>("", "start"))
            .transpose()
            .map_err(StoreError::db(OP))?
            .unwrap_or(0);
        let values = |limit: i64| -> [sea_orm::Value; 5] {
            [
                workstream_id.into(),
                text.into(),
                limit.into(),
                start.into(),
                workstream_lexeme(workstream_id).into(),
            ]
        };
        let mut rows = txn
            .query_all_raw(Statement::from_sql_and_values(
                pg,
                postgres_recent(),
                values(limit),
            ))
            .await
            .map_err(StoreError::db(OP))?;
        let missing = limit.saturating_sub(i64::try_from(rows.len()).unwrap_or(limit));
        if missing > 0 && start > 0 {
            rows.extend(
                txn.query_all_raw(Statement::from_sql_and_values(
                    pg,
                    postgres_older(),
                    values(missing),
                ))
                .await
                .map_err(StoreError::db(OP))?,
            );
        }
        txn.commit().await.map_err(StoreError::db(OP))?;
        Ok(rows)
    }
}

impl Store {
    /// PostgreSQL's plan (`EXPLAIN`, text) for the older-matches step of a
    /// recall of `workstream_id` — the step an index must serve. For
    /// tests and diagnosis (`None` on SQLite, whose FTS5 plan is fixed).
    #[doc(hidden)]
    pub async fn recall_older_plan(
        &self,
        workstream_id: i64,
        query: &RecallQuery,
    ) -> Result<Option<String>, StoreError> {
        if self.backend() != DbBackend::Postgres {
            return Ok(None);
        }
        let rows = self
            .db
            .query_all_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                format!("EXPLAIN {}", postgres_older()),
                [
                    workstream_id.into(),
                    query.postgres_text().into(),
                    20_i64.into(),
                    i64::MAX.into(),
                    workstream_lexeme(workstream_id).into(),
                ],
            ))
            .await
            .map_err(StoreError::db(OP))?;
        super::convert::plan_text(&rows, OP).map(Some)
    }
}

fn to_recalled(row: &QueryResult) -> Result<RecalledMessage, StoreError> {
    const TABLE: &str = "messages";
    let get_err = |id: i64| {
        move |err: sea_orm::DbErr| StoreError::CorruptRow {
            table: TABLE,
            id,
            detail: format!("recall row: {err}"),
        }
    };
    let id: i64 = row.try_get("", "id").map_err(StoreError::db(OP))?;
    let role: String = row.try_get("", "role").map_err(get_err(id))?;
    let role = role_from_str(&role).ok_or_else(|| StoreError::CorruptRow {
        table: TABLE,
        id,
        detail: format!("role: unknown role {role:?}"),
    })?;
    let parts: String = row.try_get("", "parts").map_err(get_err(id))?;
    let run_id: Option<i64> = row
        .try_get("", "compacted_by_run_id")
        .map_err(get_err(id))?;
    let folded_at: Option<DateTime<Utc>> = row.try_get("", "folded_at").map_err(get_err(id))?;
    Ok(RecalledMessage {
        id: MessageId(id),
        role,
        parts: decode(TABLE, id, "parts", &parts)?,
        pinned: row.try_get("", "pinned").map_err(get_err(id))?,
        created_at: row.try_get("", "created_at").map_err(get_err(id))?,
        compacted: row.try_get("", "is_compacted").map_err(get_err(id))?,
        folded_by: run_id
            .zip(folded_at)
            .map(|(run_id, at)| FoldedBy { run_id, at }),
    })
}
