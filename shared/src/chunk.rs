//! Chunking of a transcript for sequential summarization.
//!
//! A transcript longer than one summarizer call can take is cut into chunks
//! that are summarized in order, each folding into the summary of the ones
//! before (the seed's `COMPACTION_CHUNK_MAX_CHARS`).
//!
//! Rules, in order of priority:
//! - **Nothing is lost or added.** Chunks are consecutive slices of the
//!   transcript text; concatenated they give the text back exactly.
//! - **A chunk never exceeds the limit**, in chars at the estimate's
//!   `chars_per_token`, a char of Chinese, Japanese or Korean counting as a
//!   token's worth ([`CharEstimator::width`]): the limit is a number of
//!   tokens in any script. (A single char wider than the limit is a chunk
//!   of its own.)
//! - **Messages stay whole where possible.** Whole blocks are packed
//!   greedily; only a block that alone exceeds the limit is split. It then
//!   starts a fresh chunk and is cut at the last line break within the
//!   limit, so the summarizer sees whole lines, unless that line break would
//!   leave less than half a chunk (one very long line): then it is cut at the
//!   limit, on a char boundary, so a long line cannot produce a run of tiny
//!   chunks. The last piece of a split block is packed like a block.

use crate::message::MessageId;
use crate::tokens::CharEstimator;
use crate::transcript::Transcript;

/// The seed's `COMPACTION_CHUNK_MAX_CHARS`.
pub const DEFAULT_CHUNK_MAX_CHARS: usize = 120_000;

/// A slice of the transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk<'a> {
    pub text: &'a str,
    pub first_message: MessageId,
    pub last_message: MessageId,
}

/// Splits `transcript` into chunks of at most `max_chars` chars as
/// `measure` counts them (0 is treated as 1). An empty transcript has no
/// chunks.
///
/// The blocks are expected to be the ones [`crate::transcript::extract`]
/// made (contiguous, covering the text). Blocks that are not are tolerated
/// without panicking: a block whose range cannot be sliced is merged into the
/// next one, and text after the last block joins the last chunk's message.
pub fn chunk(transcript: &Transcript, max_chars: usize, measure: CharEstimator) -> Vec<Chunk<'_>> {
    let text = transcript.text.as_str();
    let mut packer = Packer::new(text, max_chars.max(1), measure);
    let mut cursor = 0;
    for block in &transcript.blocks {
        let end = block.range.end.min(text.len());
        let Some(slice) = text.get(cursor..end).filter(|s| !s.is_empty()) else {
            continue;
        };
        packer.add(cursor, slice, measure.width(slice), block.message_id);
        cursor = end;
    }
    if let (Some(rest), Some(last)) = (
        text.get(cursor..).filter(|s| !s.is_empty()),
        transcript.blocks.last(),
    ) {
        packer.add(cursor, rest, measure.width(rest), last.message_id);
    }
    packer.finish()
}

/// A chunk that owns its text (see [`ChunkStream`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedChunk {
    pub text: String,
    pub first_message: MessageId,
    pub last_message: MessageId,
}

impl From<&Chunk<'_>> for OwnedChunk {
    fn from(c: &Chunk<'_>) -> OwnedChunk {
        OwnedChunk {
            text: c.text.to_owned(),
            first_message: c.first_message,
            last_message: c.last_message,
        }
    }
}

/// Chunks a transcript that arrives in pieces (the transcript of one page of
/// messages at a time), so a compacted span of any length is chunked with
/// about one chunk of text in memory. Gives exactly the chunks [`chunk`]
/// gives for the whole transcript.
///
/// Why that holds: chunks are packed greedily from the front, so every
/// chunk but the last is final once it is closed; the open last one is kept
/// (as a transcript starting where it starts) and packing resumes from it
/// when the next piece arrives.
#[derive(Debug, Clone)]
pub struct ChunkStream {
    max_chars: usize,
    measure: CharEstimator,
    pending: Transcript,
    pending_chars: usize,
}

impl ChunkStream {
    pub fn new(max_chars: usize, measure: CharEstimator) -> ChunkStream {
        ChunkStream {
            max_chars: max_chars.max(1),
            measure,
            pending: Transcript::default(),
            pending_chars: 0,
        }
    }

