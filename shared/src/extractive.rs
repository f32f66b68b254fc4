//! The extractive summarizer: no network, no model, deterministic.
//!
//! It is the zero-configuration default and the degraded-mode fallback when
//! the LLM stays unavailable, so it writes the sections an LLM summarizer
//! writes from the same input: a transcript chunk plus the summary so far.
//! Its state delta is empty: lists of tasks, decisions and artifacts found
//! by phrase rules were mostly wrong on conversations of other shapes ("Great,
//! continue please. (open)"), and the user's statements ([`crate::stated`])
//! and the evidence ([`crate::evidence`]) carry what they held. Like an anchored iterative
//! summary (pi, Factory) it starts from the previous summary and adds what
//! the new messages bring, so information accumulates across chunks and
//! compactions, while per-section caps and the token budget keep it from
//! growing:
//! - CONVERSATION FLOW: one bullet per user turn (`#id user: … → assistant: …`),
//!   with the user's words in full as far as the bullet allows and the
//!   assistant's first sentence that is not filler;
//! - KEY FACTS: the user's decisions, constraints and specific statements
//!   (names, numbers, references, preferences), marked `User: `; and
//!   assistant sentences that state decisions or corrections or carry an
//!   exact value (path, command, id, number with unit…);
//! - OPEN THREADS: unanswered user questions and stated next steps near the
//!   end of the span, and the request of a turn the cut splits.
//!
//! **Salience.** The user's decisions and constraints are found by the same
//! rules as the recorded statements ([`crate::stated`]), so a casual remark
//! ("never mind, found it") never becomes a constraint. When the caps or the
//! token budget bind, assistant filler (politeness, FAQ and policy text) and
//! anything superseded go first, the user's own statements and values last.
//! A bullet that still states what the user superseded is marked
//! "superseded", so an old and a new value never stand side by side as if
//! both held.
//!
//! **Budget.** The caps are set for the default output budget of 4,096
//! tokens and grow in proportion to a larger one; the flow keeps whole user
//! turns, so the summary uses its budget instead of a fixed share of it.
//!
//! **The `handoff9` format** fills CoWork's nine sections from the same
//! findings:
//! 1. Primary Request and Intent: the first user message ever compacted,
//!    the operator's note, and the constraints the user stated;
//! 2. User Messages: every user turn, `#id user: …`, in the user's words;
//! 3. Work Completed: the assistant's answer of each turn with its tools,
//!    and what it said it finished;
//! 4. Errors and Fixes: sentences about errors, failures and their fixes;
//! 5. Key Technical Details: the other facts (exact values, specifics);
//! 6. Decisions Made: the user's decisions, the assistant's decisions and
//!    corrections;
//! 7. Pending/Incomplete Work: unanswered questions and stated next steps;
//! 8. Current State: the latest turn (or the turn the cut splits);
//! 9. Recommended Next Step: the newest pending item, or finishing the
//!    split turn.
//!
//! Sections 8 and 9 are replaced by each chunk that has turns; the others
//! accumulate like the three sections do.

use serde::{Deserialize, Serialize};

use crate::prompt::CompactionInput;
use crate::state::{normalize, StateDelta};
use crate::stated::{self, Outdated, StatementKind};
use std::collections::{HashMap, HashSet};

use crate::summary::{Section, SummarizerOutput, Summary, SummaryFormat};
use crate::tokens::TokenEstimator;

/// Extractive summarizer settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExtractiveConfig {
    /// Key facts kept at an output budget of [`REFERENCE_BUDGET`] tokens or
    /// less; a larger budget keeps proportionally more (see [`scaled_cap`]).
    pub max_key_facts: usize,
    /// Conversation-flow bullets kept, scaled like `max_key_facts`.
    pub max_flow: usize,
    pub max_open_threads: usize,
    /// Longest bullet, in chars.
    pub bullet_chars: usize,
    /// Whether the summarizer copies the conversation's lines into the
    /// summary: key facts, the flow's turns (`handoff9`: the user's
    /// messages and the work completed) and the lines that name a next
    /// step. Without, it writes what is open (the user's questions left
    /// unanswered, the turn in progress; `handoff9`: the primary request,
    /// the current state, the next step), and keeps what it was given: the
    /// previous summary's bullets, under the caps, and the lines of a
    /// pre-compaction hook (`Context:`). Unset: only while the evidence is
    /// off ([`crate::config::EngineConfig::extractive_config`]); a branch's
    /// summary, which no evidence stands beside, always quotes. The
    /// evidence keeps the lines that hold values, each ranked against all
    /// the others under one budget; the summary's copies were a second pick
    /// of the same lines by other rules and took the evidence's room (SGD
    /// task dialogues, last of 10 compactions: 63 % of their values kept
    /// with them, 69 % without; the generated and Claude Code rows
    /// unchanged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quote_lines: Option<bool>,
}

impl Default for ExtractiveConfig {
    fn default() -> Self {
        ExtractiveConfig {
            max_key_facts: 40,
            max_flow: 60,
            max_open_threads: 12,
            bullet_chars: 240,
            quote_lines: None,
        }
    }
}

const DECISION_MARKERS: &[&str] = &[
    " decided ",
    " decide to ",
    " we'll use ",
    " we will use ",
    " let's go with ",
    " lets go with ",
    " chose ",
    " choose ",
    " going with ",
    " agreed ",
    " settled on ",
    " instead of ",
    " the fix was ",
    " root cause ",
];
const CORRECTION_MARKERS: &[&str] = &[
    " actually ",
    " correction ",
    " not what i ",
    " that's wrong ",
    " because ",
];
const TASK_MARKERS: &[&str] = &[
    " todo ",
    " todo: ",
    " need to ",
    " next step ",
    " please ",
    " still need ",
    " pending ",
];
const DONE_MARKERS: &[&str] = &[
    " done ",
    " fixed ",
    " implemented ",
    " completed ",
    " merged ",
    " finished ",
    " resolved ",
];
/// Sentences about errors and their fixes (section 4 of `handoff9`).
const ERROR_MARKERS: &[&str] = &[
    " error ",
    " errors ",
    " failed ",
    " fails ",
    " failing ",
    " failure ",
    " exception ",
    " panic ",
    " panicked ",
    " crash ",
    " crashed ",
    " crashes ",
    " bug ",
    " broken ",
    " traceback ",
    " root cause ",
    " the fix was ",
    " fixed by ",
];

/// Who wrote a transcript block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speaker {
    User,
    Assistant,
    Other,
    /// Lines the summary must consider (`pipeline::context_block`): each
    /// becomes a fact bullet.
    Context,
}

/// One message of the transcript, as far as the summarizer cares.
#[derive(Debug)]
struct Block<'a> {
    id: &'a str,
    speaker: Speaker,
    /// Text lines (tool and file lines excluded).
    text: String,
    /// Allowed tools called in this block.
    tools: Vec<&'a str>,
}

/// Splits a transcript into blocks at its header lines.
fn blocks(transcript: &str) -> Vec<Block<'_>> {
    let mut out: Vec<Block<'_>> = Vec::new();
    for line in transcript.split('\n') {
        if let Some((id, speaker)) = header(line) {
            out.push(Block {
                id,
                speaker,
                text: String::new(),
                tools: Vec::new(),
            });
            continue;
        }
        let Some(block) = out.last_mut() else {
            continue;
        };
        if let Some(rest) = line.strip_prefix("[tool call ") {
            if let Some((name, _)) = rest.split_once(']') {
                if !block.tools.contains(&name) {
                    block.tools.push(name);
                }
            }
        } else if line.starts_with("[tool ")
            || line.starts_with("[file ")
            || line.starts_with("…[truncated")
        {
            continue;
        } else {
            block.text.push_str(line);
            block.text.push('\n');
        }
    }
    out
}

