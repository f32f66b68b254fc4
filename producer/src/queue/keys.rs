//! The one place Redis keys of the queue are built.
//!
//! Every key of a queue carries the same Redis Cluster hash tag,
//! `{cq:<queue>}`, so each Lua script touches keys of one slot and the
//! queue runs unchanged on a cluster. Entity parts come from a parsed
//! [`EntityKey`], whose alphabet has no `{`, `}`, `:` or glob characters, so
//! no user input can change which slot or key is addressed.
//!
//! Scripts get most keys in `KEYS`, built here. The names they derive
//! themselves (a job record from a member, a dead letter's record, an
//! entity's release channel) come from the builders at the top of
//! `scripts/prelude.lua`, which a test in the `scripts` module checks
//! against these.

use compactor_shared::{Domain, EntityKey};

use crate::events::catalogue::QueueKey;

/// Longest queue name, in bytes.
pub const MAX_QUEUE_NAME_LEN: usize = 64;

/// A validated queue name: 1–64 bytes of `a-z 0-9 _ -`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct QueueName(String);

impl TryFrom<String> for QueueName {
    type Error = QueueNameError;
    fn try_from(name: String) -> Result<QueueName, QueueNameError> {
        QueueName::parse(&name)
    }
}

impl From<QueueName> for String {
    fn from(name: QueueName) -> String {
        name.0
    }
}

/// Why a queue name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid queue name {name:?}: use 1-{MAX_QUEUE_NAME_LEN} bytes of a-z, 0-9, '_' and '-'")]
pub struct QueueNameError {
    name: String,
}

