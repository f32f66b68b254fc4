//! The transactional outbox of compaction events (`events`) and their
//! webhook deliveries (`event_deliveries`).
//!
//! An event is written by the same transaction as the state change it
//! reports ([`insert_event`], called by the fenced commit, the lease and
//! the failure path), so a change that rolls back leaves no event and a
//! change that commits cannot lose its event. The worker's relay then
//! takes events not yet relayed ([`Store::claim_unrelayed`]), puts them on
//! the Redis Stream and creates one delivery per configured webhook
//! ([`Store::mark_relayed`]), and delivers due deliveries
//! ([`Store::claim_due_deliveries`], [`Store::finish_delivery`]).
//!
//! Several workers share this work without row locks: a row is claimed by
//! a compare-and-set on its claim columns, and a claim expires (its worker
//! died) after the time it was taken for. Delivery is at least once: a
//! worker that dies after a webhook answered but before recording it
//! delivers again; consumers deduplicate on the event id.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use compactor_shared::EntityKey;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::ActiveValue::Set;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseTransaction, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect, QueryTrait,
};
use serde::Serialize;

use super::convert::{millis, now_ms, to_u32};
use super::entities::{event, event_delivery, workstream};
use super::{Store, StoreError};
use crate::events::catalogue::EventKind;
use crate::events::{EventWritten, InternalEvent};

/// Events (or deliveries) removed per statement when pruning.
const PRUNE_BATCH: u64 = 500;

/// Event ids per `IN (…)` list, well under every backend's bound-parameter
/// limit.
const ID_LIST_BATCH: usize = 500;

/// Deliveries per `INSERT` (11 bound values each: under SQLite's oldest
/// limit of 999).
const DELIVERY_INSERT_BATCH: usize = 80;

/// An event to write: what happened to which workstream. `data` is a JSON
/// object (the event's `data` on the stream and in a webhook's body).
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: EventKind,
    pub key: EntityKey,
    pub data: serde_json::Value,
}

impl NewEvent {
    pub fn new(kind: EventKind, key: &EntityKey, data: serde_json::Value) -> NewEvent {
        NewEvent {
            kind,
            key: key.clone(),
            data,
        }
    }
}

/// An event as it is put on the stream and posted to webhooks:
/// `{"id", "type", "created_at", "domain", "entity_id", "data"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventRecord {
    /// The event id (a UUID): deduplicate on it.
    pub id: String,
    /// `compaction.requested`, `compaction.started`, …
    #[serde(rename = "type")]
    pub kind: String,
    pub created_at: DateTime<Utc>,
    pub domain: String,
    pub entity_id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: serde_json::Value,
}

