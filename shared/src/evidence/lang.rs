//! What stays language-specific in evidence selection, as data: one table
//! per word class, each language's words in one place. Nothing else of the
//! module tests a word of any language; candidates are found by the form
//! of their characters ([`super::forms`]) and ranked by the workstream's
//! own statistics ([`super::select`]).
//!
//! To add a language, add its words to each table: nothing else changes.

use std::sync::OnceLock;

use rustc_hash::FxHashSet;

/// A word class and its words, per language.
pub(crate) struct Table {
    pub(crate) by_language: &'static [(&'static str, &'static [&'static str])],
    /// The words, indexed once on first use: a table is asked about every
    /// sentence and every word of a compaction.
    index: OnceLock<Index>,
}

/// A table's words by how they are matched.
struct Index {
    /// Every word and phrase, for [`Table::has`].
    all: FxHashSet<&'static str>,
    /// Single words of spaced scripts, matched against a line's words.
    words: FxHashSet<&'static str>,
    /// Phrases of spaced scripts, matched between word boundaries.
    phrases: Vec<&'static str>,
    /// Words of scripts without spaces, matched inside a run.
    unspaced: Vec<&'static str>,
}

impl Table {
    pub(crate) const fn new(
        by_language: &'static [(&'static str, &'static [&'static str])],
    ) -> Table {
        Table {
            by_language,
            index: OnceLock::new(),
        }
    }

    fn index(&self) -> &Index {
        self.index.get_or_init(|| {
            let mut index = Index {
                all: FxHashSet::default(),
                words: FxHashSet::default(),
                phrases: Vec::new(),
                unspaced: Vec::new(),
            };
            for w in self.by_language.iter().flat_map(|(_, words)| words.iter()) {
                index.all.insert(w);
                if is_unspaced(w) {
                    index.unspaced.push(w);
                } else if w.contains(|c: char| !c.is_alphanumeric() && c != '\'') {
                    index.phrases.push(w);
                } else {
                    index.words.insert(w);
                }
            }
            index
        })
    }

    /// Whether `text` starts with one of the table's words of a script
    /// without spaces (`さんです` starts with the honorific `さん`): such
    /// words are written against what follows or precedes them.
    pub(crate) fn starts(&self, text: &str) -> bool {
        self.unspaced().any(|w| text.starts_with(w))
    }

    /// The length, in bytes, of the table's word of a script without
    /// spaces that `text` starts with (`さん。` starts with `さん`).
    pub(crate) fn prefix_in(&self, text: &str) -> Option<usize> {
        self.unspaced()
            .filter(|w| text.starts_with(*w))
            .map(str::len)
            .max()
    }

    /// The length, in bytes, of the table's word of a script without
    /// spaces that `text` ends with, when more stands before it (`田中様`
    /// ends with the honorific `様`).
    pub(crate) fn suffix_in(&self, text: &str) -> Option<usize> {
        self.unspaced()
            .find(|w| text.len() > w.len() && text.ends_with(*w))
            .map(|w| w.len())
    }

    /// The table's words of scripts without spaces.
    fn unspaced(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.index().unspaced.iter().copied()
    }

    /// Whether `word` (already lower-cased) is in the table, in any
    /// language. Words of scripts without spaces match as substrings of
    /// the line (`contained_in`).
    pub(crate) fn has(&self, word: &str) -> bool {
        self.index().all.contains(word)
    }

    /// Whether `line` (lower-cased) contains a word or phrase of the
    /// table: whole words for spaced scripts, a substring for the others.
    pub(crate) fn contained_in(&self, line: &str) -> bool {
        let index = self.index();
        if self.unspaced_in(line) {
            return true;
        }
        let words = || line.split(|c: char| !(c.is_alphanumeric() || c == '\''));
        if words().any(|w| !w.is_empty() && index.words.contains(w)) {
            return true;
        }
        if index.phrases.is_empty() {
            return false;
        }
        let mut spaced = String::with_capacity(line.len() + 2);
        spaced.push(' ');
        spaced.extend(line.chars().map(|c| {
            if c.is_alphanumeric() || c == '\'' {
                c
            } else {
                ' '
            }
        }));
        spaced.push(' ');
        index.phrases.iter().any(|w| {
            spaced.match_indices(w).any(|(i, _)| {
                let bytes = spaced.as_bytes();
                bytes.get(i.wrapping_sub(1)) == Some(&b' ') && bytes.get(i + w.len()) == Some(&b' ')
            })
        })
    }
}

