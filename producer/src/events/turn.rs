//! A `finalize_turn` decision.

use compactor_shared::payload::Trigger;
use compactor_shared::EntityKey;
use tracing::{debug, info, warn};

use super::catalogue::{names, TurnResult};
use super::InternalEvent;
use crate::client::TurnOutcome;
use crate::metrics::domain_label;

/// `finalize_turn` measured `key`'s workstream and decided `outcome`.
/// A due compaction Redis did not take is a warning (the turn is stored;
/// the context stays uncompacted until a later turn or a reconciliation
/// sweep requests it); one held back by the circuit breaker is also
/// counted in [`names::BREAKER_SKIPS_TOTAL`]. A reactive request (the
/// context no longer fits the model's window) is logged: the chat ran past
/// its trigger without a compaction catching up.
#[derive(Debug)]
pub(crate) struct TurnFinalized<'a> {
    pub key: &'a EntityKey,
    pub outcome: &'a TurnOutcome,
}

impl InternalEvent for TurnFinalized<'_> {
    fn emit(&self) {
        let result = self.outcome.result();
        let domain = domain_label(self.key.domain());
        match self.outcome {
            TurnOutcome::Unavailable { reason, .. } => {
                warn!(
                    outcome = result.as_str(),
                    error = %reason,
                    "compaction due but not requested: Redis unavailable"
                );
            }
            TurnOutcome::BreakerOpen {
                consecutive_failures,
                ..
            } => {
                debug!(
                    outcome = result.as_str(),
                    consecutive_failures, "compaction due but held back: circuit breaker open"
                );
                metrics::counter!(names::BREAKER_SKIPS_TOTAL, "domain" => domain.clone())
                    .increment(1);
            }
            TurnOutcome::Requested {
                current_tokens,
                trigger,
                ..
            } if trigger == Trigger::Reactive.label() => {
                info!(
                    outcome = result.as_str(),
                    trigger = %trigger,
                    current_tokens,
                    "the context no longer fits the model's window: reactive compaction requested"
                );
            }
            TurnOutcome::NotDue { .. } | TurnOutcome::Requested { .. } => {}
        }
        metrics::counter!(names::TURNS_TOTAL, "domain" => domain, "outcome" => result.as_str())
            .increment(1);
    }
}

impl TurnOutcome {
    /// The `outcome` label of [`names::TURNS_TOTAL`].
    pub fn result(&self) -> TurnResult {
        match self {
            TurnOutcome::NotDue { .. } => TurnResult::NotDue,
            TurnOutcome::Requested { .. } => TurnResult::Requested,
            TurnOutcome::BreakerOpen { .. } => TurnResult::BreakerOpen,
            TurnOutcome::Unavailable { .. } => TurnResult::Unavailable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::capture::{capture, Value};

    fn key() -> EntityKey {
        EntityKey::parse("events-turn-unlisted", "e1").unwrap()
    }

    #[test]
    fn every_outcome_is_counted_under_its_label_and_the_domain_allow_list() {
        let outcomes = [
            TurnOutcome::NotDue {
                current_tokens: 1,
                threshold_tokens: Some(2),
            },
            TurnOutcome::Requested {
                current_tokens: 3,
                threshold_tokens: Some(2),
                trigger: "auto".to_owned(),
                enqueue: crate::queue::EnqueueOutcome::Added { job_id: 1 },
            },
            TurnOutcome::Unavailable {
                current_tokens: 3,
                threshold_tokens: Some(2),
                reason: "Redis enqueue failed".to_owned(),
            },
        ];
        for outcome in &outcomes {
            let recorded = capture(|| {
                TurnFinalized {
                    key: &key(),
                    outcome,
                }
                .emit()
            });
            recorded.assert_one(
                names::TURNS_TOTAL,
                &[("domain", "other"), ("outcome", outcome.result().as_str())],
                Value::Counter(1),
            );
            assert_eq!(recorded.len(), 1, "{recorded:?}");
        }
    }

    #[test]
    fn a_breaker_skip_is_a_turn_and_a_skip() {
        let outcome = TurnOutcome::BreakerOpen {
            current_tokens: 3,
            consecutive_failures: 3,
        };
        let recorded = capture(|| {
            TurnFinalized {
                key: &key(),
                outcome: &outcome,
            }
            .emit()
        });
        recorded.assert_one(
            names::TURNS_TOTAL,
            &[("domain", "other"), ("outcome", "breaker_open")],
            Value::Counter(1),
        );
        recorded.assert_one(
            names::BREAKER_SKIPS_TOTAL,
            &[("domain", "other")],
            Value::Counter(1),
        );
        assert_eq!(recorded.len(), 2, "{recorded:?}");
    }
}