/// Parses `[#<id> <ROLE>]`.
fn header(line: &str) -> Option<(&str, Speaker)> {
    let inner = line.strip_prefix("[#")?.strip_suffix(']')?;
    let (id, role) = inner.split_once(' ')?;
    let digits = id.strip_prefix('-').unwrap_or(id);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let speaker = match role {
        "USER" => Speaker::User,
        "ASSISTANT" => Speaker::Assistant,
        "SYSTEM" | "TOOL" => Speaker::Other,
        "CONTEXT" => Speaker::Context,
        _ => return None,
    };
    Some((id, speaker))
}

/// Sentences of `text`: split at line breaks and after `.`, `?`, `!`
/// followed by white space.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let end = match b {
            b'\n' => Some(i),
            b'.' | b'?' | b'!' if bytes.get(i + 1).is_some_and(|n| n.is_ascii_whitespace()) => {
                Some(i + 1)
            }
            _ => None,
        };
        if let Some(end) = end {
            if let Some(s) = text.get(start..end) {
                let s = s.trim();
                if s.chars().count() >= 3 {
                    out.push(s);
                }
            }
            start = end;
        }
    }
    if let Some(s) = text.get(start..) {
        let s = s.trim();
        if s.chars().count() >= 3 {
            out.push(s);
        }
    }
    out
}

/// Cuts `text` to `max` chars, marking the cut with `…`.
fn shorten(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn has_marker(lower_padded: &str, markers: &[&str]) -> bool {
    markers.iter().any(|m| lower_padded.contains(m))
}

/// Lower-cased sentence with spaces around it and punctuation turned into
/// spaces, so markers match as whole words.
fn padded(sentence: &str) -> String {
    let mut s = String::with_capacity(sentence.len() + 2);
    s.push(' ');
    for c in sentence.chars() {
        if matches!(c, ',' | '.' | ';' | ':' | '!' | '?' | '(' | ')' | '"') {
            s.push(' ');
        } else if c.is_ascii() {
            // Most characters: the same as `to_lowercase`, without the
            // Unicode case tables.
            s.push(c.to_ascii_lowercase());
        } else {
            s.extend(c.to_lowercase());
        }
    }
    s.push(' ');
    s
}

/// Pushes `bullet` unless an equal one (normalized) is already there.
/// For one-off use; [`Bullets`] does the same in bulk without re-normalizing.
fn push_unique(list: &mut Vec<String>, bullet: String) {
    let key = normalize(&bullet);
    if key.is_empty() || list.iter().any(|b| normalize(b) == key) {
        return;
    }
    list.push(bullet);
}

/// A summary being built, with the normalized keys of each section's
/// bullets, so deduplicating a 120,000-char chunk's hundreds of candidate
/// sentences stays linear. Each new bullet that still states something the
/// user superseded is marked so before it is compared.
///
/// Near repeats (the same sentence with another step number) are left to
/// [`crate::repeats`], once per compaction on the summary as capped:
/// comparing every candidate sentence with its section here cost the fold
/// five times its time.
struct Bullets<'o> {
    summary: Summary,
    keys: [HashSet<String>; Section::ALL.len()],
    outdated: &'o Outdated,
}

impl<'o> Bullets<'o> {
    fn new(summary: Summary, outdated: &'o Outdated) -> Bullets<'o> {
        let keys = Section::ALL.map(|s| summary.section(s).iter().map(|b| bullet_key(b)).collect());
        Bullets {
            summary,
            keys,
            outdated,
        }
    }

    fn push(&mut self, section: Section, bullet: String) {
        let bullet = self.outdated.mark(&bullet).unwrap_or(bullet);
        let key = bullet_key(&bullet);
        if !key.is_empty() && self.keys[section as usize].insert(key) {
            self.summary.section_mut(section).push(bullet);
        }
    }
}

fn keep_newest(list: &mut Vec<String>, max: usize) {
    let excess = list.len().saturating_sub(max);
    list.drain(..excess);
}

fn first_sentence(text: &str) -> Option<&str> {
    sentences(text).into_iter().next()
}

/// Output budget the configured caps are meant for; a larger budget scales
/// them up in proportion, so a context far under its trigger keeps more.
pub const REFERENCE_BUDGET: u64 = crate::prompt::SUMMARY_MAX_OUTPUT_TOKENS;

/// `cap` for an output budget of `budget` tokens: the configured cap up to
/// [`REFERENCE_BUDGET`], proportionally more above it.
pub fn scaled_cap(cap: usize, budget: u64) -> usize {
    if budget <= REFERENCE_BUDGET {
        return cap;
    }
    let scaled = (cap as u128 * u128::from(budget)) / u128::from(REFERENCE_BUDGET);
    usize::try_from(scaled).unwrap_or(usize::MAX)
}

/// Prefix of a key fact the user stated: it marks whose words they are for
/// the next model, and lets a later chunk rank the fact again.
const USER_FACT: &str = "User: ";

/// Phrases of assistant filler: politeness, FAQ and policy boilerplate.
const BOILERPLATE: &[&str] = &[
    "happy to help",
    "glad to help",
    "here to help",
    "let me know",
    "feel free",
    "anything else",
    "thank you for",
    "thanks for reaching",
    "thanks for contacting",
    "thanks for your",
    "thanks for the",
    "thanks for letting",
    "thank you so much",
    "i understand",
    "i apologize",
    "i apologise",
    "sorry for the inconvenience",
    "sorry to hear",
    "great question",
    "good question",
    "hope this helps",
    "hope that helps",
    "as an ai",
    "don't hesitate",
    "do not hesitate",
    "reach out",
    "our policy",
    "our return policy",
    "our refund policy",
    "please note that",
    "please be aware",
    "we recommend",
    "in most cases",
    "typically",
    "generally speaking",
    "you can find",
    "for more information",
    "visit our",
    "our faq",
    "frequently asked",
    "terms and conditions",
    "have a great day",
    "have a nice day",
    "you're welcome",
    "my pleasure",
    "sure thing",
    "no problem",
    "i'd be happy",
    "i would be happy",
    "i'll be happy",
    "is there anything",
    "certainly!",
    "of course!",
    "absolutely!",
];

/// Short acknowledgements that open an answer ("Sure!", "Got it.").
const ACKNOWLEDGEMENTS: &[&str] = &[
    "thanks",
    "thank",
    "great",
    "sure",
    "certainly",
    "absolutely",
    "of course",
    "got it",
    "understood",
    "perfect",
    "okay",
    "ok",
    "noted",
    "alright",
    "no problem",
    "happy to",
];

/// What the summarizer asks about a sentence, each answer computed once
/// per [`summarize`] call. One sentence is asked about as a candidate, then
/// again as a bullet when the facts are ranked and cut (once per cut step),
/// and the answers are the costliest part of the summarizer: the value
/// forms behind [`Judge::has_artifact`], the statement rules, dozens of substring
/// searches for filler. The answers depend on the text alone, so a cached
/// one is the one a fresh call would give.
#[derive(Default)]
struct Judge {
    artifact: HashMap<String, bool>,
    boilerplate: HashMap<String, bool>,
    stated: HashMap<String, Option<StatementKind>>,
    score: HashMap<String, u8>,
    /// The statement rules' answers handed over with the spans whose
    /// transcript is being folded: the newest span's and the one before
    /// (a chunk can hold the end of one span and the start of the next).
    known: [stated::Classified; 2],
}

/// What the summarizer knows of the sentences it folds, kept from one
/// chunk to the next of a compaction ([`summarize_with`]).
///
/// - **The user's sentences, classified once.** The summarizer asks the
///   statement rules about every sentence of the user, the same rules the
///   compaction has just applied to the same sentences to record the
///   user's statements ([`stated::extract_classified`]). Those answers are
///   handed over ([`Judgements::know`]) and taken instead of asking again.
/// - **The summary's own facts, scored once.** Each chunk ranks the facts
///   of the summary so far again when it cuts them to their cap; a fact's
///   score is kept while the fact stays in the summary.
///
/// Every answer depends on the text alone, so a kept one is the one a
/// fresh judgement gives: the output is the same as [`summarize`]'s. It
/// holds at most two spans' classified sentences and one summary's scores.
#[derive(Default)]
pub struct Judgements {
    judge: Judge,
}

impl Judgements {
    /// The statement rules' answers for the sentences of the next span to
    /// be folded; the answers of the span before it are kept too, those
    /// older dropped.
    pub fn know(&mut self, classified: stated::Classified) {
        let known = &mut self.judge.known;
        known[0] = std::mem::replace(&mut known[1], classified);
    }