impl Table {
    /// Whether `line` (lower-cased) holds one of the table's words or
    /// phrases at the head of a clause: first in a sentence or after a
    /// clause mark (`,` `;` `:` a spaced dash), or after one word of
    /// [`LEADS`] there. Words of scripts without spaces match anywhere, as
    /// in [`Table::contained_in`] (they are written against their verb).
    pub(crate) fn heads_clause_in(&self, line: &str) -> bool {
        // (Most lines hold none of the words: asked first, and that is all
        // a script without spaces needs.)
        if !self.contained_in(line) {
            return false;
        }
        if self.unspaced_in(line) {
            return true;
        }
        let index = self.index();
        let line = line
            .replace(" - ", ", ")
            .replace(" – ", ", ")
            .replace(" — ", ", ");
        line.split(['.', ',', ';', ':', '!', '?', '(', ')', '"', '\n'])
            .any(|clause| {
                let words: Vec<&str> = clause
                    .split(|c: char| !(c.is_alphanumeric() || c == '\''))
                    .filter(|w| !w.is_empty())
                    .collect();
                let heads = |from: usize| {
                    let Some(first) = words.get(from) else {
                        return false;
                    };
                    if index.words.contains(first) {
                        return true;
                    }
                    let rest = words[from..].join(" ");
                    index.phrases.iter().any(|p| {
                        rest.starts_with(p)
                            && rest[p.len()..].chars().next().is_none_or(|c| c == ' ')
                    })
                };
                heads(0) || (words.first().is_some_and(|w| LEADS.has(w)) && heads(1))
            })
    }
}

impl Table {
    /// Whether `line` holds one of the table's words of a script without
    /// spaces, matched inside a run.
    fn unspaced_in(&self, line: &str) -> bool {
        let index = self.index();
        !index.unspaced.is_empty()
            && line.chars().any(super::forms::is_unspaced_script)
            && index.unspaced.iter().any(|w| line.contains(w))
    }
}

/// Words of scripts written without spaces between words (Japanese,
/// Chinese): matched inside a run.
fn is_unspaced(word: &str) -> bool {
    word.chars().any(super::forms::is_unspaced_script)
}

/// Words that say a value replaces an earlier one: a later value of the
/// same slot whose sentence carries one of them supersedes the earlier
/// value even when their surrounding words differ.
pub(crate) static CHANGE_CUES: Table = Table::new(&[
    (
        "en",
        &[
            "instead",
            "actually",
            "change",
            "changed",
            "switch",
            "rather",
            "correction",
            "update",
            "updated",
            "no longer",
            "scratch",
            "how about",
            "what about",
            "from now on",
            "scrap",
            "rename",
            "no wait",
            "pushed",
            "postponed",
            "moved to",
        ],
    ),
    (
        "de",
        &[
            "statt",
            "stattdessen",
            "lieber",
            "doch",
            "ändern",
            "geändert",
            "korrektur",
            "eigentlich",
            "wie wäre es",
            "was ist mit",
            "ab jetzt",
            "ab sofort",
            "umbenennen",
            "verschoben",
        ],
    ),
    (
        "ja",
        &[
            "代わりに",
            "やっぱり",
            "変更",
            "訂正",
            "ではなく",
            "じゃなくて",
            "はどう",
            "今後は",
            "これからは",
            "延期",
        ],
    ),
    (
        "es",
        &[
            "mejor",
            "cambiar",
            "cambio",
            "corrección",
            "en realidad",
            "en lugar",
            "en vez",
            "qué tal",
            "a partir de ahora",
            "de ahora en adelante",
            "renombrar",
            "aplazado",
        ],
    ),
    (
        "fr",
        &[
            "plutôt",
            "finalement",
            "changer",
            "changement",
            "correction",
            "remplacer",
            "au lieu",
            "et si",
            "désormais",
            "dorénavant",
            "renommer",
            "reporté",
        ],
    ),
]);

