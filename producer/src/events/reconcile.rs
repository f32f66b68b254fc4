//! A reconciliation sweep that found work the queue had lost.

use tracing::warn;

use super::catalogue::names;
use super::InternalEvent;

/// A sweep over `queue` ended: `repaired` job records were put back in the
/// queue's sets, `requested` compactions were requested again,
/// `branches_requested` summaries of branches left without one. Each means
/// Redis lost or refused work, so each is a warning; a sweep that found
/// nothing lost says nothing.
#[derive(Debug)]
pub(crate) struct Reconciled<'a> {
    pub queue: &'a str,
    pub repaired: u64,
    pub requested: u64,
    pub branches_requested: u64,
}

impl InternalEvent for Reconciled<'_> {
    fn emit(&self) {
        if self.repaired > 0 {
            warn!(
                queue = self.queue,
                repaired = self.repaired,
                "reconciliation put back jobs the queue's sets had lost"
            );
        }
        if self.requested > 0 {
            warn!(
                queue = self.queue,
                requested = self.requested,
                "reconciliation requested compactions the queue had lost"
            );
            metrics::counter!(names::RECONCILE_REQUESTED_TOTAL, "queue" => self.queue.to_owned())
                .increment(self.requested);
        }
        if self.branches_requested > 0 {
            warn!(
                queue = self.queue,
                branches = self.branches_requested,
                "reconciliation requested summaries of branches left without one"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::capture::{capture, Value};

    #[test]
    fn requested_compactions_are_counted_and_a_quiet_sweep_records_nothing() {
        let recorded = capture(|| {
            Reconciled {
                queue: "q",
                repaired: 1,
                requested: 4,
                branches_requested: 0,
            }
            .emit()
        });
        recorded.assert_one(
            names::RECONCILE_REQUESTED_TOTAL,
            &[("queue", "q")],
            Value::Counter(4),
        );
        let quiet = capture(|| {
            Reconciled {
                queue: "q",
                repaired: 0,
                requested: 0,
                branches_requested: 0,
            }
            .emit()
        });
        assert!(quiet.is_empty(), "{quiet:?}");
    }
}
