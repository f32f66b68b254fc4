//! Whether one sentence of the user states a decision or a constraint.
//!
//! The rules look for a *frame*, not a word: "never" starts a rule only at
//! the head of an imperative clause ("never push to main") or after "we"
//! ("we never deploy on Fridays"), not in "never mind, found it" or "I
//! never thought of that"; "must" binds only when it is not the epistemic
//! "must be the cache". A sentence is not looked at when it is a question
//! (other than a polite request, "could you deliver it to my office
//! instead?"), a hypothetical ("what if", "maybe", "if … would"), or
//! reports what someone or something else says ("the docs say you must").
//! Words inside quotes never count as cues.
//!
//! The frames favour precision: a statement the rules miss is still in the
//! summary and in the messages kept verbatim, while a casual remark taken
//! for a rule would be shown as one on every later turn.

use super::words::{clauses, is_participle, is_past, strip_fillers, tokens, Tok, DATE_WORDS};
use super::StatementKind::{self, Constraint, Decision};
use crate::text::is_one_of;

/// Verbs that set or choose something when a value or "instead" comes with
/// them ("ship on Friday", "deliver to Kastanienallee 12").
const SETTING_VERBS: &[&str] = &[
    "expose",
    "serve",
    "mount",
    "set",
    "change",
    "make",
    "switch",
    "move",
    "keep",
    "ship",
    "deliver",
    "send",
    "book",
    "reserve",
    "schedule",
    "reschedule",
    "rebook",
    "put",
    "bill",
    "charge",
    "route",
    "pin",
    "target",
    "limit",
    "cap",
    "bump",
    "raise",
    "lower",
    "increase",
    "decrease",
    "reduce",
    "rename",
    "name",
    "call",
    "address",
    "deploy",
    "release",
    "publish",
    "launch",
    "use",
    "go",
    "pick",
    "choose",
    "select",
    "stick",
    "refund",
    "upgrade",
    "downgrade",
    "migrate",
    "store",
    "save",
    "treat",
    "default",
    "fly",
    "pay",
    "invoice",
    "contact",
    "email",
    "reply",
    "respond",
    "answer",
    "host",
    "extend",
    "shorten",
    "delay",
    "postpone",
    "push",
    "meet",
    "start",
    "hold",
    "stay",
    "leave",
    "seat",
    "prefer",
    "adopt",
    "write",
    "format",
];

/// Verbs that are a choice by themselves ("use tabs", "pick the blue one").
const CHOICE_VERBS: &[&str] = &[
    "use",
    "pick",
    "choose",
    "select",
    "stick",
    "target",
    "pin",
    "default",
    "treat",
    "prefer",
    "adopt",
    "book",
    "reserve",
    "switch",
    "migrate",
    "upgrade",
    "downgrade",
];

/// After "don't" / "never" at the head of a clause: a casual remark.
const CASUAL_AFTER_NEG: &[&str] = &[
    "worry",
    "worries",
    "mind",
    "bother",
    "panic",
    "apologize",
    "apologise",
    "hesitate",
    "sweat",
    "care",
    "rush",
    "stress",
    "fret",
    "thank",
    "mention",
    "ask",
    "be",
    "feel",
    "get",
    "laugh",
    "judge",
    "know",
    "think",
    "understand",
    "remember",
    "see",
    "believe",
    "you",
    "even",
    "really",
    "like",
    "tell",
    "say",
    "want",
    "need",
    "have",
];

/// Verbs after "we don't" / "you can't" that say nothing binding.
const CASUAL_VERBS: &[&str] = &[
    "know",
    "think",
    "have",
    "see",
    "get",
    "understand",
    "remember",
    "care",
    "mind",
    "seem",
    "worry",
    "find",
    "mean",
    "bother",
    "believe",
    "recall",
    "hear",
    "feel",
    "agree",
    "expect",
    "notice",
    "realize",
    "realise",
    "guess",
    "suppose",
    "wonder",
    "panic",
    "even",
    "reproduce",
    "tell",
    "figure",
    "wait",
    "thank",
    "say",
    "really",
    "quite",
    "actually",
    "always",
];

/// What a person says about themselves that binds later choices.
const PERSONAL_VERBS: &[&str] = &[
    "eat", "drink", "fly", "travel", "smoke", "drive", "take", "use", "want", "like", "tolerate",
    "consume", "sit", "accept", "work", "do", "share", "pay", "wear", "book", "stay", "ride",
    "cook", "need", "speak", "walk", "climb", "lift", "handle", "digest", "afford", "make",
    "allow", "answer", "check", "read",
];

/// Diets and conditions: "I'm vegetarian", "my son is coeliac".
const PERSONAL_CONDITIONS: &[&str] = &[
    "vegetarian",
    "vegan",
    "pescatarian",
    "pescetarian",
    "diabetic",
    "celiac",
    "coeliac",
    "teetotal",
    "teetotaler",
    "teetotaller",
    "kosher",
    "halal",
    "pregnant",
    "non-smoker",
    "nonsmoker",
    "gluten-free",
    "dairy-free",
    "lactose-free",
    "nut-free",
    "deaf",
    "blind",
    "wheelchair",
    "lactose-intolerant",
    "epileptic",
    "asthmatic",
];

const DETERMINERS: &[&str] = &[
    "a", "an", "the", "this", "that", "these", "those", "my", "your", "our", "his", "her", "their",
    "its", "some", "any", "no", "every", "each", "all", "one",
];

const PRONOUNS: &[&str] = &[
    "i",
    "you",
    "he",
    "she",
    "it",
    "we",
    "they",
    "me",
    "him",
    "us",
    "them",
    "this",
    "that",
    "there",
    "something",
    "someone",
    "somebody",
    "anything",
    "anyone",
    "nothing",
    "everything",
    "everyone",
    "it's",
    "that's",
    "there's",
];

/// Third parties: what they must do is reported, not decided by the user.
const THIRD_PARTY: &[&str] = &[
    "he", "she", "they", "someone", "somebody", "who", "which", "what", "whoever",
];

/// Whole-sentence markers of a hypothetical, a hedge or reported speech.
const HEDGES: &[&str] = &[
    "suppose",
    "supposing",
    "imagine",
    "hypothetically",
    "theoretically",
    "wonder",
    "wondering",
    "maybe",
    "perhaps",
    "might",
    "whether",
    "assuming",
    "assume",
    "probably",
    "likely",
    "seems",
    "seem",
    "seemed",
    "apparently",
    "wish",
    "hope",
    "hoping",
    "guess",
    "unsure",
    "would",
    "could",
    "said",
    "says",
    "saying",
    "told",
    "according",
    "claims",
    "claimed",
    "mentioned",
    "wrote",
    "writes",
    "asked",
    "asks",
    "docs",
    "documentation",
    "manual",
    "faq",
    "joke",
    "joking",
    "kidding",
    "sarcasm",
    "lol",
    "ironically",
    "otherwise",
];