/// Titles and honorifics: the word after (or, in Japanese, before) one
/// is a name even when the form alone would not say so.
pub(crate) static HONORIFICS: Table = Table::new(&[
    ("en", &["mr", "mrs", "ms", "dr", "prof", "sir", "madam"]),
    ("de", &["herr", "frau", "dr", "prof"]),
    (
        "ja",
        &["さん", "様", "さま", "氏", "先生", "くん", "ちゃん"],
    ),
    ("es", &["sr", "sra", "srta", "don", "doña", "dr", "dra"]),
    ("fr", &["m", "mme", "mlle", "monsieur", "madame", "dr"]),
]);

/// Words a language capitalises by its grammar, not because they name
/// something (`I'm`, the German `Sie`): a capital says nothing of them.
pub(crate) static FUNCTION_CAPITALS: Table = Table::new(&[
    (
        "en",
        &["i'm", "i'd", "i'll", "i've", "i’m", "i’d", "i’ll", "i’ve"],
    ),
    ("de", &["sie", "ihr", "ihre", "ihnen", "ihren", "ihrer"]),
    ("ja", &[]),
    ("es", &["ud", "uds", "usted", "ustedes"]),
    ("fr", &[]),
]);

/// Words a common noun follows in a language that capitalises every noun
/// (German): after one (and any lower-case words between, its adjectives),
/// a single capitalised word is that noun, not a name (`die Besprechung`,
/// `meiner Schwester`, `ein neues Hotel`). Two capitalised words in a row
/// still name (`die Deutsche Bank`, `das Hotel Adlon`), and a word after
/// a preposition alone still does (`in Berlin`, `nach München`). Languages
/// that capitalise only names list none: there a capital after an article
/// names (`the Hilton`, `le Louvre`).
pub(crate) static NOUN_ARTICLES: Table = Table::new(&[
    ("en", &[]),
    (
        "de",
        &[
            "der", "die", "das", "den", "dem", "ein", "eine", "einen", "einem", "einer", "eines",
            "kein", "keine", "keinen", "keinem", "keiner", "keines", "mein", "meine", "meinen",
            "meinem", "meiner", "meines", "dein", "deine", "deinen", "deinem", "deiner", "deines",
            "sein", "seine", "seinen", "seinem", "seiner", "seines", "ihr", "ihre", "ihren",
            "ihrem", "ihrer", "ihres", "unser", "unsere", "unseren", "unserem", "unserer",
            "unseres", "euer", "eure", "euren", "eurem", "eurer", "eures", "dieser", "diese",
            "dieses", "diesen", "diesem", "jeder", "jede", "jedes", "jeden", "jedem", "welche",
            "welcher", "welches", "welchen", "welchem", "im", "zum", "zur", "beim", "vom", "ins",
        ],
    ),
    ("ja", &[]),
    ("es", &[]),
    ("fr", &[]),
]);

