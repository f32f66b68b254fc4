//! Workstream rows: reading, creating (race-safe) and the circuit breaker.

use chrono::{DateTime, Utc};
use compactor_shared::{EntityKey, MessageId, Summary, WorkstreamState};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};

use super::convert::{decode, now, to_u32, to_u64};
use super::entities::workstream::{self, Column, Entity};
use super::{Lease, Store, StoreError};

/// Failures in a row after which auto-compaction of a workstream stops
/// (ARCHITECTURE §3, no-progress guard) until a newer message arrives or a
/// manual request resets it.
pub const BREAKER_THRESHOLD: u32 = 3;

/// The table, as a corrupt row's error names it.
const TABLE: &str = "workstreams";

/// A workstream as stored, JSON columns decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkstreamRow {
    pub id: i64,
    pub key: EntityKey,
    /// The summary of everything up to `last_compacted_message_id`.
    pub summary: Option<Summary>,
    /// Estimated tokens of the preamble written at the last commit.
    pub summary_tokens: u64,
    pub state: WorkstreamState,
    pub memory_block_summary: Option<String>,
    /// The watermark: the newest message the summary covers.
    pub last_compacted_message_id: Option<MessageId>,
    /// The newest message of the workstream.
    pub last_message_id: Option<MessageId>,
    /// The leaf of the current branch; `None`: linear (the history is every
    /// un-compacted message, in id order).
    pub head_message_id: Option<MessageId>,
    /// Sum of the estimates of the messages not yet compacted.
    pub uncompacted_tokens: u64,
    /// Some while `is_compacting`, even when the deadline has passed:
    /// callers compare the deadline ([`WorkstreamRow::lease_live`]).
    pub lease: Option<Lease>,
    /// Bumped by every commit.
    pub version: i64,
    pub compactions: i64,
    pub consecutive_failures: u32,
    /// `last_message_id` when the breaker opened.
    pub breaker_message_id: Option<MessageId>,
    pub just_auto_compacted: bool,
    pub last_compacted_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl WorkstreamRow {
    /// Whether auto-compaction is suspended: [`BREAKER_THRESHOLD`] failures
    /// in a row and no message newer than the one that was newest when the
    /// breaker opened (new messages are a reason to try again).
    pub fn breaker_open(&self) -> bool {
        // `None < Some(_)`: a first message after a breaker opened on an
        // empty workstream closes it too.
        self.consecutive_failures >= BREAKER_THRESHOLD
            && self.last_message_id <= self.breaker_message_id
    }

    /// The lease, if one is held and its deadline has not passed at `now_ms`
    /// (unix milliseconds, application clock).
    pub fn lease_live(&self, now_ms: i64) -> Option<&Lease> {
        self.lease.as_ref().filter(|l| l.deadline_ms >= now_ms)
    }

    pub(crate) fn from_model(mut m: workstream::Model) -> Result<WorkstreamRow, StoreError> {
        let compacted = Compacted::take(&mut m)?;
        let mut row = WorkstreamRow::lean(m)?;
        row.summary = compacted.summary;
        row.state = compacted.state;
        Ok(row)
    }

    /// The row of `m` whose summary and state were taken out (left `None`
    /// and empty).
    fn lean(m: workstream::Model) -> Result<WorkstreamRow, StoreError> {
        let key =
            EntityKey::parse(&m.domain, &m.entity_id).map_err(|err| StoreError::CorruptRow {
                table: TABLE,
                id: m.id,
                detail: format!("key: {err}"),
            })?;
        let lease = if m.is_compacting {
            Some(Lease {
                owner: m.lease_owner.unwrap_or_default(),
                deadline_ms: m.lease_deadline_ms.unwrap_or(i64::MIN),
            })
        } else {
            None
        };
        Ok(WorkstreamRow {
            id: m.id,
            key,
            summary: None,
            summary_tokens: to_u64(m.summary_tokens),
            state: WorkstreamState::default(),
            memory_block_summary: m.memory_block_summary,
            last_compacted_message_id: m.last_compacted_message_id.map(MessageId),
            last_message_id: m.last_message_id.map(MessageId),
            head_message_id: m.head_message_id.map(MessageId),
            uncompacted_tokens: to_u64(m.uncompacted_tokens),
            lease,
            version: m.version,
            compactions: m.compactions,
            consecutive_failures: to_u32(m.consecutive_failures),
            breaker_message_id: m.breaker_message_id.map(MessageId),
            just_auto_compacted: m.just_auto_compacted,
            last_compacted_at: m.last_compacted_at,
            created_at: m.created_at,
            updated_at: m.updated_at,
        })
    }
}

/// A workstream's summary and state, decoded: what a compaction's commit
/// writes. Nothing else writes them, and the commit bumps the row's
/// `version`, so at one `(id, version)` they are always the same.
#[derive(Debug, Clone, PartialEq)]
pub struct Compacted {
    pub summary: Option<Summary>,
    pub state: WorkstreamState,
    /// The length of their JSON as stored: what keeping them costs, about.
    pub stored_bytes: usize,
}