impl EventRecord {
    /// The JSON body of a webhook delivery (and the stream entry's `event`
    /// field).
    pub fn to_json(&self) -> String {
        // A struct of strings, a timestamp and a JSON value: serializing
        // it cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// An event taken by a relay, not yet relayed.
#[derive(Debug, Clone, PartialEq)]
pub struct Unrelayed {
    /// The row id (for [`Store::mark_relayed`]).
    pub row_id: i64,
    pub event: EventRecord,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum DeliveryState {
    /// Still to be tried (at `next_attempt_at`).
    Pending,
    /// A webhook answered 2xx.
    Delivered,
    /// Gave up after the configured attempts: kept, listed, retryable.
    Failed,
}

impl DeliveryState {
    pub const ALL: [DeliveryState; 3] = [
        DeliveryState::Pending,
        DeliveryState::Delivered,
        DeliveryState::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<DeliveryState> {
        DeliveryState::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

/// One delivery of one event to one webhook, as operators list it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryRow {
    pub id: i64,
    /// The event's id.
    pub event_id: String,
    /// The event's type.
    pub kind: String,
    pub domain: String,
    pub entity_id: String,
    /// The webhook's configured name.
    pub endpoint: String,
    pub state: DeliveryState,
    pub attempts: u32,
    /// When it is tried next (while pending).
    pub next_attempt_at: DateTime<Utc>,
    /// The HTTP status of the last attempt, if one answered.
    pub last_status: Option<u16>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// A due delivery, claimed by a relay.
#[derive(Debug, Clone, PartialEq)]
pub struct DueDelivery {
    pub id: i64,
    pub endpoint: String,
    /// Attempts made before this one.
    pub attempts: u32,
    pub event: EventRecord,
}

/// How one delivery attempt ended, for [`Store::finish_delivery`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryResult {
    /// The webhook answered 2xx.
    Delivered { status: u16 },
    /// It did not: tried again at `retry_at_ms` (Unix ms), or, when
    /// `None`, given up (the delivery is `failed`).
    Failed {
        status: Option<u16>,
        error: String,
        retry_at_ms: Option<i64>,
    },
}

/// Which deliveries to list: by state and endpoint, `limit` of them after
/// the delivery id `after` (a cursor: the last id of the previous page),
/// oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryFilter {
    pub state: Option<DeliveryState>,
    pub endpoint: Option<String>,
    pub after: Option<i64>,
    pub limit: u64,
}

/// What an operator's retry of one delivery did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryOutcome {
    /// Pending again, due now, its attempts counted from 0.
    Requeued,
    /// Delivered already: nothing to do.
    AlreadyDelivered,
    /// No such delivery.
    NotFound,
}

/// The outbox's rows not done yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OutboxBacklog {
    /// Events not yet relayed.
    pub unrelayed: u64,
    pub pending: u64,
    pub failed: u64,
    /// When the oldest event not relayed, or with a delivery not
    /// delivered, was written (Unix ms); `None` when there is none.
    pub oldest_undelivered_ms: Option<i64>,
}

/// Writes `event` with `db` (a transaction: the caller's state change).
/// Returns the event id. Count it with [`written`] once the transaction
/// has committed.
pub(crate) async fn insert_event<C: ConnectionTrait>(
    db: &C,
    event: &NewEvent,
    op: &'static str,
) -> Result<String, StoreError> {
    let event_id = uuid::Uuid::new_v4().to_string();
    let payload = serde_json::to_string(&event.data).map_err(|source| StoreError::Encode {
        op,
        what: "event data",
        source,
    })?;
    let row = event::ActiveModel {
        event_id: Set(event_id.clone()),
        kind: Set(event.kind.as_str().to_owned()),
        domain: Set(event.key.domain().to_owned()),
        entity_id: Set(event.key.entity_id().to_owned()),
        payload: Set(payload),
        created_at_ms: Set(now_ms()),
        streamed_at_ms: Set(None),
        claimed_by: Set(None),
        claimed_until_ms: Set(None),
        ..Default::default()
    };
    event::Entity::insert(row)
        .exec(db)
        .await
        .map_err(StoreError::db(op))?;
    Ok(event_id)
}

/// Counts an event whose transaction committed.
pub(crate) fn written(kind: EventKind, event_id: &str) {
    EventWritten { kind, event_id }.emit();
}

fn time_of(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

fn to_record(m: &event::Model) -> Result<EventRecord, StoreError> {
    let data = serde_json::from_str(&m.payload).map_err(|e| StoreError::CorruptRow {
        table: "events",
        id: m.id,
        detail: format!("payload: {e}"),
    })?;
    Ok(EventRecord {
        id: m.event_id.clone(),
        kind: m.kind.clone(),
        created_at: time_of(m.created_at_ms),
        domain: m.domain.clone(),
        entity_id: m.entity_id.clone(),
        data,
    })
}

fn state_of(m: &event_delivery::Model) -> Result<DeliveryState, StoreError> {
    DeliveryState::parse(&m.state).ok_or_else(|| StoreError::CorruptRow {
        table: "event_deliveries",
        id: m.id,
        detail: format!("state: unknown state {:?}", m.state),
    })
}

/// `claimed_until_ms IS NULL OR claimed_until_ms < now`: nobody holds it.
fn unclaimed_event(at_ms: i64) -> Condition {
    Condition::any()
        .add(event::Column::ClaimedUntilMs.is_null())
        .add(event::Column::ClaimedUntilMs.lt(at_ms))
}

fn unclaimed_delivery(at_ms: i64) -> Condition {
    Condition::any()
        .add(event_delivery::Column::ClaimedUntilMs.is_null())
        .add(event_delivery::Column::ClaimedUntilMs.lt(at_ms))
}

/// A request's `compaction.requested` event, to be written once the queue
/// has taken the request ([`Store::hold_for_request`]): until then the
/// workstream's row is locked.
///
/// Why: the event reports a change made in Redis, so it is written after
/// Redis took the request. A worker can pick the job up in between and
/// write its `compaction.started` first — events of one workstream out of
/// order on the stream. Taking the entity lease writes the workstream's
/// row, so while the request holds that row the worker waits, and its
/// `compaction.started` comes after the `compaction.requested` (the lock
/// is held for one Redis round trip).
#[derive(Debug)]
pub struct HeldRequest {
    txn: DatabaseTransaction,
}

impl HeldRequest {
    /// Writes the event and lets the row go.
    pub async fn record(self, event: &NewEvent) -> Result<String, StoreError> {
        const OP: &str = "record_event";
        let id = insert_event(&self.txn, event, OP).await?;
        self.txn.commit().await.map_err(StoreError::db(OP))?;
        written(event.kind, &id);
        Ok(id)
    }

    /// Lets the row go without an event (the request was refused, or
    /// changed nothing).
    pub async fn release(self) -> Result<(), StoreError> {
        self.txn
            .rollback()
            .await
            .map_err(StoreError::db("record_event"))
    }
}

impl Store {
    /// Locks the workstream of `key` for a request's event (see
    /// [`HeldRequest`]): in a write transaction (on SQLite, the database's
    /// write lock), its row selected `FOR UPDATE`. `None` when it has no
    /// row: no worker can take its lease either.
    pub async fn hold_for_request(
        &self,
        key: &EntityKey,
    ) -> Result<Option<HeldRequest>, StoreError> {
        const OP: &str = "hold_for_request";
        let txn = self.begin_write(OP).await?;
        let row = workstream::Entity::find()
            .select_only()
            .column(workstream::Column::Id)
            .filter(workstream::Column::Domain.eq(key.domain()))
            .filter(workstream::Column::EntityId.eq(key.entity_id()))
            .lock_exclusive()
            .into_tuple::<i64>()
            .one(&txn)
            .await
            .map_err(StoreError::db(OP))?;
        if row.is_none() {
            txn.rollback().await.map_err(StoreError::db(OP))?;
            return Ok(None);
        }
        Ok(Some(HeldRequest { txn }))
    }

    /// Writes one event in a statement of its own: for state changes that
    /// happen outside the database (a request the queue added, a job it
    /// dead-lettered), written right after them.
    pub async fn record_event(&self, event: &NewEvent) -> Result<String, StoreError> {
        let id = insert_event(&self.db, event, "record_event").await?;
        written(event.kind, &id);
        Ok(id)
    }

    /// Claims up to `limit` events not relayed yet, oldest first, for
    /// `claim_for` (then another relay may take them: this one died).
    /// Events `owner` claimed already are taken again (its last round
    /// could not relay them).
    pub async fn claim_unrelayed(
        &self,
        owner: &str,
        limit: u64,
        claim_for: Duration,
    ) -> Result<Vec<Unrelayed>, StoreError> {
        const OP: &str = "claim_unrelayed";
        let at_ms = now_ms();
        let candidates: Vec<i64> = event::Entity::find()
            .select_only()
            .column(event::Column::Id)
            .filter(event::Column::StreamedAtMs.is_null())
            .filter(unclaimed_event(at_ms).add(event::Column::ClaimedBy.eq(owner)))
            .order_by_asc(event::Column::Id)
            .limit(limit)
            .into_tuple()
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        // One statement claims them all; `RETURNING` says which this relay
        // got (another may have taken some meanwhile).
        let until = at_ms.saturating_add(millis(claim_for));
        let mut claim = event::Entity::update_many()
            .col_expr(event::Column::ClaimedBy, Expr::value(owner))
            .col_expr(event::Column::ClaimedUntilMs, Expr::value(until))
            .filter(event::Column::Id.is_in(candidates))
            .filter(event::Column::StreamedAtMs.is_null())
            .filter(unclaimed_event(at_ms).add(event::Column::ClaimedBy.eq(owner)))
            .into_query();
        claim.returning_col(event::Column::Id);
        let claimed: Vec<i64> = self
            .db
            .query_all(&claim)
            .await
            .map_err(StoreError::db(OP))?
            .iter()
            .map(|row| row.try_get::<i64>("", "id"))
            .collect::<Result<_, _>>()
            .map_err(StoreError::db(OP))?;
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        event::Entity::find()
            .filter(event::Column::Id.is_in(claimed))
            .order_by_asc(event::Column::Id)
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?
            .iter()
            .map(|m| {
                Ok(Unrelayed {
                    row_id: m.id,
                    event: to_record(m)?,
                })
            })
            .collect()
    }

    /// Marks an event relayed (it is on the stream, if the stream is on)
    /// and creates its deliveries, one per webhook of `endpoints`, due
    /// now; in one transaction. `false` when it was relayed already
    /// (another relay's claim expired while this one worked).
    pub async fn mark_relayed(
        &self,
        row_id: i64,
        endpoints: &[String],
    ) -> Result<bool, StoreError> {
        Ok(self.mark_many_relayed(&[row_id], endpoints).await? == 1)
    }

    /// [`Store::mark_relayed`] for a batch of events, in one transaction
    /// of two statements whatever their number. Returns how many were
    /// marked (not relayed already).
    pub async fn mark_many_relayed(
        &self,
        row_ids: &[i64],
        endpoints: &[String],
    ) -> Result<usize, StoreError> {
        const OP: &str = "mark_relayed";
        if row_ids.is_empty() {
            return Ok(0);
        }
        let txn = self.begin_write(OP).await?;
        let at_ms = now_ms();
        let mut marked = Vec::with_capacity(row_ids.len());
        for batch in row_ids.chunks(ID_LIST_BATCH) {
            let mut mark = event::Entity::update_many()
                .col_expr(event::Column::StreamedAtMs, Expr::value(at_ms))
                .col_expr(
                    event::Column::ClaimedBy,
                    Expr::value(Option::<String>::None),
                )
                .col_expr(
                    event::Column::ClaimedUntilMs,
                    Expr::value(Option::<i64>::None),
                )
                .filter(event::Column::Id.is_in(batch.iter().copied()))
                .filter(event::Column::StreamedAtMs.is_null())
                .into_query();
            mark.returning_col(event::Column::Id);
            for row in txn.query_all(&mark).await.map_err(StoreError::db(OP))? {
                marked.push(row.try_get::<i64>("", "id").map_err(StoreError::db(OP))?);
            }
        }
        if marked.is_empty() {
            txn.rollback().await.map_err(StoreError::db(OP))?;
            return Ok(0);
        }
        if !endpoints.is_empty() {
            let pairs: Vec<(i64, &String)> = marked
                .iter()
                .flat_map(|&id| endpoints.iter().map(move |e| (id, e)))
                .collect();
            for batch in pairs.chunks(DELIVERY_INSERT_BATCH) {
                let rows = batch
                    .iter()
                    .map(|&(row_id, endpoint)| event_delivery::ActiveModel {
                        event_row_id: Set(row_id),
                        endpoint: Set(endpoint.clone()),
                        state: Set(DeliveryState::Pending.as_str().to_owned()),
                        attempts: Set(0),
                        next_attempt_at_ms: Set(at_ms),
                        last_status: Set(None),
                        last_error: Set(None),
                        delivered_at_ms: Set(None),
                        claimed_by: Set(None),
                        claimed_until_ms: Set(None),
                        created_at_ms: Set(at_ms),
                        ..Default::default()
                    });
                event_delivery::Entity::insert_many(rows)
                    .on_conflict_do_nothing_on([
                        event_delivery::Column::EventRowId,
                        event_delivery::Column::Endpoint,
                    ])
                    .exec(&txn)
                    .await
                    .map_err(StoreError::db(OP))?;
            }
        }
        txn.commit().await.map_err(StoreError::db(OP))?;
        Ok(marked.len())
    }

    /// Claims up to `limit` pending deliveries to `endpoints` that are
    /// due, the longest due first, for `claim_for`; with their events.
    /// (Deliveries to a webhook no longer configured stay pending.)
    pub async fn claim_due_deliveries(
        &self,
        owner: &str,
        endpoints: &[String],
        limit: u64,
        claim_for: Duration,
    ) -> Result<Vec<DueDelivery>, StoreError> {
        const OP: &str = "claim_due_deliveries";
        use event_delivery::Column as D;
        let at_ms = now_ms();
        let pending = DeliveryState::Pending.as_str();
        let candidates: Vec<i64> = event_delivery::Entity::find()
            .select_only()
            .column(D::Id)
            .filter(D::State.eq(pending))
            .filter(D::Endpoint.is_in(endpoints.iter().map(String::as_str)))
            .filter(D::NextAttemptAtMs.lte(at_ms))
            .filter(unclaimed_delivery(at_ms))
            .order_by_asc(D::NextAttemptAtMs)
            .order_by_asc(D::Id)
            .limit(limit)
            .into_tuple()
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        let until = at_ms.saturating_add(millis(claim_for));
        let mut claimed = Vec::with_capacity(candidates.len());
        for id in candidates {
            let res = event_delivery::Entity::update_many()
                .col_expr(D::ClaimedBy, Expr::value(owner))
                .col_expr(D::ClaimedUntilMs, Expr::value(until))
                .filter(D::Id.eq(id))
                .filter(D::State.eq(pending))
                .filter(unclaimed_delivery(at_ms))
                .exec(&self.db)
                .await
                .map_err(StoreError::db(OP))?;
            if res.rows_affected == 1 {
                claimed.push(id);
            }
        }
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        let deliveries = event_delivery::Entity::find()
            .filter(D::Id.is_in(claimed))
            .order_by_asc(D::NextAttemptAtMs)
            .order_by_asc(D::Id)
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        let events = self
            .events_by_row(deliveries.iter().map(|d| d.event_row_id), OP)
            .await?;
        let mut due = Vec::with_capacity(deliveries.len());
        for d in deliveries {
            let Some(event) = events.iter().find(|e| e.id == d.event_row_id) else {
                continue;
            };
            due.push(DueDelivery {
                id: d.id,
                endpoint: d.endpoint,
                attempts: to_u32(d.attempts),
                event: to_record(event)?,
            });
        }
        Ok(due)
    }

    /// Records how an attempt of a delivery `owner` claimed ended, and
    /// frees its claim. `false` when the claim was no longer `owner`'s
    /// (it expired and another relay took the delivery).
    pub async fn finish_delivery(
        &self,
        id: i64,
        owner: &str,
        result: &DeliveryResult,
    ) -> Result<bool, StoreError> {
        use event_delivery::Column as D;
        let at_ms = now_ms();
        let mut update = event_delivery::Entity::update_many()
            .col_expr(D::Attempts, Expr::col(D::Attempts).add(1))
            .col_expr(D::ClaimedBy, Expr::value(Option::<String>::None))
            .col_expr(D::ClaimedUntilMs, Expr::value(Option::<i64>::None));
        update = match result {
            DeliveryResult::Delivered { status } => update
                .col_expr(D::State, Expr::value(DeliveryState::Delivered.as_str()))
                .col_expr(D::LastStatus, Expr::value(i32::from(*status)))
                .col_expr(D::LastError, Expr::value(Option::<String>::None))
                .col_expr(D::DeliveredAtMs, Expr::value(at_ms)),
            DeliveryResult::Failed {
                status,
                error,
                retry_at_ms,
            } => {
                let state = if retry_at_ms.is_some() {
                    DeliveryState::Pending
                } else {
                    DeliveryState::Failed
                };
                update
                    .col_expr(D::State, Expr::value(state.as_str()))
                    .col_expr(D::LastStatus, Expr::value(status.map(i32::from)))
                    .col_expr(D::LastError, Expr::value(error.as_str()))
                    .col_expr(
                        D::NextAttemptAtMs,
                        Expr::value(retry_at_ms.unwrap_or(at_ms)),
                    )
            }
        };
        let res = update
            .filter(D::Id.eq(id))
            .filter(D::ClaimedBy.eq(owner))
            .exec(&self.db)
            .await
            .map_err(StoreError::db("finish_delivery"))?;
        Ok(res.rows_affected == 1)
    }

    /// Deliveries by `filter`, oldest first, with their events' type and
    /// workstream.
    pub async fn deliveries(
        &self,
        filter: &DeliveryFilter,
    ) -> Result<Vec<DeliveryRow>, StoreError> {
        const OP: &str = "deliveries";
        use event_delivery::Column as D;
        let mut query = event_delivery::Entity::find();
        if let Some(state) = filter.state {
            query = query.filter(D::State.eq(state.as_str()));
        }
        if let Some(endpoint) = &filter.endpoint {
            query = query.filter(D::Endpoint.eq(endpoint.as_str()));
        }
        if let Some(after) = filter.after {
            query = query.filter(D::Id.gt(after));
        }
        let deliveries = query
            .order_by_asc(D::Id)
            .limit(filter.limit)
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        let events = self
            .events_by_row(deliveries.iter().map(|d| d.event_row_id), OP)
            .await?;
        let mut rows = Vec::with_capacity(deliveries.len());
        for d in deliveries {
            let state = state_of(&d)?;
            let event = events.iter().find(|e| e.id == d.event_row_id);
            rows.push(DeliveryRow {
                id: d.id,
                event_id: event.map(|e| e.event_id.clone()).unwrap_or_default(),
                kind: event.map(|e| e.kind.clone()).unwrap_or_default(),
                domain: event.map(|e| e.domain.clone()).unwrap_or_default(),
                entity_id: event.map(|e| e.entity_id.clone()).unwrap_or_default(),
                endpoint: d.endpoint,
                state,
                attempts: to_u32(d.attempts),
                next_attempt_at: time_of(d.next_attempt_at_ms),
                last_status: d.last_status.and_then(|s| u16::try_from(s).ok()),
                last_error: d.last_error,
                delivered_at: d.delivered_at_ms.map(time_of),
                created_at: time_of(d.created_at_ms),
            });
        }
        Ok(rows)
    }

    /// An operator's retry of one delivery: pending again, due now, its
    /// attempts counted from 0 (a delivered one is left alone).
    pub async fn retry_delivery(&self, id: i64) -> Result<RetryOutcome, StoreError> {
        const OP: &str = "retry_delivery";
        use event_delivery::Column as D;
        let Some(row) = event_delivery::Entity::find_by_id(id)
            .one(&self.db)
            .await
            .map_err(StoreError::db(OP))?
        else {
            return Ok(RetryOutcome::NotFound);
        };
        if state_of(&row)? == DeliveryState::Delivered {
            return Ok(RetryOutcome::AlreadyDelivered);
        }
        let res = requeue(event_delivery::Entity::update_many())
            .filter(D::Id.eq(id))
            .filter(D::State.ne(DeliveryState::Delivered.as_str()))
            .exec(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        Ok(if res.rows_affected == 1 {
            RetryOutcome::Requeued
        } else {
            RetryOutcome::AlreadyDelivered
        })
    }

    /// An operator's retry of every failed delivery (of `endpoint`, when
    /// given). Returns how many are pending again.
    pub async fn retry_failed_deliveries(&self, endpoint: Option<&str>) -> Result<u64, StoreError> {
        use event_delivery::Column as D;
        let mut update = requeue(event_delivery::Entity::update_many())
            .filter(D::State.eq(DeliveryState::Failed.as_str()));
        if let Some(endpoint) = endpoint {
            update = update.filter(D::Endpoint.eq(endpoint));
        }
        let res = update
            .exec(&self.db)
            .await
            .map_err(StoreError::db("retry_failed_deliveries"))?;
        Ok(res.rows_affected)
    }

    /// Removes events written before `before_ms` (Unix ms) that were
    /// relayed and delivered to every webhook, with their deliveries, at
    /// most `PRUNE_BATCH` per call. Returns how many events went.
    pub async fn prune_events(&self, before_ms: i64) -> Result<u64, StoreError> {
        const OP: &str = "prune_events";
        let old: Vec<i64> = event::Entity::find()
            .select_only()
            .column(event::Column::Id)
            .filter(event::Column::StreamedAtMs.is_not_null())
            .filter(event::Column::CreatedAtMs.lt(before_ms))
            .order_by_asc(event::Column::Id)
            .limit(PRUNE_BATCH)
            .into_tuple()
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        if old.is_empty() {
            return Ok(0);
        }
        let undelivered: Vec<i64> = event_delivery::Entity::find()
            .select_only()
            .column(event_delivery::Column::EventRowId)
            .filter(event_delivery::Column::EventRowId.is_in(old.iter().copied()))
            .filter(event_delivery::Column::State.ne(DeliveryState::Delivered.as_str()))
            .into_tuple()
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        let done: Vec<i64> = old
            .into_iter()
            .filter(|id| !undelivered.contains(id))
            .collect();
        if done.is_empty() {
            return Ok(0);
        }
        let txn = self.begin_write(OP).await?;
        event_delivery::Entity::delete_many()
            .filter(event_delivery::Column::EventRowId.is_in(done.iter().copied()))
            .exec(&txn)
            .await
            .map_err(StoreError::db(OP))?;
        let res = event::Entity::delete_many()
            .filter(event::Column::Id.is_in(done))
            // Not relayed again meanwhile: relayed rows never change back.
            .filter(event::Column::StreamedAtMs.is_not_null())
            .exec(&txn)
            .await
            .map_err(StoreError::db(OP))?;
        txn.commit().await.map_err(StoreError::db(OP))?;
        Ok(res.rows_affected)
    }

    /// The outbox's rows not done yet (the backlog gauges).
    pub async fn outbox_backlog(&self) -> Result<OutboxBacklog, StoreError> {
        const OP: &str = "outbox_backlog";
        use event_delivery::Column as D;
        let unrelayed = event::Entity::find()
            .filter(event::Column::StreamedAtMs.is_null())
            .count(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        let count = |state: DeliveryState| {
            event_delivery::Entity::find()
                .filter(D::State.eq(state.as_str()))
                .count(&self.db)
        };
        let pending = count(DeliveryState::Pending)
            .await
            .map_err(StoreError::db(OP))?;
        let failed = count(DeliveryState::Failed)
            .await
            .map_err(StoreError::db(OP))?;
        let oldest_event: Option<i64> = event::Entity::find()
            .select_only()
            .column(event::Column::CreatedAtMs)
            .filter(event::Column::StreamedAtMs.is_null())
            .order_by_asc(event::Column::Id)
            .limit(1)
            .into_tuple()
            .one(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        let oldest_row: Option<i64> = event_delivery::Entity::find()
            .select_only()
            .column(D::EventRowId)
            .filter(D::State.ne(DeliveryState::Delivered.as_str()))
            .order_by_asc(D::EventRowId)
            .limit(1)
            .into_tuple()
            .one(&self.db)
            .await
            .map_err(StoreError::db(OP))?;
        let oldest_delivery: Option<i64> = match oldest_row {
            Some(row) => event::Entity::find_by_id(row)
                .select_only()
                .column(event::Column::CreatedAtMs)
                .into_tuple()
                .one(&self.db)
                .await
                .map_err(StoreError::db(OP))?,
            None => None,
        };
        let oldest_undelivered_ms = match (oldest_event, oldest_delivery) {
            (Some(a), Some(b)) => Some(std::cmp::min(a, b)),
            (a, b) => a.or(b),
        };
        Ok(OutboxBacklog {
            unrelayed,
            pending,
            failed,
            oldest_undelivered_ms,
        })
    }

    /// The events of these rows, in a bounded number of statements.
    async fn events_by_row(
        &self,
        rows: impl Iterator<Item = i64>,
        op: &'static str,
    ) -> Result<Vec<event::Model>, StoreError> {
        let mut ids: Vec<i64> = rows.collect();
        ids.sort_unstable();
        ids.dedup();
        let mut events = Vec::with_capacity(ids.len());
        for batch in ids.chunks(PRUNE_BATCH as usize) {
            events.extend(
                event::Entity::find()
                    .filter(event::Column::Id.is_in(batch.iter().copied()))
                    .all(&self.db)
                    .await
                    .map_err(StoreError::db(op))?,
            );
        }
        Ok(events)
    }
}

/// "Pending, due now, attempts from 0, no claim" for an operator's retry.
fn requeue(
    update: sea_orm::UpdateMany<event_delivery::Entity>,
) -> sea_orm::UpdateMany<event_delivery::Entity> {
    use event_delivery::Column as D;
    update
        .col_expr(D::State, Expr::value(DeliveryState::Pending.as_str()))
        .col_expr(D::Attempts, Expr::value(0i32))
        .col_expr(D::NextAttemptAtMs, Expr::value(now_ms()))
        .col_expr(D::ClaimedBy, Expr::value(Option::<String>::None))
        .col_expr(D::ClaimedUntilMs, Expr::value(Option::<i64>::None))
}
