//! Candidate terms of a line, found by the form of their characters, not
//! by vocabulary: what holds in any language and any domain.
//!
//! - **Number**: digits with at most a few letters or signs around them
//!   (`1,249.90`, `EUR`-less `¥128,000`, `7:30`, `2026-03-15`,
//!   `2026年3月15日`, `15%`, `3pm`), and counts written in letters
//!   (`five`, `zwei`, `二人`: [`super::lang::COUNTS`]).
//! - **Code**: letters and digits mixed (`#A-448213`, `INV-2024-0042`,
//!   `DE89370400440532013000`), words joined by `/ _ @ . : =` (paths, URLs,
//!   e-mails, `snake_case`, dotted names), inner capitals (`camelCase`),
//!   and all-capital words (`EUR`, `SFO`, `ENOSPC`).
//! - **Name**: runs of capitalised words (`Pizza Hut`, `Hotel Adlon`,
//!   `Łódź Kaliska`), runs of Katakana, and a word of any script right
//!   after a label (`name: 山田`) or next to an honorific (`山田さん`).
//! - **Quoted**: what stands between quotes (`"blue-green"`, `「至急」`).
//! - **Word**: any other word (three letters or more in spaced scripts,
//!   runs of two or more kana or katakana in the others, and each pair of
//!   neighbouring ideographs: Chinese writes a clause as one run, with its
//!   names inside). Words are candidates too: the workstream's statistics
//!   decide which are rare enough to matter ([`super::select`]).
//!
//! A line is cut into words at whitespace, and where a typo glued two
//! words with a mark that never joins a value's letters ([`words`]:
//! "travel?I", "date,time").
//!
//! Each value term remembers what labels its slot: the label it follows
//! (`label: value`, `KEY=value`, `"field": value`) and its neighbouring
//! words, which [`super::slots`] compares to tell a changed value from an
//! unrelated one.

use super::lang::{CALENDAR, CLOSINGS, COUNTS, FUNCTION_CAPITALS, HONORIFICS, NOUN_ARTICLES};

/// What a term looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Form {
    Number,
    Code,
    Name,
    Quoted,
    Word,
}

impl Form {
    /// Values are what a summary loses and a model cannot guess.
    pub(crate) fn is_value(self) -> bool {
        !matches!(self, Form::Word)
    }
}

/// One candidate of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Term {
    /// Case-folded: the same term however it was written.
    pub(crate) key: String,
    pub(crate) form: Form,
    /// The label the value follows, case-folded.
    pub(crate) label: Option<String>,
    /// The nearest word before and after it, case-folded.
    pub(crate) left: Option<String>,
    pub(crate) right: Option<String>,
    /// Where it stands in its line, as byte offsets (the first place it
    /// stands): a value is shown as it was written, not case-folded.
    pub(crate) span: (usize, usize),
}

/// Marks that set a name off from the sentence around it, in any script.
const COMMAS: [char; 3] = [',', '、', '，'];

/// Whether the name at `span` of `sentence` addresses the one spoken to
/// rather than giving a value: it closes the sentence after a comma or
/// after one word ("Thanks, Melanie!", "Hey Mel!", "お疲れ様、田中さん。"),
/// or stands between one word and a comma or a spaced dash ("Wow, Mel,
/// you're amazing", "Thanks Mel, really", "Thanks, Gina - really"). Said
/// by position alone, so in every language: "I'd like to fly to Paris."
/// and "A table at Sakura, please." give a value, and so does a day or a
/// month ("This Saturday.": nobody is called that).
pub(crate) fn addressed(sentence: &str, span: (usize, usize)) -> bool {
    let (Some(before), Some(name), Some(after)) = (
        sentence.get(..span.0),
        sentence.get(span.0..span.1),
        sentence.get(span.1..),
    ) else {
        return false;
    };
    if CALENDAR.has(&fold(name)) {
        return false;
    }
    let before = before.trim_end();
    let set_off = before.ends_with(COMMAS);
    let words_before = before.trim_end_matches(COMMAS).split_whitespace().count();
    // (A dash with a space before it sets the name off as a comma does:
    // "Thanks, Gina - really appreciate it".)
    let dashed =
        after.starts_with(char::is_whitespace) && after.trim_start().starts_with(['-', '–', '—']);
    // (An honorific written against the name goes with it: 田中さん。)
    let after = after.trim_start();
    let after = after
        .get(HONORIFICS.prefix_in(after).unwrap_or(0)..)
        .unwrap_or(after);
    let closes = !after.contains(COMMAS) && !after.chars().any(char::is_alphanumeric);
    // (A greeting glued to the name by its capital is one run with it:
    // "Hey Caroline, hope all's good!". Alone before a comma, a run is a
    // greeting only when a sentence goes on after it: "San Diego, please."
    // gives a place.)
    let goes_on = || after.split_whitespace().count() > 3;
    (closes && (set_off || words_before <= 1))
        || ((after.starts_with(COMMAS) || dashed)
            && (words_before == 1 || (words_before == 0 && goes_on())))
}

/// Whether a value's key is distinctive enough to stand for itself: three
/// letters or digits or more (`16:45`, `4th`, `37s`), not `3` or `10`,
/// which any line may hold for another reason, nor `three` or `zehn`.
pub(crate) fn distinctive(key: &str) -> bool {
    key.chars().filter(|c| c.is_alphanumeric()).count() >= 3 && !is_count(key)
}

/// Whether `word` is a count written in letters ([`COUNTS`]: `five`,
/// `zwei`, `cinco`, `二人`). Asked of every plain word, so an ASCII word
/// is lower-cased on the stack.
pub(crate) fn is_count(word: &str) -> bool {
    const LONGEST: usize = 16;
    if word.len() > LONGEST {
        return false;
    }
    if !word.is_ascii() {
        return COUNTS.has(&fold(word));
    }
    let mut buf = [0u8; LONGEST];
    let folded = &mut buf[..word.len()];
    folded.copy_from_slice(word.as_bytes());
    folded.make_ascii_lowercase();
    std::str::from_utf8(folded).is_ok_and(|w| COUNTS.has(w))
}

impl Term {
    /// Whether the term is a pair of ideographs ([`grams`]).
    pub(crate) fn is_gram(&self) -> bool {
        self.form == Form::Word
            && self.key.chars().count() == 2
            && self.key.chars().all(is_ideograph)
    }