/// Words that name a day, a month or a time of day, or a day counted from
/// today: what a date or a time is said with besides digits ("today",
/// "next Friday", "am Montag", "明日", "el martes", "ce soir"). They are
/// values wherever they stand, capitalised or not.
pub(crate) static CALENDAR: Table = Table::new(&[
    (
        "en",
        &[
            "today",
            "tomorrow",
            "tonight",
            "yesterday",
            "morning",
            "afternoon",
            "evening",
            "noon",
            "midnight",
            "weekend",
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
        ],
    ),
    (
        "de",
        &[
            "heute",
            "morgen",
            "übermorgen",
            "gestern",
            "vormittag",
            "nachmittag",
            "abend",
            "mittag",
            "mitternacht",
            "wochenende",
            "montag",
            "dienstag",
            "mittwoch",
            "donnerstag",
            "freitag",
            "samstag",
            "sonntag",
            "januar",
            "februar",
            "märz",
            "mai",
            "juni",
            "juli",
            "oktober",
            "dezember",
        ],
    ),
    (
        "ja",
        &[
            "今日",
            "明日",
            "明後日",
            "昨日",
            "今夜",
            "今晩",
            "午前",
            "午後",
            "週末",
            "月曜日",
            "火曜日",
            "水曜日",
            "木曜日",
            "金曜日",
            "土曜日",
            "日曜日",
        ],
    ),
    (
        "es",
        &[
            "hoy",
            "mañana",
            "anoche",
            "ayer",
            "tarde",
            "noche",
            "mediodía",
            "lunes",
            "martes",
            "miércoles",
            "jueves",
            "viernes",
            "sábado",
            "domingo",
            "enero",
            "febrero",
            "marzo",
            "abril",
            "mayo",
            "junio",
            "julio",
            "agosto",
            "septiembre",
            "octubre",
            "noviembre",
            "diciembre",
        ],
    ),
    (
        "fr",
        &[
            "aujourd'hui",
            "demain",
            "hier",
            "ce soir",
            "matin",
            "après-midi",
            "soir",
            "midi",
            "minuit",
            "lundi",
            "mardi",
            "mercredi",
            "jeudi",
            "vendredi",
            "samedi",
            "dimanche",
            "janvier",
            "février",
            "mars",
            "avril",
            "juin",
            "juillet",
            "août",
            "septembre",
            "octobre",
            "novembre",
            "décembre",
        ],
    ),
]);

/// Words that close a conversation or thank for it: a sentence holding one
/// and no value ("No that's it, thanks again.", "Danke, das ist alles.")
/// ends a talk; it is no decision and no constraint, whatever else its
/// words look like.
pub(crate) static CLOSINGS: Table = Table::new(&[
    (
        "en",
        &[
            "thanks",
            "thank you",
            "thx",
            "that's all",
            "that is all",
            "that's it",
            "that's everything",
            "nothing else",
            "anything else",
            "goodbye",
            "good bye",
            "bye",
            "all set",
        ],
    ),
    (
        "de",
        &[
            "danke",
            "dankeschön",
            "dank",
            "vielen dank",
            "das ist alles",
            "das war's",
            "nichts weiter",
            "sonst nichts",
            "tschüss",
            "auf wiedersehen",
        ],
    ),
    (
        "ja",
        &[
            "ありがとう",
            "以上です",
            "それだけです",
            "大丈夫です",
            "さようなら",
            "失礼します",
        ],
    ),
    (
        "es",
        &[
            "gracias",
            "eso es todo",
            "nada más",
            "es todo",
            "adiós",
            "hasta luego",
        ],
    ),
    (
        "fr",
        &[
            "merci",
            "c'est tout",
            "rien d'autre",
            "au revoir",
            "bonne journée",
        ],
    ),
    (
        "zh",
        &[
            "谢谢",
            "感谢",
            "多谢",
            "不客气",
            "不用谢",
            "再见",
            "拜拜",
            "没有其他问题",
            "没有其它问题",
            "就这些",
        ],
    ),
]);

/// Words that open a talk or hail the one addressed ("Hey Mel!", "Hi
/// Gina, hope you're well"): with closings, a sentence that only greets
/// or closes, naming its addressee at most, states nothing.
pub(crate) static GREETINGS: Table = Table::new(&[
    (
        "en",
        &[
            "hey",
            "hi",
            "hello",
            "good morning",
            "good evening",
            "welcome",
        ],
    ),
    (
        "de",
        &[
            "hallo",
            "hi",
            "servus",
            "moin",
            "guten morgen",
            "guten tag",
            "guten abend",
        ],
    ),
    (
        "ja",
        &["こんにちは", "こんばんは", "おはよう", "はじめまして"],
    ),
    (
        "es",
        &["hola", "buenos días", "buenas tardes", "buenas noches"],
    ),
    ("fr", &["bonjour", "salut", "bonsoir", "coucou"]),
]);

