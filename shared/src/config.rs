//! Every engine setting in one tree, with the defaults the seeds name.
//!
//! The worker embeds [`EngineConfig`] as the `[engine]` section of its
//! configuration; `config/default.toml` lists every key with its default
//! (a test checks that the file and [`EngineConfig::default`] agree).
//!
//! # Settings that shrink together
//!
//! A smaller model needs several settings to shrink at once, and
//! [`EngineConfig::validate`] refuses combinations that cannot work, naming
//! both keys and what would fit:
//! - the trigger stays below the window minus the output reserve (the
//!   trigger's own rules, plus `input_limit + output_reserve <= window`);
//! - the summary output budget stays below the trigger: a summary that
//!   large would make the workstream due again at once;
//! - `summary.rollup_max_tokens` is at least the output budget, or every
//!   summary the model writes could be rolled up again.
//!
//! With an LLM summarizer, [`EngineConfig::validate_llm_calls`] adds the
//! rule a small window breaks first: one summarization call (the prompt,
//! the previous summary, a chunk of `chunk.max_chars` and the answer) must
//! fit `trigger.context_window`, which is taken as the summarizer's window
//! too (as the derived output budget already is). The offline summarizer
//! has no window, so the CLI and an extractive worker do not check it.
//!
//! # Sizes derived from the window
//!
//! Five sizes may be left unset, and are then derived from
//! `trigger.context_window` so that a configuration that names only the
//! model's window passes both checks (8k to 1M tokens): the seeds' constants
//! for large windows, scaled down for small ones.
//! - `trigger.output_reserve` and `trigger.safety_margin`: a quarter and a
//!   sixteenth of the window, at most the seed's 32,000 and 8,000
//!   ([`crate::trigger::derived_output_reserve`],
//!   [`crate::trigger::derived_safety_margin`]); derived as the trigger is
//!   read.
//! - `summary.max_output_tokens`: [`EngineConfig::derived_summary_budget`],
//!   CoWork's 4,096 (at most 8 % of the window) and at most half the
//!   trigger.
//! - `chunk.max_chars`: [`EngineConfig::derived_chunk_max_chars`], half the
//!   room a summarization call leaves in the window, at most the seed's
//!   120,000; derived as the engine configuration is read, the only place
//!   that knows both the chunk and the window.
//!
//! - `evidence.share_of_trigger`: [`EngineConfig::evidence_share`], the
//!   share of the trigger that is half the window (the seeds'
//!   post-compaction target), between 0.5 and 0.8.
//!
//! A value that is set is used as it is, and refused as before when it
//! cannot work. Written back, a derived value is left out.

use serde::{Deserialize, Serialize};

use crate::boundary::BoundaryConfig;
use crate::chunk::DEFAULT_CHUNK_MAX_CHARS;
use crate::context::ContextConfig;
use crate::evidence::EvidenceConfig;
use crate::extractive::ExtractiveConfig;
use crate::memory::MemoryBlockConfig;
use crate::prompt::{self, summary_output_budget, CompactionInput};
use crate::prune::PruneConfig;
use crate::state::{StateCaps, WorkstreamState};
use crate::stated::StatedCaps;
use crate::summary::{SummaryFormat, SUMMARY_ROLLUP_MAX_TOKENS};
use crate::tokens::{CharEstimator, TokenEstimator};
use crate::transcript::TranscriptConfig;
use crate::trigger::{TriggerConfigError, TriggerPolicy};

/// The smallest `chunk.max_chars` accepted.
pub const MIN_CHUNK_MAX_CHARS: usize = 1_000;

/// The smallest `summary.max_output_tokens` accepted (and derived).
pub const MIN_MAX_OUTPUT_TOKENS: u64 = 100;

/// Summary format and size settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SummaryConfig {
    /// The sections a summary is written in: `sections` (KEY FACTS,
    /// CONVERSATION FLOW, OPEN THREADS) or `handoff9` (CoWork's nine
    /// hand-off sections and framing). A summary stored in the other format
    /// keeps rendering as written and is converted at the next compaction.
    pub format: SummaryFormat,
    /// Output-token budget of one summarization; `None` derives it from the
    /// trigger ([`EngineConfig::derived_summary_budget`]).
    pub max_output_tokens: Option<u64>,
    /// A summary above this many tokens gets a rollup pass.
    pub rollup_max_tokens: u64,
}

impl Default for SummaryConfig {
    fn default() -> Self {
        SummaryConfig {
            format: SummaryFormat::Sections,
            max_output_tokens: None,
            rollup_max_tokens: SUMMARY_ROLLUP_MAX_TOKENS,
        }
    }
}

