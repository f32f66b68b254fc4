//! Whether one sentence of the user states a decision or a constraint:
//! the framing rule.
//!
//! A sentence is framed only when the user's own words mark it, by one of
//! two signs every language has:
//! - **it gives a value** by its form ([`crate::evidence::gives_value`]: a
//!   number, a date, a name, a code, a quoted string, a count in letters).
//!   A value the user gives is what the task must meet: "Please find
//!   events in Portland, OR.", "I'll need two tickets.", "Ich brauche 2
//!   Tickets.", "3月15日に予約したい";
//! - **it states a rule** ([`lang::RULES`]: "never push to main", "nur per
//!   Bahn", "必ずテストを実行して"; not in a set phrase, [`lang::IDIOMS`]:
//!   "never mind"), a condition of the user's ([`lang::CONDITIONS`]: "my
//!   son is allergic to nuts") or a choice ([`lang::CHOICES`]: "let's use
//!   Postgres"; [`lang::CONTRASTS`]: "to the original card, not store
//!   credit"). Without a value, the word must head its clause (first, or
//!   after its subject, "please", a bare "yes" or a joining "and" or
//!   "but": [`lang::LEADS`]): "we never deploy without a review" states a
//!   rule, "I've always had a love for horses" does not.
//!
//! It is not framed when it only greets or closes the talk ("No that's it,
//! thanks again.", "Hey Mel!"), when it reports what happened
//! ([`lang::PAST`]: "I went to a support group yesterday"; a time stamp
//! in brackets before it is no value of its own), when it is a
//! hypothetical, a guess or reported speech
//! ([`lang::HEDGES`]: "maybe we should use Postgres", "the docs say you
//! must restart"), or when it is a question that asks for
//! something ([`lang::QUESTIONS`]: "What's the address of Century
//! Vallejo?"). A question that asks for nothing but gives a value ("Is
//! there anything in NY?", "Can you make that three tickets?") still gives
//! it; a question gives no rule ("Do I always need a ticket?").
//!
//! A framed sentence is a decision when it says it chooses or changes
//! something ([`lang::CHOICES`], [`lang::CHANGE_CUES`]: "instead", "statt",
//! "代わりに"), a constraint when it states a rule or a condition, and a
//! request when it only gives a value.
//!
//! Measured on user turns nobody here wrote, labelled by the dataset's own
//! acts (`tests/data/framing/`, `shared/tests/it/framing.rs`); the word
//! lists are data, one table per word class and language, so a language is
//! added without touching this rule.

use super::StatementKind::{self, Constraint, Decision, Request};
use crate::evidence::lang;

/// Whether `sentence` states a decision or a constraint of its speaker.
pub(crate) fn classify(sentence: &str) -> Option<StatementKind> {
    let trimmed = without_stamp(sentence.trim());
    if trimmed.chars().count() > super::sentence::MAX_SENTENCE_CHARS
        || super::sentence::looks_like_code(trimmed)
        || crate::evidence::only_closes(trimmed)
    {
        return None;
    }
    let folded = crate::text::normalize(trimmed);
    if lang::HEDGES.contained_in(&folded) {
        return None;
    }
    let chooses = lang::CHANGE_CUES.contained_in(&folded)
        || lang::CHOICES.contained_in(&folded)
        || lang::CONTRASTS.after_comma_in(&folded);
    let question = trimmed.ends_with(['?', '？']);
    // "How about 5 pm?" proposes a value; "What time is it?" asks for one.
    if question && !chooses && lang::QUESTIONS.contained_in(&folded) {
        return None;
    }
    // Without a value, a word of choice or of rule marks the sentence only
    // where it heads its clause ([`lang::Table::heads_clause_in`]): "let's
    // use the cache", "never push to main", "we never deploy without a
    // review", not "I've always had a love for horses" or "it really
    // pushed me to keep going", where it qualifies what is said. Beside a
    // value it marks it anywhere: "For the job store let's go with
    // SQLite", "Ship on Monday instead".
    let value = crate::evidence::gives_value(trimmed);
    if !question
        && chooses
        && (value
            || lang::CHOICES.heads_clause_in(&folded)
            || lang::CHANGE_CUES.heads_clause_in(&folded)
            || lang::CONTRASTS.after_comma_in(&folded))
    {
        return Some(Decision);
    }
    if !question && (rules_at_head(&folded) || (value && rules(&folded))) {
        return Some(Constraint);
    }
    // A value said of the past reports what happened ("I went to a
    // support group yesterday", "Lost my job last week"); it asks for
    // nothing.
    if !chooses && lang::PAST.contained_in(&folded) {
        return None;
    }
    value.then_some(if chooses { Decision } else { Request })
}

/// `sentence` without a leading time stamp in brackets (`[1:56 pm on 8
/// May, 2023] Hey Mel!`, `[12/03/2023, 14:05] …`): a chat export's or a
/// client's stamp, not a value its speaker gave.
fn without_stamp(sentence: &str) -> &str {
    let Some(rest) = sentence.strip_prefix('[') else {
        return sentence;
    };
    match rest.split_once(']') {
        Some((stamp, after))
            if stamp.contains(|c: char| c.is_ascii_digit()) && stamp.len() <= 40 =>
        {
            after.trim_start()
        }
        _ => sentence,
    }
}

/// A rule word or a condition, outside a set phrase that holds one.
fn rules(folded: &str) -> bool {
    (lang::RULES.contained_in(folded) && !lang::IDIOMS.contained_in(folded))
        || lang::CONDITIONS.contained_in(folded)
}

/// [`rules`], with the rule word at the head of its clause: what a
/// sentence without a value needs to be a rule.
fn rules_at_head(folded: &str) -> bool {
    (lang::RULES.heads_clause_in(folded) && !lang::IDIOMS.contained_in(folded))
        || lang::CONDITIONS.contained_in(folded)
}

/// Whether `sentence` states a rule or a change in so many words
/// ([`lang::RULES`], [`lang::CHANGE_CUES`]), whoever says it: what an
/// assistant's "Noted: never push to main." repeats of the user's, while
/// its "Noted order 70360." only reports a value.
pub(crate) fn states_rule(sentence: &str) -> bool {
    let folded = crate::text::normalize(sentence);
    !folded.trim_end().ends_with('?')
        && !lang::HEDGES.contained_in(&folded)
        && (rules(&folded)
            || lang::CHANGE_CUES.contained_in(&folded)
            || lang::CHOICES.contained_in(&folded))
}
