//! Every engine setting in one tree, with the defaults the seeds name.
//!
//! The worker embeds [`EngineConfig`] as the `[engine]` section of its
//! configuration; `config/default.toml` lists every key with its default
//! (a test checks that the file and [`EngineConfig::default`] agree).

use serde::{Deserialize, Serialize};

use crate::boundary::BoundaryConfig;
use crate::chunk::DEFAULT_CHUNK_MAX_CHARS;
use crate::context::ContextConfig;
use crate::extractive::ExtractiveConfig;
use crate::ledger::LedgerCaps;
use crate::memory::MemoryBlockConfig;
use crate::prompt::summary_output_budget;
use crate::prune::PruneConfig;
use crate::state::StateCaps;
use crate::stated::StatedCaps;
use crate::summary::SUMMARY_ROLLUP_MAX_TOKENS;
use crate::transcript::TranscriptConfig;
use crate::trigger::{TriggerConfigError, TriggerPolicy};

/// Summary size settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SummaryConfig {
    /// Output-token budget of one summarization; `None` derives it from the
    /// context window (4,096, at most 8 % of the window, never below 500).
    pub max_output_tokens: Option<u64>,
    /// A summary above this many tokens gets a rollup pass.
    pub rollup_max_tokens: u64,
}

impl Default for SummaryConfig {
    fn default() -> Self {
        SummaryConfig {
            max_output_tokens: None,
            rollup_max_tokens: SUMMARY_ROLLUP_MAX_TOKENS,
        }
    }
}

/// Chunking settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChunkConfig {
    /// Most chars of transcript per summarization call.
    pub max_chars: usize,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        ChunkConfig {
            max_chars: DEFAULT_CHUNK_MAX_CHARS,
        }
    }
}

/// The whole engine configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Characters per token of the default estimator (the seed's 3).
    pub chars_per_token: u32,
    pub trigger: TriggerPolicy,
    pub boundary: BoundaryConfig,
    pub prune: PruneConfig,
    pub transcript: TranscriptConfig,
    pub chunk: ChunkConfig,
    pub summary: SummaryConfig,
    pub state_caps: StateCaps,
    pub ledger_caps: LedgerCaps,
    /// Bounds of the user's recorded decisions and constraints.
    pub stated_caps: StatedCaps,
    pub extractive: ExtractiveConfig,
    pub memory_block: MemoryBlockConfig,
    pub context: ContextConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            chars_per_token: 3,
            trigger: TriggerPolicy::default(),
            boundary: BoundaryConfig::default(),
            prune: PruneConfig::default(),
            transcript: TranscriptConfig::default(),
            chunk: ChunkConfig::default(),
            summary: SummaryConfig::default(),
            state_caps: StateCaps::default(),
            ledger_caps: LedgerCaps::default(),
            stated_caps: StatedCaps::default(),
            extractive: ExtractiveConfig::default(),
            memory_block: MemoryBlockConfig::default(),
            context: ContextConfig::default(),
        }
    }
}

/// A setting that cannot work, named by its key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("engine.trigger: {0}")]
    Trigger(#[from] TriggerConfigError),
    #[error("engine.{key}: {why}")]
    Invalid { key: &'static str, why: String },
}

impl EngineConfig {
    /// Checks cross-field and range rules; call once at start-up so a bad
    /// value stops the process with the key name instead of misbehaving.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.trigger.validate()?;
        let invalid = |key: &'static str, why: &str| {
            Err(ConfigError::Invalid {
                key,
                why: why.to_owned(),
            })
        };
        if self.chars_per_token == 0 {
            return invalid("chars_per_token", "must be at least 1");
        }
        if self.chunk.max_chars < 1_000 {
            return invalid("chunk.max_chars", "must be at least 1000");
        }
        if self.summary.max_output_tokens.is_some_and(|t| t < 100) {
            return invalid("summary.max_output_tokens", "must be at least 100");
        }
        if self.summary.rollup_max_tokens < 1_000 {
            return invalid("summary.rollup_max_tokens", "must be at least 1000");
        }
        let ratio = self.context.overflow_guard_ratio;
        if !(ratio.is_finite() && ratio > 0.0 && ratio <= 1.0) {
            return invalid("context.overflow_guard_ratio", "must be in (0, 1]");
        }
        if self.stated_caps.current == 0 {
            return invalid(
                "stated_caps.current",
                "must be at least 1: the user's current decisions are never dropped altogether",
            );
        }
        if self.memory_block.fold_entries == 0 {
            return invalid("memory_block.fold_entries", "must be at least 1");
        }
        if self.memory_block.trigger_entries <= self.memory_block.fold_entries {
            return invalid(
                "memory_block.trigger_entries",
                "must be greater than memory_block.fold_entries",
            );
        }
        Ok(())
    }

    /// The summary output budget in force.
    pub fn summary_budget(&self) -> u64 {
        self.summary
            .max_output_tokens
            .unwrap_or_else(|| summary_output_budget(self.trigger.context_window()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_the_seeds() {
        let c = EngineConfig::default();
        c.validate().unwrap();
        assert_eq!(c.chars_per_token, 3);
        assert_eq!(c.trigger.threshold(), Some(140_000));
        assert_eq!(c.boundary.tail_messages, 6);
        assert_eq!(c.chunk.max_chars, 120_000);
        assert_eq!(c.summary.rollup_max_tokens, 80_000);
        assert_eq!(c.summary_budget(), 4_096);
        assert_eq!(c.memory_block.trigger_entries, 15);
        assert_eq!((c.stated_caps.current, c.stated_caps.superseded), (48, 16));
    }

    #[test]
    fn invalid_values_name_their_key() {
        let mut c = EngineConfig::default();
        c.memory_block.trigger_entries = 5;
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.starts_with("engine.memory_block.trigger_entries"),
            "{err}"
        );
        c.memory_block.trigger_entries = 15;
        c.context.overflow_guard_ratio = 1.5;
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.starts_with("engine.context.overflow_guard_ratio"),
            "{err}"
        );
    }
}