/// Chunking settings.
#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(from = "ChunkSpec", into = "ChunkSpec")]
pub struct ChunkConfig {
    /// Most chars of transcript per summarization call: the value in force,
    /// set or derived ([`EngineConfig::derived_chunk_max_chars`]).
    pub max_chars: usize,
    /// `max_chars` is to be derived (read without one), or is written as
    /// unset (equal to the derived one). Only [`EngineConfig`]'s serde,
    /// which knows the window, sets or reads this mark; it is no part of the
    /// value (equality ignores it).
    unset: bool,
}

/// `[engine.chunk]` as a configuration writes it.
#[derive(Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ChunkSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_chars: Option<usize>,
}

impl From<ChunkSpec> for ChunkConfig {
    fn from(spec: ChunkSpec) -> ChunkConfig {
        ChunkConfig {
            max_chars: spec.max_chars.unwrap_or(DEFAULT_CHUNK_MAX_CHARS),
            unset: spec.max_chars.is_none(),
        }
    }
}

impl From<ChunkConfig> for ChunkSpec {
    fn from(chunk: ChunkConfig) -> ChunkSpec {
        ChunkSpec {
            max_chars: (!chunk.unset).then_some(chunk.max_chars),
        }
    }
}

/// Unset: the seed's 120,000 chars, what a large window derives (a window
/// read from a configuration replaces it by its own).
impl Default for ChunkConfig {
    fn default() -> Self {
        ChunkSpec::default().into()
    }
}

impl PartialEq for ChunkConfig {
    fn eq(&self, other: &ChunkConfig) -> bool {
        self.max_chars == other.max_chars
    }
}

impl Eq for ChunkConfig {}

impl std::fmt::Debug for ChunkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkConfig")
            .field("max_chars", &self.max_chars)
            .finish()
    }
}

/// The whole engine configuration.
///
/// Its serde (by hand, below) reads and writes the table as derived, then
/// derives an unset `chunk.max_chars` from the rest, or leaves out a
/// derived one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[serde(remote = "Self")]
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
    /// `[engine.ledger_caps]`, the bounds of the artifact ledger, which is
    /// gone (the evidence carries exact values): still read so that a
    /// configuration that sets it loads, then ignored and never written
    /// ([`EngineConfig::deprecated_keys`]).
    #[serde(default, skip_serializing)]
    pub ledger_caps: Option<serde::de::IgnoredAny>,
    /// Bounds of the user's recorded decisions and constraints.
    pub stated_caps: StatedCaps,
    pub extractive: ExtractiveConfig,
    pub memory_block: MemoryBlockConfig,
    pub context: ContextConfig,
    /// Summaries of the branches the head leaves.
    pub branch: BranchConfig,
    /// Verbatim evidence lines a context keeps of compacted messages.
    pub evidence: EvidenceConfig,
}

/// `[engine.branch]`: summaries of abandoned branches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BranchConfig {
    /// Estimated tokens of the abandoned branch's messages a summary reads,
    /// filled newest first (pi's budget): the end of a branch, where it was
    /// left, matters most. The newest message is always read.
    pub budget_tokens: u64,
}

/// Default `[engine.branch] budget_tokens`.
pub const DEFAULT_BRANCH_BUDGET_TOKENS: u64 = 16_000;

impl Default for BranchConfig {
    fn default() -> Self {
        BranchConfig {
            budget_tokens: DEFAULT_BRANCH_BUDGET_TOKENS,
        }
    }
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
            ledger_caps: None,
            stated_caps: StatedCaps::default(),
            extractive: ExtractiveConfig::default(),
            memory_block: MemoryBlockConfig::default(),
            context: ContextConfig::default(),
            branch: BranchConfig::default(),
            evidence: EvidenceConfig::default(),
        }
    }
}

impl<'de> Deserialize<'de> for EngineConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut engine = EngineConfig::deserialize(deserializer)?;
        if engine.chunk.unset {
            engine.chunk.max_chars = engine.derived_chunk_max_chars();
            engine.chunk.unset = false;
        }
        Ok(engine)
    }
}