    /// Whether the term says what it is: a distinctive key, or a label
    /// before it (`DATABASE_POOL_SIZE=40`, `Seats: 2`).
    pub(crate) fn speaks_for_itself(&self) -> bool {
        self.label.is_some() || distinctive(&self.key)
    }

    /// The shape of a number or a code, its characters' classes with each
    /// run folded (`17:15` and `6:30` are `0:0`, `4th` and `2nd` are `0a`):
    /// two values of one shape fill the same kind of slot. `None` for
    /// names, quoted strings and words.
    pub(crate) fn shape(&self) -> Option<String> {
        if !matches!(self.form, Form::Number | Form::Code) {
            return None;
        }
        let mut out = String::new();
        push_classes(&mut out, &self.key, |_| false);
        Some(out)
    }
}

/// Appends to `out` the classes of the characters of `key` (digits `0`,
/// letters `a`, anything else itself), each run of digits or of letters
/// folded into one, the characters `skip` says leaving no trace.
pub(crate) fn push_classes(out: &mut String, key: &str, skip: impl Fn(char) -> bool) {
    for c in key.chars() {
        let class = if c.is_numeric() {
            '0'
        } else if c.is_alphabetic() {
            'a'
        } else if skip(c) {
            continue;
        } else {
            c
        };
        if !out.ends_with(class) || !matches!(class, '0' | 'a') {
            out.push(class);
        }
    }
}

/// Scripts written without spaces between words.
pub(crate) fn is_unspaced_script(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x309F   // Hiragana
        | 0x30A0..=0x30FF // Katakana
        | 0x31F0..=0x31FF // Katakana extensions
        | 0xFF66..=0xFF9F // half-width Katakana
        | 0x3400..=0x4DBF // CJK extension A
        | 0x4E00..=0x9FFF // CJK unified ideographs
        | 0xF900..=0xFAFF // CJK compatibility
        | 0x0E00..=0x0E7F // Thai
    )
}

/// A character of Chinese or Japanese: an ideograph or kana.
pub(crate) fn is_cjk(c: char) -> bool {
    is_ideograph(c) || is_hiragana(c) || is_katakana(c)
}

/// The overlapping pairs of Chinese or Japanese characters of `text`
/// (`那兰`, `兰酒`, `酒楼`…), within each run of them: what the rarity
/// of a clause of text without spaces is counted by
/// ([`super::squeeze`]).
pub(crate) fn cjk_pairs(text: &str) -> impl Iterator<Item = &str> + '_ {
    let mut chars = text.char_indices().peekable();
    std::iter::from_fn(move || loop {
        let (i, c) = chars.next()?;
        let &(j, d) = chars.peek()?;
        if is_cjk(c) && is_cjk(d) {
            return Some(&text[i..j + d.len_utf8()]);
        }
    })
}

fn is_katakana(c: char) -> bool {
    matches!(c as u32, 0x30A0..=0x30FF | 0x31F0..=0x31FF | 0xFF66..=0xFF9F) && c != '・'
}

fn is_hiragana(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x309F)
}

pub(crate) fn is_ideograph(c: char) -> bool {
    matches!(c as u32, 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF)
}

/// The ideographs of `text`: what a message adds to the counts a pair of
/// them is weighed against (`Read::chars`, the pair's cohesion).
pub(crate) fn ideographs(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars().filter(|&c| is_ideograph(c))
}

/// The words of `line`: its whitespace-separated pieces, and two words a
/// typo glued with a mark that never joins a value's letters ("travel?I",
/// "date,time", "furnished?Is"): a comma, a semicolon, or a question or
/// exclamation mark before a capital, between two letters. Read as one
/// piece they were a code, a value kept for nothing. A piece that holds a
/// URL or a setting (`://`, `=`) is left whole (`search?q=…`).
pub(crate) fn words(line: &str) -> impl Iterator<Item = &str> + '_ {
    line.split_whitespace().flat_map(unglued)
}

/// `piece` cut where a typo glued two words (see [`words`]), without
/// allocating: every word of every line is read through it.
fn unglued(piece: &str) -> impl Iterator<Item = &str> + '_ {
    let whole = piece.contains("://") || piece.contains('=');
    let mut rest = Some(piece);
    std::iter::from_fn(move || {
        let text = rest?;
        let cut = if whole { None } else { glue_end(text) };
        match cut {
            Some(at) => {
                rest = Some(&text[at..]);
                Some(&text[..at])
            }
            None => {
                rest = None;
                Some(text)
            }
        }
    })
}

/// Where the first word a typo glued in `text` ends (after its mark).
fn glue_end(text: &str) -> Option<usize> {
    let spaced_letter = |c: char| c.is_alphabetic() && !is_unspaced_script(c);
    let mut prev: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let glued = prev.is_some_and(spaced_letter)
            && next.is_some_and(spaced_letter)
            && match c {
                ',' | ';' => true,
                '?' | '!' => next.is_some_and(char::is_uppercase),
                _ => false,
            };
        if glued {
            return Some(i + c.len_utf8());
        }
        prev = Some(c);
    }
    None
}

/// Characters that join the pieces of one value (`a/b`, `a_b`, `a@b`,
/// `1,249.90`, `host:port`, `KEY=value`, `A-448213`, `+49`).
fn is_joiner(c: char) -> bool {
    matches!(
        c,
        '/' | '\\' | '_' | '@' | '.' | ',' | ':' | '=' | '-' | '+' | '#' | '~' | '&' | '?' | '%'
    )
}

/// Signs a value may start or end with (currency, number sign, percent).
fn is_value_sign(c: char) -> bool {
    matches!(
        c,
        '#' | '$' | '€' | '£' | '¥' | '₹' | '₩' | '%' | '~' | '/' | '+' | '@'
    ) || (c as u32 >= 0x20A0 && c as u32 <= 0x20CF)
}

/// Punctuation trimmed off both ends of a whitespace-separated piece.
fn is_edge_punct(c: char) -> bool {
    !c.is_alphanumeric() && !is_value_sign(c) && !is_unspaced_script(c)
}

/// A piece that is a run of ideographs or katakana (a name's script).
fn is_name_run(piece: &Piece<'_>) -> bool {
    !piece.text.is_empty()
        && piece
            .text
            .chars()
            .all(|c| is_ideograph(c) || is_katakana(c))
}

