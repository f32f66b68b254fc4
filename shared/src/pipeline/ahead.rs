//! What pass 2 takes from a page's compacted span before any summarizer
//! sees it — the user's statements, the transcript, the evidence's lines —
//! worked out on a thread of its own while the summarizer folds the pages
//! before (up to `EXTRACTED_AHEAD` spans run ahead).
//!
//! A long history is many pages, and each page costs about as much in
//! extraction as in the extractive summarizer's fold; on one thread a
//! compaction of a million messages used one core while the other sat
//! idle. The three extractions are pure functions of the span, so doing
//! them ahead changes nothing of the result: the pipeline still records
//! them and folds their transcript page by page, in order. A span that is
//! the compaction's last (every compaction of one page) is extracted in
//! place: no thread for it.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::evidence;
use crate::message::Message;
use crate::stated::{self, Classified, Statement};
use crate::transcript::{self, Transcript, TranscriptConfig};

/// A span's extractions.
#[derive(Debug)]
pub(super) struct Extracted {
    pub(super) statements: Vec<Statement>,
    /// The statement rules' answers behind `statements`, for the
    /// summarizer (it asks them again of the same sentences).
    pub(super) classified: Classified,
    pub(super) transcript: Transcript,
    /// Its candidate evidence lines.
    pub(super) evidence: evidence::Read,
}

impl Extracted {
    fn of(span: &[Message], config: &TranscriptConfig, line_chars: usize) -> Extracted {
        let (statements, classified) = stated::extract_classified(span);
        Extracted {
            statements,
            classified,
            transcript: transcript::extract(span, config),
            evidence: evidence::read(span, line_chars),
        }
    }
}

/// A span's extractions, done or under way.
#[derive(Debug)]
pub(super) enum Pending {
    Ready(Box<Extracted>),
    Running(JoinHandle<Extracted>),
}

impl Pending {
    /// Extracts `span` here and now.
    pub(super) fn now(span: &[Message], config: &TranscriptConfig, line_chars: usize) -> Pending {
        Pending::Ready(Box::new(Extracted::of(span, config, line_chars)))
    }

    /// Starts extracting `span` on a thread of its own; extracts it here
    /// when no thread can be started.
    pub(super) fn start(
        span: Vec<Message>,
        config: &TranscriptConfig,
        line_chars: usize,
    ) -> Pending {
        let span = Arc::new(span);
        let (theirs, config_theirs) = (Arc::clone(&span), config.clone());
        let spawned = std::thread::Builder::new()
            .name("compactor-extract".into())
            .spawn(move || Extracted::of(&theirs, &config_theirs, line_chars));
        match spawned {
            Ok(handle) => Pending::Running(handle),
            Err(_) => Pending::now(&span, config, line_chars),
        }
    }

    /// The extractions, waiting for the thread if it is still at work
    /// (a fold of the page before usually outlasts it). A panic in the
    /// thread goes on here, as it would have in place.
    pub(super) fn finish(self) -> Extracted {
        match self {
            Pending::Ready(done) => *done,
            Pending::Running(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    #[test]
    fn a_span_extracted_ahead_is_the_span_extracted_in_place() {
        let span: Vec<Message> = (1..=50)
            .map(|i| {
                let role = if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                Message::text(
                    i,
                    role,
                    format!("We decided to keep src/m_{i}.rs; never push to main. Error E{i:04}."),
                )
            })
            .collect();
        let config = TranscriptConfig::default();
        let here = Pending::now(&span, &config, 280).finish();
        let ahead = Pending::start(span, &config, 280);
        assert!(matches!(ahead, Pending::Running(_)));
        let ahead = ahead.finish();
        assert!(!here.statements.is_empty() && !here.evidence.lines.is_empty());
        assert_eq!(ahead.statements, here.statements);
        assert_eq!(ahead.classified, here.classified);
        assert_eq!(ahead.transcript, here.transcript);
        assert_eq!(ahead.evidence.lines.len(), here.evidence.lines.len());
    }
}
