//! What a statement is about, so a later one can replace it.
//!
//! A statement has a *key* when it sets something to a value:
//! - "set the request timeout to 37s", "make the timeout 45s", "the timeout
//!   must be 45s": the key is the words of the thing set (`request
//!   timeout`, `timeout`), anchored on its head noun (`timeout`);
//! - "ship on Friday", "deliver to Kastanienallee 12": the key is the verb,
//!   its object and the preposition (`ship … on`), anchored on the verb;
//!   delivering, shipping or mailing *to* somewhere and a "delivery address"
//!   share the key `address`;
//! - "use Postgres for the ledger": the key is what the choice is for
//!   (`ledger`), anchored on the choice; a bare "use Postgres" has none;
//! - "billing.fx_cache is off", "disable 2FA": the key is what is switched,
//!   the value `on` or `off`.
//!
//! Two keys are the same when their anchors are equal and the words of one
//! are all among the words of the other (`timeout` ⊆ `request timeout`, but
//! `connect timeout` and `request timeout` differ). A statement also
//! *drops* something when it says so ("scrap Postgres", "no longer need the
//! Redis cache", "instead of Postgres").
//!
//! A statement that changes a value without naming the key ("actually, make
//! it 45s", "Monday instead") is *anaphoric*: it refers to the latest keyed
//! statement whose value has the same shape (a duration, a time, a date, an
//! amount, a size…; a bare name only between two choices).

use crate::text::is_one_of;
use std::collections::BTreeSet;

use super::words::{clauses, is_content, strip_fillers, tokens, Tok, DATE_WORDS};

/// The parsed subject of one statement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Subject {
    /// Words naming what is set; empty when the statement sets no key.
    pub(crate) key: BTreeSet<String>,
    /// The key's head noun, or its verb, or `use` for a choice.
    pub(crate) anchor: Option<String>,
    /// What the key is set to.
    pub(crate) values: BTreeSet<String>,
    /// What the statement says is no longer wanted.
    pub(crate) dropped: BTreeSet<String>,
    /// Every content word of the statement.
    pub(crate) words: BTreeSet<String>,
    /// Shapes of its values (`duration`, `time`, `date`, `money`, …).
    pub(crate) shapes: BTreeSet<&'static str>,
    /// It changes a value without naming the key ("make it 45s").
    pub(crate) anaphoric: bool,
    /// It forbids rather than chooses ("never …", "don't …").
    pub(crate) prohibits: bool,
}

/// Verbs that set a key named by their object ("set X to V").
const SET_VERBS: &[&str] = &[
    "set",
    "change",
    "make",
    "bump",
    "raise",
    "lower",
    "increase",
    "decrease",
    "reduce",
    "update",
    "keep",
    "cap",
    "limit",
    "move",
    "push",
    "extend",
    "shorten",
    "delay",
    "postpone",
    "reschedule",
    "rename",
];

/// Verbs that choose a value for what follows "for" / "as" ("use Postgres
/// for the ledger").
const CHOICE_VERBS: &[&str] = &[
    "use", "pick", "choose", "select", "adopt", "prefer", "target", "take", "have", "book",
    "reserve", "default",
];

/// Verbs whose preposition names the key ("ship on", "deliver to").
const ACTION_VERBS: &[&str] = &[
    "ship", "deliver", "send", "release", "deploy", "launch", "meet", "schedule", "fly", "travel",
    "leave", "arrive", "pay", "bill", "invoice", "charge", "refund", "call", "email", "contact",
    "mail", "post", "return", "route", "store", "host", "publish", "reply", "respond", "answer",
    "address", "start", "hold", "write", "format", "put", "seat", "stay", "run", "forward",
];

/// Verbs of physical delivery: their destination is the "address".
const DELIVERY_VERBS: &[&str] = &["deliver", "ship", "mail", "post", "forward"];

const PREPOSITIONS: &[&str] = &[
    "on", "to", "at", "by", "from", "in", "for", "via", "with", "before", "after", "until", "into",
];

