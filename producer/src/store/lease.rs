//! The entity lease: at most one compaction job works on a workstream.
//!
//! The queue already runs one job per entity at a time; the lease in the
//! database is the second line that makes that true for *writes*: the
//! fenced commit only succeeds for the lease's owner, so a job whose lease
//! expired (it stalled, its worker was partitioned away) and was taken over
//! cannot overwrite its successor's work.
//!
//! Every change is a compare-and-set on the lease columns as they were read,
//! so two takers racing for an expired lease cannot both believe they won,
//! without row locks (which SQLite does not have).

use std::time::Duration;

use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, FromQueryResult, QueryFilter, QueryTrait,
};

use super::convert::{millis, now, now_ms};
use super::entities::workstream::{Column, Entity, Model};
use super::outbox::{insert_event, written};
use super::{NewEvent, Store, StoreError, WorkstreamRow};

/// Who holds the lease of a workstream, and until when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Lease {
    pub owner: String,
    /// Unix milliseconds, application clock.
    pub deadline_ms: i64,
}

/// The result of [`Store::take_lease`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseTaken {
    /// The caller holds the lease now. `reclaimed` is the expired lease of
    /// another owner that was taken over (worth a log line: that owner
    /// stalled or died).
    Taken { reclaimed: Option<Lease> },
    /// Someone else holds a live lease.
    Held(Lease),
}

/// How often a compare-and-set that lost a race is retried before giving
/// up. Each retry re-reads the row, so losing means another taker changed
/// the lease every time in between, which a live lease stops quickly.
const CAS_ATTEMPTS: usize = 8;

impl Store {
    /// Takes the lease when it is free or expired (deadline < now), for
    /// `ttl`. Re-taking by the same owner extends it.
    pub async fn take_lease(
        &self,
        workstream_id: i64,
        owner: &str,
        ttl: Duration,
    ) -> Result<LeaseTaken, StoreError> {
        self.take_lease_with_event(workstream_id, owner, ttl, None)
            .await
    }

    /// [`Store::take_lease`], writing `event` to the outbox in the same
    /// transaction as the compare-and-set that takes the lease: only a
    /// taken lease writes it.
    pub async fn take_lease_with_event(
        &self,
        workstream_id: i64,
        owner: &str,
        ttl: Duration,
        event: Option<&NewEvent>,
    ) -> Result<LeaseTaken, StoreError> {
        const OP: &str = "take_lease";
        for _ in 0..CAS_ATTEMPTS {
            let row = Entity::find_by_id(workstream_id)
                .one(&self.db)
                .await
                .map_err(StoreError::db(OP))?
                .ok_or(StoreError::UnknownWorkstream {
                    op: OP,
                    workstream_id,
                })?;
            let at_ms = now_ms();
            let current = match (&row.lease_owner, row.lease_deadline_ms) {
                (Some(holder), Some(deadline)) if row.is_compacting => Some(Lease {
                    owner: holder.clone(),
                    deadline_ms: deadline,
                }),
                // `is_compacting` without an owner or deadline cannot be
                // written by this module; treat it as free.
                _ => None,
            };
            let reclaimed = match current {
                Some(lease) if lease.owner == owner => None,
                Some(lease) if lease.deadline_ms >= at_ms => return Ok(LeaseTaken::Held(lease)),
                other => other,
            };
            // Compare-and-set against the columns just read.
            let unchanged = Condition::all()
                .add(Column::Id.eq(workstream_id))
                .add(Column::IsCompacting.eq(row.is_compacting))
                .add(eq_or_null(Column::LeaseOwner, row.lease_owner.clone()))
                .add(eq_or_null(Column::LeaseDeadlineMs, row.lease_deadline_ms));
            let take = taking(owner, at_ms, ttl).filter(unchanged);
            let Some(event) = event else {
                let res = take.exec(&self.db).await.map_err(StoreError::db(OP))?;
                if res.rows_affected == 1 {
                    return Ok(LeaseTaken::Taken { reclaimed });
                }
                continue;
            };
            let txn = self.begin_write(OP).await?;
            let res = take.exec(&txn).await.map_err(StoreError::db(OP))?;
            if res.rows_affected == 1 {
                let id = insert_event(&txn, event, OP).await?;
                txn.commit().await.map_err(StoreError::db(OP))?;
                written(event.kind, &id);
                return Ok(LeaseTaken::Taken { reclaimed });
            }
            txn.rollback().await.map_err(StoreError::db(OP))?;
        }
        Err(StoreError::Db {
            op: OP,
            source: sea_orm::DbErr::Custom(format!(
                "the lease of workstream {workstream_id} kept changing; gave up after {CAS_ATTEMPTS} attempts"
            )),
        })
    }

