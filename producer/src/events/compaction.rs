//! The event announced when a compaction ends: what a chat UI shows as
//! "context compacted" (tokens before and after, how much was folded, by
//! what trigger, whether the offline summarizer stood in for the LLM), and
//! what wakes chat requests waiting on the entity.

use serde::{Deserialize, Serialize};

/// How the run that held the entity ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum EventOutcome {
    /// A new summary was committed.
    Compacted,
    /// Nothing to do (under the threshold, or too few messages).
    Skipped,
    /// The attempt failed; the lease was released (it may be retried).
    Failed,
    /// Someone else's commit won; this run wrote nothing.
    Conflict,
}

/// Published on the entity's release channel when its lease is released.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompactionEvent {
    pub domain: String,
    pub entity_id: String,
    pub outcome: EventOutcome,
    /// `auto`, `reactive`, `manual` or `follow_up`.
    pub trigger: String,
    pub job_id: u64,
    pub attempt: u32,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub messages_compacted: u64,
    pub chunks: u32,
    pub rollups: u32,
    /// Candidate evidence lines kept for the next context (0 from a
    /// worker that did not count them).
    #[serde(default)]
    pub evidence_kept: u64,
    /// Candidate evidence lines left out: no budget, nothing new, or a
    /// repeat (0 likewise).
    #[serde(default)]
    pub evidence_dropped: u64,
    /// The offline summarizer stood in for a failing LLM.
    pub degraded: bool,
    /// Why a failed run failed (short, no message content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
