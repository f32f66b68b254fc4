//! The sentences of a user's text that could state a decision or a
//! constraint.
//!
//! What the user pasted is not what the user said: fenced code, indented
//! code, shell and log lines, `>` quotes and a forwarded mail below its
//! "On … wrote:" line are skipped before any sentence is looked at, so a
//! `// never call this twice` comment or a log line that reads "must not be
//! null" never becomes the user's rule. A pasted record (an invoice, a
//! form, a ticket: a paragraph of `label: value` lines) and a pasted
//! document (paragraphs of prose) are marked as such
//! ([`Candidate::pasted`]): their values are theirs, not what the user
//! asks for.

use std::sync::LazyLock;

use regex::Regex;

/// Longer sentences are pasted prose (a spec, a mail), not a statement the
/// user makes in passing; they are not looked at.
pub(crate) const MAX_SENTENCE_CHARS: usize = 300;

/// Words after which a `.` does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "st", "str", "no", "nr", "approx", "incl",
    "ca", "jr", "sr", "co", "inc", "ltd", "dept", "tel", "ext", "ave", "rd", "apt", "fig", "cf",
];

static LOG_LINE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(\[?\d{4}-\d{2}-\d{2}[T ]\d|\[?\d{2}:\d{2}:\d{2}|\[?(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL)\b",
        r"|Traceback \(most recent|\s*at \S+[.(]|thread '.*' panicked|(error|warning)(\[\w+\])?: |npm (ERR|WARN)|E\s+\w+Error)"
    ))
    .ok()
});

/// Whether a line is code, a log or shell line rather than prose.
pub(crate) fn looks_like_code(line: &str) -> bool {
    let trimmed = line.trim();
    if line.starts_with("    ") || line.starts_with('\t') {
        return true;
    }
    if [
        "$ ", "# ", "#!", "//", "/*", "*/", "<", "{", "}", ">>> ", "PS ", "C:\\",
    ]
    .iter()
    .any(|p| trimmed.starts_with(p))
    {
        return true;
    }
    if trimmed.ends_with([';', '{', '}']) {
        return true;
    }
    let symbols = trimmed
        .chars()
        .filter(|c| {
            matches!(
                c,
                '{' | '}' | '(' | ')' | ';' | '=' | '<' | '>' | '[' | ']' | '|' | '&'
            )
        })
        .count();
    if symbols >= 4 {
        return true;
    }
    LOG_LINE.as_ref().is_some_and(|re| re.is_match(line))
}

/// Whether a line starts a forwarded or replied-to mail: everything after it
/// was written by someone else.
fn starts_pasted_mail(line: &str) -> bool {
    let t = line.trim();
    t.starts_with("-----Original Message")
        || t.starts_with("---------- Forwarded message")
        || t.starts_with("Begin forwarded message")
        || (t.starts_with("On ") && t.ends_with("wrote:"))
        || (t.starts_with("From: ") && t.contains('@'))
}

/// A candidate sentence of a user's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate<'a> {
    pub(crate) text: &'a str,
    /// It stands in a record or a document the user pasted
    /// ([`crate::text::pasted_lines`]).
    pub(crate) pasted: crate::text::Pasted,
}

/// Candidate sentences of a user's text part, in order.
pub(crate) fn candidates(text: &str) -> Vec<Candidate<'_>> {
    let mut out = Vec::new();
    let mut fenced = false;
    let pasted_lines = crate::text::pasted_lines(text);
    for (line, &pasted) in text.lines().zip(&pasted_lines) {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if starts_pasted_mail(line) {
            break;
        }
        if trimmed.starts_with('>') || trimmed.is_empty() || looks_like_code(line) {
            continue;
        }
        for sentence in split_sentences(strip_list_marker(trimmed)) {
            if sentence.chars().count() <= MAX_SENTENCE_CHARS {
                out.push(Candidate {
                    text: sentence,
                    pasted,
                });
            }
        }
    }
    out
}

/// `- `, `* `, `• `, `1. `, `2) ` at the start of a list item.
fn strip_list_marker(line: &str) -> &str {
    for marker in ["- ", "* ", "• ", "+ "] {
        if let Some(rest) = line.strip_prefix(marker) {
            return rest.trim_start();
        }
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if (1..=3).contains(&digits) {
        if let Some(rest) = line[digits..]
            .strip_prefix(". ")
            .or_else(|| line[digits..].strip_prefix(") "))
        {
            return rest.trim_start();
        }
    }
    line
}

/// Splits one line into sentences after `.`, `!` or `?` followed by white
/// space; a `.` after an abbreviation, before a digit (`Str. 5`) or after a
/// day before its month (`10. Juni`: [`crate::evidence::ordinal_date`]) does
/// not end one.
pub(crate) fn split_sentences(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if !matches!(b, b'.' | b'!' | b'?') {
            continue;
        }
        let Some(&next) = bytes.get(i + 1) else {
            continue;
        };
        if !next.is_ascii_whitespace() {
            continue;
        }
        if b == b'.' {
            let before = line.get(start..i).unwrap_or("");
            let last_word = before
                .rsplit(|c: char| c.is_whitespace() || c == '(')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            let after = line.get(i + 1..).unwrap_or("").trim_start();
            let single_letter = last_word.chars().count() == 1;
            if ABBREVIATIONS.contains(&last_word.as_str())
                || single_letter
                || after.starts_with(|c: char| c.is_ascii_digit())
                || crate::evidence::ordinal_date(&last_word, after)
            {
                continue;
            }
        }
        if let Some(s) = line.get(start..=i) {
            push_trimmed(&mut out, s);
        }
        start = i + 1;
    }
    if let Some(s) = line.get(start..) {
        push_trimmed(&mut out, s);
    }
    out
}

