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
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    let trimmed = out.trim_end_matches(['.', ',', ';', ':', '!']).len();
    out.truncate(trimmed);
    out
}
