//! One pass of the extractors over one piece of text, with span claims.
//!
//! Extractors run from the most specific kind to the least specific, and
//! each claims the bytes it took: a URL's host is not also a host, a date is
//! not also a ticket, `FX_CACHE_TTL: 30s` is a setting and not a duration as
//! well. Claims live in an ordered map, so checking one is `O(log n)` and a
//! pass stays linear in the text (times the log of what it found).
//!
//! The cost of a pass is one regex scan per pattern, so patterns are
//! skipped whenever a cheap check shows they cannot match: a byte test
//! (`@` for e-mails, `#` for `#1234`), or a literals-only gate (see
//! [`Scan::gated`]). The patterns tried on most texts and the gates are
//! screened together, in one pass of a regex set (see [`SCREENED`]). Over
//! bulk text a pass records at most a few values per kind and only claims
//! the rest, so a log with 20,000 timestamps costs 20,000 claims, not
//! 20,000 allocations.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::{LazyLock, OnceLock};

use regex::{Regex, RegexSet, RegexSetBuilder};

use super::{code, people, settings};

use crate::ledger::ArtifactKind;

/// A pattern: its source, and the regex compiled on first use, or `None`
/// if it failed to compile (a unit test checks that none does; an
/// extractor without its pattern finds nothing rather than panicking).
pub(super) struct Pattern {
    source: &'static str,
    regex: LazyLock<Option<Regex>>,
    /// Its place in [`SCREENED`], if it is screened; found on first use.
    slot: OnceLock<Option<usize>>,
}

impl Pattern {
    pub(super) const fn new(source: &'static str, regex: LazyLock<Option<Regex>>) -> Pattern {
        Pattern {
            source,
            regex,
            slot: OnceLock::new(),
        }
    }

    /// Its place in [`SCREENED`], if it is screened.
    fn slot(&'static self) -> Option<usize> {
        *self
            .slot
            .get_or_init(|| SCREENED.iter().position(|p| std::ptr::eq(*p, self)))
    }
}

impl std::ops::Deref for Pattern {
    type Target = Option<Regex>;

    fn deref(&self) -> &Option<Regex> {
        &self.regex
    }
}

/// Compiles `pattern` with ASCII word boundaries: `\b` becomes `(?-u:\b)`.
/// A Unicode `\b` makes the regex engine leave its fast DFA on any
/// non-ASCII text; every boundary the extractors need is between ASCII
/// characters (patterns that end in a Unicode letter class do not end in
/// `\b`, see `people`).
pub(super) fn compile(pattern: &str) -> Option<Regex> {
    Regex::new(&ascii_boundaries(pattern)).ok()
}

/// `pattern` with its word boundaries made ASCII (see [`compile`]).
fn ascii_boundaries(pattern: &str) -> String {
    pattern.replace(r"\b", r"(?-u:\b)")
}

/// Declares `static NAME: Pattern` compiled once on first use.
macro_rules! pattern {
    ($(#[$doc:meta])* $name:ident, $re:expr) => {
        $(#[$doc])*
        pub(super) static $name: $crate::ledger::extract::scan::Pattern =
            $crate::ledger::extract::scan::Pattern::new(
                $re,
                std::sync::LazyLock::new(|| $crate::ledger::extract::scan::compile($re)),
            );
    };
}
pub(super) use pattern;

/// Matches of `pattern` in `text` (none if it failed to compile).
pub(super) fn captures<'t>(
    pattern: &'static Pattern,
    text: &'t str,
) -> impl Iterator<Item = regex::Captures<'t>> {
    pattern
        .as_ref()
        .into_iter()
        .flat_map(move |r| r.captures_iter(text))
}

/// Whole matches of `pattern` in `text`.
pub(super) fn matches<'t>(
    pattern: &'static Pattern,
    text: &'t str,
) -> impl Iterator<Item = regex::Match<'t>> {
    pattern
        .as_ref()
        .into_iter()
        .flat_map(move |r| r.find_iter(text))
}

