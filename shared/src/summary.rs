//! The compaction summary, in one of two formats:
//! - `sections` (the default): three sections of bullets, the seed's KEY
//!   FACTS, CONVERSATION FLOW, OPEN THREADS;
//! - `handoff9`: CoWork's nine hand-off sections (Primary Request and
//!   Intent … Recommended Next Step), shown to the next model under
//!   CoWork's hand-off framing.
//!
//! Keeping the summary structured (rather than one opaque string) is what
//! lets the engine shrink it without destroying it: [`Summary::fit_to`]
//! drops the oldest bullets of the least important section first (the
//! conversation flow, or the completed work) and never the section
//! structure, so an over-long summary degrades the way a careful human
//! editor would cut it.
//!
//! A summary carries its format, so one stored before the operator switched
//! `[engine.summary] format` still renders as written, and the next
//! compaction converts it ([`Summary::into_format`]) before updating it.

use serde::{Deserialize, Serialize};

use crate::tokens::TokenEstimator;

/// Section headings of the `sections` format, in rendering order.
pub const KEY_FACTS: &str = "KEY FACTS";
pub const CONVERSATION_FLOW: &str = "CONVERSATION FLOW";
pub const OPEN_THREADS: &str = "OPEN THREADS";

/// The seed's `SUMMARY_ROLLUP_MAX_TOKENS`: a summary above this size gets a
/// rollup pass that compacts the summary itself.
pub const SUMMARY_ROLLUP_MAX_TOKENS: u64 = 80_000;

/// Which sections a summary has (`[engine.summary] format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SummaryFormat {
    /// KEY FACTS, CONVERSATION FLOW, OPEN THREADS.
    #[default]
    Sections,
    /// CoWork's nine hand-off sections.
    Handoff9,
}

impl SummaryFormat {
    pub const ALL: [SummaryFormat; 2] = [SummaryFormat::Sections, SummaryFormat::Handoff9];

    /// The format's sections, in rendering order.
    pub fn sections(self) -> &'static [Section] {
        match self {
            SummaryFormat::Sections => &Section::SECTIONS,
            SummaryFormat::Handoff9 => &Section::HANDOFF9,
        }
    }

    /// The name in the configuration and in stored summaries.
    pub fn label(self) -> &'static str {
        match self {
            SummaryFormat::Sections => "sections",
            SummaryFormat::Handoff9 => "handoff9",
        }
    }

    fn is_sections(&self) -> bool {
        *self == SummaryFormat::Sections
    }

    /// The order in which [`Summary::fit_to`] cuts: tier by tier, the
    /// history before what the next model acts on (open threads, pending
    /// work, the next step). Within a tier the longest section loses its
    /// oldest bullet first (the earlier in the tier among equals), so the
    /// five record sections of `handoff9` shrink together instead of one
    /// vanishing whole.
    fn cut_tiers(self) -> &'static [&'static [Section]] {
        match self {
            SummaryFormat::Sections => &[
                &[Section::ConversationFlow],
                &[Section::KeyFacts],
                &[Section::OpenThreads],
            ],
            SummaryFormat::Handoff9 => &[
                &[
                    Section::WorkCompleted,
                    Section::UserMessages,
                    Section::ErrorsAndFixes,
                    Section::TechnicalDetails,
                    Section::DecisionsMade,
                ],
                &[Section::PendingWork],
                &[Section::PrimaryRequest],
                &[Section::CurrentState],
                &[Section::NextStep],
            ],
        }
    }
}

/// One section of either format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Section {
    KeyFacts,
    ConversationFlow,
    OpenThreads,
    /// 1. What the user originally asked for, and evolving requirements.
    PrimaryRequest,
    /// 2. The user's messages, in order, in their own words.
    UserMessages,
    /// 3. What was done: files, commands, answers.
    WorkCompleted,
    /// 4. Errors met and the fixes applied.
    ErrorsAndFixes,
    /// 5. Exact values: paths, configuration, names, numbers.
    TechnicalDetails,
    /// 6. Choices made and approved directions.
    DecisionsMade,
    /// 7. Started but unfinished, or asked for but not addressed.
    PendingWork,
    /// 8. What was in progress when the compaction ran.
    CurrentState,
    /// 9. What the next agent should do.
    NextStep,
}

impl Section {
    /// The `sections` format.
    pub const SECTIONS: [Section; 3] = [
        Section::KeyFacts,
        Section::ConversationFlow,
        Section::OpenThreads,
    ];

    /// The `handoff9` format.
    pub const HANDOFF9: [Section; 9] = [
        Section::PrimaryRequest,
        Section::UserMessages,
        Section::WorkCompleted,
        Section::ErrorsAndFixes,
        Section::TechnicalDetails,
        Section::DecisionsMade,
        Section::PendingWork,
        Section::CurrentState,
        Section::NextStep,
    ];

