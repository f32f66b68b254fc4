//! What the proxy remembers of each workstream's last turn, and the order
//! its turns write in.
//!
//! A client resends the whole history every turn: the last turn's
//! messages, its answer, and one new message or a few. Remembering the
//! last turn's request (its bytes, where each message was, each message's
//! name) lets the next one compare instead of reading: a message that is
//! the same bytes in the same place is the same message, named as before
//! and stored already. Only what is new is read, named and stored. What
//! is remembered is a cache: a workstream forgotten (the memory is
//! bounded, the worker restarted, a write failed) has its next history
//! read whole and matched against the store, as on its first turn.
//!
//! Each workstream's writes go in turn order: a turn holds the
//! workstream's [`Order`] from before it reads the store until its answer
//! is stored, so the next turn finds what this one wrote.

use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use compactor_shared::{EntityKey, MessageId};
use lru::LruCache;

use super::conversation::Conversation;
use super::history::Link;
use super::request::Payload;

/// The workstreams remembered, at most.
const MEMORY_WORKSTREAMS: usize = 16_384;

/// A workstream's turn order: held by one turn's writes at a time.
pub(super) type Order = Arc<tokio::sync::Mutex<()>>;

/// The last turn of each workstream served lately.
pub(super) struct Memory {
    inner: Mutex<Remembered>,
    /// At most this many bytes of bodies.
    limit: usize,
}

struct Remembered {
    entries: LruCache<EntityKey, Entry>,
    /// The bytes of the bodies in `entries`.
    bytes: usize,
}

struct Entry {
    order: Order,
    last: Option<Arc<Seen>>,
}

impl Memory {
    /// A memory of at most `limit` bytes (`[proxy] remember_bytes`: the
    /// request bodies and their messages' names).
    pub(super) fn new(limit: usize) -> Memory {
        Memory {
            inner: Mutex::new(Remembered {
                entries: LruCache::new(
                    NonZeroUsize::new(MEMORY_WORKSTREAMS).unwrap_or(NonZeroUsize::MIN),
                ),
                bytes: 0,
            }),
            limit,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Remembered) -> R) -> R {
        // What is remembered is a cache: a panic elsewhere leaves it whole.
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut inner)
    }

    /// The workstream's turn order.
    pub(super) fn order(&self, key: &EntityKey) -> Order {
        self.with(|r| {
            if let Some(entry) = r.entries.get(key) {
                return entry.order.clone();
            }
            let order = Order::default();
            let entry = Entry {
                order: order.clone(),
                last: None,
            };
            if let Some((_, evicted)) = r.entries.push(key.clone(), entry) {
                r.bytes -= evicted.bytes();
            }
            order
        })
    }

    /// The workstream's last turn, when remembered (read it holding the
    /// workstream's order: the turn before may still be writing).
    pub(super) fn last(&self, key: &EntityKey) -> Option<Arc<Seen>> {
        self.with(|r| r.entries.get(key).and_then(|e| e.last.clone()))
    }

    /// Remembers a workstream's last turn (in place of the one before).
    pub(super) fn remember(&self, key: &EntityKey, order: &Order, seen: Seen) {
        let seen = Arc::new(seen);
        let limit = self.limit;
        self.with(|r| {
            let added = seen.bytes();
            let entry = Entry {
                order: order.clone(),
                last: Some(seen),
            };
            if let Some((_, replaced)) = r.entries.push(key.clone(), entry) {
                r.bytes -= replaced.bytes();
            }
            r.bytes += added;
            // The least recently served forget their last turn first; their
            // order stays (a turn may hold it).
            let Remembered { entries, bytes } = r;
            for (_, entry) in entries.iter_mut().rev() {
                if *bytes <= limit {
                    break;
                }
                if let Some(last) = entry.last.take() {
                    *bytes -= last.bytes();
                }
            }
        });
    }

    /// Forgets a workstream's last turn: its next history is read whole.
    pub(super) fn forget(&self, key: &EntityKey) {
        self.with(|r| {
            if let Some(entry) = r.entries.peek_mut(key) {
                if let Some(last) = entry.last.take() {
                    r.bytes -= last.bytes();
                }
            }
        });
    }

    /// The bytes of the bodies remembered.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.with(|r| r.bytes)
    }
}

impl Entry {
    fn bytes(&self) -> usize {
        self.last.as_ref().map_or(0, |s| s.bytes())
    }
}

