//! What the client library and the queue make observable, vector-style:
//! each occurrence is a struct whose one [`InternalEvent::emit`] writes its
//! log line and its metrics from the same fields, so the two cannot drift
//! (a label computed once, from a typed enum of [`catalogue`], feeds both).
//! Code outside this module records no metric: it builds an event and
//! emits it (a test over the source tree checks it).
//!
//! # Layout
//!
//! - [`catalogue`]: every metric compactor records — name, kind, help
//!   text, label names, typed label values, histogram buckets. The
//!   worker's own events read their names from it too.
//! - `enqueue`: a compaction request answered by the queue.
//! - `turn`: a `finalize_turn` decision.
//! - `wait`: the end of a chat request's wait for a compaction.
//! - `notify`: the client's release subscription failing, or not up yet.
//! - `context`: a turn's context clipped to its bound (log only).
//! - `reconcile`: a reconciliation sweep that found lost work.
//! - `queue_key`: a key of the queue holding another Redis type.
//! - `outbox`: an event written to the transactional outbox.
//! - [`CompactionEvent`]: not an internal event but the announcement a
//!   worker publishes when a compaction ends (what a chat UI shows as
//!   "context compacted"); it lives here for its old path.

pub mod catalogue;
mod compaction;
mod context;
mod enqueue;
mod notify;
mod outbox;
mod queue_key;
mod reconcile;
mod turn;
mod wait;

/// The per-test recorder: the producer's tests, and other crates' with
/// the `test-util` feature.
#[cfg(any(test, feature = "test-util"))]
pub mod capture;
#[cfg(test)]
mod source_tree;

pub use compaction::{CompactionEvent, EventOutcome};
pub(crate) use context::HistoryTruncated;
pub(crate) use enqueue::{CompactionRequested, EnqueueFailed};
pub(crate) use notify::{ReleaseSubscriptionFailed, ReleaseSubscriptionPending};
pub use outbox::EventNotWritten;
pub(crate) use outbox::EventWritten;
pub(crate) use queue_key::QueueKeyOfWrongType;
pub(crate) use reconcile::Reconciled;
pub(crate) use turn::TurnFinalized;
pub(crate) use wait::{CommitSeenWithoutQueue, QueueUnreadableWhileWaiting, WaitEnded};

/// One observable occurrence. `emit` writes the log line (if any) and
/// records the metrics, all from the event's own fields.
pub trait InternalEvent {
    fn emit(&self);
}