impl Serialize for EngineConfig {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut written = self.clone();
        written.chunk.unset = self.chunk.max_chars == self.derived_chunk_max_chars();
        EngineConfig::serialize(&written, serializer)
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
    /// Keys this configuration sets that no longer do anything and are
    /// ignored (for a deprecation warning where it is loaded).
    pub fn deprecated_keys(&self) -> Vec<&'static str> {
        let mut keys = Vec::new();
        if self.ledger_caps.is_some() {
            keys.push("engine.ledger_caps");
        }
        keys
    }

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
        if self.branch.budget_tokens == 0 {
            return invalid("branch.budget_tokens", "must be at least 1");
        }
        if let Err(why) = self.evidence.validate() {
            return invalid("evidence", &why);
        }
        if self.chunk.max_chars < MIN_CHUNK_MAX_CHARS {
            return invalid("chunk.max_chars", "must be at least 1000");
        }
        if self
            .summary
            .max_output_tokens
            .is_some_and(|t| t < MIN_MAX_OUTPUT_TOKENS)
        {
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
        self.validate_sizes()
    }

    /// The rules between the window, the trigger and the summary's size.
    fn validate_sizes(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, why: String| Err(ConfigError::Invalid { key, why });
        if let TriggerPolicy::Overflow {
            context_window,
            input_limit: Some(limit),
            output_reserve,
        } = self.trigger
        {
            if context_window > 0 && limit.saturating_add(output_reserve) > context_window {
                return invalid(
                    "trigger.input_limit",
                    format!(
                        "{limit} plus engine.trigger.output_reserve ({output_reserve}) is more \
                         than engine.trigger.context_window ({context_window}): the model's answer \
                         would not fit after a full input; at most {} fits",
                        context_window.saturating_sub(output_reserve)
                    ),
                );
            }
        }
        let budget = self.summary_budget();
        if let Some(threshold) = self.trigger.threshold() {
            if budget >= threshold {
                return invalid(
                    "summary.max_output_tokens",
                    format!(
                        "{} is not below the trigger ({threshold} tokens, from engine.trigger): \
                         a summary that large would make the workstream due again at once; \
                         set it to at most {} or raise the trigger",
                        match self.summary.max_output_tokens {
                            Some(_) => budget.to_string(),
                            None => format!("unset, so {}", self.describe_budget(budget)),
                        },
                        threshold.saturating_sub(1)
                    ),
                );
            }
        }
        if self.summary.rollup_max_tokens < budget {
            return invalid(
                "summary.rollup_max_tokens",
                format!(
                    "{} is below the summary output budget ({}): every summary the model \
                     writes could be rolled up again; set it to at least {budget} or lower the budget",
                    self.summary.rollup_max_tokens,
                    self.describe_budget(budget)
                ),
            );
        }
        Ok(())
    }

    /// Checks that one summarization call fits the model's window
    /// (`trigger.context_window`; 0, unlimited, always fits). Only an LLM
    /// summarizer has a window: the worker calls this when its provider is
    /// one, on top of [`EngineConfig::validate`].
    pub fn validate_llm_calls(&self) -> Result<(), ConfigError> {
        let window = self.trigger.context_window();
        if window == 0 {
            return Ok(());
        }
        let call = self.summarization_call();
        if call.total() <= window {
            return Ok(());
        }
        let fixed = format!(
            "the prompt takes {} tokens, the previous summary and the answer 2 x {} (the \
             summary output budget, engine.summary.max_output_tokens)",
            call.prompt, call.answer
        );
        match self.chunk_chars_within(window) {
            Some(chars) => Err(ConfigError::Invalid {
                key: "chunk.max_chars",
                why: format!(
                    "a summarization call needs about {} tokens, more than \
                     engine.trigger.context_window ({window}): {fixed}, and a chunk of {} chars \
                     about {} (at engine.chars_per_token = {}); at most {chars} chars fit",
                    call.total(),
                    self.chunk.max_chars,
                    call.chunk,
                    self.chars_per_token,
                ),
            }),
            None => Err(ConfigError::Invalid {
                key: "trigger.context_window",
                why: format!(
                    "{window} tokens cannot hold a summarization call: {fixed}, which leaves no \
                     room for a chunk of {MIN_CHUNK_MAX_CHARS} chars (engine.chunk.max_chars); \
                     lower engine.summary.max_output_tokens or use a model with a larger window"
                ),
            }),
        }
    }

    /// The defaults for a model of `context_window` tokens: what a
    /// configuration that sets only `trigger.context_window` reads as.
    pub fn for_window(context_window: u64) -> EngineConfig {
        let mut engine = EngineConfig {
            trigger: TriggerPolicy::for_window(context_window),
            ..EngineConfig::default()
        };
        engine.chunk.max_chars = engine.derived_chunk_max_chars();
        engine
    }

    /// The summary output budget in force.
    pub fn summary_budget(&self) -> u64 {
        self.summary
            .max_output_tokens
            .unwrap_or_else(|| self.derived_summary_budget())
    }

    /// The share of the trigger a context may fill after a compaction,
    /// evidence included: `evidence.share_of_trigger`, or when unset
    /// [`crate::evidence::derived_share_of_trigger`] (half the window).
    /// Without a threshold only 0 (evidence off) means anything:
    /// `evidence.max_tokens` is the budget.
    pub fn evidence_share(&self) -> f64 {
        self.evidence.share_of_trigger.unwrap_or_else(|| {
            crate::evidence::derived_share_of_trigger(
                self.trigger.context_window(),
                self.trigger.threshold(),
            )
        })
    }

    /// The offline summarizer's settings in force: `quote_lines`, when
    /// unset, is on only while the evidence is off (the evidence keeps the
    /// lines that hold values).
    pub fn extractive_config(&self) -> ExtractiveConfig {
        let mut config = self.extractive;
        if config.quote_lines.is_none() {
            config.quote_lines = Some(self.evidence_share() <= 0.0);
        }
        config
    }

    /// `summary.max_output_tokens` when unset: CoWork's budget for the
    /// window ([`summary_output_budget`]: 4,096, at most 8 % of the window,
    /// at least 500), and at most half the trigger threshold, so that a
    /// fresh summary leaves the workstream room before it is due again;
    /// never below [`MIN_MAX_OUTPUT_TOKENS`]. 8,000 → 640, 32,000 → 2,560,
    /// 128,000 and more → 4,096; a 200,000 window with ratio 0.02 (trigger
    /// 4,000) → 2,000.
    pub fn derived_summary_budget(&self) -> u64 {
        let budget = summary_output_budget(self.trigger.context_window());
        match self.trigger.threshold() {
            Some(threshold) => budget.min(threshold / 2).max(MIN_MAX_OUTPUT_TOKENS),
            None => budget,
        }
    }

    /// `chunk.max_chars` when unset: half the room one summarization call
    /// leaves in `trigger.context_window` after the prompt, the previous
    /// summary and the answer ([`EngineConfig::summarization_call`] less its
    /// chunk), in chars at `chars_per_token`; the other half stays free for
    /// the workstream state and the user's statements, which travel in the
    /// same prompt. At least [`MIN_CHUNK_MAX_CHARS`], at most the seed's
    /// [`DEFAULT_CHUNK_MAX_CHARS`], which an unlimited window (0) gets.
    /// With the other sizes derived and today's prompt (about 940 tokens):
    /// 8,000 → 8,670, 32,000 → 38,910, and 120,000 from about 89,000 up.
    pub fn derived_chunk_max_chars(&self) -> usize {
        let window = self.trigger.context_window();
        if window == 0 {
            return DEFAULT_CHUNK_MAX_CHARS;
        }
        let call = self.summarization_call();
        let fixed = call
            .prompt
            .saturating_add(call.previous_summary)
            .saturating_add(call.answer);
        let tokens = window.saturating_sub(fixed) / 2;
        let chars = tokens.saturating_mul(u64::from(self.chars_per_token.max(1)));
        usize::try_from(chars)
            .unwrap_or(usize::MAX)
            .clamp(MIN_CHUNK_MAX_CHARS, DEFAULT_CHUNK_MAX_CHARS)
    }

    /// What one summarization call sends and asks back, in estimated tokens.
    pub fn summarization_call(&self) -> CallSize {
        let estimator = CharEstimator::new(self.chars_per_token);
        let answer = self.summary_budget();
        // The frame of the real prompt, measured with empty content (the
        // split-turn note included: it is the longest fixed text).
        let state = WorkstreamState::default();
        let frame = prompt::compaction_prompt(
            &CompactionInput {
                previous_summary: None,
                state: &state,
                new_messages: "",
                instructions: None,
                split_turn: true,
                format: self.summary.format,
            },
            answer,
        );
        CallSize {
            prompt: estimator.count(&frame.system) + estimator.count(&frame.user),
            previous_summary: answer,
            chunk: (self.chunk.max_chars as u64).div_ceil(u64::from(self.chars_per_token.max(1))),
            answer,
        }
    }

    /// The largest `chunk.max_chars` whose call fits `window` tokens, if
    /// at least [`MIN_CHUNK_MAX_CHARS`] does.
    fn chunk_chars_within(&self, window: u64) -> Option<usize> {
        let call = self.summarization_call();
        let room = window.checked_sub(call.total() - call.chunk)?;
        let chars = usize::try_from(room.saturating_mul(u64::from(self.chars_per_token.max(1))))
            .unwrap_or(usize::MAX);
        (chars >= MIN_CHUNK_MAX_CHARS).then_some(chars)
    }

    /// The output budget as the operator set it, or how it was derived.
    fn describe_budget(&self, budget: u64) -> String {
        match self.summary.max_output_tokens {
            Some(_) => format!("engine.summary.max_output_tokens = {budget}"),
            None => format!(
                "{budget} tokens, the budget engine.summary.max_output_tokens derives from \
                 engine.trigger.context_window = {} and the trigger",
                self.trigger.context_window()
            ),
        }
    }
}