    /// Every section of every format (a summary leaves those of the other
    /// format empty): [`Section::SECTIONS`], then [`Section::HANDOFF9`].
    pub const ALL: [Section; 12] = {
        let mut all = [Section::KeyFacts; 12];
        let mut i = 0;
        while i < all.len() {
            all[i] = if i < Section::SECTIONS.len() {
                Section::SECTIONS[i]
            } else {
                Section::HANDOFF9[i - Section::SECTIONS.len()]
            };
            i += 1;
        }
        all
    };

    /// The section's title as the summarizer is asked to write it.
    pub fn heading(self) -> &'static str {
        match self {
            Section::KeyFacts => KEY_FACTS,
            Section::ConversationFlow => CONVERSATION_FLOW,
            Section::OpenThreads => OPEN_THREADS,
            Section::PrimaryRequest => "Primary Request and Intent",
            Section::UserMessages => "User Messages",
            Section::WorkCompleted => "Work Completed",
            Section::ErrorsAndFixes => "Errors and Fixes",
            Section::TechnicalDetails => "Key Technical Details",
            Section::DecisionsMade => "Decisions Made",
            Section::PendingWork => "Pending/Incomplete Work",
            Section::CurrentState => "Current State",
            Section::NextStep => "Recommended Next Step",
        }
    }

    /// The format the section belongs to.
    pub fn format(self) -> SummaryFormat {
        if Section::SECTIONS.contains(&self) {
            SummaryFormat::Sections
        } else {
            SummaryFormat::Handoff9
        }
    }

    /// Its number in the hand-off document (1 to 9); `None` for the
    /// `sections` format, whose sections are not numbered.
    pub fn number(self) -> Option<usize> {
        Section::HANDOFF9
            .iter()
            .position(|&s| s == self)
            .map(|i| i + 1)
    }

    /// Whether a timeline shows the section expanded by default: CoWork
    /// expands the ones the next reader acts on (the request, pending work,
    /// the current state, the next step); the history stays collapsed.
    pub fn expanded_by_default(self) -> bool {
        matches!(
            self,
            Section::KeyFacts
                | Section::OpenThreads
                | Section::PrimaryRequest
                | Section::PendingWork
                | Section::CurrentState
                | Section::NextStep
        )
    }

    /// The heading line as rendered (without its line break).
    pub fn rendered_heading(self) -> String {
        match self.number() {
            Some(n) => format!("## {n}. {}", self.heading()),
            None => format!("{}:", self.heading()),
        }
    }
}

/// A structured summary. Bullets are stored without their leading `- `.
///
/// Stored as JSON: a `sections` summary is written exactly as before the
/// formats existed (its format and the empty hand-off sections are left
/// out), and a summary stored without a format is a `sections` one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    #[serde(skip_serializing_if = "SummaryFormat::is_sections")]
    pub format: SummaryFormat,
    pub key_facts: Vec<String>,
    pub conversation_flow: Vec<String>,
    pub open_threads: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub primary_request: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub user_messages: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub work_completed: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors_and_fixes: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub technical_details: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decisions_made: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending_work: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub current_state: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub next_step: Vec<String>,
}

impl Summary {
    /// An empty summary of `format`.
    pub fn empty(format: SummaryFormat) -> Summary {
        Summary {
            format,
            ..Summary::default()
        }
    }

