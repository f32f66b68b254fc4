//! Decisions and constraints the user stated, kept without a model.
//!
//! A summarizer may drop "never push to main" or keep "use Postgres" after
//! the user scrapped it; either way the next turn acts on the wrong rule.
//! So the user's own decisions and constraints are extracted
//! deterministically from the compacted messages ([`extract`]), each with
//! the message it came from, and kept in their own field of the workstream
//! state ([`UserStatements`]), which no summarizer output can edit.
//!
//! - **Only the user's words.** Text parts of user messages, minus what was
//!   pasted (code, logs, quotes, forwarded mail). A sentence counts when it
//!   has the shape of a decision ("we'll go with", "scrap X", "X is off",
//!   "ship on Friday") or of a constraint ("never", "must not", "don't",
//!   "only", "I'm allergic to …"); questions, hypotheticals, reported speech
//!   and casual remarks ("never mind, found it", "must be the cache") do
//!   not. See `classify`.
//! - **Supersession.** A later statement that sets the same key to a new
//!   value ("make the timeout 45s" after "set the request timeout to 37s"),
//!   or that drops what an earlier one chose ("scrap Postgres"), marks the
//!   earlier one superseded, with the id of the message that did. Subjects
//!   are compared conservatively (see `subject`): two statements about
//!   different things never supersede each other.
//! - **Bounded, idempotent.** Current statements and superseded ones have
//!   separate caps: beyond its cap the oldest superseded statements go;
//!   beyond theirs the oldest current decisions go, then the oldest current
//!   constraints. Statements are kept ordered by where they were said, and
//!   recording the same batch twice (a retried job) changes nothing.
//! - **Never shown as current once superseded.** [`UserStatements::render`]
//!   lists current statements under one heading and superseded ones each on
//!   a line that says "superseded"; [`Outdated`] finds other lines (summary
//!   bullets, the state the summarizer wrote) that still state a superseded
//!   value, so they can be marked.

mod classify;
mod sentence;
mod subject;
mod words;

use crate::text::is_one_of;
use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::message::{Message, MessageId, Part, Role};
use crate::summary::{Section, Summary};
use crate::text::{normalize, Pasted};
use subject::Subject;

/// What a statement does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatementKind {
    /// A choice or a change: "let's go with SQLite", "Monday instead".
    Decision,
    /// A rule or a condition: "never push to main", "I'm vegetarian".
    Constraint,
    /// A value the task must meet, given without a word of rule or choice:
    /// "Please find events in Portland, OR.", "I need a cab for two".
    /// Requests age out first: they hold while their task is on.
    Request,
}

impl StatementKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StatementKind::Decision => "decision",
            StatementKind::Constraint => "constraint",
            StatementKind::Request => "request",
        }
    }
}

/// One decision or constraint the user stated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statement {
    pub kind: StatementKind,
    /// The sentence, as the user wrote it.
    pub text: String,
    /// The message it was said in.
    pub source: MessageId,
    /// Its position among the candidate sentences of that message, so two
    /// statements of one message are ordered.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sentence: u32,
    /// The message whose statement replaced this one; `None` while current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<MessageId>,
    /// The newest saying of a sentence the user said again and again with
    /// other values (see [`UserStatements::enforce_caps`]): the next saying
    /// replaces it in the list.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub routine: bool,
    /// Current but not shown: beyond the list's cap ([`StatedCaps::current`])
    /// a statement is still kept, so that a later one can still replace it
    /// (and its lines in the evidence be marked), until the store's cap
    /// ([`STORED_PER_SHOWN`] times the list's) lets it go.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dormant: bool,
    /// Its message's place in the workstream (the messages before it), as
    /// the evidence counts them: how far apart two statements were said
    /// (see [`UserStatements::record`]). `None` in records written before
    /// it was kept: no distance then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Statement {
    pub fn new(
        kind: StatementKind,
        text: impl Into<String>,
        source: MessageId,
        sentence: u32,
    ) -> Statement {
        Statement {
            kind,
            text: text.into(),
            source,
            sentence,
            superseded_by: None,
            routine: false,
            dormant: false,
            seq: None,
        }
    }

    /// The statement, said `seq` messages into the workstream.
    pub fn at(self, seq: u64) -> Statement {
        Statement {
            seq: Some(seq),
            ..self
        }
    }

    /// Whether the two were said within `scope` messages of each other
    /// (or either's place is unknown).
    fn near(&self, other: &Statement, scope: u64) -> bool {
        match (self.seq, other.seq) {
            (Some(a), Some(b)) => a.abs_diff(b) <= scope,
            _ => true,
        }
    }

    pub fn is_current(&self) -> bool {
        self.superseded_by.is_none()
    }

    /// Where it was said: message, then sentence.
    fn position(&self) -> (MessageId, u32) {
        (self.source, self.sentence)
    }
}

/// Whether `sentence` of the user states a decision or a constraint: the
/// framing rule (see `classify`) that [`extract`] applies to each sentence
/// of the user. The extractive summarizer uses it so a casual remark never
/// becomes a constraint there either.
pub fn classify(sentence: &str) -> Option<StatementKind> {
    classify::classify(sentence)
}

/// Whether `sentence`, whoever says it, states a rule or a change in so
/// many words: an assistant's "Noted: never push to main." repeats the
/// user's rule, its "Noted order 70360." only reports a value.
pub fn states_rule(sentence: &str) -> bool {
    classify::states_rule(sentence)
}

/// The statement rules' answer ([`classify`]) for each sentence of the
/// user that [`extract_classified`] read, by its trimmed text.
///
/// The extractive summarizer asks the same rules about the same sentences
/// when it folds their transcript; a compaction hands it these answers so
/// that each sentence is classified once (see
/// `extractive::Judgements::know`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Classified {
    answers: HashMap<String, Option<StatementKind>>,
}

impl Classified {
    /// What [`classify`] answers for `sentence`, if it was read.
    pub fn get(&self, sentence: &str) -> Option<Option<StatementKind>> {
        self.answers.get(sentence.trim()).copied()
    }
}

/// The decisions and constraints stated in the text parts of the user's
/// messages, in message order, each at its message's place in `messages`
/// ([`Statement::seq`]; the caller adds the messages before them).
pub fn extract(messages: &[Message]) -> Vec<Statement> {
    extract_into(messages, None)
}