/// One summarization call, in tokens as the engine estimates them
/// (`chars / chars_per_token`; the default 3 overestimates real
/// tokenizers, so a call that fits here fits the model).
///
/// The state and the user's statements also travel in the prompt; they
/// are bounded by their caps, not counted here, so leave the window some
/// room beyond [`CallSize::total`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSize {
    /// The system prompt and the document's frame.
    pub prompt: u64,
    /// The previous summary: a summarizer writes it within the output
    /// budget, so at most that.
    pub previous_summary: u64,
    /// One transcript chunk of `chunk.max_chars`.
    pub chunk: u64,
    /// The answer: the summary output budget.
    pub answer: u64,
}

impl CallSize {
    pub fn total(&self) -> u64 {
        self.prompt
            .saturating_add(self.previous_summary)
            .saturating_add(self.chunk)
            .saturating_add(self.answer)
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
        assert_eq!((c.stated_caps.current, c.stated_caps.superseded), (16, 6));
    }

    #[test]
    fn a_configuration_that_still_sets_the_ledger_caps_loads_and_says_so() {
        let old: EngineConfig = toml::from_str(
            "[ledger_caps]\npaths = 128\nmax_tokens = 6000\n\n[boundary]\ntail_messages = 8\n",
        )
        .unwrap();
        assert_eq!(old.boundary.tail_messages, 8);
        assert_eq!(old.deprecated_keys(), ["engine.ledger_caps"]);
        let written = toml::to_string(&old).unwrap();
        assert!(!written.contains("ledger"), "{written}");
        assert!(EngineConfig::default().deprecated_keys().is_empty());
    }

