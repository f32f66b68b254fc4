//! Words of a sentence as the statement rules read them.
//!
//! A sentence is cut into [`Tok`]ens (lower-cased, surrounding punctuation
//! trimmed, curly apostrophes straightened) and into clauses at commas,
//! semicolons, dashes and the conjunctions that start a new clause. Each
//! token remembers whether it sat inside quotes (quoted text is someone
//! else's words, never a cue) and whether it looks like a *value*: something
//! with a digit, a technical name, a weekday, or a capitalized word inside
//! the sentence. Values are what a statement sets; the other content words
//! say what it sets them on.

use crate::text::is_one_of;

/// One word of a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tok {
    /// Lower-cased, punctuation trimmed, apostrophes straightened.
    pub(crate) w: String,
    /// Inside `"…"`, `“…”` or `` `…` ``.
    pub(crate) quoted: bool,
    /// A value: digits, a technical name, a weekday or month, or a
    /// capitalized word that does not start the sentence.
    pub(crate) value: bool,
    /// A `:` ended the word (`timeout: 45s`).
    pub(crate) colon: bool,
    /// A clause ends after this word (`,`, `;`, a dash, or before a
    /// conjunction that starts a new clause).
    pub(crate) brk: bool,
}

impl Tok {
    /// The word as the cue rules see it: quoted words never match a cue.
    pub(crate) fn cue(&self) -> &str {
        if self.quoted {
            "\"q\""
        } else {
            &self.w
        }
    }
}

/// Weekdays, months and the days named from today: date words of a
/// statement ("ship on Friday", "moving on 28 June").
pub(crate) const DATE_WORDS: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "tomorrow",
    "today",
    "tonight",
];