    /// The sections of the summary's format with their bullets, in
    /// rendering order (empty ones included): what a timeline lists.
    pub fn sections(&self) -> impl Iterator<Item = (Section, &[String])> + '_ {
        self.format
            .sections()
            .iter()
            .map(|&s| (s, self.section(s).as_slice()))
    }

    pub fn is_empty(&self) -> bool {
        Section::ALL.iter().all(|&s| self.section(s).is_empty())
    }

    /// The same content in `format`. A summary already in it is returned as
    /// is; otherwise every bullet moves to the section of the other format
    /// that holds that kind of content (facts, history, what is open), so
    /// switching `[engine.summary] format` loses nothing.
    pub fn into_format(self, format: SummaryFormat) -> Summary {
        if self.format == format {
            return self;
        }
        let mut out = Summary::empty(format);
        for section in Section::ALL {
            let target = match (format, section) {
                (SummaryFormat::Handoff9, Section::KeyFacts) => Section::TechnicalDetails,
                (SummaryFormat::Handoff9, Section::ConversationFlow) => Section::WorkCompleted,
                (SummaryFormat::Handoff9, Section::OpenThreads) => Section::PendingWork,
                (SummaryFormat::Sections, Section::UserMessages | Section::WorkCompleted) => {
                    Section::ConversationFlow
                }
                (
                    SummaryFormat::Sections,
                    Section::PendingWork | Section::CurrentState | Section::NextStep,
                ) => Section::OpenThreads,
                (SummaryFormat::Sections, _) => Section::KeyFacts,
                (SummaryFormat::Handoff9, other) => other,
            };
            let bullets = self.section(section).clone();
            out.section_mut(target).extend(bullets);
        }
        out
    }

    /// Renders the format's sections (always every heading, so the
    /// structure survives even when a section is empty).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for &section in self.format.sections() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&section.rendered_heading());
            out.push('\n');
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

    /// Shrinks the summary until its rendering is at most `max_tokens`,
    /// oldest bullets first: for `sections` the conversation flow, then the
    /// key facts, then the open threads; for `handoff9` its five record
    /// sections together (user messages, completed work, errors, technical
    /// details, decisions), then pending work, the request, the current
    /// state, and the recommended next step last. Headings are always kept,
    /// so a budget below the size of the empty headings (about 20 tokens
    /// for `sections`, 110 for `handoff9`) ends with an empty summary.
    /// Returns how many bullets were dropped.
    pub fn fit_to(&mut self, max_tokens: u64, estimator: &dyn TokenEstimator) -> usize {
        let mut dropped = 0;
        for tier in self.format.cut_tiers() {
            while self.tokens(estimator) > max_tokens {
                // The longest; `rev` makes the first in the tier win ties.
                let longest = tier
                    .iter()
                    .rev()
                    .copied()
                    .filter(|&s| !self.section(s).is_empty())
                    .max_by_key(|&s| self.section(s).len());
                let Some(section) = longest else { break };
                // Dropping one at a time keeps this simple; summaries are
                // small (a few hundred bullets at the very most).
                self.section_mut(section).remove(0);
                dropped += 1;
            }
        }
        dropped
    }
}

/// Which field of [`Summary`] holds which [`Section`], written once:
/// `Summary::section`, `Summary::section_mut` and `Section::key` (the
/// field's name) follow from it.
macro_rules! section_fields {
    ($($section:ident => $field:ident),* $(,)?) => {
        impl Section {
            /// A stable snake-case name (the stored summary's field), for
            /// APIs and events that list the sections.
            pub fn key(self) -> &'static str {
                match self {
                    $(Section::$section => stringify!($field),)*
                }
            }
        }

        impl Summary {
            pub fn section(&self, section: Section) -> &Vec<String> {
                match section {
                    $(Section::$section => &self.$field,)*
                }
            }

            pub fn section_mut(&mut self, section: Section) -> &mut Vec<String> {
                match section {
                    $(Section::$section => &mut self.$field,)*
                }
            }
        }
    };
}