    /// Forgets everything but the scores of `summary`'s bullets.
    fn start(&mut self, summary: &Summary) -> &mut Judge {
        let judge = &mut self.judge;
        judge.artifact.clear();
        judge.boilerplate.clear();
        judge.stated.clear();
        if !judge.score.is_empty() {
            let bullets: HashSet<&str> = summary
                .sections()
                .flat_map(|(_, bullets)| bullets.iter().map(String::as_str))
                .collect();
            judge
                .score
                .retain(|bullet, _| bullets.contains(bullet.as_str()));
        }
        judge
    }
}

impl Judge {
    /// Whether `sentence` holds an exact value
    /// ([`crate::evidence::holds_value`]), once per text.
    fn has_artifact(&mut self, sentence: &str) -> bool {
        if let Some(&known) = self.artifact.get(sentence) {
            return known;
        }
        let found = crate::evidence::holds_value(sentence);
        self.artifact.insert(sentence.to_owned(), found);
        found
    }

    /// [`stated::classify`], once per text.
    fn classify(&mut self, sentence: &str) -> Option<StatementKind> {
        if let Some(&known) = self.stated.get(sentence) {
            return known;
        }
        if let Some(known) = self.known.iter().rev().find_map(|k| k.get(sentence)) {
            return known;
        }
        let kind = stated::classify(sentence);
        self.stated.insert(sentence.to_owned(), kind);
        kind
    }

    /// Whether a sentence is assistant filler: a short acknowledgement
    /// without any value, or a phrase of politeness, FAQ or policy text.
    fn is_boilerplate(&mut self, sentence: &str) -> bool {
        if let Some(&known) = self.boilerplate.get(sentence) {
            return known;
        }
        let lower = sentence.to_lowercase();
        let short_ack = lower.split_whitespace().count() <= 5
            && ACKNOWLEDGEMENTS.iter().any(|a| lower.starts_with(a))
            && !self.has_artifact(sentence);
        let filler = short_ack || BOILERPLATE.iter().any(|b| lower.contains(b));
        self.boilerplate.insert(sentence.to_owned(), filler);
        filler
    }

    /// Whether a sentence carries something specific: an artifact, a
    /// number, a name (a capitalized word inside it). The cheap tests go
    /// first: a sentence with a digit needs no reading by form.
    fn is_specific(&mut self, sentence: &str) -> bool {
        sentence.bytes().any(|b| b.is_ascii_digit())
            || sentence
                .split_whitespace()
                .skip(1)
                .any(|w| w.starts_with(char::is_uppercase) && !w.starts_with("I'") && w != "I")
            || self.has_artifact(sentence)
    }

    /// How much a key fact is worth keeping, from its text alone (so a fact
    /// of the previous summary ranks the same in every later chunk): what
    /// the user stated or chose first, exact values next, assistant filler
    /// and anything superseded last.
    fn fact_score(&mut self, bullet: &str) -> u8 {
        if let Some(&known) = self.score.get(bullet) {
            return known;
        }
        let score = self.score_of(bullet);
        self.score.insert(bullet.to_owned(), score);
        score
    }

