//! Evidence: sentences of the compacted messages, squeezed to what they
//! say, chosen so the next model call still has what was said, whatever
//! the summarizer wrote.
//!
//! One general mechanism, no phrase rules:
//! 1. **Candidates by form** ([`forms`]): every sentence of every
//!    compacted message (user and assistant text; tool calls and tool
//!    output line by line) is cut into terms by the form of their
//!    characters: numbers, codes, names, days and months, quoted strings,
//!    words. Nothing in it names a domain.
//! 2. **Squeezed** ([`squeeze`]): a line keeps its values, what joins them
//!    and its rare words; the workstream's common words, counted over all
//!    of it ([`Evidence::vocabulary`]), go (in Chinese and Japanese, which
//!    have no spaces to cut at, whole clauses of common pairs go). A line of a tool's output
//!    shares its worth with the output's other lines (a listing is read,
//!    a short answer answers), unless it reports a failure
//!    ([`lang::FAILURES`]): the panic among thirty passing tests is what
//!    the work turns on.
//! 3. **Ranked by the workstream's own statistics** ([`select`]): a term
//!    is worth its rarity among the messages (so boilerplate and repeated
//!    menus sink), more when a value than a word, more when the user said
//!    it, more when another speaker repeated it.
//! 4. **Chosen as coverage under a budget**: lines are taken by what they
//!    newly cover per token; a line that nearly repeats a kept one, or the
//!    state's lines, adds nothing and is left out, so no context repeats
//!    itself. The summary is not asked: each compaction rewrites it, and a
//!    line left out because it said the line would be gone once it no
//!    longer does; the summary's bullets the evidence says go instead
//!    ([`crate::repeats::drop_evidence_repeats`]).
//! 5. **Superseded by slot** ([`slots`]): a later value the user gives for
//!    the same slot (same label, or same neighbouring words) within a
//!    short scope of messages replaces the earlier one, which is cut out
//!    of its line and shown marked on a line of its own.
//!
//! The budget is what the compaction leaves under
//! [`EvidenceConfig::share_of_trigger`] of the trigger: contexts used to sit
//! at a fifth of their trigger while losing most facts. Selection runs at
//! every compaction over the evidence kept before and the new span's lines,
//! so old evidence competes with new on the same terms.
//!
//! What stays language-specific (change cues, honorifics, days and
//! months, the words of a failure) is data, in [`lang`].

use std::collections::HashMap;

use rustc_hash::{FxHashMap, FxHashSet};

use serde::{Deserialize, Serialize};

use crate::message::{Message, MessageId, Part, Role};
use crate::tokens::TokenEstimator;

mod forms;
pub(crate) mod lang;
mod select;
mod slots;
mod squeeze;

pub use select::Chosen;
pub(crate) use select::{jaccard, shared, shingles};

/// Evidence settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvidenceConfig {
    /// Share of the trigger threshold a context may fill after a
    /// compaction, evidence included: evidence takes what the summary,
    /// the state and the kept tail leave below it (and keeps what it held
    /// before up to [`crate::pipeline::EVIDENCE_HOLD_SHARE`] of it). 0
    /// turns evidence off. Unset: derived from the trigger
    /// ([`derived_share_of_trigger`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_of_trigger: Option<f64>,
    /// Evidence budget, in tokens, when the trigger has no threshold.
    pub max_tokens: u64,
    /// A later value supersedes an earlier one of its slot only within
    /// this many messages (a topic or a dialogue; unrelated tasks further
    /// apart never supersede each other).
    pub scope_messages: u64,
    /// Longest evidence line, in characters; longer lines are cut at
    /// sentence ends, then at spaces.
    pub max_line_chars: usize,
}

impl Default for EvidenceConfig {
    fn default() -> Self {
        EvidenceConfig {
            share_of_trigger: None,
            max_tokens: 4_000,
            scope_messages: 24,
            max_line_chars: 280,
        }
    }
}

impl EvidenceConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self
            .share_of_trigger
            .is_some_and(|share| !(0.0..=0.9).contains(&share))
        {
            return Err("share_of_trigger must be between 0 and 0.9".into());
        }
        if self.max_line_chars < 40 {
            return Err("max_line_chars must be at least 40".into());
        }
        Ok(())
    }
}

/// The share of the window a context is brought down to after a
/// compaction: CoWork's post-compaction target (`PROACTIVE_COMPACTION_TARGET`,
/// 50 % utilization), which leaves the other half for the conversation
/// that follows and the model's answer.
pub const POST_COMPACTION_TARGET: f64 = 0.5;

/// The least and the most an unset `share_of_trigger` derives to: below,
/// evidence would get almost nothing beside a summary; above, a compaction
/// would leave too little room before the next one is due.
const DERIVED_SHARE: (f64, f64) = (0.5, 0.8);