/// Words that place what a sentence says in the past ("I went there
/// yesterday", "letzte Woche", "先週", "la semana pasada"): a value said
/// with one reports what happened, it does not ask for anything. A
/// decision or a rule said with one is still framed by its own words.
pub(crate) static PAST: Table = Table::new(&[
    (
        "en",
        &[
            "yesterday",
            "ago",
            "last night",
            "last week",
            "last weekend",
            "last month",
            "last year",
            "last monday",
            "last tuesday",
            "last wednesday",
            "last thursday",
            "last friday",
            "last saturday",
            "last sunday",
            "the other day",
            "used to",
        ],
    ),
    (
        "de",
        &[
            "gestern",
            "vorgestern",
            "letzte woche",
            "letzten monat",
            "letztes jahr",
            "letztes wochenende",
            "letzten freitag",
            "neulich",
            "vor kurzem",
        ],
    ),
    (
        "ja",
        &[
            "昨日",
            "一昨日",
            "先週",
            "先月",
            "去年",
            "昨年",
            "この前",
            "この間",
        ],
    ),
    (
        "es",
        &[
            "ayer",
            "anteayer",
            "semana pasada",
            "mes pasado",
            "año pasado",
            "fin de semana pasado",
            "el otro día",
        ],
    ),
    (
        "fr",
        &[
            "hier",
            "semaine dernière",
            "mois dernier",
            "année dernière",
            "week end dernier",
            "l'autre jour",
        ],
    ),
]);

/// Words with which a tool reports that something failed: a compiler's,
/// a test runner's, a shell's. A line of a tool's output holding one is
/// what the work turns on (the panic among thirty passing tests), and
/// stands on its own instead of sharing its worth with the output's other
/// lines ([`super::read`]). Tools mostly print English whatever the user
/// writes; a localised tool's words are listed too.
pub(crate) static FAILURES: Table = Table::new(&[
    (
        "en",
        &[
            "error",
            "failed",
            "failure",
            "panicked",
            "panic",
            "exception",
            "traceback",
            "fatal",
            "denied",
            "refused",
            "not found",
            "timed out",
        ],
    ),
    ("de", &["fehler", "fehlgeschlagen", "nicht gefunden"]),
    ("ja", &["エラー", "失敗"]),
    ("es", &["falló", "no encontrado"]),
    ("fr", &["erreur", "échec", "échoué", "introuvable"]),
]);

/// Words that make a sentence a standing rule of the user's: what must,
/// must never or must always hold, or holds only so ("never push to
/// main", "nur per Bahn", "必ずテストを実行して"). A user's sentence
/// holding one is framed as a constraint even without a value.
pub(crate) static RULES: Table = Table::new(&[
    (
        "en",
        &[
            "never",
            "always",
            "must",
            "mustn't",
            "has to",
            "have to",
            "only",
            "do not",
            "don't",
            "make sure",
            "from now on",
        ],
    ),
    (
        "de",
        &[
            "nie",
            "niemals",
            "immer",
            "muss",
            "müssen",
            "nur",
            "darf nicht",
            "soll",
            "dürfen nicht",
            "auf keinen fall",
            "ab jetzt",
        ],
    ),
    (
        "ja",
        &[
            "必ず",
            "絶対",
            "常に",
            "だけ",
            "のみ",
            "しないで",
            "しないでください",
            "してはいけない",
            "なければならない",
            "今後は",
        ],
    ),
    (
        "es",
        &[
            "nunca",
            "jamás",
            "siempre",
            "solo",
            "sólo",
            "debe",
            "debes",
            "no debe",
            "tiene que",
            "hay que",
            "a partir de ahora",
        ],
    ),
    (
        "fr",
        &[
            "jamais",
            "toujours",
            "seulement",
            "uniquement",
            "doit",
            "dois",
            "il faut",
            "ne pas",
            "désormais",
        ],
    ),
]);