/// The patterns tried on most texts (they need no more than a digit, or
/// nothing at all, and no cheap check rules them out), screened together:
/// one pass of a [`RegexSet`] tells which of them match anywhere in a text,
/// and the others are not run. A set match is the pattern's own match, so
/// a pattern the screen rules out would have found nothing. Patterns with
/// Unicode classes (names, streets) stay out: they would bloat the set's
/// automaton.
static SCREENED: [&Pattern; 46] = [
    &code::UUID,
    &code::HEX_OR_TICKET,
    &code::ISSUE_REF,
    &code::ERROR_CODE,
    &code::EXCEPTION,
    &code::PREFIXED_CODE,
    &code::HTTP_STATUS,
    &code::HOST_PORT,
    &code::IPV4,
    &code::VERSION,
    &code::DURATION_COMPOUND,
    &code::DURATION,
    &code::QUANTITY,
    &code::COUNT,
    &code::CONFIG_NAME,
    &code::DOLLAR_LINE,
    &people::NUMERIC_DATE_TIME,
    &people::PHONE_US,
    &people::REFERENCE_SEGMENTS,
    &people::REFERENCE_CUE,
    &people::ACCESS_CODE,
    &people::FLIGHT,
    &people::PLACE,
    &people::UK_POSTCODE,
    &settings::ENV_ASSIGN,
    &settings::UPPER_ASSIGN,
    &settings::LOWER_ASSIGN,
    &settings::LINE_ASSIGN,
    &settings::PROSE_SET,
    &settings::PROSE_IS_NOW,
    &code::CVE,
    &code::SQLSTATE,
    &code::FENCE,
    &code::GATE_EXIT,
    &code::GATE_ERROR,
    &code::GATE_HTTP,
    &code::GATE_HTTP_REASON,
    &people::GATE_MONTH,
    &people::GATE_AMPM,
    &people::GATE_CURRENCY,
    &people::GATE_PHONE_CUE,
    &people::GATE_REFERENCE_CUE,
    &people::GATE_STREET,
    &people::GATE_NAME,
    &settings::GATE_SET_VERB,
    &settings::GATE_IS_NOW,
];

/// The set of [`SCREENED`], or `None` if it failed to build (then nothing
/// is screened out).
static SCREEN: LazyLock<Option<RegexSet>> = LazyLock::new(|| {
    RegexSetBuilder::new(SCREENED.iter().map(|p| ascii_boundaries(p.source)))
        .build()
        .ok()
});

/// Which of [`SCREENED`] match somewhere in `text`, one bit each.
fn screen(text: &str) -> u64 {
    match SCREEN.as_ref() {
        Some(set) => set.matches(text).iter().fold(0, |mask, i| mask | 1 << i),
        None => u64::MAX,
    }
}

/// A value found in one text, at byte offset `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Candidate {
    pub(super) at: usize,
    pub(super) kind: ArtifactKind,
    pub(super) key: Option<String>,
    pub(super) value: String,
}

/// What a pass over a text looks for besides plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Reading {
    /// Shell commands (`$ ` lines, shell fences, backticked CLI calls).
    pub(super) commands: bool,
    /// Values for named settings (`KEY=value`, "set the X to Y").
    pub(super) settings: bool,
    /// People's names after a cue ("contact:", "Mr.").
    pub(super) names: bool,
    /// Self-introductions ("my name is", "I'm"): only what the user says
    /// about themselves is their name.
    pub(super) self_names: bool,
}

/// Free text a person wrote (user or system).
pub(super) const STATED: Reading = Reading {
    commands: true,
    settings: true,
    names: true,
    self_names: true,
};
/// Free text the assistant wrote.
pub(super) const WRITTEN: Reading = Reading {
    self_names: false,
    ..STATED
};
/// A string inside a tool call's input (its command was taken already).
pub(super) const TOOL_INPUT: Reading = Reading {
    commands: false,
    ..WRITTEN
};
/// A tool's output: values only, no commands (a README's examples are not
/// commands anyone ran) and no names (a listing's `name:` is no person).
pub(super) const TOOL_OUTPUT: Reading = Reading {
    commands: false,
    settings: true,
    names: false,
    self_names: false,
};

