//! Supersession by slot, not by phrase: a value replaces an older one when
//! both fill the same slot, that is
//! - the same label or key (`time: 7 pm` … `time: 8 pm`, `MAX=4` … `MAX=8`,
//!   the same JSON field of the same tool), or
//! - the same neighbouring words and the same form (`at 7 pm` … `at 8 pm`),
//!   when the later line is the user's (or the same speaker's) and either
//!   the line carries a change cue ("instead", "statt", "代わりに", …:
//!   [`super::lang::CHANGE_CUES`]) or both neighbours agree within
//!   [`SHAPE_SCOPE`] messages (a correction follows what it corrects; the
//!   same words around another date further on tell of another event);
//!
//! - the same shape of number (`17:15` … `17:30`, `the 4th` … `the 2nd`)
//!   when the user says one such value in each of two lines of two
//!   messages a few messages apart ([`SHAPE_SCOPE`]) and the later line
//!   brings no code of another subject (another file, another ticket): a
//!   task dialogue's changed time or date, whatever words surround it. A
//!   code or a path of one shape named again is not a change: a session
//!   that goes through files or tickets one by one names the next subject
//!   (a changed code still replaces by its label or neighbours);
//!
//! - the same sentence said again by the user with another number in its
//!   place, at least [`SENTENCE_WORDS`] words besides it, however far
//!   apart: a setting restated ("use 1 EUR = 151,48 JPY" … "use 1 EUR =
//!   161,83 JPY"), which no neighbour alone would tie over forty messages
//!   (a code or a name in its place is the next subject, as above);
//!
//! but a value said in a sentence the user says [`TEMPLATE_VALUES`] times
//! or more, each time with a new value, changes nothing that sentence said
//! before, by any slot: it is a template the user reports through ("We saw
//! E0308 in staging after the last change …", "We saw 23505 in staging
//! after the last change …"). What it replaces of another sentence it
//! does change ("Finalement, plutôt à 11:33", said for every booking,
//! changes each booking's "taxi à 7:24");
//!
//! all but the same sentence only within
//! [`super::EvidenceConfig::scope_messages`] messages of each other, so unrelated tasks (another dialogue, another ticket) never
//! supersede each other's values. Slots are what people say: a tool's
//! output is a record of one call (two calls' `result:` lines are two
//! results, not a changed one), and so is a record the user pastes (two
//! invoices' `Total due:` lines are two invoices), so their lines neither
//! fill nor supersede.

use rustc_hash::FxHashMap;

use super::forms::{fold, push_classes, Form, Term};
use super::lang::CHANGE_CUES;
use super::{Candidate, Replaced, Speaker};
use crate::message::MessageId;

/// Messages within which a user's single value of one shape replaces the
/// user's single value of that shape before.
pub(crate) const SHAPE_SCOPE: u64 = 6;

/// The last value seen in a slot.
struct Filled {
    value: String,
    line: usize,
    seq: u64,
    left: Option<String>,
    right: Option<String>,
}

/// Whether line `c` speaks of another subject than line `old` of `lines`:
/// it holds a code of another shape than `t` that the old line lacks
/// (another file, another ticket). Then its values fill other slots,
/// whatever their shapes and neighbours: a session that asks the same
/// question of file after file changes no value.
fn another_subject(lines: &[Candidate], old: usize, c: &Candidate, t: &Term) -> bool {
    let Some(old) = lines.get(old) else {
        return false;
    };
    let shape = t.shape();
    c.terms.iter().any(|o| {
        o.form == Form::Code
            && o.key != t.key
            && o.shape() != shape
            && !old.terms.iter().any(|p| p.key == o.key)
    })
}

/// Words a sentence needs besides its value to be a slot of its own.
const SENTENCE_WORDS: usize = 5;

/// A sentence slot filled with this many values, each once, is a
/// template the user reports through, not a setting they change.
pub(crate) const TEMPLATE_VALUES: usize = 3;

