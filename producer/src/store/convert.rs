//! Conversions between domain values and column values.
//!
//! Counters are `u64`/`u32` in the API and signed in SQL (neither backend
//! has unsigned 64-bit integers). Values beyond `i64::MAX` cannot occur for
//! token counts, so the conversions saturate instead of failing; a negative
//! value read back (only possible through a manual edit) is read as 0.

use chrono::{DateTime, Utc};
use compactor_shared::{Part, Role};

use super::StoreError;

pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(crate) fn to_i32(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

pub(crate) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

pub(crate) fn to_u32(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

/// Milliseconds of a duration as a signed column value (saturating).
pub(crate) fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The application clock. Leases are compared on it (`lease_deadline_ms`),
/// so every process that takes leases on one database must keep its clock
/// in sync (NTP); a skew shortens or lengthens leases by the same amount.
pub(crate) fn now() -> DateTime<Utc> {
    Utc::now()
}

pub(crate) fn now_ms() -> i64 {
    now().timestamp_millis()
}

/// The `n`-th (from 1) bound parameter of a raw statement: `$n` on
/// PostgreSQL, `?n` on SQLite (numbered on both, so one value can be used
/// twice).
pub(crate) fn placeholder(backend: sea_orm::DbBackend, n: usize) -> String {
    match backend {
        sea_orm::DbBackend::Postgres => format!("${n}"),
        _ => format!("?{n}"),
    }
}

/// The `n`-th (from 1) value of a custom expression in a query sea-query
/// builds (`Expr::cust_with_values`): it renumbers `$n` into the
/// statement on PostgreSQL, and takes plain `?` (in order) on SQLite.
pub(crate) fn custom_placeholder(backend: sea_orm::DbBackend, n: usize) -> String {
    match backend {
        sea_orm::DbBackend::Postgres => format!("${n}"),
        _ => "?".to_owned(),
    }
}

pub(crate) fn role_from_str(role: &str) -> Option<Role> {
    [Role::System, Role::User, Role::Assistant, Role::Tool]
        .into_iter()
        .find(|r| r.as_str() == role)
}

pub(crate) fn encode_parts(op: &'static str, parts: &[Part]) -> Result<String, StoreError> {
    encode(op, "message parts", parts)
}

pub(crate) fn encode<T: serde::Serialize + ?Sized>(
    op: &'static str,
    what: &'static str,
    value: &T,
) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|source| StoreError::Encode { op, what, source })
}

/// Decodes a JSON column, a failure being a [`StoreError::CorruptRow`].
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    table: &'static str,
    id: i64,
    column: &'static str,
    json: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(json).map_err(|err| StoreError::CorruptRow {
        table,
        id,
        detail: format!("{column}: {err}"),
    })
}

/// `EXPLAIN (ANALYZE, BUFFERS)` of `statement` in PostgreSQL's generic
/// plan: the plan a prepared statement may switch to after five runs,
/// which cannot see the values (prepared, then executed with
/// `plan_cache_mode = force_generic_plan`, in a transaction of its own).
/// Run, so that the buffers it read show where an index scan started.
/// Every value of `statement` must be an integer (they are written as
/// literals in the `EXECUTE`).
pub(crate) async fn explain_generic(
    db: &sea_orm::DatabaseConnection,
    statement: sea_orm::Statement,
    op: &'static str,
) -> Result<String, StoreError> {
    use sea_orm::{ConnectionTrait, TransactionTrait};

    let values = statement
        .values
        .iter()
        .flat_map(|values| values.0.iter())
        .map(|value| match value {
            sea_orm::Value::BigInt(Some(v)) => Ok(v.to_string()),
            sea_orm::Value::BigUnsigned(Some(v)) => Ok(v.to_string()),
            other => Err(StoreError::Db {
                op,
                source: sea_orm::DbErr::Custom(format!("not an integer: {other:?}")),
            }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let txn = db.begin().await.map_err(StoreError::db(op))?;
    for sql in [
        "SET LOCAL plan_cache_mode = force_generic_plan".to_owned(),
        format!("PREPARE compactor_plan_probe AS {}", statement.sql),
    ] {
        txn.execute_unprepared(&sql)
            .await
            .map_err(StoreError::db(op))?;
    }
    let rows = txn
        .query_all_raw(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            format!(
                "EXPLAIN (ANALYZE, BUFFERS) EXECUTE compactor_plan_probe({})",
                values.join(", ")
            ),
        ))
        .await
        .map_err(StoreError::db(op))?;
    txn.execute_unprepared("DEALLOCATE compactor_plan_probe")
        .await
        .map_err(StoreError::db(op))?;
    txn.commit().await.map_err(StoreError::db(op))?;
    plan_text(&rows, op)
}

/// The text of an `EXPLAIN` (one line per row), for the store's plan
/// probes.
pub(crate) fn plan_text(
    rows: &[sea_orm::QueryResult],
    op: &'static str,
) -> Result<String, StoreError> {
    let lines = rows
        .iter()
        .map(|row| row.try_get_by_index::<String>(0))
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::db(op))?;
    Ok(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_saturate_instead_of_wrapping() {
        assert_eq!(to_i64(u64::MAX), i64::MAX);
        assert_eq!(to_u64(-5), 0);
        assert_eq!(to_i32(u32::MAX), i32::MAX);
        assert_eq!(to_u32(-1), 0);
    }

    #[test]
    fn every_role_round_trips() {
        for role in [Role::System, Role::User, Role::Assistant, Role::Tool] {
            assert_eq!(role_from_str(role.as_str()), Some(role));
        }
        assert_eq!(role_from_str("robot"), None);
    }
}
