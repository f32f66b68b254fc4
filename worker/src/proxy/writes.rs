//! A turn's writes, beside the request and after it: the history's new
//! messages (when they were not stored before the request went on), then
//! the model's answer, then the turn's end, which requests a compaction
//! when one is due. Then the turn is remembered ([`super::seen`]), so the
//! next one reads only what it adds.
//!
//! The client has its answer before it is stored: storing it is not on
//! the request's path. The next turn waits for it all the same: the writes
//! hold the workstream's order until they are done, and a turn takes the
//! order before it reads the store.
//!
//! A write that fails loses nothing: the client resends the whole history
//! next turn, which is then matched against the store and what is missing
//! stored.

use std::ops::Range;
use std::sync::Arc;

use compactor_producer::client::{ClientError, IncomingMessage};
use compactor_shared::trigger::Usage;
use compactor_shared::{EntityKey, MessageId};
use tokio::sync::{oneshot, OwnedMutexGuard};
use tracing::warn;

use super::conversation::Conversation;
use super::history::Link;
use super::request::Payload;
use super::seen::{Order, Seen};
use super::ProxyState;

/// A model's answer, and the usage it reported.
pub(super) type Answer = (IncomingMessage, Option<Usage>);

/// One turn's writes.
pub(super) struct Writes {
    pub(super) state: ProxyState,
    pub(super) key: EntityKey,
    pub(super) order: Order,
    /// The workstream's order, held until the writes are done (`None`: it
    /// was not had within `max_wait`, and the writes go on without it).
    pub(super) guard: Option<OwnedMutexGuard<()>>,
    pub(super) payload: Arc<Payload>,
    pub(super) spans: Arc<Vec<Range<usize>>>,
    pub(super) conversation: Arc<Conversation>,
    /// The conversation's newest stored message.
    pub(super) parent: Option<MessageId>,
    /// Messages to store after `parent` first.
    pub(super) append: Option<Vec<IncomingMessage>>,
    /// Told whether the history is stored whole.
    pub(super) appended: oneshot::Sender<bool>,
    /// The answer; dropped when there is none to store.
    pub(super) answered: oneshot::Receiver<Answer>,
}

impl Writes {
    pub(super) async fn run(self) {
        let _order = self.guard;
        let compactor = &self.state.0.compactor;
        let memory = &self.state.0.memory;
        let mut head = self.parent;
        if let Some(messages) = self.append {
            match compactor
                .append_messages_after(&self.key, self.parent, messages)
                .await
            {
                Ok(outcome) => head = outcome.ids.last().copied().or(head),
                Err(error) => {
                    warn!(%error, "the history's new messages could not be stored: the next turn, which resends them, stores them");
                    memory.forget(&self.key);
                    let _ = self.appended.send(false);
                    return;
                }
            }
        }
        let _ = self.appended.send(true);
        let link = self.conversation.link();
        let answer = match self.answered.await {
            Ok((message, usage)) => {
                match store_answer(&self.state, &self.key, link, head, message, usage).await {
                    Ok(stored) => stored,
                    Err(error) => {
                        warn!(%error, "the answer could not be stored: it will be on the next turn, which resends it");
                        memory.forget(&self.key);
                        return;
                    }
                }
            }
            Err(_) => None,
        };
        match head {
            Some(head) => memory.remember(
                &self.key,
                &self.order,
                Seen::of(&self.payload, &self.spans, &self.conversation, head, answer),
            ),
            None => memory.forget(&self.key),
        }
    }
}

/// Stores a model's answer after `parent` and ends the turn; the answer's
/// name and id.
async fn store_answer(
    state: &ProxyState,
    key: &EntityKey,
    mut link: Link,
    parent: Option<MessageId>,
    message: IncomingMessage,
    usage: Option<Usage>,
) -> Result<Option<(Link, MessageId)>, ClientError> {
    let compactor = &state.0.compactor;
    // Named on from the history's chain, as the client will send it back
    // next turn.
    let id = link.next(message.role, &message.parts);
    let appended = compactor
        .append_messages_after(key, parent, vec![message.with_client_id(id)])
        .await?;
    let stored = appended.ids.first().copied();
    // The same answer to the same history (asked again) is stored already:
    // the head goes back to it.
    if appended.already_stored > 0 {
        if let Some(stored) = stored {
            compactor.move_head(key, stored).await?;
        }
    }
    compactor.finalize_turn(key, usage).await?;
    Ok(stored.map(|id| (link, id)))
}
