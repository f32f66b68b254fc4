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