/// Whether `sentence` states a decision or a constraint of its speaker.
pub(crate) fn classify(sentence: &str) -> Option<StatementKind> {
    let trimmed = sentence.trim();
    if trimmed.chars().count() > super::sentence::MAX_SENTENCE_CHARS
        || super::sentence::looks_like_code(trimmed)
    {
        return None;
    }
    let question = trimmed.ends_with('?');
    let toks = tokens(trimmed);
    if toks.len() < 2 {
        return None;
    }
    let mut parts: Vec<(&[Tok], bool)> = Vec::new();
    for clause in clauses(&toks) {
        let c = strip_fillers(clause);
        parts.push(strip_request(c));
    }
    if question && !parts.iter().any(|(_, request)| *request) {
        return None;
    }
    if hedged(&parts) {
        return None;
    }
    if !question && personal_condition(&toks) {
        return Some(Constraint);
    }
    let standing_rule = [
        "from now on",
        "going forward",
        "henceforth",
        "from here on",
        "moving forward",
    ]
    .iter()
    .any(|p| phrase_at(&toks, p).is_some());
    let mut found = None;
    for (c, request) in &parts {
        if c.is_empty() || interrogative(c) {
            continue;
        }
        let kind = if question {
            // "Could you deliver it to my office instead?" changes what
            // holds; "can you refund 4.50 EUR?" asks for one action; "the
            // move got pushed to 5 July, can you tell the movers?" reports
            // a change before it asks.
            imperative(c)
                .filter(|_| changes_something(c))
                .or_else(|| moved_report(c).filter(|_| !*request))
        } else if *request {
            // A request is read as the imperative it stands for.
            imperative(c)
        } else {
            clause_kind(c)
        };
        if kind.is_some() {
            found = kind;
            break;
        }
    }
    if found.is_none() && !question {
        found = contrast(&parts);
    }
    // "From now on, reply in English" is a standing rule, whatever its shape.
    match found {
        Some(_) | None if standing_rule && !question => Some(Constraint),
        kind => kind,
    }
}

/// "14A if possible", "the 09:15 please", "Tuesday, ideally": a value
/// chosen in a fragment with no verb, meaningful only with the sentence
/// before it (see `extract`).
pub(crate) fn value_fragment(sentence: &str) -> bool {
    let trimmed = sentence.trim();
    if trimmed.ends_with('?') {
        return false;
    }
    let toks = tokens(trimmed);
    let Some(first_value) = toks.iter().position(|t| t.value && !t.quoted) else {
        return false;
    };
    let polite = [
        "if possible",
        "please",
        "preferably",
        "ideally",
        "if you can",
    ]
    .iter()
    .any(|p| phrase_at(&toks, p).is_some());
    toks.len() <= 6
        && first_value <= 1
        && polite
        && toks[first_value].w.chars().any(|c| c.is_ascii_digit())
}

/// After "X, not …": words that make it a judgement or a reply ("good, not
/// great", "soon, not yet"), not a choice between two things.
const CONTRAST_CASUAL: &[&str] = &[
    "yet",
    "really",
    "sure",
    "exactly",
    "quite",
    "necessarily",
    "bad",
    "great",
    "good",
    "much",
    "now",
    "so",
    "too",
    "that",
    "this",
    "me",
    "just",
    "even",
    "always",
    "ideal",
    "perfect",
];

/// "To the original card, not store credit", "aisle, not window", "email,
/// not phone": a short phrase set against another names what must hold,
/// though it has no verb. Not when the first part is a statement about
/// something ("it's the cache, not the database") or tells what happened
/// ("that was Tuesday, not Monday").
fn contrast(parts: &[(&[Tok], bool)]) -> Option<StatementKind> {
    parts.windows(2).find_map(|pair| {
        let (a, b) = (pair[0].0, pair[1].0);
        let chosen = (1..=8).contains(&a.len())
            && !is_one_of(w(a, 0), PRONOUNS)
            && !is_one_of(w(a, 0), THIRD_PARTY)
            && !matches!(
                w(a, 0),
                "it" | "it's" | "that" | "that's" | "this" | "there" | "not"
            )
            && !a
                .iter()
                .any(|t| is_past(t.cue()) || matches!(t.cue(), "is" | "was" | "are" | "were"));
        let against = (2..=5).contains(&b.len())
            && w(b, 0) == "not"
            && !is_one_of(w(b, 1), CONTRAST_CASUAL)
            && !b.iter().any(|t| is_past(t.cue()));
        (chosen && against).then_some(Constraint)
    })
}

/// The word at `i` as a cue ("" past the end, a placeholder when quoted).
fn w(c: &[Tok], i: usize) -> &str {
    c.get(i).map_or("", Tok::cue)
}

/// Position of a space-separated phrase in `c`.
fn phrase_at(c: &[Tok], phrase: &str) -> Option<usize> {
    // Only where the first word is: the rest of the phrase is split there.
    let (first, rest) = phrase.split_once(' ').unwrap_or((phrase, ""));
    (0..c.len()).find(|&i| w(c, i) == first && (rest.is_empty() || phrase_is_at(c, i + 1, rest)))
}

/// Whether the space-separated `phrase` starts at `i` in `c` (no
/// allocation: the rules ask this thousands of times per chunk).
fn phrase_is_at(c: &[Tok], i: usize, phrase: &str) -> bool {
    phrase.split(' ').enumerate().all(|(k, p)| w(c, i + k) == p)
}

fn has_word(c: &[Tok], words: &[&str]) -> bool {
    c.iter().any(|t| words.contains(&t.cue()))
}

/// Strips "could you (please)", "I'd like to", "I want to" before a verb
/// that sets something; `true` when it did (the rest is an imperative).
fn strip_request(c: &[Tok]) -> (&[Tok], bool) {
    let polite = matches!(w(c, 0), "can" | "could" | "would" | "will") && w(c, 1) == "you";
    if polite {
        let skip = if w(c, 2) == "please" { 3 } else { 2 };
        return (c.get(skip..).unwrap_or(&[]), true);
    }
    for prefix in [
        "i'd like to",
        "i would like to",
        "i want to",
        "i need to",
        "we want to",
        "we need to",
        "i wish to",
        "we'd like to",
    ] {
        let n = prefix.split(' ').count();
        if !c.is_empty() && phrase_is_at(c, 0, prefix) && is_one_of(w(c, n), SETTING_VERBS) {
            return (&c[n..], true);
        }
    }
    (c, false)
}

/// Whether an imperative changes a standing choice (rather than asking
/// for one action): "instead", a verb of change or choice, a toggle, a
/// cancellation or a rule.
fn changes_something(c: &[Tok]) -> bool {
    let v = after_lead_in(c);
    has_word(c, &["instead", "always", "never", "only", "anymore"])
        || matches!(
            w(c, v),
            "change"
                | "switch"
                | "move"
                | "set"
                | "make"
                | "update"
                | "reschedule"
                | "rebook"
                | "keep"
                | "turn"
                | "disable"
                | "enable"
                | "cancel"
                | "scrap"
                | "drop"
                | "stop"
                | "don't"
                | "do"
                | "never"
        )
        || is_one_of(w(c, v), CHOICE_VERBS)
}

/// A hypothetical, a hedge or reported speech anywhere in the sentence.
fn hedged(parts: &[(&[Tok], bool)]) -> bool {
    let all: Vec<&Tok> = parts.iter().flat_map(|(c, _)| c.iter()).collect();
    let word = |i: usize| all.get(i).map_or("", |t| t.cue());
    for i in 0..all.len() {
        let here = word(i);
        let next = word(i + 1);
        let hedge = match here {
            "would" | "i'd" | "we'd" | "you'd" => !matches!(next, "prefer" | "rather" | "like"),
            "could" => true,
            "if" => (i + 1..all.len()).any(|k| {
                matches!(
                    word(k),
                    "would" | "could" | "might" | "were" | "i'd" | "we'd" | "you'd" | "it'd"
                )
            }),
            "what" => next == "if",
            "in" => matches!(next, "theory" | "case"),
            "not" => next == "sure",
            "let's" => next == "say",
            "say" => matches!(next, "we" | "you"),
            other => is_one_of(other, HEDGES),
        };
        if hedge {
            return true;
        }
    }
    false
}

/// "do we …", "should I …", "is it …": a question without its mark.
fn interrogative(c: &[Tok]) -> bool {
    let aux = matches!(
        w(c, 0),
        "should"
            | "shall"
            | "can"
            | "do"
            | "does"
            | "did"
            | "is"
            | "are"
            | "was"
            | "were"
            | "will"
            | "have"
            | "has"
            | "may"
            | "must"
            | "which"
            | "what"
            | "why"
            | "how"
            | "when"
            | "where"
            | "who"
    );
    aux && (is_one_of(w(c, 1), PRONOUNS) || is_one_of(w(c, 1), DETERMINERS))
}

