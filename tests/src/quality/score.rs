//! Scoring a built context against the planted facts.
//!
//! The context is read as the model would read it: the text of every
//! message, tool calls as their name and JSON input, tool results as their
//! output (a pruned one as its placeholder). Values are matched as whole
//! tokens ([`contains_value`]): `KD-5512` is not `KD-5512-0937`, `37s` is
//! not `137s`, `1.74` is not `1.74.1`.
//!
//! A superseded statement counts as *shown as current* when its value
//! appears in the context anywhere except
//! 1. the verbatim tail (un-compacted messages: history, as it was said),
//! 2. the `CONVERSATION FLOW` section of the summary (history),
//! 3. a line containing the word "superseded" (the agreed marker for
//!    out-of-date items),
//! 4. a line carrying the words of the replacing statement that name the
//!    old value: "Scrap SQLite, use Postgres instead" kept verbatim shows
//!    SQLite as scrapped, not as current.
//!
//! And a current value counts as *kept* only where the model can read it
//! as current: in the tail, or on a line without that marker. A current
//! value found only on lines marked superseded (a replacement that marked
//! an unrelated mention) is lost, and counted as *shown as superseded*.

use std::collections::BTreeMap;

use compactor_producer::client::IncomingMessage;
use compactor_shared::context::BuiltContext;
use compactor_shared::message::PRUNED_PLACEHOLDER;
use compactor_shared::summary::CONVERSATION_FLOW;
use compactor_shared::Part;
use serde::Serialize;

use super::sessions::{Class, Fact, Kind, Session, Source};

/// The word that marks an out-of-date item on its line.
pub const SUPERSEDED_MARKER: &str = "superseded";

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A letter of a script written without spaces between words (Han, kana,
/// Thai): next to a match it never makes the match part of a longer word,
/// since in those scripts every word touches its neighbours
/// (`人均消费75元`, `推荐鲜鱼口老字号美食街`).
fn is_unspaced(c: char) -> bool {
    matches!(c,
        '\u{0E00}'..='\u{0EFF}'     // Thai, Lao
        | '\u{3040}'..='\u{30FF}'   // Hiragana, Katakana
        | '\u{3400}'..='\u{4DBF}'   // CJK Extension A
        | '\u{4E00}'..='\u{9FFF}'   // CJK Unified Ideographs
        | '\u{F900}'..='\u{FAFF}'   // CJK Compatibility Ideographs
        | '\u{20000}'..='\u{3134F}' // CJK Extensions B–G
    )
}

/// Characters that join two tokens into one value (`1.74.1`,
/// `KD-5512-0937`, `a/b`, `host:port`, `user@host`).
fn is_joiner(c: char) -> bool {
    matches!(c, '.' | '-' | '/' | ':' | '@' | '+')
}

/// Whether the text next to a match (read away from it) leaves the match a
/// whole token. After a match, `:` and digits are a line number or a port
/// (`src/a.rs:212:9`), which still leaves the value whole.
fn clear(mut near: impl Iterator<Item = char>, after: bool) -> bool {
    match near.next() {
        None => true,
        Some(c) if is_word(c) => is_unspaced(c),
        Some(':') if after => !near
            .next()
            .is_some_and(|c| is_word(c) && !c.is_ascii_digit()),
        Some(c) if is_joiner(c) => !near.next().is_some_and(is_word),
        Some(_) => true,
    }
}

/// Whether `value` occurs in `haystack` as a whole token: where the value
/// starts (ends) with a word character, the text before (after) it is
/// neither a word character nor a joiner next to one. `fold_case` compares
/// case-insensitively (for statements, never for exact values).
pub fn contains_value(haystack: &str, value: &str, fold_case: bool) -> bool {
    if value.is_empty() {
        return false;
    }
    if fold_case {
        return contains_token(&haystack.to_lowercase(), &value.to_lowercase());
    }
    contains_token(haystack, value)
}

fn contains_token(haystack: &str, value: &str) -> bool {
    let starts_word = value.chars().next().is_some_and(is_word);
    let ends_word = value.chars().next_back().is_some_and(is_word);
    haystack.match_indices(value).any(|(at, _)| {
        (!starts_word || clear(haystack[..at].chars().rev(), false))
            && (!ends_word || clear(haystack[at + value.len()..].chars(), true))
    })
}

/// [`contains_value`] on one line.
pub fn line_has_value(line: &str, value: &str, fold_case: bool) -> bool {
    contains_value(line, value, fold_case)
}

/// A built context as text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextView {
    /// The synthesized messages (summary, state, exact values, memory).
    pub preamble: String,
    /// The verbatim, un-compacted messages, one string each.
    pub tail: Vec<String>,
    /// The engine's estimate of the context's tokens.
    pub tokens: u64,
}

