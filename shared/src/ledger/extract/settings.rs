//! Values for named settings: `KEY=value`, `billing.fx_cache = on`,
//! `FX_CACHE_TTL: 30s`, "set the timeout to 37s", "the limit is now 5 GB".
//!
//! The name becomes the artifact's key, so the ledger can tell that a newer
//! value replaces an older one; two values with different keys never do.
//! Names written as code keep their case (`MAX_RETRIES`); names written in
//! words are lower-cased ("the Timeout" and "the timeout" are one key).
//! A value whose name looks like a secret (`API_KEY`, `DB_PASSWORD`) is
//! claimed but never recorded: the ledger repeats what it keeps in every
//! context, and a secret must not travel that far.

use super::code::CODE_OWNERS;
use super::scan::{pattern, Scan};
use crate::ledger::ArtifactKind;
use crate::text::is_one_of;

/// A literal value: a quoted string, a number with whatever unit is glued
/// to it, or a switch word.
macro_rules! literal {
    () => {
        r#""[^"\n]{0,80}"|'[^'\n]{0,80}'|[-+]?[$€£]?[0-9][0-9A-Za-z.,:%/_+-]*|(?:on|off|true|false|yes|no|enabled|disabled|none|null|True|False|None|ON|OFF)\b"#
    };
}

/// A value in prose: a number (with a unit, glued or after one space) or a
/// switch word.
macro_rules! prose_value {
    () => {
        r"[-+]?[$€£]?[0-9][0-9A-Za-z.,:%/_-]*(?:[ \t](?:ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|B|KB|MB|GB|TB|KiB|MiB|GiB|TiB|%|percent|EUR|USD|GBP|CHF|euros?|dollars?|pounds?|CET|CEST|UTC|GMT|am|pm)\b)?|(?i-u:on|off|true|false|enabled|disabled)\b"
    };
}

/// A name in prose: one to three words (as few as the rest allows).
macro_rules! prose_key {
    () => {
        r"[A-Za-z][A-Za-z0-9_.-]*(?:[ \t]+[A-Za-z][A-Za-z0-9_.-]*){0,2}?"
    };
}

pattern!(
    ENV_ASSIGN,
    r#"\b((?:[A-Z][A-Z0-9]*_)+[A-Z0-9]+|[A-Z][A-Z0-9]+)=("[^"\n]{0,120}"|'[^'\n]{0,120}'|[^ \t\r\n"'`=,;)\]}][^ \t\r\n"'`,;)\]}]{0,119})"#
);
pattern!(
    UPPER_ASSIGN,
    concat!(
        r"\b((?:[A-Z][A-Z0-9]*_)+[A-Z0-9]+)(?:[ \t]*:[ \t]*[A-Za-z][A-Za-z0-9_<>&']*)?[ \t]*[=:][ \t]*(",
        literal!(),
        ")"
    )
);
pattern!(
    LOWER_ASSIGN,
    concat!(
        r#"\b([a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)+|[a-z][a-z0-9]*(?:_[a-z0-9]+)+)"?(?:[ \t]*=[ \t]*|[ \t]*:[ \t]+)("#,
        literal!(),
        ")"
    )
);
pattern!(
    LINE_ASSIGN,
    r"(?m)^[ \t]*([a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)+|[a-z][a-z0-9]*(?:_[a-z0-9]+)+)[ \t]*[=:][ \t]*([A-Za-z][A-Za-z0-9_.-]{0,40})[ \t]*$"
);
pattern!(
    PROSE_SET,
    concat!(
        r"\b(?i-u:set|make|change|bump|raise|lower|increase|decrease|reduce|update|switch|turn|move|cap|limit|reset|adjust|extend|shorten)[ \t]+(?:(?i-u:the|our|my|your|its|their|this|that|a|an)[ \t]+)?(",
        prose_key!(),
        r")[ \t]+(?:(?i-u:from)[ \t]+(",
        prose_value!(),
        r")[ \t]+)?(?:(?i-u:to|at)[ \t]+|=[ \t]*)?(",
        prose_value!(),
        ")"
    )
);
pattern!(
    PROSE_IS_NOW,
    concat!(
        r"\b(?i-u:the|our|my|your)[ \t]+(",
        prose_key!(),
        r")[ \t]+(?i-u:is now|are now|should be|must be|will be|is set to|has been set to|was changed to|changed to|is changed to|needs to be)[ \t]+(",
        prose_value!(),
        ")"
    )
);

pattern!(
    GATE_SET_VERB,
    r"(?i-u:set|make|change|bump|raise|lower|increase|decrease|reduce|update|switch|turn|move|cap|limit|adjust|extend|shorten)"
);
pattern!(
    GATE_IS_NOW,
    r"(?i-u:is now|are now|should be|must be|will be|set to|changed to|needs to be)"
);

/// Words that are no setting's name ("set it to 5", "make sure 3 …").
const NOT_KEYS: &[&str] = &[
    "it",
    "them",
    "this",
    "that",
    "these",
    "those",
    "up",
    "out",
    "down",
    "everything",
    "all",
    "something",
    "me",
    "us",
    "you",
    "him",
    "her",
    "sure",
    "aside",
    "off",
    "on",
    "in",
    "back",
    "over",
    "one",
    "some",
    "things",
    "way",
    "time",
    "sense",
];

/// Parts of a name that mark a secret.
const SECRET_MARKERS: &[&str] = &[
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PWD",
    "CREDENTIAL",
    "PRIVATE",
    "API_KEY",
    "APIKEY",
    "ACCESS_KEY",
    "AUTH",
    "COOKIE",
    "SESSION",
    "SIGNATURE",
];

