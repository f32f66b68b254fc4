//! Recall of compacted history: find the verbatim messages of a workstream
//! that match a user's words, newest first, each with the compaction run
//! that folded it (if one did).
//!
//! Compaction never deletes a message; it only stops showing it to the
//! model. Recall makes those messages findable again, through the
//! full-text indexes of migration `m20261127_000002_add_message_search`
//! (PostgreSQL `tsvector` + GIN, SQLite FTS5).
//!
//! A query is parsed once into a [`RecallQuery`] (parse, don't validate):
//! whitespace-separated terms, each kept unless it is only ASCII
//! punctuation, all of which must match (AND). User text never reaches a full-text
//! query language as syntax: PostgreSQL gets the terms through
//! `plainto_tsquery`, which has no operators; SQLite gets each term as an
//! FTS5 string (double-quoted, quotes doubled), in which `NEAR`, `*`, `:`,
//! `^` and parentheses are plain text.
//!
//! Results are ordered by recency (message id, descending), not by rank:
//! ranking needs every match scored before the first is returned, which at
//! 1M messages made a common word take ~100 ms; newest-first with a
//! `LIMIT` lets PostgreSQL walk the workstream's `(workstream_id, id)`
//! index backwards and stop early for a common word, and use the GIN index
//! for a rare one (docs/BENCHMARK_NOTES.md).

use chrono::{DateTime, Utc};
use compactor_shared::{EntityKey, MessageId, Part, Role};
use serde::{Deserialize, Serialize};

use crate::client::{ClientError, Compactor};
use crate::store::Store;

/// Longest query accepted, in characters (as the API document's
/// `maxLength` counts them).
pub const MAX_QUERY_CHARS: usize = 512;
/// Most terms a query may have (every term is one more index lookup).
pub const MAX_QUERY_TERMS: usize = 16;
/// Results when no limit is given.
pub const DEFAULT_RECALL_LIMIT: u32 = 20;
/// Most results one recall returns.
pub const MAX_RECALL_LIMIT: u32 = 100;

/// A user's recall query, parsed: 1 to [`MAX_QUERY_TERMS`] terms, each
/// with a character other than ASCII punctuation, and no whitespace or
/// control character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallQuery {
    terms: Vec<String>,
}

/// Why a query was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecallQueryError {
    #[error("q: give at least one word to search for")]
    Empty,
    #[error("q: {chars} characters is over the maximum of {MAX_QUERY_CHARS}")]
    TooLong { chars: usize },
    #[error("q: {terms} terms is over the maximum of {MAX_QUERY_TERMS}")]
    TooManyTerms { terms: usize },
}

impl RecallQuery {
    /// Parses `q`: split on whitespace, control characters treated as
    /// whitespace, terms made only of ASCII punctuation dropped (the
    /// operators of full-text engines are ASCII: `"`, `*`, `(`, `:`, `^`,
    /// `-`…). Any other term is searched as written, and one the index
    /// has no token for (`«`, a private-use character) simply matches
    /// nothing: the rule is one the API document can state as a pattern,
    /// so a client can tell a valid query from its schema. Refuses a query over
    /// [`MAX_QUERY_CHARS`], with no term left, or with more than
    /// [`MAX_QUERY_TERMS`] terms.
    pub fn parse(q: &str) -> Result<RecallQuery, RecallQueryError> {
        let chars = q.chars().count();
        if chars > MAX_QUERY_CHARS {
            return Err(RecallQueryError::TooLong { chars });
        }
        let terms: Vec<String> = q
            .split(|c: char| c.is_whitespace() || c.is_control())
            .filter(|t| !t.is_empty() && !t.chars().all(|c| c.is_ascii_punctuation()))
            .map(str::to_owned)
            .collect();
        match terms.len() {
            0 => Err(RecallQueryError::Empty),
            n if n > MAX_QUERY_TERMS => Err(RecallQueryError::TooManyTerms { terms: n }),
            _ => Ok(RecallQuery { terms }),
        }
    }

    /// The terms, in the order given.
    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    /// The text handed to PostgreSQL's `plainto_tsquery('simple', …)` (as a
    /// bound parameter): the terms, space-separated.
    pub fn postgres_text(&self) -> String {
        self.terms.join(" ")
    }