/// `share_of_trigger` when unset: the share of the trigger that is
/// [`POST_COMPACTION_TARGET`] of the window, so a context after a
/// compaction fills half the window whatever the trigger's ratio (0.9 of
/// the window → 0.56, 0.7 → 0.71), within [`DERIVED_SHARE`]. A fixed share
/// of the trigger left a workstream with a 0.7 ratio at 42 % of its window
/// while most of what it said was dropped for want of room. Without a
/// threshold (an unlimited window) the share applies to nothing
/// (`max_tokens` is the budget) and is the lower bound.
pub fn derived_share_of_trigger(window: u64, threshold: Option<u64>) -> f64 {
    match threshold.filter(|&t| t > 0) {
        Some(threshold) => (POST_COMPACTION_TARGET * window as f64 / threshold as f64)
            .clamp(DERIVED_SHARE.0, DERIVED_SHARE.1),
        None => DERIVED_SHARE.0,
    }
}

/// Who said a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Speaker {
    User,
    Assistant,
    /// A tool call's input or a tool's output.
    Tool,
}

impl Speaker {
    fn of(role: Role, tool: bool) -> Speaker {
        match role {
            _ if tool => Speaker::Tool,
            Role::User => Speaker::User,
            Role::Tool => Speaker::Tool,
            Role::Assistant | Role::System => Speaker::Assistant,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Speaker::User => "user",
            Speaker::Assistant => "assistant",
            Speaker::Tool => "tool",
        }
    }

    /// The one-letter tag a context writes before a line
    /// ([`EVIDENCE_HEADING`] says what each stands for): the prefix is paid
    /// on every line, so it is kept short.
    pub fn tag(self) -> &'static str {
        match self {
            Speaker::User => "u",
            Speaker::Assistant => "a",
            Speaker::Tool => "t",
        }
    }

    fn index(self) -> usize {
        match self {
            Speaker::User => 0,
            Speaker::Assistant => 1,
            Speaker::Tool => 2,
        }
    }
}

/// A value of a line that a later message replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replaced {
    /// The value, as the line writes it (case-folded); empty when the
    /// whole line is a statement the user superseded.
    pub value: String,
    /// The message that replaced it.
    pub by: MessageId,
    /// That message's place in the workstream ([`Line::seq`]); 0 when
    /// unknown (a statement's value).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seq: u64,
    /// The message of the mention it replaced (0 when unknown: a value
    /// stored before this was recorded). A replacement reaches that
    /// mention and what repeats it later, not a mention said before it:
    /// "March 11th" of one dialogue is not what "the 11th" of a later one
    /// changed.
    #[serde(default, skip_serializing_if = "is_unknown")]
    pub from: MessageId,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_unknown(id: &MessageId) -> bool {
    id.0 == 0
}

impl Replaced {
    /// A value distinctive enough to be marked wherever it stands (on a
    /// line of unknown place: a summary bullet, a statement, an exact
    /// value): three characters or more (`16:45`, `4th`), not `3` or `10`,
    /// which any line may hold for another reason.
    pub fn distinctive(&self) -> bool {
        forms::distinctive(&self.value)
    }
}

/// One kept line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    /// The message it was said in.
    pub at: MessageId,
    /// Its message's place in the workstream (the count of messages read
    /// before it), which slot scopes are measured in.
    pub seq: u64,
    pub speaker: Speaker,
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub superseded: Vec<Replaced>,
    /// The lines of the tool output it is one of (0 or 1: it stands
    /// alone): a long output is read, a short one answers, so a line's
    /// worth is shared among its output's lines ([`select`]).
    #[serde(default, skip_serializing_if = "alone")]
    pub of: u32,
    /// It is a line of a record or a document the user pasted (an
    /// invoice, a form, a report: [`crate::text::pasted_lines`]): like a
    /// tool's output, the record of one thing, whose values fill no slot
    /// and supersede none (the next invoice's `Total due:` is another
    /// invoice's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub record: bool,
    /// The line as it was read, before it was squeezed to its values
    /// (empty when `text` is all of it): each compaction reads a kept
    /// line again from here, so the words around its values still say
    /// which slot each fills. "C'est noté : taxi à 7:24, dossier …",
    /// shown as "7:24, dossier …", is still the taxi's time `à 7:24` that
    /// a later "plutôt à 11:33" changes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub read: String,
}

fn alone(of: &u32) -> bool {
    *of <= 1
}

/// The evidence of a workstream, stored in its state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Evidence {
    /// Kept lines, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<Line>,
    /// Messages read by every compaction so far.
    pub seen: u64,
    /// Values a later value of their slot replaced (the newest
    /// [`MAX_REPLACED`]), wherever they are shown: a summary bullet, a
    /// statement or an exact value that still states one is marked so.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<Replaced>,
    /// The workstream's common words: in how many of the messages read so
    /// far each was said, for the [`MAX_VOCABULARY`] said most often. A
    /// word absent from it is rare; what is common decides what a line is
    /// squeezed to ([`squeeze`]), and is counted over the whole workstream,
    /// not one compaction's span.
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    pub vocabulary: HashMap<String, u32>,
}

/// Words whose counts the evidence keeps: enough for any language's
/// grammar and a domain's every-day words, which are what a squeeze leaves
/// out; a word past them is rare.
pub const MAX_VOCABULARY: usize = 2_048;

