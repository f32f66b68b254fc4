//! The fenced commit of a compaction, and the failure path of a job.
//!
//! A compaction job reads the workstream, talks to an LLM for seconds or
//! minutes, then writes. Meanwhile its lease may have expired and been
//! taken over, or (after a bug, or a manual intervention) another job may
//! have committed. The commit therefore writes only if, at the moment of
//! writing, the job still holds the lease *and* the watermark is the one it
//! loaded: one conditional `UPDATE` of the workstream row decides, and
//! everything else of the commit happens in the same transaction, after
//! it. A refused commit has written nothing (its audit row aside).

use compactor_shared::{MessageId, Summary, WorkstreamState};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseTransaction, EntityTrait, QueryFilter, QuerySelect,
    QueryTrait,
};

use super::convert::{encode, encode_parts, now, placeholder, to_i64};
use super::entities::{memory_block_entry, message, workstream};
use super::lease::{eq_or_null, held_by, release};
use super::outbox::{insert_event, written};
use super::runs::{insert_run, insert_run_at};
use super::workstreams::BREAKER_THRESHOLD;
use super::{NewEvent, NewRun, RunOutcome, Store, StoreError};

/// Ids per `IN (…)` / `NOT IN (…)` list, well under every backend's
/// bound-parameter limit.
const ID_LIST_BATCH: usize = 500;

/// Everything a successful compaction writes. See [`Store::commit`].
#[derive(Debug, Clone)]
pub struct Commit<'a> {
    pub workstream_id: i64,
    /// Fence: the lease owner that took the lease for this job.
    pub lease_owner: &'a str,
    /// Fence: the `last_compacted_message_id` the job loaded.
    pub expected_watermark: Option<MessageId>,
    /// The newest message the new summary covers.
    pub new_watermark: MessageId,
    /// Messages in `(expected_watermark, new_watermark]` that stay
    /// un-compacted (pinned messages before the cut).
    pub keep: &'a [MessageId],
    /// Subtracted from `uncompacted_tokens` (never below 0).
    pub compacted_tokens: u64,
    pub summary: &'a Summary,
    /// Estimated tokens of the preamble (summary + state) now written.
    pub summary_tokens: u64,
    pub state: &'a WorkstreamState,
    /// Some: set `memory_block_summary` and mark these entries folded.
    pub memory_fold: Option<MemoryFold<'a>>,
    /// Tail messages whose tool output was pruned: their parts and estimate
    /// are replaced, and `uncompacted_tokens` moves by the difference.
    pub pruned: &'a [PrunedMessage],
    pub just_auto_compacted: bool,
    /// `true`: the workstream is below its trigger now, the failure count
    /// and breaker are cleared. `false`: no progress, which counts as a
    /// failure towards the breaker.
    pub progress: bool,
    /// The audit row, inserted in the same transaction.
    pub run: &'a NewRun,
}

/// A memory-block fold: the new summary of the block and the entries it
/// absorbed.
#[derive(Debug, Clone, Copy)]
pub struct MemoryFold<'a> {
    pub summary: &'a str,
    pub folded: &'a [i64],
}

/// A message whose tool output was pruned (soft compaction).
pub use compactor_shared::pipeline::PrunedMessage;

/// The result of [`Store::commit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    /// Written; the workstream's new `version`.
    Committed { version: i64 },
    /// Refused; nothing of the commit was written (a `conflict` run row was).
    Conflict(ConflictReason),
}

/// Why a commit was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictReason {
    /// The caller no longer holds the lease (it expired and was taken over,
    /// or was released).
    LeaseLost,
    /// The caller holds the lease but the watermark is not the one it
    /// loaded: another commit happened in between.
    WatermarkMoved,
}

