//! Workstreams listed for operators, by state: the breaker open, over the
//! compaction trigger, or degraded the last time they were compacted;
//! narrowed by domain and by an entity id prefix; keyset-paginated in key
//! order, so a page costs the same however deep into the list it is.
//!
//! Indexes: pages walk `uq_workstreams_domain_entity_id` (the key order,
//! also the domain and prefix search); `breaker_open` is served by
//! `idx_workstreams_consecutive_failures` (rows at the breaker's threshold
//! are few); a row's last run and un-compacted messages are looked up per
//! page through `idx_compaction_runs_workstream_id` and
//! `idx_messages_workstream_compacted_id`. `over_trigger` compares the
//! two token columns of each row it walks.

use chrono::{DateTime, Utc};
use compactor_shared::EntityKey;
use sea_orm::sea_query::{Condition, Expr, ExprTrait, LikeExpr, SimpleExpr};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};

use super::convert::to_u64;
use super::entities::compaction_run;
use super::entities::workstream::{Column, Entity};
use super::runs::{to_row, DegradedReason, RunOutcome};
use super::workstreams::{WorkstreamRow, BREAKER_THRESHOLD};
use super::{Store, StoreError};

/// A state operators list workstreams by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkstreamStateFilter {
    /// Auto-compaction is suspended: [`BREAKER_THRESHOLD`] failures in a
    /// row and no newer message since ([`WorkstreamRow::breaker_open`]).
    BreakerOpen,
    /// The estimated context (summary and un-compacted messages) is at
    /// least the compaction trigger's threshold: what the trigger and the
    /// reconciliation sweep compare.
    OverTrigger,
    /// The last compaction run was degraded (the extractive summarizer
    /// stood in for the LLM).
    Degraded,
}

impl WorkstreamStateFilter {
    pub const ALL: [WorkstreamStateFilter; 3] = [
        WorkstreamStateFilter::BreakerOpen,
        WorkstreamStateFilter::OverTrigger,
        WorkstreamStateFilter::Degraded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WorkstreamStateFilter::BreakerOpen => "breaker_open",
            WorkstreamStateFilter::OverTrigger => "over_trigger",
            WorkstreamStateFilter::Degraded => "degraded",
        }
    }

    pub fn parse(s: &str) -> Option<WorkstreamStateFilter> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

/// Which workstreams a page lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkstreamQuery {
    pub state: Option<WorkstreamStateFilter>,
    /// A validated domain.
    pub domain: Option<String>,
    /// Entity ids starting with this (case-sensitive).
    pub entity_prefix: Option<String>,
    /// The page after this key (the previous page's last).
    pub after: Option<EntityKey>,
    pub limit: u64,
    /// The compaction trigger's threshold in tokens (`None`: an unlimited
    /// model, never over it).
    pub trigger_tokens: Option<u64>,
}

/// A workstream's last compaction run, in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastRun {
    pub finished_at: DateTime<Utc>,
    pub outcome: RunOutcome,
    pub degraded: bool,
    pub degraded_reason: Option<DegradedReason>,
}

/// One workstream of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkstreamListing {
    pub key: EntityKey,
    /// Stored messages not folded into the summary yet.
    pub uncompacted_messages: u64,
    pub uncompacted_tokens: u64,
    pub summary_tokens: u64,
    pub compactions: i64,
    pub consecutive_failures: u32,
    pub breaker_open: bool,
    pub last_run: Option<LastRun>,
}

/// A page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkstreamPage {
    pub workstreams: Vec<WorkstreamListing>,
    /// Where the next page starts (`WorkstreamQuery::after`); `None` on
    /// the last page.
    pub next_after: Option<EntityKey>,
}

