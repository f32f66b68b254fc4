//! Ranking by the workstream's own statistics, and the choice of lines as
//! a coverage problem under a token budget.
//!
//! A term is worth `ln((N + 1) / df)`: N messages read, df of them carry
//! it. Boilerplate (a greeting, a menu repeated by every answer, a
//! distractor pool) is in many messages and sinks towards zero; a booking
//! reference said once rises. Values weigh more than words, the user's
//! words more than the assistant's, tool output least, and a term that
//! two speakers said (the user's value the assistant confirmed, a tool's
//! value the assistant used) more; a tool's term that neither the user
//! nor the assistant ever said (markup, a listing, a file read whole) less
//! again. A value a later line superseded is
//! worth nothing on the line that still states it.
//!
//! Lines are taken greedily by what they newly cover per token (lazily
//! re-scored: a line's gain only falls as others are taken), so many facts
//! fit in few lines; a line whose word shingles nearly repeat a kept line,
//! or the rest of the context, is not taken at all.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use rustc_hash::{FxHashMap, FxHashSet};

use super::forms::{self, Form};
use super::{slots, Candidate, Evidence, EvidenceConfig, Line, Read, Replaced, Speaker};
use crate::message::MessageId;
use crate::tokens::TokenEstimator;

/// What a compaction chose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chosen {
    pub evidence: Evidence,
    /// Candidate lines kept.
    pub kept: u64,
    /// Candidate lines left out (no budget, nothing new, or a repeat).
    pub dropped: u64,
    /// For each line of `evidence`, when it was taken (0 first): the
    /// order to give lines back in when the context runs over.
    pub rank: Vec<u32>,
}

impl Chosen {
    /// Gives back the lines taken last until `excess` tokens are freed
    /// (the markers added after the choice can take a context past its
    /// share); returns how many lines went.
    pub fn trim(&mut self, mut excess: u64, estimator: &dyn TokenEstimator) -> u64 {
        let mut n = 0;
        let mut tokens = estimator.count(&self.evidence.render());
        while excess > 0 {
            let Some((i, _)) = self.rank.iter().enumerate().max_by_key(|(_, r)| **r) else {
                break;
            };
            self.evidence.lines.remove(i);
            self.rank.remove(i);
            // (What the render gives back: a line that went on under
            // another gives back less than its citation.)
            let left = estimator.count(&self.evidence.render());
            excess = excess.saturating_sub(tokens.saturating_sub(left));
            tokens = left;
            n += 1;
        }
        self.kept -= n;
        self.dropped += n;
        n
    }
}

/// Two lines whose word 3-shingles overlap this much say the same thing
/// (and a line whose shingles stand, to [`crate::repeats::CONTAINED`], in
/// a kept one says nothing new).
pub(crate) const NEAR_DUPLICATE: f64 = 0.6;

/// The same, for a line that brings a value no kept line holds: below the
/// 0.8 at which two lines of a context count as one said twice.
/// (Jaccard, and the share of its shingles standing within a kept line.)
const NEW_VALUE_DUPLICATE: (f64, f64) = (0.75, 0.9);

/// A line gaining less than this (a fifth of one rare value) is not worth
/// its tokens. Low: what the budget has room for is kept (a long output's
/// lines share their worth, and each may be the one a later turn needs).
const MIN_GAIN: f64 = 0.2;

/// How many times the budget is counted again on the lines as they
/// render, for the lines that did not fit the sum of their own costs.
const REFILLS: u32 = 2;

/// What a tool's term nobody took up is worth, against one the user or
/// the assistant said too.
const UNUSED_TOOL: f64 = 0.5;

/// What the words of a line without a new value must be worth, in a
/// workstream of [`WORDS_ALONE_AT`] messages: about one word the user said
/// once (a word weighs a fifth of a value). Lines are taken by worth per
/// token, so a low bar only lets in what the budget still has room for; at
/// twice this, a chat between two people, whose facts are words ("we went
/// camping in the mountains"), left a sixth of its budget unused. In fewer
/// messages rarity tells less (in three, "what" and "the" are said once),
/// and the bar rises as `1 / ln(N + 1)`: [`words_alone`].
const WORDS_ALONE: f64 = 1.0;

/// The workstream size [`WORDS_ALONE`] is set for.
const WORDS_ALONE_AT: f64 = 400.0;