    /// Adds the transcript of the next messages; returns the chunks that
    /// are complete.
    pub fn push(&mut self, piece: Transcript) -> Vec<OwnedChunk> {
        let offset = self.pending.text.len();
        self.pending_chars += self.measure.width(&piece.text);
        self.pending.text.push_str(&piece.text);
        for block in piece.blocks {
            self.pending.blocks.push(crate::transcript::Block {
                range: block.range.start + offset..block.range.end + offset,
                ..block
            });
        }
        if self.pending_chars <= self.max_chars {
            return Vec::new();
        }
        let chunks = chunk(&self.pending, self.max_chars, self.measure);
        let Some((open, done)) = chunks.split_last() else {
            return Vec::new();
        };
        let complete: Vec<OwnedChunk> = done.iter().map(OwnedChunk::from).collect();
        let keep_from = self.pending.text.len() - open.text.len();
        self.keep_from(keep_from);
        complete
    }

    /// The chunks still pending, at the end of the stream.
    pub fn finish(self) -> Vec<OwnedChunk> {
        chunk(&self.pending, self.max_chars, self.measure)
            .iter()
            .map(OwnedChunk::from)
            .collect()
    }

    /// Drops the pending text before byte `at` (a chunk boundary); a block
    /// that straddles it keeps its part after `at`.
    fn keep_from(&mut self, at: usize) {
        let text = self.pending.text.get(at..).unwrap_or_default().to_owned();
        let blocks = self
            .pending
            .blocks
            .drain(..)
            .filter(|block| block.range.end > at)
            .map(|block| crate::transcript::Block {
                range: block.range.start.max(at) - at..block.range.end - at,
                ..block
            })
            .collect();
        self.pending_chars = self.measure.width(&text);
        self.pending = Transcript { text, blocks };
    }
}

/// The chunk being filled.
struct Open {
    start: usize,
    end: usize,
    chars: usize,
    first: MessageId,
    last: MessageId,
}

/// Greedy packing state.
struct Packer<'a> {
    text: &'a str,
    max: usize,
    measure: CharEstimator,
    open: Option<Open>,
    done: Vec<Chunk<'a>>,
}

impl<'a> Packer<'a> {
    fn new(text: &'a str, max: usize, measure: CharEstimator) -> Self {
        Packer {
            text,
            max,
            measure,
            open: None,
            done: Vec::new(),
        }
    }

    /// Adds the block `slice` (starting at byte `start` of the text, `chars`
    /// chars wide).
    fn add(&mut self, start: usize, slice: &'a str, chars: usize, id: MessageId) {
        if let Some(open) = &mut self.open {
            if open.chars.saturating_add(chars) <= self.max {
                open.end = start + slice.len();
                open.chars += chars;
                open.last = id;
                return;
            }
            self.close();
        }
        if chars <= self.max {
            self.open_with(start, slice.len(), chars, id);
        } else {
            self.split(start, slice, id);
        }
    }

    /// Emits full-size pieces of an oversized block; its last piece stays
    /// open so following blocks can join it.
    fn split(&mut self, start: usize, slice: &'a str, id: MessageId) {
        let mut rest = slice;
        let mut at = start;
        loop {
            let (len, chars) = cut_point(rest, self.max, self.measure);
            if len >= rest.len() {
                self.open_with(at, rest.len(), chars, id);
                return;
            }
            self.open_with(at, len, chars, id);
            self.close();
            at += len;
            rest = rest.get(len..).unwrap_or_default();
        }
    }

    fn open_with(&mut self, start: usize, len: usize, chars: usize, id: MessageId) {
        self.open = Some(Open {
            start,
            end: start + len,
            chars,
            first: id,
            last: id,
        });
    }

    fn close(&mut self) {
        if let Some(open) = self.open.take() {
            if let Some(text) = self.text.get(open.start..open.end) {
                self.done.push(Chunk {
                    text,
                    first_message: open.first,
                    last_message: open.last,
                });
            }
        }
    }

    fn finish(mut self) -> Vec<Chunk<'a>> {
        self.close();
        self.done
    }
}