/// Words in front of the verb that do not change what is set.
const LEAD_INS: &[&str] = &[
    "let's", "we'll", "i'll", "please", "just", "always", "never", "only", "don't", "we", "i",
    "will", "shall", "should", "must", "can", "you", "to", "like", "want", "need", "i'd", "could",
    "would", "going",
];

impl Subject {
    /// Parses the subject of a statement's text.
    pub(crate) fn of(text: &str) -> Subject {
        let toks = tokens(text);
        let mut subject = Subject {
            words: toks
                .iter()
                .map(|t| t.w.clone())
                .filter(|w| is_content(w))
                .collect(),
            ..Subject::default()
        };
        for clause in clauses(&toks) {
            let c = strip_fillers(clause);
            subject.dropped.extend(dropped(c));
            if subject.anchor.is_none() {
                if let Some((key, anchor, values)) = keyed(c) {
                    subject.key = key;
                    subject.anchor = Some(anchor);
                    subject.values = values;
                }
            }
        }
        // "Use MySQL instead of Postgres": what is dropped is not chosen.
        let dropped = &subject.dropped;
        subject.values.retain(|v| !dropped.contains(v));
        if !subject.is_keyed() {
            let refers = toks.iter().enumerate().any(|(i, t)| {
                t.w == "instead"
                    || (matches!(t.w.as_str(), "it" | "that" | "this")
                        && i > 0
                        && is_one_of(toks[i - 1].w.as_str(), SET_VERBS))
            });
            let values: BTreeSet<String> = toks
                .iter()
                .filter(|t| t.value && !dropped.contains(&t.w))
                .map(|t| t.w.clone())
                .collect();
            if refers && !values.is_empty() {
                subject.anaphoric = true;
                if subject.values.is_empty() {
                    subject.values = values;
                }
            }
        }
        subject.shapes = shapes(&toks, &subject.values);
        subject.prohibits = toks.iter().any(|t| {
            matches!(
                t.cue(),
                "never"
                    | "don't"
                    | "not"
                    | "no"
                    | "avoid"
                    | "mustn't"
                    | "can't"
                    | "cannot"
                    | "won't"
                    | "shouldn't"
                    | "forbidden"
                    | "prohibited"
            )
        });
        subject
    }

    /// Whether this anaphoric statement can refer to `target`: a keyed
    /// statement whose values share a shape with its own (names only
    /// between two choices: "go with SQLite instead" after "use Postgres
    /// for the ledger").
    pub(crate) fn can_refer_to(&self, target: &Subject) -> bool {
        if !self.anaphoric || !target.is_keyed() || target.prohibits || self.values == target.values
        {
            return false;
        }
        let both_choices =
            self.anchor.as_deref() == Some("use") && target.anchor.as_deref() == Some("use");
        self.shapes
            .intersection(&target.shapes)
            .any(|shape| *shape != "name" || both_choices)
    }

    /// Whether the statement names a key another statement can re-set.
    pub(crate) fn is_keyed(&self) -> bool {
        self.anchor.is_some() && !self.key.is_empty() && !self.values.is_empty()
    }

    /// Same anchor, and one key's words all among the other's.
    pub(crate) fn same_key(&self, other: &Subject) -> bool {
        self.is_keyed()
            && other.is_keyed()
            && self.anchor == other.anchor
            && (self.key.is_subset(&other.key) || other.key.is_subset(&self.key))
    }
}

const DURATION_UNITS: &[&str] = &[
    "ms", "s", "sec", "secs", "second", "seconds", "min", "mins", "minute", "minutes", "h", "hr",
    "hrs", "hour", "hours", "d", "day", "days", "week", "weeks",
];
const SIZE_UNITS: &[&str] = &["kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib"];
const MONEY_UNITS: &[&str] = &[
    "eur", "usd", "gbp", "chf", "euro", "euros", "dollar", "dollars", "pounds", "€", "$", "£",
];

