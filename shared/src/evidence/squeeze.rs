//! A line squeezed to what it says: its values and the words rare in the
//! workstream, with the few words that join them into phrases; the words
//! every other message says are left out.
//!
//! Which words those are is not listed anywhere: a word said in more than
//! [`COMMON_SHARE`] of the workstream's messages is its common vocabulary
//! (grammar, greetings, a domain's every-day nouns: "the", "would", "book",
//! "restaurant"), whatever the language. What is kept:
//! - **values by form** (digits, codes, capitals inside a sentence, a day
//!   or a month: [`super::lang::CALENDAR`], a run of a script written
//!   without spaces that is not cut into clauses (Thai), all of what
//!   stands between quotes: a command a tool was called with is one
//!   value, and a word cut out of it would make it another command),
//!   however common;
//! - **in Chinese and Japanese, the clauses that say something**: text
//!   without spaces has no words to leave out, so its unit is the clause
//!   (up to a comma or a sentence's end, `，`, `、`, `。`…). A clause is
//!   kept when it holds a value by the forms the term reader finds (a
//!   digit, a Latin name, a quoted name, a name before an honorific), or
//!   when at least two of its pairs of characters, and half of them, are
//!   rare ([`forms::cjk_pairs`], counted as words are): `给您推荐那兰酒楼` and
//!   `但是没有小煎猪肝` stay, `好的`, `谢谢` and `你看行吗` go;
//! - **rare words**: said in at most that share of the messages, in the
//!   user's lines and in lines without a value; in every line, a word said
//!   in one message only;
//! - **a number's unit**: the word right after a number (`5 pm`,
//!   `2 people`, `3 nights`);
//! - **the joints of a phrase**: at most [`JOINT`] common words between
//!   two kept words of one sentence, one of them a value (`10th of March`,
//!   `Angel Stadium of Anaheim`, `table for 2 at 11:30 am`).
//!
//! A left-out run inside the line is shown as `…`; nothing marks its ends.
//! A line that would keep most of its words is kept whole.

use rustc_hash::{FxHashMap, FxHashSet};

use super::forms::{self, Form};
use super::lang::{CALENDAR, CLOSINGS, FUNCTION_CAPITALS};

/// A word said in more than this share of the messages is common. At 2 %
/// a chat's themes went too: "adoption", "pottery" and "necklace" were
/// common in a 419-message conversation of two friends, and the questions
/// asked of it were about them.
pub(crate) const COMMON_SHARE: f64 = 0.05;

/// However few the messages, a word said in this many is not common.
const COMMON_FLOOR: u32 = 2;

/// Common words kept between two kept words of a phrase.
const JOINT: usize = 2;

/// Letters a word said once needs to be kept from any line (shorter ones
/// are typos and fragments more often than details).
const ONCE_LETTERS: usize = 4;

/// A line keeping at least this share of its words is kept whole.
const WHOLE: f64 = 0.8;

/// A whitespace-separated token of a line.
struct Token<'a> {
    /// As written, punctuation included.
    text: &'a str,
    /// Byte offsets in the line.
    span: (usize, usize),
    /// Case-folded, without edge punctuation: what its rarity is counted by.
    key: String,
    /// A value by its form.
    value: bool,
    number: bool,
    /// It ends a sentence (a phrase does not go on past it).
    ends: bool,
    /// A clause of Chinese or Japanese (cut at its commas and ends): kept
    /// by its pairs' rarity, never as the joint of a phrase.
    clause: bool,
    /// A capitalised word that opens its sentence: its capital says
    /// nothing, unless a name goes on right after it.
    opens_capitalised: bool,
}

/// The key a word's rarity is counted by (`None`: a value by its form,
/// whose rarity does not decide whether it stays).
pub(crate) fn word_key(token: &str) -> Option<String> {
    let core = forms::core(token);
    if core.is_empty() || core.chars().any(char::is_numeric) {
        return None;
    }
    match forms::value_form(core) {
        Some(Form::Number | Form::Code | Form::Name) => None,
        _ => Some(forms::fold(core)),
    }
}

/// Counts, for each word of `text`, the message (once per message: the
/// caller passes a set it clears per message).
pub(crate) fn count_words(text: &str, seen: &mut FxHashSet<String>) {
    for raw in forms::words(text) {
        if raw.chars().any(forms::is_cjk) {
            // Text without spaces is counted by its pairs of characters,
            // which is what its clauses are weighed by.
            seen.extend(forms::cjk_pairs(raw).map(str::to_owned));
        } else if let Some(key) = word_key(raw) {
            seen.insert(key);
        }
    }
}

