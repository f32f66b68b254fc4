//! Token estimation.
//!
//! The seed estimates tokens as `chars / 3` over the serialized conversation:
//! cheap, tokenizer-free and deliberately pessimistic (real BPE tokenizers
//! average ~4 chars per token on English), so thresholds trip early rather
//! than late. Chinese, Japanese and Korean are the exception: their chars
//! are about a token each, and [`CharEstimator`] counts them so
//! ([`is_dense`]). A real tokenizer can be plugged in through [`TokenEstimator`];
//! with the `tiktoken` feature, [`TiktokenEstimator`] is provided.

use crate::message::{Message, Part, PRUNED_PLACEHOLDER};

/// Counts tokens in text. Implementations must be cheap and deterministic.
pub trait TokenEstimator: Send + Sync {
    /// Tokens in `text`.
    fn count(&self, text: &str) -> u64;

    /// Tokens a message occupies when sent to a model: every part as it would
    /// be serialized (pruned tool output counts as its placeholder).
    fn message_tokens(&self, message: &Message) -> u64 {
        message.parts.iter().map(|p| self.part_tokens(p)).sum()
    }

    /// Tokens of one part.
    fn part_tokens(&self, part: &Part) -> u64 {
        match part {
            Part::Text { text } | Part::Reasoning { text } => self.count(text),
            Part::ToolCall {
                tool_name, input, ..
            } => self.count(tool_name) + self.count(&input.to_string()),
            Part::ToolResult {
                tool_name,
                output,
                pruned,
                ..
            } => {
                let shown = if *pruned { PRUNED_PLACEHOLDER } else { output };
                self.count(tool_name) + self.count(shown)
            }
            Part::File { uri, name, .. } => {
                self.count(uri) + name.as_deref().map_or(0, |n| self.count(n))
            }
        }
    }
}

/// `ceil(chars / chars_per_token)`; the seed's default is 3.
#[derive(Debug, Clone, Copy)]
pub struct CharEstimator {
    chars_per_token: u64,
}

impl CharEstimator {
    /// The seed's estimate: 3 chars per token.
    pub const DEFAULT: CharEstimator = CharEstimator { chars_per_token: 3 };

    /// `chars_per_token` of 0 is treated as 1.
    pub fn new(chars_per_token: u32) -> Self {
        CharEstimator {
            chars_per_token: u64::from(chars_per_token.max(1)),
        }
    }

    /// The width of `text` in chars at `chars_per_token`: a char of a
    /// [dense](is_dense) script counts as a whole token's worth of chars.
    /// What the chunker and the estimate both measure, so a chunk of
    /// `chunk.max_chars` is the number of tokens the config says it is in
    /// any script.
    pub fn width(&self, text: &str) -> usize {
        if text.is_ascii() {
            return text.len();
        }
        text.chars().map(|c| self.char_width(c)).sum()
    }

    /// The width of one char (see [`CharEstimator::width`]).
    pub fn char_width(&self, c: char) -> usize {
        if is_dense(c) {
            usize::try_from(self.chars_per_token).unwrap_or(usize::MAX)
        } else {
            1
        }
    }
}

impl Default for CharEstimator {
    fn default() -> Self {
        CharEstimator::DEFAULT
    }
}

impl TokenEstimator for CharEstimator {
    fn count(&self, text: &str) -> u64 {
        (self.width(text) as u64).div_ceil(self.chars_per_token)
    }
}