/// A whitespace-separated piece without the punctuation at its ends.
pub(crate) fn core(piece: &str) -> &str {
    piece.trim_matches(is_edge_punct)
}

fn is_quote_open(c: char) -> Option<char> {
    match c {
        '"' => Some('"'),
        '“' => Some('”'),
        '„' => Some('“'),
        '«' => Some('»'),
        '「' => Some('」'),
        '『' => Some('』'),
        '`' => Some('`'),
        _ => None,
    }
}

/// A piece of a line between separators, before it becomes a term.
#[derive(Debug, Clone)]
struct Piece<'a> {
    text: &'a str,
    /// Its first letter is upper case (a Latin, Greek or Cyrillic capital).
    capital: bool,
    /// It ends a sentence or a clause (a following name run stops).
    ends_clause: bool,
    /// It starts a sentence (its capital says nothing).
    starts_sentence: bool,
    /// It is a label: `word:` or `"field":`.
    label: bool,
}

/// The candidate terms of `line`, each key once, in the order they stand.
pub(crate) fn terms(line: &str) -> Vec<Term> {
    let pieces = pieces(line);
    let mut out: Vec<Term> = Vec::new();
    let push = |out: &mut Vec<Term>, term: Term| {
        if term.key.is_empty() {
            return;
        }
        if let Some(old) = out.iter_mut().find(|t| t.key == term.key) {
            // A value seen as a word elsewhere in the line is a value.
            if old.form == Form::Word && term.form != Form::Word {
                *old = term;
            }
            return;
        }
        out.push(term);
    };
    for quoted in quoted(line) {
        push(
            &mut out,
            Term {
                key: fold(quoted),
                form: Form::Quoted,
                label: None,
                left: None,
                right: None,
                span: span_of(line, quoted),
            },
        );
    }
    let mut i = 0;
    while i < pieces.len() {
        let piece = &pieces[i];
        let label =
            (i > 0 && pieces[i - 1].label).then(|| fold(pieces[i - 1].text.trim_end_matches(':')));
        let left = (i > 0).then(|| left_neighbour(&pieces[i - 1])).flatten();
        let after_honorific =
            i > 0 && HONORIFICS.has(&fold(pieces[i - 1].text.trim_end_matches('.')));
        if piece.label {
            push(&mut out, word_term(line, piece.text.trim_end_matches(':')));
            i += 1;
            continue;
        }
        // A day, a month or a time of day is a value however it is
        // written ("today", "Friday" at a sentence's start, "明日").
        if CALENDAR.has(&fold(piece.text)) && !(piece.capital && run_len(&pieces, i) >= 2) {
            let right = pieces.get(i + 1).and_then(right_neighbour);
            push(
                &mut out,
                piece_term(line, piece.text, Form::Name, label, left, right),
            );
            i += 1;
            continue;
        }
        // In a script without spaces an honorific follows the name
        // (`鈴木 花子さん`, `田中様`): the runs of ideographs or katakana
        // right before it are the name.
        let name_run = is_name_run(piece);
        let suffix = name_run.then(|| HONORIFICS.suffix_in(piece.text)).flatten();
        if name_run
            && (suffix.is_some() || pieces.get(i + 1).is_some_and(|n| HONORIFICS.starts(n.text)))
        {
            let mut first = i;
            while first > 0 && is_name_run(&pieces[first - 1]) && !pieces[first - 1].label {
                first -= 1;
            }
            let start = span_of(line, pieces[first].text).0;
            let end = span_of(line, piece.text).1 - suffix.unwrap_or(0);
            // (The earlier runs were taken as words: they are the name's.)
            out.retain(|t| !(t.span.0 >= start && t.span.1 <= end));
            let label = (first > 0 && pieces[first - 1].label)
                .then(|| fold(pieces[first - 1].text.trim_end_matches(':')));
            let left = (first > 0)
                .then(|| left_neighbour(&pieces[first - 1]))
                .flatten();
            push(
                &mut out,
                Term {
                    key: fold(&line[start..end]),
                    form: Form::Name,
                    label,
                    left,
                    right: None,
                    span: (start, end),
                },
            );
            i += 1;
            continue;
        }
        // A run of capitalised words is one name. A sentence's first
        // word says nothing by its capital: a run it starts is a name from
        // its second word on (`Sounds Ok.` is no name, `Visit Pizza Hut`
        // names `Pizza Hut`), unless an honorific stands before it.
        if piece.capital && piece.starts_sentence && !after_honorific && run_len(&pieces, i) >= 2 {
            push(&mut out, word_term(line, piece.text));
            i += 1;
            continue;
        }
        if piece.capital && (!piece.starts_sentence || after_honorific) {
            let len = run_len(&pieces, i).max(1);
            if len == 1 && !after_honorific && after_article(&pieces, i) {
                push(&mut out, word_term(line, piece.text));
                i += 1;
                continue;
            }
            let start = span_of(line, piece.text).0;
            let end = span_of(line, pieces[i + len - 1].text).1;
            let right = pieces.get(i + len).and_then(right_neighbour);
            push(
                &mut out,
                Term {
                    key: fold(&line[start..end]),
                    form: Form::Name,
                    label,
                    left,
                    right,
                    span: (start, end),
                },
            );
            i += len;
            continue;
        }
        let right = pieces.get(i + 1).and_then(right_neighbour);
        // A labelled word is the label's value.
        let form = value_form(piece.text).or(label.as_ref().map(|_| Form::Word));
        if let Some(form) = form {
            let form = if form == Form::Word && (label.is_some() || after_honorific) {
                Form::Name
            } else {
                form
            };
            if form != Form::Word {
                push(
                    &mut out,
                    piece_term(line, piece.text, form, label, left, right),
                );
                i += 1;
                continue;
            }
        }
        if is_gram_run(piece.text) {
            for gram in grams(piece.text) {
                push(&mut out, word_term(line, gram));
            }
        } else if is_word(piece.text) {
            push(&mut out, word_term(line, piece.text));
        }
        i += 1;
    }
    joined_values(line, out)
}

/// Whether a term may be one piece of a value written in several
/// (`+49 203 613 6375`, `11 February 2027`, `GWC 6761`, `12 345,00`):
/// a number, a short code (a currency, a carrier, a plate's letters) or
/// a word of the calendar.
fn joins(t: &Term) -> bool {
    match t.form {
        Form::Number => true,
        Form::Code => t.key.chars().count() <= 4,
        Form::Name => CALENDAR.has(&t.key),
        _ => false,
    }
}