/// Whether `word` (lower-case) names a month, in full or abbreviated.
pub(crate) fn is_month(word: &str) -> bool {
    const ABBREVIATED: &[&str] = &[
        "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    ];
    DATE_WORDS[7..19].contains(&word) || is_one_of(word, ABBREVIATED)
}

/// Words that begin a new clause after `and` / `but` / `so`.
const CLAUSE_OPENERS: &[&str] = &[
    "we", "we'll", "we're", "let's", "i", "i'll", "i'm", "i'd", "you", "never", "always", "don't",
    "do", "please", "then", "use", "make", "set", "switch", "keep", "scrap", "drop", "ditch",
    "cancel", "go", "only", "stop", "avoid",
];

/// A whitespace-separated piece without the punctuation around it (a
/// value's signs kept: `€900`, `#12`, `+44`, `50%`).
pub(crate) fn bare(raw: &str) -> &str {
    raw.trim_matches(|c: char| {
        !(c.is_alphanumeric() || matches!(c, '%' | '€' | '$' | '£' | '#' | '@' | '+'))
    })
}

/// Splits `sentence` into tokens.
pub(crate) fn tokens(sentence: &str) -> Vec<Tok> {
    let mut out: Vec<Tok> = Vec::new();
    // Per token: whether only its capital made it a value, and whether it
    // follows an article of a language that capitalises its nouns.
    let mut by_capital: Vec<(bool, bool)> = Vec::new();
    let mut in_quote = false;
    // A sentence or a clause after a colon starts here: its first word's
    // capital says nothing ("Korrektur, bitte: Ich fliege …", "Pardon, une
    // correction : Le numéro …").
    let mut starts = true;
    for raw in sentence.split_whitespace() {
        // Quote state at the token's first letter, then after its last char.
        let mut quoted_here = in_quote;
        let mut seen_alnum = false;
        for c in raw.chars() {
            match c {
                '"' | '`' => in_quote = !in_quote,
                '“' => in_quote = true,
                '”' => in_quote = false,
                c if c.is_alphanumeric() && !seen_alnum => {
                    seen_alnum = true;
                    quoted_here = in_quote;
                }
                _ => {}
            }
        }
        let is_dash = matches!(raw, "-" | "–" | "—" | "--");
        if is_dash {
            if let Some(last) = out.last_mut() {
                last.brk = true;
            }
            continue;
        }
        let trimmed = raw.trim_end_matches(['"', '”', '’', '\'', '`', ')', ']', '*']);
        let brk = trimmed.ends_with([',', ';', '!', '?']) && !in_quote;
        let colon = trimmed.ends_with(':') && !in_quote;
        let bare = bare(raw);
        // Most words have no curly apostrophe: they are used as they are.
        let straightened;
        let word: &str = if bare.contains('’') {
            straightened = bare.replace('’', "'");
            &straightened
        } else {
            bare
        };
        if word.is_empty() {
            if brk || colon {
                if let Some(last) = out.last_mut() {
                    last.brk |= brk;
                    last.colon |= colon;
                }
            }
            starts |= colon;
            continue;
        }
        let first = out.is_empty() || starts;
        // An ASCII word (most) lower-cases the same without the Unicode
        // case tables.
        let lower = canonical(if word.is_ascii() {
            word.to_ascii_lowercase()
        } else {
            word.to_lowercase()
        });
        // (After an honorific, or a day's number and its point, no
        // sentence ends: "Dr. Volkov", "am 3. Oktober".)
        let ordinal = bare.len() <= 2 && bare.chars().all(|c| c.is_ascii_digit());
        starts = !in_quote
            && (colon
                || (trimmed.ends_with(['.', '!', '?'])
                    && !ordinal
                    && !crate::evidence::lang::HONORIFICS.has(&lower)));
        let value = looks_like_value(word, &lower, first);
        let after_article = out
            .last()
            .is_some_and(|t| crate::evidence::lang::NOUN_ARTICLES.has(&t.w));
        // (Read as a sentence's first word it would be no value: only its
        // capital made it one.)
        let capital_only = value && !first && !looks_like_value(word, &lower, true);
        by_capital.push((capital_only, after_article));
        out.push(Tok {
            w: lower,
            quoted: quoted_here,
            value,
            colon,
            brk,
        });
    }
    // A single capitalised word after an article of a language that
    // capitalises its nouns is a noun ("Die Dosis ist 25 mg"), not a
    // name; a run of them still names ("die Deutsche Bank").
    for i in 0..out.len() {
        let (capital_only, after_article) = by_capital[i];
        let next_capital = by_capital.get(i + 1).is_some_and(|n| n.0);
        if capital_only && after_article && !next_capital {
            out[i].value = false;
        }
    }
    // A conjunction that opens a new clause ends the previous one.
    for i in 1..out.len() {
        let starts_clause = matches!(out[i].w.as_str(), "and" | "but" | "so" | "because")
            && out
                .get(i + 1)
                .is_some_and(|next| is_one_of(next.w.as_str(), CLAUSE_OPENERS));
        if starts_clause || out[i].w == "but" {
            out[i - 1].brk = true;
        }
    }
    out
}

/// Spelling variants folded into one form (`dont` → `don't`).
fn canonical(lower: String) -> String {
    let folded = match lower.as_str() {
        "dont" => "don't",
        "cant" => "can't",
        "wont" => "won't",
        "lets" => "let's",
        "im" => "i'm",
        "ive" => "i've",
        "mustnt" => "mustn't",
        "shouldnt" => "shouldn't",
        "isnt" => "isn't",
        "arent" => "aren't",
        "doesnt" => "doesn't",
        _ => return lower,
    };
    folded.to_owned()
}

fn looks_like_value(word: &str, lower: &str, first: bool) -> bool {
    if word.chars().any(|c| c.is_ascii_digit()) {
        return true;
    }
    // "may" is mostly the verb.
    if is_one_of(lower, DATE_WORDS) && lower != "may" {
        return true;
    }
    // Technical names: dotted, snake_case, paths, e-mail addresses.
    let inner = word.trim_matches(|c: char| !c.is_alphanumeric());
    if inner.contains(['.', '_', '/', '@'])
        && inner.chars().filter(|c| c.is_alphanumeric()).count() >= 3
    {
        return true;
    }
    // A capitalized word inside a sentence names something (Postgres,
    // Kastanienallee, EU); "I" and its contractions do not.
    let mut chars = word.chars();
    let capital = chars.next().is_some_and(char::is_uppercase);
    let has_upper_inside = word.chars().skip(1).any(char::is_uppercase);
    let is_i = lower == "i" || lower.starts_with("i'");
    (!first && capital && !is_i) || (has_upper_inside && !is_i && word.len() > 1)
}

/// Clauses of `toks`: ranges ending at a token with `brk` set.
///
/// A comma before a value with a digit does not end a clause that holds no
/// value yet: the value is the clause's own, set off ("make it an aisle
/// seat, 16C", "yes, 2 nights").
pub(crate) fn clauses(toks: &[Tok]) -> Vec<&[Tok]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, t) in toks.iter().enumerate() {
        let appositive = toks
            .get(i + 1)
            .is_some_and(|n| n.value && n.w.chars().any(|c| c.is_ascii_digit()) && !n.quoted)
            && !toks[start..=i].iter().any(|t| t.value);
        if t.brk && !appositive {
            out.push(&toks[start..=i]);
            start = i + 1;
        }
    }
    if start < toks.len() {
        out.push(&toks[start..]);
    }
    out.retain(|c| !c.is_empty());
    out
}

