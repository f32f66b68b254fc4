//! Invariants of `transcript::extract` and `chunk` on arbitrary messages.

use compactor_shared::chunk::{chunk, ChunkStream, OwnedChunk};
use compactor_shared::transcript::{extract, Transcript, TranscriptConfig};
use compactor_shared::{CharEstimator, Message, Part, Role};

/// Whether `message` renders at least one part line (module docs of
/// `transcript`): non-blank text, a part of an allowed tool, or a file.
fn renders(message: &Message, config: &TranscriptConfig) -> bool {
    message.parts.iter().any(|part| match part {
        Part::Text { text } => !text.trim().is_empty(),
        Part::ToolCall { tool_name, .. } | Part::ToolResult { tool_name, .. } => {
            config.tools.allows(tool_name)
        }
        Part::File { .. } => true,
        Part::Reasoning { .. } => false,
    })
}

fn header(message: &Message) -> String {
    let role = match message.role {
        Role::User => "USER",
        Role::Assistant => "ASSISTANT",
        Role::System => "SYSTEM",
        Role::Tool => "TOOL",
    };
    format!("[#{} {role}]", message.id.0)
}

/// Checks a transcript against the messages it was extracted from:
/// one block per rendering message, in order, each starting with that
/// message's exact header; blocks tile the text and count its chars; and no
/// other line starts with `[#`, so content cannot forge a header.
pub fn check_transcript(messages: &[Message], config: &TranscriptConfig, t: &Transcript) {
    let rendering: Vec<&Message> = messages.iter().filter(|m| renders(m, config)).collect();
    assert_eq!(
        t.blocks.len(),
        rendering.len(),
        "one block per message with a part line"
    );
    let mut at = 0;
    for (block, message) in t.blocks.iter().zip(&rendering) {
        assert_eq!(block.message_id, message.id, "blocks out of message order");
        assert_eq!(block.range.start, at, "blocks do not tile the text");
        let text = t
            .text
            .get(block.range.clone())
            .unwrap_or_else(|| panic!("block range {:?} is not a str slice", block.range));
        let (first, body) = text.split_once('\n').expect("a block has a header line");
        assert_eq!(first, header(message), "wrong header");
        assert!(
            !body.is_empty() && body.ends_with('\n'),
            "a block's lines end with \\n"
        );
        at = block.range.end;
    }
    assert_eq!(at, t.text.len(), "text after the last block");

    let starts: Vec<usize> = t.blocks.iter().map(|b| b.range.start).collect();
    let line_starts = std::iter::once(0)
        .chain(t.text.match_indices('\n').map(|(i, _)| i + 1))
        .filter(|&i| i < t.text.len());
    for start in line_starts {
        if t.text[start..].starts_with("[#") {
            let line = t.text[start..].lines().next().unwrap_or_default();
            assert!(starts.contains(&start), "forged header line {line:?}");
        }
    }
}

/// Checks `chunk(t, max_chars)`: non-empty chunks within the limit that
/// concatenate to the text exactly, naming the first and last message they
/// touch, and never splitting a block that fits in one chunk. Then checks
/// that `ChunkStream`, fed the messages in `pages`, gives the same chunks.
pub fn check_chunks(
    messages: &[Message],
    config: &TranscriptConfig,
    t: &Transcript,
    max_chars: usize,
    pages: &[usize],
) {
    let max = max_chars.max(1);
    let measure = CharEstimator::default();
    let chunks = chunk(t, max_chars, measure);
    assert_eq!(chunks.is_empty(), t.text.is_empty());
    let mut at = 0;
    let mut boundaries = vec![0];
    for c in &chunks {
        assert!(!c.text.is_empty(), "empty chunk");
        let width = measure.width(c.text);
        let one_char = c.text.chars().count() == 1;
        assert!(
            width <= max || one_char,
            "{width}-char-wide chunk over the {max} limit"
        );
        assert_eq!(
            t.text.get(at..at + c.text.len()),
            Some(c.text),
            "chunks do not concatenate to the transcript"
        );
        let end = at + c.text.len();
        let mut touched = t
            .blocks
            .iter()
            .filter(|b| b.range.start < end && b.range.end > at)
            .map(|b| b.message_id);
        assert_eq!(Some(c.first_message), touched.next(), "wrong first message");
        let last = touched.next_back().unwrap_or(c.first_message);
        assert_eq!(c.last_message, last, "wrong last message");
        at = end;
        boundaries.push(at);
    }
    assert_eq!(at, t.text.len(), "chunks lose the end of the transcript");
    let fits = |b: &&compactor_shared::transcript::Block| {
        t.text
            .get(b.range.clone())
            .is_some_and(|s| measure.width(s) <= max)
    };
    for b in t.blocks.iter().filter(fits) {
        assert!(
            !boundaries
                .iter()
                .any(|&x| x > b.range.start && x < b.range.end),
            "block {b:?} that fits in {max} chars was split"
        );
    }

    let expected: Vec<OwnedChunk> = chunks.iter().map(OwnedChunk::from).collect();
    let mut stream = ChunkStream::new(max_chars, measure);
    let mut got = Vec::new();
    let mut pieces = String::new();
    let mut from: usize = 0;
    for &size in pages {
        let to = from.saturating_add(size).min(messages.len());
        let piece = extract(&messages[from..to], config);
        pieces.push_str(&piece.text);
        got.extend(stream.push(piece));
        from = to;
    }
    let piece = extract(&messages[from..], config);
    pieces.push_str(&piece.text);
    got.extend(stream.push(piece));
    got.extend(stream.finish());
    assert_eq!(pieces, t.text, "extraction is not per message");
    assert_eq!(got, expected, "ChunkStream differs from chunk of the whole");
}