/// [`extract`], and the rules' answer for every sentence it classified.
pub fn extract_classified(messages: &[Message]) -> (Vec<Statement>, Classified) {
    let mut classified = Classified::default();
    let statements = extract_into(messages, Some(&mut classified));
    (statements, classified)
}

fn extract_into(messages: &[Message], mut classified: Option<&mut Classified>) -> Vec<Statement> {
    let mut out = Vec::new();
    for (seq, message) in messages.iter().enumerate() {
        if message.role != Role::User {
            continue;
        }
        let seq = seq as u64;
        let mut index = 0u32;
        for part in &message.parts {
            let Part::Text { text } = part else { continue };
            let mut previous: Option<&str> = None;
            for sentence::Candidate {
                text: candidate,
                pasted,
            } in sentence::candidates(text)
            {
                // A pasted record's values are the record's: only the
                // user's words of rule or choice frame a line of it. A
                // pasted document's prose is its author's: none of it.
                let kind = classify::classify(candidate).filter(|k| match pasted {
                    Pasted::Said => true,
                    Pasted::Record => *k != StatementKind::Request,
                    Pasted::Document => false,
                });
                if let Some(classified) = classified.as_deref_mut() {
                    classified.answers.insert(candidate.trim().to_owned(), kind);
                }
                match (kind, previous) {
                    // "Can you ask for a window seat? 14A if possible.": a
                    // value given in a few words means little without the
                    // sentence before it, so the two are kept together.
                    (Some(kind), Some(context)) if bare_answer(candidate) => {
                        let text = format!("{context} {candidate}");
                        out.push(Statement::new(kind, text, message.id, index).at(seq));
                    }
                    (Some(kind), _) => {
                        out.push(Statement::new(kind, candidate, message.id, index).at(seq));
                    }
                    (None, _) => {}
                }
                previous = (kind.is_none()).then_some(candidate);
                index = index.saturating_add(1);
            }
        }
    }
    out
}

/// A value and at most a couple of words around it ("14A if possible.",
/// "On the 7th."): an answer to what the sentence before it asked.
fn bare_answer(sentence: &str) -> bool {
    let words = sentence.split_whitespace().count();
    words <= BARE_ANSWER_WORDS && !sentence.trim_end().ends_with(['?', '？'])
}

/// Words a bare answer holds at most, its values included.
const BARE_ANSWER_WORDS: usize = 4;

/// Bounds of the recorded statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatedCaps {
    /// Current statements kept; beyond it the oldest requests go first,
    /// then the oldest decisions, then the oldest constraints.
    pub current: usize,
    /// Superseded statements kept as history (the oldest go first).
    pub superseded: usize,
}

impl Default for StatedCaps {
    fn default() -> Self {
        StatedCaps {
            current: 16,
            superseded: 6,
        }
    }
}

/// The user's statements, as stored in the workstream state: current and
/// superseded ones, ordered by where they were said.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserStatements {
    items: Vec<Statement>,
}

/// A statement changed in part: its text with the changed values cut
/// out, and those values.
type InPart = (String, Vec<String>);

/// First line of the rendered current statements.
pub const CURRENT_HEADING: &str =
    "Decisions and constraints stated by the user (current; they override anything else here):";
/// First line of the rendered superseded statements.
pub const SUPERSEDED_HEADING: &str =
    "Earlier statements of the user, superseded by later ones (not current):";

impl UserStatements {
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// All statements, ordered by where they were said.
    pub fn items(&self) -> &[Statement] {
        &self.items
    }

    /// Statements still in force.
    pub fn current(&self) -> impl Iterator<Item = &Statement> {
        self.items.iter().filter(|s| s.is_current())
    }

    /// The statements the list shows, current and superseded, by message
    /// and case-folded: what a line of the evidence need not say again.
    pub fn listed(&self) -> Vec<(MessageId, String)> {
        self.items
            .iter()
            .filter(|s| !s.dormant)
            .map(|s| (s.source, crate::text::normalize(&s.text)))
            .collect()
    }

    /// Current statements the list shows ([`Statement::dormant`] aside).
    pub fn shown(&self) -> impl Iterator<Item = &Statement> {
        self.items.iter().filter(|s| s.is_current() && !s.dormant)
    }

    /// Statements a later one replaced.
    pub fn superseded(&self) -> impl Iterator<Item = &Statement> {
        self.items.iter().filter(|s| !s.is_current())
    }

    /// Whether a current statement reads like `text` (normalized).
    pub fn is_current_text(&self, text: &str) -> bool {
        let key = normalize(text);
        !key.is_empty() && self.shown().any(|s| normalize(&s.text) == key)
    }

    /// The current statements' texts, normalized once: for asking
    /// [`UserStatements::is_current_text`] of many texts (the offline
    /// summarizer asks it of every decision and constraint it reads).
    pub fn current_texts(&self) -> CurrentTexts {
        CurrentTexts(
            self.shown()
                .map(|s| normalize(&s.text))
                .filter(|key| !key.is_empty())
                .collect(),
        )
    }

    /// Records newly extracted statements, then enforces `caps`.
    ///
    /// A statement already recorded (same message, sentence and text) is
    /// skipped, and so is one whose words are recorded at a later position;
    /// a current statement repeated later keeps one record, at the later
    /// position. Each new statement is checked against the statements said
    /// after it (it may be superseded already: a retried batch) and
    /// supersedes the current ones said before it. Of a batch larger than
    /// [`MAX_BATCH`] only the newest statements are looked at (a span that
    /// states hundreds of rules is pasted text, not conversation).
    /// Deterministic and idempotent.
    ///
    /// A change that names no earlier value finds what it changes by its
    /// subject; a word of when ("afternoon", "Montag", "soir") is its
    /// subject only within `scope` messages ([`Statement::seq`]): "make it
    /// half past 12 in the afternoon" changes the booking said just
    /// before, not one of another dialogue a hundred messages back "at a
    /// quarter to 4 in the afternoon". Any other subject reaches any
    /// distance ("Actually make it an aisle seat, 18C", long after "a
    /// window seat? 14A").
    pub fn record(
        &mut self,
        seen: impl IntoIterator<Item = Statement>,
        caps: &StatedCaps,
        scope: u64,
    ) {
        let mut incoming: Vec<Statement> = seen.into_iter().collect();
        incoming.sort_by_key(Statement::position);
        let skip = incoming.len().saturating_sub(MAX_BATCH);
        let mut parsed: Vec<Parsed> = self.items.iter().map(Parsed::of).collect();
        for statement in incoming.into_iter().skip(skip) {
            self.insert(statement, &mut parsed, scope);
        }
        self.enforce_caps(caps);
    }

