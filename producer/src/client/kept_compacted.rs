//! Workstreams' summaries and states kept between context reads, each with
//! its part of the preamble written once.
//!
//! Why: a context starts with what the last compaction left, and a long
//! workstream's is big. At 10,000 messages with a 200k window its state is
//! 0.9 MB of JSON and its preamble 170 KB; reading and decoding the one
//! and writing the other took 10–13 ms of every chat turn (the drop-in
//! proxy's whole budget is 5 ms), though both change only at a commit.
//!
//! Why it is never stale: the summary and the state are written by a
//! compaction's commit and by nothing else, and the commit bumps the row's
//! `version` in the same statement. Kept at `(id, version)`, they are the
//! row's for as long as the row says that version, and the read asks the
//! database for them only when it says another
//! ([`crate::store::Store::workstream_unless`], one statement).
//!
//! Memory: a quarter of `[database] context_cache_bytes`, each entry
//! charged three times its stored JSON (the decoded state, and its text);
//! past it, the least recently read go. An entry over half of that is not
//! kept.

use std::sync::{Arc, OnceLock};

use compactor_shared::context;
use compactor_shared::{EntityKey, Summary, WorkstreamState};

use super::byte_lru::ByteLru;
use crate::store::Compacted;

/// What a workstream's last commit left, at its id and version.
#[derive(Debug)]
pub(super) struct Parts {
    pub id: i64,
    pub version: i64,
    pub summary: Option<Summary>,
    pub state: WorkstreamState,
    /// The state's part of the preamble, written on first use.
    text: OnceLock<String>,
    bytes: u64,
}

impl Parts {
    pub(super) fn new(id: i64, version: i64, compacted: Compacted) -> Parts {
        Parts {
            id,
            version,
            bytes: (compacted.stored_bytes as u64).saturating_mul(3),
            summary: compacted.summary,
            state: compacted.state,
            text: OnceLock::new(),
        }
    }

    /// The state's part of the preamble ([`context::state_text`]).
    pub(super) fn state_text(&self) -> &str {
        self.text.get_or_init(|| context::state_text(&self.state))
    }
}

/// The kept summaries and states of one client (shared by its clones).
#[derive(Debug)]
pub(super) struct CompactedCache(ByteLru<EntityKey, Arc<Parts>>);

impl CompactedCache {
    /// A cache of at most `budget` bytes (0: nothing is kept).
    pub(super) fn new(budget: u64) -> CompactedCache {
        CompactedCache(ByteLru::new(budget))
    }

    /// What is kept for `key` (at the id and version it says).
    pub(super) fn get(&self, key: &EntityKey) -> Option<Arc<Parts>> {
        self.0.get(key)
    }

    /// Keeps `parts` for `key` (replacing any), then drops the least
    /// recently read past the budget.
    pub(super) fn put(&self, key: &EntityKey, parts: Arc<Parts>) {
        let bytes = parts.bytes;
        self.0.put(key.clone(), parts, bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workstream_is_charged_three_times_its_stored_json() {
        let parts = Parts::new(
            1,
            2,
            Compacted {
                summary: None,
                state: WorkstreamState::default(),
                stored_bytes: 100,
            },
        );
        assert_eq!(parts.bytes, 300);
        let cache = CompactedCache::new(600);
        let key = EntityKey::parse("chat", "a").unwrap();
        cache.put(&key, Arc::new(parts));
        assert_eq!(cache.get(&key).map(|p| (p.id, p.version)), Some((1, 2)));
        assert_eq!(cache.0.bytes(), 300);
    }
}