/// [`WORDS_ALONE`] for a workstream of `messages` read.
fn words_alone(messages: f64) -> f64 {
    WORDS_ALONE * (WORDS_ALONE_AT + 1.0).ln() / (messages + 1.0).ln().max(f64::EPSILON)
}

/// What a pair of ideographs ([`forms::Term::is_gram`]) is worth against
/// a word: each character stands in two pairs, so a pair is half a word.
/// At a quarter, names (which Chinese writes without capitals, so they are
/// found by their rare pairs alone) fell out before chit-chat did: CrossWOZ
/// tuning kept 67 % of its values, against 71 % at a half.
const GRAM: f64 = 0.5;

/// A pair of ideographs standing together in this share of its rarer
/// character's messages is one word ([`Stats::cohesion`]). On CrossWOZ's
/// tuning split the rare pairs inside names stand at a median of 0.41,
/// the other rare pairs (most across two words' edge) at 0.11.
const COHESIVE: f64 = 0.4;

fn form_weight(form: Form) -> f64 {
    match form {
        Form::Number | Form::Code | Form::Name | Form::Quoted => 1.0,
        Form::Word => 0.2,
    }
}

fn speaker_weight(speaker: Speaker) -> f64 {
    match speaker {
        Speaker::User => 1.0,
        Speaker::Assistant => 0.7,
        Speaker::Tool => 0.5,
    }
}

/// Whether `line` is a question, by its marks in any script: it ends with
/// a question mark (`?`, `？`) or opens with an inverted one (`¿`). Its
/// words say what was asked, not what is so: "Is it furnished?", "When
/// was it released?", "Hast du morgen Zeit?". A question that gives a
/// value ("Is there anything in NY?") is still worth its value.
fn asks(line: &str) -> bool {
    let text = line.trim_end_matches(|c: char| {
        c.is_whitespace() || matches!(c, '"' | '\'' | '”' | '’' | ')' | '」' | '』')
    });
    text.ends_with(['?', '？']) || text.trim_start().starts_with('¿')
}

/// Whether `line` only thanks or takes leave: a word of closing
/// ([`lang::CLOSINGS`]: "thanks", "das ist alles", "谢谢") in a short line
/// that gives no value ("OK, thanks.", "Nope, that's all for now.",
/// "收到，谢谢您耐心解答。"). A longer line may thank and say something
/// besides ("Thanks! The painting of the lake was my favourite."), and is
/// weighed by its words.
fn only_thanks(line: &str) -> bool {
    line.split_whitespace().count() <= THANKS_WORDS
        && line.chars().count() <= THANKS_CHARS
        && super::lang::CLOSINGS.contained_in(&super::forms::fold(line))
        && super::only_closes(line)
}

/// Words and characters of a line that only thanks, at most.
const THANKS_WORDS: usize = 8;
const THANKS_CHARS: usize = 60;

/// The statistics terms are weighed by.
struct Stats<'a> {
    df: &'a FxHashMap<String, [u32; 3]>,
    /// Per ideograph, in how many messages it is ([`Read::chars`]).
    chars: &'a FxHashMap<char, u32>,
    messages: f64,
    /// Terms the rest of the context already shows.
    shown: &'a FxHashSet<String>,
}