    /// Inserts one statement; `parsed` is kept aligned with `self.items`.
    fn insert(&mut self, mut new: Statement, parsed: &mut Vec<Parsed>, scope: u64) {
        new.text = new.text.trim().to_owned();
        new.superseded_by = None;
        let mine = Parsed::of(&new);
        if mine.norm.is_empty()
            || self
                .items
                .iter()
                .zip(parsed.iter())
                .any(|(s, p)| s.position() == new.position() && p.norm == mine.norm)
        {
            return;
        }
        // The same words again: one record, at the latest position where
        // they are current (a restated superseded statement is new).
        if let Some(at) = self.items.iter().zip(parsed.iter()).position(|(s, p)| {
            p.norm == mine.norm && (s.is_current() || s.position() > new.position())
        }) {
            if self.items[at].position() >= new.position() {
                return;
            }
            self.items.remove(at);
            parsed.remove(at);
        }
        let at = self
            .items
            .iter()
            .zip(parsed.iter())
            .take_while(|(s, p)| {
                (s.position(), p.norm.as_str()) < (new.position(), mine.norm.as_str())
            })
            .count();
        // Said before something that already replaced it (a retried batch,
        // or statements recorded out of order).
        new.superseded_by = (at..self.items.len())
            .find(|&k| {
                supersedes(&parsed[k], &new, &mine)
                    || (parsed[k].subject.can_refer_to(&mine.subject)
                        && !(at..k).any(|j| parsed[k].subject.can_refer_to(&parsed[j].subject)))
            })
            .map(|k| self.items[k].source);
        let mut replaced = false;
        for (earlier, earlier_parsed) in self.items[..at].iter_mut().zip(parsed.iter()) {
            if earlier.is_current() && supersedes(&mine, earlier, earlier_parsed) {
                earlier.superseded_by = Some(new.source);
                replaced = true;
            }
        }
        // "Actually, make it 45s": the latest earlier statement it can
        // refer to, if that one is still current; or, for a change of the
        // same pattern, one on the same subject (by a word of when, only
        // one said near: from `reach` on).
        // (What "it" refers to was said near: a correction a hundred
        // messages on refers to what was said just before it, not to the
        // last statement of its shape in another task.)
        if let Some(k) = (0..at)
            .rev()
            .find(|&k| mine.subject.can_refer_to(&parsed[k].subject))
            .filter(|&k| self.items[k].near(&new, scope))
            .or_else(|| {
                let reach = self.items[..at]
                    .iter()
                    .take_while(|s| !s.near(&new, scope))
                    .count();
                respecified(&mine, &parsed[..at], reach)
            })
        {
            let target = &mut self.items[k];
            if target.is_current() {
                target.superseded_by = Some(new.source);
                replaced = true;
            }
        }
        // A change of mind in any language, when nothing above found what
        // it changes: the statement just before, said in an earlier
        // message, whose value this one gives anew beside a word of it and
        // a change cue ("Schicken Sie ihn doch lieber an mein Büro: Am
        // Markt 93" after "Schicken Sie ihn an Lindenstraße 94").
        if let Some(before) = at
            .checked_sub(1)
            .filter(|_| !replaced)
            .map(|k| &mut self.items[k])
        {
            if before.is_current()
                && before.source != new.source
                && crate::evidence::changes_mind(&new.text, &before.text)
            {
                before.superseded_by = Some(new.source);
            }
        }
        self.items.insert(at, new);
        parsed.insert(at, mine);
    }

    /// Drops the oldest superseded statements beyond `caps.superseded`, then
    /// the oldest current requests, decisions and constraints beyond
    /// `caps.current`, in that order.
    ///
    /// Before any cap, a sentence the user said again and again with other
    /// values ([`crate::evidence::template`], at least
    /// [`crate::evidence::TEMPLATE_VALUES`] times: "Can you check the
    /// status of ticket 4139?", "… 4142?") is a routine request, not a
    /// standing rule: only its newest saying stays, so a run of them
    /// never pushes a decision out, nor fills the superseded statements'
    /// history. The others are still in the evidence.
    pub fn enforce_caps(&mut self, caps: &StatedCaps) {
        // (Superseded sayings count too: the subject rules read each new
        // saying as replacing the one before, which a routine is not.)
        let templates: Vec<Option<String>> = self
            .items
            .iter()
            .map(|s| crate::evidence::template(&s.text))
            .collect();
        // Per template: its sayings, and whether one was already folded.
        let mut sayings: HashMap<&str, (usize, bool)> = HashMap::new();
        for (t, s) in templates.iter().zip(&self.items) {
            if let Some(t) = t {
                let entry = sayings.entry(t.as_str()).or_default();
                entry.0 += 1;
                entry.1 |= s.routine;
            }
        }
        let routine = |t: &Option<String>| -> Option<usize> {
            let (said, folded) = *sayings.get(t.as_deref()?)?;
            (said >= crate::evidence::TEMPLATE_VALUES || (folded && said >= 2)).then_some(said)
        };
        let folds: Vec<Option<usize>> = templates.iter().map(routine).collect();
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut keep = Vec::with_capacity(self.items.len());
        for (t, fold) in templates.iter().zip(&folds) {
            keep.push(match (t, fold) {
                (Some(t), Some(said)) => {
                    let n = seen.entry(t.as_str()).or_default();
                    *n += 1;
                    // Only the newest saying stays.
                    if *n == *said {
                        Some(true)
                    } else {
                        None
                    }
                }
                _ => Some(false),
            });
        }
        let mut keep = keep.into_iter();
        self.items.retain_mut(|s| match keep.next() {
            Some(Some(newest_of_routine)) => {
                s.routine |= newest_of_routine;
                true
            }
            _ => false,
        });
        let superseded = self.superseded().count();
        let mut excess = superseded.saturating_sub(caps.superseded);
        self.items.retain(|s| {
            if excess > 0 && !s.is_current() {
                excess -= 1;
                false
            } else {
                true
            }
        });
        // Requests go first: a run of values given never pushes a rule
        // out, and the evidence keeps their lines on its own. Beyond the
        // list's cap a statement is kept dormant (not shown), beyond the
        // store's it goes.
        let order = [
            StatementKind::Request,
            StatementKind::Decision,
            StatementKind::Constraint,
        ];
        let stored = caps.current.saturating_mul(STORED_PER_SHOWN);
        for kind in order {
            let mut excess = self.current().count().saturating_sub(stored);
            self.items.retain(|s| {
                if excess > 0 && s.is_current() && s.kind == kind {
                    excess -= 1;
                    false
                } else {
                    true
                }
            });
        }
        let mut excess = self.current().count().saturating_sub(caps.current);
        for s in &mut self.items {
            s.dormant = false;
        }
        for kind in order {
            for s in self.items.iter_mut() {
                if excess > 0 && s.is_current() && s.kind == kind {
                    s.dormant = true;
                    excess -= 1;
                }
            }
        }
    }

