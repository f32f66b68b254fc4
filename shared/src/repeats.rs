//! No context repeats itself: after a compaction, a line of the summary or
//! of the state that nearly repeats another line of the preamble is
//! dropped, whichever summarizer wrote it.
//!
//! Two lines repeat each other when their word 3-shingles overlap by at
//! least [`REPEAT`] (Jaccard), or by [`SAME_SHAPE`] once every digit is
//! read as `0`: a session that asks the same question with another step
//! number reads as one line, not forty. A line whose shingles stand, to
//! [`CONTAINED`], in one line kept already says nothing that line does not
//! ("User: Book it on the 7th." beside the user's statement "Actually, no.
//! Book it on the 7th."). A leading id or label (`#1171 user:`, `User:`)
//! is no content and is read past. Within a section the newest line
//! stays (the latest step is the current one); across sections the line
//! that comes first in the context stays, and the user's own statements
//! (framed as decisions and constraints) always do. The verbatim evidence
//! is chosen against the state already ([`crate::evidence`]), and a
//! summary bullet it says goes ([`drop_evidence_repeats`]); the tail is the
//! conversation itself, so neither is touched here.
//!
//! It runs once per compaction on what is stored, so a turn's context
//! costs nothing for it.

use crate::evidence::{jaccard, shared, shingles};
use crate::state::{Field, WorkstreamState};
use crate::summary::Summary;

/// Shingle overlap at which two lines say the same.
pub const REPEAT: f64 = 0.8;

/// Shingle overlap, digits aside, at which two lines are one shape.
pub const SAME_SHAPE: f64 = 0.9;

/// Share of a line's shingles standing in another line at which it says
/// nothing new.
pub const CONTAINED: f64 = 0.8;

/// Lines shorter than this many words are left alone (a heading, a short
/// value line: repeating their few words says nothing).
const MIN_WORDS: usize = 4;

/// A line's two fingerprints.
struct Print {
    plain: Vec<u64>,
    /// `None` for a line whose other values are other facts (a routine
    /// request the user says again and again: see
    /// [`crate::stated::UserStatements::enforce_caps`]).
    shape: Option<Vec<u64>>,
}

impl Print {
    fn of(line: &str) -> Option<Print> {
        // A leading id and label (`#1171 user:`, `User:`) say where and
        // who, not what.
        let mut line = line.trim_start_matches(['-', '*', ' ']);
        for _ in 0..2 {
            let Some((first, rest)) = line.split_once(char::is_whitespace) else {
                break;
            };
            let id = first.len() > 1
                && first.starts_with('#')
                && first[1..].chars().all(|c| c.is_ascii_digit());
            let label = first.len() > 1 && first.ends_with(':');
            if !(id || label) {
                break;
            }
            line = rest.trim_start();
        }
        if line.split_whitespace().count() < MIN_WORDS {
            return None;
        }
        let masked: String = line
            .chars()
            .map(|c| if c.is_numeric() { '0' } else { c })
            .collect();
        Some(Print {
            plain: shingles(line),
            shape: Some(shingles(&masked)),
        })
    }

    /// Whether this line repeats `other`: they nearly match, or this
    /// one stands within it.
    fn repeats(&self, other: &Print) -> bool {
        self.says(&other.plain)
            || self
                .shape
                .as_ref()
                .zip(other.shape.as_ref())
                .is_some_and(|(a, b)| jaccard(a, b) >= SAME_SHAPE)
    }

    /// Whether this line says what a line of shingles `other` says: they
    /// nearly match, or this one stands within it (values as they are).
    fn says(&self, other: &[u64]) -> bool {
        jaccard(&self.plain, other) >= REPEAT || contained(&self.plain, other) >= CONTAINED
    }
}

/// Share of `a`'s shingles (sorted) that stand in `b` (sorted).
fn contained(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() {
        return 0.0;
    }
    shared(a, b) as f64 / a.len() as f64
}