/// "I'm allergic to peanuts", "my daughter is coeliac", "I have a nut
/// allergy": conditions the user states about themselves or theirs.
fn personal_condition(toks: &[Tok]) -> bool {
    let first_person = has_word(toks, &["i", "i'm", "my", "me", "we", "our", "we're"]);
    if !first_person {
        return false;
    }
    let allergy = toks.iter().any(|t| {
        !t.quoted
            && (t.w.starts_with("allerg")
                || t.w.starts_with("intoleran")
                || t.w.ends_with("-intolerant"))
    });
    if allergy {
        return true;
    }
    // "I'm (a|strictly|…) vegetarian", "my wife is vegan".
    for (i, t) in toks.iter().enumerate() {
        if t.quoted || !is_one_of(t.w.as_str(), PERSONAL_CONDITIONS) {
            continue;
        }
        let mut k = i;
        while k > 0
            && matches!(
                w(toks, k - 1),
                "a" | "an"
                    | "strictly"
                    | "also"
                    | "very"
                    | "fully"
                    | "completely"
                    | "now"
                    | "both"
                    | "all"
            )
        {
            k -= 1;
        }
        let copula = k > 0
            && matches!(
                w(toks, k - 1),
                "i'm" | "am" | "is" | "are" | "we're" | "eat" | "keep"
            );
        if copula {
            return true;
        }
    }
    false
}

/// Prepositions that open a phrase a statement may follow: "for the local
/// job store let's go with SQLite", "for the backfill use a batch of 300".
const FRAMING: &[&str] = &[
    "for",
    "on",
    "in",
    "at",
    "about",
    "regarding",
    "with",
    "as",
    "during",
    "after",
    "before",
];

/// The frames of a declarative clause (its leading fillers already
/// stripped), most specific first; failing them, the same frames after a
/// colon (fillers stripped there too) or a framing phrase (at most six
/// words: "for the local job store").
fn clause_kind(c: &[Tok]) -> Option<StatementKind> {
    if let Some(kind) = frames(c) {
        return Some(kind);
    }
    // "We're staying longer: make the hotel 3 nights".
    if let Some(k) = c.iter().position(|t| t.colon).filter(|&k| k + 2 < c.len()) {
        if let Some(kind) = frames(strip_fillers(&c[k + 1..])) {
            return Some(kind);
        }
    }
    let first = w(c, 0);
    if !is_one_of(first, FRAMING) {
        return None;
    }
    (2..=6.min(c.len().saturating_sub(2)))
        .find(|&k| {
            let lead = w(c, k);
            matches!(lead, "let's" | "we'll" | "i'll" | "let" | "we")
                || ((is_one_of(lead, SETTING_VERBS) || is_one_of(lead, CHOICE_VERBS))
                    && !is_one_of(w(c, k - 1), DETERMINERS))
        })
        .and_then(|k| frames(&c[k..]))
}

fn frames(c: &[Tok]) -> Option<StatementKind> {
    no_longer(c)
        .or_else(|| change_verb(c))
        .or_else(|| make_sure(c))
        .or_else(|| short_prohibition(c))
        .or_else(|| negative_imperative(c))
        .or_else(|| always_only(c))
        .or_else(|| toggle(c))
        .or_else(|| decided(c))
        .or_else(|| future_choice(c))
        .or_else(|| dated_plan(c))
        .or_else(|| moved_report(c))
        .or_else(|| setting_imperative(c))
        .or_else(|| personal(c))
        .or_else(|| we_policy(c))
        .or_else(|| subject_modal(c))
        .or_else(|| limits(c))
        .or_else(|| copula_value(c))
        .or_else(|| short_only(c))
        .or_else(|| instead(c))
}

/// The frames an imperative can take (a polite request's rest).
fn imperative(c: &[Tok]) -> Option<StatementKind> {
    change_verb(c)
        .or_else(|| make_sure(c))
        .or_else(|| negative_imperative(c))
        .or_else(|| always_only(c))
        .or_else(|| toggle(c))
        .or_else(|| setting_imperative(c))
}

/// "I no longer live at …", "we don't use Redis anymore".
fn no_longer(c: &[Tok]) -> Option<StatementKind> {
    let first = w(c, 0);
    if is_one_of(first, THIRD_PARTY) || matches!(first, "it" | "this" | "that" | "there" | "it's") {
        return None;
    }
    if let Some(at) = phrase_at(c, "no longer") {
        let after = w(c, at + 2);
        let binding = matches!(
            after,
            "need"
                | "needs"
                | "want"
                | "wants"
                | "use"
                | "uses"
                | "support"
                | "supports"
                | "live"
                | "lives"
                | "work"
                | "works"
                | "required"
                | "necessary"
                | "needed"
                | "valid"
                | "applies"
                | "apply"
                | "relevant"
                | "available"
                | "allowed"
                | "wanted"
                | "accept"
                | "accepts"
                | "require"
                | "requires"
                | "an"
                | "in"
                | "using"
                | "supported"
                | "offer"
                | "have"
        );
        return (binding || matches!(first, "i" | "we")).then_some(Decision);
    }
    let anymore = has_word(c, &["anymore"]) || phrase_at(c, "any more").is_some();
    let negated = has_word(c, &["don't", "do", "won't", "can't", "not", "doesn't"]);
    if anymore && negated && matches!(first, "i" | "we" | "don't" | "do" | "please") {
        let verb = c.iter().skip(1).map(Tok::cue).find(|x| {
            !matches!(
                *x,
                "don't" | "do" | "not" | "won't" | "can't" | "doesn't" | "need" | "to"
            )
        });
        if verb.is_some_and(|v| !is_one_of(v, CASUAL_VERBS) && !is_past(v)) {
            return Some(Decision);
        }
    }
    None
}

/// Position of the verb after an optional "let's" / "we'll" / "just".
fn after_lead_in(c: &[Tok]) -> usize {
    match (w(c, 0), w(c, 1)) {
        ("let's" | "we'll" | "i'll" | "just", _) => 1,
        ("let", "us") | ("we", "will") | ("we", "should") | ("i", "will") => 2,
        _ => 0,
    }
}

/// "scrap Postgres", "cancel order 4411", "stop using Redis", "no more
/// standups", "forget about the hotel".
fn change_verb(c: &[Tok]) -> Option<StatementKind> {
    let v = after_lead_in(c);
    let obj = |i: usize| {
        let o = w(c, i);
        !o.is_empty() && !matches!(o, "it" | "that" | "this" | "them" | "everything" | "what")
    };
    let hit = match w(c, v) {
        "scrap" | "ditch" | "abandon" => obj(v + 1),
        "drop" => {
            obj(v + 1)
                && !matches!(
                    w(c, v + 1),
                    "off" | "by" | "in" | "me" | "us" | "a" | "an" | "out"
                )
        }
        "cancel" => obj(v + 1) && w(c, v + 1) != "my" || (w(c, v + 1) == "my" && obj(v + 2)),
        "stop" => w(c, v + 1).ends_with("ing") && obj(v + 2),
        "forget" if w(c, v + 1) == "about" => {
            let mut at = v + 2;
            while is_one_of(w(c, at), DETERMINERS) {
                at += 1;
            }
            obj(at)
        }
        "forget" => {
            let next = w(c, v + 1);
            let plain = obj(v + 1)
                && !is_one_of(next, DETERMINERS)
                && !matches!(next, "me" | "you" | "i" | "to");
            // "forget the shoes", but not "forget the last message".
            let the_thing = next == "the"
                && c.len() <= v + 4
                && obj(v + 2)
                && !matches!(
                    w(c, v + 2),
                    "last"
                        | "previous"
                        | "above"
                        | "message"
                        | "question"
                        | "rest"
                        | "whole"
                        | "other"
                );
            plain || the_thing
        }
        "get" => w(c, v + 1) == "rid" && w(c, v + 2) == "of" && obj(v + 3),
        "no" => {
            w(c, v + 1) == "more"
                && obj(v + 2)
                && !matches!(
                    w(c, v + 2),
                    "questions" | "worries" | "problems" | "please" | "than"
                )
        }
        _ => false,
    };
    hit.then_some(Decision)
}