/// The shapes of a statement's values: a number with its unit (written in
/// it or in the next word), a time, a date, or else a name.
fn shapes(toks: &[Tok], values: &BTreeSet<String>) -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    for (i, t) in toks.iter().enumerate() {
        if !values.contains(&t.w) {
            continue;
        }
        let w = t.w.as_str();
        let digits = w.trim_start_matches(['€', '$', '£']);
        let number_end = digits
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
            .unwrap_or(digits.len());
        let iso_date = w.matches('-').count() == 2 && w.starts_with(|c: char| c.is_ascii_digit());
        let shape = if is_one_of(w, DATE_WORDS) || iso_date {
            "date"
        } else if number_end == 0 {
            "name"
        } else {
            let suffix = &digits[number_end..];
            let next = toks.get(i + 1).map_or("", |t| t.w.as_str());
            let unit = if suffix.is_empty() { next } else { suffix };
            if w.starts_with(['€', '$', '£']) || is_one_of(unit, MONEY_UNITS) {
                "money"
            } else if suffix.starts_with(':') || matches!(unit, "am" | "pm" | "o'clock") {
                "time"
            } else if is_one_of(unit, DURATION_UNITS) {
                "duration"
            } else if is_one_of(unit, SIZE_UNITS) {
                "size"
            } else if unit == "%" {
                "percent"
            } else {
                "number"
            }
        };
        out.insert(shape);
    }
    out
}

fn w(c: &[Tok], i: usize) -> &str {
    c.get(i).map_or("", |t| t.w.as_str())
}

/// Content words of `c`, optionally only values or only non-values.
fn content(c: &[Tok], values: Option<bool>) -> BTreeSet<String> {
    c.iter()
        .filter(|t| is_content(&t.w) && values.is_none_or(|v| t.value == v))
        .map(|t| t.w.clone())
        .collect()
}

/// Where the verb of a clause is, past lead-ins ("let's", "we'll", "please
/// never", "I'd like to").
fn verb_at(c: &[Tok]) -> usize {
    let mut i = 0;
    while i < c.len() && is_one_of(w(c, i), LEAD_INS) {
        i += 1;
    }
    if matches!(w(c, i), "do") && w(c, i + 1) == "not" {
        i += 2;
    }
    i
}

type Keyed = (BTreeSet<String>, String, BTreeSet<String>);

/// The key, its anchor and its values, if the clause sets one.
fn keyed(c: &[Tok]) -> Option<Keyed> {
    toggle_key(c)
        .or_else(|| set_key(c))
        .or_else(|| choice_key(c))
        .or_else(|| action_key(c))
        .or_else(|| copula_key(c))
}

fn noun_key(np: &[Tok]) -> Option<(BTreeSet<String>, String)> {
    let words: Vec<&Tok> = np.iter().filter(|t| is_content(&t.w)).collect();
    let anchor = words.last()?.w.clone();
    Some((words.iter().map(|t| t.w.clone()).collect(), anchor))
}

fn on_off(word: &str) -> Option<&'static str> {
    match word {
        "off" | "disabled" | "deactivated" => Some("off"),
        "on" | "enabled" | "activated" => Some("on"),
        _ => None,
    }
}