/// Words that ask for something rather than give it: a question holding
/// one ("What's the address of Century Vallejo?", "Wann fährt der Zug?")
/// asks about a value, it does not set one. A question without one ("Is
/// there anything in NY?", "Can you make that three tickets?") still
/// gives its values.
pub(crate) static QUESTIONS: Table = Table::new(&[
    (
        "en",
        &[
            "what", "what's", "whats", "where", "where's", "when", "when's", "how", "how's",
            "which", "who", "who's", "whom", "whose", "why",
        ],
    ),
    (
        "de",
        &[
            "was", "wo", "wohin", "woher", "wann", "wie", "welche", "welcher", "welches", "wer",
            "wen", "wem", "warum", "wieso",
        ],
    ),
    (
        "ja",
        &[
            "何",
            "なに",
            "なん",
            "どこ",
            "いつ",
            "どう",
            "どの",
            "どれ",
            "誰",
            "だれ",
            "なぜ",
            "どうして",
            "いくら",
        ],
    ),
    (
        "es",
        &[
            "qué", "que", "dónde", "donde", "cuándo", "cuando", "cómo", "cuál", "cuáles", "quién",
            "quiénes", "por qué", "cuánto", "cuánta",
        ],
    ),
    (
        "fr",
        &[
            "quoi",
            "que",
            "qu'est ce",
            "où",
            "quand",
            "comment",
            "quel",
            "quelle",
            "quels",
            "quelles",
            "qui",
            "pourquoi",
            "combien",
        ],
    ),
]);

/// Words that make a sentence something other than the user's own choice:
/// a hypothetical or a guess ("maybe we should use Postgres", "vielleicht
/// morgen"), or what someone else says ("the docs say you must restart").
pub(crate) static HEDGES: Table = Table::new(&[
    (
        "en",
        &[
            "maybe",
            "perhaps",
            "might",
            "what if",
            "wonder",
            "wondering",
            "probably",
            "i guess",
            "not sure",
            "hypothetically",
            "don't know",
            "do not know",
            "would never",
            "say",
            "says",
            "said",
            "told me",
            "according to",
        ],
    ),
    (
        "de",
        &[
            "vielleicht",
            "eventuell",
            "wahrscheinlich",
            "was wäre wenn",
            "ich frage mich",
            "keine ahnung",
            "weiß nicht",
            "sagt",
            "sagte",
            "laut",
        ],
    ),
    (
        "ja",
        &[
            "かもしれない",
            "かもしれません",
            "たぶん",
            "多分",
            "もしかして",
            "わからない",
            "と言って",
            "によると",
        ],
    ),
    (
        "es",
        &[
            "quizás",
            "quizá",
            "tal vez",
            "a lo mejor",
            "probablemente",
            "me pregunto",
            "no estoy seguro",
            "no sé",
            "dice",
            "dijo",
            "según",
        ],
    ),
    (
        "fr",
        &[
            "peut être",
            "probablement",
            "et si",
            "je me demande",
            "pas sûr",
            "je ne sais pas",
            "dit",
            "selon",
        ],
    ),
]);

/// Count words: a number written in letters is as much a value as its
/// digits ("two tickets", "zwei Personen", "tres baños"). One is left out:
/// it is as often a pronoun ("this one", "uno más") as a count.
pub(crate) static COUNTS: Table = Table::new(&[
    (
        "en",
        &[
            "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
            "twelve", "twenty", "thirty", "forty", "fifty", "hundred", "thousand",
        ],
    ),
    (
        "de",
        &[
            "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn", "elf",
            "zwölf", "zwanzig", "dreißig", "hundert", "tausend",
        ],
    ),
    (
        "ja",
        &[
            "二人", "三人", "四人", "五人", "二つ", "三つ", "四つ", "五つ", "二枚", "三枚", "四枚",
        ],
    ),
    (
        "es",
        &[
            "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve", "diez", "doce",
            "veinte", "treinta", "cien", "mil",
        ],
    ),
    (
        "fr",
        &[
            "deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf", "dix", "onze",
            "douze", "vingt", "trente", "mille",
        ],
    ),
]);

