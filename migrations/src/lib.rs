//! The database schema of compactor, as sea-orm migrations.
//!
//! One migration per table, then additive changes, applied in file-name
//! order:
//!
//! | migration | table |
//! |---|---|
//! | `m20261122_000001_create_workstreams` | `workstreams`: one row per `(domain, entity_id)`: summary, state, watermark, lease, counters |
//! | `m20261122_000002_create_messages` | `messages`: every stored message, never deleted (marked `is_compacted` until `m20261127_000008`) |
//! | `m20261122_000003_create_memory_block_entries` | `memory_block_entries`: entries until they are folded |
//! | `m20261122_000004_create_compaction_runs` | `compaction_runs`: one audit row per attempt |
//! | `m20261122_000005_add_compaction_run_llm_audit` | `compaction_runs`: why a run was degraded, LLM calls and failed calls |
//! | `m20261124_000001_add_message_client_ids` | `messages.client_id`: a client's id for a message, unique per workstream (idempotent appends) |
//! | `m20261126_000002_create_event_outbox` | `events` and `event_deliveries`: the transactional outbox of compaction events and their webhook deliveries |
//! | `m20261127_000001_add_compaction_run_hook` | `compaction_runs`: what the pre-compaction hook did (`hook_outcome`, `hook_duration_ms`) |
//! | `m20261127_000002_add_message_search` | recall: full-text search over messages (PostgreSQL `tsvector` + GIN, SQLite FTS5) and `messages.compacted_by_run_id` |
//! | `m20261127_000003_add_message_branches` | `messages.parent_id`, `workstreams.head_message_id` and `branch_summaries`: message branches and the summaries of abandoned ones |
//! | `m20261127_000004_add_workstream_breaker_index` | an index on `workstreams.consecutive_failures`: workstreams listed by an open breaker |
//! | `m20261127_000005_scope_message_search` | recall: the full-text GIN index scoped to the workstream (PostgreSQL: an expression index over `search` plus a `ws <id>` lexeme) |
//! | `m20261127_000006_bound_search_pending_list` | that index takes appends through a pending list bounded at 256 kB (PostgreSQL `fastupdate`) |
//! | `m20261127_000007_search_on_content_change` | `messages.search` kept by a trigger on insert and on a change of `parts`, not recomputed by every update (PostgreSQL) |
//! | `m20261127_000008_compacted_below_watermark` | compacted = at or below the workstream's watermark and not `messages.kept`; `compaction_runs.watermark`; `is_compacted` and `compacted_by_run_id` dropped |
//! | `m20261201_000001_add_compaction_run_evidence` | `compaction_runs`: the candidate evidence lines a run kept for the next context and left out (`evidence_kept`, `evidence_dropped`) |
//!
//! Every migration is written with the sea-query schema builder (or SQL both
//! backends accept, where the builder has no word for it), so the same code
//! creates the schema on PostgreSQL (production) and SQLite (the embedded
//! default). Applied migrations are recorded by name in
//! `seaql_migrations`; [`migration_names`] lists the names this build knows,
//! so a service can tell a database that is behind (pending migrations) from
//! one that is ahead of it (written by a newer build).

use sea_orm_migration::prelude::*;

mod m20261122_000001_create_workstreams;
mod m20261122_000002_create_messages;
mod m20261122_000003_create_memory_block_entries;
mod m20261122_000004_create_compaction_runs;
mod m20261122_000005_add_compaction_run_llm_audit;
mod m20261124_000001_add_message_client_ids;
mod m20261126_000002_create_event_outbox;
mod m20261127_000001_add_compaction_run_hook;
mod m20261127_000002_add_message_search;
mod m20261127_000003_add_message_branches;
mod m20261127_000004_add_workstream_breaker_index;
mod m20261127_000005_scope_message_search;
mod m20261127_000006_bound_search_pending_list;
mod m20261127_000007_search_on_content_change;
mod m20261127_000008_compacted_below_watermark;
mod m20261201_000001_add_compaction_run_evidence;

pub use sea_orm_migration::{MigrationTrait, MigratorTrait};