impl Store {
    /// The fenced commit, in one transaction:
    ///
    /// 1. the workstream row is updated only `WHERE is_compacting AND
    ///    lease_owner = owner AND last_compacted_message_id IS NOT DISTINCT
    ///    FROM expected`: summary, summary tokens, state, watermark,
    ///    `uncompacted_tokens -= compacted_tokens`, `version += 1`,
    ///    `compactions += 1`, `last_compacted_at`, `just_auto_compacted`,
    ///    the breaker (per `progress`), the memory-block summary, and the
    ///    lease released;
    /// 2. the messages of `keep` in `(expected, new]` are flagged kept;
    ///    every other message up to the new watermark is compacted by the
    ///    watermark alone (see `store::compacted`: nothing is written per
    ///    compacted message);
    /// 3. pruned messages get their new parts and estimate;
    /// 4. folded memory entries are marked;
    /// 5. the run row is inserted, with the new watermark (recall's
    ///    "folded by").
    ///
    /// If the fence does not match, the transaction is rolled back, a run
    /// row with outcome `conflict` is recorded, and the reason is returned.
    /// Any error (e.g. a pruned message that is not in the workstream) rolls
    /// everything back: there is never a half-written commit.
    pub async fn commit(&self, commit: &Commit<'_>) -> Result<CommitOutcome, StoreError> {
        self.commit_with_event(commit, None).await
    }

    /// [`Store::commit`], writing `event` to the outbox in the same
    /// transaction (step 6), after the fence matched: a refused commit
    /// writes no event. The event's `data` (an object) gets the
    /// `run_id` of the audit row and the workstream's new `version`, known
    /// only inside the transaction.
    pub async fn commit_with_event(
        &self,
        commit: &Commit<'_>,
        event: Option<&NewEvent>,
    ) -> Result<CommitOutcome, StoreError> {
        const OP: &str = "commit";
        let encoded = Encoded {
            summary: encode(OP, "summary", commit.summary)?,
            state: encode(OP, "state", commit.state)?,
            pruned: commit
                .pruned
                .iter()
                .map(|p| encode_parts(OP, &p.parts))
                .collect::<Result<_, _>>()?,
        };
        let txn = self.begin_write(OP).await?;
        // On error `txn` is dropped, which rolls it back.
        match write_commit(&txn, commit, &encoded).await? {
            Some((version, run_id)) => {
                let written_event = match event {
                    Some(event) => {
                        let mut event = event.clone();
                        if let Some(data) = event.data.as_object_mut() {
                            data.insert("run_id".into(), run_id.into());
                            data.insert("version".into(), version.into());
                        }
                        Some((event.kind, insert_event(&txn, &event, OP).await?))
                    }
                    None => None,
                };
                txn.commit().await.map_err(StoreError::db(OP))?;
                if let Some((kind, id)) = written_event {
                    written(kind, &id);
                }
                Ok(CommitOutcome::Committed { version })
            }
            None => {
                txn.rollback().await.map_err(StoreError::db(OP))?;
                let reason = self
                    .conflict_reason(commit.workstream_id, commit.lease_owner, OP)
                    .await?;
                let run = NewRun {
                    outcome: RunOutcome::Conflict,
                    ..commit.run.clone()
                };
                insert_run(&self.db, commit.workstream_id, &run, OP).await?;
                Ok(CommitOutcome::Conflict(reason))
            }
        }
    }

    /// The failure path of a job, in one transaction fenced on the lease
    /// owner: record the run; if `count_failure`, `consecutive_failures +=
    /// 1` (and at [`BREAKER_THRESHOLD`] the breaker opens at the current
    /// `last_message_id`); release the lease. Returns `false` when `owner`
    /// no longer holds the lease: then only the run row is recorded.
    pub async fn record_failure(
        &self,
        workstream_id: i64,
        owner: &str,
        run: &NewRun,
        count_failure: bool,
    ) -> Result<bool, StoreError> {
        self.record_failure_with_event(workstream_id, owner, run, count_failure, None)
            .await
    }