/// Whether `sentence` only opens or closes the talk: it greets, thanks or
/// says it is done ([`lang::GREETINGS`], [`lang::CLOSINGS`], any language)
/// and holds no value by its form, or, in a few words, only the name of
/// the one it hails ("Hey Mel!", "Thanks Gina!"). The user's statements
/// ([`crate::stated`]) frame no such sentence as a decision or a
/// constraint.
pub fn only_closes(sentence: &str) -> bool {
    let folded = forms::fold(sentence);
    if !(lang::CLOSINGS.contained_in(&folded) || lang::GREETINGS.contained_in(&folded)) {
        return false;
    }
    let terms = forms::terms(sentence);
    let mut values = terms
        .iter()
        .filter(|t| {
            t.form.is_value() && !lang::CLOSINGS.has(&t.key) && !lang::GREETINGS.has(&t.key)
        })
        .peekable();
    values.peek().is_none()
        || (sentence.split_whitespace().count() <= HAIL_WORDS
            && values.all(|t| t.form == forms::Form::Name))
}

/// The most words of a greeting or a closing that hails its addressee by
/// name ("Hey Mel!", "Cool, thanks Mel!", "Hi Gina, welcome back").
const HAIL_WORDS: usize = 4;

/// Whether `sentence` holds a value by its form ([`forms`]: a number, a
/// code, a name, a quoted string) distinctive enough to be one: three
/// characters or more, or labelled (`22` in "message 22" is not, `37s`,
/// `2026` and `BILL-4100` are).
pub fn holds_value(sentence: &str) -> bool {
    forms::terms(sentence)
        .iter()
        .any(|t| t.form.is_value() && !lang::CLOSINGS.has(&t.key) && t.speaks_for_itself())
}