/// The slot of value `t` in sentence `text`: the sentence with the value
/// left out, its words folded; `None` for a short sentence.
fn sentence_slot(text: &str, t: &Term) -> Option<String> {
    let (from, to) = t.span;
    let before = text.get(..from)?;
    let after = text.get(to..)?;
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(fold)
            .collect()
    };
    // (The words inside a value written in pieces, its unit or its
    // month, are the sentence's: "The calendar year is 1212 AE.")
    let inside: Vec<String> = text
        .get(from..to)?
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
        .map(fold)
        .collect();
    let (b, a) = (words(before), words(after));
    if b.len() + a.len() + inside.len() < SENTENCE_WORDS {
        return None;
    }
    Some(format!(
        "sentence\u{1}{}\u{1}{}\u{1}{}",
        b.join(" "),
        inside.join(" "),
        a.join(" ")
    ))
}

/// The kind of value `t` is, coarser than its shape: its form, and for a
/// number or a code the classes of its characters with the separators of
/// digit groups left out (`£25,269` and `£3,320.95` are `£0`, `400 EUR`
/// and `1.150 EUR` are `0a`, `11 February 2027` is `0a0`).
fn kind(t: &Term) -> String {
    let mut out = String::from(match t.form {
        Form::Number => "n",
        Form::Code => "c",
        Form::Name => "p",
        Form::Quoted => "q",
        Form::Word => "w",
    });
    if matches!(t.form, Form::Number | Form::Code) {
        push_classes(&mut out, &t.key, |c| {
            matches!(c, ',' | '.' | '\'' | ' ' | '\u{a0}' | '\u{202f}')
        });
    }
    out
}

/// The slots a value fills. A label's slot holds one kind of value
/// ([`kind`]): "Budget: 400 EUR" … "Budget: 550 EUR" is a changed budget,
/// but "Noted: 11 February 2027" … "Noted: £25,269" are two things noted.
fn slots(t: &Term) -> Vec<(String, bool)> {
    let mut out = Vec::with_capacity(3);
    if let Some(label) = &t.label {
        out.push((format!("label\u{1}{}\u{1}{label}", kind(t)), true));
    }
    let form = match t.form {
        Form::Number => "n",
        Form::Code => "c",
        Form::Name => "p",
        Form::Quoted => "q",
        Form::Word => return out,
    };
    if let Some(left) = &t.left {
        out.push((format!("left\u{1}{form}\u{1}{left}"), false));
    }
    if let Some(right) = &t.right {
        out.push((format!("right\u{1}{form}\u{1}{right}"), false));
    }
    out
}