/// Words with which a user picks one thing among others ("let's use
/// Postgres", "we'll go with the 9:40", "lass uns SQLite nehmen"): a
/// sentence holding one is a decision.
pub(crate) static CHOICES: Table = Table::new(&[
    (
        "en",
        &[
            "let's",
            "let us",
            "go with",
            "we'll use",
            "we will use",
            "decided",
            "i'll take",
            "i will take",
            "i prefer",
            "i'd prefer",
            "we'll take",
            "i choose",
            "i pick",
            "use",
        ],
    ),
    (
        "de",
        &[
            "lass uns",
            "lasst uns",
            "wir nehmen",
            "ich nehme",
            "entschieden",
            "ich bevorzuge",
            "verwende",
            "nutze",
            "nimm",
        ],
    ),
    (
        "ja",
        &[
            "にします",
            "にしよう",
            "に決め",
            "を選",
            "を使って",
            "を使う",
        ],
    ),
    (
        "es",
        &[
            "vamos a usar",
            "usemos",
            "usa",
            "utiliza",
            "elegimos",
            "me quedo con",
            "prefiero",
            "decidimos",
        ],
    ),
    (
        "fr",
        &[
            "on prend",
            "prenons",
            "utilisons",
            "utilise",
            "je prends",
            "je préfère",
            "on a décidé",
            "choisi",
        ],
    ),
]);

/// Words of a condition of the user's that every answer must respect,
/// said without a rule word ("I'm vegetarian and my son is allergic to
/// nuts."): framed as a constraint.
pub(crate) static CONDITIONS: Table = Table::new(&[
    (
        "en",
        &[
            "allergic",
            "allergy",
            "vegetarian",
            "vegan",
            "intolerant",
            "wheelchair",
        ],
    ),
    (
        "de",
        &[
            "allergisch",
            "allergie",
            "vegetarier",
            "vegetarierin",
            "vegan",
            "rollstuhl",
        ],
    ),
    ("ja", &["アレルギー", "ベジタリアン", "菜食", "車椅子"]),
    (
        "es",
        &[
            "alérgico",
            "alérgica",
            "alergia",
            "vegetariano",
            "vegetariana",
            "vegano",
            "silla de ruedas",
        ],
    ),
    (
        "fr",
        &[
            "allergique",
            "allergie",
            "végétarien",
            "végétarienne",
            "végane",
            "fauteuil roulant",
        ],
    ),
]);

/// Set phrases that hold a rule word ([`RULES`]) and state no rule: "never
/// mind", "no worries, always happy to help", "must be the cache" (a
/// guess). A sentence holding one is not framed by its rule word.
pub(crate) static IDIOMS: Table = Table::new(&[
    (
        "en",
        &[
            "never mind",
            "nevermind",
            "don't worry",
            "do not worry",
            "no worries",
            "must be",
            "must have",
            "never thought",
            "always happy",
            "not only",
            "if only",
            "don't think",
            "only just",
            "must admit",
            "must say",
            "have to admit",
            "have to say",
            "always wanted",
        ],
    ),
    (
        "de",
        &[
            "keine sorge",
            "macht nichts",
            "muss wohl",
            "nicht nur",
            "schon immer",
            "muss sagen",
            "muss zugeben",
        ],
    ),
    ("ja", &["気にしないで", "だけど", "だけです"]),
    (
        "es",
        &[
            "no te preocupes",
            "no importa",
            "debe de",
            "no solo",
            "no sólo",
            "tengo que decir",
            "tengo que admitir",
            "debo admitir",
            "siempre quise",
        ],
    ),
    (
        "fr",
        &[
            "ne t'inquiète pas",
            "pas de souci",
            "doit être",
            "non seulement",
            "dois dire",
            "dois avouer",
            "toujours voulu",
        ],
    ),
]);

/// Words that set one thing against another right after a comma ("to
/// the original card, not store credit", "per Bahn, nicht per Flug"): a
/// sentence that does so picks the first, a decision even without a value.
/// In scripts without spaces the word alone marks it ("窓側ではなく通路側").
pub(crate) static CONTRASTS: Table = Table::new(&[
    ("en", &["not", "rather than"]),
    ("de", &["nicht", "statt"]),
    ("ja", &["ではなく", "じゃなくて"]),
    ("es", &["no", "en vez de"]),
    ("fr", &["pas", "plutôt que"]),
]);

