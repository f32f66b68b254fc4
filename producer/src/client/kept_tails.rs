//! Un-compacted histories kept between context reads, ready for the next
//! context ([`PreparedTail`]: each message's tokens and JSON computed once).
//!
//! Why: a chat turn reads the whole un-compacted history (`GET …/context`,
//! `build_context`). At 10k messages PostgreSQL alone takes 8 ms to send
//! the 2 MB of it, and writing it as JSON as long again, every turn, though
//! all but the turn's few new messages were in the turn before. A history
//! kept here is read again only in the part that is new.
//!
//! Why it is never stale: a linear workstream's un-compacted history
//! changes in only two ways.
//! - **An append** adds messages with ids above every stored one: ids are
//!   taken and committed under the workstream's row lock, in id order, so
//!   once the row says its newest message is `n`, every message up to `n`
//!   is committed and none will appear below it.
//! - **A compaction's commit** marks messages compacted and prunes others,
//!   and bumps the workstream's `version` in the same transaction.
//!
//! So a history kept at `(version, watermark)`, plus the un-compacted
//! messages after its newest id, is the history now, whichever process
//! wrote meanwhile. A branched workstream (a head of its own) is not kept:
//! moving its head changes which messages are on its path. Neither is a
//! history cut by the load bound (`[database] context_max_messages` /
//! `context_max_tokens`).
//!
//! Memory: at most `[database] context_cache_bytes` (as
//! [`PreparedTail::bytes`] counts); past it, the least recently read
//! histories are dropped. A history bigger than half the budget is not
//! kept.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use compactor_shared::context::PreparedTail;
use compactor_shared::MessageId;

/// What a kept history was read at: a later read may extend it only when
/// the workstream is still at these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    /// The workstream's `version` (bumped by every commit).
    pub version: i64,
    /// Its watermark.
    pub compacted_to: Option<MessageId>,
}

/// A kept history: every un-compacted message of a linear workstream up
/// to `upto`, in order.
#[derive(Debug)]
pub(super) struct Kept {
    pub stamp: Stamp,
    /// The newest message id the history was read up to (messages after it
    /// are not in `tail`, whatever `tail` ends with).
    pub upto: MessageId,
    pub tail: PreparedTail,
}

struct Slot {
    kept: Kept,
    bytes: u64,
    /// When it was last put back (a tick of the cache's clock).
    used: u64,
}

#[derive(Default)]
struct Slots {
    by_workstream: HashMap<i64, Slot>,
    bytes: u64,
    clock: u64,
}

/// The kept histories of one store (shared by its clones).
pub(super) struct HistoryCache {
    budget: u64,
    slots: Mutex<Slots>,
}

impl std::fmt::Debug for HistoryCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("HistoryCache")
            .field("budget", &self.budget)
            .field("histories", &slots.by_workstream.len())
            .field("bytes", &slots.bytes)
            .finish()
    }
}

impl HistoryCache {
    /// A cache of at most `budget` bytes (0: nothing is kept).
    pub(super) fn new(budget: u64) -> HistoryCache {
        HistoryCache {
            budget,
            slots: Mutex::new(Slots::default()),
        }
    }

    /// Whether anything is kept (a budget above 0).
    pub(super) fn keeps(&self) -> bool {
        self.budget > 0
    }