/// Marks on `lines` (in message order) each value a later line of
/// `lines` or of `later` replaced, and returns every replaced value with
/// the message that replaced it, less those said again as a slot's value
/// after it (current again), oldest first.
pub(crate) fn supersede(lines: &mut [Candidate], later: &[Candidate], scope: u64) -> Superseded {
    let mut filled: FxHashMap<String, Filled> = FxHashMap::default();
    let mut marks: Vec<(usize, String, MessageId, u64)> = Vec::new();
    // The last message each value filled a slot in.
    let mut last_filled: FxHashMap<String, u64> = FxHashMap::default();
    // Per sentence slot, the values it was filled with and how often, and
    // the marks its values made: a sentence said again and again with a
    // new value each time is a report's template ("We saw E0308 in staging
    // …", "We saw 23505 in staging …"), not a setting restated.
    let mut sentence_fills: FxHashMap<String, (FxHashMap<String, u32>, Vec<usize>)> =
        FxHashMap::default();
    // The same per label: "New character: Yson Mine, …", "New character:
    // Quildor Dorha, …" is a series the user adds to, not a setting.
    let mut label_fills: FxHashMap<String, (FxHashMap<String, u32>, Vec<usize>)> =
        FxHashMap::default();
    let total = lines.len() + later.len();
    for j in 0..total {
        let c = if j < lines.len() {
            &lines[j]
        } else {
            &later[j - lines.len()]
        };
        if c.line.speaker == Speaker::Tool || c.line.record {
            continue;
        }
        // A question may ask for another value ("can you check 17:30?"),
        // but what it asks about fills no slot: asking about Lisbon after
        // asking about Edinburgh changes nothing said.
        let asks = c.line.text.trim_end().ends_with(['?', '？']);
        let mut cue: Option<bool> = None;
        let shapes: Vec<Option<String>> = c.terms.iter().map(Term::shape).collect();
        for (k, t) in c.terms.iter().enumerate() {
            if !t.form.is_value() {
                continue;
            }
            // The sentence this value is said in, counted with the values
            // it was said with; the marks the value makes are dropped at
            // the end if the sentence turns out to be a template.
            let said_in = (c.line.speaker == Speaker::User && !asks)
                .then(|| sentence_slot(&c.line.text, t))
                .flatten();
            if let Some(slot) = &said_in {
                *sentence_fills
                    .entry(slot.clone())
                    .or_default()
                    .0
                    .entry(t.key.clone())
                    .or_default() += 1;
            }
            let marks_before = marks.len();
            // The same sentence said again with another value in this
            // place fills the same slot, however far apart: the user
            // restates a setting ("use 1 EUR = 151,48 JPY" … "use 1 EUR =
            // 161,83 JPY").
            // (A number only, as for the shape's slot below: a ticket, a
            // path or a name said in the same sentence again is the next
            // subject, "This is tracked as BILL-4107" after "… BILL-4100".)
            if c.line.speaker == Speaker::User && !asks && t.form == Form::Number {
                if let Some(slot) = said_in.clone() {
                    if let Some(old) = filled.get(&slot) {
                        if old.value != t.key && old.line < lines.len() && c.line.seq != old.seq {
                            marks.push((old.line, old.value.clone(), c.line.at, c.line.seq));
                        }
                    }
                    last_filled.insert(t.key.clone(), c.line.seq);
                    filled.insert(
                        slot,
                        Filled {
                            value: t.key.clone(),
                            line: j,
                            seq: c.line.seq,
                            left: None,
                            right: None,
                        },
                    );
                }
            }
            // The line's only value of its shape fills the shape's slot.
            // (Not a bare count, `2`, `40`: one says how many of
            // anything, and which thing only its words tell.)
            let shape_slot = shapes[k].as_ref().filter(|s| {
                t.form == Form::Number
                    && s.as_str() != "0"
                    && c.line.speaker == Speaker::User
                    && shapes.iter().filter(|o| o.as_ref() == Some(*s)).count() == 1
            });
            if let Some(shape) = shape_slot {
                let slot = format!("shape\u{1}{shape}");
                if let Some(old) = filled.get(&slot) {
                    let new_subject = another_subject(lines, old.line, c, t);
                    if old.value != t.key
                        && old.line != j
                        && old.line < lines.len()
                        && !new_subject
                        // (Values of one shape down the lines of one
                        // message are a list, not a change of mind.)
                        && c.line.seq != old.seq
                        && c.line.seq.saturating_sub(old.seq) <= SHAPE_SCOPE.min(scope)
                        && !c.terms.iter().any(|o| o.key == old.value)
                    {
                        marks.push((old.line, old.value.clone(), c.line.at, c.line.seq));
                    }
                }
                last_filled.insert(t.key.clone(), c.line.seq);
                if !asks {
                    filled.insert(
                        slot,
                        Filled {
                            value: t.key.clone(),
                            line: j,
                            seq: c.line.seq,
                            left: None,
                            right: None,
                        },
                    );
                }
            }
            for (slot, labelled) in slots(t) {
                let marks_before = marks.len();
                if labelled {
                    *label_fills
                        .entry(slot.clone())
                        .or_default()
                        .0
                        .entry(t.key.clone())
                        .or_default() += 1;
                }
                if let Some(old) = filled.get(&slot) {
                    let in_scope = c.line.seq.saturating_sub(old.seq) <= scope;
                    let replaces = old.value != t.key
                        && old.line != j
                        && in_scope
                        && old.line < lines.len()
                        && (labelled || !another_subject(lines, old.line, c, t))
                        && (labelled || {
                            // The user changes a value; the assistant
                            // proposes and reports: its next offer ("what
                            // about …") is another option, not a change.
                            let by_whom = c.line.speaker == Speaker::User;
                            let cue = *cue.get_or_insert_with(|| {
                                CHANGE_CUES.contained_in(&fold(&c.line.text))
                            });
                            let both = old.left.is_some()
                                && old.right.is_some()
                                && old.left == t.left
                                && old.right == t.right;
                            let repeated = c.terms.iter().any(|o| o.key == old.value);
                            // (Lines of one message alike but for a value
                            // are a list, `input :a do` … `input :b do`,
                            // unless a cue says it changed.)
                            let list = c.line.seq == old.seq;
                            // Without a cue, a change corrects what was
                            // just said; further apart, the same words
                            // around another value tell of another event
                            // ("on 9 June" … "on 27 June" in a chat).
                            let near = c.line.seq.saturating_sub(old.seq) <= SHAPE_SCOPE;
                            by_whom && (cue || (both && near && !repeated && !list))
                        });
                    if replaces {
                        marks.push((old.line, old.value.clone(), c.line.at, c.line.seq));
                    }
                }
                if labelled && marks.len() > marks_before {
                    if let Some(fills) = label_fills.get_mut(&slot) {
                        fills.1.extend(marks_before..marks.len());
                    }
                }
                last_filled.insert(t.key.clone(), c.line.seq);
                if !asks {
                    filled.insert(
                        slot,
                        Filled {
                            value: t.key.clone(),
                            line: j,
                            seq: c.line.seq,
                            left: t.left.clone(),
                            right: t.right.clone(),
                        },
                    );
                }
            }
            // (A change cue in it is the template's too: "after the last
            // change" said every time changes nothing.)
            if let Some(slot) = said_in.filter(|_| marks.len() > marks_before) {
                if let Some(fills) = sentence_fills.get_mut(&slot) {
                    fills.1.extend(marks_before..marks.len());
                }
            }
        }
    }
    // (What a template's saying replaces of another sentence, a value
    // the user or the assistant said otherwise, it does change: "Finalement,
    // plutôt à 11:33" said for every booking changes each booking's "taxi
    // à 7:24".)
    let of_template = |m: usize, slot: &str| {
        let (line, value, _, _) = &marks[m];
        let Some(c) = lines.get(*line) else {
            return true;
        };
        c.terms
            .iter()
            .filter(|t| t.key == *value)
            .any(|t| sentence_slot(&c.line.text, t).as_deref() == Some(slot))
    };
    // A slot filled with TEMPLATE_VALUES values or more, each once.
    let series = |values: &FxHashMap<String, u32>| {
        values.len() >= TEMPLATE_VALUES && values.values().all(|&n| n == 1)
    };
    let mut template = vec![false; marks.len()];
    for (slot, (values, made)) in &sentence_fills {
        if series(values) {
            for &m in made {
                template[m] = of_template(m, slot);
            }
        }
    }
    // (A label's marks are its own: what they replaced was said under it.)
    for (values, made) in label_fills.values() {
        if series(values) {
            for &m in made {
                template[m] = true;
            }
        }
    }
    let marks = marks
        .into_iter()
        .zip(template)
        .filter_map(|(m, t)| (!t).then_some(m));
    let mut replaced: Vec<Replaced> = Vec::new();
    for (line, value, by, seq) in marks {
        let line = &mut lines[line].line;
        let from = line.at;
        if !line.superseded.iter().any(|r| r.value == value) {
            line.superseded.push(Replaced {
                value: value.clone(),
                by,
                seq,
                from,
            });
        }
        let again = last_filled.get(&value).is_some_and(|&s| s > seq);
        if !again {
            replaced.retain(|r| r.value != value);
            replaced.push(Replaced {
                value,
                by,
                seq,
                from,
            });
        }
    }
    Superseded {
        replaced,
        last_filled,
    }
}