/// A time of day (`16:45`, `6.30pm`): a value of its own beside a date,
/// so that a changed time is seen as one.
fn is_time(t: &Term) -> bool {
    t.form == Form::Number && t.key.contains(':')
}

/// Whether what stands between two pieces of one value is only a space
/// (a thin or no-break one too), or, beside a word of the calendar, a
/// short lower-case word that dates are written with (`5 de junio`,
/// `the 4th of July`).
fn joining_gap(gap: &str, calendar: bool) -> bool {
    let spaces =
        |s: &str| !s.is_empty() && s.chars().all(|c| matches!(c, ' ' | '\u{a0}' | '\u{202f}'));
    if spaces(gap) && gap.chars().count() <= 2 {
        return true;
    }
    // (`3. Oktober`: a day's ordinal point.)
    if calendar && gap == ". " {
        return true;
    }
    calendar
        && gap.split(' ').filter(|w| !w.is_empty()).count() == 1
        && gap.starts_with(' ')
        && gap.ends_with(' ')
        && gap.trim().chars().count() <= 2
        && gap.trim().chars().all(char::is_lowercase)
}

/// The terms of a line with the pieces of one value, written apart,
/// joined into one term: a number in groups, a date of day, month and
/// year, a code and its number. Apart, each piece is common in the
/// workstream (`2027`, `February`, `+49`) and the value itself is nowhere:
/// neither rare nor whole when its line is cut to its values. Only pieces
/// a space apart join (`10 and 12`, `10, 12` stay two), at least one of
/// them a number.
fn joined_values(line: &str, mut out: Vec<Term>) -> Vec<Term> {
    let mut order: Vec<usize> = (0..out.len())
        .filter(|&k| out[k].form != Form::Quoted)
        .collect();
    order.sort_by_key(|&k| out[k].span.0);
    let mut merged: Vec<(usize, usize)> = Vec::new();
    let mut k = 0;
    while k < order.len() {
        let first = order[k];
        let mut last = k;
        let mut numbers = usize::from(out[first].form == Form::Number);
        while let Some(&next) = order.get(last + 1) {
            let (a, b) = (&out[order[last]], &out[next]);
            let calendar = a.form == Form::Name || b.form == Form::Name;
            let gap = line.get(a.span.1..b.span.0).unwrap_or("x");
            // (A word of the calendar stands beside a day, a year or a
            // time, not beside a phone number's groups.)
            let short = |t: &Term| t.form != Form::Number || t.key.chars().count() <= 5;
            if !(joins(a) && joins(b) && joining_gap(gap, calendar))
                || (a.form == Form::Name && b.form == Form::Name)
                || (calendar && !(short(a) && short(b)))
                || (calendar && (is_time(a) || is_time(b)))
                || (b.form == Form::Name && numbers > 2)
            {
                break;
            }
            numbers += usize::from(b.form == Form::Number);
            last += 1;
        }
        if last > k && numbers >= 1 {
            merged.push((k, last));
        }
        k = last + 1;
    }
    if merged.is_empty() {
        return out;
    }
    let mut gone = vec![false; out.len()];
    for &(from, to) in &merged {
        let (a, b) = (order[from], order[to]);
        let span = (out[a].span.0, out[b].span.1);
        let Some(text) = line.get(span.0..span.1) else {
            continue;
        };
        let parts = &order[from..=to];
        // (A code before the number names it, `GWC 6761`, `HTTP 500`: a
        // code; letters after it are its unit, `151,48 JPY`: a number.)
        let form = if out[a].form == Form::Code {
            Form::Code
        } else {
            Form::Number
        };
        let right = out[b].right.clone();
        for &p in &parts[1..] {
            gone[p] = true;
        }
        let t = &mut out[a];
        t.key = fold(text);
        t.form = form;
        t.right = right;
        t.span = span;
    }
    let mut k = 0;
    out.retain(|_| {
        k += 1;
        !gone[k - 1]
    });
    // (A joined value may now equal a term said apart elsewhere in the
    // line: each key once.)
    let mut seen = rustc_hash::FxHashSet::default();
    out.retain(|t| seen.insert(t.key.clone()));
    out
}

/// A run of ideographs longer than a word usually is: in Chinese (and in
/// Japanese kanji compounds) a clause is one run, and a name stands
/// inside it (`给您推荐鲜鱼口老字号美食街`). Counted whole, every clause is
/// a word said once, and rarity says nothing.
fn is_gram_run(text: &str) -> bool {
    text.chars().all(is_ideograph) && text.chars().nth(2).is_some()
}

/// The overlapping pairs of characters of a run (`鲜鱼`, `鱼口`, `口老`…):
/// how text without spaces is indexed for search, since no word list is
/// needed to find them. The pairs common in the workstream (`推荐`,
/// `酒店`) sink by their rarity as any common word does; a name's pairs
/// are rare.
fn grams(text: &str) -> impl Iterator<Item = &str> + '_ {
    let at: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect();
    (0..at.len().saturating_sub(2)).map(move |k| &text[at[k]..at[k + 2]])
}

/// The term of one piece of `line`, with what labels its slot.
fn piece_term(
    line: &str,
    text: &str,
    form: Form,
    label: Option<String>,
    left: Option<String>,
    right: Option<String>,
) -> Term {
    Term {
        key: fold(text),
        form,
        label,
        left,
        right,
        span: span_of(line, text),
    }
}

fn word_term(line: &str, text: &str) -> Term {
    Term {
        key: fold(text),
        form: Form::Word,
        label: None,
        left: None,
        right: None,
        span: span_of(line, text),
    }
}

/// Where `piece`, a slice of `line`, stands in it.
fn span_of(line: &str, piece: &str) -> (usize, usize) {
    let start = (piece.as_ptr() as usize)
        .saturating_sub(line.as_ptr() as usize)
        .min(line.len());
    (start, (start + piece.len()).min(line.len()))
}

/// A word long enough to be a candidate.
fn is_word(text: &str) -> bool {
    let chars = text.chars().filter(|c| c.is_alphanumeric()).count();
    if text.chars().any(is_unspaced_script) {
        chars >= 2 && !text.chars().all(is_hiragana)
    } else {
        chars >= 3
    }
}