    /// The statements for a model: current ones under [`CURRENT_HEADING`]
    /// with their source message, superseded ones under
    /// [`SUPERSEDED_HEADING`], each of their lines saying "superseded".
    /// Empty when there is none.
    ///
    /// A statement its replacement changed in part ("make the hotel 3
    /// nights" after "2 nights, and keep it under €900") is shown current
    /// with the changed values cut out (`…`), and those values alone as
    /// superseded: the rest of what it said still holds.
    pub fn render(&self) -> String {
        let parts: Vec<(&Statement, Option<InPart>)> =
            self.superseded().map(|s| (s, self.in_part(s))).collect();
        let mut out = String::new();
        let partly: Vec<(&Statement, &String)> = parts
            .iter()
            .filter_map(|(s, p)| p.as_ref().map(|(kept, _)| (*s, kept)))
            .collect();
        if self.shown().next().is_some() || !partly.is_empty() {
            out.push_str(CURRENT_HEADING);
            out.push('\n');
            let mut current: Vec<(MessageId, &str, &str)> = self
                .shown()
                .map(|s| (s.source, s.kind.as_str(), s.text.as_str()))
                .chain(
                    partly
                        .iter()
                        .map(|(s, kept)| (s.source, s.kind.as_str(), kept.as_str())),
                )
                .collect();
            current.sort_by_key(|(source, _, _)| *source);
            // A statement a later one restates whole is said once, by the
            // later one (a sentence repeated with a word changed).
            for (i, (source, kind, text)) in current.iter().enumerate() {
                if current[i + 1..]
                    .iter()
                    .any(|(_, _, later)| crate::evidence::restates(later, text))
                {
                    continue;
                }
                out.push_str(&format!("- #{source} {kind}: {text}\n"));
            }
        }
        if !parts.is_empty() {
            out.push_str(SUPERSEDED_HEADING);
            out.push('\n');
            for (s, part) in &parts {
                let by = s.superseded_by.unwrap_or_default();
                let said = match part {
                    Some((_, values)) => values.join(", "),
                    None => s.text.clone(),
                };
                out.push_str(&format!(
                    "- #{} {}, superseded by #{by}: {said}\n",
                    s.source,
                    s.kind.as_str(),
                ));
            }
        }
        out
    }

    /// For a superseded statement its replacement changed in part: its
    /// text with the changed values cut out, and those values. `None`
    /// when it was replaced whole (no value of a changed form, or every
    /// value changed).
    fn in_part(&self, old: &Statement) -> Option<InPart> {
        let changed = self.changed_values(old)?;
        let values: Vec<String> = words::tokens(&old.text)
            .into_iter()
            .filter(|t| t.value)
            .map(|t| t.w)
            .collect();
        if changed.is_empty() || changed.len() == values.iter().collect::<BTreeSet<_>>().len() {
            return None;
        }
        let mut kept = String::with_capacity(old.text.len());
        let mut cut = Vec::new();
        for piece in old.text.split_inclusive(char::is_whitespace) {
            let bare = words::bare(piece);
            if !bare.is_empty() && changed.contains(&bare.to_lowercase()) {
                cut.push(bare.to_owned());
                kept.push_str(&piece.replacen(bare, "…", 1));
            } else {
                kept.push_str(piece);
            }
        }
        (!cut.is_empty()).then_some((kept, cut))
    }

    /// Marks superseded each current statement that still states a value
    /// a later value of its slot replaced ([`crate::evidence`]), said
    /// before the replacing message; returns how many.
    pub fn supersede_replaced(&mut self, evidence: &crate::evidence::Evidence) -> usize {
        let mut n = 0;
        for s in self.items.iter_mut().filter(|s| s.is_current()) {
            if let Some(r) = evidence.replaced_in(&s.text, Some((s.source, s.source))) {
                s.superseded_by = Some(r.by);
                n += 1;
            }
        }
        n
    }

