//! Recording sightings into the ledger: merge, supersession, eviction.
//!
//! **Merge.** A value is identified by kind, key and value. A sighting from
//! a message outside the entry's `[first_seen, last_seen]` adds its
//! mentions; one inside that range is treated as already counted, so
//! recording the same batch twice (a retried job) changes nothing.
//!
//! **Supersession.** Settings with the same key have one current value: the
//! newest sighting wins, except that a value only *read* (successful tool
//! output, a read-only tool's input) never replaces one that was stated or
//! written — reading an old config file does not undo "set the timeout to
//! 45s". The losers stay as history, marked `superseded`.
//!
//! **Eviction.** One pass over all entries, most salient first, keeps an
//! entry if its kind is under its cap and its line still fits the token
//! budget. Most salient means, in order: stated before written before read;
//! then, within one salience, kinds take turns (the best of each kind, then
//! the second best of each, …), so no kind that comes in bulk starves the
//! others; within a kind, current before superseded; more mentions; seen
//! more recently; then key and value, so the order is total and the pass
//! deterministic. A
//! superseded value ranks no higher than its current value, and is kept
//! only beside it: history of what the user said outranks what was merely
//! read, but never the value that replaced it.
//! A value the user stated therefore outlives everything else of its kind,
//! however many compactions pass, until a newer value supersedes it. Only
//! when the user's own values alone overflow a cap or the budget do some
//! of them go: the fewest-mentioned and oldest first.

use std::collections::HashMap;

use super::render;
use super::{Artifact, ArtifactKind, ArtifactLedger, LedgerCaps, Salience, Source};
use crate::message::MessageId;
use crate::tokens::TokenEstimator;

type Identity = (ArtifactKind, Option<String>, String);

fn identity(a: &Artifact) -> Identity {
    (a.kind, a.key.clone(), a.value.clone())
}

/// The setting key of `a`, if it is a setting.
fn setting_key(a: &Artifact) -> Option<&str> {
    match a.kind {
        ArtifactKind::Setting => a.key.as_deref(),
        _ => None,
    }
}

/// Where an entry stands when the ledger must drop some; the greatest is
/// kept first. A superseded value ranks with its current value's salience
/// if that is lower, and just below the current values of its rank: its
/// history never outranks the value it led to.
type Rank = (Salience, bool, u32, MessageId);

fn rank(a: &Artifact, current: Option<&Artifact>) -> Rank {
    let salience = match current {
        Some(c) if a.superseded => a.salience.min(c.salience),
        _ => a.salience,
    };
    (salience, !a.superseded, a.mentions, a.last_seen)
}

/// Most rounds `record` runs to reach a fixed point (see there).
const MAX_SETTLE_ROUNDS: usize = 4;

impl ArtifactLedger {
    /// Records newly seen artifacts (in the order they were seen), then
    /// enforces the per-kind caps and the token budget of `caps` by
    /// salience (see the module docs of `ledger::record`). Afterwards
    /// `render_cited()` (and so `render()`) fits `caps.max_tokens` as
    /// `estimator` counts.
    /// Deterministic and idempotent: recording the same batch again changes
    /// nothing.
    pub fn record(
        &mut self,
        seen: impl IntoIterator<Item = Artifact>,
        caps: &LedgerCaps,
        estimator: &dyn TokenEstimator,
    ) {
        let seen: Vec<Artifact> = seen.into_iter().collect();
        // Eviction can drop the newer value that kept an older one of the
        // batch superseded; recording the batch again would then bring the
        // older one back as current. Recording until nothing changes makes
        // a second `record` of the same batch a no-op. Almost always one
        // round suffices: a batch all of whose values were kept records
        // again as pure repeats.
        for _ in 0..MAX_SETTLE_ROUNDS {
            let before = self.entries.clone();
            self.record_once(seen.iter().cloned(), caps, estimator);
            if self.entries == before || self.keeps_all(&seen) {
                break;
            }
        }
    }

    /// Whether every value of `seen` (that `record` would take) is kept.
    fn keeps_all(&self, seen: &[Artifact]) -> bool {
        let kept: std::collections::HashSet<(ArtifactKind, Option<&str>, &str)> = self
            .entries
            .iter()
            .map(|a| (a.kind, a.key.as_deref(), a.value.as_str()))
            .collect();
        seen.iter().all(|a| {
            let key = setting_key(a);
            kept.contains(&(a.kind, key, a.value.as_str()))
        })
    }