    /// Takes the workstream's kept history out of the cache when it was
    /// kept at `stamp` (put it back with [`HistoryCache::put`]); a history
    /// kept at another stamp is dropped. Out while taken: a concurrent read
    /// of the same workstream reads the database, as without a cache.
    pub(super) fn take(&self, workstream_id: i64, stamp: Stamp) -> Option<Kept> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = slots.by_workstream.remove(&workstream_id)?;
        slots.bytes -= slot.bytes;
        (slot.kept.stamp == stamp).then_some(slot.kept)
    }

    /// Keeps `kept` as the workstream's history (replacing any), then drops
    /// the least recently kept histories past the budget.
    pub(super) fn put(&self, workstream_id: i64, kept: Kept) {
        let bytes = kept.tail.bytes();
        if !self.keeps() || bytes > self.budget / 2 {
            return;
        }
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.clock += 1;
        let used = slots.clock;
        if let Some(old) = slots
            .by_workstream
            .insert(workstream_id, Slot { kept, bytes, used })
        {
            slots.bytes -= old.bytes;
        }
        slots.bytes += bytes;
        while slots.bytes > self.budget {
            let Some(oldest) = slots
                .by_workstream
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(&id, _)| id)
            else {
                break;
            };
            if let Some(dropped) = slots.by_workstream.remove(&oldest) {
                slots.bytes -= dropped.bytes;
            }
        }
    }

    /// Bytes charged for the histories kept now.
    #[cfg(test)]
    fn bytes(&self) -> u64 {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .bytes
    }
}

#[cfg(test)]
mod tests {
    use compactor_shared::{CharEstimator, Message, Part, Role};

    use super::*;

    fn tail(ids: std::ops::RangeInclusive<i64>, text: &str) -> PreparedTail {
        let mut tail = PreparedTail::default();
        for id in ids {
            let m = Message {
                id: MessageId(id),
                role: Role::User,
                pinned: false,
                parts: vec![Part::text(text)],
            };
            tail.push(m, &CharEstimator::default()).unwrap();
        }
        tail
    }

    fn stamp(version: i64) -> Stamp {
        Stamp {
            version,
            compacted_to: None,
        }
    }

    fn kept(version: i64, tail: PreparedTail) -> Kept {
        Kept {
            stamp: stamp(version),
            upto: tail.last().map_or(MessageId(0), |m| m.id),
            tail,
        }
    }

    #[test]
    fn a_history_is_given_back_only_at_its_stamp_and_only_once() {
        let cache = HistoryCache::new(1 << 20);
        cache.put(1, kept(3, tail(1..=5, "hello")));
        // Another stamp: dropped, not given.
        assert!(cache.take(1, stamp(4)).is_none());
        assert!(cache.take(1, stamp(3)).is_none());
        assert_eq!(cache.bytes(), 0);

        cache.put(1, kept(3, tail(1..=5, "hello")));
        let taken = cache.take(1, stamp(3)).expect("kept at 3");
        assert_eq!(taken.tail.len(), 5);
        assert_eq!(taken.upto, MessageId(5));
        // Taken: out until put back.
        assert!(cache.take(1, stamp(3)).is_none());
    }

    #[test]
    fn the_least_recently_kept_histories_go_first_past_the_budget() {
        let one = tail(1..=10, "x").bytes();
        let cache = HistoryCache::new(one * 4);
        for ws in 1..=4 {
            cache.put(ws, kept(1, tail(1..=10, "x")));
        }
        assert_eq!(cache.bytes(), one * 4);
        // Workstream 1 read again: now the most recent.
        let again = cache.take(1, stamp(1)).unwrap();
        cache.put(1, again);
        cache.put(5, kept(1, tail(1..=10, "x")));
        assert_eq!(cache.bytes(), one * 4);
        assert!(cache.take(2, stamp(1)).is_none(), "the least recent went");
        for ws in [1, 3, 4, 5] {
            assert!(cache.take(ws, stamp(1)).is_some(), "workstream {ws} kept");
        }
    }

    #[test]
    fn a_history_over_half_the_budget_is_not_kept() {
        let big = tail(1..=100, "some text of a message");
        let cache = HistoryCache::new(big.bytes() * 2 - 1);
        cache.put(1, kept(1, big));
        assert_eq!(cache.bytes(), 0);
        assert!(cache.take(1, stamp(1)).is_none());
        let nothing = HistoryCache::new(0);
        assert!(!nothing.keeps());
        nothing.put(1, kept(1, PreparedTail::default()));
        assert!(nothing.take(1, stamp(1)).is_none());
    }
}
