//! The recall query: a workstream's messages matching a [`RecallQuery`],
//! newest first, with the run that folded each (see `crate::recall`).
//!
//! One statement per backend, the user's terms always bound parameters:
//! PostgreSQL matches the generated `search` column against
//! `plainto_tsquery('simple', $2)`; SQLite matches the FTS5 table
//! `messages_search` against the quoted-terms expression. Both order by
//! `messages.id DESC` with a `LIMIT`.

use chrono::{DateTime, Utc};
use compactor_shared::MessageId;
use sea_orm::{ConnectionTrait, DbBackend, QueryResult, Statement};

use super::convert::{decode, role_from_str};
use super::{Store, StoreError};
use crate::recall::{FoldedBy, RecallLimit, RecallQuery, RecalledMessage};

const OP: &str = "recall";

const POSTGRES: &str = "SELECT m.id, m.role, m.parts, m.pinned, m.is_compacted, m.created_at, \
         m.compacted_by_run_id, r.finished_at AS folded_at \
     FROM messages m LEFT JOIN compaction_runs r ON r.id = m.compacted_by_run_id \
     WHERE m.workstream_id = $1 AND m.search @@ plainto_tsquery('simple', $2) \
     ORDER BY m.id DESC LIMIT $3";

const SQLITE: &str = "SELECT m.id, m.role, m.parts, m.pinned, m.is_compacted, m.created_at, \
         m.compacted_by_run_id, r.finished_at AS folded_at \
     FROM messages_search JOIN messages m ON m.id = messages_search.rowid \
     LEFT JOIN compaction_runs r ON r.id = m.compacted_by_run_id \
     WHERE messages_search MATCH ?1 AND m.workstream_id = ?2 \
     ORDER BY m.id DESC LIMIT ?3";

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
        let statement = match self.backend() {
            DbBackend::Postgres => Statement::from_sql_and_values(
                DbBackend::Postgres,
                POSTGRES,
                [
                    workstream_id.into(),
                    query.postgres_text().into(),
                    limit.into(),
                ],
            ),
            backend => Statement::from_sql_and_values(
                backend,
                SQLITE,
                [
                    query.fts5_match().into(),
                    workstream_id.into(),
                    limit.into(),
                ],
            ),
        };
        let rows = self
            .db
            .query_all_raw(statement)
            .await
            .map_err(StoreError::db(OP))?;
        rows.iter().map(to_recalled).collect()
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