/// Words skipped at the start of a clause: they do not change what it says.
const FILLERS: &[&str] = &[
    "please",
    "pls",
    "plz",
    "ok",
    "okay",
    "so",
    "and",
    "but",
    "also",
    "then",
    "oh",
    "well",
    "actually",
    "right",
    "alright",
    "yes",
    "yeah",
    "yep",
    "hmm",
    "btw",
    "fine",
    "great",
    "thanks",
    "cool",
    "just",
    "again",
    "now",
    "ps",
    "hey",
    "hi",
    "hello",
    "sure",
    "good",
    "perfect",
    "anyway",
    "anyways",
    "kindly",
    "note",
    "important",
    "remember",
    "reminder",
    "fyi",
    "wait",
    "sorry",
    "honestly",
    "really",
    "instead",
    "rather",
    "update",
    "correction",
    "also",
];

/// Multi-word fillers.
const FILLER_PHRASES: &[&[&str]] = &[
    &["from", "now", "on"],
    &["going", "forward"],
    &["moving", "forward"],
    &["from", "here", "on"],
    &["for", "now"],
    &["in", "future"],
    &["in", "the", "future"],
    &["for", "the", "record"],
    &["as", "i", "said"],
    &["as", "i", "mentioned"],
    &["like", "i", "said"],
    &["as", "i", "told", "you"],
    &["to", "be", "clear"],
    &["change", "of", "plan"],
    &["change", "of", "plans"],
    &["on", "second", "thought"],
    &["on", "second", "thoughts"],
    &["one", "more", "thing"],
    &["one", "last", "thing"],
    &["by", "the", "way"],
    &["at", "the", "end", "of", "the", "day"],
];

/// The clause without its leading fillers.
pub(crate) fn strip_fillers(mut clause: &[Tok]) -> &[Tok] {
    loop {
        let before = clause.len();
        if let Some(first) = clause.first() {
            if !first.quoted && is_one_of(first.w.as_str(), FILLERS) && clause.len() > 1 {
                clause = &clause[1..];
            }
        }
        for phrase in FILLER_PHRASES {
            if clause.len() > phrase.len()
                && clause
                    .iter()
                    .zip(phrase.iter())
                    .all(|(t, p)| !t.quoted && t.w == *p)
            {
                clause = &clause[phrase.len()..];
            }
        }
        if clause.len() == before {
            return clause;
        }
    }
}

/// Words that carry no subject: articles, pronouns, prepositions,
/// auxiliaries, fillers and the cue words themselves.
const STOPWORDS: &[&str] = &[
    "a",
    "an",
    "the",
    "this",
    "that",
    "these",
    "those",
    "my",
    "your",
    "our",
    "his",
    "her",
    "their",
    "its",
    "some",
    "any",
    "no",
    "not",
    "every",
    "each",
    "all",
    "i",
    "you",
    "he",
    "she",
    "it",
    "we",
    "they",
    "me",
    "him",
    "us",
    "them",
    "there",
    "i'm",
    "i'll",
    "i'd",
    "i've",
    "we'll",
    "we're",
    "we'd",
    "we've",
    "you're",
    "it's",
    "that's",
    "let's",
    "let",
    "to",
    "of",
    "in",
    "on",
    "at",
    "by",
    "for",
    "from",
    "with",
    "via",
    "into",
    "onto",
    "as",
    "and",
    "or",
    "but",
    "so",
    "if",
    "then",
    "than",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "am",
    "do",
    "does",
    "did",
    "don't",
    "doesn't",
    "didn't",
    "have",
    "has",
    "had",
    "will",
    "would",
    "shall",
    "should",
    "can",
    "could",
    "may",
    "might",
    "must",
    "mustn't",
    "shouldn't",
    "can't",
    "cannot",
    "won't",
    "isn't",
    "aren't",
    "never",
    "always",
    "only",
    "just",
    "please",
    "now",
    "instead",
    "actually",
    "also",
    "again",
    "really",
    "rather",
    "go",
    "going",
    "with",
    "about",
    "up",
    "out",
    "over",
    "under",
    "ok",
    "okay",
    "yes",
    "no",
    "more",
    "longer",
    "anymore",
    "make",
    "sure",
    "keep",
    "set",
    "use",
    "using",
    "one",
    "thing",
    "things",
    "scrap",
    "drop",
    "ditch",
    "cancel",
    "stop",
    "avoid",
    "forget",
    "switch",
    "change",
    "which",
    "what",
    "when",
    "where",
    "who",
    "how",
    "why",
    "here",
    "too",
    "very",
    "well",
    "lets",
];