    #[test]
    fn the_offline_summary_quotes_lines_only_while_the_evidence_is_off() {
        let on = EngineConfig::default();
        assert_eq!(on.extractive.quote_lines, None);
        assert_eq!(on.extractive_config().quote_lines, Some(false));
        let mut off = EngineConfig::default();
        off.evidence.share_of_trigger = Some(0.0);
        assert_eq!(off.extractive_config().quote_lines, Some(true));
        // Set, it is what it says either way.
        let mut set = EngineConfig::default();
        set.extractive.quote_lines = Some(true);
        assert_eq!(set.extractive_config().quote_lines, Some(true));
        off.extractive.quote_lines = Some(false);
        assert_eq!(off.extractive_config().quote_lines, Some(false));
    }

    /// A small model: 8k window, trigger at 5,500 tokens.
    fn small() -> EngineConfig {
        EngineConfig {
            trigger: TriggerPolicy::Threshold {
                context_window: 8_000,
                ratio: 0.7,
                output_reserve: 2_000,
                safety_margin: 500,
            },
            ..EngineConfig::default()
        }
    }

    fn refusal(result: Result<(), ConfigError>) -> String {
        result.expect_err("refused").to_string()
    }

    #[test]
    fn the_defaults_fit_an_llm_call_and_an_unlimited_window_always_does() {
        EngineConfig::default().validate_llm_calls().unwrap();
        let mut unlimited = EngineConfig {
            trigger: TriggerPolicy::Utilization {
                context_window: 0,
                ratio: 0.9,
            },
            ..EngineConfig::default()
        };
        unlimited.chunk.max_chars = usize::MAX / 2;
        unlimited.validate().unwrap();
        unlimited.validate_llm_calls().unwrap();
    }

    #[test]
    fn a_chunk_too_big_for_the_window_is_refused_with_what_fits() {
        let mut c = small();
        c.validate().unwrap();
        let err = refusal(c.validate_llm_calls());
        assert!(err.starts_with("engine.chunk.max_chars: "), "{err}");
        assert!(
            err.contains("engine.trigger.context_window (8000)"),
            "{err}"
        );
        assert!(err.contains("a chunk of 120000 chars about 40000"), "{err}");
        let fits: usize = err
            .rsplit("at most ")
            .next()
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no figure in {err}"));
        c.chunk.max_chars = fits;
        c.validate_llm_calls().unwrap();
        assert_eq!(
            c.summarization_call().total(),
            8_000,
            "the figure is the largest that fits"
        );
        c.chunk.max_chars = fits + 3;
        assert!(c.validate_llm_calls().is_err());
    }

    #[test]
    fn a_window_without_room_for_any_chunk_names_the_window() {
        let mut c = EngineConfig {
            trigger: TriggerPolicy::Threshold {
                context_window: 2_048,
                ratio: 0.7,
                output_reserve: 256,
                safety_margin: 64,
            },
            ..EngineConfig::default()
        };
        c.chunk.max_chars = MIN_CHUNK_MAX_CHARS;
        c.validate().unwrap();
        let err = refusal(c.validate_llm_calls());
        assert!(
            err.starts_with("engine.trigger.context_window: 2048 tokens"),
            "{err}"
        );
        assert!(err.contains("engine.summary.max_output_tokens"), "{err}");
        // A smaller answer makes room.
        c.summary.max_output_tokens = Some(200);
        c.validate_llm_calls().unwrap();
    }