impl ContextView {
    /// What `build_context` returned: messages without a source are the
    /// preamble, the others the verbatim tail.
    pub fn of(context: &BuiltContext) -> ContextView {
        let mut view = ContextView {
            tokens: context.tokens,
            ..ContextView::default()
        };
        for m in &context.messages {
            let text = render_parts(&m.parts);
            if m.source.is_some() {
                view.tail.push(text);
            } else {
                if !view.preamble.is_empty() {
                    view.preamble.push('\n');
                }
                view.preamble.push_str(&text);
            }
        }
        view
    }

    /// Messages shown verbatim, nothing compacted.
    pub fn verbatim(messages: &[IncomingMessage]) -> ContextView {
        ContextView {
            preamble: String::new(),
            tail: messages.iter().map(|m| render_parts(&m.parts)).collect(),
            tokens: 0,
        }
    }

    /// Whether the value is anywhere in the context.
    pub fn contains(&self, value: &str, fold_case: bool) -> bool {
        contains_value(&self.preamble, value, fold_case) || self.in_tail(value, fold_case)
    }

    /// Whether the value is in the verbatim tail.
    fn in_tail(&self, value: &str, fold_case: bool) -> bool {
        self.tail
            .iter()
            .any(|t| contains_value(t, value, fold_case))
    }

    /// Whether the value is in the context where it reads as current: in
    /// the tail, or on a preamble line not marked superseded.
    pub fn contains_as_current(&self, value: &str, fold_case: bool) -> bool {
        self.preamble.lines().any(|line| {
            !line.to_lowercase().contains(SUPERSEDED_MARKER)
                && line_has_value(line, value, fold_case)
        }) || self.in_tail(value, fold_case)
    }

    /// Whether superseded `fact` is shown as current (see the module doc).
    pub fn shows_as_current(&self, fact: &Fact) -> bool {
        let change = fact
            .superseded
            .as_ref()
            .and_then(|s| s.change_phrase.as_deref())
            .map(str::to_lowercase);
        let mut in_flow = false;
        for line in self.preamble.lines() {
            let heading = line
                .trim()
                .trim_matches(|c: char| c == '#' || c == '*' || c == ':' || c.is_whitespace());
            if heading.eq_ignore_ascii_case(CONVERSATION_FLOW) {
                in_flow = true;
                continue;
            }
            let continues = line.is_empty() || line.starts_with(['-', '*', ' ', '\t']);
            if !continues {
                in_flow = false;
            }
            if in_flow || !line_has_value(line, &fact.value, fact.fold_case()) {
                continue;
            }
            let lower = line.to_lowercase();
            if lower.contains(SUPERSEDED_MARKER)
                || change.as_deref().is_some_and(|c| lower.contains(c))
            {
                continue;
            }
            return true;
        }
        false
    }
}

