//! The job payload stored in Redis: versioned JSON carrying the entity key
//! and what triggered the compaction. It carries ids, never conversation
//! content: the job reads the current workstream when it starts.

use crate::key::EntityKey;
use crate::message::MessageId;
use serde::{Deserialize, Serialize};

/// Version written by this build. Readers refuse other versions with
/// [`PayloadError::UnknownVersion`] instead of guessing.
pub const PAYLOAD_VERSION: u32 = 1;

/// Longest operator instructions accepted, in bytes.
pub const MAX_INSTRUCTIONS_LEN: usize = 4_096;

/// What asked for a compaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Trigger {
    /// The workstream crossed its threshold at the end of a turn.
    Auto,
    /// An operator or the app asked, optionally with focus instructions.
    Manual {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        instructions: Option<String>,
    },
    /// Requested while the previous run was in progress.
    FollowUp,
    /// The workstream's context no longer fits the model's window at all
    /// (over `context_window`, not just over the trigger): the next model
    /// call would fail, so it runs ahead of automatic requests, as manual
    /// ones do. Written by this build only; older readers refuse it, newer
    /// ones still read every payload older builds wrote.
    Reactive,
}

impl Trigger {
    /// Bounded label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Trigger::Auto => "auto",
            Trigger::Manual { .. } => "manual",
            Trigger::FollowUp => "follow_up",
            Trigger::Reactive => "reactive",
        }
    }

    /// Every [`Trigger::label`], for checks and docs.
    pub const LABELS: [&'static str; 4] = ["auto", "manual", "follow_up", "reactive"];

    pub fn is_manual(&self) -> bool {
        matches!(self, Trigger::Manual { .. })
    }

    /// Whether a request with this trigger runs ahead of automatic ones
    /// (the queue's urgent lane): someone waits on a manual one, and a
    /// reactive one means the next model call would not fit the window.
    /// A follow-up's lane is that of the request that made it, which the
    /// queue keeps; the trigger alone does not say.
    pub fn is_urgent(&self) -> bool {
        matches!(self, Trigger::Manual { .. } | Trigger::Reactive)
    }
}

/// Which job a payload asks for. A payload without `job` (every payload
/// written before branches, and every compaction request now) is a
/// compaction, so old payloads parse unchanged and compaction payloads are
/// written byte for byte as before.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum JobKind {
    /// Compact the workstream (the entity's one compaction job).
    #[default]
    Compact,
    /// Summarize the branch the head left: the messages from
    /// `branch_point` (exclusive) to `leaf`. A job of its own, deduplicated
    /// per abandoned leaf.
    SummarizeBranch {
        leaf: MessageId,
        branch_point: MessageId,
    },
}

impl JobKind {
    pub fn is_compact(&self) -> bool {
        matches!(self, JobKind::Compact)
    }

    /// Bounded label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            JobKind::Compact => "compact",
            JobKind::SummarizeBranch { .. } => "summarize_branch",
        }
    }
}

/// The payload of one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    pub v: u32,
    pub key: EntityKey,
    pub trigger: Trigger,
    /// Absent: a compaction.
    #[serde(default, skip_serializing_if = "JobKind::is_compact")]
    pub job: JobKind,
}

/// A payload that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("payload is not valid JSON for this queue: {0}")]
    Malformed(#[source] serde_json::Error),
    #[error(
        "payload version {found} is not supported (this build reads version {PAYLOAD_VERSION})"
    )]
    UnknownVersion { found: u64 },
    #[error("operator instructions are {len} bytes; at most {MAX_INSTRUCTIONS_LEN} are accepted")]
    InstructionsTooLong { len: usize },
}

impl Payload {
    pub fn new(key: EntityKey, trigger: Trigger) -> Result<Payload, PayloadError> {
        check_instructions(&trigger)?;
        Ok(Payload {
            v: PAYLOAD_VERSION,
            key,
            trigger,
            job: JobKind::Compact,
        })
    }