/// "turn off X", "turn X off", "disable X", "keep X off", "X is off".
fn toggle_key(c: &[Tok]) -> Option<Keyed> {
    let v = verb_at(c);
    let rest = c.get(v + 1..).unwrap_or(&[]);
    let strip = |np: &[Tok]| -> Vec<Tok> {
        np.iter()
            .filter(|t| {
                on_off(&t.w).is_none()
                    && !matches!(
                        t.w.as_str(),
                        "back" | "again" | "now" | "permanently" | "for" | "until"
                    )
            })
            .cloned()
            .collect()
    };
    let state = match w(c, v) {
        "turn" | "switch" | "flip" | "keep" | "leave" => rest.iter().find_map(|t| on_off(&t.w)),
        "disable" | "deactivate" | "mute" => Some("off"),
        "enable" | "activate" | "unmute" => Some("on"),
        _ => None,
    };
    if let Some(state) = state {
        let np = strip(rest);
        let (key, anchor) = noun_key(&np)?;
        return Some((key, anchor, BTreeSet::from([state.to_owned()])));
    }
    // NP (is|are|stays|…) … (off|on|disabled|enabled) at the clause end.
    let (at, state) = c
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, t)| on_off(&t.w).map(|s| (i, s)))?;
    let copula = c[..at].iter().rposition(|t| {
        matches!(
            t.w.as_str(),
            "is" | "are" | "stays" | "remains" | "stay" | "remain" | "be"
        )
    })?;
    let np_end = c[..copula]
        .iter()
        .rposition(|t| !matches!(t.w.as_str(), "must" | "should" | "will"))
        .map_or(0, |i| i + 1);
    let trailing_ok = c.get(at + 1..).is_none_or(|tail| {
        tail.iter().all(|t| {
            matches!(
                t.w.as_str(),
                "now" | "again" | "for" | "until" | "permanently" | "everywhere" | "globally"
            ) || t.value
        })
    });
    if !trailing_ok {
        return None;
    }
    let (key, anchor) = noun_key(&c[..np_end])?;
    Some((key, anchor, BTreeSet::from([state.to_owned()])))
}

/// "set the request timeout to 37s", "make the timeout 45s".
fn set_key(c: &[Tok]) -> Option<Keyed> {
    let v = verb_at(c);
    if !is_one_of(w(c, v), SET_VERBS) {
        return None;
    }
    let rest = c.get(v + 1..)?;
    let split = rest.iter().position(|t| {
        matches!(
            t.w.as_str(),
            "to" | "at" | "=" | "under" | "below" | "within"
        ) || t.value
    })?;
    let value_from = if rest[split].value { split } else { split + 1 };
    let values = content(rest.get(value_from..)?, None);
    if values.is_empty() {
        return None;
    }
    let (key, anchor) = noun_key(&rest[..split]).unwrap_or_default();
    Some((key, anchor, values))
}

/// "use Postgres for the ledger", "go with SQLite", "switch to Vite".
fn choice_key(c: &[Tok]) -> Option<Keyed> {
    let v = verb_at(c);
    let mut obj = v + 1;
    let verb = w(c, v);
    let choice = match (verb, w(c, v + 1)) {
        ("go", "with" | "for")
        | ("stick", "with" | "to")
        | ("switch" | "move" | "migrate", "to") => {
            obj += 1;
            true
        }
        ("switching" | "moving" | "going" | "sticking", "to" | "with") => {
            obj += 1;
            true
        }
        _ => is_one_of(verb, CHOICE_VERBS),
    };
    if !choice {
        return None;
    }
    let rest = c.get(obj..)?;
    let stop = rest
        .iter()
        .position(|t| {
            matches!(
                t.w.as_str(),
                "for" | "as" | "in" | "on" | "at" | "when" | "instead" | "rather"
            )
        })
        .unwrap_or(rest.len());
    let mut values = content(&rest[..stop], None);
    let has_purpose = rest
        .get(stop)
        .is_some_and(|t| !matches!(t.w.as_str(), "instead" | "rather"));
    let purpose = if has_purpose {
        rest.get(stop + 1..).unwrap_or(&[])
    } else {
        &[]
    };
    values.extend(content(purpose, Some(true)));
    if values.is_empty() {
        return None;
    }
    let key = content(purpose, Some(false));
    Some((key, "use".to_owned(), values))
}

/// "ship on Friday", "deliver to Kastanienallee 12", "pay with PayPal".
fn action_key(c: &[Tok]) -> Option<Keyed> {
    let v = verb_at(c);
    let verb = w(c, v);
    if !is_one_of(verb, ACTION_VERBS) {
        return None;
    }
    let rest = c.get(v + 1..)?;
    let prep = rest
        .iter()
        .position(|t| is_one_of(t.w.as_str(), PREPOSITIONS))?;
    let values = content(&rest[prep + 1..], None);
    if values.is_empty() || !rest[prep + 1..].iter().any(|t| t.value) {
        return None;
    }
    let prep_word = rest[prep].w.as_str();
    if prep_word == "to" && is_one_of(verb, DELIVERY_VERBS) {
        return Some((
            BTreeSet::from(["address".to_owned()]),
            "address".to_owned(),
            values,
        ));
    }
    let mut key = content(&rest[..prep], Some(false));
    key.insert(verb.to_owned());
    key.insert(format!("({prep_word})"));
    Some((key, verb.to_owned(), values))
}