/// `sentence` with each value it gives by its form left out, its words
/// case-folded: what two sentences said with different values share
/// ("can you check the status of ticket · ?"). `None` when it gives no
/// value.
pub fn template(sentence: &str) -> Option<String> {
    let terms = forms::terms(sentence);
    let mut spans: Vec<(usize, usize)> = terms
        .iter()
        .filter(|t| t.form.is_value())
        .map(|t| t.span)
        .collect();
    if spans.is_empty() {
        return None;
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(sentence.len());
    let mut at = 0;
    for (from, to) in spans {
        if from < at {
            continue;
        }
        out.push_str(&forms::fold(sentence.get(at..from)?));
        out.push('\u{b7}');
        at = to;
    }
    out.push_str(&forms::fold(sentence.get(at..)?));
    Some(out)
}

/// Whether `later` nearly repeats `earlier` (word-shingle Jaccard at the
/// evidence's near-duplicate bar) and names every value `earlier` names:
/// showing both would say one thing twice, and the later says it all.
pub fn restates(later: &str, earlier: &str) -> bool {
    if jaccard(&shingles(later), &shingles(earlier)) < select::NEAR_DUPLICATE {
        return false;
    }
    let later = forms::fold(later);
    forms::terms(earlier)
        .iter()
        .filter(|t| t.form.is_value())
        .all(|t| has_token(&later, &t.key))
}

/// A sentence said this many times, each time with other values, is a
/// template the user reports or asks through, not a setting they change
/// ([`template`]).
pub const TEMPLATE_VALUES: usize = slots::TEMPLATE_VALUES;

/// Whether `sentence` gives a value by its form ([`forms`]: a number, a
/// count in letters such as "two tickets", a code, a name, a quoted
/// string), however short: what a user's sentence must give to be framed
/// as a constraint of the task ([`crate::stated::classify`]). A closing
/// word written with a capital ("No, Thanks") is no value, nor is the
/// name of the one spoken to ("Thanks, Melanie!": [`forms::addressed`]).
pub fn gives_value(sentence: &str) -> bool {
    forms::terms(sentence).iter().any(|t| {
        t.form.is_value()
            && !lang::CLOSINGS.has(&t.key)
            && !(t.form == forms::Form::Name && forms::addressed(sentence, t.span))
    })
}

/// Whether `new`, said after `old` by the same user, changes their mind
/// about it: it carries a change cue ([`lang::CHANGE_CUES`]: "instead",
/// "lieber", "mejor", "plutôt", "やっぱり"), says again a word that stood
/// next to a value of `old`, and gives in its place another of the same
/// form and shape ("Schicken Sie ihn an Lindenstraße 94, 04109 Leipzig."
/// … "Schicken Sie ihn doch lieber an mein Büro: Am Markt 93, 80331
/// München."). Words besides the cue are compared, never looked up: "We're
/// moving house on 28 June." is not changed by "Actually book dinner for
/// the 5 July.", which says nothing that stood by the date.
pub(crate) fn changes_mind(new: &str, old: &str) -> bool {
    let folded = crate::text::normalize(new);
    if !lang::CHANGE_CUES.contained_in(&folded) {
        return false;
    }
    // (A day or a time of day said with a cue is the change's when, not
    // the value it changes.)
    let changeable = |t: &&forms::Term| t.form.is_value() && !lang::CALENDAR.has(&t.key);
    let (said, now) = (forms::terms(old), forms::terms(new));
    let now: Vec<(&forms::Term, Option<String>)> = now
        .iter()
        .filter(changeable)
        .map(|n| (n, n.shape()))
        .collect();
    said.iter().filter(changeable).any(|t| {
        let shape = t.shape();
        said_beside(old, t.span, &folded)
            && !now.iter().any(|(n, _)| n.key == t.key)
            && now.iter().any(|(n, s)| {
                n.form == t.form && *s == shape && !said.iter().any(|o| o.key == n.key)
            })
    })
}

/// Whether `new` (case-folded) says again a word that stands near
/// `span` of `old`: one of the five words before it or the two after,
/// of four letters or more (shorter ones are the grammar every sentence
/// shares: "to", "the", "an"), or a pair of characters of an unspaced
/// script next to it.
fn said_beside(old: &str, span: (usize, usize), new: &str) -> bool {
    let (Some(before), Some(after)) = (old.get(..span.0), old.get(span.1..)) else {
        return false;
    };
    let near = before
        .split_whitespace()
        .rev()
        .take(5)
        .chain(after.split_whitespace().take(2));
    near.map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .any(|word| {
            if word.chars().any(forms::is_unspaced_script) {
                let chars: Vec<char> = word.chars().collect();
                chars.windows(2).any(|pair| {
                    pair.iter().all(|c| forms::is_unspaced_script(*c))
                        && new.contains(&pair.iter().collect::<String>())
                })
            } else {
                word.chars().count() >= 4
                    && word
                        .chars()
                        .all(|c| c.is_alphabetic() || c == '-' || c == '\'')
                    && has_token(new, &crate::text::normalize(word))
            }
        })
}

/// Replaced values remembered.
pub const MAX_REPLACED: usize = 64;

/// Whether `needle` (case-folded) stands in `hay` (case-folded) as a whole
/// token: not glued to a letter or a digit on either side, nor joined to
/// one by a sign that joins the pieces of a value (`21` is not a token of
/// `21.11.2026`, nor `KD-5512` of `KD-5512-0937`).
pub(crate) fn has_token(hay: &str, needle: &str) -> bool {
    stands_alone(hay, needle, true)
}

/// Whether `needle` stands in `hay` with nothing glued to it: no letter or
/// digit next to it, nor, with `joined`, a sign that joins a value's
/// pieces followed by one.
fn stands_alone(hay: &str, needle: &str, joined: bool) -> bool {
    fn glued(mut near: impl Iterator<Item = char>, joined: bool) -> bool {
        match near.next() {
            Some(c) if c.is_alphanumeric() => true,
            Some('.' | ',' | '-' | '/' | ':' | '_' | '@' | '+') if joined => {
                near.next().is_some_and(char::is_alphanumeric)
            }
            _ => false,
        }
    }
    !needle.is_empty()
        && hay.match_indices(needle).any(|(at, _)| {
            !glued(hay[..at].chars().rev(), joined)
                && !glued(hay[at + needle.len()..].chars(), joined)
        })
}

/// The heading of the evidence in a context.
pub const EVIDENCE_HEADING: &str =
    "Said earlier (lines of compacted messages, clipped to their values, oldest first; #N: the message; u: user, a: assistant, t: tool; an indented line goes on from the one above):";

impl Evidence {
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.replaced.is_empty() && self.seen == 0
    }

    /// The replacement of a value `line` still states as current: the
    /// newest replaced value it holds. When `written` tells the first and
    /// the last message the line was said in: one the line was first said
    /// before the replacing message, and last said at or after the
    /// replaced mention (a mention only older than that is another one).
    pub fn replaced_in(
        &self,
        line: &str,
        written: Option<(MessageId, MessageId)>,
    ) -> Option<&Replaced> {
        if self.replaced.is_empty() || line.contains("superseded") {
            return None;
        }
        let folded = forms::fold(line);
        self.replaced
            .iter()
            .rev()
            .filter(|r| {
                r.distinctive()
                    && written.is_none_or(|(first, last)| first < r.by && last >= r.from)
            })
            .find(|r| has_token(&folded, &r.value))
    }

    /// Marks each line that still states what the user superseded
    /// (`outdated`, the user's statements' matcher) as superseded.
    pub fn mark_outdated(&mut self, outdated: &crate::stated::Outdated) {
        if outdated.is_empty() {
            return;
        }
        for line in &mut self.lines {
            if line.superseded.iter().any(|r| r.value.is_empty()) {
                continue;
            }
            if let Some(by) = outdated.superseded_by(&line.text) {
                line.superseded.push(Replaced {
                    value: String::new(),
                    by,
                    seq: 0,
                    from: line.at,
                });
            }
        }
    }

    /// Takes in what the user's statements ([`crate::stated`]) say was
    /// superseded: the numbers and codes a superseded statement holds
    /// that no current statement says again are replaced values, and a
    /// kept line of a superseded statement (a clip of it, too) or one that
    /// still states a replaced value is marked superseded.
    pub fn mark_statements(&mut self, stated: &crate::stated::UserStatements, scope: u64) {
        // A current statement keeps a value current when it is the
        // statement's only value of its shape: one that names it beside
        // another of the same shape contrasts them ("book the 09:15 one,
        // the 07:40 is too early").
        let current: Vec<(MessageId, Vec<forms::Term>)> = stated
            .current()
            .map(|s| (s.source, forms::terms(&s.text)))
            .collect();
        let says = |key: &str, shape: &Option<String>| {
            current.iter().any(|(_, terms)| {
                terms.iter().any(|t| t.key == key)
                    && terms.iter().filter(|t| t.shape() == *shape).count() == 1
            })
        };
        for s in stated.superseded() {
            let Some(by) = s.superseded_by else { continue };
            let old = forms::terms(&s.text);
            // What the superseding statement says: a value of the old
            // one's shape it gives instead replaces it, unless it speaks
            // of another subject (a code of another shape the old one
            // lacks: another file, another ticket; a restated rule is not
            // a changed value).
            let new: Vec<forms::Term> = stated
                .items()
                .iter()
                .filter(|n| n.source == by)
                .flat_map(|n| forms::terms(&n.text))
                .collect();
            // (A superseding statement no longer recorded, evicted by the
            // caps, cannot be read: its supersession stands as recorded.)
            // (Of a like size too: a room `2033` changed to `5179` leaves
            // the `4` of "ab dem 4. Mai" as it was.)
            let digits = |key: &str| key.chars().filter(char::is_ascii_digit).count();
            let instead = |t: &forms::Term, shape: &Option<String>| {
                new.is_empty()
                    || (new.iter().any(|n| {
                        n.shape() == *shape
                            && n.key != t.key
                            && digits(&n.key).abs_diff(digits(&t.key)) <= 1
                    }) && !new.iter().any(|n| {
                        n.form == forms::Form::Code
                            && n.shape() != *shape
                            && !old.iter().any(|o| o.key == n.key)
                    }))
            };
            // A name of the old statement that the superseding one names
            // too, capitalised in the run of its words (not only after a
            // label, where any word is read as a name), is what it replaces
            // ("Scrap SQLite, use Postgres instead"), unless a current
            // statement still says it.
            // (Not a name that stands right before a number or a code in
            // both: it names the slot, "Zimmer 2033" … "Zimmer 5179".)
            let labels: Vec<String> = stated
                .items()
                .iter()
                .filter(|n| n.source == by || n.source == s.source)
                .flat_map(|n| forms::value_labels(&n.text))
                .collect();
            let renamed = |t: &forms::Term| {
                labels.iter().filter(|l| **l == t.key).count() < 2
                    && new
                        .iter()
                        .any(|n| n.form == forms::Form::Name && n.label.is_none() && n.key == t.key)
                    && !current
                        .iter()
                        .filter(|(source, _)| *source != by)
                        .any(|(_, terms)| terms.iter().any(|o| o.key == t.key))
            };
            for t in old.iter().cloned() {
                let shape = t.shape();
                if ((shape.is_some() && instead(&t, &shape) && !says(&t.key, &shape))
                    || renamed(&t))
                    && !self.replaced.iter().any(|r| r.value == t.key)
                {
                    self.replaced.push(Replaced {
                        value: t.key,
                        by,
                        seq: 0,
                        from: s.source,
                    });
                }
            }
            let text = forms::fold(&s.text);
            for line in self.lines.iter_mut().filter(|l| l.at == s.source) {
                let of_it = forms::fold(&line.text)
                    .split('…')
                    .map(str::trim)
                    .filter(|f| !f.is_empty())
                    .all(|f| text.contains(f));
                if of_it && !line.superseded.iter().any(|r| r.value.is_empty()) {
                    line.superseded.push(Replaced {
                        value: String::new(),
                        by,
                        seq: 0,
                        from: s.source,
                    });
                }
            }
        }
        let excess = self.replaced.len().saturating_sub(MAX_REPLACED);
        self.replaced.drain(..excess);
        let replaced = std::mem::take(&mut self.replaced);
        for line in &mut self.lines {
            let folded = forms::fold(&line.text);
            // A replaced value marks the lines of its slot's scope; one of
            // unknown place, only where it is distinctive, and not before
            // the mention it replaced.
            let near = |r: &&Replaced| {
                if r.seq == 0 {
                    r.distinctive() && line.at >= r.from
                } else {
                    r.seq.saturating_sub(line.seq) <= scope
                }
            };
            for r in replaced
                .iter()
                .filter(|r| !r.value.is_empty() && line.at < r.by)
                .filter(near)
            {
                if has_token(&folded, &r.value)
                    && !line.superseded.iter().any(|o| o.value == r.value)
                {
                    line.superseded.push(r.clone());
                }
            }
        }
        self.replaced = replaced;
    }

    /// Marks each bullet of `summary` (its history section aside) that
    /// still states a replaced value; returns how many.
    pub fn mark_summary(&self, summary: &mut crate::summary::Summary) -> usize {
        let mut n = 0;
        for section in summary.format.sections() {
            if *section == crate::summary::Section::ConversationFlow {
                continue;
            }
            for bullet in summary.section_mut(*section) {
                if let Some(r) = self.replaced_in(bullet, None) {
                    bullet.push_str(&format!(" [superseded by #{}: {}]", r.by.0, r.value));
                    n += 1;
                }
            }
        }
        n
    }

    /// The lines as a context shows them (empty when there are none).
    pub fn render(&self) -> String {
        render_lines(&self.lines)
    }

    /// The lines as a context shows them beside the user's statements: a
    /// line of the user's that a statement the list shows (current or
    /// superseded) of the same message says whole (every word of the line
    /// is in it) is left to the statement. The evidence keeps the line all the same, chosen on its
    /// own worth, so that when the statement leaves the list (its cap, a
    /// routine request folded) the line is still there.
    pub fn render_beside(&self, stated: &crate::stated::UserStatements) -> String {
        let statements = stated.listed();
        if statements.is_empty() {
            return self.render();
        }
        render_lines(
            self.lines
                .iter()
                .filter(|line| !said_whole(line, &statements)),
        )
    }
}