    fn record_once(
        &mut self,
        seen: impl Iterator<Item = Artifact>,
        caps: &LedgerCaps,
        estimator: &dyn TokenEstimator,
    ) {
        let mut book = Book::open(std::mem::take(&mut self.entries));
        for artifact in seen {
            book.sight(artifact, caps.max_value_chars);
        }
        self.entries = book.entries;
        self.enforce(caps, estimator);
    }

    /// Keeps the most salient entries within the caps and the budget.
    fn enforce(&mut self, caps: &LedgerCaps, estimator: &dyn TokenEstimator) {
        let entries = &self.entries;
        let current: HashMap<&str, usize> = entries
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.superseded)
            .filter_map(|(i, a)| setting_key(a).map(|k| (k, i)))
            .collect();
        let ranks: Vec<Rank> = entries
            .iter()
            .map(|a| {
                let holder = setting_key(a).and_then(|k| current.get(k));
                rank(a, holder.map(|&c| &entries[c]))
            })
            .collect();
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_by(|&i, &j| {
            let (a, b) = (&entries[i], &entries[j]);
            ranks[j]
                .cmp(&ranks[i])
                .then_with(|| (a.kind, &a.key, &a.value).cmp(&(b.kind, &b.key, &b.value)))
        });

        // Within one salience, kinds take turns: the best value of each
        // kind, then the second best of each, and so on. A kind that comes
        // in bulk (the product codes of every search, the names of every
        // passing test) cannot crowd the one refund amount out of the
        // budget. Clock times take their own turns beside dates: the times
        // of every calendar and tracking log cannot crowd out the one
        // delivery date.
        let mut turn = vec![0usize; entries.len()];
        let mut taken: HashMap<(Salience, ArtifactKind, bool), usize> = HashMap::new();
        for &i in &order {
            let a = &entries[i];
            let n = taken
                .entry((ranks[i].0, a.kind, clock_time_only(a)))
                .or_insert(0);
            turn[i] = *n;
            *n += 1;
        }
        // A stable sort: within a turn, the order by rank stands.
        order.sort_by_key(|&i| (std::cmp::Reverse(ranks[i].0), turn[i]));

        let mut kept = vec![false; entries.len()];
        let mut per_kind: HashMap<ArtifactKind, usize> = HashMap::new();
        let mut used = 0u64;
        for &i in &order {
            let a = &entries[i];
            let count = per_kind.get(&a.kind).copied().unwrap_or(0);
            if count >= caps.cap(a.kind) {
                continue;
            }
            // History is shown only beside the current value it led to.
            if a.superseded
                && !setting_key(a)
                    .and_then(|k| current.get(k))
                    .is_some_and(|&c| kept[c])
            {
                continue;
            }
            let mut cost = render::cost(a, estimator);
            if count == 0 {
                cost += render::heading_cost(a.kind, estimator);
            }
            if used.saturating_add(cost) > caps.max_tokens {
                continue;
            }
            used += cost;
            kept[i] = true;
            per_kind.insert(a.kind, count + 1);
        }

        // The per-line costs are meant to add up to at least the real
        // count; should an estimator disagree, drop the least salient
        // entries until the rendering fits. The cited rendering (what a
        // context shows) is checked: the uncited one is only shorter.
        loop {
            let shown: Vec<&Artifact> = (0..entries.len())
                .filter(|&i| kept[i])
                .map(|i| &entries[i])
                .collect();
            if estimator.count(&render::render_cited(&shown, &|_| None)) <= caps.max_tokens {
                break;
            }
            match order.iter().rev().find(|&&i| kept[i]) {
                Some(&last) => kept[last] = false,
                None => break,
            }
        }

        let mut at = 0;
        self.entries.retain(|_| {
            at += 1;
            kept[at - 1]
        });
    }
}

/// The entries being recorded into, with their indexes.
struct Book {
    entries: Vec<Artifact>,
    index: HashMap<Identity, usize>,
    /// The current value of each setting key.
    current: HashMap<String, usize>,
}

