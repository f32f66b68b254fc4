//! Prompts for the summarizer. (STUB)

use crate::state::WorkstreamState;
use crate::summary::Summary;

/// What one summarization call is given.
#[derive(Debug, Clone, Copy)]
pub struct CompactionInput<'a> {
    /// The summary so far (from earlier compactions or earlier chunks).
    pub previous_summary: Option<&'a Summary>,
    /// The workstream state before this compaction.
    pub state: &'a WorkstreamState,
    /// Transcript text of the messages to fold in (one chunk).
    pub new_messages: &'a str,
    /// Operator instructions for a manual compaction.
    pub instructions: Option<&'a str>,
    /// The span ends in the middle of a turn whose rest is kept verbatim.
    pub split_turn: bool,
}

/// A ready request for a tool-less summarizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub system: String,
    pub user: String,
    pub max_output_tokens: u64,
}