/// What a line that goes on under the line above starts with.
pub(crate) const CONTINUATION: &str = "  ";

/// Lines as a context shows them: each cites its message ([`render_line`]),
/// but a line of the message and speaker of the line just above, with no
/// marker of its own, goes on under it, indented ([`CONTINUATION`]): a
/// tool's output or a long answer kept over several lines pays for its
/// citation once (in the generated coding session, 474 of 825 lines).
pub(crate) fn render_lines<'a>(lines: impl IntoIterator<Item = &'a Line>) -> String {
    let mut out = String::new();
    let mut above: Option<(MessageId, Speaker)> = None;
    for line in lines {
        let key = (line.at, line.speaker);
        if above == Some(key) && line.superseded.is_empty() {
            out.push_str(&continued_line(line));
        } else {
            out.push_str(&render_line(line));
        }
        above = Some(key);
    }
    out
}

/// A line as it goes on under one of its message and speaker.
pub(crate) fn continued_line(line: &Line) -> String {
    format!("{CONTINUATION}{}\n", line.text)
}

/// Whether `line` is the user's and a statement the list shows of its
/// message (`said`: by message, case-folded) says it whole.
pub(crate) fn said_whole(line: &Line, said: &[(MessageId, String)]) -> bool {
    line.speaker == Speaker::User
        && said
            .iter()
            .any(|(at, text)| *at == line.at && says_whole(text, &line.text))
}