/// The neighbour of a value, as a slot's context: a plain word, never
/// another value.
fn neighbour(piece: &Piece<'_>) -> Option<String> {
    let t = piece.text.trim_end_matches(':');
    (value_form(t).is_none_or(|f| f == Form::Word) && !t.is_empty()).then(|| fold(t))
}

/// The neighbour before a value: of a run of ideographs, its last pair
/// of characters (`游玩时长在` before `1小时` and `时长是` before `2小时`
/// both end in a word for duration: a clause is no neighbour, the word
/// next to the value is).
fn left_neighbour(piece: &Piece<'_>) -> Option<String> {
    if is_gram_run(piece.text) {
        return grams(piece.text).last().map(str::to_owned);
    }
    neighbour(piece)
}

/// The neighbour after a value: of a run of ideographs, its first pair.
fn right_neighbour(piece: &Piece<'_>) -> Option<String> {
    if is_gram_run(piece.text) {
        return grams(piece.text).next().map(str::to_owned);
    }
    neighbour(piece)
}

/// Whether piece `i` follows an article of a language that capitalises
/// its nouns ([`NOUN_ARTICLES`]), lower-case words between them: then its
/// capital marks a noun, not a name.
fn after_article(pieces: &[Piece], i: usize) -> bool {
    for j in (0..i).rev().take(3) {
        let p = &pieces[j];
        if p.ends_clause {
            return false;
        }
        if NOUN_ARTICLES.has(&fold(p.text)) {
            return true;
        }
        if p.capital || p.label || !p.text.chars().all(char::is_alphabetic) {
            return false;
        }
    }
    false
}

/// How many capitalised pieces stand in a row from `i`, within a clause.
fn run_len(pieces: &[Piece<'_>], i: usize) -> usize {
    let mut n = 0;
    while let Some(p) = pieces.get(i + n) {
        if !p.capital || p.label || (n > 0 && p.starts_sentence) {
            break;
        }
        n += 1;
        if p.ends_clause {
            break;
        }
    }
    n
}

/// The form of a piece that is a value, `Some(Form::Word)` for a word of
/// another script (a name only beside a label or an honorific), `None` for
/// a plain word.
pub(crate) fn value_form(text: &str) -> Option<Form> {
    let mut digits = 0;
    let mut letters = 0;
    let mut upper = 0;
    let mut lower_then_upper = false;
    let mut joined = false;
    let mut signs = 0;
    let mut prev: Option<char> = None;
    let mut katakana = true;
    let mut unspaced = false;
    let mut uncased = false;
    let chars: Vec<char> = text.chars().collect();
    for (k, &c) in chars.iter().enumerate() {
        if c.is_numeric() {
            digits += 1;
        } else if c.is_alphabetic() {
            letters += 1;
            if is_unspaced_script(c) {
                unspaced = true;
            } else if !c.is_uppercase() && !c.is_lowercase() {
                uncased = true;
            }
            if c.is_uppercase() {
                upper += 1;
                if prev.is_some_and(char::is_lowercase) {
                    lower_then_upper = true;
                }
            }
        } else if is_value_sign(c) {
            signs += 1;
        }
        // A hyphen alone joins words (`well-known`), not a value.
        if is_joiner(c)
            && c != '-'
            && k > 0
            && chars[k - 1].is_alphanumeric()
            && chars.get(k + 1).is_some_and(|n| n.is_alphanumeric())
        {
            joined = true;
        }
        if !is_katakana(c) {
            katakana = false;
        }
        prev = Some(c);
    }
    if digits > 0 {
        // Digits with a few small letters or counters around them are a
        // number (`3pm`, `18h05`, `15日`); with capitals, a code.
        let counters = chars.iter().filter(|&&c| is_ideograph(c)).count();
        return Some(if upper == 0 && letters - counters <= 3 {
            Form::Number
        } else {
            Form::Code
        });
    }
    if letters == 0 {
        return None;
    }
    // A count in letters is a number as much as its digits ("five pm",
    // "zwei Personen", "tres baños").
    if signs == 0 && !joined && is_count(text) {
        return Some(Form::Number);
    }
    if katakana && letters >= 2 {
        return Some(Form::Name);
    }
    if unspaced || uncased {
        return Some(Form::Word);
    }
    if joined || lower_then_upper || signs > 0 || (upper >= 2 && upper == letters) {
        return Some(Form::Code);
    }
    None
}

/// The names of `line` that stand right before a number or a code, a
/// space between (`Zimmer 2033`, `Gate B12`, `Room 5179`): the word that
/// names what the value is, case-folded.
pub(crate) fn value_labels(line: &str) -> Vec<String> {
    let terms = terms(line);
    terms
        .iter()
        .filter(|n| n.form == Form::Name)
        .filter(|n| {
            terms.iter().any(|v| {
                matches!(v.form, Form::Number | Form::Code)
                    && line
                        .get(n.span.1..v.span.0)
                        .is_some_and(|gap| !gap.is_empty() && gap.trim().is_empty())
            })
        })
        .map(|n| n.key.clone())
        .collect()
}

/// Case-folded, for comparing terms.
pub(crate) fn fold(text: &str) -> String {
    if text.is_ascii() {
        text.to_ascii_lowercase()
    } else {
        text.chars().flat_map(char::to_lowercase).collect()
    }
}

/// Quoted spans of 2–80 characters.
pub(crate) fn quoted(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut it = line.char_indices();
    while let Some((at, c)) = it.next() {
        let Some(close) = is_quote_open(c) else {
            continue;
        };
        // An opening quote starts a word.
        if line[..at]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric)
        {
            continue;
        }
        let start = at + c.len_utf8();
        if let Some(len) = line[start..].find(close) {
            let inner = &line[start..start + len];
            let n = inner.chars().count();
            if (2..=80).contains(&n) && !inner.contains('\n') {
                out.push(inner.trim());
            }
            // Go on after the closing quote.
            for _ in inner.chars().chain(std::iter::once(close)) {
                it.next();
            }
        }
    }
    out
}