impl Compacted {
    /// Decodes the summary and state of `m`, leaving its columns empty.
    fn take(m: &mut workstream::Model) -> Result<Compacted, StoreError> {
        let summary_json = m.compaction_summary.take();
        let state_json = std::mem::take(&mut m.state);
        let summary = summary_json
            .as_deref()
            .map(|json| decode(TABLE, m.id, "compaction_summary", json))
            .transpose()?;
        let state = decode(TABLE, m.id, "state", &state_json)?;
        Ok(Compacted {
            summary,
            state,
            stored_bytes: state_json.len() + summary_json.map_or(0, |s| s.len()),
        })
    }
}

impl Store {
    /// The workstream of `key`, if it exists.
    pub async fn workstream(&self, key: &EntityKey) -> Result<Option<WorkstreamRow>, StoreError> {
        find_by_key(&self.db, key, "workstream").await
    }

    /// The workstream of `key` with its summary and state taken out of the
    /// row (`summary` is `None`, `state` empty) and given beside it, unless
    /// the row is still at `known` (its id and version): then they are not
    /// even sent. Why: a context is read every chat turn, and a long
    /// workstream's state is a megabyte of JSON (10k messages: 0.9 MB, 7 ms
    /// to send and decode) that changes only with a commit, which bumps
    /// the version. One statement, so what it gives is one row's.
    pub async fn workstream_unless(
        &self,
        key: &EntityKey,
        known: Option<(i64, i64)>,
    ) -> Result<Option<(WorkstreamRow, Option<Compacted>)>, StoreError> {
        use sea_orm::sea_query::ExprTrait;
        let select = match known {
            None => by_key(key),
            Some((id, version)) => leaving_out(
                key,
                Some(
                    Expr::col(Column::Id)
                        .eq(id)
                        .and(Expr::col(Column::Version).eq(version)),
                ),
            ),
        };
        let Some(mut m) = select
            .one(&self.db)
            .await
            .map_err(StoreError::db("workstream_unless"))?
        else {
            return Ok(None);
        };
        let compacted = if known == Some((m.id, m.version)) {
            None
        } else {
            Some(Compacted::take(&mut m)?)
        };
        Ok(Some((WorkstreamRow::lean(m)?, compacted)))
    }

    /// The workstream of `key` without its summary and state (`summary` is
    /// `None`, `state` empty), for what needs only its ids, counts, lease
    /// and breaker: a turn's finalize, a wait, a status. A long
    /// workstream's state is a megabyte of JSON that those would send and
    /// decode for nothing, every turn.
    pub async fn workstream_lean(
        &self,
        key: &EntityKey,
    ) -> Result<Option<WorkstreamRow>, StoreError> {
        leaving_out(key, None)
            .one(&self.db)
            .await
            .map_err(StoreError::db("workstream_lean"))?
            .map(WorkstreamRow::lean)
            .transpose()
    }

    /// The workstream with this id, if it exists.
    pub async fn workstream_by_id(&self, id: i64) -> Result<Option<WorkstreamRow>, StoreError> {
        Entity::find_by_id(id)
            .one(&self.db)
            .await
            .map_err(StoreError::db("workstream_by_id"))?
            .map(WorkstreamRow::from_model)
            .transpose()
    }

    /// The workstream of `key`, created when missing. Safe when callers
    /// race: the insert does nothing on a key conflict and the row is read
    /// afterwards, so both get the one row.
    pub async fn ensure_workstream(&self, key: &EntityKey) -> Result<WorkstreamRow, StoreError> {
        ensure(&self.db, key, "ensure_workstream").await
    }

    /// Workstreams whose estimated context (summary + un-compacted
    /// messages) is at least `min_tokens`, with an id above `after`, in id
    /// order, at most `limit`: the candidates of a reconciliation sweep,
    /// read page by page however many workstreams there are.
    pub async fn workstreams_over(
        &self,
        min_tokens: u64,
        after: Option<i64>,
        limit: u64,
    ) -> Result<Vec<WorkstreamRow>, StoreError> {
        use sea_orm::sea_query::ExprTrait;
        let total = Expr::col(Column::SummaryTokens).add(Expr::col(Column::UncompactedTokens));
        let over = total.gte(i64::try_from(min_tokens).unwrap_or(i64::MAX));
        self.page_where(over, after, limit, "workstreams_over")
            .await
    }

    /// Workstreams that have branched (a head is set), with an id above
    /// `after`, in id order, at most `limit`: where the reconciliation
    /// sweep looks for branches left without a summary.
    pub async fn branched_workstreams(
        &self,
        after: Option<i64>,
        limit: u64,
    ) -> Result<Vec<WorkstreamRow>, StoreError> {
        let branched = Column::HeadMessageId.is_not_null();
        self.page_where(branched, after, limit, "branched_workstreams")
            .await
    }