/// One pass over `text`.
pub(super) struct Scan<'t> {
    pub(super) text: &'t str,
    /// Whether `text` has an ASCII digit: most kinds need one, and prose
    /// without digits skips their patterns.
    pub(super) has_digit: bool,
    claims: BTreeMap<usize, usize>,
    found: Vec<Candidate>,
    /// Most distinct values recorded per kind (bulk text: the caller keeps
    /// no more than that anyway); past it, matches are only claimed, which
    /// spares a long log thousands of allocations.
    per_kind: Option<usize>,
    recorded: HashMap<ArtifactKind, Vec<String>>,
    /// Which screened patterns match in `text` (see [`SCREENED`]), found
    /// on first use.
    screen: Cell<Option<u64>>,
}

impl<'t> Scan<'t> {
    pub(super) fn new(text: &'t str) -> Scan<'t> {
        Scan {
            text,
            has_digit: text.bytes().any(|b| b.is_ascii_digit()),
            claims: BTreeMap::new(),
            found: Vec::new(),
            per_kind: None,
            recorded: HashMap::new(),
            screen: Cell::new(None),
        }
    }

    /// A pass that records at most `limit` distinct values per kind.
    pub(super) fn bounded(text: &'t str, limit: usize) -> Scan<'t> {
        Scan {
            per_kind: Some(limit),
            ..Scan::new(text)
        }
    }

    /// Whether `pattern` may match in the text: always, unless it is
    /// screened (see [`SCREENED`]) and the screen found no match of it.
    pub(super) fn may_match(&self, pattern: &'static Pattern) -> bool {
        let Some(i) = pattern.slot() else {
            return true;
        };
        let mask = match self.screen.get() {
            Some(mask) => mask,
            None => {
                let mask = screen(self.text);
                self.screen.set(Some(mask));
                mask
            }
        };
        mask & 1 << i != 0
    }

    /// Whether the text contains what every match of a pattern must
    /// contain: `gate` is a literals-only pattern. Skipping a pattern whose
    /// gate is absent is what keeps a pass over a long log fast. The gates
    /// are screened with the patterns (see [`SCREENED`]), so asking costs
    /// nothing once the screen ran; a gate that failed to compile lets
    /// everything through.
    pub(super) fn gated(&self, gate: &'static Pattern) -> bool {
        gate.is_none() || self.may_match(gate)
    }

    /// Whole matches of `pattern` in the text (none if it cannot match).
    pub(super) fn find_all(
        &self,
        pattern: &'static Pattern,
    ) -> impl Iterator<Item = regex::Match<'t>> {
        let text = self.text;
        self.may_match(pattern)
            .then_some(pattern)
            .into_iter()
            .flat_map(move |p| matches(p, text))
    }

    /// Matches of `pattern` in the text (none if it cannot match).
    pub(super) fn captures_all(
        &self,
        pattern: &'static Pattern,
    ) -> impl Iterator<Item = regex::Captures<'t>> {
        let text = self.text;
        self.may_match(pattern)
            .then_some(pattern)
            .into_iter()
            .flat_map(move |p| captures(p, text))
    }

    /// Whether no claimed span overlaps `span`.
    pub(super) fn is_free(&self, span: &Range<usize>) -> bool {
        // Claims never overlap, so the one starting last before `span.end`
        // is the only one that can reach into `span`.
        match self.claims.range(..span.end).next_back() {
            Some((_, &end)) => end <= span.start,
            None => true,
        }
    }

    /// Claims `span` and records `value` as found at its start; `false`
    /// (and nothing recorded) if part of `span` was claimed already.
    pub(super) fn take(&mut self, span: Range<usize>, kind: ArtifactKind, value: &str) -> bool {
        self.take_keyed(span, kind, None, value)
    }