/// What [`supersede`] found.
pub(crate) struct Superseded {
    /// Replaced values, oldest first.
    pub(crate) replaced: Vec<Replaced>,
    /// The last message (`seq`) each value filled a slot in.
    pub(crate) last_filled: FxHashMap<String, u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{forms, Line};

    fn cand(seq: u64, speaker: Speaker, text: &str) -> Candidate {
        Candidate {
            line: Line {
                at: MessageId(seq as i64 + 100),
                seq,
                speaker,
                text: text.to_owned(),
                superseded: Vec::new(),
                of: 0,
                record: false,
                read: String::new(),
            },
            terms: forms::terms(text),
        }
    }

    fn marked(lines: &[Candidate]) -> Vec<(u64, String)> {
        lines
            .iter()
            .flat_map(|c| {
                c.line
                    .superseded
                    .iter()
                    .map(move |r| (c.line.seq, r.value.clone()))
            })
            .collect()
    }

    #[test]
    fn a_labelled_value_is_replaced_by_the_next_of_its_label() {
        let mut lines = vec![
            cand(0, Speaker::User, "Budget: 400 EUR"),
            cand(3, Speaker::Assistant, "Noted."),
            cand(5, Speaker::User, "Budget: 550 EUR"),
        ];
        let _ = supersede(&mut lines, &[], 24);
        assert_eq!(marked(&lines), vec![(0, "400 eur".to_owned())]);
        // A label that notes one thing after another is no slot: its
        // values are of other kinds.
        let mut noted = vec![
            cand(0, Speaker::User, "The wedding is on 11 February 2027."),
            cand(
                1,
                Speaker::Assistant,
                "Noted: 11 February 2027. Anything else?",
            ),
            cand(2, Speaker::User, "Our total budget is £25,269."),
            cand(3, Speaker::Assistant, "Noted: £25,269. Good."),
            cand(4, Speaker::User, "The plate is GWC 6761."),
            cand(5, Speaker::Assistant, "Anotado: GWC 6761. Bien."),
            cand(6, Speaker::User, "I took it to Garage du Parc."),
            cand(7, Speaker::Assistant, "Anotado: Garage du Parc. Bien."),
        ];
        let _ = supersede(&mut noted, &[], 24);
        assert!(marked(&noted).is_empty(), "{:?}", marked(&noted));
    }