/// The line cut into pieces: at white space, and in scripts without
/// spaces at each change of script (digits stay with the ideographs that
/// count them, as in `3月15日`).
fn pieces(line: &str) -> Vec<Piece<'_>> {
    let mut out: Vec<Piece<'_>> = Vec::new();
    // (Pieces that end with a colon, in a spaced script.)
    let mut colon_labels: Vec<usize> = Vec::new();
    let mut sentence_start = true;
    for raw in words(line) {
        let trimmed = raw.trim_start_matches(is_edge_punct);
        let trimmed = trimmed.trim_end_matches(|c: char| is_edge_punct(c) && c != ':');
        // (A value before a colon is a value: `16C: my knee`.)
        let label = trimmed.ends_with(':')
            && trimmed.len() > 1
            && !trimmed[..trimmed.len() - 1].contains(':')
            && !trimmed.chars().any(char::is_numeric);
        let core = trimmed.trim_end_matches(':');
        let last = raw.chars().next_back();
        // (A day's or a month's number before a point is an ordinal, `am
        // 3. Oktober`; a longer number ends its sentence, `in 2027. Sure`.)
        let ordinal = core.len() <= 2 && core.chars().all(|c| c.is_ascii_digit());
        let ends_sentence = matches!(last, Some('.' | '!' | '?' | '。' | '！' | '？'))
            && (!core.ends_with(|c: char| c.is_ascii_digit()) || !ordinal);
        let ends_clause = ends_sentence || matches!(last, Some(',' | ';' | ':' | ')' | '、'));
        if core.is_empty() {
            sentence_start |= ends_sentence;
            continue;
        }
        if let Some((key, _)) = core.split_once('=').filter(|(k, v)| {
            !k.is_empty()
                && !v.is_empty()
                && k.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        }) {
            // KEY=value: the key labels the whole piece.
            out.push(Piece {
                text: key,
                capital: false,
                ends_clause: false,
                starts_sentence: false,
                label: true,
            });
            let value = &core[key.len() + 1..];
            out.push(Piece {
                text: value,
                capital: false,
                ends_clause,
                starts_sentence: false,
                label: false,
            });
            sentence_start = ends_sentence;
            continue;
        }
        if core.chars().any(is_unspaced_script) {
            for run in script_runs(core) {
                // A run right before a colon labels what follows it
                // (`電話：05-1417-2152`).
                let end = span_of(core, run).1;
                let labels =
                    core[end..].starts_with([':', '：']) && !run.chars().any(char::is_numeric);
                out.push(Piece {
                    text: run,
                    capital: false,
                    ends_clause: false,
                    starts_sentence: false,
                    label: labels,
                });
            }
            if let Some(p) = out.last_mut() {
                p.ends_clause = ends_clause;
                p.label = label;
            }
            sentence_start = ends_sentence;
            continue;
        }
        let first = core.chars().next();
        let capital = first.is_some_and(char::is_uppercase)
            && core.chars().skip(1).any(char::is_lowercase)
            && !FUNCTION_CAPITALS.has(&fold(core))
            && !CLOSINGS.has(&fold(core));
        out.push(Piece {
            text: core,
            capital,
            ends_clause,
            starts_sentence: sentence_start,
            label,
        });
        if label {
            colon_labels.push(out.len() - 1);
        }
        sentence_start = ends_sentence;
    }
    // A label's value is short ("Seats: 2", "Name: Kwame Okafor", "To:
    // San Francisco International Airport"); a longer clause after it is
    // a sentence ("Noor: We go with IONOS for hosting, …", "Nota: Lanzamos
    // Helix el lunes"): the word before the colon labels nothing, and the
    // clause starts a sentence, so its first word is no name.
    for i in colon_labels {
        let words = out[i + 1..]
            .iter()
            .position(|p| p.ends_clause)
            .map_or(out.len() - i - 1, |k| k + 1);
        if words > LABEL_VALUE_WORDS {
            out[i].label = false;
            if let Some(next) = out.get_mut(i + 1) {
                next.starts_sentence = true;
            }
        }
    }
    out
}

/// The most words a label's value runs to, up to the end of its clause.
const LABEL_VALUE_WORDS: usize = 4;

/// What kind of run a character of an unspaced piece belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    Ideograph,
    Kana,
    Katakana,
    Other,
    Sep,
}

fn run_of(c: char) -> Run {
    if is_ideograph(c) {
        Run::Ideograph
    } else if is_katakana(c) {
        Run::Katakana
    } else if is_hiragana(c) || (c as u32 >= 0x0E00 && c as u32 <= 0x0E7F) {
        Run::Kana
    } else if c.is_alphanumeric() || is_joiner(c) || is_value_sign(c) {
        Run::Other
    } else {
        Run::Sep
    }
}

