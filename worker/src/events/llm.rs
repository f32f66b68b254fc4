//! The LLM clients' requests, tokens, retries, answers, health and
//! fallbacks (ARCHITECTURE.md §6). Labels are bounded: `provider`
//! (openai, anthropic), `outcome` (`LlmOutcome`), `direction`
//! (`TokenDirection`), `reason` (`Rejection::LABELS` for rejected answers,
//! `DegradedReason` for fallbacks), `problem` (`ParseProblem::LABELS`) —
//! never error text, never the answer, never the key. The clients write
//! their log lines themselves, with request details these events do not
//! carry; the events record the metrics.

use std::time::Duration;

use compactor_producer::events::catalogue::{names, LlmOutcome, TokenDirection};
use compactor_producer::store::DegradedReason;

use super::InternalEvent;
use crate::llm::completion::TokenUsage;

/// One HTTP attempt ended with `outcome` after `elapsed`.
#[derive(Debug)]
pub(crate) struct LlmRequestFinished {
    pub provider: &'static str,
    pub outcome: LlmOutcome,
    pub elapsed: Duration,
}

impl InternalEvent for LlmRequestFinished {
    fn emit(&self) {
        metrics::counter!(names::LLM_REQUESTS_TOTAL, "provider" => self.provider, "outcome" => self.outcome.as_str())
            .increment(1);
        metrics::histogram!(names::LLM_REQUEST_SECONDS, "provider" => self.provider, "outcome" => self.outcome.as_str())
            .record(self.elapsed.as_secs_f64());
    }
}

/// The server reported `usage`.
#[derive(Debug)]
pub(crate) struct LlmTokensUsed {
    pub provider: &'static str,
    pub usage: TokenUsage,
}

impl InternalEvent for LlmTokensUsed {
    fn emit(&self) {
        metrics::counter!(names::LLM_TOKENS_TOTAL, "provider" => self.provider, "direction" => TokenDirection::Input.as_str())
            .increment(self.usage.input_tokens);
        metrics::counter!(names::LLM_TOKENS_TOTAL, "provider" => self.provider, "direction" => TokenDirection::Output.as_str())
            .increment(self.usage.output_tokens);
    }
}

/// A failed request is about to be sent again.
#[derive(Debug)]
pub(crate) struct LlmRetried {
    pub provider: &'static str,
}

impl InternalEvent for LlmRetried {
    fn emit(&self) {
        metrics::counter!(names::LLM_RETRIES_TOTAL, "provider" => self.provider).increment(1);
    }
}

/// An answer was rejected for `reason` (`Rejection::label`).
#[derive(Debug)]
pub(crate) struct AnswerRejected {
    pub provider: &'static str,
    pub reason: &'static str,
}

impl InternalEvent for AnswerRejected {
    fn emit(&self) {
        metrics::counter!(names::LLM_ANSWERS_REJECTED_TOTAL, "provider" => self.provider, "reason" => self.reason)
            .increment(1);
    }
}

/// A format deviation (`ParseProblem::label`) was worked around.
#[derive(Debug)]
pub(crate) struct AnswerProblem {
    pub provider: &'static str,
    pub problem: &'static str,
}

impl InternalEvent for AnswerProblem {
    fn emit(&self) {
        metrics::counter!(names::LLM_ANSWER_PROBLEMS_TOTAL, "provider" => self.provider, "problem" => self.problem)
            .increment(1);
    }
}

/// The provider turned healthy (`true`) or unhealthy.
#[derive(Debug)]
pub(crate) struct LlmHealthChanged {
    pub provider: &'static str,
    pub healthy: bool,
}

impl InternalEvent for LlmHealthChanged {
    fn emit(&self) {
        metrics::gauge!(names::LLM_HEALTHY, "provider" => self.provider).set(if self.healthy {
            1.0
        } else {
            0.0
        });
    }
}

/// A compaction fell back to the extractive summarizer for `reason`.
#[derive(Debug)]
pub(crate) struct FellBack {
    pub provider: &'static str,
    pub reason: DegradedReason,
}

impl InternalEvent for FellBack {
    fn emit(&self) {
        metrics::counter!(names::LLM_FALLBACKS_TOTAL, "provider" => self.provider, "reason" => self.reason.as_str())
            .increment(1);
    }
}

#[cfg(test)]
mod tests {
    use compactor_producer::events::capture::{capture, Value};
    use compactor_shared::parse::{ParseProblem, Rejection};

    use super::*;

    const P: &str = "openai";

    #[test]
    fn requests_tokens_and_retries_count_per_provider() {
        let recorded = capture(|| {
            LlmRequestFinished {
                provider: P,
                outcome: LlmOutcome::RateLimited,
                elapsed: Duration::from_millis(250),
            }
            .emit();
            LlmTokensUsed {
                provider: P,
                usage: TokenUsage {
                    input_tokens: 100,
                    output_tokens: 20,
                },
            }
            .emit();
            LlmRetried { provider: P }.emit();
        });
        let outcome = [("provider", P), ("outcome", "rate_limited")];
        recorded.assert_one(names::LLM_REQUESTS_TOTAL, &outcome, Value::Counter(1));
        recorded.assert_one(
            names::LLM_REQUEST_SECONDS,
            &outcome,
            Value::Histogram(vec![0.25]),
        );
        recorded.assert_one(
            names::LLM_TOKENS_TOTAL,
            &[("provider", P), ("direction", "input")],
            Value::Counter(100),
        );
        recorded.assert_one(
            names::LLM_TOKENS_TOTAL,
            &[("provider", P), ("direction", "output")],
            Value::Counter(20),
        );
        recorded.assert_one(
            names::LLM_RETRIES_TOTAL,
            &[("provider", P)],
            Value::Counter(1),
        );
        assert_eq!(recorded.len(), 5);
    }

    #[test]
    fn answers_health_and_fallbacks_are_recorded() {
        let recorded = capture(|| {
            AnswerRejected {
                provider: P,
                reason: Rejection::LABELS[0],
            }
            .emit();
            AnswerProblem {
                provider: P,
                problem: ParseProblem::LABELS[0],
            }
            .emit();
            LlmHealthChanged {
                provider: P,
                healthy: false,
            }
            .emit();
            FellBack {
                provider: P,
                reason: DegradedReason::ALL[0],
            }
            .emit();
        });
        recorded.assert_one(
            names::LLM_ANSWERS_REJECTED_TOTAL,
            &[("provider", P), ("reason", Rejection::LABELS[0])],
            Value::Counter(1),
        );
        recorded.assert_one(
            names::LLM_ANSWER_PROBLEMS_TOTAL,
            &[("provider", P), ("problem", ParseProblem::LABELS[0])],
            Value::Counter(1),
        );
        recorded.assert_one(names::LLM_HEALTHY, &[("provider", P)], Value::Gauge(0.0));
        recorded.assert_one(
            names::LLM_FALLBACKS_TOTAL,
            &[("provider", P), ("reason", DegradedReason::ALL[0].as_str())],
            Value::Counter(1),
        );
        assert_eq!(recorded.len(), 4);
    }
}