/// Parts as a model reads them.
fn render_parts(parts: &[Part]) -> String {
    let mut out = String::new();
    for p in parts {
        if !out.is_empty() {
            out.push('\n');
        }
        match p {
            Part::Text { text } => out.push_str(text),
            // The model does not read back its own reasoning.
            Part::Reasoning { .. } => {}
            Part::ToolCall {
                tool_name, input, ..
            } => {
                out.push_str(tool_name);
                out.push(' ');
                out.push_str(&input.to_string());
            }
            Part::ToolResult { output, pruned, .. } => {
                out.push_str(if *pruned { PRUNED_PLACEHOLDER } else { output });
            }
            Part::File { uri, .. } => out.push_str(uri),
        }
    }
    out
}

/// Kept out of total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub kept: usize,
    pub total: usize,
}

impl Tally {
    fn add(&mut self, kept: bool) {
        self.total += 1;
        self.kept += usize::from(kept);
    }

    /// Percent kept (100 when there is nothing to keep).
    pub fn pct(&self) -> f64 {
        if self.total == 0 {
            100.0
        } else {
            100.0 * self.kept as f64 / self.total as f64
        }
    }

    pub fn lost(&self) -> usize {
        self.total - self.kept
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} {:.0}%", self.kept, self.total, self.pct())
    }
}

/// A context scored after a round.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Score {
    /// Messages appended so far (the facts in them are due).
    pub appended: usize,
    /// Current exact values planted so far.
    pub values: Tally,
    /// Of `values`, those only ever in tool output.
    pub tool_only: Tally,
    pub by_kind: BTreeMap<Kind, Tally>,
    pub by_source: BTreeMap<Source, Tally>,
    /// Current (not superseded) decisions and constraints said so far.
    pub statements: Tally,
    /// Statements replaced so far.
    pub superseded: usize,
    /// Of those, how many the context shows as current.
    pub superseded_shown: usize,
    /// Current facts said so far that the context holds only on lines
    /// marked superseded (counted as lost).
    pub current_shown_superseded: usize,
    /// Indices (in the session's facts) of due facts the context lacks.
    pub lost: Vec<usize>,
    /// Indices of superseded facts the context shows as current.
    pub stale: Vec<usize>,
    pub context_tokens: u64,
    /// Pairs of lines of the preamble that say nearly the same thing
    /// ([`near_duplicate_pairs`]).
    pub near_duplicate_pairs: usize,
}

/// Scores `view` after the first `appended` messages of `session`.
pub fn score(session: &Session, appended: usize, view: &ContextView) -> Score {
    let mut s = Score {
        appended,
        context_tokens: view.tokens,
        near_duplicate_pairs: near_duplicate_pairs(&view.preamble),
        ..Score::default()
    };
    for (i, f) in session.facts.iter().enumerate() {
        if !f.planted_within(appended) {
            continue;
        }
        if f.superseded_within(appended) {
            s.superseded += 1;
            if view.shows_as_current(f) {
                s.superseded_shown += 1;
                s.stale.push(i);
            }
            continue;
        }
        let kept = view.contains_as_current(&f.value, f.fold_case());
        if !kept {
            s.lost.push(i);
            if view.contains(&f.value, f.fold_case()) {
                s.current_shown_superseded += 1;
            }
        }
        if f.class == Class::Value {
            s.values.add(kept);
            if f.source == Source::ToolOutputOnly {
                s.tool_only.add(kept);
            }
            s.by_kind.entry(f.kind).or_default().add(kept);
            s.by_source.entry(f.source).or_default().add(kept);
        } else {
            s.statements.add(kept);
        }
    }
    s
}

/// Jaccard similarity of word 3-shingles at or above which two lines are
/// near-duplicates.
pub const NEAR_DUPLICATE_JACCARD: f64 = 0.8;