/// Where to end the next piece of `s` (at most `max` chars wide, `max >=
/// 1`, and at least one char): `(byte length, width)` of that piece. The
/// whole of `s` when it fits.
fn cut_point(s: &str, max: usize, measure: CharEstimator) -> (usize, usize) {
    // Byte index just past the widest prefix within `max`, if `s` is wider.
    let mut width = 0;
    let mut limit = None;
    for (i, c) in s.char_indices() {
        let w = measure.char_width(c);
        if width + w > max && i > 0 {
            limit = Some(i);
            break;
        }
        width += w;
    }
    let Some(limit) = limit else {
        return (s.len(), width);
    };
    let window = s.get(..limit).unwrap_or_default();
    match memchr::memrchr(b'\n', window.as_bytes()) {
        Some(nl) => {
            let piece = window.get(..=nl).unwrap_or_default();
            let piece_width = measure.width(piece);
            // A break that leaves less than half a chunk is not worth it.
            if piece_width.saturating_mul(2) >= max {
                return (piece.len(), piece_width);
            }
            (limit, width)
        }
        None => (limit, width),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::transcript::strategies;
    use crate::transcript::{extract, Block, TranscriptConfig};

    /// The seed's estimate: 3 chars per token.
    const M: CharEstimator = CharEstimator::DEFAULT;

    /// A transcript made of the given blocks (text per message id).
    fn transcript(blocks: &[(i64, &str)]) -> Transcript {
        let mut t = Transcript::default();
        for (id, body) in blocks {
            let start = t.text.len();
            t.text.push_str(body);
            t.blocks.push(Block {
                message_id: MessageId(*id),
                range: start..t.text.len(),
            });
        }
        t
    }

    fn texts<'a>(chunks: &[Chunk<'a>]) -> Vec<&'a str> {
        chunks.iter().map(|c| c.text).collect()
    }

    #[test]
    fn empty_transcript_has_no_chunks() {
        assert!(chunk(&Transcript::default(), 10, M).is_empty());
        assert!(chunk(&Transcript::default(), 0, M).is_empty());
    }

    #[test]
    fn whole_blocks_are_packed_greedily() {
        let t = transcript(&[(1, "aaaa\n"), (2, "bbbb\n"), (3, "cc\n"), (4, "d\n")]);
        let chunks = chunk(&t, 10, M);
        assert_eq!(texts(&chunks), ["aaaa\nbbbb\n", "cc\nd\n"]);
        assert_eq!(chunks[0].first_message, MessageId(1));
        assert_eq!(chunks[0].last_message, MessageId(2));
        assert_eq!(chunks[1].first_message, MessageId(3));
        assert_eq!(chunks[1].last_message, MessageId(4));
    }

    #[test]
    fn the_limit_counts_chars_not_bytes() {
        // 4 chars, 8 bytes each: two fit in 8 chars.
        let t = transcript(&[(1, "ééé\n"), (2, "ééé\n"), (3, "x")]);
        let chunks = chunk(&t, 8, M);
        assert_eq!(texts(&chunks), ["ééé\nééé\n", "x"]);
    }

    #[test]
    fn the_limit_counts_a_char_of_chinese_as_a_token() {
        // 3 ideographs are 9 chars wide at 3 chars per token: one per chunk
        // of 10 with its line break, where 10 chars of Latin text fit.
        let t = transcript(&[(1, "会议改\n"), (2, "到周四\n"), (3, "abcdefghi\n")]);
        assert_eq!(
            texts(&chunk(&t, 10, M)),
            ["会议改\n", "到周四\n", "abcdefghi\n"]
        );
        let long = transcript(&[(1, "会议改到周四下午")]);
        assert_eq!(texts(&chunk(&long, 7, M)), ["会议", "改到", "周四", "下午"]);
        assert_eq!(
            texts(&chunk(&long, 1, M)).len(),
            8,
            "a char wider than the limit is a chunk of its own"
        );
    }

    #[test]
    fn an_oversized_block_is_split_at_the_last_line_break() {
        let t = transcript(&[(1, "ab\n"), (2, "line1\nline2\nline3\n"), (3, "z\n")]);
        let chunks = chunk(&t, 13, M);
        assert_eq!(texts(&chunks), ["ab\n", "line1\nline2\n", "line3\nz\n"]);
        assert_eq!(chunks[1].first_message, MessageId(2));
        assert_eq!(chunks[2].first_message, MessageId(2));
        assert_eq!(chunks[2].last_message, MessageId(3));
    }

    #[test]
    fn a_long_line_is_split_at_a_char_boundary() {
        let t = transcript(&[(5, "h\néééééééé")]);
        let chunks = chunk(&t, 5, M);
        // The break after "h" would leave a 2-char chunk: cut at 5 chars.
        assert_eq!(texts(&chunks), ["h\nééé", "ééééé"]);
        assert!(chunks.iter().all(|c| c.first_message == MessageId(5)));
    }

    #[test]
    fn a_line_break_in_the_second_half_is_preferred() {
        let t = transcript(&[(1, "abc\ndefgh")]);
        assert_eq!(texts(&chunk(&t, 6, M)), ["abc\n", "defgh"]);
    }

    #[test]
    fn zero_max_is_treated_as_one() {
        let t = transcript(&[(1, "aé\n")]);
        assert_eq!(texts(&chunk(&t, 0, M)), ["a", "é", "\n"]);
    }

    #[test]
    fn inconsistent_blocks_do_not_panic_or_lose_text() {
        let mut t = transcript(&[(1, "héllo\n"), (2, "world\n")]);
        t.blocks[0].range = 0..2; // inside 'é'
        t.blocks[1].range = 0..4; // overlaps
        t.text.push_str("tail\n"); // not covered by any block
        let chunks = chunk(&t, 100, M);
        assert_eq!(texts(&chunks).concat(), t.text);
        let _ = chunk(
            &Transcript {
                text: "x".into(),
                blocks: vec![],
            },
            3,
            M,
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn chunks_respect_the_limit_and_rebuild_the_transcript(
            messages in strategies::messages(),
            config in strategies::config(),
            max in 0..60usize,
        ) {
            let t = extract(&messages, &config);
            let chunks = chunk(&t, max, M);
            for c in &chunks {
                prop_assert!(!c.text.is_empty());
                let one_char = c.text.chars().count() == 1;
                prop_assert!(M.width(c.text) <= max.max(1) || one_char);
            }
            prop_assert_eq!(chunks.iter().map(|c| c.text).collect::<String>(), t.text.clone());
            prop_assert_eq!(chunks.is_empty(), t.text.is_empty());
            // first/last ids are those of the blocks the chunk touches.
            let mut at = 0;
            for c in &chunks {
                let end = at + c.text.len();
                let touched: Vec<_> = t.blocks.iter()
                    .filter(|b| b.range.start < end && b.range.end > at)
                    .map(|b| b.message_id)
                    .collect();
                prop_assert_eq!(Some(&c.first_message), touched.first());
                prop_assert_eq!(Some(&c.last_message), touched.last());
                at = end;
            }
        }

        #[test]
        fn chunking_in_pieces_gives_the_chunks_of_the_whole(
            messages in strategies::messages(),
            config in strategies::config(),
            max in 0..60usize,
            cuts in prop::collection::vec(0..8usize, 0..6),
        ) {
            let whole = extract(&messages, &config);
            let expected: Vec<OwnedChunk> = chunk(&whole, max, M).iter().map(OwnedChunk::from).collect();
            // Feed the messages in pieces of the given sizes, then the rest.
            let mut stream = ChunkStream::new(max, M);
            let mut got = Vec::new();
            let mut at = 0;
            for size in cuts {
                let end = (at + size).min(messages.len());
                got.extend(stream.push(extract(&messages[at..end], &config)));
                at = end;
            }
            got.extend(stream.push(extract(&messages[at..], &config)));
            got.extend(stream.finish());
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn whole_blocks_that_fit_are_never_split(
            messages in strategies::messages(),
            max in 1..200usize,
        ) {
            let t = extract(&messages, &TranscriptConfig::default());
            let chunks = chunk(&t, max, M);
            let mut boundaries = vec![0];
            for c in &chunks {
                boundaries.push(boundaries.last().unwrap() + c.text.len());
            }
            let fits = |b: &&Block| t.text.get(b.range.clone()).is_some_and(|s| M.width(s) <= max);
            for b in t.blocks.iter().filter(fits) {
                let inside = boundaries.iter().any(|&x| x > b.range.start && x < b.range.end);
                prop_assert!(!inside, "block {:?} split at max {}", b, max);
            }
        }
    }
}