    #[test]
    fn a_change_cue_replaces_a_value_of_the_same_neighbour_in_each_language() {
        for (a, b) in [
            ("Book a table at 7 pm please.", "Actually, at 8 pm instead."),
            ("Ich komme am Montag um 9 Uhr.", "Lieber um 10 Uhr."),
            (
                "Reserva para el martes a las 20 horas.",
                "Mejor a las 21 horas.",
            ),
            ("Arrivée prévue à 18 heures.", "Plutôt à 19 heures."),
        ] {
            let mut lines = vec![cand(0, Speaker::User, a), cand(2, Speaker::User, b)];
            let _ = supersede(&mut lines, &[], 24);
            assert_eq!(marked(&lines).len(), 1, "{a} / {b}: {:?}", marked(&lines));
        }
        let mut ja = vec![
            cand(0, Speaker::User, "予約は 3月15日 でお願いします"),
            cand(2, Speaker::User, "やっぱり 3月16日 でお願いします"),
        ];
        let _ = supersede(&mut ja, &[], 24);
        assert_eq!(marked(&ja), vec![(0, "3月15日".to_owned())]);
    }

    #[test]
    fn the_users_next_value_of_a_shape_replaces_the_one_before_nearby() {
        let mut lines = vec![
            cand(
                0,
                Speaker::User,
                "I'd like to book an appointment at a salon March 8th at 16:45.",
            ),
            cand(
                1,
                Speaker::Assistant,
                "Tell me the name of the salon please.",
            ),
            cand(
                2,
                Speaker::User,
                "I'd like the appointment Tuesday next week at evening 6:30.",
            ),
        ];
        let _ = supersede(&mut lines, &[], 24);
        assert_eq!(marked(&lines), vec![(0, "16:45".to_owned())]);
        // Two of a shape in one line are two slots (a departure and a
        // return): neither replaces the other, nor is replaced by shape.
        let mut two = vec![
            cand(0, Speaker::User, "Leave on the 5th and return on the 13th."),
            cand(2, Speaker::User, "And a hotel for the 6th."),
        ];
        let _ = supersede(&mut two, &[], 24);
        assert!(marked(&two).is_empty(), "{:?}", marked(&two));
        // Far apart, they are other tasks.
        let mut far = vec![
            cand(0, Speaker::User, "A table at 16:45."),
            cand(10, Speaker::User, "A cab at 18:30."),
        ];
        let _ = supersede(&mut far, &[], 24);
        assert!(marked(&far).is_empty());
        // A code or a file named in the next request is the next subject,
        // not a change: going through documents one by one replaces none.
        let mut files = vec![
            cand(0, Speaker::User, "Bitte prüfe inbox/ja/doc_036.pdf."),
            cand(3, Speaker::User, "Bitte prüfe inbox/de/doc_037.pdf."),
            cand(
                6,
                Speaker::User,
                "Next: ticket KD-5512, what is its status?",
            ),
            cand(8, Speaker::User, "Then ticket KD-5513 please."),
        ];
        let _ = supersede(&mut files, &[], 24);
        assert!(marked(&files).is_empty(), "{:?}", marked(&files));
    }

