//! A map bounded by bytes, the least recently used dropped first: what the
//! client keeps between context reads ([`super::kept_tails`],
//! [`super::kept_compacted`]) is megabytes a workstream, so it is bounded
//! by what it holds, not by how many.

use std::hash::Hash;
use std::sync::{Mutex, PoisonError};

use lru::LruCache;

/// Entries with what each is charged; at most `budget` bytes in all, an
/// entry over half of it never kept. Shared by the client's clones.
pub(super) struct ByteLru<K: Hash + Eq, V> {
    budget: u64,
    slots: Mutex<Slots<K, V>>,
}

struct Slots<K: Hash + Eq, V> {
    entries: LruCache<K, (V, u64)>,
    bytes: u64,
}

impl<K: Hash + Eq, V> std::fmt::Debug for ByteLru<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slots = self.lock();
        f.debug_struct("ByteLru")
            .field("budget", &self.budget)
            .field("entries", &slots.entries.len())
            .field("bytes", &slots.bytes)
            .finish()
    }
}

impl<K: Hash + Eq, V> ByteLru<K, V> {
    /// At most `budget` bytes (0: nothing is kept).
    pub(super) fn new(budget: u64) -> ByteLru<K, V> {
        ByteLru {
            budget,
            slots: Mutex::new(Slots {
                entries: LruCache::unbounded(),
                bytes: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots<K, V>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether anything is kept (a budget above 0).
    pub(super) fn keeps(&self) -> bool {
        self.budget > 0
    }

    /// Takes `key`'s entry out (put it back with [`ByteLru::put`]).
    pub(super) fn take(&self, key: &K) -> Option<V> {
        let mut slots = self.lock();
        let (value, bytes) = slots.entries.pop(key)?;
        slots.bytes -= bytes;
        Some(value)
    }

    /// `key`'s entry, now the most recently used.
    pub(super) fn get(&self, key: &K) -> Option<V>
    where
        V: Clone,
    {
        self.lock().entries.get(key).map(|(v, _)| v.clone())
    }

    /// Keeps `value` for `key`, charged `bytes` (replacing any entry), then
    /// drops the least recently used past the budget. An entry over half
    /// the budget is not kept, and the one it would replace goes.
    pub(super) fn put(&self, key: K, value: V, bytes: u64) {
        // What goes is freed once the lock is let go.
        let mut gone = Vec::new();
        let mut slots = self.lock();
        if !self.keeps() || bytes > self.budget / 2 {
            if let Some(old) = slots.entries.pop(&key) {
                slots.bytes -= old.1;
                gone.push(old);
            }
            gone.push((value, bytes));
        } else {
            if let Some(old) = slots.entries.put(key, (value, bytes)) {
                slots.bytes -= old.1;
                gone.push(old);
            }
            slots.bytes += bytes;
            while slots.bytes > self.budget {
                let Some((_, dropped)) = slots.entries.pop_lru() else {
                    break;
                };
                slots.bytes -= dropped.1;
                gone.push(dropped);
            }
        }
        drop(slots);
        drop(gone);
    }

    /// Bytes charged for what is kept now.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> u64 {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_go_past_the_budget_and_an_entry_over_half_is_not_kept() {
        let cache: ByteLru<&str, u32> = ByteLru::new(300);
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            cache.put(name, i as u32, 100);
        }
        // `a` used last: `b` is the least recently used when `d` comes.
        assert_eq!(cache.get(&"a"), Some(0));
        cache.put("d", 3, 100);
        assert_eq!(cache.get(&"b"), None);
        for name in ["a", "c", "d"] {
            assert!(cache.get(&name).is_some(), "{name}");
        }
        // Over half the budget: not kept, and the entry it replaces goes.
        cache.put("a", 9, 151);
        assert_eq!(cache.get(&"a"), None);
        assert_eq!(cache.bytes(), 200);
        // Replacing an entry charges the new one only; taking frees it.
        cache.put("c", 7, 50);
        assert_eq!(cache.bytes(), 150);
        assert_eq!(cache.take(&"c"), Some(7));
        assert_eq!(cache.take(&"c"), None);
        assert_eq!(cache.bytes(), 100);
    }

    #[test]
    fn nothing_is_kept_with_no_budget() {
        let cache: ByteLru<&str, u32> = ByteLru::new(0);
        cache.put("a", 1, 0);
        assert_eq!(cache.get(&"a"), None);
        assert!(!cache.keeps());
    }
}
