//! Building a turn's context. Log-only events: they record no metric, but
//! they are occurrences an operator reads, so they live with the others.

use compactor_shared::EntityKey;
use tracing::warn;

use super::InternalEvent;
use crate::store::HistoryWindow;

/// `key`'s un-compacted history is over `[database] context_max_*`: only
/// its newest messages went into the context. A warning: compaction is
/// behind (failing, or held back by the breaker) and the model sees a
/// clipped history.
#[derive(Debug)]
pub(crate) struct HistoryTruncated<'a> {
    pub key: &'a EntityKey,
    pub window: &'a HistoryWindow,
}

impl InternalEvent for HistoryTruncated<'_> {
    fn emit(&self) {
        warn!(
            domain = self.key.domain(),
            omitted_messages = self.window.omitted_messages,
            omitted_tokens = self.window.omitted_tokens,
            loaded_messages = self.window.messages,
            "un-compacted history over [database] context_max_*: only its newest messages are in the context"
        );
    }
}