impl Book {
    /// Indexes stored entries, merging duplicates and making sure each
    /// setting key has at most one current value (state written by hand or
    /// by an older version may break either rule).
    fn open(stored: Vec<Artifact>) -> Book {
        let mut book = Book {
            entries: Vec::with_capacity(stored.len()),
            index: HashMap::with_capacity(stored.len()),
            current: HashMap::new(),
        };
        for mut a in stored {
            if setting_key(&a).is_none() {
                a.key = None;
                a.superseded = false;
            }
            match book.index.get(&identity(&a)) {
                Some(&i) => {
                    let e = &mut book.entries[i];
                    e.first_seen = e.first_seen.min(a.first_seen);
                    e.last_seen = e.last_seen.max(a.last_seen);
                    e.mentions = e.mentions.max(a.mentions);
                    e.superseded &= a.superseded;
                    if a.salience > e.salience {
                        e.salience = a.salience;
                        e.source = a.source;
                    }
                }
                None => {
                    book.index.insert(identity(&a), book.entries.len());
                    book.entries.push(a);
                }
            }
        }
        for i in 0..book.entries.len() {
            let a = &book.entries[i];
            let Some(key) = setting_key(a).filter(|_| !a.superseded) else {
                continue;
            };
            match book.current.get(key).copied() {
                None => {
                    book.current.insert(key.to_owned(), i);
                }
                Some(c) => {
                    let holder = &book.entries[c];
                    let authority = |x: &Artifact| x.salience >= Salience::Written;
                    let wins = (authority(a), a.last_seen) >= (authority(holder), holder.last_seen);
                    let (winner, loser) = if wins { (i, c) } else { (c, i) };
                    let key = key.to_owned();
                    book.entries[loser].superseded = true;
                    book.current.insert(key, winner);
                }
            }
        }
        book
    }

    /// Merges one sighting.
    fn sight(&mut self, mut a: Artifact, max_chars: usize) {
        let too_long = |s: &str| s.chars().count() > max_chars;
        if a.value.trim().is_empty() || too_long(&a.value) || a.key.as_deref().is_some_and(too_long)
        {
            return;
        }
        if setting_key(&a).is_none() {
            a.key = None;
        }
        a.mentions = a.mentions.max(1);
        a.first_seen = a.first_seen.min(a.last_seen);
        a.superseded = false;
        let (salience, at) = (a.salience, a.last_seen);
        let (i, newer) = match self.index.get(&identity(&a)) {
            Some(&i) => {
                let e = &mut self.entries[i];
                let newer = a.last_seen > e.last_seen;
                if newer || a.first_seen < e.first_seen {
                    e.mentions = e.mentions.saturating_add(a.mentions);
                }
                e.first_seen = e.first_seen.min(a.first_seen);
                e.last_seen = e.last_seen.max(a.last_seen);
                let unknown = e.source == Source::Unknown && a.salience == e.salience;
                if a.salience > e.salience || unknown {
                    e.salience = a.salience;
                    e.source = a.source;
                }
                (i, newer)
            }
            None => {
                self.index.insert(identity(&a), self.entries.len());
                self.entries.push(a);
                (self.entries.len() - 1, true)
            }
        };
        if newer {
            self.settle(i, salience, at);
        }
    }

    /// Decides whether entry `i`, just seen in message `at` with
    /// `salience`, becomes its key's current value.
    fn settle(&mut self, i: usize, salience: Salience, at: MessageId) {
        let Some(key) = setting_key(&self.entries[i]).map(str::to_owned) else {
            return;
        };
        match self.current.get(&key).copied() {
            Some(c) if c != i => {
                let holder = &self.entries[c];
                let may_replace =
                    salience >= Salience::Written || holder.salience < Salience::Written;
                if may_replace && at >= holder.last_seen {
                    self.entries[c].superseded = true;
                    self.entries[i].superseded = false;
                    self.current.insert(key, i);
                } else {
                    self.entries[i].superseded = true;
                }
            }
            _ => {
                self.entries[i].superseded = false;
                self.current.insert(key, i);
            }
        }
    }
}

/// Whether a date-and-time value is only a time of day (`14:35`, `9am`,
/// `20:30 WET`), with no calendar date (`2025-03-21`, `12 Nov`, `Friday`).
fn clock_time_only(a: &Artifact) -> bool {
    if a.kind != ArtifactKind::DateTime {
        return false;
    }
    let v = a.value.to_ascii_lowercase();
    let calendar = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec", "mon",
        "tue", "wed", "thu", "fri", "sat", "sun", "today", "tomorrow",
    ];
    let dated = calendar.iter().any(|m| v.contains(m))
        || v.split(|c: char| !c.is_ascii_digit()).any(|d| d.len() == 4)
        || v.bytes()
            .filter(|b| matches!(b, b'-' | b'/' | b'.'))
            .count()
            >= 2;
    !dated
}