fn push_trimmed<'a>(out: &mut Vec<&'a str>, s: &'a str) {
    let s = s.trim();
    if s.chars().any(char::is_alphanumeric) {
        out.push(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_split_at_terminal_punctuation_but_not_at_abbreviations() {
        assert_eq!(
            split_sentences(
                "Use Postgres. never use MySQL! Why? Deliver to Friedrichstr. 5 e.g. today."
            ),
            [
                "Use Postgres.",
                "never use MySQL!",
                "Why?",
                "Deliver to Friedrichstr. 5 e.g. today."
            ]
        );
    }

    #[test]
    fn a_days_ordinal_point_ends_no_sentence() {
        assert_eq!(
            split_sentences("Bitte liefern Sie lieber am 10. Juni statt dessen. Danke."),
            [
                "Bitte liefern Sie lieber am 10. Juni statt dessen.",
                "Danke."
            ]
        );
    }

    #[test]
    fn code_logs_quotes_and_pasted_mail_are_not_candidates() {
        let text = "Never push to main.\n\
```rust\n// never call this twice\nlet x = must();\n```\n    indented code must not count\n\
> you must always reply in French\n\
2024-05-01 12:00:00 ERROR value must not be null\n\
$ rm -rf target # never do this\n\
- Always run the tests first\n\
On Mon, 3 Jun 2024, Bob <bob@example.com> wrote:\n\
We must use Oracle.\n";
        let texts: Vec<&str> = candidates(text).iter().map(|c| c.text).collect();
        assert_eq!(texts, ["Never push to main.", "Always run the tests first"]);
    }

    #[test]
    fn a_paragraph_of_label_value_lines_is_a_record_in_any_language() {
        let text = "Please check this invoice from Northwind Ltd.\n\n\
INVOICE INV-2026-5552\n\
Issued by: Northwind Ltd\n\
Total due: $18,938.65\n\
Payment due: May 23, 2026\n\
Thank you for your business.\n\n\
Rechnung Nr. RE-987235\n\
Anschrift: Hauptstraße 62, 99613 Leipzig\n\
Bankverbindung IBAN: DE46162743412760645980\n\n\
電話：05-8613-8633\n\
合計金額：¥72,597（税込）\n\
お支払期限：発行日より30日以内\n\n\
Budget: 5,000 EUR\n\
Deliver by Friday.\n";
        let got: Vec<(&str, bool)> = candidates(text)
            .iter()
            .map(|c| (c.text, c.pasted == crate::text::Pasted::Record))
            .collect();
        assert_eq!(
            got,
            [
                ("Please check this invoice from Northwind Ltd.", false),
                ("INVOICE INV-2026-5552", true),
                ("Issued by: Northwind Ltd", true),
                ("Total due: $18,938.65", true),
                ("Payment due: May 23, 2026", true),
                ("Thank you for your business.", true),
                ("Rechnung Nr. RE-987235", true),
                ("Anschrift: Hauptstraße 62, 99613 Leipzig", true),
                ("Bankverbindung IBAN: DE46162743412760645980", true),
                ("電話：05-8613-8633", true),
                ("合計金額：¥72,597（税込）", true),
                ("お支払期限：発行日より30日以内", true),
                // Two lines are no record: the user's own.
                ("Budget: 5,000 EUR", false),
                ("Deliver by Friday.", false),
            ]
        );
    }

    #[test]
    fn code_lines_are_recognized() {
        for line in [
            "fn main() { must(); }",
            "    return x;",
            "if (a) { b(); }",
            "[ERROR] build must not fail",
            "error[E0502]: cannot borrow",
            "    at com.example.Foo.bar(Foo.java:42)",
        ] {
            assert!(looks_like_code(line), "{line}");
        }
        for line in [
            "Never push to main.",
            "Set the timeout to 45s (not 37s).",
            "Don't call Foo::bar directly",
        ] {
            assert!(!looks_like_code(line), "{line}");
        }
    }
}