    fn score_of(&mut self, bullet: &str) -> u8 {
        // What the operator or the application's hook asked to keep.
        if bullet.starts_with("Context: ") {
            return 9;
        }
        if bullet.contains("superseded") {
            return 0;
        }
        let (user, body) = match bullet.strip_prefix(USER_FACT) {
            Some(body) => (true, body),
            None => (false, bullet),
        };
        if !user && self.is_boilerplate(body) {
            return 0;
        }
        let mut score = 1;
        if self.is_specific(body) {
            score += 2;
        }
        let stated = if user {
            self.classify(body).is_some()
        } else {
            stated::states_rule(body)
        };
        if stated {
            score += 3;
        }
        if user {
            score += 2;
        }
        score
    }
}

/// Dedup key of a bullet: a fact the user stated is the same fact whether
/// or not it carries the [`USER_FACT`] prefix.
fn bullet_key(bullet: &str) -> String {
    let key = normalize(bullet);
    match key.strip_prefix("user: ") {
        Some(rest) => rest.to_owned(),
        None => key,
    }
}

/// The first sentence of the assistant's answer in `blocks` that is not
/// filler.
fn first_answer<'a>(blocks: &'a [Block<'_>], judge: &mut Judge) -> Option<&'a str> {
    first_answer_of(blocks, judge).map(|(_, sentence)| sentence)
}

/// [`first_answer`] with the id of the message it is in.
fn first_answer_of<'a>(blocks: &'a [Block<'_>], judge: &mut Judge) -> Option<(&'a str, &'a str)> {
    blocks
        .iter()
        .filter(|b| b.speaker == Speaker::Assistant)
        .flat_map(|b| sentences(&b.text).into_iter().map(move |s| (b.id, s)))
        .find(|(_, s)| !judge.is_boilerplate(s))
}

/// The user's text of a block as one line (its sentences joined).
fn joined(text: &str) -> String {
    sentences(text).join(" ")
}

/// Summarizes one transcript chunk on top of the previous summary.
///
/// Bullets that still state something the user superseded (per
/// `input.state.stated`) are marked "superseded", in the previous summary
/// as in the new bullets. The number of bullets kept grows with
/// `max_output_tokens` (see [`scaled_cap`]); when the budget binds, what
/// goes first is assistant filler and superseded facts, then the assistant
/// half of old flow bullets, then old flow bullets, and the user's own
/// statements and values last.
pub fn summarize(
    input: &CompactionInput<'_>,
    config: &ExtractiveConfig,
    max_output_tokens: u64,
    estimator: &dyn TokenEstimator,
) -> SummarizerOutput {
    summarize_with(
        input,
        config,
        max_output_tokens,
        estimator,
        &mut Judgements::default(),
    )
}

/// [`summarize`], keeping what it judged of the summary's bullets in
/// `judgements` for the next chunk of the same compaction: the same output,
/// less work on a compaction of many chunks.
pub fn summarize_with(
    input: &CompactionInput<'_>,
    config: &ExtractiveConfig,
    max_output_tokens: u64,
    estimator: &dyn TokenEstimator,
    judgements: &mut Judgements,
) -> SummarizerOutput {
    let format = input.format;
    let handoff = format == SummaryFormat::Handoff9;
    let outdated = input.state.stated.outdated();
    let converted = input.previous_summary.is_some_and(|s| s.format != format);
    let mut previous = input
        .previous_summary
        .cloned()
        .map_or_else(|| Summary::empty(format), |s| s.into_format(format));
    outdated.mark_summary(&mut previous);
    // The first user message ever compacted is the primary request; a
    // summary converted from the other format has lost track of it.
    let mut has_request =
        !previous.primary_request.is_empty() || (converted && !previous.is_empty());
    let mut bullets = Bullets::new(previous, &outdated);
    let delta = StateDelta::default();
    let blocks = blocks(input.new_messages);
    let judge = judgements.start(&bullets.summary);
    let width = config.bullet_chars.max(16);
    // Where the facts with no more specific home, and what is still open, go.
    let (facts_section, open_section) = if handoff {
        (Section::TechnicalDetails, Section::PendingWork)
    } else {
        (Section::KeyFacts, Section::OpenThreads)
    };

    // An operator's instructions are for a model: they are not facts of
    // the conversation, and an offline summarizer cannot follow them, so
    // they are not copied into the summary (they once opened every
    // branch summary and the demo's KEY FACTS).
    for block in blocks.iter().filter(|b| b.speaker == Speaker::Context) {
        for line in block.text.lines().filter_map(|l| l.strip_prefix("- ")) {
            bullets.push(
                facts_section,
                shorten(&format!("Context: {}", line.trim()), width),
            );
        }
    }
    // The latest turn's flow bullet (`handoff9`'s current state).
    let mut last_turn: Option<String> = None;
    // Whether the conversation's lines are copied (see
    // [`ExtractiveConfig::quote_lines`]): when not, no line is judged as
    // a fact, and only `handoff9` walks the turns (for its current state).
    let quoting = config.quote_lines.unwrap_or(true);

    // CONVERSATION FLOW: one bullet per user turn, the user's words first.
    let mut i = if quoting || handoff { 0 } else { blocks.len() };
    while i < blocks.len() {
        let block = &blocks[i];
        let start = i;
        i += 1;
        while i < blocks.len() && blocks[i].speaker != Speaker::User {
            i += 1;
        }
        let turn = &blocks[start..i];
        let answer = first_answer(&turn[1..], judge);
        let lead = match block.speaker {
            Speaker::User => {
                // The user's words get the whole bullet when the answer
                // was only filler.
                let room = if answer.is_some() {
                    width * 2 / 3
                } else {
                    width
                };
                let said = joined(&block.text);
                (!said.is_empty()).then(|| format!("#{} user: {}", block.id, shorten(&said, room)))
            }
            _ => turn.iter().find_map(|b| {
                first_answer(std::slice::from_ref(b), judge)
                    .map(|s| format!("#{} assistant: {}", b.id, shorten(s, width / 2)))
            }),
        };
        let Some(mut bullet) = lead else { continue };
        if block.speaker == Speaker::User {
            if let Some(answer) = answer {
                bullet.push_str(" → assistant: ");
                bullet.push_str(&shorten(answer, width / 4));
            }
        }
        let mut tools: Vec<&str> = Vec::new();
        for b in turn {
            for t in &b.tools {
                if !tools.contains(t) {
                    tools.push(t);
                }
            }
        }
        let tools = if tools.is_empty() {
            String::new()
        } else {
            format!(" (tools: {})", tools.join(", "))
        };
        bullet.push_str(&tools);
        let bullet = shorten(&bullet, width);
        if !handoff {
            bullets.push(Section::ConversationFlow, bullet);
            continue;
        }
        // `handoff9`: the user's words and the assistant's work apart.
        if block.speaker == Speaker::User {
            let said = shorten(
                &format!("#{} user: {}", block.id, joined(&block.text)),
                width,
            );
            if !has_request {
                bullets.push(Section::PrimaryRequest, said.clone());
                has_request = true;
            }
            if quoting {
                bullets.push(Section::UserMessages, said);
            }
        }
        let answered = if block.speaker == Speaker::User {
            &turn[1..]
        } else {
            turn
        };
        match first_answer_of(answered, judge).filter(|_| quoting) {
            Some((id, answer)) => bullets.push(
                Section::WorkCompleted,
                shorten(&format!("#{id} assistant: {answer}{tools}"), width),
            ),
            None if quoting && !tools.is_empty() => bullets.push(
                Section::WorkCompleted,
                shorten(&format!("#{}{tools}", block.id), width),
            ),
            None => {}
        }
        last_turn = Some(bullet);
    }
    // `handoff9`'s next step: the newest item still open.
    let mut newest_open: Option<String> = None;

    // KEY FACTS and the delta, sentence by sentence.
    let last_user = blocks.iter().rposition(|b| b.speaker == Speaker::User);
    for (index, block) in blocks.iter().enumerate() {
        if matches!(block.speaker, Speaker::Other | Speaker::Context) {
            continue;
        }
        let user = block.speaker == Speaker::User;
        let answered_later = blocks[index + 1..]
            .iter()
            .any(|b| b.speaker == Speaker::Assistant && !b.text.trim().is_empty());
        for sentence in sentences(&block.text) {
            let lower = padded(sentence);
            let question = sentence.ends_with('?');
            let short = shorten(sentence, width);
            // The user's decisions and constraints by the same rules as the
            // recorded statements: "never mind, found it" is neither.
            let stated_kind = if user && quoting {
                judge.classify(sentence)
            } else {
                None
            };
            let decision = quoting
                && if user {
                    stated_kind == Some(StatementKind::Decision)
                } else {
                    has_marker(&lower, DECISION_MARKERS)
                };
            let correction = quoting && has_marker(&lower, CORRECTION_MARKERS);
            // A user's question that names something specific ("can you
            // refund 4.50 EUR to my Visa card?") is a fact about them too.
            // A sentence that only thanks or closes the talk is none.
            let fact = quoting
                && if user {
                    (stated_kind.is_some() || judge.is_specific(sentence))
                        && !crate::evidence::only_closes(sentence)
                } else {
                    (decision || correction || judge.has_artifact(sentence))
                        && !judge.is_boilerplate(sentence)
                };
            // `handoff9` files errors and their fixes apart, even when
            // they carry no exact value.
            let error = quoting
                && handoff
                && has_marker(&lower, ERROR_MARKERS)
                && !judge.is_boilerplate(sentence);
            if fact || error {
                let bullet = if user {
                    shorten(&format!("{USER_FACT}{sentence}"), width)
                } else {
                    short.clone()
                };
                let section = if !handoff {
                    facts_section
                } else if error {
                    Section::ErrorsAndFixes
                } else if decision || correction {
                    Section::DecisionsMade
                } else if stated_kind == Some(StatementKind::Constraint) {
                    Section::PrimaryRequest
                } else {
                    facts_section
                };
                bullets.push(section, bullet);
            }
            if block.speaker == Speaker::Assistant
                && quoting
                && has_marker(&lower, DONE_MARKERS)
                && handoff
                && !judge.is_boilerplate(sentence)
            {
                bullets.push(
                    Section::WorkCompleted,
                    shorten(&format!("#{} assistant: {sentence}", block.id), width),
                );
            }
            if user && question && !answered_later {
                bullets.push(open_section, short.clone());
                newest_open = Some(short.clone());
            }
            // Next steps near the end of the span (a quoted line too: the
            // evidence and the user's statements hold it otherwise).
            let near_end = last_user.is_none_or(|lu| index >= lu);
            if quoting && near_end && has_marker(&lower, TASK_MARKERS) && !question {
                bullets.push(open_section, short.clone());
                newest_open = Some(short);
            }
        }
    }

    let mut summary = bullets.summary;
    if handoff {
        let split = if input.split_turn {
            last_user.and_then(|lu| first_sentence(&blocks[lu].text).map(|r| (blocks[lu].id, r)))
        } else {
            None
        };
        let ends = Ending {
            last_turn,
            newest_open,
            split,
        };
        finish_handoff(
            &mut summary,
            ends,
            config,
            max_output_tokens,
            estimator,
            judge,
        );
        return SummarizerOutput { summary, delta };
    }
    if input.split_turn {
        summary
            .open_threads
            .retain(|b| !b.starts_with("Turn in progress: "));
        if let Some(request) = last_user.and_then(|lu| first_sentence(&blocks[lu].text)) {
            summary
                .open_threads
                .push(shorten(&format!("Turn in progress: {request}"), width));
        }
    }

    keep_newest(
        &mut summary.conversation_flow,
        scaled_cap(config.max_flow, max_output_tokens),
    );
    keep_salient_facts(
        &mut summary.key_facts,
        scaled_cap(config.max_key_facts, max_output_tokens),
        judge,
    );
    keep_newest(&mut summary.open_threads, config.max_open_threads);
    fit_by_salience(&mut summary, max_output_tokens, estimator, judge);
    summary.fit_to(max_output_tokens, estimator);
    SummarizerOutput { summary, delta }
}

/// How the chunk ended, for `handoff9`'s sections 8 and 9.
struct Ending<'a> {
    /// The flow bullet of the chunk's last turn, if it had turns.
    last_turn: Option<String>,
    /// The newest question or next step left open.
    newest_open: Option<String>,
    /// The request (id, first sentence) of the turn the cut splits.
    split: Option<(&'a str, &'a str)>,
}

/// Sections 8 and 9 of a `handoff9` summary, then its caps and budget.
fn finish_handoff(
    summary: &mut Summary,
    ending: Ending<'_>,
    config: &ExtractiveConfig,
    max_output_tokens: u64,
    estimator: &dyn TokenEstimator,
    judge: &mut Judge,
) {
    let width = config.bullet_chars.max(16);
    // Replaced by a chunk with turns: they say where the work stands now.
    if let Some((id, request)) = ending.split {
        summary.current_state = vec![shorten(
            &format!("Turn in progress: #{id} user: {request}"),
            width,
        )];
        summary.next_step = vec![shorten(
            &format!("Answer the request of the turn in progress (#{id}): {request}"),
            width,
        )];
    } else if let Some(turn) = ending.last_turn {
        summary.current_state = vec![turn];
        summary.next_step = ending
            .newest_open
            .map(|open| vec![shorten(&format!("Follow up on: {open}"), width)])
            .unwrap_or_default();
    }

    let flow = scaled_cap(config.max_flow, max_output_tokens);
    let facts = scaled_cap(config.max_key_facts, max_output_tokens);
    // The original request stays first; later notes and requirements are
    // kept newest first.
    if summary.primary_request.len() > config.max_open_threads.max(1) {
        let keep = config.max_open_threads.max(1) - 1;
        let first = summary.primary_request.remove(0);
        keep_newest(&mut summary.primary_request, keep);
        summary.primary_request.insert(0, first);
    }
    keep_newest(&mut summary.user_messages, flow);
    keep_newest(&mut summary.work_completed, flow);
    keep_newest(&mut summary.errors_and_fixes, facts);
    keep_salient_facts(&mut summary.technical_details, facts, judge);
    keep_salient_facts(&mut summary.decisions_made, facts, judge);
    keep_newest(&mut summary.pending_work, config.max_open_threads);
    // Over budget: filler and superseded facts go first, then the oldest
    // bullets in the format's cut order.
    if summary.tokens(estimator) > max_output_tokens {
        for section in [Section::TechnicalDetails, Section::DecisionsMade] {
            summary
                .section_mut(section)
                .retain(|f| judge.fact_score(f) > 0);
        }
    }
    summary.fit_to(max_output_tokens, estimator);
}

/// Keeps the `max` most salient facts (the newest among equals), in order.
fn keep_salient_facts(facts: &mut Vec<String>, max: usize, judge: &mut Judge) {
    if facts.len() <= max {
        return;
    }
    let mut ranked: Vec<(u8, usize)> = facts
        .iter()
        .enumerate()
        .map(|(i, f)| (judge.fact_score(f), i))
        .collect();
    ranked.sort_unstable_by(|a, b| b.cmp(a));
    let mut keep = vec![false; facts.len()];
    for &(_, i) in ranked.iter().take(max) {
        keep[i] = true;
    }
    let mut i = 0;
    facts.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}

/// One step of cutting the summary to its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cut {
    /// Drop a fact of at most this score.
    Facts(u8),
    /// Drop the assistant half of a flow bullet.
    FlowAnswers,
    /// Drop a flow bullet.
    Flow,
}