/// Splits a piece with unspaced script into runs of one script; a number
/// and the ideographs right after it (its counters or units: `15日`,
/// `128,000円`) stay one run, and so do consecutive such numbers
/// (`2026年3月15日`). Honorifics after a name start a run of their own.
fn script_runs(piece: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut current: Option<Run> = None;
    // Within a number-with-counters run.
    let mut counted = false;
    let chars: Vec<(usize, char)> = piece.char_indices().collect();
    for (k, &(at, c)) in chars.iter().enumerate() {
        let run = run_of(c);
        let digit = c.is_ascii_digit() || matches!(c as u32, 0xFF10..=0xFF19);
        let continues = match current {
            None => false,
            Some(Run::Sep) => false,
            Some(_) if counted => {
                // After digits: counters, further digits and what joins
                // them (`05-1417-2152`, `10:30`) continue.
                digit || run == Run::Other || (run == Run::Ideograph && chars[k - 1].1.is_numeric())
            }
            Some(prev) => prev == run && run != Run::Sep,
        };
        if !continues {
            if current.is_some_and(|r| r != Run::Sep) && at > start {
                out.push(&piece[start..at]);
            }
            start = at;
            counted = digit;
        } else if digit {
            counted = true;
        }
        current = Some(run);
    }
    if current.is_some_and(|r| r != Run::Sep) && start < piece.len() {
        out.push(&piece[start..]);
    }
    // A run that only holds an honorific, or kana, stays (neighbours).
    out.retain(|r| !r.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(line: &str) -> Vec<(String, Form)> {
        terms(line)
            .into_iter()
            .filter(|t| t.form.is_value())
            .map(|t| (t.key, t.form))
            .collect()
    }

    fn has(line: &str, key: &str, form: Form) {
        let got = values(line);
        assert!(
            got.iter().any(|(k, f)| k == key && *f == form),
            "{key:?} as {form:?} not in {got:?} of {line:?}"
        );
    }

    #[test]
    fn a_value_written_in_pieces_is_one_value_in_each_language() {
        for (line, key, form) in [
            (
                "The wedding is on 11 February 2027. Sure.",
                "11 february 2027",
                Form::Number,
            ),
            (
                "Call the hotel on +44 862 704 7923 today.",
                "+44 862 704 7923",
                Form::Number,
            ),
            ("The plate is GWC 6761.", "gwc 6761", Form::Code),
            (
                "Die Kontrolle ist am 3. Oktober 2027.",
                "3. oktober 2027",
                Form::Number,
            ),
            ("Wir zahlen 1.150 EUR pro Monat.", "1.150 eur", Form::Number),
            (
                "El día de la mudanza es el 5 de junio de 2028.",
                "5 de junio de 2028",
                Form::Number,
            ),
            (
                "Le total est de 12\u{202f}345,00 € TTC.",
                "12\u{202f}345,00",
                Form::Number,
            ),
            (
                "Le mariage a lieu le 6 janvier 2027.",
                "6 janvier 2027",
                Form::Number,
            ),
            ("電話は 03 1234 5678 です。", "03 1234 5678", Form::Number),
        ] {
            has(line, key, form);
        }
        // Apart, or past a comma, they are two; a time stays its own value
        // beside a date, and a calendar word is no phone number's group.
        for (line, key) in [
            ("Tables for 10 and 12 please.", "10"),
            ("Tables for 10, 12 please.", "12"),
            ("On 8 March at 16:45 please.", "16:45"),
            ("On 8 March at 16:45 please.", "8 march"),
            ("Call +49 203 613 6375 today.", "+49 203 613 6375"),
        ] {
            assert!(
                values(line).iter().any(|(k, _)| k == key),
                "{key:?} in {:?}",
                values(line)
            );
        }
    }

    #[test]
    fn two_words_a_typo_glued_are_no_value_and_a_value_stays_whole() {
        for line in [
            "What date and time do you want to travel?I can check.",
            "Tell me the date,time and place.",
            "What is the phone number?Is it furnished?",
            "Sure;see you there",
        ] {
            assert!(values(line).is_empty(), "{:?} in {line:?}", values(line));
        }
        has("The fare is $1,249.90 one way.", "$1,249.90", Form::Number);
        has(
            "Open https://example.com/search?q=Rust,Go first.",
            "https://example.com/search?q=rust,go",
            Form::Code,
        );
        has("Call Smith,John at desk B12.", "b12", Form::Code);
        assert_eq!(
            words("travel?I date,time ok? A,b").collect::<Vec<_>>(),
            ["travel?", "I", "date,", "time", "ok?", "A,", "b"]
        );
    }

    #[test]
    fn english_values_by_form() {
        let line = "Order #A-448213 for EUR 1,249.90 ships to Pizza Hut, San Jose on 2026-03-15 at 7:30 pm.";
        has(line, "#a-448213", Form::Code);
        // (A code and the number after it are one value.)
        has(line, "eur 1,249.90", Form::Code);
        has(line, "pizza hut", Form::Name);
        has(line, "san jose", Form::Name);
        has(line, "2026-03-15", Form::Number);
        has(line, "7:30", Form::Number);
        has(
            "Mail bob.smith@example.com or see https://x.io/a?b=1",
            "bob.smith@example.com",
            Form::Code,
        );
        has(
            "run cargo test in src/main.rs with RUST_LOG=debug",
            "src/main.rs",
            Form::Code,
        );
        has(
            "run cargo test in src/main.rs with RUST_LOG=debug",
            "debug",
            Form::Name,
        );
        has("call parseConfig() first", "parseconfig", Form::Code);
        has("the flag is \"blue-green\" now", "blue-green", Form::Quoted);
    }

    #[test]
    fn german_values_by_form() {
        let line = "Die Rechnung über 1.150,00 € geht an Frau Müller, IBAN DE89370400440532013000.";
        has(line, "1.150,00", Form::Number);
        has(line, "frau müller", Form::Name);
        has(line, "de89370400440532013000", Form::Code);
        has(
            "Treffen am 15.03.2026 um 14:00 im Hotel Adlon",
            "hotel adlon",
            Form::Name,
        );
        has(
            "Treffen am 15.03.2026 um 14:00 im Hotel Adlon",
            "15.03.2026",
            Form::Number,
        );
    }

    #[test]
    fn a_german_noun_after_its_article_is_no_name() {
        // German capitalises every noun: after an article (and its
        // adjectives) one capitalised word is the noun.
        for line in [
            "Die Besprechung war lang und anstrengend.",
            "Mein Chef findet die Idee gut.",
            "Ich habe mit meiner Schwester ein neues Konzept besprochen.",
        ] {
            assert_eq!(values(line), [], "{line}");
        }
        // A name still names: after a preposition, in a run, after an
        // honorific, or where a language capitalises only names.
        let line = "Ich brauche ein Hotel in Berlin für die Deutsche Bank.";
        has(line, "berlin", Form::Name);
        has(line, "deutsche bank", Form::Name);
        assert!(!values(line).iter().any(|(k, _)| k == "hotel"));
        has("Bitte ruf die Frau Müller an.", "frau müller", Form::Name);
        has("We stayed at the Hilton.", "hilton", Form::Name);
    }

    #[test]
    fn japanese_values_by_form() {
        let line = "山田さんの予約は2026年3月15日、金額は¥128,000です。ホテルはヒルトン東京。";
        has(line, "2026年3月15日", Form::Number);
        has(line, "¥128,000", Form::Number);
        has(line, "ヒルトン", Form::Name);
        // A name is what an honorific follows, family and given name.
        has(line, "山田", Form::Name);
        has("担当者は鈴木 花子さんです。", "鈴木 花子", Form::Name);
        has("田中様からの請求書です", "田中", Form::Name);
        has("担当: 佐藤", "佐藤", Form::Name);
        // A full-width colon labels as a colon does; a phone stays whole.
        let phone = terms("電話：05-1417-2152")
            .into_iter()
            .find(|t| t.form == Form::Number);
        assert_eq!(
            phone.map(|t| (t.key, t.label)),
            Some(("05-1417-2152".to_owned(), Some("電話".to_owned())))
        );
    }

    #[test]
    fn a_run_of_ideographs_is_cut_into_its_pairs_of_characters() {
        let keys: Vec<String> = terms("为您推荐鲜鱼口，人均消费75元。")
            .into_iter()
            .map(|t| t.key)
            .collect();
        for pair in [
            "为您", "您推", "推荐", "荐鲜", "鲜鱼", "鱼口", "人均", "均消", "消费",
        ] {
            assert!(keys.iter().any(|k| k == pair), "{pair} not in {keys:?}");
        }
        assert!(!keys.iter().any(|k| k == "为您推荐鲜鱼口"), "{keys:?}");
        has("为您推荐鲜鱼口，人均消费75元。", "75元", Form::Number);
        // A value's neighbours are the pairs next to it, not the clauses.
        let price = terms("我想找人均消费75元左右的餐馆")
            .into_iter()
            .find(|t| t.key == "75元");
        assert_eq!(
            price.map(|t| (t.left, t.right)),
            Some((Some("消费".to_owned()), Some("左右".to_owned())))
        );
        // A word of two is itself; kana and katakana runs stay whole.
        let keys: Vec<String> = terms("東京のホテル").into_iter().map(|t| t.key).collect();
        assert_eq!(keys, ["東京", "ホテル"]);
    }

    #[test]
    fn spanish_values_by_form() {
        let line = "La reserva 4471-B en el Hotel Alameda es para el 3 de mayo, total 245,50 €.";
        has(line, "4471-b", Form::Code);
        has(line, "hotel alameda", Form::Name);
        has(line, "245,50", Form::Number);
        has(
            "Contacto: Sra. García, teléfono +34 612 345 678",
            "garcía",
            Form::Name,
        );
        has(
            "Contacto: Sra. García, teléfono +34 612 345 678",
            "+34 612 345 678",
            Form::Number,
        );
    }

    #[test]
    fn french_values_by_form() {
        let line = "Le vol AF1234 part de Paris-Orly le 12/04 à 18h05 ; référence « XK9-PLM ».";
        has(line, "af1234", Form::Code);
        has(line, "paris-orly", Form::Name);
        has(line, "12/04", Form::Number);
        has(line, "18h05", Form::Number);
        has(line, "xk9-plm", Form::Quoted);
        has(
            "Rendez-vous avec Mme Dubois à Lyon",
            "mme dubois",
            Form::Name,
        );
    }

    #[test]
    fn a_sentence_start_alone_is_no_name() {
        assert!(values("Please check the logs.").is_empty());
        assert!(values("We really need to do something about it.").is_empty());
    }

    #[test]
    fn labels_and_neighbours_mark_the_slot() {
        let t = terms("party size: 4, time 7 pm");
        let four = t.iter().find(|t| t.key == "4").unwrap();
        assert_eq!(four.label.as_deref(), Some("size"));
        let seven = t.iter().find(|t| t.key == "7").unwrap();
        assert_eq!(seven.left.as_deref(), Some("time"));
        assert_eq!(seven.right.as_deref(), Some("pm"));
        let kv = terms("set MAX_CONN=64 please");
        let v = kv.iter().find(|t| t.key == "64").unwrap();
        assert_eq!(v.label.as_deref(), Some("max_conn"));
    }

    #[test]
    fn days_months_and_times_of_day_are_values_in_every_language() {
        for (line, key) in [
            ("Let's book it for today at noon.", "today"),
            ("Tomorrow works, the morning is best.", "tomorrow"),
            ("Können wir das auf Freitag legen?", "freitag"),
            ("Treffen wir uns morgen früh.", "morgen"),
            ("予約は明日の午後にお願いします", "明日"),
            ("¿Podemos vernos el martes por la tarde?", "martes"),
            ("On se voit demain soir, vers 20h.", "demain"),
        ] {
            let got = values(line);
            assert!(
                got.iter().any(|(k, _)| k == key),
                "{key:?} not in {got:?} of {line:?}"
            );
        }
    }

    #[test]
    fn counts_in_letters_are_numbers_in_every_language() {
        for (line, key) in [
            ("Lets eat at five pm.", "five"),
            ("Wir sind zwei Personen.", "zwei"),
            ("予約は二人でお願いします", "二人"),
            ("El piso tiene tres baños.", "tres"),
            ("Nous restons deux nuits.", "deux"),
        ] {
            has(line, key, Form::Number);
            // (A count alone says no more than a digit: `five` is no
            // `16:45`.)
            assert!(!distinctive(key), "{key}");
        }
        // "one" is as often a pronoun as a count.
        assert!(values("I'll take this one.").is_empty());
    }

    #[test]
    fn a_closing_word_written_with_a_capital_is_no_name() {
        assert!(
            values("No, Thanks").is_empty(),
            "{:?}",
            values("No, Thanks")
        );
        assert!(values("Nein, Danke").is_empty());
    }

    #[test]
    fn a_value_before_a_colon_is_a_value_not_a_label() {
        let t = terms("Actually make it an aisle seat, 16C: my knee.");
        let seat = t.iter().find(|t| t.key == "16c").unwrap();
        assert_eq!(seat.form, Form::Code);
        assert!(t.iter().all(|t| t.label.as_deref() != Some("16c")), "{t:?}");
    }

    /// A speaker's name before a colon labels a sentence, not a value:
    /// the first word of what a pasted transcript's speaker said is no
    /// name (before, "Noor: We go with …" gave the name `we`, and a later
    /// "Itziar: We go with …" replaced it), in any language. A short value
    /// after a label stays the label's.
    #[test]
    fn a_speakers_sentence_after_a_colon_is_no_labelled_value() {
        for (line, word) in [
            (
                "Noor: We go with IONOS for hosting, contract C-45739.",
                "we",
            ),
            (
                "Joaquín: Das Budget für Fjord ist auf 425.000 € gedeckelt.",
                "das",
            ),
            ("Priya: Lanzamos Helix v9.10.8 el 21 de agosto.", "lanzamos"),
        ] {
            let t = terms(line);
            assert!(
                t.iter()
                    .all(|t| !t.key.starts_with(word) || t.form == Form::Word),
                "{word:?} read as a value in {t:?}"
            );
            assert!(
                t.iter()
                    .any(|t| t.form == Form::Code || t.form == Form::Number),
                "{t:?}"
            );
        }
        let t = terms("Status: confirmed, Name: Kwame Okafor");
        let status = t.iter().find(|t| t.key == "confirmed").unwrap();
        assert_eq!(
            (status.form, status.label.as_deref()),
            (Form::Name, Some("status"))
        );
        assert!(
            t.iter()
                .any(|t| t.key == "kwame okafor" && t.form == Form::Name),
            "{t:?}"
        );
    }
}
