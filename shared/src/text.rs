//! Text keys shared by the state and the user's statements: one place, so
//! neither module imports the other for it.

/// Lower-cases, collapses white space and trims trailing punctuation, so
/// "Use Postgres." and "use  postgres" are the same item.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        // ASCII words (most) are lower-cased in place, without the
        // per-char Unicode case mapping.
        if word.is_ascii() {
            let start = out.len();
            out.push_str(word);
            out[start..].make_ascii_lowercase();
        } else {
            out.extend(word.chars().flat_map(char::to_lowercase));
        }
    }
    let trimmed = out.trim_end_matches(['.', ',', ';', ':', '!']).len();
    out.truncate(trimmed);
    out
}

/// Whether `word` is one of `list`, as `list.contains(&word)`, comparing
/// the length and the first byte before the bytes: the statement rules
/// ask this of nearly every word, against lists of dozens, and most
/// candidates differ in their first byte.
#[inline]
pub(crate) fn is_one_of(word: &str, list: &[&str]) -> bool {
    let first = word.as_bytes().first();
    list.iter()
        .any(|w| w.len() == word.len() && w.as_bytes().first() == first && *w == word)
}

/// Lines a paragraph needs to be a record.
const RECORD_LINES: usize = 3;

/// The label of `line` when it is a `label: value` line of a record
/// (`Total due: $1,249.90`, `Anschrift: Hauptstraße 62`,
/// `電話：05-1417-2152`): a label of at most four words and no digits, then
/// a colon and something after it. A URL's `https:` is no label.
fn record_label(line: &str) -> Option<&str> {
    let line = line.trim();
    let (at, colon) = line.char_indices().find(|&(_, c)| c == ':' || c == '：')?;
    let label = line[..at].trim();
    let rest = line[at + colon.len_utf8()..].trim();
    (!label.is_empty()
        && !rest.is_empty()
        && !rest.starts_with("//")
        && label.split_whitespace().count() <= 4
        && label.chars().count() <= 40
        && !label.chars().any(|c| c.is_numeric())
        && label.chars().any(char::is_alphabetic))
    .then_some(label)
}

/// Whether the `label: value` lines of a paragraph are a conversation's
/// turns (a pasted transcript, a chat log, minutes by speaker): two
/// labels or more, and one said again. A record's fields are each
/// labelled once; speakers take turns.
fn is_transcript(labels: &[&str]) -> bool {
    let distinct: std::collections::BTreeSet<&str> = labels.iter().copied().collect();
    distinct.len() >= 2 && distinct.len() < labels.len()
}

/// Characters that part the cells of a table's row: a Markdown or ASCII
/// table's `|`, a TSV's tab, a CSV's `,` or `;`.
const CELL_SEPARATORS: [char; 4] = ['|', '\t', ';', ','];

/// For each of `lines`, whether it is a row of a table: one of at least
/// [`RECORD_LINES`] lines in a row that each hold the same number (two or
/// more) of one [`CELL_SEPARATORS`] character (`| Test | Result | Unit |`,
/// `2026-03-04,Hotel Lumen,26.32 EUR`; a comma or a semicolon with no
/// space after it).
fn table_rows(lines: &[&str]) -> Vec<bool> {
    let mut rows = vec![false; lines.len()];
    for sep in CELL_SEPARATORS {
        // (A comma or a semicolon parts cells when no space follows it:
        // after one with a space, it parts a sentence's clauses.)
        let spaced = |l: &str| {
            matches!(sep, ',' | ';')
                && l.match_indices(sep)
                    .any(|(at, _)| l[at + 1..].starts_with(char::is_whitespace))
        };
        let cells: Vec<usize> = lines
            .iter()
            .map(|l| if spaced(l) { 0 } else { l.matches(sep).count() })
            .collect();
        let mut i = 0;
        while i < lines.len() {
            let n = cells[i];
            let run = cells[i..].iter().take_while(|&&c| c == n).count();
            if n >= 2 && run >= RECORD_LINES {
                rows[i..i + run].iter_mut().for_each(|r| *r = true);
            }
            i += run.max(1);
        }
    }
    rows
}