/// Runs `statements` in order on PostgreSQL; nothing on another backend
/// (the migrations that only PostgreSQL needs: its indexes, functions and
/// triggers).
async fn on_postgres<S: AsRef<str>>(
    manager: &SchemaManager<'_>,
    statements: impl IntoIterator<Item = S>,
) -> Result<(), DbErr> {
    use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};
    let db = manager.get_connection();
    if db.get_database_backend() == DbBackend::Postgres {
        for sql in statements {
            db.execute_unprepared(sql.as_ref()).await?;
        }
    }
    Ok(())
}

use sea_orm_migration::sea_orm::{DatabaseConnection, EntityTrait, QueryOrder};
use sea_orm_migration::seaql_migrations;

/// Every migration of this build, oldest first.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261122_000001_create_workstreams::Migration),
            Box::new(m20261122_000002_create_messages::Migration),
            Box::new(m20261122_000003_create_memory_block_entries::Migration),
            Box::new(m20261122_000004_create_compaction_runs::Migration),
            Box::new(m20261122_000005_add_compaction_run_llm_audit::Migration),
            Box::new(m20261124_000001_add_message_client_ids::Migration),
            Box::new(m20261126_000002_create_event_outbox::Migration),
            Box::new(m20261127_000001_add_compaction_run_hook::Migration),
            Box::new(m20261127_000002_add_message_search::Migration),
            Box::new(m20261127_000003_add_message_branches::Migration),
            Box::new(m20261127_000004_add_workstream_breaker_index::Migration),
            Box::new(m20261127_000005_scope_message_search::Migration),
            Box::new(m20261127_000006_bound_search_pending_list::Migration),
            Box::new(m20261127_000007_search_on_content_change::Migration),
            Box::new(m20261127_000008_compacted_below_watermark::Migration),
            Box::new(m20261201_000001_add_compaction_run_evidence::Migration),
        ]
    }
}

/// Names of the migrations this build knows, oldest first (the values the
/// `version` column of `seaql_migrations` holds once they are applied).
pub fn migration_names() -> Vec<String> {
    Migrator::migrations()
        .iter()
        .map(|m| m.name().to_owned())
        .collect()
}

/// Names of the migrations recorded as applied in the database, oldest
/// first; empty when the database has never been migrated. Unlike
/// `MigratorTrait::get_applied_migrations` this neither creates the
/// bookkeeping table nor fails on names this build does not know, so it can
/// tell a database that is ahead of this build.
pub async fn applied_migration_names(db: &DatabaseConnection) -> Result<Vec<String>, DbErr> {
    let manager = SchemaManager::new(db);
    if !manager.has_table("seaql_migrations").await? {
        return Ok(Vec::new());
    }
    Ok(seaql_migrations::Entity::find()
        .order_by_asc(seaql_migrations::Column::Version)
        .all(db)
        .await?
        .into_iter()
        .map(|m| m.version)
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use sea_orm_migration::sea_orm::Database;

    #[test]
    fn names_are_the_file_names_in_order() {
        assert_eq!(
            migration_names(),
            [
                "m20261122_000001_create_workstreams",
                "m20261122_000002_create_messages",
                "m20261122_000003_create_memory_block_entries",
                "m20261122_000004_create_compaction_runs",
                "m20261122_000005_add_compaction_run_llm_audit",
                "m20261124_000001_add_message_client_ids",
                "m20261126_000002_create_event_outbox",
                "m20261127_000001_add_compaction_run_hook",
                "m20261127_000002_add_message_search",
                "m20261127_000003_add_message_branches",
                "m20261127_000004_add_workstream_breaker_index",
                "m20261127_000005_scope_message_search",
                "m20261127_000006_bound_search_pending_list",
                "m20261127_000007_search_on_content_change",
                "m20261127_000008_compacted_below_watermark",
                "m20261201_000001_add_compaction_run_evidence",
            ]
        );
    }

    #[tokio::test]
    async fn migrates_an_in_memory_sqlite_database_and_records_every_name() {
        let db = Database::connect("sqlite::memory:").await.unwrap();
        assert!(applied_migration_names(&db).await.unwrap().is_empty());
        Migrator::up(&db, None).await.unwrap();
        assert_eq!(
            applied_migration_names(&db).await.unwrap(),
            migration_names()
        );
        Migrator::up(&db, None).await.unwrap();
        assert_eq!(
            applied_migration_names(&db).await.unwrap(),
            migration_names()
        );
        Migrator::down(&db, None).await.unwrap();
        assert!(applied_migration_names(&db).await.unwrap().is_empty());
    }
}