    /// The payload of a `summarize_branch` job: the branch of `key` from
    /// `branch_point` (exclusive) to the abandoned `leaf`. In the normal
    /// lane (nobody waits on it).
    pub fn summarize_branch(key: EntityKey, leaf: MessageId, branch_point: MessageId) -> Payload {
        Payload {
            v: PAYLOAD_VERSION,
            key,
            trigger: Trigger::Auto,
            job: JobKind::SummarizeBranch { leaf, branch_point },
        }
    }

    /// The queue member naming this job, which is what deduplicates: an
    /// entity's compaction is `compact:{domain}:{entity_id}` (one per
    /// entity, as ever), a branch summary
    /// `branch:{domain}:{entity_id}:{leaf}` (one per abandoned leaf). The
    /// key's alphabet has no `:`, `{` or `}`, so members never collide and
    /// never change a key's hash slot.
    pub fn member(&self) -> String {
        match &self.job {
            JobKind::Compact => self.key.job_key(),
            JobKind::SummarizeBranch { leaf, .. } => format!(
                "branch:{}:{}:{}",
                self.key.domain(),
                self.key.entity_id(),
                leaf.0
            ),
        }
    }

    pub fn encode(&self) -> String {
        // A struct of strings and an enum cannot fail to serialize.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Decodes a payload read from Redis, checking the version first so an
    /// unknown version is reported as such rather than as a field error.
    pub fn decode(raw: &[u8]) -> Result<Payload, PayloadError> {
        let value: serde_json::Value =
            serde_json::from_slice(raw).map_err(PayloadError::Malformed)?;
        match value.get("v").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(PAYLOAD_VERSION) => {}
            Some(found) => return Err(PayloadError::UnknownVersion { found }),
            None => {}
        }
        let payload: Payload = serde_json::from_value(value).map_err(PayloadError::Malformed)?;
        // Whoever wrote the entry, a decoded payload is one `new` accepts:
        // the instructions end up in a summarizer prompt.
        check_instructions(&payload.trigger)?;
        Ok(payload)
    }
}

