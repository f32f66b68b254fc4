//! The operator's view of the dead-letter set: listing dead-lettered jobs,
//! requesting their entity again, and purging them. Each dead letter is an
//! entry `<member>|<job_id>` in the `dead` sorted set (scored by when it
//! died) plus a record of its own, a copy of the job made when it died, so
//! a newer job of the same entity cannot overwrite what the operator needs
//! to see. Both are bounded by count and age by the scripts that
//! dead-letter (`dead_letter` and `trim_dead` in the prelude).

use std::collections::HashMap;

use compactor_shared::payload::{Payload, Trigger};
use compactor_shared::EntityKey;
use serde::Serialize;

use super::dead_bulk::{retry_request, LetterRetry, BATCH};
use super::enqueue::EnqueueOutcome;
use super::error::{redis_error, QueueError, WrongTypeKey};
use super::handle::Queue;

/// A dead-lettered job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadLetter {
    /// Its id in the dead-letter set, `<member>|<job_id>`.
    pub entry: String,
    /// The entity's job key, `compact:{domain}:{entity_id}`.
    pub member: String,
    pub job_id: u64,
    pub attempts: u32,
    pub stalls: u32,
    pub reason: String,
    pub failed_at_ms: u64,
    /// The payload as stored (it may be the reason it died).
    pub payload: String,
}

impl DeadLetter {
    /// Its payload, if it is one this build reads (it may be the reason
    /// the job died).
    pub fn decoded_payload(&self) -> Option<Payload> {
        Payload::decode(self.payload.as_bytes()).ok()
    }
}

impl Queue {
    /// The dead letter `entry` (`<member>|<job_id>`), if it is kept.
    pub async fn dead_letter(&self, entry: &str) -> Result<Option<DeadLetter>, QueueError> {
        let mut conn = self.conn.clone();
        let key = self.keys.dead_record(entry);
        let record: Result<HashMap<String, String>, _> =
            redis::cmd("HGETALL").arg(&key).query_async(&mut conn).await;
        let record = match record {
            Ok(record) => record,
            Err(e) => return Err(self.named_refusal("dead_letter", e, &[(key, "hash")]).await),
        };
        Ok((!record.is_empty()).then(|| dead_letter(entry.to_owned(), &record)))
    }

    /// The newest dead-lettered jobs, newest first.
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, QueueError> {
        let mut conn = self.conn.clone();
        let redis_err = redis_error("dead_letters");
        let stop = isize::try_from(limit)
            .unwrap_or(isize::MAX)
            .saturating_sub(1);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let entries: Vec<String> = redis::cmd("ZREVRANGE")
            .arg(self.keys.dead())
            .arg(0)
            .arg(stop)
            .query_async(&mut conn)
            .await
            .map_err(redis_err)?;
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for entry in &entries {
            pipe.hgetall(self.keys.dead_record(entry));
        }
        let records: Result<Vec<HashMap<String, String>>, _> = pipe.query_async(&mut conn).await;
        let records = match records {
            Ok(records) => records,
            Err(e) => {
                let keys: Vec<(String, &str)> = entries
                    .iter()
                    .map(|entry| (self.keys.dead_record(entry), "hash"))
                    .collect();
                return Err(self.named_refusal("dead_letters", e, &keys).await);
            }
        };
        // An entry whose record expired (its age bound passed before a
        // sweep trimmed the set) is not shown.
        Ok(entries
            .into_iter()
            .zip(records)
            .filter(|(_, r)| !r.is_empty())
            .map(|(entry, r)| dead_letter(entry, &r))
            .collect())
    }

    /// Requests the entity of a dead-lettered job again (with the trigger
    /// it had, or a manual one if its payload is unusable) and removes the
    /// dead letter. `None` when there is no such entry.
    pub async fn retry_dead(&self, entry: &str) -> Result<Option<EnqueueOutcome>, QueueError> {
        Ok(self
            .retry_dead_request(entry)
            .await?
            .map(|(_, _, outcome)| outcome))
    }