/// "make sure the migration is idempotent", "ensure every invoice has a
/// VAT id", "it's important that the migration is reversible".
fn make_sure(c: &[Tok]) -> Option<StatementKind> {
    let v = after_lead_in(c);
    let hit = match (w(c, v), w(c, v + 1)) {
        ("make", "sure" | "certain") | ("ensure", _) => c.len() > v + 2,
        ("it's", "important" | "essential" | "critical" | "crucial" | "mandatory" | "vital") => {
            matches!(w(c, v + 2), "that" | "to" | "we" | "you") && c.len() > v + 3
        }
        _ => false,
    };
    hit.then_some(Constraint)
}

/// After a leading "no": a reply or a status, not a rule.
const NO_CASUAL: &[&str] = &[
    "problem",
    "problems",
    "prob",
    "worries",
    "worry",
    "idea",
    "way",
    "thanks",
    "thank",
    "clue",
    "offense",
    "offence",
    "need",
    "rush",
    "hurry",
    "pressure",
    "doubt",
    "kidding",
    "joke",
    "matter",
    "one",
    "sir",
    "luck",
    "chance",
    "big",
    "comment",
    "wonder",
    "sweat",
    "biggie",
    "dice",
    "response",
    "reply",
    "answer",
    "news",
    "change",
    "difference",
    "update",
    "results",
    "success",
    "error",
    "errors",
    "issue",
    "issues",
    "longer",
    "more",
    "not",
    "i",
    "it",
    "that",
    "this",
    "you",
    "we",
    "they",
    "sorry",
    "shit",
    "fun",
    "go",
    "cigar",
    "signal",
    "reason",
    "time",
    "money",
    "access",
    "internet",
    "connection",
    "power",
    "service",
    "tracking",
    "word",
    "sign",
    "trace",
    "wait",
    "way,",
    "ma'am",
    "dear",
    "pun",
    "surprise",
    "idea,",
];

/// "no emojis", "no red-eye flights", "no meetings on Fridays".
fn short_prohibition(c: &[Tok]) -> Option<StatementKind> {
    let mut end = c.len();
    while end > 0 && matches!(w(c, end - 1), "please" | "thanks" | "thank" | "you") {
        end -= 1;
    }
    let ok = w(c, 0) == "no"
        && (2..=5).contains(&end)
        && !is_one_of(w(c, 1), NO_CASUAL)
        && !c[1..end]
            .iter()
            .any(|t| is_past(t.cue()) || t.cue() == "\"q\"");
    ok.then_some(Constraint)
}

/// "never push to main", "don't use emojis", "do not deploy on Fridays",
/// "avoid the A9".
fn negative_imperative(c: &[Tok]) -> Option<StatementKind> {
    let (head, mut n) = match (w(c, 0), w(c, 1)) {
        ("do", "not") => ("don't", 2),
        ("don't", _) => ("don't", 1),
        ("never", _) => ("never", 1),
        ("avoid", _) => ("avoid", 1),
        _ => return None,
    };
    if head == "never" && w(c, n) == "ever" {
        n += 1;
    }
    let next = w(c, n);
    if next.is_empty() || next == "\"q\"" {
        return None;
    }
    if head == "avoid" {
        return Some(Constraint);
    }
    let participle = matches!(
        next,
        "seen"
            | "been"
            | "done"
            | "known"
            | "gone"
            | "given"
            | "taken"
            | "gotten"
            | "written"
            | "shown"
            | "eaten"
            | "forgotten"
            | "heard"
    );
    if is_one_of(next, CASUAL_AFTER_NEG)
        || is_past(next)
        || participle
        || next == "again"
        || next == "ever"
    {
        // "don't forget to …" is a reminder the user wants kept.
        return None;
    }
    Some(Constraint)
}

/// "always run the tests first", "only use the EU region".
fn always_only(c: &[Tok]) -> Option<StatementKind> {
    let next = w(c, 1);
    let ok = match w(c, 0) {
        "always" => {
            !next.is_empty()
                && !is_one_of(next, DETERMINERS)
                && !matches!(
                    next,
                    "been" | "happy" | "glad" | "pleased" | "nice" | "good" | "fun" | "the"
                )
                && !is_past(next)
        }
        "only" => {
            !next.is_empty()
                && !is_one_of(next, DETERMINERS)
                && !is_one_of(next, PRONOUNS)
                && !matches!(
                    next,
                    "if" | "when"
                        | "because"
                        | "just"
                        | "kidding"
                        | "joking"
                        | "once"
                        | "twice"
                        | "then"
                        | "now"
                        | "two"
                        | "three"
                )
                && !c
                    .get(1)
                    .is_some_and(|t| t.w.chars().any(|ch| ch.is_ascii_digit()))
        }
        _ => false,
    };
    ok.then_some(Constraint)
}

/// Nouns that are switched on and off.
const TOGGLE_NOUNS: &[&str] = &[
    "flag",
    "feature",
    "toggle",
    "cache",
    "caching",
    "setting",
    "option",
    "mode",
    "notifications",
    "alerts",
    "alerting",
    "sync",
    "syncing",
    "backups",
    "backup",
    "telemetry",
    "logging",
    "autoscaling",
    "renewal",
    "auto-renewal",
    "autorenewal",
    "subscription",
    "newsletter",
    "emails",
    "reminders",
    "tracking",
    "cookies",
    "2fa",
    "debug",
    "beta",
    "experiment",
    "cron",
    "job",
    "pipeline",
    "monitoring",
    "retries",
    "prefetch",
    "prefetching",
    "compression",
    "updates",
    "autoupdate",
    "auto-update",
];

/// "turn off the cache", "disable 2FA", "keep billing.fx_cache off",
/// "billing.invoice_v2_fx_cache is off".
fn toggle(c: &[Tok]) -> Option<StatementKind> {
    let onoff = |x: &str| matches!(x, "on" | "off");
    match w(c, 0) {
        "turn" | "switch" | "flip" if c.iter().skip(1).any(|t| onoff(t.cue())) => {
            return Some(Decision)
        }
        "disable" | "enable" | "deactivate" | "activate" | "mute" | "unmute" if c.len() >= 2 => {
            return Some(Decision)
        }
        "keep" | "leave"
            if matches!(
                c.last().map(Tok::cue),
                Some("off" | "on" | "disabled" | "enabled")
            ) =>
        {
            return Some(Decision)
        }
        _ => {}
    }
    // NP (is|are|stays|…) [now|turned|switched] (off|on|disabled|enabled)
    let state_at = c.iter().position(|t| {
        matches!(
            t.cue(),
            "off" | "on" | "disabled" | "enabled" | "deactivated" | "activated"
        )
    })?;
    let mut k = state_at;
    while k > 0
        && matches!(
            w(c, k - 1),
            "now" | "turned" | "switched" | "be" | "stay" | "remain" | "permanently" | "still"
        )
    {
        k -= 1;
    }
    let copula = k > 0
        && matches!(
            w(c, k - 1),
            "is" | "are" | "stays" | "remains" | "stay" | "remain" | "must" | "should" | "will"
        );
    if !copula || k < 2 {
        return None;
    }
    let np = &c[..k - 1];
    if np
        .iter()
        .any(|t| is_one_of(t.cue(), PRONOUNS) || is_one_of(t.cue(), THIRD_PARTY))
        || np.len() > 6
    {
        return None;
    }
    let after = w(c, state_at + 1);
    let ends_well = after.is_empty()
        || matches!(
            after,
            "now"
                | "again"
                | "for"
                | "until"
                | "from"
                | "permanently"
                | "everywhere"
                | "in"
                | "globally"
                | "by"
        ) && !(after == "by" && w(c, state_at + 2) != "default");
    let state = w(c, state_at);
    let technical =
        np.iter().any(|t| t.value) || np.last().is_some_and(|t| is_one_of(t.cue(), TOGGLE_NOUNS));
    let ok = ends_well && (technical || !matches!(state, "on" | "off"));
    ok.then_some(Decision)
}

