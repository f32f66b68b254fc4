//! Where a resent history leaves the stored one.
//!
//! SDKs send the whole conversation every turn. Each message of it is
//! named by a digest of itself and of every message before it (its client
//! id, [`chain`]), so one lookup of the newest names tells how much of the
//! history the workstream stores already: the stored prefix ends at the
//! newest name it knows. What follows is appended after that message.
//! When that message is not the head (the client edited or dropped an
//! earlier message, or asks again from an earlier turn), the append forks
//! there: the branch left is summarized as any branch is. Matching is by
//! position and content, never by trusting an id the client sends.

use compactor_producer::client::{ClientError, Compactor, IncomingMessage};
use compactor_shared::{EntityKey, MessageId, Part, Role};
use sha2::{Digest, Sha256};

use super::openai::hex;

/// Prefix of the client ids the proxy gives (a version: another way of
/// naming would start another chain, never match this one).
pub(crate) const ID_PREFIX: &str = "px1-";

/// How many of the newest names are looked up first: a turn's history is
/// the stored one plus the new user message (or tool results), so the
/// last stored message is almost always among them.
const LOOK_FIRST: usize = 4;

/// The end of a chain, to name the message that follows it (the model's
/// answer, named as the client will send it back).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Link([u8; 32]);

impl Link {
    /// The client id of the message after this link; moves the link on.
    pub(super) fn next(&mut self, role: Role, parts: &[Part]) -> String {
        *self = self.after(role, parts);
        self.id()
    }

    /// The link of the message after this one.
    pub(super) fn after(self, role: Role, parts: &[Part]) -> Link {
        let mut hasher = Sha256::new();
        hasher.update(self.0);
        hasher.update(role.as_str().as_bytes());
        // Parts serialize the same way each time: a message's id depends
        // on its content only. Written into the hash, never copied.
        let _ = serde_json::to_writer(Hashing(&mut hasher), parts);
        Link(hasher.finalize().into())
    }

    /// The client id of the message this link ends at.
    pub(super) fn id(self) -> String {
        format!("{ID_PREFIX}{}", hex(&self.0[..16]))
    }
}

/// A hash as an `io::Write`.
struct Hashing<'a>(&'a mut Sha256);

impl std::io::Write for Hashing<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What syncing a history did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Synced {
    /// Messages of the history stored now (the rest were stored before).
    pub(super) appended: usize,
    /// The history left the stored one (an edit, a dropped message, an
    /// earlier turn asked again): a branch.
    pub(super) branched: bool,
    /// The history's newest message, as stored: the head now.
    pub(super) head: Option<MessageId>,
}

/// Why a history could not be synced.
#[derive(Debug, thiserror::Error)]
pub(super) enum SyncError {
    /// Nothing of the history is stored, but the workstream holds other
    /// messages: its very first message differs, and there is no earlier
    /// message to fork from.
    #[error("the history shares no message with the stored workstream")]
    Unrelated,
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// Stores what `messages` (their client ids set by [`chain`]) hold that the
/// workstream does not, forking where they leave it.
pub(super) async fn sync(
    compactor: &Compactor,
    key: &EntityKey,
    messages: &[IncomingMessage],
) -> Result<Synced, SyncError> {
    let ids: Vec<String> = messages
        .iter()
        .map(|m| m.client_id.clone().unwrap_or_default())
        .collect();
    let n = ids.len();
    let mut named = compactor
        .named_messages(key, &ids[n.saturating_sub(LOOK_FIRST)..])
        .await?;
    if named.stored.is_empty() && n > LOOK_FIRST && named.head.is_some() {
        named = compactor.named_messages(key, &ids).await?;
    }
    // The chain makes the stored names a prefix: the newest one ends it.
    let stored_until = ids.iter().rposition(|id| named.stored.contains_key(id));
    let parent = stored_until.and_then(|i| named.stored.get(&ids[i]).copied());
    if parent.is_none() && named.head.is_some() && n > 0 {
        return Err(SyncError::Unrelated);
    }
    let new = &messages[stored_until.map_or(0, |i| i + 1)..];
    let branched = parent.is_some() && parent != named.head;
    if new.is_empty() {
        if let (true, Some(parent)) = (branched, parent) {
            compactor.move_head(key, parent).await?;
        }
        return Ok(Synced {
            appended: 0,
            branched,
            head: parent.or(named.head),
        });
    }
    let appended = new.len();
    let outcome = compactor
        .append_messages_after(key, parent, new.to_vec())
        .await?;
    Ok(Synced {
        appended,
        branched,
        head: outcome.ids.last().copied(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client id of each message: a digest of its role and parts chained
    /// to the one before.
    fn chain(messages: &[(Role, &[Part])]) -> Vec<String> {
        let mut link = Link::default();
        messages
            .iter()
            .map(|(role, parts)| link.next(*role, parts))
            .collect()
    }

    #[test]
    fn a_name_depends_on_the_message_and_every_one_before() {
        let a = [Part::text("hello")];
        let b = [Part::text("world")];
        let one = chain(&[(Role::User, &a), (Role::Assistant, &b)]);
        let again = chain(&[(Role::User, &a), (Role::Assistant, &b)]);
        assert_eq!(one, again);
        assert!(one[0].starts_with(ID_PREFIX) && one[0].len() == ID_PREFIX.len() + 32);
        // The same second message after another first one is another name.
        let edited = [Part::text("hello!")];
        let other = chain(&[(Role::User, &edited), (Role::Assistant, &b)]);
        assert_ne!(one[0], other[0]);
        assert_ne!(one[1], other[1]);
        // The role counts too.
        assert_ne!(chain(&[(Role::User, &a)]), chain(&[(Role::Assistant, &a)]));
    }
}
