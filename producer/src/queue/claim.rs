//! What a claim hands a worker, and keeping it: [`ClaimedJob`] (a job
//! leased to the worker, its lease token fencing every later step),
//! reading the claim entries `settle.lua` returns, and renewing a lease.
//! Claims themselves are made by [`Queue::settle`] and its short forms
//! [`Queue::claim`] and [`Queue::complete_and_claim`] (`settle` module):
//! one script both completes finished jobs and claims new ones.

use std::time::Duration;

use compactor_shared::payload::Payload;
use compactor_shared::EntityKey;
use redis::Value;

use super::convert::millis;
use super::error::{redis_error, QueueError};
use super::handle::Queue;

/// A job a worker holds the lease of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedJob {
    pub key: EntityKey,
    pub payload: Payload,
    pub job_id: u64,
    /// 1 on the first attempt.
    pub attempt: u32,
    /// Fences the job's final commit: only the holder of this token may
    /// complete the job.
    pub lease_token: String,
    /// Server time (ms) the job was added at.
    pub enqueued_at_ms: u64,
    /// How long it waited between being added and this claim (server clock).
    pub queue_wait: Duration,
}

impl ClaimedJob {
    /// The queue member of the job (its record is `job:<member>`): the
    /// entity's for a compaction, the abandoned leaf's for a branch summary
    /// ([`Payload::member`]).
    pub fn member(&self) -> String {
        self.payload.member()
    }
}

/// Result of a claim.
#[derive(Debug)]
pub enum ClaimOutcome {
    Claimed(ClaimedJob),
    /// Nothing may run now; `next_due_in` is how soon a delayed job
    /// becomes due (by the server clock), if one is waiting.
    Empty {
        next_due_in: Option<Duration>,
    },
    /// A queue entry that cannot run was taken off the queue: a payload
    /// that does not decode is dead-lettered with the error as its reason
    /// (never retried); an entry whose job record is gone is dropped.
    Unusable {
        member: String,
        error: String,
    },
}

impl Queue {
    /// Extends the lease of `job`. `false` when it is no longer held.
    pub async fn renew(&self, job: &ClaimedJob) -> Result<bool, QueueError> {
        let mut conn = self.conn.clone();
        let reply: String = self
            .scripts
            .renew
            .key(self.keys.job_of_member(&job.member()))
            .key(self.keys.running())
            .arg(job.member())
            .arg(&job.lease_token)
            .arg(millis(self.config.lease_ttl))
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("renew"))?;
        Ok(reply == "ok")
    }

    /// Interprets one claim entry of `settle.lua` (see `claim_some` in the
    /// prelude). Never fails: the script has run by now (jobs are leased,
    /// completions applied), so a problem with one entry must not turn the
    /// whole reply into an error. An entry that cannot be read is reported
    /// as unusable and left leased: its lease expires and recovery returns
    /// it. A payload that does not decode is dead-lettered at once.
    pub(super) async fn claim_entry(&self, entry: Vec<Value>) -> ClaimOutcome {
        let member = entry_text(&entry, 1).unwrap_or_default();
        let (token, error) = match read_claim(&entry) {
            Ok(job) => return ClaimOutcome::Claimed(job),
            Err(Unreadable::Entry(error)) => return ClaimOutcome::Unusable { member, error },
            Err(Unreadable::Payload { token, error }) => (token, error),
        };
        // Never retried: the payload will not get better.
        if let Err(failed) = self.dead_letter_leased(&member, &token, &error).await {
            // Left leased: recovery returns it, and the next claim
            // dead-letters it again.
            return ClaimOutcome::Unusable {
                member,
                error: format!("{error} (not dead-lettered yet: {failed})"),
            };
        }
        ClaimOutcome::Unusable { member, error }
    }
}