    #[test]
    fn the_call_estimate_bounds_a_real_prompt() {
        let mut c = small();
        c.chunk.max_chars = 9_000;
        let call = c.summarization_call();
        let estimator = CharEstimator::new(c.chars_per_token);
        let mut previous = crate::Summary {
            key_facts: (0..400).map(|i| format!("fact number {i}")).collect(),
            ..Default::default()
        };
        previous.fit_to(c.summary_budget(), &estimator);
        let state = WorkstreamState::default();
        let chunk = "y".repeat(c.chunk.max_chars);
        let real = prompt::compaction_prompt(
            &CompactionInput {
                previous_summary: Some(&previous),
                state: &state,
                new_messages: &chunk,
                instructions: None,
                split_turn: true,
                format: c.summary.format,
            },
            c.summary_budget(),
        );
        let sent = estimator.count(&real.system) + estimator.count(&real.user);
        assert!(
            sent + real.max_output_tokens <= call.total(),
            "{sent} + {} within {call:?}",
            real.max_output_tokens
        );
    }

    #[test]
    fn a_summary_budget_at_the_trigger_is_refused() {
        let mut c = small();
        c.summary.max_output_tokens = Some(5_500);
        let err = refusal(c.validate());
        assert!(
            err.starts_with("engine.summary.max_output_tokens: "),
            "{err}"
        );
        assert!(err.contains("the trigger (5500 tokens"), "{err}");
        assert!(err.contains("at most 5499"), "{err}");
        c.summary.max_output_tokens = Some(5_499);
        c.validate().unwrap();
        // The derived budget is checked too: it keeps below a low trigger
        // while there is room (400 tokens: 200) ...
        let mut tiny = EngineConfig {
            trigger: TriggerPolicy::Threshold {
                context_window: 2_000,
                ratio: 0.2,
                output_reserve: 100,
                safety_margin: 0,
            },
            ..EngineConfig::default()
        };
        tiny.validate().unwrap();
        assert_eq!(tiny.summary_budget(), 200);
        // ... and is refused, saying so, when even the smallest is not
        // below it (100 tokens).
        tiny.trigger = TriggerPolicy::Threshold {
            context_window: 2_000,
            ratio: 0.05,
            output_reserve: 100,
            safety_margin: 0,
        };
        let err = refusal(tiny.validate());
        assert!(err.contains("unset, so 100 tokens, the budget"), "{err}");
        assert!(
            err.contains("engine.trigger.context_window = 2000 and the trigger"),
            "{err}"
        );
    }