impl Stats<'_> {
    /// How much a pair of ideographs is one word: in how many messages the
    /// pair stands, against its rarer character's, as unsupervised word
    /// segmentation measures it (no word list). A name's characters stand
    /// together (`画廊`: each is rare, and rare apart), a pair across two
    /// words' edge does not (`迎下` of `欢迎下次`: each character is said
    /// in many other words), though both are rare as pairs. Scaled so a
    /// pair standing together in [`COHESIVE`] of its rarer character's
    /// messages counts whole.
    fn cohesion(&self, pair: &str, counts: &[u32; 3]) -> f64 {
        let together = f64::from(counts.iter().sum::<u32>().max(1));
        let alone = pair
            .chars()
            .map(|c| self.chars.get(&c).copied().unwrap_or(1).max(1))
            .min()
            .map_or(1.0, f64::from);
        (together / alone / COHESIVE).min(1.0).sqrt()
    }

    fn weight(&self, t: &forms::Term, speaker: Speaker) -> f64 {
        // Repeated by one speaker, a term is boilerplate; said by two, it
        // is confirmed: rarity is counted per speaker.
        let counts = self.df.get(&t.key).copied().unwrap_or([1, 0, 0]);
        let df = f64::from(counts.iter().copied().max().unwrap_or(1).max(1));
        let idf = ((self.messages + 1.0) / df).ln().max(0.0);
        let confirmed = counts.iter().filter(|&&n| n > 0).count() >= 2;
        let mut w = idf * form_weight(t.form) * speaker_weight(speaker);
        if t.is_gram() {
            w *= GRAM * self.cohesion(&t.key, &counts);
        }
        if t.form.is_value() {
            // A value said again in other messages is being worked on,
            // not boilerplate (that is the template's shape, below): its
            // recurrence adds to its worth; a value of one or two
            // characters (`3`, `10`) says little on its own.
            let said: u32 = counts.iter().sum();
            w += 0.5 * f64::from(said).ln_1p() * speaker_weight(speaker);
            // (A label says what it is: `DATABASE_POOL_SIZE=40`.)
            if !t.speaks_for_itself() {
                w *= 0.4;
            }
            if confirmed {
                w *= 2.0;
            }
        }
        // A tool's output that neither the user nor the assistant ever
        // said again is what the tool printed, not what the work used
        // (markup, listings, a file read whole): it is worth less than a
        // value someone took up.
        if speaker == Speaker::Tool && counts[0] == 0 && counts[1] == 0 {
            w *= UNUSED_TOOL;
        }
        // Shown already (elsewhere in the preamble: a user's statement):
        // a line adds the words around it, not the value.
        if self.shown.contains(&t.key) {
            w *= 0.2;
        }
        w
    }
}

/// The word 3-shingles of a text (one shingle of its words when shorter),
/// hashed, sorted and without repeats; scripts without spaces count each
/// character as a word.
pub(crate) fn shingles(text: &str) -> Vec<u64> {
    use std::hash::{Hash, Hasher};
    let mut words: Vec<String> = Vec::new();
    for w in text.split(|c: char| !c.is_alphanumeric()) {
        if w.is_empty() {
            continue;
        }
        if w.chars().any(forms::is_unspaced_script) {
            words.extend(w.chars().map(String::from));
        } else {
            words.push(forms::fold(w));
        }
    }
    let hash = |ws: &[String]| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        ws.hash(&mut h);
        h.finish()
    };
    let mut out: Vec<u64> = if words.len() < 3 {
        vec![hash(&words)]
    } else {
        words.windows(3).map(hash).collect()
    };
    out.sort_unstable();
    out.dedup();
    out
}

/// Jaccard similarity of two [`shingles`] sets.
pub(crate) fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = shared(a, b) as f64;
    inter / (a.len() as f64 + b.len() as f64 - inter)
}

/// How many elements two sorted sets share.
pub(crate) fn shared(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
            Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// Kept lines by their shingles: whether a line nearly repeats one of
/// them is asked of the lines sharing a shingle with it only, not of every
/// kept line (a context of thousands of lines would be quadratic).
#[derive(Default)]
struct NearIndex {
    postings: FxHashMap<u64, Vec<u32>>,
    sizes: Vec<u32>,
}

impl NearIndex {
    fn add(&mut self, sh: &[u64]) {
        let id = self.sizes.len() as u32;
        self.sizes.push(sh.len() as u32);
        for s in sh {
            self.postings.entry(*s).or_default().push(id);
        }
    }

    /// Whether `sh` nearly repeats a kept line: to `near` (Jaccard), or
    /// standing, to `contained` of its shingles, within one.
    fn repeats(&self, sh: &[u64], (near, contained): (f64, f64)) -> bool {
        let mut counts: FxHashMap<u32, u32> = FxHashMap::default();
        for s in sh {
            for id in self.postings.get(s).into_iter().flatten() {
                *counts.entry(*id).or_default() += 1;
            }
        }
        // Near the same, or standing whole within a kept line (one that
        // says it and a marker, or more).
        counts.into_iter().any(|(id, n)| {
            let union = sh.len() as f64 + f64::from(self.sizes[id as usize]) - f64::from(n);
            f64::from(n) / union >= near || f64::from(n) / sh.len() as f64 >= contained
        })
    }
}

/// A line's weight on its own (for pruning a large pool).
fn standalone(c: &Candidate, stats: &Stats<'_>) -> f64 {
    c.terms
        .iter()
        .map(|t| stats.weight(t, c.line.speaker))
        .sum::<f64>()
        / (c.line.text.len() as f64 + 16.0)
}

/// Keeps the `keep` lines of `pool` worth most on their own, in order,
/// and the counts of their terms only: on a compaction of any length the
/// pool and its statistics stay bounded (a term seen again later starts
/// from what was kept of it).
pub(crate) fn prune(pool: &mut Read, keep: usize) {
    let empty = FxHashSet::default();
    let stats = Stats {
        df: &pool.df,
        chars: &pool.chars,
        messages: pool.messages as f64,
        shown: &empty,
    };
    let mut ranked: Vec<(usize, f64)> = pool
        .lines
        .iter()
        .enumerate()
        .map(|(i, c)| (i, standalone(c, &stats)))
        .collect();
    ranked.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(Ordering::Equal));
    let mut kept: Vec<usize> = ranked.into_iter().take(keep).map(|(i, _)| i).collect();
    kept.sort_unstable();
    let mut lines = std::mem::take(&mut pool.lines);
    let mut i = 0;
    lines.retain(|_| {
        let k = kept.binary_search(&i).is_ok();
        i += 1;
        k
    });
    let kept_terms: FxHashSet<&str> = lines
        .iter()
        .flat_map(|c| c.terms.iter().map(|t| t.key.as_str()))
        .collect();
    pool.df.retain(|k, _| kept_terms.contains(k.as_str()));
    pool.lines = lines;
}