/// Refuses operator instructions longer than [`MAX_INSTRUCTIONS_LEN`].
fn check_instructions(trigger: &Trigger) -> Result<(), PayloadError> {
    match trigger {
        Trigger::Manual {
            instructions: Some(i),
        } if i.len() > MAX_INSTRUCTIONS_LEN => {
            Err(PayloadError::InstructionsTooLong { len: i.len() })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> EntityKey {
        EntityKey::parse("chat", "42").unwrap()
    }

    #[test]
    fn round_trips_every_trigger() {
        for trigger in [
            Trigger::Auto,
            Trigger::FollowUp,
            Trigger::Reactive,
            Trigger::Manual { instructions: None },
            Trigger::Manual {
                instructions: Some("focus on the schema".into()),
            },
        ] {
            let p = Payload::new(key(), trigger).unwrap();
            assert_eq!(Payload::decode(p.encode().as_bytes()).unwrap(), p);
        }
        assert_eq!(
            Payload::new(key(), Trigger::Auto).unwrap().encode(),
            r#"{"v":1,"key":{"domain":"chat","entity_id":"42"},"trigger":{"kind":"auto"}}"#
        );
    }

    #[test]
    fn reactive_is_a_trigger_of_its_own_and_older_payloads_still_parse() {
        let p = Payload::new(key(), Trigger::Reactive).unwrap();
        assert_eq!(
            p.encode(),
            r#"{"v":1,"key":{"domain":"chat","entity_id":"42"},"trigger":{"kind":"reactive"}}"#
        );
        assert_eq!(Trigger::Reactive.label(), "reactive");
        // What builds before the reactive trigger wrote reads as before.
        for (raw, trigger) in [
            (r#"{"kind":"auto"}"#, Trigger::Auto),
            (r#"{"kind":"follow_up"}"#, Trigger::FollowUp),
            (
                r#"{"kind":"manual"}"#,
                Trigger::Manual { instructions: None },
            ),
        ] {
            let json =
                format!(r#"{{"v":1,"key":{{"domain":"chat","entity_id":"42"}},"trigger":{raw}}}"#);
            assert_eq!(Payload::decode(json.as_bytes()).unwrap().trigger, trigger);
        }
        let labels: Vec<&str> = [
            Trigger::Auto,
            Trigger::Manual { instructions: None },
            Trigger::FollowUp,
            Trigger::Reactive,
        ]
        .iter()
        .map(Trigger::label)
        .collect();
        assert_eq!(labels, Trigger::LABELS);
        let urgent: Vec<bool> = [Trigger::Auto, Trigger::FollowUp, Trigger::Reactive]
            .iter()
            .map(Trigger::is_urgent)
            .collect();
        assert_eq!(urgent, [false, false, true]);
        assert!(Trigger::Manual { instructions: None }.is_urgent());
    }

    #[test]
    fn branch_jobs_have_a_member_per_leaf_and_compactions_encode_as_before() {
        let p = Payload::summarize_branch(key(), MessageId(12), MessageId(7));
        assert_eq!(
            p.encode(),
            r#"{"v":1,"key":{"domain":"chat","entity_id":"42"},"trigger":{"kind":"auto"},"job":{"kind":"summarize_branch","leaf":12,"branch_point":7}}"#
        );
        assert_eq!(Payload::decode(p.encode().as_bytes()).unwrap(), p);
        assert_eq!(p.member(), "branch:chat:42:12");
        let compact = Payload::new(key(), Trigger::Auto).unwrap();
        assert_eq!(compact.member(), "compact:chat:42");
        assert_eq!(compact.job, JobKind::Compact);
        assert_ne!(
            Payload::summarize_branch(key(), MessageId(13), MessageId(7)).member(),
            p.member()
        );
    }

    #[test]
    fn bad_payloads_get_typed_errors() {
        assert!(matches!(
            Payload::decode(b"not json"),
            Err(PayloadError::Malformed(_))
        ));
        assert!(matches!(
            Payload::decode(&[0xff, 0xfe]),
            Err(PayloadError::Malformed(_))
        ));
        assert!(matches!(
            Payload::decode(
                br#"{"v":2,"key":{"domain":"chat","entity_id":"1"},"trigger":{"kind":"auto"}}"#
            ),
            Err(PayloadError::UnknownVersion { found: 2 })
        ));
        let err = Payload::decode(
            br#"{"v":1,"key":{"domain":"chat","entity_id":"a*b"},"trigger":{"kind":"auto"}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("entity id contains '*'"), "{err}");
        assert!(matches!(
            Payload::decode(
                br#"{"v":1,"key":{"domain":"chat","entity_id":"1"},"trigger":{"kind":"magic"}}"#
            ),
            Err(PayloadError::Malformed(_))
        ));
        assert!(matches!(
            Payload::new(
                key(),
                Trigger::Manual {
                    instructions: Some("x".repeat(5_000))
                }
            ),
            Err(PayloadError::InstructionsTooLong { len: 5_000 })
        ));
    }

    /// Found by the `payload_decode` fuzz target: decoding accepted
    /// instructions that `Payload::new` refuses.
    #[test]
    fn decoding_enforces_the_instructions_limit() {
        let encode = |len: usize| {
            format!(
                r#"{{"v":1,"key":{{"domain":"chat","entity_id":"1"}},"trigger":{{"kind":"manual","instructions":"{}"}}}}"#,
                "x".repeat(len)
            )
        };
        let at_limit = Payload::decode(encode(MAX_INSTRUCTIONS_LEN).as_bytes()).unwrap();
        assert_eq!(
            Payload::new(at_limit.key.clone(), at_limit.trigger.clone()).unwrap(),
            at_limit
        );
        assert!(matches!(
            Payload::decode(encode(MAX_INSTRUCTIONS_LEN + 1).as_bytes()),
            Err(PayloadError::InstructionsTooLong { len }) if len == MAX_INSTRUCTIONS_LEN + 1
        ));
    }
}