/// Drops from `summary` and `state` the lines that repeat another line of
/// the preamble (see the module doc). Returns how many were dropped.
pub fn drop_repeats(summary: &mut Summary, state: &mut WorkstreamState) -> usize {
    let mut kept: Vec<Print> = state
        .stated
        .shown()
        .filter_map(|s| {
            let mut print = Print::of(&s.text)?;
            if s.routine {
                print.shape = None;
            }
            Some(print)
        })
        .collect();
    let mut dropped = 0;
    let before = summary.clone();
    let before_prints = kept.len();
    for section in summary.format.sections() {
        dropped += keep_newest(summary.section_mut(*section), &mut kept);
    }
    // A summary is never emptied: when every bullet repeats the user's
    // statements, the summary stays as written (an empty one reads as a
    // lost summary, to a model and to an operator).
    if summary.is_empty() && !before.is_empty() {
        *summary = before;
        dropped = 0;
        kept.truncate(before_prints);
        kept.extend(
            summary
                .format
                .sections()
                .iter()
                .flat_map(|s| summary.section(*s).iter().filter_map(|b| Print::of(b)))
                .collect::<Vec<_>>(),
        );
    }
    for field in Field::ALL {
        dropped += keep_newest(state.field_mut(field), &mut kept);
    }
    dropped
}

/// Drops from `summary` the bullets that an evidence line already says
/// (see [`crate::evidence`]: evidence is chosen before the summary is
/// trimmed, because the summary is rewritten at every compaction and the
/// evidence is what carries a line from one to the next). Only plain
/// repeats count, not lines of one shape: a bullet with other numbers
/// says other values. Never empties the summary. Returns how many went.
pub fn drop_evidence_repeats<'a>(
    summary: &mut Summary,
    evidence: impl IntoIterator<Item = &'a str>,
) -> usize {
    let said: Vec<Vec<u64>> = evidence
        .into_iter()
        .filter_map(Print::of)
        .map(|p| p.plain)
        .collect();
    if said.is_empty() {
        return 0;
    }
    let before = summary.clone();
    let mut dropped = 0;
    for section in summary.format.sections() {
        let bullets = summary.section_mut(*section);
        let n = bullets.len();
        bullets.retain(|b| {
            let Some(p) = Print::of(b) else { return true };
            !said.iter().any(|e| p.says(e))
        });
        dropped += n - bullets.len();
    }
    if summary.is_empty() && !before.is_empty() {
        *summary = before;
        return 0;
    }
    dropped
}

/// Within `items` (oldest first) keeps the newest of each repeating group,
/// and drops what repeats a line of `before`; adds what it keeps to
/// `before`.
fn keep_newest<T: Lines>(items: &mut Vec<T>, before: &mut Vec<Print>) -> usize {
    let prints: Vec<Option<Print>> = items.iter().map(|i| Print::of(i.line())).collect();
    let mut keep = vec![true; items.len()];
    for i in (0..items.len()).rev() {
        let Some(p) = &prints[i] else { continue };
        let newer = prints[i + 1..]
            .iter()
            .zip(&keep[i + 1..])
            .any(|(q, &k)| k && q.as_ref().is_some_and(|q| p.repeats(q)));
        if newer || before.iter().any(|b| p.repeats(b)) {
            keep[i] = false;
        }
    }
    let dropped = keep.iter().filter(|k| !**k).count();
    let mut k = keep.iter();
    items.retain(|_| k.next().copied().unwrap_or(true));
    before.extend(
        prints
            .into_iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .filter_map(|(p, _)| p),
    );
    dropped
}

/// What a line of a section or a state field reads.
trait Lines {
    fn line(&self) -> &str;
}

impl Lines for String {
    fn line(&self) -> &str {
        self
    }
}

