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
//! moving its head changes which messages are on its path.
//!
//! A history over the load bound (`[database] context_max_messages` /
//! `context_max_tokens`) is kept as the window a read cuts, the newest
//! messages within the bound, with what it leaves out; appended messages
//! move it on (the oldest drop out, counted as left out), as a read from
//! the database would cut it.
//!
//! Memory: at most `[database] context_cache_bytes` (as
//! [`PreparedTail::bytes`] counts); past it, the least recently read
//! histories are dropped. A history bigger than half the budget is not
//! kept.

use std::collections::VecDeque;

use compactor_shared::context::PreparedTail;
use compactor_shared::{Message, MessageId, TokenEstimator};

use super::byte_lru::ByteLru;
use crate::store::{ContextHistory, HistoryBound, HistoryWindow};

/// What a kept history was read at: a later read may extend it only when
/// the workstream is still at these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    /// The workstream's `version` (bumped by every commit).
    pub version: i64,
    /// Its watermark.
    pub compacted_to: Option<MessageId>,
}

/// A kept history: a linear workstream's window of un-compacted messages
/// (all of them, or the newest within the load bound) up to `upto`, in
/// order.
#[derive(Debug)]
pub(super) struct Kept {
    pub stamp: Stamp,
    /// The newest message id the history was read up to (messages after it
    /// are not in `tail`, whatever `tail` ends with).
    pub upto: MessageId,
    pub tail: PreparedTail,
    /// Per message of `tail`: its stored estimate (what the bound counts).
    estimates: VecDeque<u64>,
    /// Their sum.
    tokens: u64,
    /// Un-compacted messages older than the window, left out by the bound.
    omitted_messages: u64,
    /// Their estimates.
    omitted_tokens: u64,
}

impl Kept {
    /// Keeps `history` (read whole at `stamp`, up to `upto`), ready for
    /// contexts; given back when a message cannot be written as JSON.
    pub(super) fn new(
        stamp: Stamp,
        upto: MessageId,
        history: ContextHistory,
        bound: HistoryBound,
        estimator: &dyn TokenEstimator,
    ) -> Result<Kept, ContextHistory> {
        let ContextHistory {
            messages,
            estimates,
            window,
        } = history;
        let mut kept = Kept {
            stamp,
            upto,
            tail: PreparedTail::default(),
            estimates: VecDeque::with_capacity(estimates.len()),
            tokens: 0,
            omitted_messages: window.omitted_messages,
            omitted_tokens: window.omitted_tokens,
        };
        let mut rest = messages.into_iter().zip(estimates);
        while let Some((message, estimate)) = rest.next() {
            if let Err(unwritable) = kept.tail.push(message, estimator) {
                let (mut messages, mut estimates): (Vec<_>, Vec<_>) = kept
                    .tail
                    .into_messages()
                    .into_iter()
                    .zip(kept.estimates)
                    .chain(std::iter::once((unwritable.message, estimate)))
                    .chain(rest)
                    .unzip();
                messages.shrink_to_fit();
                estimates.shrink_to_fit();
                return Err(ContextHistory {
                    messages,
                    estimates,
                    window,
                });
            }
            kept.estimates.push_back(estimate);
            kept.tokens = kept.tokens.saturating_add(estimate);
        }
        // A read that took messages appended after its window was cut
        // (the read over the token bound does) may be past the bound.
        kept.fit(bound);
        Ok(kept)
    }

    /// Adds `message` (appended after every kept one, with its stored
    /// estimate) and moves the window on past the bound. `false`: it
    /// cannot be written as JSON; the history is to be read whole.
    pub(super) fn push(
        &mut self,
        message: Message,
        estimate: u64,
        bound: HistoryBound,
        estimator: &dyn TokenEstimator,
    ) -> bool {
        let id = message.id;
        if self.tail.push(message, estimator).is_err() {
            return false;
        }
        self.estimates.push_back(estimate);
        self.tokens = self.tokens.saturating_add(estimate);
        self.upto = self.upto.max(id);
        self.fit(bound);
        true
    }

    /// Drops the oldest messages while the window is over `bound`: at most
    /// `max_messages`, and at most `max_tokens` of estimates unless it is
    /// the newest message alone — the window a read from the database
    /// cuts (`newest_within`: the longest run of newest messages within
    /// both). They are counted as left out.
    fn fit(&mut self, bound: HistoryBound) {
        let mut dropped = 0;
        let mut len = self.estimates.len() as u64;
        while len > bound.max_messages || (len > 1 && self.tokens > bound.max_tokens) {
            let Some(estimate) = self.estimates.pop_front() else {
                break;
            };
            self.tokens -= estimate;
            self.omitted_messages += 1;
            self.omitted_tokens = self.omitted_tokens.saturating_add(estimate);
            dropped += 1;
            len -= 1;
        }
        self.tail.drop_front(dropped);
    }