/// For each line of `text` (as [`str::lines`] cuts it), whether it stands
/// in something pasted, not said: the user's statements frame no value of
/// it as a request ([`crate::stated`]), and the evidence fills no slot with
/// it. Two forms, whatever the language:
/// - **a record** (an invoice, a form, a ticket): a paragraph (lines
///   between blank ones) of at least [`RECORD_LINES`] lines, half or more
///   of them `label: value` lines. Its heading and its closing lines are
///   the record's too. So are the rows of a table ([`table_rows`]: a
///   Markdown table, a CSV's lines): each row is a record of its own, and
///   the next table's `| HbA1c | 6.1 |` changes no value of the last.
///   When its labels are speakers taking turns ([`is_transcript`]: "Noor:
///   We go with IONOS …", "Lena: Let's keep this short"), it is what
///   others said, and is read as a document;
/// - **a document** (a report, a contract, minutes): a text of at least
///   [`DOCUMENT_PARAGRAPHS`] paragraphs, [`DOCUMENT_PROSE`] of them long
///   ([`PROSE_TOKENS`] or more). Its long paragraphs are the document's;
///   a short one around them ("Here is the next report:", "What changed
///   since March?") is the user's own. A third party's prose states what
///   it states: "the contract was signed on 12 March for 4,300 €" asks
///   nothing of the assistant, and the next report's "costs rose by 12 %"
///   changes no value of the last one's.
pub(crate) fn pasted_lines(text: &str) -> Vec<Pasted> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = vec![Pasted::Said; lines.len()];
    let mut paragraphs = Vec::new();
    let mut start = 0;
    while start < lines.len() {
        if lines[start].trim().is_empty() {
            start += 1;
            continue;
        }
        let end = (start..lines.len())
            .find(|&i| lines[i].trim().is_empty())
            .unwrap_or(lines.len());
        let labels: Vec<&str> = lines[start..end]
            .iter()
            .filter_map(|l| record_label(l))
            .collect();
        let n = end - start;
        if n >= RECORD_LINES && 2 * labels.len() >= n {
            // (A transcript's lines are what others said: nothing in it
            // is the user's, as in a document.)
            let pasted = if is_transcript(&labels) {
                Pasted::Document
            } else {
                Pasted::Record
            };
            out[start..end].iter_mut().for_each(|r| *r = pasted);
        }
        for (r, row) in out[start..end]
            .iter_mut()
            .zip(table_rows(&lines[start..end]))
        {
            if row {
                *r = Pasted::Record;
            }
        }
        paragraphs.push(start..end);
        start = end;
    }
    let estimate = crate::tokens::CharEstimator::new(3);
    let prose: Vec<bool> = paragraphs
        .iter()
        .map(|p| {
            let width: usize = lines[p.clone()].iter().map(|l| estimate.width(l)).sum();
            // (A record's paragraph is the record's, however long.)
            out[p.start] == Pasted::Said && width >= PROSE_TOKENS
        })
        .collect();
    if paragraphs.len() >= DOCUMENT_PARAGRAPHS
        && prose.iter().filter(|p| **p).count() >= DOCUMENT_PROSE
    {
        for (p, _) in paragraphs.iter().zip(&prose).filter(|(_, prose)| **prose) {
            out[p.clone()]
                .iter_mut()
                .for_each(|r| *r = Pasted::Document);
        }
    }
    out
}

/// Where a line of a user's text stands ([`pasted_lines`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pasted {
    /// The user's own words.
    Said,
    /// A record's: its values are the record's, but a line of it headed
    /// by a word of rule ("Hinweis: nie an die alte Adresse liefern") is
    /// the user's note.
    Record,
    /// A document's prose, or a transcript's turns: what its author or
    /// speakers state, nothing the user asks.
    Document,
}

impl Pasted {
    pub(crate) fn is_pasted(self) -> bool {
        self != Pasted::Said
    }
}