/// "we decided to …", "decision: …", "we agreed on …", "settled on …".
fn decided(c: &[Tok]) -> Option<StatementKind> {
    for (i, t) in c.iter().enumerate() {
        let prev = if i > 0 { w(c, i - 1) } else { "" };
        let next = w(c, i + 1);
        let negated = c[..i].iter().any(|t| {
            matches!(
                t.cue(),
                "not"
                    | "haven't"
                    | "hasn't"
                    | "didn't"
                    | "never"
                    | "if"
                    | "once"
                    | "until"
                    | "when"
                    | "you"
                    | "they"
                    | "he"
                    | "she"
            )
        });
        if negated {
            return None;
        }
        let hit = match t.cue() {
            "decided" => {
                matches!(
                    next,
                    "to" | "on" | "that" | "against" | "we" | "i" | "the" | "it" | ""
                ) || t.colon
            }
            "decision" => {
                t.colon || prev == "final" || (matches!(prev, "my" | "our") && next == "is")
            }
            "agreed" => {
                (matches!(prev, "we" | "we've" | "have" | "all" | "both" | "everyone")
                    && matches!(next, "to" | "on" | "that"))
                    || t.colon
            }
            "settled" => next == "on",
            _ => false,
        };
        if hit {
            return Some(Decision);
        }
    }
    None
}

/// Whether a value follows a preposition (or `=`) within a few words, a
/// digit-bearing value follows the object, or the clause says "instead".
fn sets_a_value(c: &[Tok], from: usize) -> bool {
    if has_word(c, &["instead"]) {
        return true;
    }
    for (i, t) in c.iter().enumerate().skip(from) {
        if matches!(
            t.cue(),
            "to" | "at"
                | "on"
                | "="
                | "by"
                | "until"
                | "from"
                | "for"
                | "in"
                | "via"
                | "with"
                | "as"
                | "into"
        ) && c.iter().skip(i + 1).take(4).any(|v| v.value)
        {
            return true;
        }
        if t.value && t.w.chars().any(|ch| ch.is_ascii_digit()) {
            return true;
        }
    }
    false
}

/// Progressive verbs that report a state of mind or a try, not a plan.
const NOT_PLANS: &[&str] = &[
    "seeing",
    "getting",
    "having",
    "trying",
    "looking",
    "thinking",
    "wondering",
    "going",
    "hoping",
    "waiting",
    "running",
    "hitting",
    "debugging",
    "investigating",
    "checking",
];

/// "we're moving house on 28 June", "I'm flying to Lisbon on Friday": a
/// plan of the speaker's, fixed to a date.
fn dated_plan(c: &[Tok]) -> Option<StatementKind> {
    let verb_at = match (w(c, 0), w(c, 1)) {
        ("we're" | "i'm", _) => 1,
        ("we" | "i", "are" | "am") => 2,
        _ => return None,
    };
    let verb = w(c, verb_at);
    if verb.len() < 5 || !verb.ends_with("ing") || is_one_of(verb, NOT_PLANS) {
        return None;
    }
    let dated = c.iter().enumerate().skip(verb_at + 1).any(|(i, t)| {
        matches!(t.cue(), "on" | "for") && {
            let next = &c[(i + 1).min(c.len())..];
            next.iter().take(3).any(|v| {
                (v.value && v.w.chars().any(|ch| ch.is_ascii_digit()))
                    || is_one_of(v.cue(), DATE_WORDS)
            })
        }
    });
    dated.then_some(Decision)
}

/// Participles that report a plan moved: "got pushed to", "was moved to".
const MOVED: &[&str] = &[
    "pushed",
    "moved",
    "postponed",
    "rescheduled",
    "changed",
    "shifted",
    "delayed",
    "bumped",
    "brought",
];

/// "the move got pushed to 5 July", "the launch was moved to Monday", "my
/// flight has been changed to LH 2040": the user reports that a plan of
/// theirs now holds another value.
fn moved_report(c: &[Tok]) -> Option<StatementKind> {
    let first = w(c, 0);
    if is_one_of(first, PRONOUNS) && !matches!(first, "it" | "that" | "this") {
        return None;
    }
    let at = c.iter().position(|t| is_one_of(t.cue(), MOVED))?;
    // "got pushed", "was moved", or a noun right before ("the release
    // moved to …"; not "it moved to the left").
    let auxiliary = at > 0
        && (matches!(
            w(c, at - 1),
            "got" | "was" | "were" | "is" | "been" | "has" | "have" | "it's" | "gets"
        ) || (at > 1 && !is_one_of(w(c, at - 1), PRONOUNS) && !is_past(w(c, at - 1))));
    let to = (at + 1..(at + 4).min(c.len())).find(|&k| w(c, k) == "to")?;
    let valued = c
        .iter()
        .skip(to + 1)
        .take(4)
        .any(|v| v.value || is_one_of(v.cue(), DATE_WORDS));
    (auxiliary && valued).then_some(Decision)
}

/// "let's go with SQLite", "we'll use Postgres", "I'll take the 9:40 train",
/// "we're switching to Vite".
fn future_choice(c: &[Tok]) -> Option<StatementKind> {
    for lead in [
        "we're going with",
        "we are going with",
        "i'm going with",
        "going with",
        "we're switching to",
        "we are switching to",
        "switching to",
        "we're moving to",
        "moving to",
        "we're sticking with",
        "sticking with",
    ] {
        if !c.is_empty() && phrase_is_at(c, 0, lead) && c.len() > lead.split(' ').count() {
            return Some(Decision);
        }
    }
    let v = match (w(c, 0), w(c, 1), w(c, 2), w(c, 3)) {
        ("let's" | "we'll" | "i'll", ..) => 1,
        ("let", "us", ..) | ("we" | "i", "will" | "shall" | "can", ..) => 2,
        ("we're" | "i'm", "going", "to", _) => 3,
        ("we", "are", "going", "to") => 4,
        _ => return None,
    };
    let verb = w(c, v);
    let next = w(c, v + 1);
    let hit = match verb {
        "go" => matches!(next, "with" | "for"),
        "take" | "have" => {
            !next.is_empty()
                && !matches!(
                    next,
                    "a" | "look"
                        | "peek"
                        | "break"
                        | "moment"
                        | "second"
                        | "minute"
                        | "stab"
                        | "guess"
                        | "care"
                        | "note"
                        | "shot"
                        | "try"
                        | "to"
                        | "it"
                        | "some"
                        | "time"
                        | "fun"
                        | "another"
                        | "that"
                )
        }
        "keep" | "stick" | "stay" => {
            next == "with"
                || sets_a_value(c, v + 1)
                // "I'll keep the shoes", not "keep it in mind" / "keep trying".
                || (verb == "keep"
                    && is_one_of(next, DETERMINERS)
                    && !matches!(next, "an" | "a" | "it" | "that" | "this")
                    && !has_word(c, &["mind", "eye", "touch", "posted"]))
        }
        "do" => sets_a_value(c, v + 1) || c.iter().skip(v + 1).any(|t| t.value),
        v_ if is_one_of(v_, CHOICE_VERBS) => !next.is_empty() && next != "it",
        v_ if is_one_of(v_, SETTING_VERBS) => sets_a_value(c, v + 1),
        _ => false,
    };
    hit.then_some(Decision)
}

const LIMIT_WORDS: &[&str] = &[
    "under", "below", "within", "max", "maximum", "most", "exceed", "less", "fewer", "least",
    "minimum", "min", "above", "over", "budget", "limit", "cap",
];