    /// The window the kept messages are.
    pub(super) fn window(&self) -> HistoryWindow {
        HistoryWindow {
            first: self.tail.messages().first().map(|m| m.id),
            messages: self.tail.len() as u64,
            omitted_messages: self.omitted_messages,
            omitted_tokens: self.omitted_tokens,
        }
    }
}

/// The kept histories of one client (shared by its clones), by
/// workstream id.
#[derive(Debug)]
pub(super) struct HistoryCache(ByteLru<i64, Kept>);

impl HistoryCache {
    /// A cache of at most `budget` bytes (0: nothing is kept).
    pub(super) fn new(budget: u64) -> HistoryCache {
        HistoryCache(ByteLru::new(budget))
    }

    /// Whether anything is kept (a budget above 0).
    pub(super) fn keeps(&self) -> bool {
        self.0.keeps()
    }

    /// Takes the workstream's kept history out of the cache when it was
    /// kept at `stamp` (put it back with [`HistoryCache::put`]); a history
    /// kept at another stamp is dropped. Out while taken: a concurrent read
    /// of the same workstream reads the database, as without a cache.
    pub(super) fn take(&self, workstream_id: i64, stamp: Stamp) -> Option<Kept> {
        // A stale history (megabytes, maybe) is freed outside the lock.
        self.0
            .take(&workstream_id)
            .filter(|kept| kept.stamp == stamp)
    }

    /// Keeps `kept` as the workstream's history (replacing any), then drops
    /// the least recently kept histories past the budget.
    pub(super) fn put(&self, workstream_id: i64, kept: Kept) {
        let bytes = kept.tail.bytes();
        self.0.put(workstream_id, kept, bytes);
    }

    /// Bytes charged for the histories kept now.
    #[cfg(test)]
    fn bytes(&self) -> u64 {
        self.0.bytes()
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
            estimates: std::iter::repeat_n(1, tail.len()).collect(),
            tokens: tail.len() as u64,
            omitted_messages: 0,
            omitted_tokens: 0,
            tail,
        }
    }

    fn message(id: i64) -> Message {
        Message {
            id: MessageId(id),
            role: Role::User,
            pinned: false,
            parts: vec![Part::text(format!("message {id}"))],
        }
    }

    proptest::proptest! {
        /// However messages are appended to a kept window — in one go or a
        /// few at a time, over the message bound, the token bound or both
        /// — it is the window a read of the whole history cuts
        /// (`newest_within`), with what that leaves out.
        #[test]
        fn a_kept_window_moves_as_a_read_would_cut_it(
            estimates in proptest::collection::vec(0u64..50, 0..60),
            first_read in 0usize..60,
            steps in proptest::collection::vec(1usize..8, 0..20),
            max_messages in 1u64..20,
            max_tokens in 1u64..200,
        ) {
            let bound = HistoryBound { max_messages, max_tokens };
            let estimator = CharEstimator::default();
            let sizes = |n: usize| {
                estimates[..n]
                    .iter()
                    .enumerate()
                    .rev()
                    .map(|(i, &e)| (i as i64 + 1, e as i64))
                    .collect::<Vec<_>>()
            };
            // What a read of the first `n` messages gives.
            let read = |n: usize| {
                let window = crate::store::newest_within(sizes(n).into_iter(), bound);
                let from = window.first.map_or(n, |f| f.0 as usize - 1);
                let omitted: u64 = estimates[..from].iter().sum();
                ContextHistory {
                    messages: (from..n).map(|i| message(i as i64 + 1)).collect(),
                    estimates: estimates[from..n].to_vec(),
                    window: HistoryWindow {
                        omitted_messages: from as u64,
                        omitted_tokens: omitted,
                        ..window
                    },
                }
            };
            let first_read = first_read.min(estimates.len());
            let upto = MessageId(first_read as i64);
            let mut kept = Kept::new(stamp(1), upto, read(first_read), bound, &estimator).unwrap();
            let mut at = first_read;
            for step in steps.iter().copied().chain(std::iter::once(usize::MAX)) {
                let to = at.saturating_add(step).min(estimates.len());
                for (i, &estimate) in estimates.iter().enumerate().take(to).skip(at) {
                    proptest::prop_assert!(kept.push(message(i as i64 + 1), estimate, bound, &estimator));
                }
                at = to;
                let expected = read(at);
                proptest::prop_assert_eq!(kept.window(), expected.window);
                let ids: Vec<MessageId> = kept.tail.messages().iter().map(|m| m.id).collect();
                let expected_ids: Vec<MessageId> = expected.messages.iter().map(|m| m.id).collect();
                proptest::prop_assert_eq!(ids, expected_ids);
            }
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