/// A workstream's last turn, as the proxy served it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    /// The request's body.
    body: Bytes,
    /// Where each of its messages was in it.
    spans: Vec<Range<usize>>,
    /// Its conversation (no message's parts kept).
    conversation: Conversation,
    /// The stored id of its newest message.
    head: MessageId,
    /// The answer stored after it: its name, its id.
    answer: Option<(Link, MessageId)>,
}

impl Seen {
    /// A turn's request and conversation, the newest message of it stored
    /// as `head`, and the answer stored after it.
    pub(super) fn of(
        payload: &Payload,
        spans: &[Range<usize>],
        conversation: Arc<Conversation>,
        head: MessageId,
        answer: Option<(Link, MessageId)>,
    ) -> Seen {
        // The turn is over: its conversation is this turn's alone, no copy.
        let mut conversation = Arc::unwrap_or_clone(conversation);
        conversation.known = None;
        for m in &mut conversation.messages {
            m.read = None;
        }
        Seen {
            body: payload.raw.clone(),
            spans: spans.to_vec(),
            conversation,
            head,
            answer,
        }
    }

    /// The memory it takes, about: its body, and each message's name.
    fn bytes(&self) -> usize {
        use std::mem::size_of;
        self.body.len()
            + self.spans.len() * size_of::<Range<usize>>()
            + self.conversation.at.len() * size_of::<Option<usize>>()
            + self.conversation.messages.len() * size_of::<super::conversation::Said>()
    }

    /// Whether a request's messages start with this turn's, the same
    /// bytes in the same places.
    pub(super) fn is_start_of(&self, payload: &Payload, spans: &[Range<usize>]) -> bool {
        spans.len() >= self.spans.len()
            && self
                .spans
                .iter()
                .zip(spans)
                .all(|(was, is)| self.body[was.clone()] == payload.raw[is.clone()])
    }

    /// Reads a request body that may start as this turn's did.
    pub(super) fn parse(&self, raw: Bytes) -> Option<Payload> {
        Payload::parse_after(raw, &self.body, &self.spans)
    }

    /// The conversation as it was (read from nothing now).
    pub(super) fn conversation(&self) -> Conversation {
        self.conversation.clone()
    }

    /// How many of the conversation's messages are stored, and the newest.
    pub(super) fn stored(&self) -> (usize, MessageId) {
        (self.conversation.messages.len(), self.head)
    }

    /// The answer stored after the conversation.
    pub(super) fn answer(&self) -> Option<(Link, MessageId)> {
        self.answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compactor_shared::CharEstimator;

    use crate::proxy::wire::Wire;

    fn seen(body: &str) -> Seen {
        let payload = Payload::parse(Bytes::copy_from_slice(body.as_bytes())).unwrap();
        let spans = payload.spans.clone().unwrap();
        let conversation =
            Conversation::read(Wire::OpenAi, &payload, &spans, None, &CharEstimator::new(4))
                .unwrap();
        Seen::of(&payload, &spans, Arc::new(conversation), MessageId(1), None)
    }

    fn key(entity: &str) -> EntityKey {
        EntityKey::parse("chat", entity).unwrap()
    }

    #[test]
    fn the_memory_keeps_a_bounded_number_of_bytes() {
        let limit = 20 << 20;
        let memory = Memory::new(limit);
        let text = "x".repeat(1 << 20);
        let body = format!(r#"{{"messages":[{{"role":"user","content":"{text}"}}]}}"#);
        let one = seen(&body);
        let size = one.bytes();
        for i in 0..30 {
            let k = key(&format!("w{i}"));
            let order = memory.order(&k);
            memory.remember(&k, &order, one.clone());
        }
        // As many as fit, and no more.
        assert_eq!(memory.bytes(), limit / size * size);
        // The newest is remembered, the oldest forgotten.
        assert!(memory.last(&key("w29")).is_some());
        assert!(memory.last(&key("w0")).is_none());
        memory.forget(&key("w29"));
        assert!(memory.last(&key("w29")).is_none());
        assert_eq!(memory.bytes(), (limit / size - 1) * size);
    }

    #[test]
    fn one_workstream_has_one_order() {
        let memory = Memory::new(1 << 20);
        let a = memory.order(&key("a"));
        let again = memory.order(&key("a"));
        let b = memory.order(&key("b"));
        assert!(Arc::ptr_eq(&a, &again));
        assert!(!Arc::ptr_eq(&a, &b));
        // Remembering a turn keeps the order.
        memory.remember(
            &key("a"),
            &a,
            seen(r#"{"messages":[{"role":"user","content":"hi"}]}"#),
        );
        assert!(Arc::ptr_eq(&a, &memory.order(&key("a"))));
    }
}