/// Whether every word of `line` (a squeezed line: its `…` aside) stands in
/// `statement` (case-folded) as a whole token.
fn says_whole(statement: &str, line: &str) -> bool {
    let folded = forms::fold(line);
    let mut words = folded
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .peekable();
    // (A word of a value counts: `408` of `408-555-0199`.)
    words.peek().is_some() && words.all(|w| stands_alone(statement, w, false))
}

/// One line as a context shows it: `- #N u: text`. A line the user
/// superseded whole is marked so at its end (`[superseded by #M]`). A
/// value a later one replaced is cut out of its line (`…`) and shown on a
/// line of its own, marked (`- #N u: 7 pm [superseded by #M]`): the
/// values beside it are still current, and a line's marker reads as the
/// whole line's.
pub(crate) fn render_line(line: &Line) -> String {
    let prefix = format!("#{} {}: ", line.at.0, line.speaker.tag());
    let whole: Vec<&Replaced> = line
        .superseded
        .iter()
        .filter(|r| r.value.is_empty())
        .collect();
    if !whole.is_empty() || line.superseded.is_empty() {
        let mut out = format!("{prefix}{}", line.text);
        if !line.superseded.is_empty() {
            out.push_str(" [superseded");
            for r in &line.superseded {
                if r.value.is_empty() {
                    out.push_str(&format!(" by #{}", r.by.0));
                } else {
                    out.push_str(&format!(" by #{}: {}", r.by.0, r.value));
                }
                out.push(';');
            }
            out.pop();
            out.push(']');
        }
        out.push('\n');
        return out;
    }
    let mut text = line.text.clone();
    for r in &line.superseded {
        text = cut(&text, &r.value);
    }
    let mut out = String::new();
    if text
        .split('…')
        .any(|piece| piece.chars().any(char::is_alphanumeric))
    {
        out.push_str(&prefix);
        out.push_str(&text);
        out.push('\n');
    }
    for r in &line.superseded {
        out.push_str(&format!(
            "{prefix}{} [superseded by #{}]\n",
            r.value, r.by.0
        ));
    }
    out
}

/// `text` with each whole-token occurrence of `value` (case-folded) cut
/// out and shown as `…`. Text whose case-folding changes its length is
/// left as it is.
fn cut(text: &str, value: &str) -> String {
    let lower = forms::fold(text);
    if lower.len() != text.len() || value.is_empty() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for (at, _) in lower.match_indices(value) {
        if at < from {
            continue;
        }
        let before = lower[..at].chars().next_back();
        let after = lower[at + value.len()..].chars().next();
        if before.is_some_and(char::is_alphanumeric) || after.is_some_and(char::is_alphanumeric) {
            continue;
        }
        out.push_str(&text[from..at]);
        out.push('…');
        from = at + value.len();
    }
    out.push_str(&text[from..]);
    out
}

/// A candidate line with its terms.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub(crate) line: Line,
    pub(crate) terms: Vec<forms::Term>,
}

/// What one span gave: its candidate lines (their `seq` counted from the
/// span's first message) and in how many of its messages each term is.
#[derive(Debug, Default)]
pub struct Read {
    pub(crate) lines: Vec<Candidate>,
    /// Per term, in how many messages each speaker said it (user,
    /// assistant, tool).
    pub(crate) df: FxHashMap<String, [u32; 3]>,
    /// Per plain word (case-folded), in how many messages it is: what a
    /// line is squeezed by ([`squeeze`]).
    pub(crate) words: FxHashMap<String, u32>,
    /// Per ideograph, in how many messages it is: what a pair of them is
    /// weighed against (a name's pairs stand together, a pair across two
    /// words' edge does not: [`select`]).
    pub(crate) chars: FxHashMap<char, u32>,
    pub(crate) messages: u64,
}