/// Marks that end a clause of Chinese or Japanese text (a comma between
/// two digits is a number's: `1,200元`).
fn ends_clause(line: &str, at: usize, c: char) -> bool {
    match c {
        '，' | '、' | '。' | '？' | '！' | '；' | '?' | '!' | ';' => true,
        ',' => {
            let before = line[..at].chars().next_back();
            let after = line[at + 1..].chars().next();
            !(before.is_some_and(|c| c.is_ascii_digit())
                && after.is_some_and(|c| c.is_ascii_digit()))
        }
        _ => false,
    }
}

/// The clauses of a whitespace-free run holding Chinese or Japanese,
/// each with its closing mark, as byte ranges of `raw`.
fn clauses(raw: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    for (i, c) in raw.char_indices() {
        if ends_clause(raw, i, c) {
            let to = i + c.len_utf8();
            // (Marks in a row close one clause: `吗？！`.)
            if raw[from..i].chars().any(char::is_alphanumeric) {
                out.push((from, to));
                from = to;
            } else if let Some(last) = out.last_mut() {
                last.1 = to;
                from = to;
            }
        }
    }
    if from < raw.len() {
        match out.last_mut() {
            Some(last) if !raw[from..].chars().any(char::is_alphanumeric) => last.1 = raw.len(),
            _ => out.push((from, raw.len())),
        }
    }
    out
}

fn tokens(line: &str) -> Vec<Token<'_>> {
    let mut out: Vec<Token<'_>> = Vec::new();
    // What stands between quotes is one value (a command, a title, a
    // setting): a word cut out of it would make it another one.
    let quoted: Vec<(usize, usize)> = forms::quoted(line)
        .into_iter()
        .filter(|q| q.contains(char::is_whitespace))
        .filter_map(|q| {
            let from = (q.as_ptr() as usize).checked_sub(line.as_ptr() as usize)?;
            Some((from, from + q.len()))
        })
        .collect();
    let mut sentence_start = true;
    let mut at = 0;
    for raw in forms::words(line) {
        let start = line[at..].find(raw).map_or(at, |i| at + i);
        at = start + raw.len();
        if raw.chars().any(forms::is_cjk) {
            for (from, to) in clauses(raw) {
                let text = &raw[from..to];
                // A clause holding a value by its form is one: a digit or
                // a letter of another script (`人均消费122元`, `A. Hotel酒店`),
                // what stands in quotes (`「ビストロ・ルミエール」`), a name
                // before an honorific (`山本さん`).
                let value = text
                    .chars()
                    .any(|c| c.is_alphanumeric() && !forms::is_unspaced_script(c))
                    || forms::terms(text).iter().any(|t| t.form.is_value());
                let ends = text.ends_with(['。', '？', '！', '?', '!', '.']);
                out.push(Token {
                    text,
                    span: (start + from, start + to),
                    key: String::new(),
                    value,
                    number: false,
                    ends,
                    clause: true,
                    opens_capitalised: false,
                });
                sentence_start = ends;
            }
            continue;
        }
        let core = forms::core(raw);
        let folded = forms::fold(core);
        let form = forms::value_form(core);
        let capital = core.chars().next().is_some_and(char::is_uppercase)
            && core.chars().skip(1).any(char::is_lowercase)
            && !FUNCTION_CAPITALS.has(&folded)
            && !CLOSINGS.has(&folded);
        let unspaced = core.chars().any(forms::is_unspaced_script);
        let number = matches!(form, Some(Form::Number));
        let in_quotes = quoted.iter().any(|&(from, to)| start < to && at > from);
        let value = !core.is_empty()
            && (in_quotes
                || matches!(form, Some(Form::Number | Form::Code | Form::Name))
                || unspaced
                || CALENDAR.has(&folded)
                || (capital && !sentence_start));
        let last = raw.chars().next_back();
        let ends = matches!(last, Some('.' | '!' | '?' | ';' | '。' | '！' | '？'))
            && !core.ends_with(|c: char| c.is_ascii_digit());
        out.push(Token {
            text: raw,
            span: (start, at),
            key: folded,
            value,
            number,
            ends,
            clause: false,
            opens_capitalised: capital && sentence_start,
        });
        sentence_start = ends;
    }
    out
}