/// Shrinks `summary` towards `budget` in salience order: filler and
/// superseded facts, then the assistant halves of flow bullets, then flow
/// bullets, then facts by rising score; each step oldest first. Tokens are
/// tracked per bullet and recounted exactly whenever the estimate says the
/// budget is met, so a large summary is cut in linear time.
fn fit_by_salience(
    summary: &mut Summary,
    budget: u64,
    estimator: &dyn TokenEstimator,
    judge: &mut Judge,
) {
    let mut total = summary.tokens(estimator);
    if total <= budget {
        return;
    }
    let line = |b: &str| estimator.count(b) + 1;
    let steps = [
        Cut::Facts(0),
        Cut::Facts(1),
        Cut::FlowAnswers,
        Cut::Flow,
        Cut::Facts(3),
        Cut::Facts(5),
        Cut::Facts(7),
        // Every fact of the conversation before what the operator or the
        // application's hook asked to keep (`Context:`, 9).
        Cut::Facts(8),
    ];
    for step in steps {
        let mut i = 0;
        loop {
            if total <= budget {
                total = summary.tokens(estimator);
                if total <= budget {
                    return;
                }
            }
            match step {
                Cut::Facts(max_score) => {
                    let facts = &mut summary.key_facts;
                    let Some(at) =
                        (i..facts.len()).find(|&k| judge.fact_score(&facts[k]) <= max_score)
                    else {
                        break;
                    };
                    total = total.saturating_sub(line(&facts[at]));
                    facts.remove(at);
                    i = at;
                }
                Cut::FlowAnswers => {
                    let flow = &mut summary.conversation_flow;
                    let Some(at) = (i..flow.len()).find(|&k| flow[k].contains(" → assistant: "))
                    else {
                        break;
                    };
                    let before = line(&flow[at]);
                    if let Some(cut) = flow[at].find(" → assistant: ") {
                        flow[at].truncate(cut);
                    }
                    total = total.saturating_sub(before - line(&flow[at]).min(before));
                    i = at + 1;
                }
                Cut::Flow => {
                    if summary.conversation_flow.is_empty() {
                        break;
                    }
                    total = total.saturating_sub(line(&summary.conversation_flow[0]));
                    summary.conversation_flow.remove(0);
                }
            }
        }
    }
}

/// Extractive rollup: duplicate bullets removed, then cut to `target_tokens`.
pub fn rollup(summary: &Summary, target_tokens: u64, estimator: &dyn TokenEstimator) -> Summary {
    let mut out = Summary::empty(summary.format);
    for &section in summary.format.sections() {
        for bullet in summary.section(section) {
            push_unique(out.section_mut(section), bullet.clone());
        }
    }
    out.fit_to(target_tokens, estimator);
    out
}

