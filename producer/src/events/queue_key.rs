//! A key of the queue found holding another Redis type than the queue
//! keeps there.

use tracing::warn;

use super::catalogue::{names, QueueKey};
use super::InternalEvent;
use crate::queue::keys::classify;

/// An operation was refused, or a batch left one item as it was, because
/// `key` holds another type (a hand edit, or another program's key of the
/// same name). `None`: Redis refused without naming the key and it could
/// not be found again. Warned by name (a key names a queue and at most a
/// workstream id, never content): an operator moves the key aside.
#[derive(Debug)]
pub(crate) struct QueueKeyOfWrongType<'a> {
    pub op: &'static str,
    pub key: Option<&'a str>,
}

impl InternalEvent for QueueKeyOfWrongType<'_> {
    fn emit(&self) {
        let (queue, kind) = self
            .key
            .and_then(classify)
            .unwrap_or(("unknown", QueueKey::Unknown));
        warn!(
            op = self.op,
            key = self.key.unwrap_or("unknown"),
            "a queue key holds another Redis type: nothing was written to it; move it aside (RENAME) or delete it"
        );
        metrics::counter!(names::QUEUE_WRONG_TYPE_KEYS_TOTAL, "queue" => queue.to_owned(), "key" => kind.as_str())
            .increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::capture::{capture, Value};

    #[test]
    fn a_refusal_is_counted_by_queue_and_kind_of_key() {
        let recorded = capture(|| {
            QueueKeyOfWrongType {
                op: "recover",
                key: Some("{cq:context-compaction}:dead:compact:chat:7f3c|12"),
            }
            .emit();
        });
        recorded.assert_one(
            names::QUEUE_WRONG_TYPE_KEYS_TOTAL,
            &[("queue", "context-compaction"), ("key", "dead_record")],
            Value::Counter(1),
        );
        let recorded = capture(|| {
            QueueKeyOfWrongType {
                op: "counts",
                key: None,
            }
            .emit();
        });
        recorded.assert_one(
            names::QUEUE_WRONG_TYPE_KEYS_TOTAL,
            &[("queue", "unknown"), ("key", "unknown")],
            Value::Counter(1),
        );
    }
}