/// Whether `word` says something about the subject of a statement.
pub(crate) fn is_content(word: &str) -> bool {
    !word.is_empty() && !is_one_of(word, STOPWORDS) && word != "\"q\""
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        tokens(s).into_iter().map(|t| t.w).collect()
    }

    fn values(s: &str) -> Vec<String> {
        tokens(s)
            .into_iter()
            .filter(|t| t.value)
            .map(|t| t.w)
            .collect()
    }

    #[test]
    fn a_capital_names_only_where_grammar_does_not_ask_for_it() {
        // A clause after a colon starts with a capital in any language.
        assert_eq!(values("Korrektur, bitte: Ich fliege nach Lyon."), ["lyon"]);
        assert_eq!(
            values("Pardon, une correction : Le poste est QA Lead."),
            ["qa", "lead"]
        );
        // So does a sentence after a point, but not a name after a title
        // or a month after a day's point.
        assert_eq!(values("Noted. Sure, that works."), Vec::<String>::new());
        assert_eq!(values("My GP is Dr. Volkov."), ["gp", "dr", "volkov"]);
        assert_eq!(values("Der Termin ist am 3. Oktober."), ["3", "oktober"]);
        // A German noun after its article is no name; a run of capitals
        // after one still names.
        assert_eq!(values("Danke. Die Dosis ist 25 mg."), ["25"]);
        assert_eq!(
            values("Wir sind bei der Deutsche Bank."),
            ["deutsche", "bank"]
        );
    }

    #[test]
    fn tokens_are_lowercased_and_trimmed_but_keep_inner_punctuation() {
        assert_eq!(
            words("Set billing.invoice_v2_fx_cache to 45s, please."),
            ["set", "billing.invoice_v2_fx_cache", "to", "45s", "please"]
        );
        assert_eq!(words("Don’t push"), ["don't", "push"]);
        assert_eq!(words("KD-5512-0937!"), ["kd-5512-0937"]);
    }

    #[test]
    fn values_are_digits_technical_names_weekdays_and_inner_capitals() {
        let t = tokens("Use Postgres on friday at 9:40 with db.pool_size and tabs");
        let values: Vec<&str> = t.iter().filter(|t| t.value).map(|t| t.w.as_str()).collect();
        assert_eq!(values, ["postgres", "friday", "9:40", "db.pool_size"]);
    }

    #[test]
    fn quoted_words_are_marked() {
        let t = tokens("the error says \"must not be null\" again");
        let quoted: Vec<&str> = t
            .iter()
            .filter(|t| t.quoted)
            .map(|t| t.w.as_str())
            .collect();
        assert_eq!(quoted, ["must", "not", "be", "null"]);
    }

    #[test]
    fn clauses_split_at_commas_dashes_and_clause_conjunctions() {
        let t = tokens("scrap Postgres, we'll go with SQLite and never use MySQL - thanks");
        let c: Vec<Vec<&str>> = clauses(&t)
            .iter()
            .map(|c| c.iter().map(|t| t.w.as_str()).collect())
            .collect();
        assert_eq!(
            c,
            [
                vec!["scrap", "postgres"],
                vec!["we'll", "go", "with", "sqlite"],
                vec!["and", "never", "use", "mysql"],
                vec!["thanks"],
            ]
        );
    }

    #[test]
    fn fillers_are_stripped_from_the_clause_start() {
        let t = tokens("OK so from now on please never deploy");
        let c = strip_fillers(&t);
        assert_eq!(c[0].w, "never");
    }
}