/// "use tabs", "set the timeout to 37s", "ship on Friday", "deliver to
/// Kastanienallee 12 instead", "keep the cache under 512 MB".
fn setting_imperative(c: &[Tok]) -> Option<StatementKind> {
    let verb = w(c, 0);
    if !is_one_of(verb, SETTING_VERBS) || c.len() < 2 {
        return None;
    }
    let next = w(c, 1);
    if matches!(next, "me" | "us") && !matches!(verb, "call" | "seat" | "book") {
        return None;
    }
    if c.len() == 2 && matches!(next, "it" | "that" | "this" | "them" | "up" | "out" | "on") {
        return None;
    }
    let has_digit = c
        .iter()
        .any(|t| t.value && t.w.chars().any(|ch| ch.is_ascii_digit()));
    if has_digit && has_word(c, LIMIT_WORDS) {
        return Some(Constraint);
    }
    let standing = has_word(c, &["only", "always", "never"]);
    let kind = if standing { Constraint } else { Decision };
    let hit = match verb {
        "go" => matches!(next, "with" | "for"),
        "stick" => matches!(next, "with" | "to"),
        "switch" | "migrate" | "move" => next == "to" || sets_a_value(c, 1),
        // "leave it at the back door", "put it in the mailbox".
        "leave" | "put" => {
            sets_a_value(c, 1)
                || c.iter().skip(1).any(|t| {
                    matches!(
                        t.cue(),
                        "at" | "with"
                            | "in"
                            | "by"
                            | "outside"
                            | "behind"
                            | "under"
                            | "next"
                            | "inside"
                    )
                })
        }
        // "make it Wednesday", "make the timeout 45s".
        "make" => {
            sets_a_value(c, 1)
                || c.iter().skip(1).any(|t| {
                    t.value && (t.w.chars().any(|ch| ch.is_ascii_digit()) || t.w.ends_with("day"))
                })
        }
        v if is_one_of(v, CHOICE_VERBS) => {
            !matches!(next, "it" | "this" | "that" | "the" if c.len() == 2)
        }
        _ => sets_a_value(c, 1),
    };
    hit.then_some(kind)
}

/// "I don't eat pork", "I prefer aisle seats", "I'd rather not fly",
/// "I always travel with my dog", "I'm not available on Fridays".
fn personal(c: &[Tok]) -> Option<StatementKind> {
    let (first, second, third) = (w(c, 0), w(c, 1), w(c, 2));
    match (first, second) {
        ("i" | "we", "prefer") | ("i'd" | "we'd", "prefer" | "rather") => return Some(Constraint),
        ("i" | "we", "would") if matches!(third, "prefer" | "rather") => return Some(Constraint),
        ("my" | "our", "preference") => return Some(Constraint),
        _ => {}
    }
    if has_word(c, &["preferably"]) && c.len() >= 2 {
        return Some(Constraint);
    }
    match (first, second, third) {
        // "I'd like store credit", not "I'd like to know …".
        ("i'd" | "we'd", "like", _) | ("i" | "we", "would", "like") => {
            let at = if first == "i'd" || first == "we'd" {
                2
            } else {
                3
            };
            let obj = w(c, at);
            if !obj.is_empty() && obj != "to" && !is_one_of(obj, PRONOUNS) {
                return Some(Constraint);
            }
        }
        ("i" | "we", "hate" | "dislike" | "detest", obj)
            if !obj.is_empty() && !is_one_of(obj, PRONOUNS) && obj != "to" =>
        {
            return Some(Constraint)
        }
        _ => {}
    }
    // "I must be back by Sunday", "I need to be home before 6pm".
    let deadline = matches!(
        (first, second, third),
        ("i" | "we", "must", "be") | ("i" | "we", "need" | "have", "to")
    ) && has_word(
        c,
        &["back", "home", "there", "out", "done", "finished", "ready"],
    ) && has_word(c, &["by", "before", "until"])
        && c.iter().any(|t| t.value);
    if deadline {
        return Some(Constraint);
    }
    if matches!(first, "i'm" | "i") {
        let rest = if first == "i" && second == "am" { 2 } else { 1 };
        if first == "i'm" || rest == 2 {
            let avail = matches!(
                (w(c, rest), w(c, rest + 1)),
                ("not", "available" | "home" | "around" | "in" | "free")
                    | ("unavailable" | "away" | "out", _)
            );
            if avail && c.iter().any(|t| t.value) {
                return Some(Constraint);
            }
            return None;
        }
    }
    if first != "i" {
        return None;
    }
    let (verb_at, negated) = match (second, third) {
        ("don't" | "never" | "can't" | "cannot" | "won't", _) => (2, true),
        ("do" | "will" | "can", "not") => (3, true),
        ("always" | "only" | "usually" | "strictly", _) => (2, false),
        _ => return None,
    };
    let verb = w(c, verb_at);
    if !is_one_of(verb, PERSONAL_VERBS) || c.len() <= verb_at + 1 {
        return None;
    }
    if negated && verb == "want" && w(c, verb_at + 1) == "to" {
        let what = w(c, verb_at + 2);
        if matches!(
            what,
            "bother"
                | "be"
                | "sound"
                | "waste"
                | "trouble"
                | "interrupt"
                | "overstep"
                | "rush"
                | "seem"
                | "make"
        ) {
            return None;
        }
    }
    Some(Constraint)
}

/// "we don't deploy on Fridays", "we never merge without review", "we
/// always squash", "we only support Linux".
fn we_policy(c: &[Tok]) -> Option<StatementKind> {
    if !matches!(w(c, 0), "we" | "we'll") {
        return None;
    }
    let mut v = match (w(c, 1), w(c, 2)) {
        ("don't" | "never" | "always" | "only" | "won't" | "can't" | "cannot", _) => 2,
        ("do" | "will" | "can", "not" | "never" | "always" | "only") => 3,
        _ => return None,
    };
    while matches!(
        w(c, v),
        "ever" | "really" | "ever," | "need" | "to" | "want"
    ) && v < c.len()
    {
        if matches!(w(c, v), "need" | "want") && w(c, v + 1) != "to" {
            break;
        }
        v += 1;
    }
    let verb = w(c, v);
    if verb.is_empty()
        || is_one_of(verb, CASUAL_VERBS)
        || is_past(verb)
        || is_one_of(verb, PRONOUNS)
    {
        return None;
    }
    Some(Constraint)
}

/// "the API must stay backwards compatible", "invoices have to go out by
/// the 5th", "you must not touch the billing schema", "refunds are not
/// allowed after 30 days" — but not "it must be the cache".
fn subject_modal(c: &[Tok]) -> Option<StatementKind> {
    for m in 1..c.len().min(9) {
        let Some((strong, len, needs_np)) = modal_at(c, m) else {
            continue;
        };
        let subject = &c[..m];
        let first = w(subject, 0);
        if is_one_of(first, THIRD_PARTY) || matches!(first, "i" | "i'm") {
            return None;
        }
        if subject.iter().any(|t| {
            matches!(
                t.cue(),
                "if" | "whether" | "when" | "unless" | "because" | "once" | "until" | "than"
            )
        }) {
            return None;
        }
        let pronoun = subject.len() == 1 && is_one_of(first, PRONOUNS);
        let weak_pronoun = pronoun
            && matches!(
                first,
                "it" | "this" | "that" | "there" | "everything" | "something"
            );
        let v = m + len;
        let verb = w(c, v);
        let after = w(c, v + 1);
        // "it must be encrypted" binds; "it must be the cache" does not.
        let passive = verb == "be" && is_participle(after);
        if (weak_pronoun && !strong && !passive) || (needs_np && pronoun) {
            return None;
        }
        if verb == "be" {
            let epistemic = is_one_of(after, DETERMINERS)
                || is_one_of(after, PRONOUNS)
                || after.ends_with("ing")
                || matches!(
                    after,
                    "because"
                        | "why"
                        | "from"
                        | "so"
                        | "really"
                        | "just"
                        | "right"
                        | "wrong"
                        | "it"
                        | "fine"
                        | "ok"
                        | "okay"
                        | "tired"
                        | "busy"
                        | "here"
                        | "there"
                        | "mistaken"
                        | "confused"
                        | "nice"
                        | "broken"
                        | "down"
                        | "true"
                        | "false"
                        | "somewhere"
                        | "something"
                        | "someone"
                        | "off"
                        | "joking"
                        | "kidding"
                        | "crazy"
                        | "wrong,"
                        | "sure"
                        | "new"
                );
            let pronoun_adjective = pronoun
                && !is_participle(after)
                && !c.get(v + 1).is_some_and(|t| t.value)
                && !is_one_of(after, LIMIT_WORDS)
                && !matches!(
                    after,
                    "in" | "at"
                        | "on"
                        | "under"
                        | "below"
                        | "within"
                        | "less"
                        | "more"
                        | "no"
                        | "backwards"
                        | "compatible"
                );
            if epistemic || pronoun_adjective {
                return None;
            }
        }
        if verb == "have" && (after == "been" || is_participle(after)) {
            return None;
        }
        if verb.is_empty() {
            return None;
        }
        return Some(Constraint);
    }
    None
}