section_fields! {
    KeyFacts => key_facts,
    ConversationFlow => conversation_flow,
    OpenThreads => open_threads,
    PrimaryRequest => primary_request,
    UserMessages => user_messages,
    WorkCompleted => work_completed,
    ErrorsAndFixes => errors_and_fixes,
    TechnicalDetails => technical_details,
    DecisionsMade => decisions_made,
    PendingWork => pending_work,
    CurrentState => current_state,
    NextStep => next_step,
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
            ..Default::default()
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

    fn handoff_sample() -> Summary {
        Summary {
            primary_request: vec!["#1 user: migrate the billing service".into()],
            user_messages: (0..40).map(|i| format!("#{i} user: message {i}")).collect(),
            work_completed: (0..40)
                .map(|i| format!("#{i} assistant: step {i}"))
                .collect(),
            technical_details: vec!["config in `billing/app.toml`".into()],
            pending_work: vec!["run the load test".into()],
            current_state: vec!["#80 user: deploy it?".into()],
            next_step: vec!["Answer: deploy it?".into()],
            ..Summary::empty(SummaryFormat::Handoff9)
        }
    }

    #[test]
    fn handoff9_renders_its_nine_numbered_headings_in_order() {
        let text = Summary::empty(SummaryFormat::Handoff9).render();
        let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(
            headings,
            [
                "## 1. Primary Request and Intent",
                "## 2. User Messages",
                "## 3. Work Completed",
                "## 4. Errors and Fixes",
                "## 5. Key Technical Details",
                "## 6. Decisions Made",
                "## 7. Pending/Incomplete Work",
                "## 8. Current State",
                "## 9. Recommended Next Step",
            ]
        );
        assert_eq!(text.matches("- (none)\n").count(), 9);
        assert!(!text.contains(KEY_FACTS));
    }

    #[test]
    fn sections_lists_the_formats_sections_by_name() {
        let s = handoff_sample();
        let listed: Vec<(Option<usize>, &str, usize)> = s
            .sections()
            .map(|(section, bullets)| (section.number(), section.heading(), bullets.len()))
            .collect();
        assert_eq!(listed.len(), 9);
        assert_eq!(listed[0], (Some(1), "Primary Request and Intent", 1));
        assert_eq!(listed[8], (Some(9), "Recommended Next Step", 1));
        let expanded: Vec<usize> = s
            .sections()
            .filter(|(section, _)| section.expanded_by_default())
            .filter_map(|(section, _)| section.number())
            .collect();
        assert_eq!(expanded, [1, 7, 8, 9], "CoWork's auto-expanded sections");
        let names: Vec<&str> = sample().sections().map(|(s, _)| s.key()).collect();
        assert_eq!(names, ["key_facts", "conversation_flow", "open_threads"]);
        for section in Section::ALL {
            assert!(
                section.format().sections().contains(&section),
                "{section:?}"
            );
        }
    }

    #[test]
    fn a_sections_summary_is_stored_as_before_and_a_handoff_one_names_its_format() {
        let json = serde_json::to_string(&sample()).unwrap();
        assert!(json.starts_with("{\"key_facts\":["), "{json}");
        assert!(
            !json.contains("format") && !json.contains("next_step"),
            "{json}"
        );
        let old = r#"{"key_facts":["a"],"conversation_flow":[],"open_threads":["b"]}"#;
        let parsed: Summary = serde_json::from_str(old).unwrap();
        assert_eq!(parsed.format, SummaryFormat::Sections);
        assert_eq!(parsed.key_facts, ["a"]);
        let handoff = handoff_sample();
        let json = serde_json::to_string(&handoff).unwrap();
        assert!(json.starts_with("{\"format\":\"handoff9\""), "{json}");
        assert_eq!(serde_json::from_str::<Summary>(&json).unwrap(), handoff);
    }

    #[test]
    fn every_section_is_listed_once_under_the_name_it_is_stored_as() {
        let mut seen = std::collections::HashSet::new();
        for (i, section) in Section::ALL.into_iter().enumerate() {
            assert!(seen.insert(section), "{section:?} twice");
            assert_eq!(section as usize, i, "indexable by discriminant");
            let mut s = Summary::empty(section.format());
            s.section_mut(section).push("x".into());
            let json = serde_json::to_value(&s).unwrap();
            assert_eq!(json[section.key()], serde_json::json!(["x"]), "{section:?}");
        }
        assert_eq!(Section::ALL[..3], Section::SECTIONS);
        assert_eq!(Section::ALL[3..], Section::HANDOFF9);
    }

    #[test]
    fn switching_formats_keeps_every_bullet() {
        let s = sample();
        let h = s.clone().into_format(SummaryFormat::Handoff9);
        assert_eq!(h.format, SummaryFormat::Handoff9);
        assert_eq!(h.technical_details, s.key_facts);
        assert_eq!(h.work_completed, s.conversation_flow);
        assert_eq!(h.pending_work, s.open_threads);
        assert_eq!(h.clone().into_format(SummaryFormat::Sections), s);
        let back = handoff_sample().into_format(SummaryFormat::Sections);
        let count = |s: &Summary| {
            Section::ALL
                .iter()
                .map(|&x| s.section(x).len())
                .sum::<usize>()
        };
        assert_eq!(count(&back), count(&handoff_sample()));
        assert_eq!(
            back.open_threads,
            [
                "run the load test",
                "#80 user: deploy it?",
                "Answer: deploy it?"
            ]
        );
        assert_eq!(
            back.clone().into_format(SummaryFormat::Sections),
            back,
            "already in the format"
        );
    }

    #[test]
    fn handoff9_fit_to_shrinks_the_record_together_and_keeps_what_is_open() {
        let (e, mut s) = (CharEstimator::default(), handoff_sample());
        let budget = s.tokens(&e) / 2;
        assert!(s.fit_to(budget, &e) > 0 && s.tokens(&e) <= budget);
        assert!(s.work_completed.len() < 40 && s.user_messages.len() < 40);
        assert!(
            s.work_completed.len().abs_diff(s.user_messages.len()) <= 1,
            "both shrink together: {} and {}",
            s.work_completed.len(),
            s.user_messages.len()
        );
        assert_eq!(s.work_completed.last().unwrap(), "#39 assistant: step 39");
        assert_eq!(
            s.technical_details.len(),
            1,
            "a short section outlasts long ones"
        );
        assert_eq!(s.primary_request.len(), 1);
        assert_eq!(s.pending_work.len(), 1);
        assert_eq!(s.next_step, ["Answer: deploy it?"]);
        assert_eq!(s.render().matches("## ").count(), 9);
        // A budget below the headings leaves them alone.
        assert!(s.fit_to(1, &e) > 0);
        assert!(s.is_empty());
        assert_eq!(s.render().matches("## ").count(), 9);
    }
}
