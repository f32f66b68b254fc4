//! How a compaction job ended (`compactor_compactions_total` and its
//! figures), and the announcement of its end failing.

use compactor_producer::events::catalogue::{
    names, CompactionOutcome, EvidenceOutcome, NotifyOp, TokenStage,
};
use compactor_producer::queue::QueueError;
use compactor_producer::store::ConflictReason;
use tracing::{info, warn};

use super::InternalEvent;

/// `compactor_compactions_total` for one ending (only a commit can be
/// degraded).
fn count(domain: &str, outcome: CompactionOutcome, degraded: bool) {
    let degraded = if degraded { "true" } else { "false" };
    metrics::counter!(names::COMPACTIONS_TOTAL, "domain" => domain.to_owned(), "outcome" => outcome.as_str(), "degraded" => degraded)
        .increment(1);
}

/// A new summary was committed: the "compacted" line and the figures come
/// from these fields.
#[derive(Debug)]
pub(crate) struct Compacted<'a> {
    pub domain: &'a str,
    /// The workstream's version after the commit.
    pub version: i64,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub messages_compacted: u64,
    pub chunks: u32,
    pub rollups: u32,
    /// Candidate evidence lines kept for the next context, and left out.
    pub evidence_kept: u64,
    pub evidence_dropped: u64,
    /// The offline summarizer stood in for the LLM.
    pub degraded: bool,
    /// The workstream ended below its trigger (`no_progress` otherwise).
    pub progress: bool,
    pub duration_ms: i64,
}

impl InternalEvent for Compacted<'_> {
    fn emit(&self) {
        info!(
            version = self.version,
            tokens_before = self.tokens_before,
            tokens_after = self.tokens_after,
            messages = self.messages_compacted,
            chunks = self.chunks,
            evidence_kept = self.evidence_kept,
            evidence_dropped = self.evidence_dropped,
            degraded = self.degraded,
            progress = self.progress,
            duration_ms = self.duration_ms,
            "compacted"
        );
        let outcome = if self.progress {
            CompactionOutcome::Committed
        } else {
            CompactionOutcome::NoProgress
        };
        count(self.domain, outcome, self.degraded);
        let domain = || self.domain.to_owned();
        metrics::histogram!(names::COMPACTION_TOKENS, "domain" => domain(), "stage" => TokenStage::Before.as_str())
            .record(self.tokens_before as f64);
        metrics::histogram!(names::COMPACTION_TOKENS, "domain" => domain(), "stage" => TokenStage::After.as_str())
            .record(self.tokens_after as f64);
        metrics::histogram!(names::COMPACTION_MESSAGES, "domain" => domain())
            .record(self.messages_compacted as f64);
        metrics::histogram!(names::COMPACTION_CHUNKS, "domain" => domain())
            .record(f64::from(self.chunks));
        metrics::histogram!(names::COMPACTION_ROLLUPS, "domain" => domain())
            .record(f64::from(self.rollups));
        for (outcome, lines) in [
            (EvidenceOutcome::Kept, self.evidence_kept),
            (EvidenceOutcome::Dropped, self.evidence_dropped),
        ] {
            metrics::histogram!(names::COMPACTION_EVIDENCE_LINES, "domain" => domain(), "outcome" => outcome.as_str())
                .record(lines as f64);
        }
    }
}

/// Nothing to do (under the trigger, or nothing may be cut). Metrics only:
/// the attempt logged why, with its own reason, where it decided.
#[derive(Debug)]
pub(crate) struct CompactionSkipped<'a> {
    pub domain: &'a str,
}

impl InternalEvent for CompactionSkipped<'_> {
    fn emit(&self) {
        count(self.domain, CompactionOutcome::Skipped, false);
    }
}

/// The fence refused the commit: someone else's won, nothing written.
#[derive(Debug)]
pub(crate) struct CompactionConflicted<'a> {
    pub domain: &'a str,
    pub reason: &'a ConflictReason,
}

impl InternalEvent for CompactionConflicted<'_> {
    fn emit(&self) {
        count(self.domain, CompactionOutcome::Conflict, false);
        metrics::counter!(names::FENCE_CONFLICTS_TOTAL, "domain" => self.domain.to_owned())
            .increment(1);
        warn!(reason = ?self.reason, "commit refused by the fence; nothing written");
    }
}

/// The compaction failed; `entity_lease_lost`: because its entity lease
/// was lost. Metrics only: the runtime logs the failure once, with what
/// it does next (retry, dead letter).
#[derive(Debug)]
pub(crate) struct CompactionFailed<'a> {
    pub domain: &'a str,
    pub entity_lease_lost: bool,
}