    /// [`Store::record_failure`], writing `event` to the outbox in the
    /// same transaction when `owner` still held the lease (the failure
    /// gave it back); not when it did not (someone else runs now).
    pub async fn record_failure_with_event(
        &self,
        workstream_id: i64,
        owner: &str,
        run: &NewRun,
        count_failure: bool,
        event: Option<&NewEvent>,
    ) -> Result<bool, StoreError> {
        const OP: &str = "record_failure";
        let txn = self.begin_write(OP).await?;
        let mut update = workstream::Entity::update_many();
        if count_failure {
            update = update
                .col_expr(
                    workstream::Column::ConsecutiveFailures,
                    Expr::col(workstream::Column::ConsecutiveFailures).add(1),
                )
                .col_expr(
                    workstream::Column::BreakerMessageId,
                    breaker_after_failure(),
                );
        }
        let res = release(update)
            .filter(held_by(workstream_id, owner))
            .exec(&txn)
            .await
            .map_err(StoreError::db(OP))?;
        let held = res.rows_affected == 1;
        if !held && !exists(&txn, workstream_id, OP).await? {
            return Err(StoreError::UnknownWorkstream {
                op: OP,
                workstream_id,
            });
        }
        insert_run(&txn, workstream_id, run, OP).await?;
        let written_event = match event {
            Some(event) if held => Some((event.kind, insert_event(&txn, event, OP).await?)),
            _ => None,
        };
        txn.commit().await.map_err(StoreError::db(OP))?;
        if let Some((kind, id)) = written_event {
            written(kind, &id);
        }
        Ok(held)
    }

    /// Why the fence did not match, read after the rollback.
    async fn conflict_reason(
        &self,
        workstream_id: i64,
        owner: &str,
        op: &'static str,
    ) -> Result<ConflictReason, StoreError> {
        let row = workstream::Entity::find_by_id(workstream_id)
            .one(&self.db)
            .await
            .map_err(StoreError::db(op))?
            .ok_or(StoreError::UnknownWorkstream { op, workstream_id })?;
        Ok(
            if row.is_compacting && row.lease_owner.as_deref() == Some(owner) {
                ConflictReason::WatermarkMoved
            } else {
                ConflictReason::LeaseLost
            },
        )
    }
}

/// JSON encoded before the transaction opens (an encoding failure then
/// costs no lock).
struct Encoded {
    summary: String,
    state: String,
    pruned: Vec<String>,
}

/// Steps 1–5 of [`Store::commit`]: the new version and the run row's id.
/// `None`: the fence did not match and nothing was written.
async fn write_commit(
    txn: &DatabaseTransaction,
    c: &Commit<'_>,
    encoded: &Encoded,
) -> Result<Option<(i64, i64)>, StoreError> {
    const OP: &str = "commit";
    use workstream::Column as W;
    let at = now();
    let compacted = to_i64(c.compacted_tokens);
    let mut update = workstream::Entity::update_many()
        .col_expr(W::CompactionSummary, Expr::value(encoded.summary.as_str()))
        .col_expr(W::SummaryTokens, Expr::value(to_i64(c.summary_tokens)))
        .col_expr(W::State, Expr::value(encoded.state.as_str()))
        .col_expr(W::LastCompactedMessageId, Expr::value(c.new_watermark.0))
        .col_expr(
            W::UncompactedTokens,
            Expr::case(
                Expr::col(W::UncompactedTokens).gt(compacted),
                Expr::col(W::UncompactedTokens).sub(compacted),
            )
            .finally(0i64)
            .into(),
        )
        .col_expr(W::Version, Expr::col(W::Version).add(1))
        .col_expr(W::Compactions, Expr::col(W::Compactions).add(1))
        .col_expr(W::LastCompactedAt, Expr::value(at))
        .col_expr(W::JustAutoCompacted, Expr::value(c.just_auto_compacted));
    update = if c.progress {
        update
            .col_expr(W::ConsecutiveFailures, Expr::value(0))
            .col_expr(W::BreakerMessageId, Expr::value(Option::<i64>::None))
    } else {
        update
            .col_expr(
                W::ConsecutiveFailures,
                Expr::col(W::ConsecutiveFailures).add(1),
            )
            .col_expr(W::BreakerMessageId, breaker_after_failure())
    };
    if let Some(fold) = &c.memory_fold {
        update = update.col_expr(W::MemoryBlockSummary, Expr::value(fold.summary));
    }
    // The fence and the new version in one statement (`RETURNING`: both
    // backends): no row back, no commit.
    let mut fenced = release(update)
        .filter(held_by(c.workstream_id, c.lease_owner))
        .filter(eq_or_null(
            W::LastCompactedMessageId,
            c.expected_watermark.map(|m| m.0),
        ))
        .into_query();
    fenced.returning_col(W::Version);
    let rows = txn.query_all(&fenced).await.map_err(StoreError::db(OP))?;
    let [row] = rows.as_slice() else {
        return Ok(None);
    };
    let version: i64 = row.try_get("", "version").map_err(StoreError::db(OP))?;

    // The run records the watermark it wrote: recall finds the run that
    // folded a message by it.
    let run_id = insert_run_at(txn, c.workstream_id, c.run, Some(c.new_watermark), OP).await?;
    keep_below_watermark(txn, c).await?;
    apply_pruned(txn, c, &encoded.pruned).await?;
    if let Some(fold) = &c.memory_fold {
        for ids in fold.folded.chunks(ID_LIST_BATCH) {
            memory_block_entry::Entity::update_many()
                .col_expr(memory_block_entry::Column::Folded, Expr::value(true))
                .filter(memory_block_entry::Column::WorkstreamId.eq(c.workstream_id))
                .filter(memory_block_entry::Column::Id.is_in(ids.iter().copied()))
                .exec(txn)
                .await
                .map_err(StoreError::db(OP))?;
        }
    }
    Ok(Some((version, run_id)))
}

