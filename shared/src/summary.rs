//! The compaction summary: three sections of bullets (the seed's KEY FACTS,
//! CONVERSATION FLOW, OPEN THREADS).
//!
//! Keeping the summary structured (rather than one opaque string) is what
//! lets the engine shrink it without destroying it: [`Summary::fit_to`]
//! drops the oldest conversation-flow bullets first, then the oldest facts,
//! and never the section structure, so an over-long summary degrades the way
//! a careful human editor would cut it.

use serde::{Deserialize, Serialize};

use crate::tokens::TokenEstimator;

/// Section headings, in rendering order.
pub const KEY_FACTS: &str = "KEY FACTS";
pub const CONVERSATION_FLOW: &str = "CONVERSATION FLOW";
pub const OPEN_THREADS: &str = "OPEN THREADS";

/// The seed's `SUMMARY_ROLLUP_MAX_TOKENS`: a summary above this size gets a
/// rollup pass that compacts the summary itself.
pub const SUMMARY_ROLLUP_MAX_TOKENS: u64 = 80_000;

/// One of the three sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Section {
    KeyFacts,
    ConversationFlow,
    OpenThreads,
}

impl Section {
    pub const ALL: [Section; 3] = [
        Section::KeyFacts,
        Section::ConversationFlow,
        Section::OpenThreads,
    ];

    pub fn heading(self) -> &'static str {
        match self {
            Section::KeyFacts => KEY_FACTS,
            Section::ConversationFlow => CONVERSATION_FLOW,
            Section::OpenThreads => OPEN_THREADS,
        }
    }
}

/// A structured summary. Bullets are stored without their leading `- `.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    pub key_facts: Vec<String>,
    pub conversation_flow: Vec<String>,
    pub open_threads: Vec<String>,
}

impl Summary {
    pub fn section(&self, section: Section) -> &Vec<String> {
        match section {
            Section::KeyFacts => &self.key_facts,
            Section::ConversationFlow => &self.conversation_flow,
            Section::OpenThreads => &self.open_threads,
        }
    }

    pub fn section_mut(&mut self, section: Section) -> &mut Vec<String> {
        match section {
            Section::KeyFacts => &mut self.key_facts,
            Section::ConversationFlow => &mut self.conversation_flow,
            Section::OpenThreads => &mut self.open_threads,
        }
    }

    pub fn is_empty(&self) -> bool {
        Section::ALL.iter().all(|&s| self.section(s).is_empty())
    }

    /// Renders the three sections (always all three headings, so the
    /// structure survives even when a section is empty).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for section in Section::ALL {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(section.heading());
            out.push_str(":\n");
            let bullets = self.section(section);
            if bullets.is_empty() {
                out.push_str("- (none)\n");
            }
            for bullet in bullets {
                out.push_str("- ");
                out.push_str(bullet);
                out.push('\n');
            }
        }
        out
    }

    /// Tokens of the rendered summary.
    pub fn tokens(&self, estimator: &dyn TokenEstimator) -> u64 {
        estimator.count(&self.render())
    }

    /// Whether the summary is over `rollup_max_tokens` and must be rolled up.
    pub fn needs_rollup(&self, rollup_max_tokens: u64, estimator: &dyn TokenEstimator) -> bool {
        self.tokens(estimator) > rollup_max_tokens
    }

    /// Shrinks the summary until its rendering is at most `max_tokens`:
    /// first the oldest conversation-flow bullets, then the oldest key
    /// facts, then the oldest open threads. Headings are always kept, so a
    /// budget below the size of the three empty headings (about 20 tokens)
    /// ends with an empty summary. Returns how many bullets were dropped.
    pub fn fit_to(&mut self, max_tokens: u64, estimator: &dyn TokenEstimator) -> usize {
        let mut dropped = 0;
        for section in [
            Section::ConversationFlow,
            Section::KeyFacts,
            Section::OpenThreads,
        ] {
            while self.tokens(estimator) > max_tokens && !self.section(section).is_empty() {
                // Dropping one at a time keeps this simple; summaries are
                // small (a few hundred bullets at the very most).
                self.section_mut(section).remove(0);
                dropped += 1;
            }
        }
        dropped
    }
}

/// What one summarization produces, whichever summarizer wrote it: the
/// replacement summary and the proposed state changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummarizerOutput {
    pub summary: Summary,
    pub delta: crate::state::StateDelta,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::CharEstimator;

    fn sample() -> Summary {
        Summary {
            key_facts: vec!["fact 1".into(), "fact 2".into()],
            conversation_flow: (0..50)
                .map(|i| format!("turn {i}: something happened"))
                .collect(),
            open_threads: vec!["thread".into()],
        }
    }

    #[test]
    fn renders_all_three_headings_even_when_empty() {
        let text = Summary::default().render();
        assert_eq!(
            text,
            "KEY FACTS:\n- (none)\n\nCONVERSATION FLOW:\n- (none)\n\nOPEN THREADS:\n- (none)\n"
        );
    }

    #[test]
    fn fit_to_drops_oldest_flow_first_and_keeps_structure() {
        let e = CharEstimator::default();
        let mut s = sample();
        let before = s.tokens(&e);
        let budget = before / 3;
        let dropped = s.fit_to(budget, &e);
        assert!(dropped > 0);
        assert!(s.tokens(&e) <= budget);
        assert_eq!(s.key_facts.len(), 2, "facts untouched while flow remains");
        assert_eq!(
            s.conversation_flow.last().unwrap(),
            "turn 49: something happened"
        );
        let text = s.render();
        for h in [KEY_FACTS, CONVERSATION_FLOW, OPEN_THREADS] {
            assert!(text.contains(h));
        }
    }

    #[test]
    fn rollup_is_needed_only_above_the_limit() {
        let e = CharEstimator::default();
        let mut s = Summary {
            key_facts: vec!["x".repeat(240_000)],
            ..Default::default()
        };
        assert!(s.needs_rollup(SUMMARY_ROLLUP_MAX_TOKENS, &e));
        s.key_facts[0].truncate(230_000);
        assert!(!s.needs_rollup(SUMMARY_ROLLUP_MAX_TOKENS, &e));
    }

    #[test]
    fn fit_to_is_a_no_op_within_budget() {
        let e = CharEstimator::default();
        let mut s = sample();
        let copy = s.clone();
        assert_eq!(s.fit_to(u64::MAX, &e), 0);
        assert_eq!(s, copy);
    }
}