    /// What a configuration naming only `trigger.context_window` reads as.
    fn window_only(window: u64, extra: &str) -> EngineConfig {
        let text = format!("[trigger]\npolicy = \"threshold\"\ncontext_window = {window}\n{extra}");
        toml::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn unset_sizes_derive_from_the_window_and_fit_it() {
        // (window, output_reserve, safety_margin, trigger, summary budget,
        // chunk chars: the seed's for large windows, below them half of
        // what the prompt, the previous summary and the answer leave)
        for (window, reserve, margin, trigger, budget, seed_chunk) in [
            (8_000, 2_000, 500, 5_500, 640, None),
            (16_000, 4_000, 1_000, 11_000, 1_280, None),
            (32_000, 8_000, 2_000, 22_000, 2_560, None),
            (128_000, 32_000, 8_000, 88_000, 4_096, Some(120_000)),
            (200_000, 32_000, 8_000, 140_000, 4_096, Some(120_000)),
            (1_000_000, 32_000, 8_000, 700_000, 4_096, Some(120_000)),
        ] {
            let c = window_only(window, "");
            assert_eq!(
                c.trigger,
                TriggerPolicy::Threshold {
                    context_window: window,
                    ratio: 0.7,
                    output_reserve: reserve,
                    safety_margin: margin,
                },
                "{window}"
            );
            assert_eq!(c.trigger.threshold(), Some(trigger), "{window}");
            assert_eq!(c.summary.max_output_tokens, None, "{window}");
            assert_eq!(c.summary_budget(), budget, "{window}");
            let prompt = c.summarization_call().prompt;
            let half_room = (window - prompt - 2 * budget) / 2;
            let chunk = seed_chunk.unwrap_or(half_room as usize * 3);
            assert_eq!(c.chunk.max_chars, chunk, "{window}, prompt {prompt}");
            assert_eq!(c, EngineConfig::for_window(window), "{window}");
            c.validate().unwrap_or_else(|e| panic!("{window}: {e}"));
            c.validate_llm_calls()
                .unwrap_or_else(|e| panic!("{window}: {e}"));
            let call = c.summarization_call();
            assert!(
                call.total() + call.chunk <= window,
                "{window}: the chunk takes at most half the room: {call:?}"
            );
            // The longer prompt of the nine sections gets a smaller chunk.
            let handoff = window_only(window, "[summary]\nformat = \"handoff9\"\n");
            handoff.validate().unwrap();
            handoff.validate_llm_calls().unwrap();
            assert!(handoff.chunk.max_chars <= chunk, "{window}");
        }
        // Large windows get the seeds' constants: the defaults.
        assert_eq!(window_only(200_000, ""), EngineConfig::default());
        assert_eq!(
            EngineConfig::default().derived_chunk_max_chars(),
            DEFAULT_CHUNK_MAX_CHARS
        );
        // Fewer chars per token, fewer chars, still fitting.
        let three = window_only(8_000, "");
        let two: EngineConfig = toml::from_str(
            "chars_per_token = 2\n[trigger]\npolicy = \"threshold\"\ncontext_window = 8000\n",
        )
        .unwrap();
        assert!(
            two.chunk.max_chars < three.chunk.max_chars * 2 / 3,
            "{} vs {}",
            two.chunk.max_chars,
            three.chunk.max_chars
        );
        two.validate_llm_calls().unwrap();
        let call = two.summarization_call();
        assert!(call.total() + call.chunk <= 8_000, "{call:?}");
        // An unlimited model: the seeds' sizes.
        let unlimited = window_only(0, "");
        assert_eq!(unlimited.chunk.max_chars, DEFAULT_CHUNK_MAX_CHARS);
        unlimited.validate().unwrap();
        unlimited.validate_llm_calls().unwrap();
    }

    #[test]
    fn a_low_trigger_ratio_gets_a_summary_budget_below_it() {
        // 8 % of 32,000 is 2,560, above this trigger of 1,600 tokens.
        let c = window_only(32_000, "ratio = 0.05\n");
        assert_eq!(c.trigger.threshold(), Some(1_600));
        assert_eq!(c.summary_budget(), 800, "half the trigger");
        c.validate().unwrap();
        c.validate_llm_calls().unwrap();
        // Set by hand, the same 2,560 is refused as before.
        let err = refusal(
            window_only(
                32_000,
                "ratio = 0.05\n[summary]\nmax_output_tokens = 2560\n",
            )
            .validate(),
        );
        assert!(
            err.starts_with(
                "engine.summary.max_output_tokens: 2560 is not below the trigger (1600"
            ),
            "{err}"
        );
    }

    #[test]
    fn explicit_sizes_override_the_derived_ones_and_are_checked_as_before() {
        // The seeds' sizes, set by hand for an 8k model: refused as before,
        // one after the other.
        let err = refusal(
            window_only(8_000, "output_reserve = 32000\nsafety_margin = 8000\n").validate(),
        );
        assert_eq!(
            err,
            "engine.trigger: output_reserve + safety_margin (40000) leaves no room in a context \
             window of 8000"
        );
        let c = window_only(8_000, "[chunk]\nmax_chars = 120000\n");
        assert_eq!(c.chunk.max_chars, 120_000);
        c.validate().unwrap();
        let err = refusal(c.validate_llm_calls());
        assert!(err.starts_with("engine.chunk.max_chars: "), "{err}");
        assert!(err.contains("a chunk of 120000 chars"), "{err}");
        let err = refusal(window_only(8_000, "[summary]\nmax_output_tokens = 6000\n").validate());
        assert!(
            err.starts_with("engine.summary.max_output_tokens: 6000 is not below the trigger"),
            "{err}"
        );
        // Values that fit are used as they are, the rest still derived.
        let c = window_only(
            8_000,
            "output_reserve = 1000\n[chunk]\nmax_chars = 5000\n[summary]\nmax_output_tokens = 300\n",
        );
        assert_eq!(
            c.trigger,
            TriggerPolicy::Threshold {
                context_window: 8_000,
                ratio: 0.7,
                output_reserve: 1_000,
                safety_margin: 500,
            }
        );
        assert_eq!(c.trigger.threshold(), Some(5_600));
        assert_eq!((c.chunk.max_chars, c.summary_budget()), (5_000, 300));
        c.validate().unwrap();
        c.validate_llm_calls().unwrap();
        // A chunk set to exactly the derived value is that value.
        let derived = window_only(8_000, "");
        let same = window_only(
            8_000,
            &format!("[chunk]\nmax_chars = {}\n", derived.chunk.max_chars),
        );
        assert_eq!(same, derived);
    }

    #[test]
    fn an_unset_evidence_share_brings_a_context_to_half_its_window() {
        // Whatever the window and the trigger's ratio, a compaction may
        // fill half the window: the share of the trigger that is.
        for window in [8_000u64, 32_000, 128_000, 200_000, 1_000_000] {
            let c = window_only(window, "");
            let threshold = c.trigger.threshold().unwrap();
            let filled = threshold as f64 * c.evidence_share();
            assert!(
                (filled - window as f64 / 2.0).abs() < 1.0,
                "{window}: {filled} of a {threshold} trigger"
            );
            let share = c.evidence_share();
            assert!((0.5..=0.8).contains(&share), "{window}: {share}");
        }
        // The utilization policy's 0.9: 0.56 of the trigger.
        let mut c = window_only(200_000, "");
        c.trigger = TriggerPolicy::Utilization {
            context_window: 200_000,
            ratio: 0.9,
        };
        assert!((c.evidence_share() - 0.5 / 0.9).abs() < 1e-9);
        // A low trigger ratio is held to 0.8, a share set by hand is kept,
        // and without a threshold only 0 would mean anything.
        let c = window_only(200_000, "ratio = 0.3\n");
        assert_eq!(c.evidence_share(), 0.8);
        let c = window_only(200_000, "[evidence]\nshare_of_trigger = 0.4\n");
        assert_eq!(c.evidence_share(), 0.4);
        assert!(window_only(0, "").evidence_share() > 0.0);
        assert!(
            refusal(window_only(200_000, "[evidence]\nshare_of_trigger = 0.95\n").validate())
                .contains("share_of_trigger")
        );
    }

    #[test]
    fn derived_sizes_are_written_as_unset_and_set_ones_as_set() {
        let written = toml::Value::try_from(EngineConfig::default()).unwrap();
        assert!(written["chunk"].get("max_chars").is_none(), "{written}");
        assert!(
            written["trigger"].get("output_reserve").is_none(),
            "{written}"
        );
        assert!(
            written["trigger"].get("safety_margin").is_none(),
            "{written}"
        );
        assert!(
            written["summary"].get("max_output_tokens").is_none(),
            "{written}"
        );
        assert!(
            written["evidence"].get("share_of_trigger").is_none(),
            "{written}"
        );
        // A chunk set by hand is written, and reads back the same even once
        // the window changes.
        let mut c = EngineConfig::for_window(8_000);
        c.chunk.max_chars = 5_000;
        let written = toml::Value::try_from(&c).unwrap();
        assert_eq!(written["chunk"]["max_chars"].as_integer(), Some(5_000));
        let read: EngineConfig = written.try_into().unwrap();
        assert_eq!(read, c);
        let mut large = toml::Value::try_from(&c).unwrap();
        large["trigger"]["context_window"] = toml::Value::Integer(200_000);
        let large: EngineConfig = large.try_into().unwrap();
        assert_eq!(large.chunk.max_chars, 5_000);
        assert_eq!(
            large.trigger.threshold(),
            Some(140_000),
            "reserve derived for 200k"
        );
        // One equal to the derived value is written as unset.
        let derived = toml::Value::try_from(EngineConfig::for_window(8_000)).unwrap();
        assert!(derived["chunk"].get("max_chars").is_none(), "{derived}");
    }

    #[test]
    fn a_rollup_limit_below_the_summary_budget_is_refused() {
        let mut c = EngineConfig::default();
        c.summary.rollup_max_tokens = 2_000;
        let err = refusal(c.validate());
        assert!(
            err.starts_with("engine.summary.rollup_max_tokens: 2000"),
            "{err}"
        );
        assert!(err.contains("engine.summary.max_output_tokens"), "{err}");
        assert!(err.contains("at least 4096"), "{err}");
        c.summary.max_output_tokens = Some(2_000);
        c.validate().unwrap();
    }

    #[test]
    fn an_input_limit_leaving_no_room_for_the_answer_is_refused() {
        let mut c = EngineConfig {
            trigger: TriggerPolicy::Overflow {
                context_window: 400_000,
                input_limit: Some(272_000),
                output_reserve: 128_000,
            },
            ..EngineConfig::default()
        };
        c.validate().unwrap();
        c.trigger = TriggerPolicy::Overflow {
            context_window: 400_000,
            input_limit: Some(300_000),
            output_reserve: 128_000,
        };
        let err = refusal(c.validate());
        assert!(
            err.starts_with("engine.trigger.input_limit: 300000"),
            "{err}"
        );
        assert!(
            err.contains("engine.trigger.output_reserve (128000)"),
            "{err}"
        );
        assert!(err.contains("at most 272000 fits"), "{err}");
    }

    #[test]
    fn the_summary_format_is_read_by_name_and_its_prompt_is_measured() {
        let c: EngineConfig = toml::from_str("[summary]\nformat = \"handoff9\"\n").unwrap();
        assert_eq!(c.summary.format, SummaryFormat::Handoff9);
        c.validate().unwrap();
        c.validate_llm_calls().unwrap();
        assert!(
            c.summarization_call().prompt > EngineConfig::default().summarization_call().prompt,
            "the nine sections' prompt is the longer one"
        );
        let err = toml::from_str::<EngineConfig>("[summary]\nformat = \"nine\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sections") && err.contains("handoff9"),
            "{err}"
        );
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