/// Whether `c` is of a script that BPE vocabularies spend about one token
/// per char on: Han, kana and Hangul, with their punctuation and
/// full-width forms. Measured on one sentence per script
/// (`tokens::tests::the_estimate_is_near_or_over_real_tokenizers_in_every_script`):
/// Chinese, Japanese and Korean take 1.0–1.1 chars per token in
/// `cl100k_base` and 1.4–1.8 in `o200k_base`, where English takes 5.8;
/// counted at `chars / 3` they would be estimated at a third of their size,
/// and a conversation in them would overflow the window it was measured
/// against. Other scripts (Cyrillic, Greek, Arabic, Hebrew, Devanagari,
/// Thai) take 2.4–3.7 chars per token in `o200k_base`, which `chars / 3`
/// covers about; in the older `cl100k_base` they take 1–2.4.
pub fn is_dense(c: char) -> bool {
    matches!(
        c,
        '\u{1100}'..='\u{11FF}'     // Hangul Jamo
        | '\u{2E80}'..='\u{2FDF}'   // CJK radicals, Kangxi radicals
        | '\u{3000}'..='\u{303F}'   // CJK symbols and punctuation
        | '\u{3040}'..='\u{30FF}'   // hiragana, katakana
        | '\u{3100}'..='\u{31FF}'   // bopomofo, Hangul compatibility jamo, kanbun, katakana extensions
        | '\u{3200}'..='\u{4DBF}'   // enclosed CJK, compatibility, extension A
        | '\u{4E00}'..='\u{9FFF}'   // CJK unified ideographs
        | '\u{A960}'..='\u{A97F}'   // Hangul Jamo extended A
        | '\u{AC00}'..='\u{D7FF}'   // Hangul syllables, Jamo extended B
        | '\u{F900}'..='\u{FAFF}'   // CJK compatibility ideographs
        | '\u{FE30}'..='\u{FE4F}'   // CJK compatibility forms
        | '\u{FF00}'..='\u{FFEF}'   // half-width and full-width forms
        | '\u{20000}'..='\u{3FFFF}' // CJK extensions B and later
    )
}

/// Tokens of a whole slice of messages.
pub fn messages_tokens(estimator: &dyn TokenEstimator, messages: &[Message]) -> u64 {
    messages.iter().map(|m| estimator.message_tokens(m)).sum()
}

#[cfg(feature = "tiktoken")]
pub use tiktoken::{Encoding, TiktokenEstimator};

#[cfg(feature = "tiktoken")]
mod tiktoken {
    use super::TokenEstimator;