    /// The values of a superseded statement `old` that its replacement
    /// changed: each value the replacement names that `old` did not
    /// changes the one value of its form ([`skeleton`]) that `old` had
    /// ("make the hotel 3 nights" changes the `2` of "2 nights, and keep
    /// it under €900", not the amount; a value it only repeats changes
    /// nothing). Where `old` had several of that form, it changes those
    /// said in its place: the same word right before, or the same word
    /// right after. "le montant est de 1 182,45 €" changes the amount of
    /// "Envoie 158,76 € au ES83 7888 7182 …", not the groups of its IBAN;
    /// "el 10 de noviembre" the `12` of "el 12 de enero, 3 pasajeros, por
    /// menos de 643,54 €". Read from neighbours alone, so in any language;
    /// only when no value of the replacement finds its place does a form
    /// change all of its values. `None` when it names none of them
    /// ("19:30" for "7pm", or no value at all): it replaced the statement
    /// whole.
    fn changed_values(&self, old: &Statement) -> Option<BTreeSet<String>> {
        let had = words::tokens(&old.text);
        let had_values: BTreeSet<&str> = had
            .iter()
            .filter(|t| t.value)
            .map(|t| t.w.as_str())
            .collect();
        // The words right before and right after a value (not values
        // themselves).
        let neighbours = |toks: &[words::Tok], i: usize| {
            let word = |t: Option<&words::Tok>| t.filter(|t| !t.value).map(|t| t.w.clone());
            let before = word(i.checked_sub(1).and_then(|j| toks.get(j)));
            (before, word(toks.get(i + 1)))
        };
        let share = |a: &(Option<String>, Option<String>), b: &(Option<String>, Option<String>)| {
            (a.0.is_some() && a.0 == b.0) || (a.1.is_some() && a.1 == b.1)
        };
        // What each new value changes where its place tells (the one
        // value of its form, or those beside the same words), and where
        // only its form does.
        let mut by_form: BTreeSet<String> = BTreeSet::new();
        let mut placed: BTreeSet<String> = BTreeSet::new();
        for newer in self
            .items
            .iter()
            .filter(|s| Some(s.source) == old.superseded_by)
        {
            let toks = words::tokens(&newer.text);
            for (i, t) in toks.iter().enumerate() {
                if !t.value || had_values.contains(t.w.as_str()) {
                    continue;
                }
                let form = skeleton(&t.w);
                let of_form: Vec<usize> = (0..had.len())
                    .filter(|&j| had[j].value && skeleton(&had[j].w) == form)
                    .collect();
                let distinct: BTreeSet<&str> = of_form.iter().map(|&j| had[j].w.as_str()).collect();
                if distinct.len() == 1 {
                    placed.extend(distinct.into_iter().map(str::to_owned));
                    continue;
                }
                let near = neighbours(&toks, i);
                let matched: Vec<&String> = of_form
                    .iter()
                    .filter(|&&j| share(&neighbours(&had, j), &near))
                    .map(|&j| &had[j].w)
                    .collect();
                placed.extend(matched.into_iter().cloned());
                by_form.extend(distinct.into_iter().map(str::to_owned));
            }
        }
        let changed = if placed.is_empty() { by_form } else { placed };
        (!changed.is_empty()).then_some(changed)
    }

    /// A matcher for lines that still state what a superseded statement
    /// said (see [`Outdated`]).
    pub fn outdated(&self) -> Outdated {
        let current: Vec<String> = self.current().map(|s| s.text.to_lowercase()).collect();
        let entries = self
            .superseded()
            .map(|old| {
                let by = old.superseded_by.unwrap_or_default();
                let old_subject = Subject::of(&old.text);
                let mut new_values = BTreeSet::new();
                let mut dropped = BTreeSet::new();
                for newer in self.items.iter().filter(|s| s.source == by) {
                    let s = Subject::of(&newer.text);
                    new_values.extend(s.values);
                    dropped.extend(s.dropped);
                }
                let mut old_values: BTreeSet<String> = old_subject.values.clone();
                old_values.extend(dropped.intersection(&old_subject.words).cloned());
                old_values.retain(|v| !new_values.contains(v));
                let key_words: BTreeSet<String> = old_subject
                    .key
                    .iter()
                    .chain(old_subject.words.iter())
                    .filter(|w| {
                        !old_values.contains(*w)
                            && !w.starts_with('(')
                            && !is_one_of(w.as_str(), GENERIC_WORDS)
                    })
                    .cloned()
                    .collect();
                let changed = self.changed_values(old);
                let bare = words::tokens(&old.text)
                    .into_iter()
                    .filter(|t| t.value && !t.quoted && t.w.chars().count() >= 4)
                    .map(|t| t.w)
                    .filter(|v| !current.iter().any(|c| c.contains(v.as_str())))
                    .filter(|v| changed.as_ref().is_none_or(|c| c.contains(v)))
                    .collect();
                OutdatedEntry {
                    by,
                    bare,
                    text: normalize(&old.text),
                    old_values,
                    key_words,
                    new_values,
                }
            })
            .collect();
        let current = current.iter().map(|c| normalize(c)).collect();
        Outdated { entries, current }
    }
}

/// The form of a value in any script: its characters' classes (digit,
/// letter, anything else) with each run folded, and a number's thousands
/// and decimal separators part of the number. So `3` and `1,100` are one
/// form, `10:30` another, `14A` and `18C` a third, `/v2/fx-snapshots` and
/// `/v2/fx/snapshots` a fourth, and `€900` and `€1,100.50` a fifth.
fn skeleton(value: &str) -> String {
    let mut out = String::new();
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        let class = if c.is_numeric() {
            '0'
        } else if c.is_alphabetic() {
            'a'
        } else if matches!(c, ',' | '.')
            && out.ends_with('0')
            && chars.peek().is_some_and(|n| n.is_numeric())
        {
            continue;
        } else {
            '.'
        };
        if !out.ends_with(class) {
            out.push(class);
        }
    }
    out
}

/// Words too common to tie a line to a statement's subject.
const GENERIC_WORDS: &[&str] = &[
    "use", "set", "make", "change", "keep", "go", "get", "have", "take", "put", "do", "be",
    "please", "want", "need", "like",
];

/// Current statements kept per one the list shows ([`Statement::dormant`]).
pub const STORED_PER_SHOWN: usize = 4;

/// The most statements one [`UserStatements::record`] call looks at.
pub const MAX_BATCH: usize = 256;

/// A statement's normalized text and parsed subject, computed once per
/// [`UserStatements::record`] call.
struct Parsed {
    norm: String,
    subject: Subject,
    /// Every value the statement names (a word with a digit, a technical
    /// name, a capitalized word inside the sentence), lower-cased.
    values: BTreeSet<String>,
    /// Stems of its content words that are not values (`mov` for "move"
    /// and "moving"), to tell whether two statements are about one thing.
    stems: BTreeSet<String>,
    /// The stems without the first one, the verb of a request ("book" in
    /// "could you book dinner"): what the statement is about.
    object_stems: BTreeSet<String>,
    /// The stems of its words of when ("afternoon", "Montag"): they tie
    /// two statements said near each other only ([`respecified`]).
    when: BTreeSet<String>,
}

