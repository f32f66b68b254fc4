//! The LLM clients' metrics (ARCHITECTURE.md §6): the only place they are
//! recorded. Their names and help texts are in the one catalogue,
//! `compactor_producer::events::catalogue`. Labels are bounded: `provider`
//! (openai, anthropic), `outcome` ([`OUTCOMES`]), `direction` (input,
//! output), `reason` ([`Rejection::LABELS`] for rejected answers,
//! [`DegradedReason`] for fallbacks), `problem` ([`ParseProblem::LABELS`])
//! — never error text, never the answer, never the key.

use std::time::Duration;

use compactor_producer::events::catalogue::LlmOutcome;
use compactor_producer::store::DegradedReason;
use compactor_shared::parse::{ParseProblem, Rejection};

use super::completion::TokenUsage;

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

/// Creates this provider's series at zero (every outcome, both
/// directions), so they are scraped before the first request.
pub(crate) fn register_known_series(provider: &'static str) {
    for outcome in OUTCOMES {
        metrics::counter!(LLM_REQUESTS_TOTAL, "provider" => provider, "outcome" => outcome)
            .increment(0);
    }
    for direction in ["input", "output"] {
        metrics::counter!(LLM_TOKENS_TOTAL, "provider" => provider, "direction" => direction)
            .increment(0);
    }
    metrics::counter!(LLM_RETRIES_TOTAL, "provider" => provider).increment(0);
    for reason in Rejection::LABELS {
        metrics::counter!(LLM_ANSWERS_REJECTED_TOTAL, "provider" => provider, "reason" => reason)
            .increment(0);
    }
    for problem in ParseProblem::LABELS {
        metrics::counter!(LLM_ANSWER_PROBLEMS_TOTAL, "provider" => provider, "problem" => problem)
            .increment(0);
    }
    for reason in DegradedReason::ALL {
        metrics::counter!(LLM_FALLBACKS_TOTAL, "provider" => provider, "reason" => reason.as_str())
            .increment(0);
    }
    // A client starts healthy; a process whose client is unhealthy at
    // registration (none: registration comes first) would be corrected by
    // the next transition.
    metrics::gauge!(LLM_HEALTHY, "provider" => provider).set(1.0);
}

/// One HTTP attempt ended with `outcome` after `elapsed`.
pub(crate) fn request_finished(provider: &'static str, outcome: &'static str, elapsed: Duration) {
    metrics::counter!(LLM_REQUESTS_TOTAL, "provider" => provider, "outcome" => outcome)
        .increment(1);
    metrics::histogram!(LLM_REQUEST_SECONDS, "provider" => provider, "outcome" => outcome)
        .record(elapsed.as_secs_f64());
}

/// The server reported `usage`.
pub(crate) fn tokens_used(provider: &'static str, usage: TokenUsage) {
    metrics::counter!(LLM_TOKENS_TOTAL, "provider" => provider, "direction" => "input")
        .increment(usage.input_tokens);
    metrics::counter!(LLM_TOKENS_TOTAL, "provider" => provider, "direction" => "output")
        .increment(usage.output_tokens);
}

/// A failed request is about to be sent again.
pub(crate) fn retried(provider: &'static str) {
    metrics::counter!(LLM_RETRIES_TOTAL, "provider" => provider).increment(1);
}

/// An answer was rejected for `reason` ([`Rejection::label`]).
pub(crate) fn answer_rejected(provider: &'static str, reason: &'static str) {
    metrics::counter!(LLM_ANSWERS_REJECTED_TOTAL, "provider" => provider, "reason" => reason)
        .increment(1);
}

/// A format deviation ([`ParseProblem::label`]) was worked around.
pub(crate) fn answer_problem(provider: &'static str, problem: &'static str) {
    metrics::counter!(LLM_ANSWER_PROBLEMS_TOTAL, "provider" => provider, "problem" => problem)
        .increment(1);
}

/// The provider turned healthy (`true`) or unhealthy.
pub(crate) fn health_changed(provider: &'static str, healthy: bool) {
    metrics::gauge!(LLM_HEALTHY, "provider" => provider).set(if healthy { 1.0 } else { 0.0 });
}

/// A compaction fell back to the extractive summarizer.
pub fn fell_back(provider: &'static str, reason: DegradedReason) {
    metrics::counter!(LLM_FALLBACKS_TOTAL, "provider" => provider, "reason" => reason.as_str())
        .increment(1);
}
