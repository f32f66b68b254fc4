//! Finding workstreams by domain and entity id, for the operator's
//! console: the workstreams an operator looks for by the ids they see in
//! logs and tickets, newest first (by id: the primary key's order, so an
//! unfiltered listing reads only the rows it returns rather than sorting
//! the table).

use sea_orm::sea_query::{Expr, ExprTrait, LikeExpr};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use super::entities::workstream::{Column, Entity};
use super::{Store, StoreError, WorkstreamRow};

/// Most workstreams one search returns.
pub const MAX_SEARCH_RESULTS: u64 = 200;

/// What to look for: both parts optional (none: the newest workstreams).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkstreamSearch<'a> {
    /// Exactly this domain.
    pub domain: Option<&'a str>,
    /// Entity ids starting with this (taken literally: `%` and `_` match
    /// only themselves).
    pub entity_prefix: Option<&'a str>,
}

impl Store {
    /// Workstreams matching `search`, newest first, at most `limit`
    /// (capped at [`MAX_SEARCH_RESULTS`]). Bounded like every statement
    /// by `[database] statement_timeout`.
    pub async fn search_workstreams(
        &self,
        search: &WorkstreamSearch<'_>,
        limit: u64,
    ) -> Result<Vec<WorkstreamRow>, StoreError> {
        let mut query = Entity::find();
        if let Some(domain) = search.domain.filter(|d| !d.is_empty()) {
            query = query.filter(Column::Domain.eq(domain));
        }
        if let Some(prefix) = search.entity_prefix.filter(|p| !p.is_empty()) {
            let pattern = LikeExpr::new(format!("{}%", escape_like(prefix))).escape('\\');
            query = query.filter(Expr::col(Column::EntityId).like(pattern));
        }
        query
            .order_by_desc(Column::Id)
            .limit(limit.clamp(1, MAX_SEARCH_RESULTS))
            .all(&self.db)
            .await
            .map_err(StoreError::db("search_workstreams"))?
            .into_iter()
            .map(WorkstreamRow::from_model)
            .collect()
    }
}

/// `text` with LIKE's wildcards (and the escape character) escaped by `\`.
fn escape_like(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_are_taken_literally() {
        assert_eq!(escape_like("a_b%c\\d"), "a\\_b\\%c\\\\d");
        assert_eq!(escape_like("plain-id.7"), "plain-id.7");
    }
}