    /// Which BPE vocabulary to use.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Encoding {
        /// GPT-3.5 / GPT-4.
        Cl100kBase,
        /// GPT-4o and later.
        O200kBase,
    }

    /// Exact token counts with OpenAI's BPE vocabularies (bundled with the
    /// crate, no download at run time).
    pub struct TiktokenEstimator {
        bpe: tiktoken_rs::CoreBPE,
    }

    impl TiktokenEstimator {
        pub fn new(encoding: Encoding) -> Result<Self, String> {
            let bpe = match encoding {
                Encoding::Cl100kBase => tiktoken_rs::cl100k_base(),
                Encoding::O200kBase => tiktoken_rs::o200k_base(),
            }
            .map_err(|e| format!("loading tokenizer: {e}"))?;
            Ok(TiktokenEstimator { bpe })
        }
    }

    impl TokenEstimator for TiktokenEstimator {
        fn count(&self, text: &str) -> u64 {
            self.bpe.encode_ordinary(text).len() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    #[test]
    fn chars_over_three_rounds_up_and_counts_chars_not_bytes() {
        let e = CharEstimator::default();
        assert_eq!(e.count(""), 0);
        assert_eq!(e.count("abc"), 1);
        assert_eq!(e.count("abcd"), 2);
        assert_eq!(e.count("ééé"), 1, "6 bytes but 3 chars");
        assert_eq!(CharEstimator::new(0).count("ab"), 2);
    }

    #[test]
    fn pruned_tool_output_counts_as_its_placeholder() {
        let e = CharEstimator::default();
        let result = |pruned| Part::ToolResult {
            call_id: "c".into(),
            tool_name: "bash".into(),
            output: "x".repeat(30_000),
            is_error: false,
            pruned,
        };
        let full = e.message_tokens(&Message::new(1, Role::Tool, vec![result(false)]));
        let pruned = e.message_tokens(&Message::new(1, Role::Tool, vec![result(true)]));
        assert_eq!(full, 2 + 10_000);
        assert_eq!(pruned, 2 + e.count(PRUNED_PLACEHOLDER));
    }

    #[test]
    fn a_char_of_chinese_japanese_or_korean_counts_as_a_token() {
        let e = CharEstimator::default();
        assert_eq!(e.count("由于仓库经理出差"), 8);
        assert_eq!(e.count("打ち合わせ"), 5);
        assert_eq!(e.count("목요일 오후"), 6, "5 syllables and a space");
        assert_eq!(
            e.count("会议 at 3pm"),
            2 + 3,
            "6 chars of ASCII, 2 ideographs"
        );
        assert_eq!(e.count("Встреча"), 3, "Cyrillic counts as chars");
        assert_eq!(e.width("会议 ok"), 9);
        assert_eq!(CharEstimator::new(4).width("会"), 4);
    }

    /// One sentence per script, and a line of code and of JSON.
    #[cfg(feature = "tiktoken")]
    const SCRIPTS: [(&str, &str); 14] = [
        ("en", "The meeting with the supplier was moved to Thursday afternoon because the warehouse manager is travelling, and we still need the revised invoice before then."),
        ("de", "Das Treffen mit dem Lieferanten wurde auf Donnerstagnachmittag verschoben, weil der Lagerleiter verreist ist, und wir brauchen vorher noch die korrigierte Rechnung."),
        ("ru", "Встреча с поставщиком перенесена на четверг после обеда, потому что заведующий складом в командировке, а нам до этого ещё нужен исправленный счёт."),
        ("el", "Η συνάντηση με τον προμηθευτή μεταφέρθηκε την Πέμπτη το απόγευμα επειδή ο διευθυντής της αποθήκης ταξιδεύει."),
        ("ar", "تم نقل الاجتماع مع المورد إلى بعد ظهر يوم الخميس لأن مدير المستودع مسافر، وما زلنا بحاجة إلى الفاتورة المعدلة قبل ذلك."),
        ("he", "הפגישה עם הספק הועברה ליום חמישי אחר הצהריים כי מנהל המחסן בנסיעה, ואנחנו עדיין צריכים את החשבונית המתוקנת לפני כן."),
        ("hi", "आपूर्तिकर्ता के साथ बैठक गुरुवार दोपहर तक के लिए स्थगित कर दी गई क्योंकि गोदाम प्रबंधक यात्रा पर हैं।"),
        ("th", "การประชุมกับซัพพลายเออร์ถูกเลื่อนไปเป็นบ่ายวันพฤหัสบดีเพราะผู้จัดการคลังสินค้ากำลังเดินทาง"),
        ("ko", "창고 관리자가 출장 중이어서 공급업체와의 회의가 목요일 오후로 옮겨졌고, 그 전에 수정된 송장이 아직 필요합니다."),
        ("ja", "倉庫の管理者が出張中のため、仕入先との打ち合わせは木曜日の午後に変更されました。それまでに修正した請求書が必要です。"),
        ("zh", "由于仓库经理出差，与供应商的会议改到了周四下午，在此之前我们仍然需要修改后的发票。"),
        ("vi", "Cuộc họp với nhà cung cấp đã được dời sang chiều thứ Năm vì quản lý kho đang đi công tác."),
        ("code", "fn main() { let x = vec![1, 2, 3]; println!(\"{:?}\", x.iter().map(|v| v * 2).collect::<Vec<_>>()); }"),
        ("json", "{\"order_id\":\"A-448213\",\"amount\":1249.90,\"currency\":\"EUR\",\"items\":[{\"sku\":\"X-1\",\"qty\":2}]}"),
    ];

    /// The estimate against `o200k_base` (today's models) and `cl100k_base`
    /// (the older vocabulary, and the worst case for non-Latin scripts).
    #[cfg(feature = "tiktoken")]
    #[test]
    fn the_estimate_is_near_or_over_real_tokenizers_in_every_script() {
        let e = CharEstimator::default();
        let cl = TiktokenEstimator::new(Encoding::Cl100kBase).unwrap();
        let o = TiktokenEstimator::new(Encoding::O200kBase).unwrap();
        for (script, text) in SCRIPTS {
            let (ours, cl, o) = (
                e.count(text) as f64,
                cl.count(text) as f64,
                o.count(text) as f64,
            );
            eprintln!("{script}: ours {ours}, o200k {o}, cl100k {cl}");
            assert!(ours >= 0.75 * o, "{script}: {ours} against o200k's {o}");
            if matches!(script, "zh" | "ja" | "ko") {
                assert!(ours >= o, "{script}: {ours} against o200k's {o}");
                assert!(ours >= 0.85 * cl, "{script}: {ours} against cl100k's {cl}");
            }
        }
    }

    #[cfg(feature = "tiktoken")]
    #[test]
    fn tiktoken_counts_real_tokens() {
        let e = TiktokenEstimator::new(Encoding::Cl100kBase).unwrap();
        assert_eq!(e.count("hello world"), 2);
    }
}
