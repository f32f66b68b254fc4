//! The LLM clients' metrics (ARCHITECTURE.md §6): their names, help texts,
//! and the only place they are recorded. Labels are bounded: `provider`
//! (openai, anthropic), `outcome` ([`OUTCOMES`]), `direction` (input,
//! output), `reason` ([`Rejection::LABELS`] for rejected answers,
//! [`DegradedReason`] for fallbacks), `problem` ([`ParseProblem::LABELS`])
//! — never error text, never the answer, never the key.

use std::time::Duration;

use compactor_producer::metrics::{Family, Kind};
use compactor_producer::store::DegradedReason;
use compactor_shared::parse::{ParseProblem, Rejection};

use super::completion::TokenUsage;

/// Counter: HTTP requests to the LLM, by `provider` and `outcome`.
pub const LLM_REQUESTS_TOTAL: &str = "compactor_llm_requests_total";
/// Histogram: duration of one HTTP request (reading the reply included),
/// by `provider` and `outcome`.
pub const LLM_REQUEST_SECONDS: &str = "compactor_llm_request_seconds";
/// Counter: tokens the server reported, by `provider` and `direction`.
pub const LLM_TOKENS_TOTAL: &str = "compactor_llm_tokens_total";
/// Counter: requests sent again after a retryable failure, by `provider`.
pub const LLM_RETRIES_TOTAL: &str = "compactor_llm_retries_total";

/// Counter: answers the checks rejected (the summary is not used), by
/// `provider` and `reason`.
pub const LLM_ANSWERS_REJECTED_TOTAL: &str = "compactor_llm_answers_rejected_total";
/// Counter: deviations from the answer format that were worked around, by
/// `provider` and `problem`.
pub const LLM_ANSWER_PROBLEMS_TOTAL: &str = "compactor_llm_answer_problems_total";
/// Gauge: 1 while the provider is healthy, 0 while it is marked unhealthy
/// (requests paused until a probe is answered), by `provider`.
pub const LLM_HEALTHY: &str = "compactor_llm_healthy";
/// Counter: compactions the extractive summarizer wrote instead of the
/// LLM (degraded runs), by `provider` and `reason`.
pub const LLM_FALLBACKS_TOTAL: &str = "compactor_llm_fallbacks_total";

/// Every value of the `outcome` label.
pub const OUTCOMES: [&str; 10] = [
    "ok",
    "rate_limited",
    "server_error",
    "timeout",
    "connect",
    "context_length",
    "bad_request",
    "auth",
    "malformed",
    "empty",
];

/// The LLM clients' families (see `compactor_producer::metrics::FAMILIES`
/// for the others).
pub const FAMILIES: &[Family] = &[
    Family {
        name: LLM_REQUESTS_TOTAL,
        kind: Kind::Counter,
        help: "HTTP requests to the LLM, by outcome",
    },
    Family {
        name: LLM_REQUEST_SECONDS,
        kind: Kind::Histogram,
        help: "Duration of one HTTP request to the LLM, by outcome",
    },
    Family {
        name: LLM_TOKENS_TOTAL,
        kind: Kind::Counter,
        help: "Tokens the LLM reported, by direction",
    },
    Family {
        name: LLM_RETRIES_TOTAL,
        kind: Kind::Counter,
        help: "LLM requests sent again after a retryable failure",
    },
    Family {
        name: LLM_ANSWERS_REJECTED_TOTAL,
        kind: Kind::Counter,
        help: "LLM answers rejected by the checks, by reason",
    },
    Family {
        name: LLM_ANSWER_PROBLEMS_TOTAL,
        kind: Kind::Counter,
        help: "Deviations from the answer format that were worked around, by problem",
    },
    Family {
        name: LLM_HEALTHY,
        kind: Kind::Gauge,
        help: "1 while the LLM provider is healthy, 0 while requests are paused until a probe is answered",
    },
    Family {
        name: LLM_FALLBACKS_TOTAL,
        kind: Kind::Counter,
        help: "Compactions summarized offline instead of by the LLM (degraded), by reason",
    },
];

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
