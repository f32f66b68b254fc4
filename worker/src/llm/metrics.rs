//! The LLM clients' metrics (ARCHITECTURE.md §6): their names, help texts,
//! and the only place they are recorded. Labels are bounded: `provider`
//! (openai, anthropic), `outcome` ([`OUTCOMES`]), `direction` (input,
//! output) — never error text, never the key.

use std::time::Duration;

use compactor_producer::metrics::{Family, Kind};

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
