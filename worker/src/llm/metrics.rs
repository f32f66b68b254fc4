//! The LLM clients' metric families (ARCHITECTURE.md §6) under their old
//! paths. Their names and help texts are in the one catalogue,
//! `compactor_producer::events::catalogue`; they are recorded by the
//! events of `crate::events` (`llm`), which also documents their labels.

use compactor_producer::events::catalogue::LlmOutcome;
use compactor_producer::store::DegradedReason;

use crate::events::{FellBack, InternalEvent};

// The names, help texts, label names and `outcome` values live in the one
// catalogue (`compactor_producer::events::catalogue`); re-exported here
// under their old paths.
pub use compactor_producer::events::catalogue::names::{
    LLM_ANSWERS_REJECTED_TOTAL, LLM_ANSWER_PROBLEMS_TOTAL, LLM_FALLBACKS_TOTAL, LLM_HEALTHY,
    LLM_REQUESTS_TOTAL, LLM_REQUEST_SECONDS, LLM_RETRIES_TOTAL, LLM_TOKENS_TOTAL,
};
/// The LLM clients' families (see `compactor_producer::metrics::FAMILIES`
/// for the others).
pub use compactor_producer::events::catalogue::LLM_FAMILIES as FAMILIES;

/// Every value of the `outcome` label.
pub const OUTCOMES: [&str; 10] = LlmOutcome::LABELS;

/// Registers the help texts with the installed recorder.
pub fn describe() {
    compactor_producer::metrics::describe_families(FAMILIES);
}

/// A compaction fell back to the extractive summarizer (the old path of
/// `events::FellBack`).
pub fn fell_back(provider: &'static str, reason: DegradedReason) {
    FellBack { provider, reason }.emit();
}