/// `line` squeezed (see the module doc) by the words' counts `df` over
/// `messages` messages: the text and the byte spans of `line` it keeps.
/// `None` when it keeps nothing; the line itself when it would keep most
/// of it.
pub(crate) fn squeeze(
    line: &str,
    words: bool,
    df: &FxHashMap<String, u32>,
    messages: u64,
) -> Option<(String, Vec<(usize, usize)>)> {
    let tokens = tokens(line);
    if tokens.is_empty() {
        return None;
    }
    let common = (messages as f64 * COMMON_SHARE).max(f64::from(COMMON_FLOOR));
    let rare = |t: &Token<'_>| {
        !t.key.is_empty()
            && t.key.chars().any(char::is_alphanumeric)
            && df.get(&t.key).is_none_or(|&n| f64::from(n) <= common)
    };
    let has_value = tokens.iter().any(|t| t.value);
    let words_too = words || !has_value;
    // A word said in one message only is a detail no other line holds
    // ("pottery", "Ethiopian"): every line keeps it.
    let once = |t: &Token<'_>| {
        t.key.chars().filter(|c| c.is_alphanumeric()).count() >= ONCE_LETTERS
            && df.get(&t.key).is_none_or(|&n| n <= 1)
    };
    // A clause says something when at least two of its pairs, and half of
    // them, are rare: the pairs across a word's edge are rare in any
    // clause, so one is not enough.
    let says = |t: &Token<'_>| {
        let (mut pairs, mut rare) = (0usize, 0usize);
        for pair in forms::cjk_pairs(t.text) {
            pairs += 1;
            if df.get(pair).is_none_or(|&n| f64::from(n) <= common) {
                rare += 1;
            }
        }
        rare >= 2 && 2 * rare >= pairs
    };
    let mut keep: Vec<bool> = tokens
        .iter()
        .map(|t| t.value || (t.clause && says(t)) || (words_too && rare(t)) || once(t))
        .collect();
    for i in 1..tokens.len() {
        if tokens[i - 1].number && !tokens[i - 1].ends {
            keep[i] = true;
        }
        // A label says what its value is (`Reason: OOMKilled`).
        if tokens[i].value && tokens[i - 1].text.ends_with(':') {
            keep[i - 1] = true;
        }
    }
    // A name may open its sentence ("Bird Dog is in Palo Alto."): the
    // first word's capital says nothing alone, but with a capitalised
    // value right after it, it is the name's first word, and cut off,
    // the name would be another one ("Dog").
    for i in 0..tokens.len().saturating_sub(1) {
        let (t, next) = (&tokens[i], &tokens[i + 1]);
        if t.opens_capitalised
            && !t.ends
            && !t.text.ends_with([',', ':', ';'])
            && next.value
            && next.text.starts_with(char::is_uppercase)
        {
            keep[i] = true;
        }
    }
    // A letter or digit standing alone after a kept word is the end of
    // what it names (`Ste A`, `suite j`, `Plan B`, `Terminal 2`): cut off,
    // the value would be another one.
    for i in 1..tokens.len() {
        if keep[i - 1]
            && !tokens[i - 1].ends
            && tokens[i].key.chars().count() == 1
            && tokens[i].key.chars().all(char::is_alphanumeric)
        {
            keep[i] = true;
        }
    }
    let kept: Vec<usize> = (0..tokens.len()).filter(|&i| keep[i]).collect();
    for pair in kept.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b - a > 1
            && b - a <= JOINT + 1
            && (tokens[a].value || tokens[b].value)
            && !tokens[a..b].iter().any(|t| t.ends)
            && !tokens[a + 1..b].iter().any(|t| t.clause)
        {
            keep[a + 1..b].iter_mut().for_each(|k| *k = true);
        }
    }
    let n = keep.iter().filter(|k| **k).count();
    if n == 0 {
        return None;
    }
    if n as f64 >= WHOLE * tokens.len() as f64 {
        return Some((line.to_owned(), vec![(0, line.len())]));
    }
    let mut text = String::with_capacity(line.len());
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut gap = false;
    let mut last_end = 0;
    for (t, k) in tokens.iter().zip(&keep) {
        if !k {
            gap = true;
            continue;
        }
        if !text.is_empty() {
            // Clauses written without a space between them stay so.
            let spaced = line[last_end..t.span.0].contains(char::is_whitespace);
            text.push_str(match (gap, spaced) {
                (true, true) => " … ",
                (true, false) => "…",
                (false, true) => " ",
                (false, false) => "",
            });
        }
        gap = false;
        last_end = t.span.1;
        text.push_str(t.text);
        match spans.last_mut() {
            Some(last) if line[last.1..t.span.0].trim().is_empty() => last.1 = t.span.1,
            _ => spans.push(t.span),
        }
    }
    Some((text, spans))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn df(words: &[(&str, u32)]) -> FxHashMap<String, u32> {
        words.iter().map(|(w, n)| ((*w).to_owned(), *n)).collect()
    }

    #[test]
    fn common_words_go_values_and_rare_words_stay() {
        let counts = df(&[
            ("can", 40),
            ("you", 90),
            ("please", 30),
            ("confirm", 20),
            ("that", 60),
            ("want", 50),
            ("to", 99),
            ("book", 30),
            ("a", 99),
            ("table", 3),
            ("for", 80),
            ("at", 70),
            ("am", 30),
            ("the", 99),
            ("restaurant", 25),
            ("in", 90),
        ]);
        let line = "Can you please confirm that you want to book a table for 2 at 11:30 am at the Bird Dog restaurant in Palo Alto for today.";
        // The assistant's line keeps its values and what joins them.
        let (text, _) = squeeze(line, false, &counts, 200).unwrap();
        assert_eq!(
            text,
            "2 at 11:30 am at the Bird Dog restaurant in Palo Alto for today."
        );
        // The user's keeps the rare words too.
        let (text, _) = squeeze(line, true, &counts, 200).unwrap();
        assert_eq!(
            text,
            "table for 2 at 11:30 am at the Bird Dog restaurant in Palo Alto for today."
        );
    }

    #[test]
    fn a_sentence_opening_capital_is_no_value_but_a_rare_word_is_kept() {
        let counts = df(&[("sounds", 30), ("good", 40), ("right", 20), ("now", 20)]);
        let (text, _) = squeeze("Sushi sounds good right now.", true, &counts, 200).unwrap();
        assert_eq!(text, "Sushi");
        assert!(squeeze("Sounds good right now.", true, &counts, 200).is_none());
    }

    #[test]
    fn every_language_by_the_same_statistics() {
        let counts = df(&[
            ("ich", 50),
            ("möchte", 30),
            ("am", 40),
            ("um", 40),
            ("einen", 30),
            ("tisch", 9),
        ]);
        let (text, _) = squeeze(
            "Ich möchte am 15.03. um 19:30 einen Tisch im Hotel Adlon.",
            true,
            &counts,
            200,
        )
        .unwrap();
        assert!(
            text.contains("15.03.") && text.contains("19:30") && text.contains("Hotel Adlon"),
            "{text}"
        );
        assert!(!text.starts_with("Ich"), "{text}");
        // A clause of a script written without spaces that holds a value
        // is kept as it stands.
        let (text, _) = squeeze("山田さんの予約は2026年3月15日です。", true, &counts, 200).unwrap();
        assert_eq!(text, "山田さんの予約は2026年3月15日です。");
    }

    #[test]
    fn text_without_spaces_keeps_the_clauses_that_say_something() {
        // Pairs said in many of 200 messages: the dialogue's every-day
        // words.
        let counts = df(&[
            ("好的", 90),
            ("可以", 60),
            ("以呀", 3),
            ("给您", 70),
            ("您推", 70),
            ("推荐", 80),
            ("你看", 40),
            ("看行", 12),
            ("行吗", 30),
            ("酒店", 90),
            ("谢谢", 80),
        ]);
        let line = "可以呀，给您推荐那兰酒楼和北京中裕世纪大酒店，你看行吗？";
        let (text, spans) = squeeze(line, false, &counts, 200).unwrap();
        assert_eq!(text, "给您推荐那兰酒楼和北京中裕世纪大酒店，");
        assert_eq!(&line[spans[0].0..spans[0].1], text);
        // A clause with a digit is a value, however common its pairs;
        // clauses kept side by side stay written without a space, and a
        // left-out one between them is marked.
        let (text, _) = squeeze(
            "好的，人均消费122元，谢谢，电话是010-67796688。",
            false,
            &counts,
            200,
        )
        .unwrap();
        assert_eq!(text, "人均消费122元，…电话是010-67796688。");
        // A line of nothing but thanks keeps nothing.
        assert!(squeeze("好的，谢谢！", true, &counts, 200).is_none());
        // A clause that quotes a name, or names one before an honorific,
        // holds a value however common its pairs.
        let counts = df(&[
            ("でし", 50),
            ("した", 50),
            ("たら", 50),
            ("おす", 50),
            ("すす", 50),
            ("すめ", 50),
            ("めで", 50),
            ("です", 90),
            ("担当", 50),
            ("当は", 50),
            ("は山", 50),
            ("山本", 50),
            ("本さ", 50),
            ("さん", 90),
            ("んで", 50),
            ("ビス", 50),
            ("スト", 50),
            ("トロ", 50),
        ]);
        let (text, _) = squeeze(
            "でしたら「ビストロ」がおすすめです。担当は山本さんです。",
            false,
            &counts,
            200,
        )
        .unwrap();
        assert_eq!(
            text,
            "でしたら「ビストロ」がおすすめです。担当は山本さんです。"
        );
        // Japanese by the same pairs: its kana and kanji alike.
        let counts = df(&[("あり", 50), ("りが", 50), ("がと", 50), ("とう", 50)]);
        let (text, _) = squeeze(
            "ありがとう、予約は山田で、窓側の席をお願いします。",
            true,
            &counts,
            200,
        )
        .unwrap();
        assert_eq!(text, "予約は山田で、窓側の席をお願いします。");
    }

    #[test]
    fn a_name_that_opens_its_sentence_keeps_its_first_word() {
        let counts = df(&[
            ("bird", 4),
            ("is", 99),
            ("a", 99),
            ("nice", 30),
            ("place", 20),
            ("in", 90),
            ("sounds", 30),
            ("good", 40),
        ]);
        let (text, _) = squeeze(
            "Bird Dog is a nice place in Palo Alto.",
            false,
            &counts,
            200,
        )
        .unwrap();
        assert_eq!(text, "Bird Dog … Palo Alto.");
        // Not a word alone, nor one a comma sets off.
        assert!(squeeze("Sounds good.", false, &counts, 200).is_none());
        let (text, _) = squeeze("Sounds good, Palo Alto it is.", false, &counts, 200).unwrap();
        assert_eq!(text, "Palo Alto");
    }

    #[test]
    fn a_small_workstream_has_no_common_words() {
        let counts = df(&[("the", 2), ("deploy", 1)]);
        let (text, spans) = squeeze("the deploy failed", true, &counts, 3).unwrap();
        assert_eq!(text, "the deploy failed");
        assert_eq!(spans, vec![(0, 17)]);
    }

    #[test]
    fn a_label_stays_with_its_value_and_a_word_said_once_stays_anywhere() {
        let counts = df(&[
            ("last", 30),
            ("state", 30),
            ("reason", 9),
            ("the", 99),
            ("class", 12),
        ]);
        let (text, _) = squeeze(
            "Last State: Running. Reason: OOMKilled",
            false,
            &counts,
            200,
        )
        .unwrap();
        assert!(text.ends_with("Running. Reason: OOMKilled"), "{text}");
        // An assistant's line with values keeps a word no other message said.
        let (text, _) = squeeze(
            "The pottery class meets at 7 pm on Fridays.",
            false,
            &counts,
            200,
        )
        .unwrap();
        assert!(text.contains("pottery") && text.contains("7 pm"), "{text}");
    }

    #[test]
    fn a_letter_standing_alone_after_a_kept_word_ends_what_it_names() {
        let counts = df(&[("they", 40), ("are", 60), ("located", 20), ("at", 70)]);
        let (text, _) = squeeze(
            "They are located at 689 East Remington Drive Ste A.",
            false,
            &counts,
            200,
        )
        .unwrap();
        assert_eq!(text, "689 East Remington Drive Ste A.");
        let (text, _) = squeeze(
            "Pick it up at 4330 Clayton Road suite j",
            false,
            &counts,
            200,
        )
        .unwrap();
        assert!(text.ends_with("4330 Clayton Road suite j"), "{text}");
        // Not across a sentence's end.
        let counts = df(&[
            ("meet", 40),
            ("at", 70),
            ("bus", 40),
            ("waits", 40),
            ("there", 60),
        ]);
        let (text, _) = squeeze(
            "Meet at Hotel Adlon. A bus waits there.",
            false,
            &counts,
            200,
        )
        .unwrap();
        assert_eq!(text, "Hotel Adlon.");
        assert!(!text.contains(" A "), "{text}");
    }
}
