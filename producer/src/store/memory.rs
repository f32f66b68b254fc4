//! Memory-block entries: appended by the chat backend, folded by the engine
//! into the workstream's `memory_block_summary` (15 entries → the oldest 10
//! folded, see `compactor_shared::memory`). The fold itself is written by
//! the fenced commit ([`super::MemoryFold`]).

use compactor_shared::EntityKey;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
};

use super::convert::now;
use super::entities::{memory_block_entry as entry, workstream};
use super::messages::INSERT_BATCH_ROWS;
use super::workstreams::ensure;
use super::{Store, StoreError};

/// A memory-block entry not folded yet (the pipeline's type).
pub use compactor_shared::pipeline::MemoryEntry;

impl Store {
    /// Appends entries to the workstream of `key` (created when missing)
    /// and returns how many unfolded entries it has now (the caller decides
    /// from that whether a fold is due).
    pub async fn append_memory_entries(
        &self,
        key: &EntityKey,
        entries: &[String],
    ) -> Result<u64, StoreError> {
        const OP: &str = "append_memory_entries";
        let txn = self.begin_write(OP).await?;
        let ws = ensure(&txn, key, OP).await?;
        // Lock the workstream first, like every writer of it.
        workstream::Entity::update_many()
            .col_expr(workstream::Column::UpdatedAt, Expr::value(now()))
            .filter(workstream::Column::Id.eq(ws.id))
            .exec(&txn)
            .await
            .map_err(StoreError::db(OP))?;
        let created_at = now();
        for batch in entries.chunks(INSERT_BATCH_ROWS) {
            let rows = batch.iter().map(|content| entry::ActiveModel {
                workstream_id: Set(ws.id),
                content: Set(content.clone()),
                folded: Set(false),
                created_at: Set(created_at),
                ..Default::default()
            });
            entry::Entity::insert_many(rows)
                .exec_without_returning(&txn)
                .await
                .map_err(StoreError::db(OP))?;
        }
        let unfolded = entry::Entity::find()
            .filter(entry::Column::WorkstreamId.eq(ws.id))
            .filter(entry::Column::Folded.eq(false))
            .count(&txn)
            .await
            .map_err(StoreError::db(OP))?;
        txn.commit().await.map_err(StoreError::db(OP))?;
        Ok(unfolded)
    }

    /// The workstream's unfolded entries, oldest first.
    pub async fn unfolded_memory_entries(
        &self,
        workstream_id: i64,
    ) -> Result<Vec<MemoryEntry>, StoreError> {
        Ok(entry::Entity::find()
            .filter(entry::Column::WorkstreamId.eq(workstream_id))
            .filter(entry::Column::Folded.eq(false))
            .order_by_asc(entry::Column::Id)
            .all(&self.db)
            .await
            .map_err(StoreError::db("unfolded_memory_entries"))?
            .into_iter()
            .map(|m| MemoryEntry {
                id: m.id,
                content: m.content,
            })
            .collect())
    }
}
