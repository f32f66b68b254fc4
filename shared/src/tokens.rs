//! Token estimation.
//!
//! The seed estimates tokens as `chars / 3` over the serialized conversation:
//! cheap, tokenizer-free and deliberately pessimistic (real BPE tokenizers
//! average ~4 chars per token on English), so thresholds trip early rather
//! than late. A real tokenizer can be plugged in through [`TokenEstimator`];
//! with the `tiktoken` feature, [`TiktokenEstimator`] is provided.

use crate::message::{Message, Part, PRUNED_PLACEHOLDER};

/// Counts tokens in text. Implementations must be cheap and deterministic.
pub trait TokenEstimator: Send + Sync {
    /// Tokens in `text`.
    fn count(&self, text: &str) -> u64;

    /// Tokens a message occupies when sent to a model: every part as it would
    /// be serialized (pruned tool output counts as its placeholder).
    fn message_tokens(&self, message: &Message) -> u64 {
        message.parts.iter().map(|p| self.part_tokens(p)).sum()
    }

    /// Tokens of one part.
    fn part_tokens(&self, part: &Part) -> u64 {
        match part {
            Part::Text { text } | Part::Reasoning { text } => self.count(text),
            Part::ToolCall {
                tool_name, input, ..
            } => self.count(tool_name) + self.count(&input.to_string()),
            Part::ToolResult {
                tool_name,
                output,
                pruned,
                ..
            } => {
                let shown = if *pruned { PRUNED_PLACEHOLDER } else { output };
                self.count(tool_name) + self.count(shown)
            }
            Part::File { uri, name, .. } => {
                self.count(uri) + name.as_deref().map_or(0, |n| self.count(n))
            }
        }
    }
}

/// `ceil(chars / chars_per_token)`; the seed's default is 3.
#[derive(Debug, Clone, Copy)]
pub struct CharEstimator {
    chars_per_token: u64,
}

impl CharEstimator {
    /// `chars_per_token` of 0 is treated as 1.
    pub fn new(chars_per_token: u32) -> Self {
        CharEstimator {
            chars_per_token: u64::from(chars_per_token.max(1)),
        }
    }
}

impl Default for CharEstimator {
    fn default() -> Self {
        CharEstimator::new(3)
    }
}

impl TokenEstimator for CharEstimator {
    fn count(&self, text: &str) -> u64 {
        let chars = text.chars().count() as u64;
        chars.div_ceil(self.chars_per_token)
    }
}

/// Tokens of a whole slice of messages.
pub fn messages_tokens(estimator: &dyn TokenEstimator, messages: &[Message]) -> u64 {
    messages.iter().map(|m| estimator.message_tokens(m)).sum()
}

#[cfg(feature = "tiktoken")]
pub use tiktoken::{Encoding, TiktokenEstimator};

#[cfg(feature = "tiktoken")]
mod tiktoken {
    use super::TokenEstimator;

    /// Which BPE vocabulary to use.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Encoding {
        /// GPT-3.5 / GPT-4.
        Cl100kBase,
        /// GPT-4o and later.
        O200kBase,
    }

    /// Exact token counts with OpenAI's BPE vocabularies (bundled with the
    /// crate, no download at run time).
    pub struct TiktokenEstimator {
        bpe: tiktoken_rs::CoreBPE,
    }

    impl TiktokenEstimator {
        pub fn new(encoding: Encoding) -> Result<Self, String> {
            let bpe = match encoding {
                Encoding::Cl100kBase => tiktoken_rs::cl100k_base(),
                Encoding::O200kBase => tiktoken_rs::o200k_base(),
            }
            .map_err(|e| format!("loading tokenizer: {e}"))?;
            Ok(TiktokenEstimator { bpe })
        }
    }

    impl TokenEstimator for TiktokenEstimator {
        fn count(&self, text: &str) -> u64 {
            self.bpe.encode_ordinary(text).len() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    #[test]
    fn chars_over_three_rounds_up_and_counts_chars_not_bytes() {
        let e = CharEstimator::default();
        assert_eq!(e.count(""), 0);
        assert_eq!(e.count("abc"), 1);
        assert_eq!(e.count("abcd"), 2);
        assert_eq!(e.count("ééé"), 1, "6 bytes but 3 chars");
        assert_eq!(CharEstimator::new(0).count("ab"), 2);
    }

    #[test]
    fn pruned_tool_output_counts_as_its_placeholder() {
        let e = CharEstimator::default();
        let result = |pruned| Part::ToolResult {
            call_id: "c".into(),
            tool_name: "bash".into(),
            output: "x".repeat(30_000),
            is_error: false,
            pruned,
        };
        let full = e.message_tokens(&Message::new(1, Role::Tool, vec![result(false)]));
        let pruned = e.message_tokens(&Message::new(1, Role::Tool, vec![result(true)]));
        assert_eq!(full, 2 + 10_000);
        assert_eq!(pruned, 2 + e.count(PRUNED_PLACEHOLDER));
    }

    #[cfg(feature = "tiktoken")]
    #[test]
    fn tiktoken_counts_real_tokens() {
        let e = TiktokenEstimator::new(Encoding::Cl100kBase).unwrap();
        assert_eq!(e.count("hello world"), 2);
    }
}