/// A modal phrase at `m`: (strong, words, needs a noun-phrase subject).
fn modal_at(c: &[Tok], m: usize) -> Option<(bool, usize, bool)> {
    let (a, b, d) = (w(c, m), w(c, m + 1), w(c, m + 2));
    Some(match (a, b) {
        ("must", "not" | "never" | "always" | "only") => (true, 2, false),
        ("must", _) => (false, 1, false),
        ("mustn't", _) => (true, 1, false),
        ("should", "never" | "always" | "only") => (false, 2, false),
        ("should", "not") | ("shouldn't", _) => (false, if a == "should" { 2 } else { 1 }, false),
        ("has" | "have", "to") => (true, 2, false),
        ("needs" | "need", "to") => (false, 2, true),
        ("can't" | "cannot", _) => (false, 1, false),
        ("can" | "may", "only") => (true, 2, false),
        ("may", "not") => (true, 2, false),
        ("will", "never") | ("won't", "ever") => (false, 2, true),
        ("is" | "are" | "isn't" | "aren't", "not") if matches!(d, "allowed" | "permitted") => {
            (true, 3, false)
        }
        ("isn't" | "aren't", "allowed" | "permitted") => (true, 2, false),
        (
            "is" | "are",
            "required" | "mandatory" | "forbidden" | "prohibited" | "non-negotiable" | "off-limits",
        ) => (true, 2, false),
        ("is" | "are", "a") if d == "must" => (true, 3, false),
        _ => return None,
    })
}

/// Nouns that name a setting: "the max batch size is 500" sets it.
const SETTING_NOUNS: &[&str] = &[
    "timeout",
    "limit",
    "port",
    "deadline",
    "budget",
    "region",
    "address",
    "threshold",
    "interval",
    "delay",
    "ttl",
    "quota",
    "cap",
    "maximum",
    "max",
    "minimum",
    "min",
    "default",
    "retries",
    "concurrency",
    "workers",
    "replicas",
    "currency",
    "language",
    "locale",
    "timezone",
    "plan",
    "tier",
    "branch",
    "retention",
    "frequency",
    "schedule",
    "cadence",
    "recipient",
];

/// "my address is now Friedrichstraße 5", "the timeout should be 45s", "the
/// release will be on Monday", "the max batch size is 500", "my new phone
/// number is +49 170 1234567".
fn copula_value(c: &[Tok]) -> Option<StatementKind> {
    let first = w(c, 0);
    if is_one_of(first, PRONOUNS)
        || is_one_of(first, THIRD_PARTY)
        || matches!(first, "i'm" | "it's" | "there's")
    {
        return None;
    }
    for m in 1..c.len().min(7) {
        let value_follows = |from: usize| c.iter().skip(from).take(4).any(|t| t.value);
        let np = &c[..m];
        let names_a_setting = np.last().is_some_and(|t| is_one_of(t.cue(), SETTING_NOUNS))
            || np.iter().any(|t| {
                matches!(
                    t.cue(),
                    "new"
                        | "updated"
                        | "default"
                        | "max"
                        | "maximum"
                        | "min"
                        | "minimum"
                        | "target"
                )
            });
        match (w(c, m), w(c, m + 1)) {
            ("is" | "are", "now") if value_follows(m + 2) => return Some(Decision),
            ("is" | "are" | "=", _) if names_a_setting && value_follows(m + 1) => {
                return Some(Decision)
            }
            ("should" | "will", "be") => {
                let after = w(c, m + 2);
                let epistemic = is_one_of(after, DETERMINERS)
                    || after.ends_with("ing")
                    || matches!(
                        after,
                        "fine" | "ok" | "okay" | "done" | "ready" | "back" | "faster" | "slower"
                    );
                return (!epistemic && value_follows(m + 2)).then_some(Decision);
            }
            ("is" | "are" | "was" | "were" | "has" | "have" | "had", _) => return None,
            _ => {}
        }
    }
    None
}

/// "my budget is 300 EUR", "no more than 2 stops", "under 500 EUR please".
fn limits(c: &[Tok]) -> Option<StatementKind> {
    let has_number = c
        .iter()
        .any(|t| t.value && t.w.chars().any(|ch| ch.is_ascii_digit()));
    if !has_number || c.iter().any(|t| is_past(t.cue()) && t.cue() != "limited") {
        return None;
    }
    let first = w(c, 0);
    if is_one_of(first, THIRD_PARTY) || matches!(first, "it" | "this" | "that" | "there" | "i") {
        return None;
    }
    let opens = matches!(
        (w(c, 0), w(c, 1), w(c, 2)),
        ("under" | "below" | "max" | "maximum" | "within", ..)
            | ("no" | "not", "more", "than")
            | ("at", "most" | "least", _)
            | ("less" | "fewer", "than", _)
            | ("up", "to", _)
            | ("nothing", "over" | "above" | "more", _)
    );
    let names_a_limit = c
        .iter()
        .any(|t| matches!(t.cue(), "budget" | "limit" | "cap" | "ceiling"))
        && has_word(c, &["is", "of", "max", "maximum", "at"]);
    // A request that bounds what it asks for: "find me a hotel under
    // 150 EUR a night", "I need a flight for at most 300 EUR".
    let requests = matches!(
        w(c, 0),
        "find"
            | "get"
            | "book"
            | "look"
            | "search"
            | "show"
            | "pick"
            | "buy"
            | "order"
            | "reserve"
            | "plan"
    ) || matches!(
        (w(c, 0), w(c, 1)),
        ("i" | "we", "need" | "want") | ("looking", "for")
    );
    let bounded = c.iter().enumerate().any(|(i, t)| {
        let bound = matches!(t.cue(), "under" | "below" | "max" | "maximum" | "within")
            || (t.cue() == "most" && i > 0 && w(c, i - 1) == "at")
            || (t.cue() == "than" && i > 0 && matches!(w(c, i - 1), "more" | "less"));
        bound && c.get(i + 1).is_some_and(|v| v.value)
    });
    (opens || names_a_limit || (requests && bounded)).then_some(Constraint)
}

/// "aisle seats only", "EU region only, please".
fn short_only(c: &[Tok]) -> Option<StatementKind> {
    let mut end = c.len();
    while end > 0 && matches!(w(c, end - 1), "please" | "thanks" | "thank" | "you") {
        end -= 1;
    }
    let ok = (2..=5).contains(&end)
        && w(c, end - 1) == "only"
        && !is_one_of(w(c, 0), PRONOUNS)
        && !is_one_of(w(c, 0), THIRD_PARTY)
        && !c[..end].iter().any(|t| is_past(t.cue()));
    ok.then_some(Constraint)
}