    /// [`Scan::take`] for a value with a key (a setting).
    pub(super) fn take_keyed(
        &mut self,
        span: Range<usize>,
        kind: ArtifactKind,
        key: Option<String>,
        value: &str,
    ) -> bool {
        if value.trim().is_empty() || !self.claim(span.clone()) {
            return false;
        }
        self.note_keyed(span.start, kind, key, value);
        true
    }

    /// Claims `span` without recording anything; `false` if part of it
    /// was claimed already.
    pub(super) fn claim(&mut self, span: Range<usize>) -> bool {
        if span.is_empty() || !self.is_free(&span) {
            return false;
        }
        self.claims.insert(span.start, span.end);
        true
    }

    /// Records `value` at `at` without claiming anything (commands: the
    /// values inside a command are values too).
    pub(super) fn note(&mut self, at: usize, kind: ArtifactKind, value: &str) {
        self.note_keyed(at, kind, None, value);
    }

    /// [`Scan::note`] for a value with a key.
    pub(super) fn note_keyed(
        &mut self,
        at: usize,
        kind: ArtifactKind,
        key: Option<String>,
        value: &str,
    ) {
        let value = value.trim();
        if value.is_empty() {
            return;
        }
        if let Some(limit) = self.per_kind {
            let recorded = self.recorded.entry(kind).or_default();
            if !recorded.iter().any(|v| v == value) {
                if recorded.len() >= limit {
                    return;
                }
                recorded.push(value.to_owned());
            }
        }
        self.found.push(Candidate {
            at,
            kind,
            key,
            value: value.to_owned(),
        });
    }

    /// The byte before `at`, if any.
    pub(super) fn byte_before(&self, at: usize) -> Option<u8> {
        at.checked_sub(1)
            .and_then(|i| self.text.as_bytes().get(i).copied())
    }

    /// The byte at `at`, if any.
    pub(super) fn byte_at(&self, at: usize) -> Option<u8> {
        self.text.as_bytes().get(at).copied()
    }

    /// Whether any value was recorded so far.
    pub(super) fn found_any(&self) -> bool {
        !self.found.is_empty()
    }

    /// Everything found, in order of position.
    pub(super) fn finish(mut self) -> Vec<Candidate> {
        self.found.sort_by_key(|c| c.at);
        self.found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_refuse_overlaps_and_allow_neighbours() {
        let mut s = Scan::new("abcdefghij");
        assert!(s.take(2..5, ArtifactKind::Path, "cde"));
        assert!(!s.take(4..6, ArtifactKind::Path, "ef"));
        assert!(!s.take(0..3, ArtifactKind::Path, "abc"));
        assert!(!s.take(3..4, ArtifactKind::Path, "d"));
        assert!(s.take(5..7, ArtifactKind::Path, "fg"));
        assert!(s.take(0..2, ArtifactKind::Path, "ab"));
        let got: Vec<String> = s.finish().into_iter().map(|c| c.value).collect();
        assert_eq!(got, ["ab", "cde", "fg"]);
    }

    #[test]
    fn the_screen_builds_and_screens_only_what_cannot_match() {
        assert!(SCREEN.is_some(), "the screen does not build");
        for text in [
            "Turn 5: see src/module_5.rs, E0502 after 45s; ENG-12 at 10:00",
            "no digits here at all",
            "MAX_RETRIES=5 and billing.fx_cache: on",
        ] {
            let s = Scan::new(text);
            for p in SCREENED {
                let found = p.as_ref().is_some_and(|r| r.is_match(text));
                assert!(s.may_match(p) || !found, "{} in {text}", p.source);
            }
        }
    }

    #[test]
    fn compile_makes_word_boundaries_ascii() {
        let re = compile(r"\bé?x\b").unwrap();
        assert!(re.is_match("a x b"));
        assert!(!re.is_match("axb"));
    }
}