    /// The workstreams `condition` takes with an id above `after`, in id
    /// order, at most `limit`: one page of a sweep's walk.
    async fn page_where(
        &self,
        condition: impl sea_orm::sea_query::IntoCondition,
        after: Option<i64>,
        limit: u64,
        op: &'static str,
    ) -> Result<Vec<WorkstreamRow>, StoreError> {
        use sea_orm::{QueryOrder, QuerySelect};
        let mut query = Entity::find().filter(condition);
        if let Some(after) = after {
            query = query.filter(Column::Id.gt(after));
        }
        query
            .order_by_asc(Column::Id)
            .limit(limit)
            .all(&self.db)
            .await
            .map_err(StoreError::db(op))?
            .into_iter()
            .map(WorkstreamRow::from_model)
            .collect()
    }

    /// A manual request clears the breaker: `consecutive_failures = 0`,
    /// `breaker_message_id = NULL`.
    pub async fn reset_breaker(&self, workstream_id: i64) -> Result<(), StoreError> {
        const OP: &str = "reset_breaker";
        let res = Entity::update_many()
            .col_expr(Column::ConsecutiveFailures, Expr::value(0))
            .col_expr(Column::BreakerMessageId, Expr::value(Option::<i64>::None))
            .col_expr(Column::UpdatedAt, Expr::value(now()))
            .filter(Column::Id.eq(workstream_id))
            .exec(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        if res.rows_affected == 0 {
            return Err(StoreError::UnknownWorkstream {
                op: OP,
                workstream_id,
            });
        }
        Ok(())
    }
}

/// The row of `key`.
fn by_key(key: &EntityKey) -> sea_orm::Select<Entity> {
    Entity::find()
        .filter(Column::Domain.eq(key.domain()))
        .filter(Column::EntityId.eq(key.entity_id()))
}

/// The row of `key` with its summary and state left out (NULL and empty)
/// where `when` holds (`None`: always).
fn leaving_out(
    key: &EntityKey,
    when: Option<sea_orm::sea_query::SimpleExpr>,
) -> sea_orm::Select<Entity> {
    use sea_orm::{Iterable, QuerySelect};
    let columns =
        Column::iter().filter(|c| !matches!(c, Column::CompactionSummary | Column::State));
    let (summary, state) = match when {
        None => (Expr::null(), Expr::val("")),
        Some(when) => (
            Expr::case(when.clone(), Expr::null())
                .finally(Expr::col(Column::CompactionSummary))
                .into(),
            Expr::case(when, "")
                .finally(Expr::col(Column::State))
                .into(),
        ),
    };
    by_key(key)
        .select_only()
        .columns(columns)
        .expr_as(summary, "compaction_summary")
        .expr_as(state, "state")
}

pub(crate) async fn find_by_key<C: ConnectionTrait>(
    db: &C,
    key: &EntityKey,
    op: &'static str,
) -> Result<Option<WorkstreamRow>, StoreError> {
    by_key(key)
        .one(db)
        .await
        .map_err(StoreError::db(op))?
        .map(WorkstreamRow::from_model)
        .transpose()
}

/// Insert-if-missing then select, on a connection or inside a transaction.
pub(crate) async fn ensure<C: ConnectionTrait>(
    db: &C,
    key: &EntityKey,
    op: &'static str,
) -> Result<WorkstreamRow, StoreError> {
    if let Some(row) = find_by_key(db, key, op).await? {
        return Ok(row);
    }
    // A concurrent caller may insert the same key between our select and
    // this insert: the unique index makes ours a no-op, and the select
    // below finds theirs.
    insert_if_missing(db, key, op).await?;
    find_by_key(db, key, op).await?.ok_or(StoreError::Db {
        op,
        source: sea_orm::DbErr::RecordNotFound(format!("workstream {key} after insert")),
    })
}

/// Inserts the workstream of `key` unless it exists (a key conflict makes
/// the insert a no-op: a concurrent caller's row stands). Callers read the
/// row afterwards.
pub(crate) async fn insert_if_missing<C: ConnectionTrait>(
    db: &C,
    key: &EntityKey,
    op: &'static str,
) -> Result<(), StoreError> {
    let at = now();
    let row = workstream::ActiveModel {
        domain: Set(key.domain().to_owned()),
        entity_id: Set(key.entity_id().to_owned()),
        state: Set("{}".to_owned()),
        created_at: Set(at),
        updated_at: Set(at),
        ..Default::default()
    };
    Entity::insert(row)
        .on_conflict_do_nothing_on([Column::Domain, Column::EntityId])
        .exec_without_returning(db)
        .await
        .map_err(StoreError::db(op))?;
    Ok(())
}

/// The workstream id behind `key`, or `None` when it does not exist.
pub(crate) async fn id_of<C: ConnectionTrait>(
    db: &C,
    key: &EntityKey,
    op: &'static str,
) -> Result<Option<i64>, StoreError> {
    use sea_orm::QuerySelect;
    Entity::find()
        .select_only()
        .column(Column::Id)
        .filter(Column::Domain.eq(key.domain()))
        .filter(Column::EntityId.eq(key.entity_id()))
        .into_tuple::<i64>()
        .one(db)
        .await
        .map_err(StoreError::db(op))
}