/// Words that may stand before a rule or a choice at the head of its
/// clause: the subject that holds to it, a word of politeness, a bare yes
/// and a joining "and" or "but" ("we never deploy without a review", "it
/// has to stay off in prod", "please never push to main", "and never share
/// my number", "bitte nie direkt pushen", "je préfère le train"). Not "no":
/// in Spanish it is the negation ("no siempre es fácil"). A rule word
/// after anything else qualifies what is said rather than lays down a rule
/// ("I've always had a love for horses", "it isn't always easy", "to make
/// sure the kids are fine").
pub(crate) static LEADS: Table = Table::new(&[
    (
        "en",
        &[
            "i", "we", "you", "it", "please", "yes", "ok", "okay", "and", "but",
        ],
    ),
    (
        "de",
        &[
            "ich", "wir", "du", "ihr", "sie", "man", "das", "bitte", "ja", "nein", "und", "aber",
        ],
    ),
    ("ja", &["私は", "僕は", "我々は"]),
    (
        "es",
        &[
            "yo", "nosotros", "nosotras", "tú", "usted", "ustedes", "sí", "y", "pero",
        ],
    ),
    (
        "fr",
        &[
            "je", "nous", "tu", "vous", "on", "ça", "cela", "non", "oui", "et", "mais",
        ],
    ),
]);

impl Table {
    /// Whether `line` (lower-cased) sets something against another: one of
    /// the table's words right after a comma, or anywhere in a script
    /// without spaces.
    pub(crate) fn after_comma_in(&self, line: &str) -> bool {
        self.by_language.iter().any(|(_, words)| {
            words.iter().any(|w| {
                if is_unspaced(w) {
                    return line.contains(w);
                }
                line.match_indices(w).any(|(at, _)| {
                    let before = line[..at].trim_end();
                    let after = line[at + w.len()..].chars().next();
                    before.ends_with([',', '，', '、'])
                        && before.len() < at
                        && !after.is_some_and(char::is_alphanumeric)
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_the_five_languages() {
        for table in [
            &CHANGE_CUES,
            &HONORIFICS,
            &CALENDAR,
            &CLOSINGS,
            &RULES,
            &QUESTIONS,
            &HEDGES,
            &COUNTS,
            &CHOICES,
            &CONDITIONS,
            &IDIOMS,
            &CONTRASTS,
            &FUNCTION_CAPITALS,
            &LEADS,
            &NOUN_ARTICLES,
        ] {
            let langs: Vec<&str> = table.by_language.iter().map(|(l, _)| *l).collect();
            for lang in ["en", "de", "ja", "es", "fr"] {
                assert!(langs.contains(&lang), "{lang} missing");
            }
        }
    }

    #[test]
    fn cues_match_whole_words_in_spaced_scripts_and_runs_in_the_others() {
        assert!(CHANGE_CUES.contained_in("make it 8 pm instead"));
        assert!(CHANGE_CUES.contained_in("how about the 7th?"));
        assert!(!CHANGE_CUES.contained_in("unchanged"));
        assert!(CHANGE_CUES.contained_in("lieber um 9 uhr"));
        assert!(CHANGE_CUES.contained_in("やっぱり3月16日にします"));
        assert!(CHANGE_CUES.contained_in("mejor el martes"));
        assert!(CHANGE_CUES.contained_in("plutôt jeudi"));
        assert!(HONORIFICS.has("frau"));
        assert!(CLOSINGS.contained_in("no that's it, thanks again."));
        assert!(CLOSINGS.contained_in("danke, das ist alles."));
        assert!(CLOSINGS.contained_in("以上です。ありがとうございました"));
        assert!(CLOSINGS.contained_in("eso es todo, gracias"));
        assert!(CLOSINGS.contained_in("merci, c'est tout"));
        assert!(!CLOSINGS.contained_in("keep the thankyou page"));
    }
}