impl Parsed {
    fn of(statement: &Statement) -> Parsed {
        let toks = words::tokens(&statement.text);
        let values = toks
            .iter()
            .filter(|t| t.value && !t.quoted)
            .map(|t| t.w.clone())
            .collect();
        let content: Vec<&words::Tok> = toks
            .iter()
            .filter(|t| !t.value && words::is_content(&t.w))
            .collect();
        let stems_of = |toks: &[&words::Tok]| -> BTreeSet<String> {
            toks.iter()
                .filter(|t| !is_one_of(t.w.as_str(), GENERIC_WORDS) && !words::is_month(&t.w))
                .map(|t| stem(&t.w).to_owned())
                .filter(|s| s.len() >= 3)
                .collect()
        };
        Parsed {
            norm: normalize(&statement.text),
            subject: Subject::of(&statement.text),
            values,
            stems: stems_of(&content),
            object_stems: stems_of(content.get(1..).unwrap_or_default()),
            when: content
                .iter()
                .filter(|t| crate::evidence::lang::CALENDAR.has(&t.w))
                .map(|t| stem(&t.w).to_owned())
                .collect(),
        }
    }

    /// Whether the two statements share a content word's stem.
    fn same_topic(&self, other: &Parsed) -> bool {
        !self.stems.is_disjoint(&other.stems)
    }
}

/// "Actually make it an aisle seat, 18C" after "… a window seat? 14A if
/// possible": a change that names no earlier value refers to the latest
/// earlier statement on the same topic with a value of the same pattern
/// (`9a` and `18c`: digits then a letter). Not when it names a value of
/// any earlier statement: then it says itself what it replaces ("book the
/// 09:15 one, the 07:40 is too early").
///
/// A word of when ("afternoon", "Montag", "soir") ties the two only among
/// the statements from `near` on (said within the scope): "make it half
/// past 12 in the afternoon" a hundred messages after another booking
/// "at a quarter to 4 in the afternoon" books something else.
fn respecified(mine: &Parsed, earlier: &[Parsed], near: usize) -> Option<usize> {
    if !changes(&mine.norm) {
        return None;
    }
    let patterned = |p: &Parsed| -> BTreeSet<String> {
        p.values
            .iter()
            .filter(|v| v.bytes().any(|b| b.is_ascii_digit()))
            .map(|v| {
                let mut shape: Vec<char> = v
                    .chars()
                    .map(|c| match c {
                        '0'..='9' => '9',
                        c if c.is_alphabetic() => 'a',
                        c => c,
                    })
                    .collect();
                // Runs collapse: `9a` and `13c` have one pattern.
                shape.dedup();
                shape.into_iter().collect::<String>()
            })
            .collect()
    };
    let mine_patterns = patterned(mine);
    if mine_patterns.is_empty() || earlier.iter().any(|p| !p.values.is_disjoint(&mine.values)) {
        return None;
    }
    (0..earlier.len()).rev().find(|&k| {
        let mut shared = mine.object_stems.intersection(&earlier[k].object_stems);
        let same_subject = if k >= near {
            shared.next().is_some()
        } else {
            shared.any(|w| !mine.when.contains(w))
        };
        same_subject && !patterned(&earlier[k]).is_disjoint(&mine_patterns)
    })
}

/// The word without an inflection: "moving", "move" and "moved" → `mov`;
/// "deliveries" → `deliver`.
fn stem(word: &str) -> &str {
    for suffix in ["ies", "ing", "ed", "es", "s", "e"] {
        if word.len() > suffix.len() + 2 {
            if let Some(s) = word.strip_suffix(suffix) {
                return s;
            }
        }
    }
    word
}

/// The words of the normalized text `norm`, split at spaces and clause
/// punctuation, a sentence's `.` or `:` trimmed off each.
fn norm_words(norm: &str) -> Vec<&str> {
    norm.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '!' | '?'))
        .map(|w| w.trim_end_matches(['.', ':']))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Calendar dates in the normalized text `norm`, as `"<day> <month>"`
/// ("28 june", "june 28th" → "28 june").
fn dates(norm: &str) -> BTreeSet<String> {
    let words = norm_words(norm);
    let day = |w: &str| -> Option<u32> {
        let digits = w.trim_end_matches(['s', 't', 'n', 'd', 'r', 'h']);
        (1..=2)
            .contains(&digits.len())
            .then(|| digits.parse::<u32>().ok())
            .flatten()
            .filter(|d| (1..=31).contains(d))
    };
    let mut out = BTreeSet::new();
    for (i, w) in words.iter().enumerate() {
        if !words::is_month(w) {
            continue;
        }
        let around = [i.checked_sub(1), Some(i + 1)];
        if let Some(d) = around
            .into_iter()
            .flatten()
            .find_map(|k| words.get(k).and_then(|x| day(x)))
        {
            out.insert(format!("{d} {}", &w[..3]));
        }
    }
    out
}

/// Words that say a statement replaces what was said before.
const REPLACING: &[&str] = &[
    "from now on",
    "instead",
    "no longer",
    "anymore",
    "any more",
    "going forward",
    "from today",
    "new address",
    "new email",
    "new e-mail",
    "new number",
    "change of plan",
];

/// Words that say a statement changes an earlier choice.
const CHANGING: &[&str] = &[
    "no wait",
    "actually",
    "rename",
    "postpone",
    "reschedule",
    "brought forward",
    "rather",
    "make it",
    "make the",
    "change it",
    "change the",
    "pushed to",
    "moved to",
    "changed to",
    "staying longer",
    "extend",
];

/// Whether the normalized statement `norm` says it changes an earlier
/// choice (or replaces something, see [`replaces`]).
fn changes(norm: &str) -> bool {
    replaces(norm) || CHANGING.iter().any(|w| norm.contains(w))
}