/// "the timeout must be 45s", "my address is now Friedrichstraße 5".
fn copula_key(c: &[Tok]) -> Option<Keyed> {
    let at = c.iter().position(|t| {
        matches!(
            t.w.as_str(),
            "is" | "are" | "=" | "be" | "stays" | "remains"
        ) || t.colon
    })?;
    let np_end = if c[at].colon { at + 1 } else { at };
    let np: Vec<Tok> = c[..np_end]
        .iter()
        .filter(|t| {
            !matches!(
                t.w.as_str(),
                "must" | "should" | "will" | "has" | "needs" | "to"
            )
        })
        .cloned()
        .collect();
    if np.len() > 6 {
        return None;
    }
    let value_part = c.get(at + 1..)?;
    if !value_part.iter().any(|t| t.value) {
        return None;
    }
    let values = content(value_part, None);
    let (key, anchor) = noun_key(&np)?;
    if key
        .iter()
        .any(|k| matches!(k.as_str(), "it" | "this" | "that"))
    {
        return None;
    }
    Some((key, anchor, values))
}

/// What a clause says is no longer wanted.
fn dropped(c: &[Tok]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for i in 0..c.len() {
        let start = match (w(c, i), w(c, i + 1), w(c, i + 2)) {
            ("scrap" | "ditch" | "abandon" | "cancel", ..) => Some(i + 1),
            ("drop", next, _) if !matches!(next, "off" | "by" | "in" | "me" | "us") => Some(i + 1),
            ("forget", "about", _) => Some(i + 2),
            ("get", "rid", "of") => Some(i + 3),
            ("stop", "using" | "offering" | "sending", _) => Some(i + 2),
            ("no", "more", _) => Some(i + 2),
            ("no", "longer", "use" | "need" | "want" | "support" | "using" | "offer") => {
                Some(i + 3)
            }
            ("instead", "of", _) | ("rather", "than", _) => Some(i + 2),
            ("replace", ..) => Some(i + 1),
            (
                "switch" | "switching" | "move" | "moving" | "migrate" | "migrating",
                "from" | "off",
                _,
            ) => Some(i + 2),
            ("away", "from", _) => Some(i + 2),
            ("don't" | "not", "use" | "need" | "want", _) if c.iter().any(|t| t.w == "anymore") => {
                Some(i + 2)
            }
            _ => None,
        };
        let Some(mut at) = start else { continue };
        while matches!(
            w(c, at),
            "the" | "a" | "an" | "my" | "our" | "your" | "using"
        ) {
            at += 1;
        }
        for t in c.iter().skip(at).take(4) {
            if is_one_of(t.w.as_str(), PREPOSITIONS)
                || matches!(
                    t.w.as_str(),
                    "and" | "but" | "instead" | "anymore" | "entirely" | "altogether"
                )
            {
                break;
            }
            if is_content(&t.w) {
                out.insert(t.w.clone());
            }
            if t.brk {
                break;
            }
        }
    }
    out.retain(|w| !matches!(w.as_str(), "it" | "that" | "this" | "them" | "everything"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(words: &[&str]) -> BTreeSet<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn set_to_keys_on_the_head_noun() {
        let a = Subject::of("Set the request timeout to 37s.");
        assert_eq!(a.key, set(&["request", "timeout"]));
        assert_eq!(a.anchor.as_deref(), Some("timeout"));
        assert_eq!(a.values, set(&["37s"]));
        let b = Subject::of("make the timeout 45s");
        assert_eq!(b.key, set(&["timeout"]));
        assert_eq!(b.values, set(&["45s"]));
        assert!(a.same_key(&b));
        let c = Subject::of("Set the connect timeout to 5s.");
        assert!(!a.same_key(&c), "different timeouts");
    }

    #[test]
    fn action_keys_carry_verb_and_preposition() {
        let a = Subject::of("Ship on Friday.");
        let b = Subject::of("actually ship on Monday");
        assert!(a.same_key(&b));
        assert_eq!(b.values, set(&["monday"]));
        let c = Subject::of("Ship to Berlin.");
        assert!(!a.same_key(&c));
    }

    #[test]
    fn delivery_destinations_share_the_address_key() {
        let a = Subject::of("Please deliver to Kastanienallee 12.");
        let b = Subject::of("please deliver to my office at Friedrichstraße 5 instead");
        let c = Subject::of("Change my delivery address to Hauptstraße 3.");
        assert!(a.same_key(&b) && a.same_key(&c));
        assert_eq!(a.values, set(&["kastanienallee", "12"]));
        assert!(b.values.contains("friedrichstraße"));
    }

    #[test]
    fn choices_key_on_their_purpose() {
        let a = Subject::of("Use Postgres for the ledger.");
        assert_eq!(a.key, set(&["ledger"]));
        assert_eq!(a.values, set(&["postgres"]));
        let b = Subject::of("Let's use SQLite for the ledger instead.");
        assert!(a.same_key(&b));
        let bare = Subject::of("Use tabs.");
        assert!(!bare.is_keyed());
        let other = Subject::of("Use SQLite for the cache.");
        assert!(!a.same_key(&other));
    }

    #[test]
    fn toggles_key_on_what_is_switched() {
        let a = Subject::of("billing.invoice_v2_fx_cache is off");
        let b = Subject::of("Turn billing.invoice_v2_fx_cache back on.");
        assert!(a.same_key(&b));
        assert_eq!(a.values, set(&["off"]));
        assert_eq!(b.values, set(&["on"]));
        let c = Subject::of("Disable the nightly backups.");
        assert_eq!(c.key, set(&["nightly", "backups"]));
    }

    #[test]
    fn value_shapes() {
        let shapes = |t: &str| Subject::of(t).shapes.into_iter().collect::<Vec<_>>();
        assert_eq!(shapes("Set the timeout to 37s."), ["duration"]);
        assert_eq!(shapes("Move the standup to 10:30."), ["time"]);
        assert_eq!(shapes("Ship on Friday."), ["date"]);
        assert_eq!(shapes("Make the budget €180."), ["money"]);
        assert_eq!(shapes("Set the budget to 180 EUR."), ["money", "name"]);
        assert_eq!(shapes("Set the cache size to 512 MB."), ["name", "size"]);
    }

    #[test]
    fn keyless_changes_refer_to_a_statement_of_the_same_shape() {
        let timeout = Subject::of("Set the request timeout to 37s.");
        let ship = Subject::of("Ship on Friday.");
        let ledger = Subject::of("Use Postgres for the ledger.");
        let address = Subject::of("Deliver to Kastanienallee 12.");
        let make_it = Subject::of("Actually, make it 45s.");
        assert!(make_it.anaphoric);
        assert!(make_it.can_refer_to(&timeout) && !make_it.can_refer_to(&ship));
        let monday = Subject::of("Monday instead.");
        assert!(monday.can_refer_to(&ship) && !monday.can_refer_to(&timeout));
        let sqlite = Subject::of("we'll go with SQLite instead");
        assert!(sqlite.can_refer_to(&ledger) && !sqlite.can_refer_to(&address));
        let named = Subject::of("Set the connect timeout to 5s.");
        assert!(!named.anaphoric);
    }

    #[test]
    fn dropped_objects() {
        assert_eq!(
            Subject::of("scrap Postgres, we'll go with SQLite instead").dropped,
            set(&["postgres"])
        );
        assert_eq!(
            Subject::of("We no longer need the Redis cache.").dropped,
            set(&["redis", "cache"])
        );
        assert_eq!(
            Subject::of("Use MySQL instead of Postgres.").dropped,
            set(&["postgres"])
        );
        assert!(Subject::of("scrap that").dropped.is_empty());
    }
}