    #[test]
    fn the_same_sentence_with_another_value_replaces_it_however_far_apart() {
        let mut lines = vec![
            cand(
                0,
                Speaker::User,
                "For all conversions use 1 EUR = 151,48 JPY, that's our treasury rate this quarter.",
            ),
            cand(
                40,
                Speaker::User,
                "For all conversions use 1 EUR = 161,83 JPY, that's our treasury rate this quarter.",
            ),
        ];
        let _ = supersede(&mut lines, &[], 24);
        assert_eq!(marked(&lines), vec![(0, "151,48 jpy".to_owned())]);
        // A short sentence is no slot of its own: "A table for 2." in one
        // dialogue and "A table for 4." in another are two tables.
        let mut short = vec![
            cand(0, Speaker::User, "A table for 2."),
            cand(40, Speaker::User, "A table for 4."),
        ];
        let _ = supersede(&mut short, &[], 24);
        assert!(marked(&short).is_empty(), "{:?}", marked(&short));
        // A ticket in the same sentence again is the next ticket, not a
        // changed one.
        let mut tickets = vec![
            cand(
                0,
                Speaker::User,
                "This one is tracked as BILL-4100 in the tracker.",
            ),
            cand(
                48,
                Speaker::User,
                "This one is tracked as BILL-4107 in the tracker.",
            ),
        ];
        let _ = supersede(&mut tickets, &[], 24);
        assert!(marked(&tickets).is_empty(), "{:?}", marked(&tickets));
    }

    #[test]
    fn a_sentence_said_with_a_new_value_each_time_is_a_template() {
        // A report said again and again, a new value each time: nothing
        // changed, by the sentence or by the words around the value.
        let mut reports = vec![
            cand(0, Speaker::User, "We saw E0308 in staging after the last change, and we must keep amounts in minor units."),
            cand(4, Speaker::User, "We saw 429 in staging after the last change, and we must keep amounts in minor units."),
            cand(8, Speaker::User, "We saw 23505 in staging after the last change, and we must keep amounts in minor units."),
            cand(12, Speaker::User, "We saw 480 in staging after the last change, and we must keep amounts in minor units."),
        ];
        let _ = supersede(&mut reports, &[], 24);
        assert!(marked(&reports).is_empty(), "{:?}", marked(&reports));
        // A unit written with the value is the sentence's word too.
        let mut years = vec![
            cand(0, Speaker::User, "The calendar year is 1212 AE."),
            cand(4, Speaker::User, "The calendar year is 1004 AE."),
            cand(8, Speaker::User, "The calendar year is 925 AE."),
        ];
        let _ = supersede(&mut years, &[], 24);
        assert!(marked(&years).is_empty(), "{:?}", marked(&years));
        // Two values, or a value said again, are a setting changed.
        let mut setting = vec![
            cand(
                0,
                Speaker::User,
                "For all conversions use 1 EUR = 151,48 JPY, that's our treasury rate.",
            ),
            cand(
                20,
                Speaker::User,
                "For all conversions use 1 EUR = 161,83 JPY, that's our treasury rate.",
            ),
            cand(
                40,
                Speaker::User,
                "For all conversions use 1 EUR = 161,83 JPY, that's our treasury rate.",
            ),
            cand(
                60,
                Speaker::User,
                "For all conversions use 1 EUR = 158,10 JPY, that's our treasury rate.",
            ),
        ];
        let _ = supersede(&mut setting, &[], 24);
        assert_eq!(
            marked(&setting),
            vec![(0, "151,48 jpy".to_owned()), (40, "161,83 jpy".to_owned())]
        );
    }