/// Clock times (`("time", "07:40")`) and counts with their unit
/// (`("night", "2 nights")`) in the normalized text `norm`.
fn shaped(norm: &str) -> Vec<(String, String)> {
    const NOT_UNITS: &[&str] = &[
        "of", "to", "and", "or", "in", "at", "on", "for", "the", "a", "an", "is", "are", "was",
        "with", "by", "from", "one", "more", "less", "pm", "am",
    ];
    let words = norm_words(norm);
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let time = w.split_once(':').is_some_and(|(h, m)| {
            (1..=2).contains(&h.len())
                && m.len() == 2
                && h.bytes().all(|b| b.is_ascii_digit())
                && m.bytes().all(|b| b.is_ascii_digit())
        });
        if time {
            out.push(("time".to_owned(), (*w).to_owned()));
            continue;
        }
        if !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()) {
            if let Some(unit) = words.get(i + 1).filter(|u| {
                u.len() >= 3 && u.bytes().all(|b| b.is_ascii_lowercase()) && !NOT_UNITS.contains(u)
            }) {
                let singular = unit.strip_suffix('s').unwrap_or(unit);
                out.push((singular.to_owned(), format!("{w} {unit}")));
            }
        }
    }
    out
}

/// `(subject, value)` of every "<two words> at|to|= <value with a digit>"
/// in the normalized text `norm`: `("the msrv", "1.72")`.
fn noun_values(norm: &str) -> Vec<(String, String)> {
    let words = norm_words(norm);
    let mut out = Vec::new();
    for i in 2..words.len().saturating_sub(1) {
        if !matches!(words[i], "at" | "to" | "=" | "is") {
            continue;
        }
        let value = words[i + 1];
        let subject = (words[i - 2], words[i - 1]);
        let wordy = |w: &str| {
            w.len() >= 2
                && w.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
        };
        if value.bytes().any(|b| b.is_ascii_digit()) && wordy(subject.0) && wordy(subject.1) {
            out.push((format!("{} {}", subject.0, subject.1), value.to_owned()));
        }
    }
    out
}

/// Whether the normalized statement `norm` says it replaces something.
fn replaces(norm: &str) -> bool {
    REPLACING.iter().any(|w| norm.contains(w))
}

/// Whether `new` (said later) supersedes `old`.
fn supersedes(new_parsed: &Parsed, old: &Statement, old_parsed: &Parsed) -> bool {
    if new_parsed.norm == old_parsed.norm {
        return false;
    }
    let (new_subject, old_subject) = (&new_parsed.subject, &old_parsed.subject);
    // The same key set to another value; but a statement of two values or
    // more that shares none with the old one, and says no change, is the
    // next record of a series ("New character: Tari Mardor, 36, a ferryman
    // from Sarigor." … "New character: Ysze Robremar, 52, …"): a change
    // keeps what it does not change.
    let another_record = new_subject.values.len() >= 2
        && old_subject.values.len() >= 2
        && new_subject.values.is_disjoint(&old_subject.values)
        && !crate::evidence::lang::CHANGE_CUES.contained_in(&new_parsed.norm);
    if new_subject.same_key(old_subject)
        && new_subject.values != old_subject.values
        && !another_record
    {
        return true;
    }
    // `NAME=value` set again to another value ("use INVOICE_BATCH_SIZE=300"
    // → "set INVOICE_BATCH_SIZE=1200").
    let assignments = |norm: &str| -> Vec<(String, String)> {
        norm.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '`'))
            .filter_map(|t| t.split_once('='))
            .filter(|(k, v)| k.len() >= 2 && !v.is_empty())
            .map(|(k, v)| (k.to_owned(), v.trim_end_matches(['.', ':']).to_owned()))
            .collect()
    };
    let new_assigned = assignments(&new_parsed.norm);
    if assignments(&old_parsed.norm)
        .iter()
        .any(|(k, v)| new_assigned.iter().any(|(nk, nv)| nk == k && nv != v))
    {
        return true;
    }
    // A new value of the same shape, said as a change ("no wait, book the
    // 09:15 one, the 07:40 is too early"; "make the hotel 3 nights" after
    // "2 nights"): a count of the same unit, or a clock time when the new
    // statement names the old one.
    if changes(&new_parsed.norm) {
        let (new_shaped, old_shaped) = (shaped(&new_parsed.norm), shaped(&old_parsed.norm));
        let replaced = old_shaped.iter().any(|(shape, old_value)| {
            new_shaped.iter().any(|(s, v)| {
                s == shape
                    && v != old_value
                    && !old_shaped.iter().any(|(_, o)| o == v)
                    && (shape != "time" || new_parsed.norm.contains(old_value.as_str()))
            })
        });
        if replaced {
            return true;
        }
    }
    if changes(&new_parsed.norm) {
        // The same value spelled anew: "rename the route to /v2/fx/snapshots"
        // after "/v2/fx-snapshots".
        let skeleton = |v: &str| -> String { v.chars().filter(|c| c.is_alphanumeric()).collect() };
        let respelled = new_parsed.values.iter().any(|nv| {
            let sk = skeleton(nv);
            sk.len() >= 4
                && !old_parsed.values.contains(nv)
                && old_parsed
                    .values
                    .iter()
                    .any(|ov| ov != nv && skeleton(ov) == sk)
        });
        // A date moved, on the same topic: "the move got pushed to 5 July"
        // after "we're moving house on 28 June" (not "book dinner for 5 July").
        let (new_dates, old_dates) = (dates(&new_parsed.norm), dates(&old_parsed.norm));
        let moved = !new_dates.is_empty()
            && !old_dates.is_empty()
            && new_dates.is_disjoint(&old_dates)
            && new_parsed.same_topic(old_parsed);
        if respelled || moved {
            return true;
        }
    }
    // "From now on" the same act with other values of the same form:
    // "from now on deliver everything to 39 Calton Road" after "deliveries
    // go to 14 Harbour Street" (not "from now on send invoices to …", and
    // not a ticket `INC-44650` by a region `eu-central-1`).
    let digits = |p: &Parsed| -> BTreeSet<String> {
        p.values
            .iter()
            .filter(|v| v.bytes().any(|b| b.is_ascii_digit()))
            .cloned()
            .collect()
    };
    if replaces(&new_parsed.norm) && new_parsed.same_topic(old_parsed) {
        let (new_digits, old_digits) = (digits(new_parsed), digits(old_parsed));
        let same_form = new_digits
            .iter()
            .any(|n| old_digits.iter().any(|o| skeleton(n) == skeleton(o)));
        if same_form && new_digits.is_disjoint(&old_digits) {
            return true;
        }
    }
    // The same two-word subject set to another value: "keep the MSRV at
    // 1.72" → "bump the MSRV to 1.74" (not "the timeout" → "retry timeout").
    let new_settings = noun_values(&new_parsed.norm);
    if noun_values(&old_parsed.norm)
        .iter()
        .any(|(n, v)| new_settings.iter().any(|(nn, nv)| nn == n && nv != v))
    {
        return true;
    }
    // A new e-mail address "from now on" / "instead" replaces the old one,
    // whatever each was for ("send confirmations to a@x" → "from now on
    // use b@y for everything").
    let email = |set: &BTreeSet<String>| set.iter().any(|v| v.contains('@'));
    if replaces(&new_parsed.norm)
        && email(&new_subject.values)
        && email(&old_subject.values)
        && new_subject.values.is_disjoint(&old_subject.values)
    {
        return true;
    }
    // What the old one chose is dropped by the new one. A prohibition
    // ("never store secrets in Postgres") chose nothing: it stands.
    let dropped = &new_subject.dropped;
    let chose_it = match old.kind {
        StatementKind::Decision => true,
        StatementKind::Request => !dropped.is_disjoint(&old_subject.values),
        StatementKind::Constraint => {
            !old_subject.prohibits && !dropped.is_disjoint(&old_subject.values)
        }
    };
    !dropped.is_empty()
        && dropped.is_subset(&old_subject.words)
        && dropped.is_disjoint(&new_subject.values)
        && chose_it
}