impl Read {
    /// Candidate lines read.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

/// Reads a span's messages into candidate lines (pure; the pipeline runs
/// it on its extraction thread).
pub fn read(span: &[Message], max_line_chars: usize) -> Read {
    let mut out = Read::default();
    for (i, message) in span.iter().enumerate() {
        let seq = i as u64;
        // Each term once per speaker of the message (a hash set: a tool's
        // output may hold thousands).
        let mut seen: FxHashSet<(String, Speaker)> = FxHashSet::default();
        let mut words: FxHashSet<String> = FxHashSet::default();
        let mut chars: FxHashSet<char> = FxHashSet::default();
        for part in &message.parts {
            let (text, tool) = match part {
                Part::Text { text } => (std::borrow::Cow::Borrowed(text.as_str()), false),
                Part::ToolCall {
                    tool_name, input, ..
                } => (
                    std::borrow::Cow::Owned(format!("{tool_name} {input}")),
                    true,
                ),
                Part::ToolResult { output, .. } => {
                    (std::borrow::Cow::Borrowed(output.as_str()), true)
                }
                Part::File { uri, .. } => (std::borrow::Cow::Borrowed(uri.as_str()), true),
                Part::Reasoning { .. } => continue,
            };
            let speaker = Speaker::of(message.role, tool);
            let pieces = lines_of(&text, max_line_chars);
            let of = match part {
                Part::ToolResult { .. } => u32::try_from(pieces.len()).unwrap_or(u32::MAX),
                _ => 0,
            };
            for (piece, record) in pieces {
                let piece: &str = &piece;
                // (Only what a person wrote can be a pasted record.)
                let record = record && !tool;
                squeeze::count_words(piece, &mut words);
                chars.extend(forms::ideographs(piece));
                let terms = forms::terms(piece);
                if terms.is_empty() {
                    continue;
                }
                // A line reporting a failure stands on its own.
                let of = if of > 1 && lang::FAILURES.contained_in(&forms::fold(piece)) {
                    0
                } else {
                    of
                };
                for t in &terms {
                    seen.insert((t.key.clone(), speaker));
                }
                out.lines.push(Candidate {
                    line: Line {
                        at: message.id,
                        seq,
                        speaker,
                        text: piece.to_owned(),
                        superseded: Vec::new(),
                        of,
                        record,
                        read: String::new(),
                    },
                    terms,
                });
            }
        }
        for (key, speaker) in seen {
            out.df.entry(key).or_default()[speaker.index()] += 1;
        }
        for word in words {
            *out.words.entry(word).or_default() += 1;
        }
        for c in chars {
            *out.chars.entry(c).or_default() += 1;
        }
    }
    out.messages = span.len() as u64;
    out
}

/// Whether a point after `word` before `after` is a day's ordinal point in
/// a date (`am 10. Juni`, `le 3. März`): a number of one or two digits
/// before it and a month or a day ([`lang::CALENDAR`]) after it. Sentences
/// are not cut there: the date would be cut in two.
pub(crate) fn ordinal_date(word: &str, after: &str) -> bool {
    let day = word.trim_start_matches(|c: char| !c.is_alphanumeric());
    if !(1..=2).contains(&day.len()) || !day.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    after
        .split_whitespace()
        .next()
        .map(|w| forms::fold(forms::core(w)))
        .is_some_and(|w| lang::CALENDAR.has(&w))
}

/// The sentences of a line: cut after `.`, `!`, `?` (and their full-width
/// forms) followed by a space or the line's end, not after a number's
/// point (`1.5`), a single capital (`J. Smith`), an honorific's point
/// ([`lang::HONORIFICS`]: `Dr. Castellanos`, `Dra. Ferreira`) nor a day's
/// ordinal point ([`ordinal_date`]: `10. Juni`).
fn sentences(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    for (k, &(at, c)) in chars.iter().enumerate() {
        let full_width = matches!(c, '。' | '！' | '？');
        if !(matches!(c, '.' | '!' | '?') || full_width) {
            continue;
        }
        let next = chars.get(k + 1).map(|&(_, n)| n);
        if !full_width && next.is_some_and(|n| !n.is_whitespace()) {
            continue;
        }
        // The word the point ends: `J.` (a capital alone before it) or a
        // day's ordinal (`10. Juni`) ends no sentence.
        let from = line[..at]
            .char_indices()
            .rev()
            .find(|(_, w)| w.is_whitespace())
            .map_or(0, |(i, w)| i + w.len_utf8());
        let word = &line[from..at];
        if c == '.'
            && ((word.chars().count() == 1 && word.chars().all(char::is_uppercase))
                || lang::HONORIFICS.has(&forms::fold(word)))
        {
            continue;
        }
        if c == '.' && ordinal_date(word, &line[at + 1..]) {
            continue;
        }
        let end = at + c.len_utf8();
        if line[start..end].trim().chars().any(char::is_alphanumeric) {
            out.push(line[start..end].trim());
        }
        start = end;
    }
    if line[start..].trim().chars().any(char::is_alphanumeric) {
        out.push(line[start..].trim());
    }
    out
}

/// The lines of `text` an evidence line may be: its sentences, long ones cut at
/// sentence ends, then at spaces, to at most `max` characters. A line of a
/// fenced code block (between two lines of ```` ``` ```` or `~~~`) is
/// one line of code, not sentences, and is written as inline code
/// (`` `cargo test -p billing` ``): what stands between quotes is one
/// value ([`squeeze`]), and a word cut out of a command makes another one.
fn lines_of(text: &str, max: usize) -> Vec<(std::borrow::Cow<'_, str>, bool)> {
    let mut out: Vec<(std::borrow::Cow<'_, str>, bool)> = Vec::new();
    let mut fenced = false;
    let pasted = crate::text::pasted_lines(text);
    for (raw, record) in text.lines().zip(pasted.iter().map(|p| p.is_pasted())) {
        let trimmed = raw.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced && !trimmed.is_empty() && !trimmed.contains('`') {
            for piece in cut_to(trimmed, max.saturating_sub(2).max(1)) {
                out.push((std::borrow::Cow::Owned(format!("`{piece}`")), false));
            }
            continue;
        }
        for line in sentences(raw) {
            out.extend(
                cut_to(line, max)
                    .into_iter()
                    .map(|piece| (std::borrow::Cow::Borrowed(piece), record)),
            );
        }
    }
    out
}

/// `line` trimmed, cut at sentence ends, then at spaces, to at most `max`
/// characters; nothing when it holds no letter or digit.
fn cut_to(line: &str, max: usize) -> Vec<&str> {
    let line = line.trim();
    if line.is_empty() || !line.chars().any(char::is_alphanumeric) {
        return Vec::new();
    }
    if line.chars().count() <= max {
        return vec![line];
    }
    let mut out = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        if rest.chars().count() <= max {
            out.push(rest.trim());
            break;
        }
        let limit = rest
            .char_indices()
            .nth(max)
            .map_or(rest.len(), |(at, _)| at);
        let head = &rest[..limit];
        let cut = head
            .rmatch_indices(['.', '!', '?', '。', ';', '；', '！', '？'])
            .map(|(at, s)| at + s.len())
            .find(|&at| at > limit / 3)
            .or_else(|| head.rfind([' ', ',', '、']).filter(|&at| at > limit / 3))
            .unwrap_or(limit);
        let piece = rest[..cut].trim();
        if piece.chars().any(char::is_alphanumeric) {
            out.push(piece);
        }
        rest = rest[cut..].trim_start();
    }
    out
}

/// The candidates of one compaction, span by span.
#[derive(Debug, Default)]
pub struct Gathering {
    read: Read,
    /// The current statements of the user, by message and case-folded
    /// ([`Gathering::beside`]).
    said: Vec<(MessageId, String)>,
}

/// Most candidate lines held at once; past it the weakest are dropped
/// (memory stays bounded on a compaction of any length).
const MAX_POOL: usize = 16_384;

impl Gathering {
    /// Adds a span read by [`read`]; `offset` is the count of messages
    /// the workstream had before the span.
    pub fn add(&mut self, mut span: Read, offset: u64) {
        for c in &mut span.lines {
            c.line.seq += offset;
        }
        let pool = &mut self.read;
        pool.lines.append(&mut span.lines);
        for (k, n) in span.df {
            let counts = pool.df.entry(k).or_default();
            for (c, n) in counts.iter_mut().zip(n) {
                *c += n;
            }
        }
        for (k, n) in span.words {
            *pool.words.entry(k).or_default() += n;
        }
        for (c, n) in span.chars {
            *pool.chars.entry(c).or_default() += n;
        }
        pool.messages += span.messages;
        if pool.lines.len() > MAX_POOL {
            select::prune(pool, MAX_POOL / 2);
        }
    }