/// Whether a setting named `key` holds a secret.
fn is_secret(key: &str) -> bool {
    let upper = key.to_ascii_uppercase().replace(['.', '-', ' '], "_");
    upper.ends_with("_KEY") || upper == "KEY" || SECRET_MARKERS.iter().any(|m| upper.contains(m))
}

/// The key as stored: code names as written, words lower-cased with
/// single spaces.
fn normalize_key(key: &str) -> String {
    let words: Vec<&str> = key.split_whitespace().collect();
    let code = words.len() == 1
        && (key.contains('_') || key.contains('.') || key.bytes().all(|b| !b.is_ascii_lowercase()));
    if code {
        key.to_owned()
    } else {
        words.join(" ").to_lowercase()
    }
}

/// A value as stored: trailing sentence punctuation and quotes removed.
fn clean_value(value: &str) -> &str {
    let v = value
        .trim()
        .trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
    let quoted = v.len() >= 2
        && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\'')));
    if quoted {
        &v[1..v.len() - 1]
    } else {
        v
    }
}

/// Claims `span` and records `values` (position, text) for `key`, unless
/// the key names a secret (then the span is only claimed). Nothing happens
/// if part of `span` was claimed already.
fn record(s: &mut Scan<'_>, span: std::ops::Range<usize>, key: &str, values: &[(usize, &str)]) {
    if !s.claim(span) || is_secret(key) {
        return;
    }
    let key = normalize_key(key);
    for &(at, value) in values {
        let value = clean_value(value);
        if !value.is_empty() {
            s.note_keyed(at, ArtifactKind::Setting, Some(key.clone()), value);
        }
    }
}

pub(super) fn settings(s: &mut Scan<'_>) {
    let text = s.text;
    let has_assign = text.contains('=') || text.contains(':');
    if has_assign {
        // Every name but a one-word `UPPER=` has a `_` or a `.` in it.
        let compound = text.contains('_') || text.contains('.');
        let patterns = [
            text.contains('=').then_some(&ENV_ASSIGN),
            text.contains('_').then_some(&UPPER_ASSIGN),
            compound.then_some(&LOWER_ASSIGN),
            compound.then_some(&LINE_ASSIGN),
        ];
        for re in patterns.into_iter().flatten() {
            for caps in s.captures_all(re) {
                let (Some(all), Some(key), Some(value)) = (caps.get(0), caps.get(1), caps.get(2))
                else {
                    continue;
                };
                let owner = key.as_str().split('.').next().unwrap_or("");
                let glued = matches!(
                    s.byte_before(all.start()),
                    Some(b'$' | b'{' | b'.' | b'/' | b'-' | b'@')
                );
                if glued || is_one_of(owner, CODE_OWNERS) {
                    continue;
                }
                let values = [(value.start(), value.as_str())];
                record(s, all.start()..value.end(), key.as_str(), &values);
            }
        }
    }
    if !s.has_digit && !has_switch_word(text) {
        return;
    }
    let set = s.gated(&GATE_SET_VERB).then_some(&PROSE_SET);
    for caps in set.map(|p| s.captures_all(p)).into_iter().flatten() {
        let (Some(all), Some(key), Some(to)) = (caps.get(0), caps.get(1), caps.get(3)) else {
            continue;
        };
        if !prose_key_ok(key.as_str()) || continues_with_name(s, to.end(), to.as_str()) {
            continue;
        }
        // "from A to B": A was the value until now, B is the new one.
        let mut values = Vec::with_capacity(2);
        if let Some(from) = caps.get(2) {
            values.push((from.start(), from.as_str()));
        }
        values.push((to.start(), to.as_str()));
        record(s, all.start()..to.end(), key.as_str(), &values);
    }
    let is_now = s.gated(&GATE_IS_NOW).then_some(&PROSE_IS_NOW);
    for caps in is_now.map(|p| s.captures_all(p)).into_iter().flatten() {
        let (Some(all), Some(key), Some(value)) = (caps.get(0), caps.get(1), caps.get(2)) else {
            continue;
        };
        if prose_key_ok(key.as_str()) && !continues_with_name(s, value.end(), value.as_str()) {
            let values = [(value.start(), value.as_str())];
            record(s, all.start()..value.end(), key.as_str(), &values);
        }
    }
}

fn has_switch_word(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [" on", " off", "true", "false", "enabled", "disabled"]
        .iter()
        .any(|w| lower.contains(w))
}

fn prose_key_ok(key: &str) -> bool {
    let first = key
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    !is_one_of(first.as_str(), NOT_KEYS)
}

/// Whether a bare number at `end` goes on with a capitalised word ("12 Rue
/// de Rivoli", "3 Main Street"): then it is not the value, only its start.
fn continues_with_name(s: &Scan<'_>, end: usize, value: &str) -> bool {
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let rest = &s.text[end..];
    let trimmed = rest.trim_start_matches([' ', '\t']);
    trimmed.len() < rest.len() && trimmed.starts_with(|c: char| c.is_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_recognised_by_name() {
        for key in [
            "API_KEY",
            "DB_PASSWORD",
            "GITHUB_TOKEN",
            "aws.secret_access_key",
            "STRIPE_SECRET",
        ] {
            assert!(is_secret(key), "{key}");
        }
        for key in ["MAX_RETRIES", "timeout", "billing.fx_cache", "MAX_KEYS"] {
            assert!(!is_secret(key), "{key}");
        }
    }

    #[test]
    fn keys_keep_code_case_and_fold_words() {
        assert_eq!(normalize_key("MAX_RETRIES"), "MAX_RETRIES");
        assert_eq!(normalize_key("billing.fx_cache"), "billing.fx_cache");
        assert_eq!(normalize_key("Request  Timeout"), "request timeout");
        assert_eq!(normalize_key("PORT"), "PORT");
    }
}