/// Paragraphs a pasted document has at least ([`pasted_lines`]).
const DOCUMENT_PARAGRAPHS: usize = 3;

/// Long paragraphs among them: what a user writes in a chat is a sentence
/// or a few, not several paragraphs of prose.
const DOCUMENT_PROSE: usize = 2;

/// Estimated tokens of a long paragraph (about 200 characters of a
/// spaced script, 70 of Chinese or Japanese).
const PROSE_TOKENS: usize = 70;

#[cfg(test)]
mod tests {
    use super::*;

    /// For each line of `text`, whether it is pasted as `kind`.
    fn marked(text: &str, kind: Pasted) -> Vec<bool> {
        pasted_lines(text).into_iter().map(|p| p == kind).collect()
    }

    #[test]
    fn a_record_line_is_a_short_label_a_colon_and_a_value() {
        assert!(record_label("Contact: Carlos Medina").is_some());
        assert!(record_label("電話：05-1417-2152").is_some());
        assert!(record_label("See https://example.com/a").is_none());
        assert!(record_label("At 10:30 we meet").is_none());
        assert!(record_label("Note:").is_none());
        assert_eq!(
            marked("Hi.\n\nA: 1\nB: 2\nTotal\n\nC: 3\nok", Pasted::Record),
            [false, false, true, true, true, false, false, false]
        );
    }

    #[test]
    fn the_rows_of_a_pasted_table_are_a_record_whatever_their_separator() {
        let markdown = "Here are my results from 11 March:\n| Test | Result | Unit |\n|---|---|---|\n| ALT | 23.1 | U/L |\n| CRP | 119.1 | mg/L |\nWhat stands out?";
        assert_eq!(
            marked(markdown, Pasted::Record),
            [false, true, true, true, true, false]
        );
        let csv = "Expenses from Lyon, can you total them?\ndate,item,amount\n2026-03-11,Hotel Lumen,183.45 EUR\n2026-03-04,Taxi,26.32 EUR";
        assert_eq!(marked(csv, Pasted::Record), [false, true, true, true]);
        let tsv = "Name\tZimmer\tPreis\nMüller\t12\t89 €\nSchmidt\t14\t95 €";
        assert_eq!(marked(tsv, Pasted::Record), [true, true, true]);
        // A few sentences with commas are no table, nor are two rows.
        let said =
            "Yes, please, book it.\nNo, not that one, the other.\nOk, thanks, bye.\nA,b,c\nd,e,f";
        assert!(!pasted_lines(said).iter().any(|p| p.is_pasted()));
    }

    #[test]
    fn the_long_paragraphs_of_a_pasted_document_are_pasted_in_any_script() {
        let long = |s: &str| s.repeat(4);
        let doc = format!(
            "Here is the report:\n\n{}\n\n{}\n\nWhat changed?",
            long("Die Kosten stiegen gegenüber dem Vorjahr um 12 %. "),
            long("Der Vertrag wurde am 3. März über 4.300 € unterzeichnet. ")
        );
        let document = |text: &str| marked(text, Pasted::Document);
        assert_eq!(
            document(&doc),
            [false, false, true, false, true, false, false]
        );
        let ja = format!(
            "次の文書です：\n\n{}\n\n{}\n\n{}",
            long("費用は前期比で12%増加した。"),
            long("契約は3月15日に締結された。"),
            long("最終報告書の提出期限は4月1日である。")
        );
        assert_eq!(
            document(&ja),
            [false, false, true, false, true, false, true]
        );
        // Two long paragraphs are a long message, not yet a document; nor
        // are three short ones (a user's instructions, one per paragraph).
        let two = format!(
            "{}\n\n{}",
            long("We need 4 rooms. "),
            long("Budget: 5,000 EUR total. ")
        );
        assert!(!pasted_lines(&two).iter().any(|p| p.is_pasted()));
        let short = "Use Postgres 16.\n\nNever push to main.\n\nShip on Friday, 12 March.";
        assert!(!pasted_lines(short).iter().any(|p| p.is_pasted()));
    }
}