impl Lines for crate::state::StateItem {
    fn line(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateItem;
    use crate::summary::SummaryFormat;

    #[test]
    fn the_same_question_with_another_number_is_one_line_the_newest() {
        let mut summary = Summary::empty(SummaryFormat::Sections);
        summary.key_facts = (116..=140)
            .map(|i| format!("User: Step {i}: can you check deploy/helm/payments/values.yaml?"))
            .chain(["User: Step 141: can you check services/payments/src/fx.rs?".to_owned()])
            .collect();
        let mut state = WorkstreamState::default();
        let n = drop_repeats(&mut summary, &mut state);
        assert_eq!(n, 24);
        assert_eq!(
            summary.key_facts,
            [
                "User: Step 140: can you check deploy/helm/payments/values.yaml?",
                "User: Step 141: can you check services/payments/src/fx.rs?"
            ]
        );
    }

    #[test]
    fn a_state_item_that_repeats_the_summary_goes_and_distinct_lines_stay() {
        let mut summary = Summary::empty(SummaryFormat::Sections);
        summary.key_facts = vec![
            "The HTTP 429 comes from the change in step 146; I decided to keep the rounding half-even.".into(),
            "Order #A-448213 was refunded EUR 1,249.90 on 2026-03-15.".into(),
            "Order #A-448999 was shipped to Hotel Adlon in Berlin.".into(),
        ];
        let mut state = WorkstreamState {
            key_decisions: vec![
                StateItem::new("The HTTP 429 comes from the change in step 140; I decided to keep the rounding half-even."),
                StateItem::new("Use PostgreSQL for the ledger tables."),
            ],
            ..WorkstreamState::default()
        };
        let n = drop_repeats(&mut summary, &mut state);
        assert_eq!(n, 1);
        assert_eq!(summary.key_facts.len(), 3);
        assert_eq!(state.key_decisions.len(), 1);
        assert_eq!(
            state.key_decisions[0].text,
            "Use PostgreSQL for the ledger tables."
        );
    }

    #[test]
    fn a_summary_that_only_repeats_the_users_statements_is_kept_whole() {
        let stated: crate::stated::UserStatements = serde_json::from_value(serde_json::json!([
            {"kind": "constraint", "text": "Never run migrations against billing-prod-eu1.", "source": 3}
        ]))
        .unwrap();
        let mut state = WorkstreamState {
            stated,
            ..WorkstreamState::default()
        };
        let mut summary = Summary::empty(SummaryFormat::Sections);
        summary.key_facts = vec!["User: Never run migrations against billing-prod-eu1.".into()];
        assert_eq!(drop_repeats(&mut summary, &mut state), 0);
        assert_eq!(summary.key_facts.len(), 1);
    }

    #[test]
    fn a_line_standing_within_a_kept_one_goes_past_its_label() {
        let stated: crate::stated::UserStatements = serde_json::from_value(serde_json::json!([
            {"kind": "decision", "text": "Actually, no. Book it on the 7th.", "source": 991}
        ]))
        .unwrap();
        let mut state = WorkstreamState {
            stated,
            key_decisions: vec![StateItem::new("Book it on the 7th.")],
            ..WorkstreamState::default()
        };
        let mut summary = Summary::empty(SummaryFormat::Sections);
        summary.key_facts = vec![
            "User: Book it on the 7th.".into(),
            "User: I need a cab for two people to 560 Waverley Street.".into(),
        ];
        summary.conversation_flow =
            vec!["#1171 user: I need a cab for two people to 560 Waverley Street.".into()];
        assert_eq!(drop_repeats(&mut summary, &mut state), 3);
        assert_eq!(
            summary.key_facts,
            ["User: I need a cab for two people to 560 Waverley Street."]
        );
        assert!(summary.conversation_flow.is_empty());
        assert!(state.key_decisions.is_empty());
        // Containment is one way: the longer line is not within the short.
        let mut summary = Summary::empty(SummaryFormat::Sections);
        summary.key_facts = vec![
            "User: Book it on the 7th and send the confirmation to Noor.".into(),
            "User: Book it on the 7th.".into(),
        ];
        assert_eq!(
            drop_repeats(&mut summary, &mut WorkstreamState::default()),
            0
        );
    }

    #[test]
    fn short_lines_are_left_alone() {
        let mut summary = Summary::empty(SummaryFormat::Sections);
        summary.open_threads = vec!["Refunds?".into(), "Refunds?!".into()];
        assert_eq!(
            drop_repeats(&mut summary, &mut WorkstreamState::default()),
            0
        );
    }

    #[test]
    fn a_bullet_an_evidence_line_says_goes_and_one_with_other_values_stays() {
        let mut summary = Summary::empty(SummaryFormat::Sections);
        summary.key_facts = vec![
            "User: Book the Alder Room for 14 guests on the 15th.".into(),
            "User: Book the Birch Room for 9 guests on the 16th.".into(),
        ];
        let evidence = ["Book the Alder Room for 14 guests on the 15th."];
        assert_eq!(drop_evidence_repeats(&mut summary, evidence), 1);
        assert_eq!(
            summary.key_facts,
            ["User: Book the Birch Room for 9 guests on the 16th."]
        );
        // The last bullet stays, even when the evidence says it: a summary
        // is never emptied.
        let evidence = ["Book the Birch Room for 9 guests on the 16th."];
        assert_eq!(drop_evidence_repeats(&mut summary, evidence), 0);
        assert_eq!(summary.key_facts.len(), 1);
    }
}