/// A line in the greedy queue, by gain per token.
struct Queued {
    ratio: f64,
    line: usize,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> Ordering {
        self.ratio
            .partial_cmp(&other.ratio)
            .unwrap_or(Ordering::Equal)
            // Ties: the newer line first.
            .then(self.line.cmp(&other.line))
    }
}

/// The [`super::MAX_VOCABULARY`] words said most often (ties by the word,
/// so the choice is deterministic).
fn most_common(mut vocabulary: FxHashMap<String, u32>) -> HashMap<String, u32> {
    if vocabulary.len() <= super::MAX_VOCABULARY {
        return vocabulary.into_iter().collect();
    }
    let mut counts: Vec<(String, u32)> = vocabulary.drain().collect();
    counts.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts.truncate(super::MAX_VOCABULARY);
    counts.into_iter().collect()
}

/// See [`super::Gathering::choose`].
/// What the context shows beside the evidence: the rest of its preamble
/// as text, and the user's current statements by message, case-folded
/// ([`super::Gathering::beside`]).
pub(crate) struct Shown<'a> {
    pub(crate) text: &'a str,
    pub(crate) said: &'a [(MessageId, String)],
}

pub(crate) fn choose(
    previous: &Evidence,
    mut pool: Read,
    later: Read,
    shown: Shown<'_>,
    budget: u64,
    config: &EvidenceConfig,
    estimator: &dyn TokenEstimator,
) -> Chosen {
    // The lines kept before compete again, counted as messages of their own.
    let mut all: Vec<Candidate> = Vec::with_capacity(previous.lines.len() + pool.lines.len());
    for line in &previous.lines {
        // (Read again as it was said: see [`Line::read`].)
        let mut line = line.clone();
        if !line.read.is_empty() {
            line.text = std::mem::take(&mut line.read);
        }
        let terms = forms::terms(&line.text);
        let mut seen = FxHashSet::default();
        for t in &terms {
            if seen.insert(t.key.clone()) {
                pool.df.entry(t.key.clone()).or_default()[line.speaker.index()] += 1;
            }
        }
        let chars: FxHashSet<char> = forms::ideographs(&line.text).collect();
        for c in chars {
            *pool.chars.entry(c).or_default() += 1;
        }
        all.push(Candidate { line, terms });
    }
    let messages = pool.messages + previous.lines.len() as u64;
    all.append(&mut pool.lines);
    // Word counts over the whole workstream: what was read before, and
    // the new span.
    let mut vocabulary: FxHashMap<String, u32> = previous
        .vocabulary
        .iter()
        .map(|(w, n)| (w.clone(), *n))
        .collect();
    for (w, n) in std::mem::take(&mut pool.words) {
        *vocabulary.entry(w).or_default() += n;
    }
    let read_so_far = previous.seen + pool.messages;
    let found = slots::supersede(&mut all, &later.lines, config.scope_messages);
    // Read before the squeeze, which may leave out the question's end.
    // A short line that only thanks or takes leave ([`only_thanks`]) says
    // no more than a question without a value does.
    let asks: Vec<bool> = all
        .iter()
        .map(|c| asks(&c.line.text) || only_thanks(&c.line.text))
        .collect();
    // Every line is squeezed to what it says, the kept ones again (what
    // is common is better known as the workstream grows): its terms are
    // those of what is kept.
    for c in &mut all {
        match super::squeeze::squeeze(
            &c.line.text,
            c.line.speaker == Speaker::User,
            &vocabulary,
            read_so_far,
        ) {
            Some((text, spans)) => {
                c.terms.retain(|t| {
                    spans
                        .iter()
                        .any(|&(from, to)| t.span.0 >= from && t.span.1 <= to)
                });
                if text != c.line.text {
                    c.line.read = std::mem::replace(&mut c.line.text, text);
                }
            }
            None => c.terms.clear(),
        }
    }
    // Replaced values: those of before, less the ones said again as a
    // slot's value since, then the new ones.
    let mut replaced: Vec<Replaced> = previous
        .replaced
        .iter()
        .filter(|r| {
            let again = found.replaced.iter().any(|n| n.value == r.value)
                || found
                    .last_filled
                    .get(&r.value)
                    .is_some_and(|&seq| seq >= previous.seen);
            !again
        })
        .cloned()
        .collect();
    replaced.extend(found.replaced);
    let excess = replaced.len().saturating_sub(super::MAX_REPLACED);
    replaced.drain(..excess);

    let shown_terms: FxHashSet<String> = shown
        .text
        .lines()
        .flat_map(forms::terms)
        .filter(|t| t.form.is_value())
        .map(|t| t.key)
        .collect();
    let mut near = NearIndex::default();
    // (The statements' lines too: a line of another message or speaker
    // that nearly repeats one is left out, as it was; a line a statement
    // of its own message says whole is shown as the statement instead.)
    for line in shown
        .text
        .lines()
        .chain(shown.said.iter().map(|(_, text)| text.as_str()))
        .filter(|l| l.split_whitespace().count() >= 4)
    {
        near.add(&shingles(line));
    }
    let stats = Stats {
        df: &pool.df,
        chars: &pool.chars,
        messages: messages as f64,
        shown: &shown_terms,
    };
    // A line whose shape (counts aside) recurs is a template's instance
    // (`… 52 lines of output …`, `Step 12 of 40`): its counts are the
    // template's, not facts, and its worth is shared among its instances.
    // In a tool's output a word with a digit is one class whole, its
    // letters too: the hash-named pods and commits of every listing are
    // one template, whatever letters their hashes hold. What a person or
    // the assistant says keeps a distinctive value as it is: "The phone
    // number is 408-555-0199" said for twenty restaurants is twenty
    // facts, not one template (it was: CrossWOZ kept a quarter of its
    // phone numbers).
    let shape = |c: &Candidate| -> String {
        let listing = c.line.speaker == Speaker::Tool;
        let mut out = String::with_capacity(c.line.text.len());
        for word in c.line.text.split_whitespace() {
            if !out.is_empty() {
                out.push(' ');
            }
            if !word.chars().any(char::is_numeric) {
                out.push_str(&forms::fold(word));
                continue;
            }
            // Runs of letters and digits (a script without spaces writes
            // its words in the same run as the number: they stay words,
            // or every line with a digit would be one template, `0。`).
            let mut run = String::new();
            let flush = |run: &mut String, out: &mut String| {
                if run.is_empty() {
                    return;
                }
                if !listing && forms::distinctive(run) {
                    out.push_str(run);
                } else if !out.ends_with('0') {
                    out.push('0');
                }
                run.clear();
            };
            for ch in word.chars() {
                if ch.is_alphanumeric() && !forms::is_unspaced_script(ch) {
                    run.extend(ch.to_lowercase());
                } else {
                    flush(&mut run, &mut out);
                    out.push(ch);
                }
            }
            flush(&mut run, &mut out);
        }
        out
    };
    let mut shapes: FxHashMap<String, u32> = FxHashMap::default();
    for c in &all {
        *shapes.entry(shape(c)).or_default() += 1;
    }
    let newest = all.last().map_or(1, |c| c.line.seq.max(1)) as f64;
    let oldest = all.first().map_or(0, |c| c.line.seq) as f64;
    let weights: Vec<Vec<(usize, f64)>> = {
        let mut ids: FxHashMap<&str, usize> = FxHashMap::default();
        all.iter()
            .map(|c| {
                // Old facts matter as much as new ones (what survives ten
                // compactions is the point); recency only breaks ties.
                let recency =
                    0.95 + 0.05 * (c.line.seq as f64 - oldest) / (newest - oldest).max(1.0);
                let instances = f64::from(shapes.get(&shape(c)).copied().unwrap_or(1));
                // A template's instances, and a long output's lines, share
                // their worth: a listing is read, a short answer answers.
                let of = f64::from(c.line.of.max(1)).sqrt();
                let recency = recency / instances.sqrt() / of;
                c.terms
                    .iter()
                    .map(|t| {
                        let n = ids.len();
                        let id = *ids.entry(t.key.as_str()).or_insert(n);
                        // (A line superseded whole holds no current value.)
                        let stale = t.form.is_value()
                            && c.line
                                .superseded
                                .iter()
                                .any(|r| r.value == t.key || r.value.is_empty());
                        let w = if stale {
                            0.0
                        } else {
                            stats.weight(t, c.line.speaker) * recency
                        };
                        (id, w)
                    })
                    .collect()
            })
            .collect()
    };
    // A line costs what the context shows of it: its prefix, its text
    // and its markers; a line a statement of the user's says whole is
    // shown as the statement, whose tokens are counted already.
    let free: Vec<bool> = all
        .iter()
        .map(|c| super::said_whole(&c.line, shown.said))
        .collect();
    let costs: Vec<u64> = all
        .iter()
        .zip(&free)
        .map(|(c, &free)| {
            if free {
                1
            } else {
                estimator.count(&super::render_line(&c.line))
            }
        })
        .collect();
    // A line of a message and speaker one kept line already cites goes
    // on under it (`super::render_lines`) and costs its text alone.
    let continued: Vec<u64> = all
        .iter()
        .zip(&free)
        .zip(&costs)
        .map(|((c, &free), &cost)| {
            if free || !c.line.superseded.is_empty() {
                cost
            } else {
                estimator.count(&super::continued_line(&c.line)).min(cost)
            }
        })
        .collect();
    let key = |line: usize| (all[line].line.at, all[line].line.speaker);
    let mut cited: FxHashSet<(MessageId, Speaker)> = FxHashSet::default();
    let cost = |line: usize, cited: &FxHashSet<(MessageId, Speaker)>| -> u64 {
        if cited.contains(&key(line)) {
            continued[line]
        } else {
            costs[line]
        }
    };
    let mut covered: FxHashSet<usize> = FxHashSet::default();
    // What a line newly covers; a line that covers no new value must
    // cover words worth [`words_alone`] to be worth its tokens.
    let bar = words_alone(messages as f64);
    let is_value: Vec<Vec<bool>> = all
        .iter()
        .map(|c| c.terms.iter().map(|t| t.form.is_value()).collect())
        .collect();
    let gain = |line: usize, covered: &FxHashSet<usize>| -> f64 {
        let mut values = 0.0;
        let mut words = 0.0;
        for ((id, w), value) in weights[line].iter().zip(&is_value[line]) {
            if covered.contains(id) {
                continue;
            }
            if *value {
                values += w;
            } else {
                words += w;
            }
        }
        // A question without a new value asks; what it asks about is
        // said by its answer, if anywhere.
        if values <= 0.0 && (words < bar || asks[line]) {
            0.0
        } else {
            values + words
        }
    };
    let mut queue: BinaryHeap<Queued> = (0..all.len())
        .map(|line| Queued {
            ratio: gain(line, &covered) / costs[line] as f64,
            line,
        })
        .filter(|q| q.ratio > 0.0)
        .collect();
    let mut left = budget;
    let mut taken: Vec<usize> = Vec::new();
    let mut is_taken = vec![false; all.len()];
    // Lines that did not fit what was left: they may once the budget is
    // counted again ([`REFILLS`]).
    let mut deferred: Vec<Queued> = Vec::new();
    let mut refills = 0;
    loop {
        let Some(top) = queue.pop() else {
            // Each line's cost is counted on its own, rounded up; the
            // lines together take less. What that left over is counted
            // on the lines as they render, and the lines that did not
            // fit compete again for it.
            if deferred.is_empty() || refills == REFILLS {
                break;
            }
            refills += 1;
            let mut order = taken.clone();
            order.sort_unstable();
            // (A line the user's statement says whole is shown as the
            // statement, at no cost here.)
            let used = estimator.count(&super::render_lines(
                order.iter().filter(|&&i| !free[i]).map(|&i| &all[i].line),
            )) + order.iter().filter(|&&i| free[i]).count() as u64;
            left = budget.saturating_sub(used);
            queue.extend(deferred.drain(..));
            continue;
        };
        if is_taken[top.line] {
            continue;
        }
        let g = gain(top.line, &covered);
        if g < MIN_GAIN {
            continue;
        }
        let line_cost = cost(top.line, &cited);
        let ratio = g / line_cost as f64;
        if queue.peek().is_some_and(|next| ratio < next.ratio) {
            queue.push(Queued {
                ratio,
                line: top.line,
            });
            continue;
        }
        if line_cost > left {
            deferred.push(Queued {
                ratio,
                line: top.line,
            });
            continue;
        }
        let sh = shingles(&all[top.line].line.text);
        // A line that brings a value no kept line holds differs in what
        // matters ("the dashboard is at …/billing-0/…" beside "… billing-3
        // …"): only a line the same but for a word or two repeats it.
        let new_value = weights[top.line]
            .iter()
            .zip(&is_value[top.line])
            .any(|((id, w), value)| *value && *w > 0.0 && !covered.contains(id));
        let bar = if new_value {
            NEW_VALUE_DUPLICATE
        } else {
            (NEAR_DUPLICATE, crate::repeats::CONTAINED)
        };
        if !free[top.line] && near.repeats(&sh, bar) {
            continue;
        }
        left -= line_cost;
        covered.extend(weights[top.line].iter().map(|(id, _)| *id));
        taken.push(top.line);
        is_taken[top.line] = true;
        if !free[top.line] {
            near.add(&sh);
            // The first line kept of its message and speaker: the others
            // (read next to it) now cost less, and compete again at
            // their new worth.
            if cited.insert(key(top.line)) {
                let k = key(top.line);
                let from = (0..top.line).rev().take_while(|&i| key(i) == k).last();
                let to = (top.line + 1..all.len())
                    .take_while(|&i| key(i) == k)
                    .last();
                let group = from.unwrap_or(top.line)..=to.unwrap_or(top.line);
                for other in group.filter(|&i| !is_taken[i]) {
                    let ratio = gain(other, &covered) / cost(other, &cited) as f64;
                    if ratio > 0.0 {
                        queue.push(Queued { ratio, line: other });
                    }
                }
            }
        }
    }
    let order: FxHashMap<usize, u32> = taken
        .iter()
        .enumerate()
        .map(|(k, &line)| (line, k as u32))
        .collect();
    taken.sort_unstable();
    let rank: Vec<u32> = taken.iter().map(|line| order[line]).collect();
    let kept = taken.len() as u64;
    let dropped = all.len() as u64 - kept;
    let mut lines: Vec<Line> = Vec::with_capacity(taken.len());
    let mut all: Vec<Option<Candidate>> = all.into_iter().map(Some).collect();
    for i in taken {
        if let Some(c) = all[i].take() {
            lines.push(c.line);
        }
    }
    Chosen {
        evidence: Evidence {
            lines,
            seen: previous.seen + pool.messages,
            replaced,
            vocabulary: most_common(vocabulary),
        },
        kept,
        dropped,
        rank,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_is_told_by_its_marks_in_any_script() {
        for q in [
            "When was it released?",
            "Hast du morgen Zeit?",
            "明日は空いていますか？",
            "¿Tiene aparcamiento?",
            "¿Tiene aparcamiento",
            "Did you say \"Friday?\"",
        ] {
            assert!(asks(q), "{q}");
        }
        for s in [
            "It was released in 2019.",
            "Ship it on Friday!",
            "a ? in the middle",
        ] {
            assert!(!asks(s), "{s}");
        }
    }

    #[test]
    fn jaccard_of_shingles() {
        let a = shingles("the deploy of step 12 failed with E0042");
        let b = shingles("the deploy of step 13 failed with E0042");
        let j = jaccard(&a, &b);
        assert!((0.2..0.6).contains(&j), "{j}");
        assert!((jaccard(&a, &a) - 1.0).abs() < 1e-9);
        assert_eq!(jaccard(&a, &shingles("nothing alike here at all")), 0.0);
    }
}