/// The word 3-shingles of a line (lowercased words split on whitespace,
/// list markers dropped), as sorted hashes; `None` for a line of fewer than
/// three words (a heading, a bare value), which is not compared.
fn shingles(line: &str) -> Option<Vec<u64>> {
    use std::hash::{Hash, Hasher};
    let words: Vec<String> = line
        .split_whitespace()
        .filter(|w| !matches!(*w, "-" | "*" | "+" | "•"))
        .map(str::to_lowercase)
        .collect();
    if words.len() < 3 {
        return None;
    }
    let mut out: Vec<u64> = words
        .windows(3)
        .map(|w| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            w.hash(&mut h);
            h.finish()
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// How many pairs of lines of `text` have a word 3-shingle Jaccard
/// similarity of at least [`NEAR_DUPLICATE_JACCARD`] (lines of fewer than
/// three words are not compared; identical lines count).
pub fn near_duplicate_pairs(text: &str) -> usize {
    let sets: Vec<Vec<u64>> = text.lines().filter_map(shingles).collect();
    let mut pairs = 0;
    for (i, a) in sets.iter().enumerate() {
        for b in &sets[i + 1..] {
            let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
            // |A ∩ B| / |A ∪ B| ≤ |small| / |large|: skip pairs that cannot reach it.
            if (small.len() as f64) < NEAR_DUPLICATE_JACCARD * large.len() as f64 {
                continue;
            }
            let (mut x, mut y, mut common) = (0, 0, 0usize);
            while x < small.len() && y < large.len() {
                match small[x].cmp(&large[y]) {
                    std::cmp::Ordering::Less => x += 1,
                    std::cmp::Ordering::Greater => y += 1,
                    std::cmp::Ordering::Equal => {
                        common += 1;
                        x += 1;
                        y += 1;
                    }
                }
            }
            let union = small.len() + large.len() - common;
            if common as f64 >= NEAR_DUPLICATE_JACCARD * union as f64 {
                pairs += 1;
            }
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_matched_as_a_whole_token_and_any_neighbour_in_an_unspaced_script_bounds_it() {
        assert!(contains_value("see KD-5512 now", "KD-5512", false));
        assert!(!contains_value("see KD-5512-0937 now", "KD-5512", false));
        assert!(!contains_value("took 137s", "37s", false));
        assert!(!contains_value("Fremonters", "Fremont", false));
        assert!(contains_value(
            "为您推荐鲜鱼口老字号美食街，人均消费75元。",
            "75元",
            false
        ));
        assert!(contains_value(
            "为您推荐鲜鱼口老字号美食街，人均消费75元。",
            "鲜鱼口老字号美食街",
            false
        ));
        assert!(contains_value("予約は田中さんです", "田中", false));
        assert!(
            !contains_value("人均消费175元", "75元", false),
            "a digit is no boundary"
        );
    }

    #[test]
    fn near_duplicate_lines_are_counted() {
        let text = "- the user wants a table in San Jose at 7 pm tonight\n\
                    - The user wants a table in San Jose at 7 pm tonight\n\
                    - the user wants a table in Fremont at 8 pm on Friday\n\
                    KEY FACTS:\n\
                    KEY FACTS:\n\
                    a b c d e f g h i j\n\
                    a b c d e f g h i j k\n";
        // The first two (case aside, identical), the last two (8 of 9 shingles).
        assert_eq!(near_duplicate_pairs(text), 2);
        assert_eq!(near_duplicate_pairs(""), 0);
    }

    #[test]
    fn a_value_only_on_lines_marked_superseded_is_not_read_as_current() {
        let view = ContextView {
            preamble: "- March 11th (#156) [superseded by the user at #1109]\n\
                       - #1029 constraint, superseded by #1109: on the 11th of this month\n\
                       - 17:30 (#1113)"
                .into(),
            tail: vec!["Book it for 6 pm.".into()],
            tokens: 0,
        };
        assert!(view.contains("March 11th", false));
        assert!(!view.contains_as_current("March 11th", false));
        assert!(!view.contains_as_current("11th of this month", true));
        assert!(view.contains_as_current("17:30", false));
        assert!(
            view.contains_as_current("6 pm", false),
            "the tail is history as said"
        );
    }
}