/// Extractive memory-block fold: the previous summary's lines and one
/// bullet per folded entry, deduplicated, newest kept within `max_chars`.
pub fn fold_memory_block(previous: Option<&str>, entries: &[String], max_chars: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    let previous_lines = previous
        .unwrap_or("")
        .lines()
        .map(|l| l.trim().trim_start_matches("- ").trim());
    let entry_lines = entries.iter().map(|e| e.trim());
    for line in previous_lines.chain(entry_lines) {
        if !line.is_empty() {
            let key = normalize(line);
            lines.retain(|l| normalize(l) != key);
            lines.push(line.to_owned());
        }
    }
    let mut total: usize = lines.iter().map(|l| l.chars().count() + 3).sum();
    while total > max_chars && !lines.is_empty() {
        total -= lines.remove(0).chars().count() + 3;
    }
    lines.iter().map(|l| format!("- {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::WorkstreamState;
    use crate::tokens::CharEstimator;

    fn run(
        transcript: &str,
        previous: Option<&Summary>,
        state: &WorkstreamState,
    ) -> SummarizerOutput {
        let input = CompactionInput {
            previous_summary: previous,
            state,
            new_messages: transcript,
            instructions: None,
            split_turn: false,
            format: SummaryFormat::Sections,
        };
        summarize(
            &input,
            &ExtractiveConfig::default(),
            4_096,
            &CharEstimator::default(),
        )
    }

    const T: &str =
        "[#1 USER]\nWe must not touch the billing schema. Can you fix the bug in src/pay.rs?\n\
[#2 ASSISTANT]\nLooking at it now.\n[tool call linearSearch] {\"q\":\"pay\"}\n\
[#3 TOOL]\n[tool result linearSearch] found ENG-42\n\
[#4 ASSISTANT]\nWe decided to round half-even. The fix was in src/pay.rs:88.\n\
[#5 USER]\nGreat. What about refunds?\n";

    #[test]
    fn one_flow_bullet_per_user_turn_with_ids_answers_and_tools() {
        let out = run(T, None, &WorkstreamState::default());
        assert_eq!(out.summary.conversation_flow.len(), 2);
        assert_eq!(
            out.summary.conversation_flow[0],
            "#1 user: We must not touch the billing schema. Can you fix the bug in src/pay.rs? → assistant: Looking at it now. (tools: linearSearch)",
            "the user's whole turn, not only its first sentence"
        );
        assert!(out.summary.conversation_flow[1].starts_with("#5 user: Great."));
    }

    #[test]
    fn facts_decisions_constraints_and_questions_land_where_they_belong() {
        let out = run(T, None, &WorkstreamState::default());
        let facts = out.summary.key_facts.join("\n");
        assert!(facts.contains("We must not touch the billing schema."));
        assert!(facts.contains("We decided to round half-even."));
        assert!(facts.contains("The fix was in src/pay.rs:88."));
        assert_eq!(
            out.summary.open_threads,
            ["What about refunds?"],
            "the answered question is not open"
        );
        // No state lists by rule: the user's statements and the evidence
        // carry decisions, constraints and values.
        assert!(out.delta.is_empty(), "{:?}", out.delta);
    }

    #[test]
    fn the_previous_summary_is_carried_and_not_duplicated() {
        let previous = Summary {
            key_facts: vec![
                "Old fact about v1.".into(),
                "We decided to round half-even".into(),
            ],
            conversation_flow: vec!["#0 user: hello".into()],
            open_threads: vec!["Deploy?".into()],
            ..Default::default()
        };
        let out = run(T, Some(&previous), &WorkstreamState::default());
        assert_eq!(out.summary.key_facts[0], "Old fact about v1.");
        assert_eq!(
            out.summary
                .key_facts
                .iter()
                .filter(|f| f.contains("half-even"))
                .count(),
            1
        );
        assert_eq!(out.summary.conversation_flow[0], "#0 user: hello");
        assert!(out.summary.open_threads.contains(&"Deploy?".to_string()));
    }

    #[test]
    fn split_turn_and_operator_notes() {
        let state = WorkstreamState::default();
        let input = CompactionInput {
            previous_summary: None,
            state: &state,
            new_messages: "[#1 USER]\nPlease refactor the parser.\n[#2 ASSISTANT]\nStarting.\n",
            instructions: Some("keep the parser details"),
            split_turn: true,
            format: SummaryFormat::Sections,
        };
        let out = summarize(
            &input,
            &ExtractiveConfig::default(),
            4_096,
            &CharEstimator::default(),
        );
        // Instructions are for a model, not facts of the conversation.
        assert!(
            out.summary
                .sections()
                .all(|(_, bullets)| bullets.iter().all(|b| !b.contains("parser details"))),
            "{:?}",
            out.summary
        );
        assert_eq!(
            out.summary.open_threads.last().map(String::as_str),
            Some("Turn in progress: Please refactor the parser.")
        );
    }

    #[test]
    fn caps_and_budget_hold_on_a_large_chunk() {
        let t = large_chunk();
        assert!(t.len() > 60_000);
        let state = WorkstreamState::default();
        let e = CharEstimator::default();
        for budget in [500, 1_000, 4_096] {
            let input = CompactionInput {
                previous_summary: None,
                state: &state,
                new_messages: &t,
                instructions: None,
                split_turn: false,
                format: SummaryFormat::Sections,
            };
            let out = summarize(&input, &ExtractiveConfig::default(), budget, &e);
            assert!(out.summary.tokens(&e) <= budget, "budget {budget}");
            assert!(out.summary.conversation_flow.len() <= 60);
            assert!(out.summary.key_facts.len() <= 40);
            assert!(out.summary.open_threads.len() <= 12);
        }
    }

    /// 500 turns, each with a constraint, a question and an exact value.
    fn large_chunk() -> String {
        let mut t = String::new();
        for i in 0..500 {
            t.push_str(&format!(
                "[#{} USER]\nTurn {i}: we must keep file src/mod_{i}.rs as is. Why does test_{i} fail?\n[#{} ASSISTANT]\nBecause of E0502 in src/mod_{i}.rs, the fix was a clone.\n",
                2 * i,
                2 * i + 1
            ));
        }
        t
    }

    /// A support chat: the customer's specifics among assistant filler.
    fn support_chat(turns: usize) -> String {
        let mut t = String::new();
        for i in 0..turns {
            let user = match i {
                0 => "Hi, I'm Anna Kowalski, customer number KD-5512-0937.".to_owned(),
                1 => "I'm vegetarian, so no meat in the hamper please.".to_owned(),
                2 => "never mind, found it".to_owned(),
                _ => "Thanks, that works!".to_owned(),
            };
            t.push_str(&format!(
                "[#{} USER]\n{user}\n[#{} ASSISTANT]\nThank you for reaching out! I'd be happy to help. \
Our return policy allows returns within 30 days of delivery. Typically refunds take 5 business days. \
Let me know if there is anything else.\n",
                2 * i + 1,
                2 * i + 2
            ));
        }
        t
    }

    #[test]
    fn a_casual_remark_never_becomes_a_key_fact() {
        let out = run(&support_chat(4), None, &WorkstreamState::default());
        let facts = out.summary.key_facts.join("\n");
        assert!(
            facts.contains("I'm vegetarian, so no meat in the hamper please."),
            "{facts}"
        );
        assert!(!out
            .summary
            .key_facts
            .iter()
            .any(|f| f.contains("never mind")));
    }

    #[test]
    fn user_specifics_outrank_filler_when_cutting() {
        let e = CharEstimator::default();
        let state = WorkstreamState::default();
        let t = support_chat(120);
        let input = CompactionInput {
            previous_summary: None,
            state: &state,
            new_messages: &t,
            instructions: None,
            split_turn: false,
            format: SummaryFormat::Sections,
        };
        let out = summarize(&input, &ExtractiveConfig::default(), 500, &e);
        assert!(out.summary.tokens(&e) <= 500);
        assert_eq!(
            out.summary.key_facts,
            [
                "User: Hi, I'm Anna Kowalski, customer number KD-5512-0937.",
                "User: I'm vegetarian, so no meat in the hamper please.",
            ],
            "filler facts (return policy, refund times) go first"
        );
        assert!(
            out.summary
                .conversation_flow
                .iter()
                .all(|b| !b.contains("Thank you for reaching out")),
            "the flow skips filler answers"
        );
    }

    #[test]
    fn without_quoting_lines_it_writes_what_is_open_and_keeps_what_it_was_given() {
        let config = ExtractiveConfig {
            quote_lines: Some(false),
            ..ExtractiveConfig::default()
        };
        let previous = Summary {
            key_facts: vec!["the ledger lives in Postgres 16".into()],
            conversation_flow: vec!["#1 user: start the migration".into()],
            ..Default::default()
        };
        let t = format!(
            "{}[#3 USER]\nWe must not touch the billing schema. Deploy build 4711 to eu-west-1.\n\
[#4 ASSISTANT]\nDeployed build 4711 to eu-west-1.\n\
[#5 USER]\nWe still need to rotate the keys. Which region is next?\n",
            crate::pipeline::context_block(&["Ticket BILL-88 is the parent.".into()])
        );
        let state = WorkstreamState::default();
        for format in [SummaryFormat::Sections, SummaryFormat::Handoff9] {
            let input = CompactionInput {
                previous_summary: Some(&previous),
                state: &state,
                new_messages: &t,
                instructions: None,
                split_turn: false,
                format,
            };
            let out = summarize(&input, &config, 4_096, &CharEstimator::default());
            let text = out.summary.render();
            // No line of the conversation copied ...
            assert!(!text.contains("4711"), "{format:?}: {text}");
            assert!(!text.contains("billing schema"), "{format:?}: {text}");
            // (A next step the words name is a quoted line too; the
            // current state of `handoff9` is the last turn, as it stands.)
            let open = [&out.summary.open_threads, &out.summary.pending_work];
            assert!(
                open.iter()
                    .all(|s| s.iter().all(|b| !b.contains("rotate the keys"))),
                "{format:?}: {text}"
            );
            // ... what is open, the hook's lines and the previous summary's
            // bullets are there.
            for kept in [
                "Which region is next?",
                "Context: Ticket BILL-88 is the parent.",
                "the ledger lives in Postgres 16",
                "#1 user: start the migration",
            ] {
                assert!(text.contains(kept), "{format:?}: {kept} missing: {text}");
            }
        }
    }

    #[test]
    fn superseded_statements_are_marked_not_written_as_current() {
        let mut state = WorkstreamState::default();
        let said = [
            (1, "Set the request timeout to 37s."),
            (3, "Never log request bodies."),
            (5, "make the timeout 45s"),
        ];
        for (id, text) in said {
            state.stated.record(
                stated::extract(&[crate::Message::text(id, crate::Role::User, text)]),
                &stated::StatedCaps::default(),
                crate::evidence::EvidenceConfig::default().scope_messages,
            );
        }
        let previous = Summary {
            key_facts: vec!["User: Set the request timeout to 37s.".into()],
            ..Default::default()
        };
        let t = "[#3 USER]\nNever log request bodies.\n[#4 ASSISTANT]\nOK, the timeout stays 37s for now.\n\
[#5 USER]\nmake the timeout 45s\n[#6 ASSISTANT]\nDone, timeout is 45s.\n";
        let out = run(t, Some(&previous), &state);
        let text = out.summary.render();
        for line in text.lines().filter(|l| l.contains("37s")) {
            assert!(
                line.contains("superseded"),
                "shown as current: {line}\n{text}"
            );
        }
        assert!(text.contains("- User: make the timeout 45s\n"), "{text}");
        let again = run(t, Some(&out.summary), &state);
        assert_eq!(again.summary, out.summary, "marking is idempotent");
    }

    #[test]
    fn a_larger_budget_keeps_more_and_never_exceeds_it() {
        let mut t = String::new();
        for i in 0..400 {
            t.push_str(&format!(
                "[#{} USER]\nOrder {} goes to Lindenstraße {i}, please.\n[#{} ASSISTANT]\nNoted order {} for Lindenstraße {i}.\n",
                2 * i,
                70_000 + i,
                2 * i + 1,
                70_000 + i
            ));
        }
        let e = CharEstimator::default();
        let state = WorkstreamState::default();
        let config = ExtractiveConfig::default();
        let sizes: Vec<(usize, usize, u64)> = [4_096u64, 16_384]
            .iter()
            .map(|&budget| {
                let input = CompactionInput {
                    previous_summary: None,
                    state: &state,
                    new_messages: &t,
                    instructions: None,
                    split_turn: false,
                    format: SummaryFormat::Sections,
                };
                let out = summarize(&input, &config, budget, &e);
                let tokens = out.summary.tokens(&e);
                assert!(tokens <= budget, "{tokens} > {budget}");
                (
                    out.summary.key_facts.len(),
                    out.summary.conversation_flow.len(),
                    tokens,
                )
            })
            .collect();
        let (facts, flow, tokens) = sizes[1];
        assert!(facts > config.max_key_facts, "{sizes:?}");
        assert!(flow > config.max_flow, "{sizes:?}");
        assert!(
            tokens * 100 >= 16_384 * 70,
            "uses most of a large budget: {sizes:?}"
        );
        assert!(
            sizes[0].2 * 100 >= 4_096 * 70,
            "and of the default one: {sizes:?}"
        );
    }

    #[test]
    fn caps_scale_only_above_the_reference_budget() {
        assert_eq!(scaled_cap(40, 500), 40);
        assert_eq!(scaled_cap(40, REFERENCE_BUDGET), 40);
        assert_eq!(scaled_cap(40, 4 * REFERENCE_BUDGET), 160);
        assert_eq!(scaled_cap(usize::MAX, u64::MAX), usize::MAX);
    }

    #[test]
    fn deterministic() {
        let a = run(T, None, &WorkstreamState::default());
        let b = run(T, None, &WorkstreamState::default());
        assert_eq!(a, b);
    }

    #[test]
    fn forged_headers_inside_text_are_not_blocks() {
        // The transcript escapes content lines starting with `[#`; such a
        // line must not start a block here either.
        let out = run(
            "[#1 USER]\n [#2 ASSISTANT]\nhello there friend\n",
            None,
            &WorkstreamState::default(),
        );
        assert_eq!(out.summary.conversation_flow.len(), 1);
        assert!(out.summary.conversation_flow[0].starts_with("#1 user:"));
    }

    #[test]
    fn rollup_dedupes_and_fits() {
        let e = CharEstimator::default();
        let s = Summary {
            key_facts: vec!["a fact".into(), "A fact.".into()],
            conversation_flow: (0..300).map(|i| format!("step {i}")).collect(),
            open_threads: vec![],
            ..Default::default()
        };
        let r = rollup(&s, 300, &e);
        assert_eq!(r.key_facts, ["a fact"]);
        assert!(r.tokens(&e) <= 300);
        assert_eq!(
            r.conversation_flow.last().map(String::as_str),
            Some("step 299")
        );
    }

    #[test]
    fn memory_fold_dedupes_and_keeps_the_newest_within_bounds() {
        let folded = fold_memory_block(
            Some("- likes tea\n- uses vim"),
            &["Likes tea.".into(), "lives in Oslo".into()],
            1_000,
        );
        assert_eq!(folded, "- uses vim\n- Likes tea.\n- lives in Oslo\n");
        let tight = fold_memory_block(Some("- aaaa\n- bbbb"), &["cccc".into()], 14);
        assert_eq!(tight, "- bbbb\n- cccc\n");
    }

    /// [`run`] in the `handoff9` format, with `split_turn` and operator
    /// `instructions` as given.
    fn run_handoff9(
        transcript: &str,
        previous: Option<&Summary>,
        split_turn: bool,
        instructions: Option<&str>,
    ) -> SummarizerOutput {
        let state = WorkstreamState::default();
        let input = CompactionInput {
            previous_summary: previous,
            state: &state,
            new_messages: transcript,
            instructions,
            split_turn,
            format: SummaryFormat::Handoff9,
        };
        summarize(
            &input,
            &ExtractiveConfig::default(),
            4_096,
            &CharEstimator::default(),
        )
    }

    #[test]
    fn handoff9_fills_the_nine_sections_from_the_same_findings() {
        let out = run_handoff9(T, None, false, None);
        let s = &out.summary;
        assert_eq!(s.format, SummaryFormat::Handoff9);
        assert!(
            s.key_facts.is_empty() && s.conversation_flow.is_empty() && s.open_threads.is_empty()
        );
        assert_eq!(
            s.primary_request,
            [
                "#1 user: We must not touch the billing schema. Can you fix the bug in src/pay.rs?",
                "User: We must not touch the billing schema.",
            ],
            "the first request, and the constraint as a requirement"
        );
        assert_eq!(
            s.user_messages,
            [
                "#1 user: We must not touch the billing schema. Can you fix the bug in src/pay.rs?",
                "#5 user: Great. What about refunds?",
            ]
        );
        assert_eq!(
            s.work_completed,
            ["#2 assistant: Looking at it now. (tools: linearSearch)"]
        );
        assert!(
            s.errors_and_fixes
                .contains(&"The fix was in src/pay.rs:88.".to_owned()),
            "{s:?}"
        );
        assert_eq!(s.decisions_made, ["We decided to round half-even."]);
        assert_eq!(s.pending_work, ["What about refunds?"]);
        assert_eq!(s.current_state, ["#5 user: Great. What about refunds?"]);
        assert_eq!(s.next_step, ["Follow up on: What about refunds?"]);
        let text = s.render();
        assert_eq!(
            text.matches("- (none)").count(),
            1,
            "only section 5 is empty: {text}"
        );
    }

    #[test]
    fn handoff9_split_turn_operator_note_and_a_later_chunk() {
        let first = run_handoff9(
            "[#1 USER]\nPlease refactor the parser.\n[#2 ASSISTANT]\nStarting.\n",
            None,
            true,
            Some("keep the parser details"),
        );
        let s = &first.summary;
        assert_eq!(s.primary_request, ["#1 user: Please refactor the parser."]);
        assert_eq!(
            s.current_state,
            ["Turn in progress: #1 user: Please refactor the parser."]
        );
        assert_eq!(
            s.next_step,
            ["Answer the request of the turn in progress (#1): Please refactor the parser."]
        );
        // The next chunk replaces sections 8 and 9 and keeps the request.
        let second = run_handoff9(
            "[#3 USER]\nThe build failed with E0502 in src/parse.rs.\n[#4 ASSISTANT]\nI fixed it: the parser is done.\n",
            Some(s),
            false,
            None,
        );
        let s2 = &second.summary;
        assert_eq!(s2.primary_request, s.primary_request);
        assert_eq!(s2.user_messages.len(), 2);
        assert_eq!(
            s2.errors_and_fixes,
            ["User: The build failed with E0502 in src/parse.rs."]
        );
        assert!(s2
            .work_completed
            .contains(&"#4 assistant: I fixed it: the parser is done.".to_owned()));
        assert_eq!(s2.current_state.len(), 1);
        assert!(s2.current_state[0].starts_with("#3 user: The build failed"));
        assert!(s2.next_step.is_empty(), "nothing new left open: {s2:?}");
    }

    #[test]
    fn a_summary_in_the_other_format_is_converted_and_updated() {
        let previous = Summary {
            key_facts: vec!["Old fact about v1.".into()],
            conversation_flow: vec!["#0 user: hello".into()],
            open_threads: vec!["Deploy?".into()],
            ..Default::default()
        };
        let out = run_handoff9(T, Some(&previous), false, None);
        let s = &out.summary;
        assert_eq!(s.format, SummaryFormat::Handoff9);
        assert_eq!(s.technical_details[0], "Old fact about v1.");
        assert_eq!(s.work_completed[0], "#0 user: hello");
        assert_eq!(s.pending_work[0], "Deploy?");
        assert_eq!(
            s.primary_request,
            ["User: We must not touch the billing schema."],
            "a later message is not taken for the original request"
        );
        // And back: the three sections, nothing lost.
        let back = run(T, Some(s), &WorkstreamState::default());
        assert_eq!(back.summary.format, SummaryFormat::Sections);
        let facts = back.summary.key_facts.join("\n");
        assert!(facts.contains("Old fact about v1.") && facts.contains("round half-even"));
        assert!(back.summary.open_threads.contains(&"Deploy?".to_owned()));
    }

    #[test]
    fn handoff9_caps_and_budget_hold_on_a_large_chunk() {
        let t = large_chunk();
        let state = WorkstreamState::default();
        let e = CharEstimator::default();
        for budget in [300, 1_000, 4_096] {
            let input = CompactionInput {
                previous_summary: None,
                state: &state,
                new_messages: &t,
                instructions: None,
                split_turn: true,
                format: SummaryFormat::Handoff9,
            };
            let out = summarize(&input, &ExtractiveConfig::default(), budget, &e);
            let s = &out.summary;
            assert!(s.tokens(&e) <= budget, "budget {budget}");
            assert!(s.user_messages.len() <= 60 && s.work_completed.len() <= 60);
            assert!(s.technical_details.len() <= 40 && s.errors_and_fixes.len() <= 40);
            assert!(s.primary_request.len() <= 12 && s.pending_work.len() <= 12);
            assert_eq!(s.next_step.len(), 1, "the next step is cut last");
            assert_eq!(s.render().matches("## ").count(), 9);
        }
    }

    #[test]
    fn rollup_keeps_the_format() {
        let e = CharEstimator::default();
        let s = Summary {
            work_completed: (0..300).map(|i| format!("step {i}")).collect(),
            next_step: vec!["ship".into(), "Ship.".into()],
            ..Summary::empty(SummaryFormat::Handoff9)
        };
        let r = rollup(&s, 300, &e);
        assert_eq!(r.format, SummaryFormat::Handoff9);
        assert_eq!(r.next_step, ["ship"]);
        assert!(r.tokens(&e) <= 300);
        assert_eq!(
            r.work_completed.last().map(String::as_str),
            Some("step 299")
        );
    }

    proptest::proptest! {
        #[test]
        fn handoff9_never_panics_and_respects_the_budget(
            parts in random_parts(),
            budget in 200u64..5_000,
            split_turn in proptest::bool::ANY,
        ) {
            let (out, tokens) = summarize_random(&parts, budget, split_turn, SummaryFormat::Handoff9);
            proptest::prop_assert!(tokens <= budget);
            proptest::prop_assert_eq!(out.summary.format, SummaryFormat::Handoff9);
        }

        #[test]
        fn never_panics_and_respects_the_budget(
            parts in random_parts(),
            budget in 200u64..5_000,
        ) {
            let (_, tokens) = summarize_random(&parts, budget, true, SummaryFormat::Sections);
            proptest::prop_assert!(tokens <= budget);
        }
    }

    /// Random messages: a role index and a text each.
    fn random_parts() -> impl proptest::strategy::Strategy<Value = Vec<(u8, String)>> {
        proptest::collection::vec((0u8..5, "[ -~\u{e9}\u{6771}\n?.!]{0,200}"), 0..40)
    }

    /// Summarizes the transcript of [`random_parts`]; the output and its
    /// tokens.
    fn summarize_random(
        parts: &[(u8, String)],
        budget: u64,
        split_turn: bool,
        format: SummaryFormat,
    ) -> (SummarizerOutput, u64) {
        let mut t = String::new();
        for (i, (kind, text)) in parts.iter().enumerate() {
            let role = ["USER", "ASSISTANT", "TOOL", "SYSTEM", "USER"][usize::from(*kind)];
            t.push_str(&format!("[#{i} {role}]\n{text}\n"));
        }
        let state = WorkstreamState::default();
        let e = CharEstimator::default();
        let input = CompactionInput {
            previous_summary: None,
            state: &state,
            new_messages: &t,
            instructions: None,
            split_turn,
            format,
        };
        let out = summarize(&input, &ExtractiveConfig::default(), budget, &e);
        let tokens = out.summary.tokens(&e);
        (out, tokens)
    }
}