impl QueueName {
    pub fn parse(name: &str) -> Result<QueueName, QueueNameError> {
        let ok = !name.is_empty()
            && name.len() <= MAX_QUEUE_NAME_LEN
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if ok {
            Ok(QueueName(name.to_owned()))
        } else {
            Err(QueueNameError {
                name: name.chars().take(80).collect(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for QueueName {
    /// The seed's queue, `context-compaction`.
    fn default() -> Self {
        QueueName("context-compaction".to_owned())
    }
}

/// Key builder for one queue.
#[derive(Debug, Clone)]
pub struct Keys {
    /// `{cq:<queue>}:`
    prefix: String,
}

impl Keys {
    pub fn new(queue: &QueueName) -> Keys {
        Keys {
            prefix: format!("{{cq:{}}}:", queue.as_str()),
        }
    }

    /// Prefix of every key of this queue (for scripts that derive job keys
    /// from members, and for cleanup).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Hash holding the job of one entity: state, payload, attempts, lease,
    /// follow-up. At most one per entity: this is what deduplicates.
    pub fn job(&self, key: &EntityKey) -> String {
        format!("{}job:{}", self.prefix, key)
    }

    /// The job hash of a member read back from Redis (which may not parse
    /// as an [`EntityKey`] if the data was tampered with).
    pub fn job_of_member(&self, member: &str) -> String {
        format!("{}job:{}", self.prefix, member)
    }

    /// Sorted set of dead-lettered jobs (`<member>|<job_id>`), scored by
    /// the time they died.
    pub fn dead(&self) -> String {
        format!("{}dead", self.prefix)
    }

    /// Hash holding one dead-lettered job: payload, attempts, reason.
    pub fn dead_record(&self, entry: &str) -> String {
        format!("{}dead:{}", self.prefix, entry)
    }

    /// The member naming an entity in the sets below: its job key,
    /// `compact:{domain}:{entity_id}`.
    pub fn member(key: &EntityKey) -> String {
        key.job_key()
    }

    /// Sorted set of waiting jobs of the normal lane (automatic requests
    /// and their follow-ups), scored by the time (ms) they may run.
    pub fn waiting(&self) -> String {
        format!("{}waiting", self.prefix)
    }

    /// Sorted set of waiting jobs of the urgent lane (manual and reactive
    /// requests, and their follow-ups), scored like [`Keys::waiting`]:
    /// claims take due jobs from here before the normal lane.
    pub fn urgent(&self) -> String {
        format!("{}urgent", self.prefix)
    }

    /// Sorted set of running jobs, scored by their lease deadline (ms).
    pub fn running(&self) -> String {
        format!("{}running", self.prefix)
    }

    /// Pub/sub channel announcing that a job may be ready (added, retried,
    /// recovered or handed back): idle workers listen on it. Not a key, but
    /// named like one so it is plain which queue it belongs to.
    pub fn wake_channel(&self) -> String {
        format!("{}wake", self.prefix)
    }

    /// Pub/sub channel announcing that `key`'s entity lease was released
    /// (its compaction ended); chat-side waiters listen on
    /// [`Keys::released_pattern`].
    pub fn released_channel(&self, key: &EntityKey) -> String {
        format!("{}released:{}", self.prefix, key.job_key())
    }

    /// Pattern matching every entity's release channel. The prefix holds no
    /// glob characters (`*`, `?`, `[`, `\`): queue names are validated.
    pub fn released_pattern(&self) -> String {
        format!("{}released:*", self.prefix)
    }

    /// The member (`compact:{domain}:{entity_id}`) a release channel names.
    pub fn member_of_released<'c>(&self, channel: &'c str) -> Option<&'c str> {
        channel
            .strip_prefix(self.prefix.as_str())?
            .strip_prefix("released:")
    }

    /// Sorted set of finished jobs (retention), scored by finish time.
    pub fn done(&self) -> String {
        format!("{}done", self.prefix)
    }

    /// Hash indexing job ids: `job_id` → member, so a job is found by
    /// the id its logs show without a scan. Written where a job is added
    /// (`add_job` in the prelude), cleaned where the done and dead sets
    /// drop its entry (`trim_done`, `trim_dead`, purging a dead letter).
    pub fn job_ids(&self) -> String {
        format!("{}ids", self.prefix)
    }

    /// The mark of a lease token an operator revoked (`Queue::cancel`),
    /// kept a few lease TTLs: an attempt that had not taken its entity
    /// lease yet reads it before it starts (`Queue::lease_revoked`).
    pub fn revoked_lease(&self, token: &str) -> String {
        format!("{}revoked:{}", self.prefix, token)
    }

    /// Job id counter.
    pub fn seq(&self) -> String {
        format!("{}seq", self.prefix)
    }

    /// Where the repair sweep's walk over the job records stands (a
    /// `SCAN` cursor; see the `repair` module).
    pub fn repair_cursor(&self) -> String {
        format!("{}repair_cursor", self.prefix)
    }

    /// Hash recording what is paused (see the `pause` module): field
    /// `queue` while the whole queue is, `domain:<domain>` per paused
    /// domain, each the server ms it was paused at.
    pub fn paused(&self) -> String {
        format!("{}paused", self.prefix)
    }

    /// Sorted set of the waiting jobs of a paused domain that claims have
    /// met and set aside ("parked"), scored as in their lane's set; the
    /// domain's resumption puts them back in line.
    pub fn parked(&self, domain: &Domain) -> String {
        format!("{}parked:{}", self.prefix, domain)
    }

    /// Sorted set of the workers registered on the queue, scored by the
    /// time (server ms) their registration expires unless renewed (see the
    /// `workers` module).
    pub fn workers(&self) -> String {
        format!("{}workers", self.prefix)
    }

    /// Hash describing one registered worker: name, host, pid, version,
    /// concurrency, start and last heartbeat. Worker ids come from the
    /// worker's configuration, not from chat input; whatever they hold, the
    /// key keeps the queue's hash tag, which comes first.
    pub fn worker(&self, id: &str) -> String {
        format!("{}worker:{}", self.prefix, id)
    }
}

/// The queue a key of ours belongs to, and which of its keys it is: the
/// inverse of the builders above, for naming a key Redis refused.
/// `None` for a name outside every queue's hash tag.
pub fn classify(key: &str) -> Option<(&str, QueueKey)> {
    let (queue, rest) = key.strip_prefix("{cq:")?.split_once("}:")?;
    let (head, tail) = match rest.split_once(':') {
        Some((head, tail)) => (head, Some(tail)),
        None => (rest, None),
    };
    let kind = match (head, tail) {
        ("job", Some(_)) => QueueKey::Job,
        ("waiting", None) => QueueKey::Waiting,
        ("urgent", None) => QueueKey::Urgent,
        ("running", None) => QueueKey::Running,
        ("done", None) => QueueKey::Done,
        ("dead", None) => QueueKey::Dead,
        ("dead", Some(_)) => QueueKey::DeadRecord,
        ("seq", None) => QueueKey::Seq,
        ("ids", None) => QueueKey::Ids,
        ("revoked", Some(_)) => QueueKey::Revoked,
        ("repair_cursor", None) => QueueKey::RepairCursor,
        ("paused", None) => QueueKey::Paused,
        ("parked", Some(_)) => QueueKey::Parked,
        ("workers", None) => QueueKey::Workers,
        ("worker", Some(_)) => QueueKey::Worker,
        _ => QueueKey::Unknown,
    };
    Some((queue, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_shares_the_queue_hash_tag() {
        let keys = Keys::new(&QueueName::parse("context-compaction").unwrap());
        let key = EntityKey::parse("chat", "7f3c").unwrap();
        for k in [
            keys.job(&key),
            keys.waiting(),
            keys.urgent(),
            keys.running(),
            keys.wake_channel(),
            keys.done(),
            keys.seq(),
            keys.job_ids(),
            keys.revoked_lease("1:1:n{x}"),
            keys.repair_cursor(),
            keys.workers(),
            keys.worker("w-1{x}"),
            keys.paused(),
            keys.parked(&Domain::parse("chat").unwrap()),
        ] {
            assert!(k.starts_with("{cq:context-compaction}:"), "{k}");
        }
        assert_eq!(
            keys.job(&key),
            "{cq:context-compaction}:job:compact:chat:7f3c"
        );
        assert_eq!(Keys::member(&key), "compact:chat:7f3c");
    }

    #[test]
    fn queue_names_are_validated() {
        for bad in ["", "a{b}", "a:b", "A", "a b", &"q".repeat(65)] {
            assert!(QueueName::parse(bad).is_err(), "{bad:?}");
        }
        assert!(QueueName::parse("t-1_x").is_ok());
    }

    #[test]
    fn every_built_key_is_classified_as_what_it_is() {
        let keys = Keys::new(&QueueName::parse("q-1").unwrap());
        let key = EntityKey::parse("chat", "7f3c").unwrap();
        let domain = Domain::parse("chat").unwrap();
        let built = [
            (keys.job(&key), QueueKey::Job),
            (keys.waiting(), QueueKey::Waiting),
            (keys.urgent(), QueueKey::Urgent),
            (keys.running(), QueueKey::Running),
            (keys.done(), QueueKey::Done),
            (keys.dead(), QueueKey::Dead),
            (
                keys.dead_record("compact:chat:7f3c|9"),
                QueueKey::DeadRecord,
            ),
            (keys.seq(), QueueKey::Seq),
            (keys.job_ids(), QueueKey::Ids),
            (keys.revoked_lease("tok"), QueueKey::Revoked),
            (keys.repair_cursor(), QueueKey::RepairCursor),
            (keys.paused(), QueueKey::Paused),
            (keys.parked(&domain), QueueKey::Parked),
            (keys.workers(), QueueKey::Workers),
            (keys.worker("w1"), QueueKey::Worker),
        ];
        // Every kind but `unknown` is some builder's.
        assert_eq!(built.len(), QueueKey::COUNT - 1);
        for (name, kind) in built {
            assert_eq!(classify(&name), Some(("q-1", kind)), "{name}");
        }
        assert_eq!(
            classify("{cq:q-1}:elsewhere"),
            Some(("q-1", QueueKey::Unknown))
        );
        assert_eq!(classify("waiting"), None);
    }
}
