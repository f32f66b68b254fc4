//! Memory-block compaction: the seed's separate cycle for a workstream's
//! memory entries. Entries accumulate; when there are
//! `trigger_entries` (15) of them the oldest `fold_entries` (10) are folded
//! into `memory_block_summary` and only the rest stay as raw entries.

use std::ops::Range;

use serde::{Deserialize, Serialize};

/// Memory-block settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryBlockConfig {
    /// Fold when at least this many entries are unfolded.
    pub trigger_entries: usize,
    /// How many of the oldest entries one fold takes.
    pub fold_entries: usize,
    /// Longest memory-block summary kept, in chars.
    pub max_summary_chars: usize,
}

impl Default for MemoryBlockConfig {
    fn default() -> Self {
        MemoryBlockConfig {
            trigger_entries: 15,
            fold_entries: 10,
            max_summary_chars: 8_000,
        }
    }
}

impl MemoryBlockConfig {
    /// Which of `unfolded` entries (oldest first) to fold now, if any.
    /// Always leaves at least one entry raw, whatever the settings.
    pub fn fold_due(&self, unfolded: usize) -> Option<Range<usize>> {
        if unfolded == 0 || unfolded < self.trigger_entries {
            return None;
        }
        let take = self.fold_entries.min(unfolded.saturating_sub(1));
        (take > 0).then_some(0..take)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifteen_entries_fold_the_oldest_ten() {
        let c = MemoryBlockConfig::default();
        assert_eq!(c.fold_due(14), None);
        assert_eq!(c.fold_due(15), Some(0..10));
        assert_eq!(c.fold_due(40), Some(0..10));
    }

    #[test]
    fn odd_settings_never_fold_everything_or_nothing() {
        let c = MemoryBlockConfig {
            trigger_entries: 0,
            fold_entries: 50,
            ..Default::default()
        };
        assert_eq!(c.fold_due(0), None);
        assert_eq!(c.fold_due(1), None);
        assert_eq!(c.fold_due(3), Some(0..2));
    }
}