/// Flags the messages of `keep` in `(expected, new]` kept: every other
/// message of the span is compacted by the watermark the commit wrote (see
/// `store::compacted`), so nothing else is written, however long the span.
async fn keep_below_watermark(txn: &DatabaseTransaction, c: &Commit<'_>) -> Result<(), StoreError> {
    let lower = c.expected_watermark.map(|m| m.0);
    let upper = c.new_watermark.0;
    let mut keep: Vec<i64> = c
        .keep
        .iter()
        .map(|m| m.0)
        .filter(|&k| lower.is_none_or(|l| k > l) && k <= upper)
        .collect();
    keep.sort_unstable();
    keep.dedup();
    for batch in keep.chunks(ID_LIST_BATCH) {
        message::Entity::update_many()
            .col_expr(message::Column::Kept, Expr::value(true))
            .filter(message::Column::WorkstreamId.eq(c.workstream_id))
            .filter(message::Column::Id.is_in(batch.iter().copied()))
            .exec(txn)
            .await
            .map_err(StoreError::db("commit"))?;
    }
    Ok(())
}

/// Replaces the parts and estimates of pruned messages and moves
/// `uncompacted_tokens` by the difference (of the messages still
/// un-compacted: the tokens of a compacted one are no longer counted).
/// A few statements whatever the number of pruned messages: their old
/// estimates in one read, the new values in one `UPDATE` per batch.
async fn apply_pruned(
    txn: &DatabaseTransaction,
    c: &Commit<'_>,
    parts: &[String],
) -> Result<(), StoreError> {
    const OP: &str = "commit";
    // The last word on a message pruned twice wins (as applying them in
    // order would).
    let mut latest: std::collections::BTreeMap<i64, (&PrunedMessage, &str)> =
        std::collections::BTreeMap::new();
    for (pruned, parts) in c.pruned.iter().zip(parts) {
        latest.insert(pruned.id.0, (pruned, parts.as_str()));
    }
    let ids: Vec<i64> = latest.keys().copied().collect();
    let mut old: std::collections::HashMap<i64, (i64, bool)> =
        std::collections::HashMap::with_capacity(ids.len());
    for batch in ids.chunks(ID_LIST_BATCH) {
        let rows: Vec<(i64, i64, bool)> = message::Entity::find()
            .select_only()
            .column(message::Column::Id)
            .column(message::Column::TokenEstimate)
            .column(message::Column::Kept)
            .filter(message::Column::WorkstreamId.eq(c.workstream_id))
            .filter(message::Column::Id.is_in(batch.iter().copied()))
            .into_tuple()
            .all(txn)
            .await
            .map_err(StoreError::db(OP))?;
        // Compacted: at or below the watermark this commit wrote, not kept
        // (the kept flags of this commit are written by now).
        old.extend(
            rows.into_iter()
                .map(|(id, t, kept)| (id, (t, !kept && id <= c.new_watermark.0))),
        );
    }
    let mut delta: i64 = 0;
    for (&id, (pruned, _)) in &latest {
        let &(was, is_compacted) = old.get(&id).ok_or(StoreError::UnknownMessage {
            op: OP,
            workstream_id: c.workstream_id,
            message_id: MessageId(id),
        })?;
        if !is_compacted {
            delta = delta.saturating_add(to_i64(pruned.token_estimate).saturating_sub(was));
        }
    }
    let rows: Vec<(i64, &str, i64)> = latest
        .iter()
        .map(|(&id, (pruned, parts))| (id, *parts, to_i64(pruned.token_estimate)))
        .collect();
    for batch in rows.chunks(PRUNED_BATCH) {
        update_pruned(txn, c.workstream_id, batch).await?;
    }
    if delta != 0 {
        use workstream::Column as W;
        let moved = Expr::col(W::UncompactedTokens).add(delta);
        workstream::Entity::update_many()
            .col_expr(
                W::UncompactedTokens,
                Expr::case(moved.clone().gt(0i64), moved)
                    .finally(0i64)
                    .into(),
            )
            .filter(W::Id.eq(c.workstream_id))
            .exec(txn)
            .await
            .map_err(StoreError::db(OP))?;
    }
    Ok(())
}