impl InternalEvent for CompactionFailed<'_> {
    fn emit(&self) {
        count(self.domain, CompactionOutcome::Failed, false);
        if self.entity_lease_lost {
            metrics::counter!(names::ENTITY_LEASES_LOST_TOTAL, "domain" => self.domain.to_owned())
                .increment(1);
        }
    }
}

/// The release announcement could not be published: waiters still wake
/// at the lease deadline or their timeout.
#[derive(Debug)]
pub(crate) struct ReleaseNotAnnounced<'a> {
    pub error: &'a QueueError,
}

impl InternalEvent for ReleaseNotAnnounced<'_> {
    fn emit(&self) {
        warn!(error = %self.error, "could not announce the release");
        metrics::counter!(names::NOTIFY_ERRORS_TOTAL, "op" => NotifyOp::Publish.as_str())
            .increment(1);
    }
}

#[cfg(test)]
mod tests {
    use compactor_producer::events::capture::{capture, Value};

    use super::*;

    const D: &str = "chat";

    fn compacted(progress: bool, degraded: bool) -> Compacted<'static> {
        Compacted {
            domain: D,
            version: 3,
            tokens_before: 9_000,
            tokens_after: 2_000,
            messages_compacted: 40,
            chunks: 2,
            rollups: 1,
            evidence_kept: 6,
            evidence_dropped: 25,
            degraded,
            progress,
            duration_ms: 120,
        }
    }

    #[test]
    fn a_commit_counts_its_outcome_and_records_its_figures() {
        let recorded = capture(|| {
            compacted(true, false).emit();
            compacted(false, true).emit();
        });
        recorded.assert_one(
            names::COMPACTIONS_TOTAL,
            &[
                ("domain", D),
                ("outcome", "committed"),
                ("degraded", "false"),
            ],
            Value::Counter(1),
        );
        recorded.assert_one(
            names::COMPACTIONS_TOTAL,
            &[
                ("domain", D),
                ("outcome", "no_progress"),
                ("degraded", "true"),
            ],
            Value::Counter(1),
        );
        recorded.assert_one(
            names::COMPACTION_TOKENS,
            &[("domain", D), ("stage", "before")],
            Value::Histogram(vec![9_000.0, 9_000.0]),
        );
        recorded.assert_one(
            names::COMPACTION_TOKENS,
            &[("domain", D), ("stage", "after")],
            Value::Histogram(vec![2_000.0, 2_000.0]),
        );
        recorded.assert_one(
            names::COMPACTION_MESSAGES,
            &[("domain", D)],
            Value::Histogram(vec![40.0, 40.0]),
        );
        recorded.assert_one(
            names::COMPACTION_CHUNKS,
            &[("domain", D)],
            Value::Histogram(vec![2.0, 2.0]),
        );
        recorded.assert_one(
            names::COMPACTION_ROLLUPS,
            &[("domain", D)],
            Value::Histogram(vec![1.0, 1.0]),
        );
        recorded.assert_one(
            names::COMPACTION_EVIDENCE_LINES,
            &[("domain", D), ("outcome", "kept")],
            Value::Histogram(vec![6.0, 6.0]),
        );
        recorded.assert_one(
            names::COMPACTION_EVIDENCE_LINES,
            &[("domain", D), ("outcome", "dropped")],
            Value::Histogram(vec![25.0, 25.0]),
        );
        assert_eq!(recorded.len(), 9);
    }

    #[test]
    fn skips_conflicts_and_failures_count_once_each() {
        let recorded = capture(|| {
            CompactionSkipped { domain: D }.emit();
            CompactionConflicted {
                domain: D,
                reason: &ConflictReason::LeaseLost,
            }
            .emit();
            for entity_lease_lost in [false, true] {
                CompactionFailed {
                    domain: D,
                    entity_lease_lost,
                }
                .emit();
            }
        });
        for (outcome, n) in [("skipped", 1), ("conflict", 1), ("failed", 2)] {
            recorded.assert_one(
                names::COMPACTIONS_TOTAL,
                &[("domain", D), ("outcome", outcome), ("degraded", "false")],
                Value::Counter(n),
            );
        }
        recorded.assert_one(
            names::FENCE_CONFLICTS_TOTAL,
            &[("domain", D)],
            Value::Counter(1),
        );
        recorded.assert_one(
            names::ENTITY_LEASES_LOST_TOTAL,
            &[("domain", D)],
            Value::Counter(1),
        );
        assert_eq!(recorded.len(), 5);
    }

    #[test]
    fn a_failed_announcement_counts_under_publish() {
        let error = QueueError::Protocol {
            op: "publish",
            detail: "refused".to_owned(),
        };
        let recorded = capture(|| ReleaseNotAnnounced { error: &error }.emit());
        recorded.assert_one(
            names::NOTIFY_ERRORS_TOTAL,
            &[("op", "publish")],
            Value::Counter(1),
        );
        assert_eq!(recorded.len(), 1);
    }
}