    #[test]
    fn slots_of_unrelated_dialogues_never_supersede_each_other() {
        let mut lines = vec![
            cand(0, Speaker::User, "Budget: 400 EUR"),
            cand(100, Speaker::User, "Budget: 90 USD"),
        ];
        let _ = supersede(&mut lines, &[], 24);
        assert!(marked(&lines).is_empty());
    }

    #[test]
    fn values_of_other_slots_stay_current() {
        let mut lines = vec![
            cand(0, Speaker::User, "A table for 4 at 7 pm."),
            cand(2, Speaker::User, "Find a cinema in Berlin."),
        ];
        let _ = supersede(&mut lines, &[], 24);
        assert!(marked(&lines).is_empty(), "{:?}", marked(&lines));
    }

    #[test]
    fn a_later_message_of_the_tail_supersedes_a_kept_line() {
        let mut lines = vec![cand(0, Speaker::User, "deadline: 2026-03-01")];
        let later = vec![cand(4, Speaker::User, "deadline: 2026-04-01")];
        let found = supersede(&mut lines, &later, 24);
        assert_eq!(found.replaced.len(), 1);
        assert_eq!(marked(&lines), vec![(0, "2026-03-01".to_owned())]);
    }

    #[test]
    fn the_assistants_next_offer_is_another_option_not_a_change() {
        let mut lines = vec![
            cand(
                0,
                Speaker::Assistant,
                "What about Little Woods at the Roxie?",
            ),
            cand(
                2,
                Speaker::Assistant,
                "What about Ramen Shop at the Roxie instead?",
            ),
        ];
        let _ = supersede(&mut lines, &[], 24);
        assert!(marked(&lines).is_empty(), "{:?}", marked(&lines));
        // The user's change of the same slot is one.
        let mut lines = vec![
            cand(0, Speaker::User, "Let's see Little Woods at the Roxie."),
            cand(
                2,
                Speaker::User,
                "Actually, Ramen Shop at the Roxie instead.",
            ),
        ];
        let _ = supersede(&mut lines, &[], 24);
        assert_eq!(marked(&lines), vec![(0, "little woods".to_owned())]);
    }

    #[test]
    fn what_a_question_asks_about_fills_no_slot_but_a_question_may_change_one() {
        // Asking about Lisbon after asking about Edinburgh changes nothing.
        let mut lines = vec![
            cand(
                0,
                Speaker::User,
                "what's the weather like in Edinburgh this week?",
            ),
            cand(
                2,
                Speaker::User,
                "what's the weather like in Lisbon this week?",
            ),
        ];
        let _ = supersede(&mut lines, &[], 24);
        assert!(marked(&lines).is_empty(), "{:?}", marked(&lines));
        // Asking for another time is a change of the one said.
        let mut lines = vec![
            cand(0, Speaker::User, "Reserve the table at 17:15."),
            cand(
                2,
                Speaker::User,
                "Can you check if a table is free at 17:30?",
            ),
        ];
        let _ = supersede(&mut lines, &[], 24);
        assert_eq!(marked(&lines), vec![(0, "17:15".to_owned())]);
    }
}
