//! PostgreSQL: the search text function of the generated `search` column
//! (`m20261127_000002`) runs its query itself instead of calling the SQL
//! function `compactor_message_search_text_of`. Same text for every input
//! (the same query, the same `EXCEPTION` fallback to `''`), so the stored
//! column and its index stay valid: nothing is recomputed, no table is
//! rewritten.
//!
//! Why: the column's function is PL/pgSQL with an exception block, so each
//! call runs in a subtransaction of its own, and PostgreSQL (before 18)
//! keeps a SQL function's parsed and planned body only within the
//! subtransaction that built it: every message inserted parsed, analyzed
//! and planned `compactor_message_search_text_of` again. Profiled in the
//! chat-path benchmark, that was most of PostgreSQL's time in an append
//! (`fmgr_sql` → `pg_parse_query` / `pg_plan_query` under
//! `ExecComputeStoredGenerated`); 100-message inserts took 27–30 ms with it
//! and 10–13 ms with this function, whose query PL/pgSQL prepares once per
//! connection and reuses across subtransactions.
//!
//! SQLite is unchanged (its FTS5 table is kept by triggers).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

use crate::m20261127_000002_add_message_search::{search_text_query, POSTGRES_SAFE_FUNCTION};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// `compactor_message_search_text` with the query inline: what a row's
/// `search` column indexes, `''` when `parts` is not a JSON array.
fn postgres_function() -> String {
    format!(
        r#"CREATE OR REPLACE FUNCTION compactor_message_search_text(parts text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
  RETURN ({});
EXCEPTION WHEN others THEN
  RETURN '';
END
$fn$"#,
        search_text_query()
    )
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        if db.get_database_backend() == DbBackend::Postgres {
            db.execute_unprepared(&postgres_function()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        if db.get_database_backend() == DbBackend::Postgres {
            db.execute_unprepared(POSTGRES_SAFE_FUNCTION).await?;
        }
        Ok(())
    }
}