/// "Monday instead", "let's meet at the café instead".
fn instead(c: &[Tok]) -> Option<StatementKind> {
    if !has_word(c, &["instead"]) || c.len() < 2 {
        return None;
    }
    let first = w(c, 0);
    if is_one_of(first, THIRD_PARTY)
        || matches!(
            first,
            "it" | "this" | "that" | "there" | "you" | "i" | "it's" | "i've" | "we've"
        )
        || c.iter().any(|t| is_past(t.cue()))
    {
        return None;
    }
    Some(Decision)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(s: &str) -> Option<StatementKind> {
        classify(s)
    }

    #[test]
    fn decisions_across_domains() {
        for s in [
            "We're moving house on 28 June.",
            "I'm flying to Lisbon on Friday.",
            "The move got pushed to 5 July, can you tell the movers?",
            "The launch was moved to Monday.",
            "We'll go with SQLite.",
            "Let's use Postgres for the ledger.",
            "Use Postgres for the ledger.",
            "scrap Postgres, we'll go with SQLite instead",
            "We decided to round half-even.",
            "Decision: the API stays on v2.",
            "Set the request timeout to 37s.",
            "make the timeout 45s",
            "Ship on Friday.",
            "actually ship on Monday",
            "Please deliver to Kastanienallee 12.",
            "please deliver to my office at Friedrichstraße 5 instead",
            "billing.invoice_v2_fx_cache is off",
            "Turn off the nightly backups.",
            "Disable 2FA for the staging account.",
            "Cancel order 4411.",
            "I'll take the 9:40 train.",
            "Let's do Monday instead.",
            "We're switching to Vite.",
            "Could you deliver it to my office instead?",
            "I'd like to change my delivery address to Hauptstraße 3.",
            "We no longer need the Redis cache.",
            "I no longer live at Kastanienallee 12.",
            "Stop using the legacy endpoint.",
            "My address is now Friedrichstraße 5.",
            "Book the window seat.",
            "Switch to the annual plan.",
            "we agreed on weekly releases",
            "Reply in German.",
            "Actually, make it Wednesday.",
            "The max batch size is 500.",
            "My new phone number is +49 170 1234567.",
            "Let's do the Lisbon option.",
            "Pin serde to 1.0.197.",
            "Use rustls, not OpenSSL.",
            "Please send all invoices to billing@example.com.",
            "We agreed to keep the public API frozen until v2.0.0.",
            "Leave it at the back door.",
            "Actually, I'll keep the shoes.",
            "Forget the shoes.",
            "Switch the CI to Node 20.",
            "Forget about the Hilton.",
        ] {
            assert_eq!(kind(s), Some(Decision), "{s}");
        }
    }

    #[test]
    fn constraints_across_domains() {
        for s in [
            "To the original card, not store credit.",
            "Aisle seat, not window.",
            "By email, not phone.",
            "Never push to main.",
            "Don't use emojis in commit messages.",
            "Do not deploy on Fridays.",
            "We must not touch the billing schema.",
            "The cache must be under 512 MB.",
            "Always run the tests before committing.",
            "Only use the EU region.",
            "I'm vegetarian.",
            "I'm allergic to peanuts.",
            "My daughter is coeliac.",
            "I have a severe nut allergy.",
            "I don't eat pork.",
            "I prefer aisle seats.",
            "I'd rather not fly overnight.",
            "We never merge without a review.",
            "The API has to stay backwards compatible.",
            "Refunds are not allowed after 30 days.",
            "My budget is 300 EUR.",
            "No more than 2 stops.",
            "Aisle seats only, please.",
            "From now on, reply in English.",
            "Avoid the A9 motorway.",
            "please never call me before 9am",
            "Don't forget to CC Anna on every invoice.",
            "you must use the staging database for experiments",
            "It must be encrypted at rest.",
            "I can't eat gluten.",
            "I'm not available on Fridays.",
            "Keep the cache under 512 MB.",
            "Make sure the migration is idempotent.",
            "No emojis.",
            "No red-eye flights, please.",
            "I can't make it on Friday.",
            "We have to support Python 3.8.",
            "I'm not home on Tuesdays.",
            "I hate layovers.",
            "Instead of the refund, I'd like store credit.",
            "Please find me a hotel under 150 EUR a night.",
            "I must be back by Sunday evening.",
            "It's important that the migration is reversible.",
        ] {
            assert_eq!(kind(s), Some(Constraint), "{s}");
        }
    }

    #[test]
    fn casual_remarks_questions_hypotheticals_and_reports_are_not_statements() {
        for s in [
            "Good, not great.",
            "We're seeing timeouts on Monday.",
            "I'm thinking of moving on Friday.",
            "Can you check whether it got moved?",
            "It moved to the left.",
            "It's the cache, not the database.",
            "That was Tuesday, not Monday.",
            "Not yet, sorry.",
            "Soon, not yet.",
            "The tests passed, not the lints.",
            "never mind, found it",
            "Never mind.",
            "nevermind, it works now",
            "don't worry about it",
            "Don't worry, it's fine.",
            "I never thought of that.",
            "must be the cache",
            "It must be the cache.",
            "That must have been the old config.",
            "You must be joking.",
            "should we never cache it?",
            "Should we use Postgres?",
            "Do we always need a review?",
            "What if we never deploy on Fridays?",
            "If we used Postgres we'd need a migration.",
            "Maybe we should use SQLite.",
            "Perhaps never use the cache.",
            "The docs say you must restart the server.",
            "He said we must not deploy.",
            "The error says \"must not be null\".",
            "`never` is a keyword in TypeScript.",
            "I never knew that.",
            "Don't know, to be honest.",
            "No worries!",
            "Thanks, that works.",
            "Always happy to help.",
            "Only one question left.",
            "It only took a minute.",
            "Something is off with the numbers.",
            "The count is off by one.",
            "I don't know what happened.",
            "We don't have a staging environment yet.",
            "It never works on the first try.",
            "I must say, that was quick.",
            "Can you check whether we must use TLS?",
            "I wonder whether we should always cache.",
            "The driver went to the wrong address instead.",
            "I don't want to bother you.",
            "let's see what happens",
            "Let's take a look.",
            "I'll have a look tomorrow.",
            "we decided nothing yet? no",
            "fn main() { never(); }",
            "Found it, never mind.",
            "It shouldn't take long.",
            "The meeting is on Friday.",
            "That should never happen.",
            "It should never crash like that.",
            "Never seen that before.",
            "No idea.",
            "No luck so far.",
            "No response from the courier yet.",
            "Forget the last message.",
            "Wifi is off again.",
            "The power is off in my flat.",
            "I'm off tomorrow.",
            "I always forget my password.",
            "I never received the confirmation email.",
            "I can't log in.",
            "I don't have the receipt anymore.",
            "Only if it's free.",
            "Always the same problem with you guys.",
            "The order number is 88213.",
            "I was charged twice for order 88213.",
            "We must have missed something.",
            "You should never have done that.",
            "Please run cargo test and tell me what fails.",
            "Stop, that's wrong.",
            "Don't hesitate to contact me.",
            "Cancel that.",
            "Can you refund 4.50 EUR to my Visa card?",
            "Could you send me the invoice for order 88213?",
            "The order number is 88213.",
            "My flight was at 9:40.",
            "The build time is 45s on my laptop, which is odd.",
            "I'd like to know where my parcel is.",
            "I'd like it if you were faster.",
            "I hate it when this happens.",
            "Only the first test fails.",
            "The only problem is the timeout.",
            "Why does it always fail on CI?",
            "You never told me that.",
            "I guess we must support IE11.",
            "We should use Postgres.",
            "It took under 5 minutes.",
        ] {
            assert_eq!(kind(s), None, "{s}");
        }
    }
}