    /// [`Queue::retry_dead`], returning the request it made too (the
    /// entity, and the trigger of a compaction; `None` for a branch
    /// summary's job), for its `compaction.requested` event.
    pub async fn retry_dead_request(
        &self,
        entry: &str,
    ) -> Result<Option<(EntityKey, Option<Trigger>, EnqueueOutcome)>, QueueError> {
        let Some(letter) = self.dead_letter(entry).await? else {
            // No record (never was, or it expired): nothing to retry, and
            // an index entry left without its record goes.
            self.purge_dead(Some(entry)).await?;
            return Ok(None);
        };
        // The same script as a bulk retry: the request and the letter's
        // removal in one step.
        let retry = retry_request(&letter)?;
        let mut results = self.retry_letters(vec![retry]).await?;
        match results.pop() {
            Some((retry, LetterRetry::Requested(outcome))) => {
                Ok(Some((retry.key, retry.trigger, outcome)))
            }
            Some((_, LetterRetry::Gone)) | None => Ok(None),
            // Counted with the batch's skipped letters already.
            Some((_, LetterRetry::Skipped { key })) => Err(QueueError::WrongType {
                op: "retry_dead",
                key: WrongTypeKey {
                    key: Some(key),
                    found: None,
                    expected: Some("hash".to_owned()),
                },
            }),
        }
    }

    /// Deletes one dead letter, or all of them; returns how many.
    pub async fn purge_dead(&self, entry: Option<&str>) -> Result<u64, QueueError> {
        let entries: Vec<String> = match entry {
            Some(e) => vec![e.to_owned()],
            None => {
                let mut conn = self.conn.clone();
                redis::cmd("ZRANGE")
                    .arg(self.keys.dead())
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn)
                    .await
                    .map_err(redis_error("purge_dead"))?
            }
        };
        let mut removed = 0;
        for chunk in entries.chunks(BATCH) {
            let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
            removed += self.purge_entries(&chunk).await?;
        }
        Ok(removed)
    }
}

/// A dead letter from its set entry and its record (as written by
/// `dead_letter` in the prelude). Fields a hand-edited record lacks read
/// as empty or zero; the member falls back to the entry's.
pub(super) fn dead_letter(entry: String, r: &HashMap<String, String>) -> DeadLetter {
    let num = |f: &str| r.get(f).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    DeadLetter {
        member: r
            .get("member")
            .cloned()
            .unwrap_or_else(|| entry.split('|').next().unwrap_or_default().to_owned()),
        job_id: num("job_id"),
        attempts: u32::try_from(num("attempts")).unwrap_or(u32::MAX),
        stalls: u32::try_from(num("stalls")).unwrap_or(u32::MAX),
        reason: r.get("reason").cloned().unwrap_or_default(),
        failed_at_ms: num("failed_at"),
        payload: r.get("payload").cloned().unwrap_or_default(),
        entry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(fields: &[(&str, &str)]) -> HashMap<String, String> {
        fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_dead_letter_reads_its_record() {
        let r = record(&[
            ("member", "compact:chat:7f3c"),
            ("job_id", "12"),
            ("attempts", "3"),
            ("stalls", "1"),
            ("reason", "llm: 500"),
            ("failed_at", "1700000000000"),
            ("payload", "{}"),
        ]);
        let letter = dead_letter("compact:chat:7f3c|12".into(), &r);
        assert_eq!(
            letter,
            DeadLetter {
                entry: "compact:chat:7f3c|12".into(),
                member: "compact:chat:7f3c".into(),
                job_id: 12,
                attempts: 3,
                stalls: 1,
                reason: "llm: 500".into(),
                failed_at_ms: 1_700_000_000_000,
                payload: "{}".into(),
            }
        );
    }

    #[test]
    fn a_hand_edited_record_still_names_its_entity() {
        let letter = dead_letter(
            "compact:chat:7f3c|12".into(),
            &record(&[("attempts", "many")]),
        );
        assert_eq!(letter.member, "compact:chat:7f3c");
        assert_eq!(letter.attempts, 0);
        assert_eq!(letter.reason, "");
    }
}
