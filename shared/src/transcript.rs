//! Transcript extraction: the compacted span rendered as a numbered,
//! role-marked text for the summarizer. (STUB — being written.)

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::message::{Message, MessageId};

/// Which tools' calls and results appear in the transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolAllowList {
    /// Exact tool names.
    pub names: Vec<String>,
    /// Tool name prefixes.
    pub prefixes: Vec<String>,
}

impl Default for ToolAllowList {
    /// The seed's list: `userQuestions`, `proceedInOnboarding`, `linear*`.
    fn default() -> Self {
        ToolAllowList {
            names: vec!["userQuestions".into(), "proceedInOnboarding".into()],
            prefixes: vec!["linear".into()],
        }
    }
}

impl ToolAllowList {
    pub fn allows(&self, tool_name: &str) -> bool {
        self.names.iter().any(|n| n == tool_name)
            || self.prefixes.iter().any(|p| tool_name.starts_with(p.as_str()))
    }
}

/// Role-aware character budgets per part (CoWork's numbers by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TranscriptBudgets {
    pub user: usize,
    pub assistant: usize,
    pub tool_result: usize,
    pub tool_input: usize,
}

impl Default for TranscriptBudgets {
    fn default() -> Self {
        TranscriptBudgets {
            user: 3_000,
            assistant: 1_500,
            tool_result: 1_200,
            tool_input: 800,
        }
    }
}

/// Transcript extraction settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TranscriptConfig {
    pub tools: ToolAllowList,
    pub budgets: TranscriptBudgets,
}

/// One message's block inside [`Transcript::text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub message_id: MessageId,
    /// Byte range of the block (header line included) in the text.
    pub range: Range<usize>,
    /// Length of the block in chars.
    pub chars: usize,
}

/// The rendered transcript and where each message's block is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transcript {
    pub text: String,
    pub blocks: Vec<Block>,
}

/// Renders `messages` (see the module docs for the format).
pub fn extract(messages: &[Message], config: &TranscriptConfig) -> Transcript {
    let _ = (messages, config);
    unimplemented!("transcript::extract")
}
