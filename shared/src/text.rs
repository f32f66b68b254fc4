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
/// the length and the first byte before the bytes: the statement rules and
/// the extractors ask this of nearly every word, against lists of dozens,
/// and most candidates differ in their first byte.
#[inline]
pub(crate) fn is_one_of(word: &str, list: &[&str]) -> bool {
    let first = word.as_bytes().first();
    list.iter()
        .any(|w| w.len() == word.len() && w.as_bytes().first() == first && *w == word)
}

/// A fixed list of words, asked of nearly every word of a text ("is this
/// word a program's name?"): a word whose first byte and length match no
/// word of the list (most) is answered by one table lookup, the others as
/// [`is_one_of`] answers them. Built at compile time.
pub(crate) struct Words {
    list: &'static [&'static str],
    /// Per first byte, a bit per length (lengths from 63 share the last).
    lengths: [u64; 256],
}

impl Words {
    pub(crate) const fn new(list: &'static [&'static str]) -> Words {
        let mut lengths = [0u64; 256];
        let mut i = 0;
        while i < list.len() {
            let word = list[i].as_bytes();
            if !word.is_empty() {
                lengths[word[0] as usize] |= 1 << length_bit(word.len());
            }
            i += 1;
        }
        Words { list, lengths }
    }

    /// Whether `word` is one of the list.
    #[inline]
    pub(crate) fn contains(&self, word: &str) -> bool {
        match word.as_bytes().first() {
            Some(&first) => {
                self.lengths[usize::from(first)] >> length_bit(word.len()) & 1 != 0
                    && is_one_of(word, self.list)
            }
            None => is_one_of(word, self.list),
        }
    }
}

/// The bit of a word's length in [`Words`]' table.
const fn length_bit(len: usize) -> u32 {
    if len < 63 {
        len as u32
    } else {
        63
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static LIST: Words = Words::new(&[
        "cargo",
        "git",
        "go",
        "redis-cli",
        "",
        "a-very-long-program-name-that-is-longer-than-sixty-three-bytes-x",
    ]);

    proptest::proptest! {
        #[test]
        fn words_answer_as_the_list_does(word in "[a-z-]{0,4}|cargo|git|go|gi|redis-cli|redis-clj|a-very-long-program-name-that-is-longer-than-sixty-three-bytes-[xy]") {
            proptest::prop_assert_eq!(LIST.contains(&word), is_one_of(&word, LIST.list));
        }
    }

    #[test]
    fn words_find_every_word_of_the_list_and_no_other() {
        for word in LIST.list {
            assert!(LIST.contains(word), "{word}");
        }
        for word in ["carg", "cargoo", "Cargo", "gi", "redis-clj", "é"] {
            assert!(!LIST.contains(word), "{word}");
        }
        assert!(!Words::new(&["x"]).contains(""));
    }
}