struct OutdatedEntry {
    by: MessageId,
    text: String,
    old_values: BTreeSet<String>,
    key_words: BTreeSet<String>,
    new_values: BTreeSet<String>,
    /// Values the superseded statement named that no current statement
    /// names, and that its replacement changed
    /// ([`UserStatements::changed_values`]):
    /// a line that is only one of them (an artifact list's
    /// `- /v2/fx-snapshots`) is outdated, while `- €900` stays current
    /// when only "2 nights" beside it became "3 nights".
    bare: BTreeSet<String>,
}

/// Finds lines that still state something the user superseded, so they
/// can be dropped or marked: a line is outdated when it contains the
/// superseded sentence, or when it mentions the superseded value on the
/// same subject without the value that replaced it ("the timeout is 37s"
/// after "make the timeout 45s"; not "the build took 37s", and not
/// "switched the ledger from Postgres to SQLite").
pub struct Outdated {
    entries: Vec<OutdatedEntry>,
    /// The current statements, normalized: a line quoting one of them is
    /// never outdated by a fragment rule.
    current: Vec<String>,
}

/// What [`Outdated::mark`] appends to an outdated line.
pub fn superseded_marker(by: MessageId) -> String {
    format!(" [superseded by the user at #{by}]")
}

impl Outdated {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The message that superseded what `line` states, if it is outdated.
    /// A line that already says "superseded" is not outdated.
    pub fn superseded_by(&self, line: &str) -> Option<MessageId> {
        if self.entries.is_empty() || line.to_lowercase().contains("superseded") {
            return None;
        }
        let normalized = normalize(line);
        let line_words: BTreeSet<String> = words::tokens(line).into_iter().map(|t| t.w).collect();
        let has = |word: &String| line_words.contains(word);
        let related = |key: &String| {
            line_words.iter().any(|w| {
                w == key
                    || (key.len() >= 4
                        && w.len() >= 4
                        && (w.starts_with(key.as_str()) || key.starts_with(w.as_str())))
            })
        };
        // A line that quotes part of a superseded statement ("User: 14A if
        // possible." from "Can you ask for a window seat? 14A if
        // possible."), and of no current one.
        let quoted = {
            let body = line.trim().trim_start_matches(['-', '*', '•']).trim_start();
            let body = body
                .split_once(':')
                .filter(|(speaker, _)| {
                    let speaker = speaker.trim().to_ascii_lowercase();
                    speaker.ends_with("user") && speaker.len() <= 12
                })
                .map_or(body, |(_, rest)| rest);
            Some(normalize(body))
                .filter(|b| b.chars().count() >= 8)
                .filter(|b| !self.current.iter().any(|c| c.contains(b.as_str())))
        };
        let only = {
            let toks = words::tokens(line.trim().trim_start_matches(['-', '*', '•']));
            (toks.len() == 1).then(|| toks[0].w.clone())
        };
        self.entries.iter().find_map(|e| {
            if e.text.chars().count() >= 8 && normalized.contains(&e.text) {
                return Some(e.by);
            }
            if only.as_ref().is_some_and(|v| e.bare.contains(v))
                || quoted.as_ref().is_some_and(|q| e.text.contains(q.as_str()))
            {
                return Some(e.by);
            }
            if e.old_values.is_empty()
                || !e.old_values.iter().all(has)
                || e.new_values.iter().any(has)
            {
                return None;
            }
            let distinctive =
                e.old_values.len() >= 2 && e.old_values.iter().any(|v| v.chars().count() >= 6);
            (distinctive || e.key_words.iter().any(related)).then_some(e.by)
        })
    }

    /// `line` with [`superseded_marker`] appended when it is outdated.
    pub fn mark(&self, line: &str) -> Option<String> {
        self.superseded_by(line)
            .map(|by| format!("{}{}", line.trim_end(), superseded_marker(by)))
    }

    /// Marks every outdated bullet of `summary`; returns how many.
    pub fn mark_summary(&self, summary: &mut Summary) -> usize {
        let mut marked = 0;
        if self.entries.is_empty() {
            return marked;
        }
        for section in Section::ALL {
            for bullet in summary.section_mut(section) {
                if let Some(m) = self.mark(bullet) {
                    *bullet = m;
                    marked += 1;
                }
            }
        }
        marked
    }
}

/// The current statements' normalized texts (see
/// [`UserStatements::current_texts`]).
#[derive(Debug, Clone, Default)]
pub struct CurrentTexts(std::collections::HashSet<String>);

impl CurrentTexts {
    /// [`UserStatements::is_current_text`] of the statements these were
    /// taken from.
    pub fn contains(&self, text: &str) -> bool {
        let key = normalize(text);
        !key.is_empty() && self.0.contains(&key)
    }
}

#[cfg(test)]
mod tests;