impl Store {
    /// One page of workstreams in key order (domain, then entity id), as
    /// `query` chooses them (see the module docs).
    pub async fn list_workstreams(
        &self,
        query: &WorkstreamQuery,
    ) -> Result<WorkstreamPage, StoreError> {
        const OP: &str = "list_workstreams";
        let mut find = Entity::find();
        if let Some(domain) = &query.domain {
            find = find.filter(Column::Domain.eq(domain.as_str()));
        }
        if let Some(prefix) = &query.entity_prefix {
            find = find.filter(prefix_match(self.backend(), prefix));
        }
        if let Some(after) = &query.after {
            find = find.filter(
                Condition::any().add(Column::Domain.gt(after.domain())).add(
                    Condition::all()
                        .add(Column::Domain.eq(after.domain()))
                        .add(Column::EntityId.gt(after.entity_id())),
                ),
            );
        }
        match query.state {
            None => {}
            Some(WorkstreamStateFilter::BreakerOpen) => {
                // `WorkstreamRow::breaker_open` in SQL: a NULL newest
                // message is older than any.
                find = find
                    .filter(
                        Column::ConsecutiveFailures
                            .gte(i32::try_from(BREAKER_THRESHOLD).unwrap_or(i32::MAX)),
                    )
                    .filter(
                        Condition::any().add(Column::LastMessageId.is_null()).add(
                            Condition::all()
                                .add(Column::BreakerMessageId.is_not_null())
                                .add(
                                    Expr::col(Column::LastMessageId)
                                        .lte(Expr::col(Column::BreakerMessageId)),
                                ),
                        ),
                    );
            }
            Some(WorkstreamStateFilter::OverTrigger) => {
                let Some(threshold) = query.trigger_tokens else {
                    return Ok(WorkstreamPage {
                        workstreams: Vec::new(),
                        next_after: None,
                    });
                };
                let total =
                    Expr::col(Column::SummaryTokens).add(Expr::col(Column::UncompactedTokens));
                find = find.filter(total.gte(i64::try_from(threshold).unwrap_or(i64::MAX)));
            }
            Some(WorkstreamStateFilter::Degraded) => {
                // The newest run of the row (one index probe), degraded.
                find = find.filter(Expr::cust(
                    "EXISTS (SELECT 1 FROM compaction_runs r WHERE r.id = \
                     (SELECT MAX(r2.id) FROM compaction_runs r2 \
                      WHERE r2.workstream_id = workstreams.id) AND r.degraded)",
                ));
            }
        }
        let rows: Vec<WorkstreamRow> = find
            .order_by_asc(Column::Domain)
            .order_by_asc(Column::EntityId)
            .limit(query.limit)
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?
            .into_iter()
            .map(WorkstreamRow::from_model)
            .collect::<Result<_, _>>()?;
        // A full page may have a next one.
        let next_after = (rows.len() as u64 == query.limit)
            .then(|| rows.last().map(|r| r.key.clone()))
            .flatten();
        // The match is exact already; checked again so no backend's
        // pattern rules can widen it.
        let rows: Vec<WorkstreamRow> = rows
            .into_iter()
            .filter(|r| {
                query
                    .entity_prefix
                    .as_deref()
                    .is_none_or(|p| r.key.entity_id().starts_with(p))
            })
            .collect();
        if rows.is_empty() {
            return Ok(WorkstreamPage {
                workstreams: Vec::new(),
                next_after,
            });
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let last_runs = self.last_runs(&ids).await?;
        let counts = self.uncompacted_counts(&ids).await?;
        let workstreams = rows
            .into_iter()
            .map(|r| WorkstreamListing {
                uncompacted_messages: counts
                    .iter()
                    .find(|(id, _)| *id == r.id)
                    .map_or(0, |(_, n)| to_u64(*n)),
                last_run: last_runs
                    .iter()
                    .find(|(id, _)| *id == r.id)
                    .map(|(_, run)| run.clone()),
                breaker_open: r.breaker_open(),
                uncompacted_tokens: r.uncompacted_tokens,
                summary_tokens: r.summary_tokens,
                compactions: r.compactions,
                consecutive_failures: r.consecutive_failures,
                key: r.key,
            })
            .collect();
        Ok(WorkstreamPage {
            workstreams,
            next_after,
        })
    }

    /// The newest run of each of the workstreams `ids`.
    async fn last_runs(&self, ids: &[i64]) -> Result<Vec<(i64, LastRun)>, StoreError> {
        const OP: &str = "list_workstreams_last_runs";
        let newest: Vec<Option<i64>> = compaction_run::Entity::find()
            .select_only()
            .column_as(compaction_run::Column::Id.max(), "id")
            .filter(compaction_run::Column::WorkstreamId.is_in(ids.iter().copied()))
            .group_by(compaction_run::Column::WorkstreamId)
            .into_tuple()
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        let newest: Vec<i64> = newest.into_iter().flatten().collect();
        if newest.is_empty() {
            return Ok(Vec::new());
        }
        compaction_run::Entity::find()
            .filter(compaction_run::Column::Id.is_in(newest))
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?
            .into_iter()
            .map(|m| {
                let row = to_row(m)?;
                Ok((
                    row.workstream_id,
                    LastRun {
                        finished_at: row.run.finished_at,
                        outcome: row.run.outcome,
                        degraded: row.run.degraded,
                        degraded_reason: row.run.degraded_reason,
                    },
                ))
            })
            .collect()
    }

    /// How many messages of each of the workstreams `ids` are not
    /// compacted yet (workstreams with none are missing): per workstream,
    /// the messages above its watermark (a range of its index) plus the
    /// kept ones below it (their partial index) — never a walk of its
    /// compacted history (see `store::compacted`).
    async fn uncompacted_counts(&self, ids: &[i64]) -> Result<Vec<(i64, i64)>, StoreError> {
        const OP: &str = "list_workstreams_counts";
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let backend = self.backend();
        let list = |from: usize| {
            (from..from + ids.len())
                .map(|n| super::convert::placeholder(backend, n))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let sql = format!(
            "SELECT workstream_id, COUNT(*) AS n FROM (\
               SELECT m.workstream_id FROM workstreams w JOIN messages m \
                 ON m.workstream_id = w.id AND m.id > COALESCE(w.last_compacted_message_id, 0) \
               WHERE w.id IN ({}) \
               UNION ALL \
               SELECT workstream_id FROM messages WHERE workstream_id IN ({}) AND kept\
             ) AS uncompacted GROUP BY workstream_id",
            list(1),
            list(1 + ids.len())
        );
        let values: Vec<sea_orm::Value> = ids.iter().chain(ids).map(|&id| id.into()).collect();
        self.db
            .query_all_raw(sea_orm::Statement::from_sql_and_values(
                backend, sql, values,
            ))
            .await
            .map_err(StoreError::db(OP))?
            .iter()
            .map(|row| {
                Ok((
                    row.try_get::<i64>("", "workstream_id")?,
                    row.try_get::<i64>("", "n")?,
                ))
            })
            .collect::<Result<_, sea_orm::DbErr>>()
            .map_err(StoreError::db(OP))
    }
}

/// Entity ids starting with `prefix`, case-sensitive, served by the key
/// index: SQLite's `GLOB` (its `LIKE` ignores ASCII case; an entity id
/// holds none of `*?[`), PostgreSQL's `LIKE` with `_` escaped (a
/// wildcard there, and a character of entity ids).
fn prefix_match(backend: DbBackend, prefix: &str) -> SimpleExpr {
    match backend {
        DbBackend::Sqlite => {
            Expr::cust_with_values("workstreams.entity_id GLOB ?", [format!("{prefix}*")])
        }
        _ => {
            let pattern = format!("{}%", prefix.replace('\\', "\\\\").replace('_', "\\_"));
            Expr::col(Column::EntityId).like(LikeExpr::new(pattern).escape('\\'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_by_their_names() {
        for state in WorkstreamStateFilter::ALL {
            assert_eq!(WorkstreamStateFilter::parse(state.as_str()), Some(state));
        }
        assert_eq!(WorkstreamStateFilter::parse("open"), None);
    }
}
