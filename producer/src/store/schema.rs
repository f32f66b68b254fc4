//! Migrating the database and comparing it with this build's schema.

use compactor_migrations::{applied_migration_names, migration_names, Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, DbBackend, TransactionTrait};

use super::{Store, StoreError};

/// How the database's schema compares with the migrations of this build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaStatus {
    /// Every migration of this build is applied, and no other.
    Current,
    /// These migrations of this build are not applied yet (oldest first).
    Behind { pending: Vec<String> },
    /// The database has migrations this build does not know: it was
    /// migrated by a newer build, and this one must not write to it.
    Ahead { unknown: Vec<String> },
}

impl Store {
    /// Applies the pending migrations and returns their names (empty when
    /// the schema was current). Refuses a database that is ahead of this
    /// build ([`SchemaStatus::Ahead`]) with a `migrate` error.
    pub async fn migrate(&self) -> Result<Vec<String>, StoreError> {
        let pending = match self.schema_status().await? {
            SchemaStatus::Current => return Ok(Vec::new()),
            SchemaStatus::Behind { pending } => pending,
            SchemaStatus::Ahead { unknown } => {
                return Err(StoreError::Db {
                    op: "migrate",
                    source: sea_orm::DbErr::Migration(format!(
                        "the database has migrations this build does not know: {}",
                        unknown.join(", ")
                    )),
                })
            }
        };
        const OP: &str = "migrate";
        if self.backend() == DbBackend::Postgres {
            // A migration may rewrite a large table: it is not held to the
            // pool's `statement_timeout`. PostgreSQL's DDL is
            // transactional, so the whole migration commits or none of it.
            let txn = self.db.begin().await.map_err(StoreError::db(OP))?;
            txn.execute_unprepared("SET LOCAL statement_timeout = 0")
                .await
                .map_err(StoreError::db(OP))?;
            Migrator::up(&txn, None).await.map_err(StoreError::db(OP))?;
            txn.commit().await.map_err(StoreError::db(OP))?;
        } else {
            Migrator::up(&self.db, None)
                .await
                .map_err(StoreError::db(OP))?;
        }
        Ok(pending)
    }

    /// Compares the applied migrations with those of this build, without
    /// changing anything (not even creating the bookkeeping table).
    pub async fn schema_status(&self) -> Result<SchemaStatus, StoreError> {
        let applied = applied_migration_names(&self.db)
            .await
            .map_err(StoreError::db("schema_status"))?;
        let known = migration_names();
        let unknown: Vec<String> = applied
            .iter()
            .filter(|name| !known.contains(name))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Ok(SchemaStatus::Ahead { unknown });
        }
        let pending: Vec<String> = known
            .into_iter()
            .filter(|name| !applied.contains(name))
            .collect();
        Ok(if pending.is_empty() {
            SchemaStatus::Current
        } else {
            SchemaStatus::Behind { pending }
        })
    }
}