/// Pruned messages per `UPDATE` (three bound values each, under every
/// backend's limit).
const PRUNED_BATCH: usize = 200;

/// New parts and estimates of `rows` (`(id, parts, estimate)`, distinct
/// ids of the workstream) in one statement: a `VALUES` list the update
/// looks the new values up in (a CTE with named columns, which both
/// PostgreSQL and SQLite accept; casts, so PostgreSQL knows the types).
async fn update_pruned(
    txn: &DatabaseTransaction,
    workstream_id: i64,
    rows: &[(i64, &str, i64)],
) -> Result<(), StoreError> {
    let backend = txn.get_database_backend();
    let mut values: Vec<sea_orm::Value> = Vec::with_capacity(rows.len() * 3 + 1);
    let mut n = 0;
    let mut p = || {
        n += 1;
        placeholder(backend, n)
    };
    let mut list = Vec::with_capacity(rows.len());
    for &(id, parts, estimate) in rows {
        list.push(format!(
            "(CAST({} AS BIGINT), CAST({} AS TEXT), CAST({} AS BIGINT))",
            p(),
            p(),
            p()
        ));
        values.extend([id.into(), parts.into(), estimate.into()]);
    }
    let ws = p();
    values.push(workstream_id.into());
    let sql = format!(
        "WITH v(id, parts, token_estimate) AS (VALUES {}) \
         UPDATE messages SET \
           parts = (SELECT v.parts FROM v WHERE v.id = messages.id), \
           token_estimate = (SELECT v.token_estimate FROM v WHERE v.id = messages.id) \
         WHERE workstream_id = {ws} AND id IN (SELECT id FROM v)",
        list.join(", ")
    );
    txn.execute_raw(sea_orm::Statement::from_sql_and_values(
        backend, sql, values,
    ))
    .await
    .map_err(StoreError::db("commit"))?;
    Ok(())
}

/// `breaker_message_id` after one more failure: the current newest message
/// once the count reaches the threshold, unchanged before. (In an `UPDATE`,
/// the right-hand side sees the row's old values, hence `+ 1`.)
fn breaker_after_failure() -> Expr {
    use workstream::Column as W;
    Expr::case(
        Expr::col(W::ConsecutiveFailures)
            .add(1)
            .gte(i64::from(BREAKER_THRESHOLD)),
        Expr::col(W::LastMessageId),
    )
    .finally(Expr::col(W::BreakerMessageId))
    .into()
}

async fn exists<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    op: &'static str,
) -> Result<bool, StoreError> {
    Ok(workstream::Entity::find_by_id(workstream_id)
        .select_only()
        .column(workstream::Column::Id)
        .into_tuple::<i64>()
        .one(db)
        .await
        .map_err(StoreError::db(op))?
        .is_some())
}