    /// Messages added so far.
    pub fn messages(&self) -> u64 {
        self.read.messages
    }

    /// The user's statements the context shows beside the evidence: a
    /// line of the user's that a current statement of its message says
    /// whole costs the choice nothing (the context shows it once, as the
    /// statement: [`Evidence::render_beside`]), and what it says counts as
    /// covered. The evidence still keeps it, so that when the statement
    /// leaves the list the line is there to compete on its own.
    pub fn beside(&mut self, stated: &crate::stated::UserStatements) {
        self.said = stated.listed();
    }

    /// Chooses the evidence: `previous`'s lines and the gathered ones
    /// compete for `budget` tokens; lines that the rest of the context
    /// (`shown`: the state as rendered; the pipeline leaves the summary
    /// out, see the module doc) already says are left out. `later` are
    /// the messages kept after the span (the tail), read for supersession
    /// only.
    pub fn choose(
        self,
        previous: &Evidence,
        later: &[Message],
        shown: &str,
        budget: u64,
        config: &EvidenceConfig,
        estimator: &dyn TokenEstimator,
    ) -> Chosen {
        let seen = previous.seen + self.read.messages;
        let mut later = read(later, config.max_line_chars);
        for c in &mut later.lines {
            c.line.seq += seen;
        }
        let shown = select::Shown {
            text: shown,
            said: &self.said,
        };
        select::choose(previous, self.read, later, shown, budget, config, estimator)
    }
}

#[cfg(test)]
mod tests;
