//! A turn's writes, beside the request and after it: the history's new
//! messages (when they were not stored before the request went on) and
//! the model's answer, in one append, then the turn's end, which requests
//! a compaction when one is due. Then the turn is remembered
//! ([`super::seen`]), so the next one reads only what it adds. The new
//! messages are stored at once instead when the turn needs them stored
//! before its answer (a refusal as too long: a compaction must fold them),
//! and alone when no answer comes.
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
    /// Messages to store after `parent`: with the answer, in one append,
    /// unless they are asked for sooner (`flush`).
    pub(super) append: Vec<IncomingMessage>,
    /// Asks for `append` to be stored now (a compaction must fold them).
    pub(super) flush: oneshot::Receiver<()>,
    /// Told, once asked to `flush`, whether the history is stored whole.
    pub(super) appended: Option<oneshot::Sender<bool>>,
    /// The answer; dropped when there is none to store.
    pub(super) answered: oneshot::Receiver<Answer>,
}

impl Writes {
    pub(super) async fn run(mut self) {
        let _order = self.guard.take();
        let mut head = self.parent;
        let mut pending = std::mem::take(&mut self.append);
        let answer = if pending.is_empty() {
            self.told(true);
            (&mut self.answered).await.ok()
        } else {
            tokio::select! {
                answer = &mut self.answered => answer.ok(),
                Ok(()) = &mut self.flush => {
                    let stored = self.store(head, std::mem::take(&mut pending)).await;
                    self.told(stored.is_some());
                    let Some(stored) = stored else { return };
                    head = stored;
                    (&mut self.answered).await.ok()
                }
            }
        };
        let answer = match answer {
            Some((message, usage)) => {
                match store_turn(
                    &self.state,
                    &self.key,
                    &self.conversation,
                    head,
                    pending,
                    message,
                    usage,
                )
                .await
                {
                    Ok((history, answer)) => {
                        head = history.or(head);
                        answer
                    }
                    Err(error) => {
                        warn!(%error, "the turn could not be stored: the next one, which resends it, stores it");
                        self.state.0.memory.forget(&self.key);
                        return;
                    }
                }
            }
            None if !pending.is_empty() => match self.store(head, pending).await {
                Some(stored) => {
                    head = stored;
                    None
                }
                None => return,
            },
            None => None,
        };
        match head {
            Some(head) => {
                let seen = Seen::of(&self.payload, &self.spans, self.conversation, head, answer);
                self.state.0.memory.remember(&self.key, &self.order, seen);
            }
            None => self.state.0.memory.forget(&self.key),
        }
    }

    fn told(&mut self, stored: bool) {
        if let Some(appended) = self.appended.take() {
            let _ = appended.send(stored);
        }
    }

    /// Stores `messages` after `parent`; the newest stored, `None` when the
    /// append failed (and the workstream is forgotten: its next history is
    /// matched against the store).
    async fn store(
        &self,
        parent: Option<MessageId>,
        messages: Vec<IncomingMessage>,
    ) -> Option<Option<MessageId>> {
        match self
            .state
            .0
            .compactor
            .append_messages_after(&self.key, parent, messages)
            .await
        {
            Ok(outcome) => Some(outcome.ids.last().copied().or(parent)),
            Err(error) => {
                warn!(%error, "the history's new messages could not be stored: the next turn, which resends them, stores them");
                self.state.0.memory.forget(&self.key);
                None
            }
        }
    }
}

/// Stores the history's new messages and the model's answer after
/// `parent`, in one append, and ends the turn: the history's newest
/// message and the answer (its name and id).
async fn store_turn(
    state: &ProxyState,
    key: &EntityKey,
    conversation: &Conversation,
    parent: Option<MessageId>,
    mut messages: Vec<IncomingMessage>,
    message: IncomingMessage,
    usage: Option<Usage>,
) -> Result<(Option<MessageId>, Option<(Link, MessageId)>), ClientError> {
    let compactor = &state.0.compactor;
    // Named on from the history's chain, as the client will send it back
    // next turn.
    let mut link = conversation.link();
    let id = link.next(message.role, &message.parts);
    let before = messages.len();
    messages.push(message.with_client_id(id));
    let appended = compactor
        .append_messages_after(key, parent, messages)
        .await?;
    let history = match before {
        0 => parent,
        n => appended.ids.get(n - 1).copied(),
    };
    let stored = appended.ids.get(before).copied();
    // The same answer to the same history (asked again) is stored already:
    // the head goes back to it.
    if appended.already_stored > 0 {
        if let Some(stored) = stored {
            compactor.move_head(key, stored).await?;
        }
    }
    compactor.finalize_turn(key, usage).await?;
    Ok((history, stored.map(|id| (link, id))))
}