    /// [`Store::take_lease_with_event`] when the lease is free, the common
    /// case, in one statement: the `UPDATE` takes it only if nobody holds
    /// it, and returns the workstream as taken (`RETURNING`, both
    /// backends). That row is what the new holder reads next, so a job
    /// needs neither the read before the compare-and-set nor the read
    /// after it. `None` when the lease is held (even expired, or by
    /// `owner`: [`Store::take_lease_with_event`] decides those) or the
    /// workstream does not exist; nothing was written then.
    pub async fn take_free_lease_with_event(
        &self,
        workstream_id: i64,
        owner: &str,
        ttl: Duration,
        event: Option<&NewEvent>,
    ) -> Result<Option<WorkstreamRow>, StoreError> {
        const OP: &str = "take_lease";
        let mut take = taking(owner, now_ms(), ttl)
            .filter(Column::Id.eq(workstream_id))
            .filter(Column::IsCompacting.eq(false))
            .into_query();
        take.returning_all();
        let Some(event) = event else {
            let rows = self.db.query_all(&take).await.map_err(StoreError::db(OP))?;
            return taken_row(&rows, OP);
        };
        let txn = self.begin_write(OP).await?;
        let rows = txn.query_all(&take).await.map_err(StoreError::db(OP))?;
        let Some(row) = taken_row(&rows, OP)? else {
            txn.rollback().await.map_err(StoreError::db(OP))?;
            return Ok(None);
        };
        let id = insert_event(&txn, event, OP).await?;
        txn.commit().await.map_err(StoreError::db(OP))?;
        written(event.kind, &id);
        Ok(Some(row))
    }

    /// Extends the lease by `ttl` from now. `false` when `owner` no longer
    /// holds it (another owner took it over, or it was released).
    pub async fn renew_lease(
        &self,
        workstream_id: i64,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let res = Entity::update_many()
            .col_expr(
                Column::LeaseDeadlineMs,
                Expr::value(now_ms().saturating_add(millis(ttl))),
            )
            .col_expr(Column::UpdatedAt, Expr::value(now()))
            .filter(held_by(workstream_id, owner))
            .exec(&self.db)
            .await
            .map_err(StoreError::db("renew_lease"))?;
        Ok(res.rows_affected == 1)
    }

    /// Releases the lease. `false` when it is not held by `owner`.
    pub async fn release_lease(&self, workstream_id: i64, owner: &str) -> Result<bool, StoreError> {
        let res = release(Entity::update_many())
            .filter(held_by(workstream_id, owner))
            .exec(&self.db)
            .await
            .map_err(StoreError::db("release_lease"))?;
        Ok(res.rows_affected == 1)
    }
}

/// Adds "release the lease" to an update of the workstream row (each
/// caller adds its own condition: the holder, or a lease left over).
pub(crate) fn release(update: sea_orm::UpdateMany<Entity>) -> sea_orm::UpdateMany<Entity> {
    update
        .col_expr(Column::IsCompacting, Expr::value(false))
        .col_expr(Column::LeaseOwner, Expr::value(Option::<String>::None))
        .col_expr(Column::LeaseDeadlineMs, Expr::value(Option::<i64>::None))
        .col_expr(Column::UpdatedAt, Expr::value(now()))
}

/// The `UPDATE` that gives the lease to `owner` until `ttl` after `at_ms`
/// (no filter yet: each way of taking it adds its own condition).
fn taking(owner: &str, at_ms: i64, ttl: Duration) -> sea_orm::UpdateMany<Entity> {
    Entity::update_many()
        .col_expr(Column::IsCompacting, Expr::value(true))
        .col_expr(Column::LeaseOwner, Expr::value(owner))
        .col_expr(
            Column::LeaseDeadlineMs,
            Expr::value(at_ms.saturating_add(millis(ttl))),
        )
        .col_expr(Column::UpdatedAt, Expr::value(now()))
}

/// The workstream row a taking `UPDATE … RETURNING` gave back, if any.
fn taken_row(
    rows: &[sea_orm::QueryResult],
    op: &'static str,
) -> Result<Option<WorkstreamRow>, StoreError> {
    rows.first()
        .map(|row| {
            Model::from_query_result(row, "")
                .map_err(StoreError::db(op))
                .and_then(WorkstreamRow::from_model)
        })
        .transpose()
}

/// `id = ? AND is_compacting AND lease_owner = ?`: the fence of every write
/// a lease holder makes.
pub(crate) fn held_by(workstream_id: i64, owner: &str) -> Condition {
    Condition::all()
        .add(Column::Id.eq(workstream_id))
        .add(Column::IsCompacting.eq(true))
        .add(Column::LeaseOwner.eq(owner))
}

/// `col IS NOT DISTINCT FROM value`, written so both backends understand it.
pub(crate) fn eq_or_null<V>(col: Column, value: Option<V>) -> Condition
where
    V: Into<sea_orm::Value>,
{
    match value {
        Some(v) => Condition::all().add(col.eq(v)),
        None => Condition::all().add(col.is_null()),
    }
}