    /// An FTS5 `MATCH` expression: every term as a quoted string (a
    /// phrase of its tokens), implicitly AND-ed. Inside quotes FTS5 knows
    /// no operator; a quote is escaped by doubling it.
    pub fn fts5_match(&self) -> String {
        self.terms
            .iter()
            .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// How many results: 1 to [`MAX_RECALL_LIMIT`], [`DEFAULT_RECALL_LIMIT`]
/// when not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecallLimit(u32);

/// A limit out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("limit: {0} is not between 1 and {MAX_RECALL_LIMIT}")]
pub struct RecallLimitError(pub u64);

impl RecallLimit {
    pub fn new(limit: u64) -> Result<RecallLimit, RecallLimitError> {
        match u32::try_from(limit) {
            Ok(l) if (1..=MAX_RECALL_LIMIT).contains(&l) => Ok(RecallLimit(l)),
            _ => Err(RecallLimitError(limit)),
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

impl Default for RecallLimit {
    fn default() -> RecallLimit {
        RecallLimit(DEFAULT_RECALL_LIMIT)
    }
}

/// The compaction run that folded a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FoldedBy {
    /// `compaction_runs.id` of the run.
    pub run_id: i64,
    /// When the run finished (committed).
    pub at: DateTime<Utc>,
}

/// One message recall found, verbatim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RecalledMessage {
    /// The message's id: the `#N` a context's exact values and user
    /// statements point at.
    pub id: MessageId,
    pub role: Role,
    pub parts: Vec<Part>,
    pub pinned: bool,
    pub created_at: DateTime<Utc>,
    /// Whether a compaction has folded the message (it is no longer in the
    /// context verbatim).
    pub compacted: bool,
    /// The run that folded it (the committed run with the lowest watermark
    /// at or above it); `null` while un-compacted (and for a message folded
    /// before runs recorded their watermark, when no later run's covers it).
    pub folded_by: Option<FoldedBy>,
}

/// What a recall returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Recall {
    /// The query's terms as searched (all must match).
    pub terms: Vec<String>,
    /// Matching messages, newest first, at most `limit`.
    pub messages: Vec<RecalledMessage>,
}

impl Compactor {
    /// The newest messages of `key` matching `query` (all its terms),
    /// compacted or not, at most `limit`. [`ClientError::UnknownWorkstream`]
    /// when the workstream does not exist.
    pub async fn recall(
        &self,
        key: &EntityKey,
        query: &RecallQuery,
        limit: RecallLimit,
    ) -> Result<Recall, ClientError> {
        recall_in(self.store(), key, query, limit).await
    }
}

/// [`Compactor::recall`] with the database alone (the CLI's: recall needs
/// no Redis).
pub async fn recall_in(
    store: &Store,
    key: &EntityKey,
    query: &RecallQuery,
    limit: RecallLimit,
) -> Result<Recall, ClientError> {
    let ws = store
        .workstream(key)
        .await?
        .ok_or_else(|| ClientError::UnknownWorkstream(key.clone()))?;
    let messages = store.recall(ws.id, query, limit).await?;
    Ok(Recall {
        terms: query.terms().to_vec(),
        messages,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn splits_terms_and_drops_operator_only_ones() {
        let q = RecallQuery::parse("  INV-2024-0042 ( * NEAR \"x y\" -- ").unwrap();
        assert_eq!(q.terms(), ["INV-2024-0042", "NEAR", "\"x", "y\""]);
        assert_eq!(q.postgres_text(), "INV-2024-0042 NEAR \"x y\"");
    }

    #[test]
    fn fts5_terms_are_quoted_strings_with_quotes_doubled() {
        let q = RecallQuery::parse("a\"b NEAR(c) col:d e*").unwrap();
        assert_eq!(q.fts5_match(), "\"a\"\"b\" \"NEAR(c)\" \"col:d\" \"e*\"");
    }

    #[test]
    fn refuses_empty_long_and_wordless_queries() {
        assert_eq!(RecallQuery::parse(""), Err(RecallQueryError::Empty));
        assert_eq!(RecallQuery::parse(" \t\n"), Err(RecallQueryError::Empty));
        assert_eq!(
            RecallQuery::parse("* ( ) \" :"),
            Err(RecallQueryError::Empty)
        );
        let long = "a".repeat(MAX_QUERY_CHARS + 1);
        assert_eq!(
            RecallQuery::parse(&long),
            Err(RecallQueryError::TooLong { chars: long.len() })
        );
        let many = vec!["w"; MAX_QUERY_TERMS + 1].join(" ");
        assert_eq!(
            RecallQuery::parse(&many),
            Err(RecallQueryError::TooManyTerms {
                terms: MAX_QUERY_TERMS + 1
            })
        );
    }

    #[test]
    fn only_ascii_punctuation_is_dropped() {
        let q = RecallQuery::parse("\u{E000} « -- x_y ™").unwrap();
        assert_eq!(q.terms(), ["\u{E000}", "«", "x_y", "™"]);
        let cjk = "東".repeat(MAX_QUERY_CHARS);
        assert!(
            RecallQuery::parse(&cjk).is_ok(),
            "512 characters, 1,536 bytes"
        );
    }

    #[test]
    fn control_characters_split_terms_and_non_ascii_is_kept() {
        let q = RecallQuery::parse("Müller\u{0}東京\u{7}x").unwrap();
        assert_eq!(q.terms(), ["Müller", "東京", "x"]);
    }

    #[test]
    fn limit_is_bounded() {
        assert_eq!(RecallLimit::default().get(), DEFAULT_RECALL_LIMIT);
        assert_eq!(RecallLimit::new(100).unwrap().get(), 100);
        assert!(RecallLimit::new(0).is_err());
        assert!(RecallLimit::new(101).is_err());
        assert!(RecallLimit::new(u64::MAX).is_err());
    }
}
