//! Chunking of a transcript for sequential summarization. (STUB)

use crate::message::MessageId;
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

/// Splits `transcript` into chunks of at most `max_chars` chars.
pub fn chunk(transcript: &Transcript, max_chars: usize) -> Vec<Chunk<'_>> {
    let _ = (transcript, max_chars);
    unimplemented!("chunk::chunk")
}