/// Why a claim entry gave no job.
#[derive(Debug, PartialEq, Eq)]
enum Unreadable {
    /// The entry is not a usable claim (an orphan, a malformed reply).
    Entry(String),
    /// The job was leased with `token`, but its payload does not decode:
    /// it must be dead-lettered.
    Payload { token: String, error: String },
}

/// Text of field `i` of a claim entry.
fn entry_text(entry: &[Value], i: usize) -> Option<String> {
    match entry.get(i)? {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Reads a claim entry, `{'claimed', member, payload, job_id, attempt,
/// lease token, enqueued_at, ms waited}` or `{'orphan', member}`, without
/// touching Redis.
fn read_claim(entry: &[Value]) -> Result<ClaimedJob, Unreadable> {
    let text = |i: usize| entry_text(entry, i);
    let number = |i: usize| text(i).and_then(|s| s.parse::<u64>().ok());
    match text(0).as_deref() {
        Some("orphan") => Err(Unreadable::Entry("queue entry without a job record".into())),
        Some("claimed") => {
            let Some(token) = text(5) else {
                return Err(Unreadable::Entry(
                    "claim reply without a lease token".into(),
                ));
            };
            let raw = match entry.get(2) {
                Some(Value::BulkString(b)) => b.as_slice(),
                _ => &[],
            };
            let payload = Payload::decode(raw).map_err(|e| Unreadable::Payload {
                token: token.clone(),
                error: e.to_string(),
            })?;
            let (Some(job_id), Some(attempt), Some(enqueued_at_ms), Some(waited)) =
                (number(3), number(4), number(6), number(7))
            else {
                return Err(Unreadable::Entry(format!(
                    "unreadable claim reply {entry:?}"
                )));
            };
            Ok(ClaimedJob {
                key: payload.key.clone(),
                job_id,
                attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
                lease_token: token,
                enqueued_at_ms,
                queue_wait: Duration::from_millis(waited),
                payload,
            })
        }
        other => Err(Unreadable::Entry(format!(
            "unknown claim outcome {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use compactor_shared::payload::Trigger;

    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    fn claimed(payload: &str) -> Vec<Value> {
        [
            "claimed",
            "compact:chat:7f3c",
            payload,
            "12",
            "2",
            "12:2:ab",
            "1000",
            "250",
        ]
        .into_iter()
        .map(bulk)
        .collect()
    }

    #[test]
    fn a_claim_entry_reads_as_the_leased_job() {
        let key = EntityKey::parse("chat", "7f3c").unwrap();
        let payload = Payload::new(key.clone(), Trigger::FollowUp).unwrap();
        let job = read_claim(&claimed(&payload.encode())).unwrap();
        assert_eq!(
            job,
            ClaimedJob {
                key,
                payload,
                job_id: 12,
                attempt: 2,
                lease_token: "12:2:ab".into(),
                enqueued_at_ms: 1000,
                queue_wait: Duration::from_millis(250),
            }
        );
    }

    #[test]
    fn a_payload_that_does_not_decode_must_be_dead_lettered_with_its_token() {
        let Err(Unreadable::Payload { token, .. }) = read_claim(&claimed("not json")) else {
            panic!("an undecodable payload must be dead-lettered");
        };
        assert_eq!(token, "12:2:ab");
    }

    #[test]
    fn orphans_and_malformed_entries_are_unusable() {
        let unusable = |entry: Vec<Value>| matches!(read_claim(&entry), Err(Unreadable::Entry(_)));
        assert!(unusable(vec![bulk("orphan"), bulk("compact:chat:1")]));
        assert!(unusable(vec![bulk("claimed"), bulk("compact:chat:1")]));
        assert!(unusable(vec![bulk("stolen"), bulk("compact:chat:1")]));
        assert!(unusable(Vec::new()));
        let key = EntityKey::parse("chat", "7f3c").unwrap();
        let payload = Payload::new(key, Trigger::FollowUp).unwrap().encode();
        let mut entry = claimed(&payload);
        entry[3] = bulk("twelve");
        assert!(unusable(entry));
    }
}
