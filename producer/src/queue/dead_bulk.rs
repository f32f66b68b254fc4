//! Dead letters chosen by a filter — their reason, their domain, their
//! age, or one entry — listed a page at a time, retried or purged in bulk,
//! with a dry run that counts (and shows a sample of) what a bulk
//! operation would touch.
//!
//! Work is bounded per Redis call, however large the dead-letter set: the
//! set is walked [`BATCH`] entries at a time (oldest first for bulk
//! operations, up to the age cutoff; newest first for pages), the records
//! of a batch are read in one pipeline, the filter is applied here, and
//! the letters of a batch that matched are retried (`dead_retry.lua`) or
//! purged (`dead_purge.lua`) in one script call: atomic per batch, and a
//! letter retried or purged meanwhile by someone else is left alone. A
//! retried letter is requested exactly as `dlq retry` requests one
//! (`request_job` in the prelude: dedup against a live job of its entity),
//! and the caller writes the `compaction.requested` events of the
//! [`RetriedLetter`]s, as for any request.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use compactor_shared::payload::{JobKind, Trigger};
use compactor_shared::EntityKey;
use redis::Value;
use serde::Serialize;

use super::dead_letters::dead_letter;
use super::enqueue::{enqueue_outcome, EnqueueOutcome, Request};
use super::error::{redis_error, QueueError};
use super::handle::Queue;
use super::DeadLetter;
use crate::events::{InternalEvent, QueueKeyOfWrongType};

/// Entries read from the dead-letter set per Redis call, and letters
/// retried or purged per script call.
pub(super) const BATCH: usize = 200;
/// Letters a bulk operation reports as its sample.
pub const SAMPLE: usize = 10;
/// Entries a page looks at, at most, for letters that match its filter:
/// a page of a sparse filter may come back short, with a cursor to go on.
pub(super) const PAGE_SCAN: usize = 20 * BATCH;
/// Longest reason token.
const MAX_REASON_LEN: usize = 32;
/// Longest member an entry names (a branch member is about 200 bytes).
const MAX_MEMBER_LEN: usize = 400;

/// Why a filter was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeadFilterError {
    #[error("reason {0:?}: use 1-32 of a-z and '_', starting with a letter (e.g. exhausted, permanent, stalled, unusable, cancelled)")]
    Reason(String),
    #[error("domain {0:?}: {1}")]
    Domain(String, String),
    #[error("entry {0:?} is not a dead letter's entry (<member>|<job_id>)")]
    Entry(String),
    #[error("cursor {0:?} is not a cursor this listing returned")]
    Cursor(String),
}

/// The kind of reason a dead letter died for, as a filter names it: a
/// token, not a closed list, so a kind another build records (such as
/// `cancelled`) is filtered on without a change here. See
/// [`reason_kind`] for how a letter's recorded reason is read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct DeadReason(String);

impl DeadReason {
    pub fn parse(raw: &str) -> Result<DeadReason, DeadFilterError> {
        let ok = !raw.is_empty()
            && raw.len() <= MAX_REASON_LEN
            && raw.starts_with(|c: char| c.is_ascii_lowercase())
            && raw.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        if ok {
            Ok(DeadReason(raw.to_owned()))
        } else {
            Err(DeadFilterError::Reason(raw.chars().take(40).collect()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether a letter that died for `reason` (its recorded text) is of
    /// this kind: its [`reason_kind`], or the word its reason starts with.
    pub fn matches(&self, reason: &str) -> bool {
        reason_kind(reason) == self.0 || first_word(reason) == self.0
    }
}

impl fmt::Display for DeadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The kind of a recorded dead-letter reason, the words of the
/// `reason` label of `compactor_jobs_dead_lettered_total`: `exhausted`
/// (the runtime's "gave up after N attempts: …"), `stalled` (recovery's
/// "stalled: the lease expired N times"), a reason that starts with a word
/// of its own followed by `:` or nothing (`cancelled`, `unusable`), and
/// otherwise `permanent` (the failure's own text: a permanent error, or a
/// payload that does not decode).
pub fn reason_kind(reason: &str) -> &str {
    if reason.starts_with("gave up after ") {
        return "exhausted";
    }
    let word = first_word(reason);
    let rest = &reason[word.len()..];
    if KINDS.contains(&word) && (rest.is_empty() || rest.starts_with(':')) {
        return word;
    }
    "permanent"
}

/// Kinds a reason names by its first word.
const KINDS: [&str; 3] = ["stalled", "unusable", "cancelled"];

/// The leading run of `a-z` and `_` of a reason.
fn first_word(reason: &str) -> &str {
    let end = reason
        .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
        .unwrap_or(reason.len());
    &reason[..end]
}

/// The domain of a dead letter's member (`compact:{domain}:{entity}` or
/// `branch:{domain}:{entity}:{leaf}`; a domain holds no `:`).
pub fn member_domain(member: &str) -> &str {
    member.split(':').nth(1).unwrap_or_default()
}

/// Which dead letters an operation is about. Every field narrows; a
/// filter with none chooses every letter (callers ask for that
/// explicitly: see [`DeadFilter::is_empty`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadFilter {
    pub reason: Option<DeadReason>,
    /// A validated domain ([`DeadFilter::parse_domain`]).
    pub domain: Option<String>,
    /// Dead for at least this long (by Redis server time).
    pub older_than: Option<Duration>,
    /// One letter, `<member>|<job_id>`.
    pub entry: Option<String>,
}

impl DeadFilter {
    /// Checks a domain as workstream keys check theirs.
    pub fn parse_domain(raw: &str) -> Result<String, DeadFilterError> {
        EntityKey::parse(raw, "x")
            .map(|key| key.domain().to_owned())
            .map_err(|e| DeadFilterError::Domain(raw.chars().take(40).collect(), e.to_string()))
    }

    /// Checks an entry's shape: `<member>|<job_id>`, the member in the
    /// alphabet members are made of (`compact:{domain}:{entity}`,
    /// `branch:{domain}:{entity}:{leaf}`: letters, digits, `_ . - :`), at
    /// most 400 bytes, the job id at most 19 digits.
    pub fn parse_entry(raw: &str) -> Result<String, DeadFilterError> {
        let ok = raw.rsplit_once('|').is_some_and(|(member, id)| {
            (1..=MAX_MEMBER_LEN).contains(&member.len())
                && member
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b':'))
                && (1..=19).contains(&id.len())
                && id.bytes().all(|b| b.is_ascii_digit())
        });
        if ok {
            Ok(raw.to_owned())
        } else {
            Err(DeadFilterError::Entry(raw.chars().take(40).collect()))
        }
    }

    /// Whether it narrows nothing (every letter matches).
    pub fn is_empty(&self) -> bool {
        self.reason.is_none()
            && self.domain.is_none()
            && self.older_than.is_none()
            && self.entry.is_none()
    }

    /// Whether `letter` matches, with the age cutoff (server ms) resolved.
    fn matches(&self, letter: &DeadLetter, cutoff_ms: Option<u64>) -> bool {
        self.reason
            .as_ref()
            .is_none_or(|r| r.matches(&letter.reason))
            && self
                .domain
                .as_deref()
                .is_none_or(|d| member_domain(&letter.member) == d)
            && cutoff_ms.is_none_or(|c| letter.failed_at_ms <= c)
            && self.entry.as_deref().is_none_or(|e| letter.entry == e)
    }
}

/// Where a page of dead letters stopped: the last letter it looked at
/// (`<failed_at_ms>:<entry>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadCursor {
    score: u64,
    entry: String,
}

impl DeadCursor {
    pub fn parse(raw: &str) -> Result<DeadCursor, DeadFilterError> {
        let bad = || DeadFilterError::Cursor(raw.chars().take(40).collect());
        let (score, entry) = raw.split_once(':').ok_or_else(bad)?;
        if !(1..=19).contains(&score.len()) {
            return Err(bad());
        }
        let score = score.parse().map_err(|_| bad())?;
        let entry = DeadFilter::parse_entry(entry).map_err(|_| bad())?;
        Ok(DeadCursor { score, entry })
    }
}

impl fmt::Display for DeadCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.score, self.entry)
    }
}

/// A page of dead letters, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadPage {
    pub letters: Vec<DeadLetter>,
    /// Where the next page starts; `None` when no letter is left to look
    /// at. A page can be short (its filter matched few of the
    /// [`PAGE_SCAN`] letters it looked at) and still have a next one.
    pub next_cursor: Option<DeadCursor>,
}

/// A letter a bulk retry requested again: for its `compaction.requested`
/// event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetriedLetter {
    pub entry: String,
    pub key: EntityKey,
    /// The trigger of the compaction requested; `None` for a branch
    /// summary's job (which writes no event).
    pub trigger: Option<Trigger>,
    pub outcome: EnqueueOutcome,
}

/// What a bulk operation did (or, dry, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkReport {
    /// Letters that matched the filter when read (one retried or purged
    /// by someone else meanwhile counts here, not in `applied`).
    pub matched: u64,
    /// Letters retried or purged (0 in a dry run).
    pub applied: u64,
    /// Matched letters a retry could not request again (their member names
    /// no entity, or its job record holds another type); they stay.
    pub skipped: u64,
    /// The first [`SAMPLE`] letters that matched, oldest first.
    pub sample: Vec<DeadLetter>,
    /// Every letter retried, for its event.
    pub retried: Vec<RetriedLetter>,
}

/// A bulk operation under way: its filter, and where it stands. Made by
/// [`Queue::dead_letters_walk`], advanced by [`Queue::dead_letters_step`].
#[derive(Debug, Clone)]
pub struct BulkWalk {
    filter: DeadFilter,
    action: BulkAction,
    dry_run: bool,
    cutoff: Option<u64>,
    after: Option<DeadCursor>,
    done: bool,
}

impl BulkWalk {
    /// Goes on from where an earlier walk of the same operation stopped
    /// (its [`BulkWalk::position`]): the letters up to `after` are not read
    /// again. How a bulk operation is split over calls that each end in
    /// time (the HTTP routes' `after` and `next_cursor`).
    pub fn resume_after(&mut self, after: DeadCursor) {
        if self.filter.entry.is_none() {
            self.after = Some(after);
        }
    }

    /// The last letter the walk looked at, once it looked at one.
    pub fn position(&self) -> Option<&DeadCursor> {
        self.after.as_ref()
    }
}

/// What a bulk operation does to the letters that match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkAction {
    Retry,
    Purge,
}

/// Which way a walk goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    OldestFirst,
    NewestFirst,
}

impl Queue {
    /// A page of the dead letters `filter` matches, newest first, after
    /// `cursor` (the previous page's `next_cursor`).
    pub async fn dead_letters_page(
        &self,
        filter: &DeadFilter,
        cursor: Option<DeadCursor>,
        limit: usize,
    ) -> Result<DeadPage, QueueError> {
        let cutoff = self.cutoff_ms(filter).await?;
        if let Some(entry) = &filter.entry {
            let letters = self
                .dead_letter(entry)
                .await?
                .filter(|l| filter.matches(l, cutoff))
                .filter(|l| {
                    cursor
                        .as_ref()
                        .is_none_or(|c| (l.failed_at_ms, &l.entry) < (c.score, &c.entry))
                })
                .into_iter()
                .collect();
            return Ok(DeadPage {
                letters,
                next_cursor: None,
            });
        }
        let mut letters = Vec::new();
        let mut after = cursor;
        let mut looked = 0;
        while letters.len() < limit && looked < PAGE_SCAN {
            let want = BATCH.min(PAGE_SCAN - looked);
            let (batch, more) = self
                .dead_batch(Order::NewestFirst, after.as_ref(), None, want)
                .await?;
            looked += batch.len();
            let batch_end = batch.last().map(|(entry, score)| DeadCursor {
                score: *score,
                entry: entry.clone(),
            });
            for (letter, score) in self.dead_records(batch).await? {
                if filter.matches(&letter, cutoff) {
                    let at = DeadCursor {
                        score,
                        entry: letter.entry.clone(),
                    };
                    letters.push(letter);
                    if letters.len() == limit {
                        // More may follow this one.
                        return Ok(DeadPage {
                            letters,
                            next_cursor: Some(at),
                        });
                    }
                }
            }
            // Past every entry read, whether its record is kept or not.
            if batch_end.is_some() {
                after = batch_end;
            }
            if !more {
                return Ok(DeadPage {
                    letters,
                    next_cursor: None,
                });
            }
        }
        Ok(DeadPage {
            letters,
            next_cursor: after,
        })
    }

    /// Retries or purges every dead letter `filter` matches, oldest first,
    /// a batch at a time (see the module docs); `dry_run` only counts them
    /// and keeps a sample. An empty filter matches every letter. The
    /// [`BulkReport::retried`] of the whole walk are returned together: a
    /// caller that writes their events as it goes walks with
    /// [`Queue::dead_letters_walk`] and [`Queue::dead_letters_step`].
    pub async fn dead_letters_bulk(
        &self,
        filter: &DeadFilter,
        action: BulkAction,
        dry_run: bool,
    ) -> Result<BulkReport, QueueError> {
        let mut walk = self.dead_letters_walk(filter, action, dry_run).await?;
        let mut report = BulkReport::default();
        while self.dead_letters_step(&mut walk, &mut report).await? {}
        Ok(report)
    }

    /// Starts a bulk walk (the age cutoff is read from Redis' clock now).
    pub async fn dead_letters_walk(
        &self,
        filter: &DeadFilter,
        action: BulkAction,
        dry_run: bool,
    ) -> Result<BulkWalk, QueueError> {
        Ok(BulkWalk {
            cutoff: self.cutoff_ms(filter).await?,
            filter: filter.clone(),
            action,
            dry_run,
            after: None,
            done: false,
        })
    }

    /// One batch of `walk`, counted into `report` (its `retried` grow by
    /// the letters this batch retried). Whether more batches may follow.
    pub async fn dead_letters_step(
        &self,
        walk: &mut BulkWalk,
        report: &mut BulkReport,
    ) -> Result<bool, QueueError> {
        if walk.done {
            return Ok(false);
        }
        if let Some(entry) = &walk.filter.entry {
            walk.done = true;
            if let Some(letter) = self.dead_letter(entry).await? {
                if walk.filter.matches(&letter, walk.cutoff) {
                    self.apply(vec![letter], walk.action, walk.dry_run, report)
                        .await?;
                }
            }
            return Ok(false);
        }
        let (batch, more) = self
            .dead_batch(Order::OldestFirst, walk.after.as_ref(), walk.cutoff, BATCH)
            .await?;
        // The cursor moves past every entry read, whether its record is
        // kept or not.
        if let Some((entry, score)) = batch.last() {
            walk.after = Some(DeadCursor {
                score: *score,
                entry: entry.clone(),
            });
        }
        let matched: Vec<DeadLetter> = self
            .dead_records(batch)
            .await?
            .into_iter()
            .map(|(letter, _)| letter)
            .filter(|letter| walk.filter.matches(letter, walk.cutoff))
            .collect();
        self.apply(matched, walk.action, walk.dry_run, report)
            .await?;
        walk.done = !more;
        Ok(more)
    }

    /// Counts `letters` into `report` and, unless dry, retries or purges
    /// them in one script call.
    async fn apply(
        &self,
        letters: Vec<DeadLetter>,
        action: BulkAction,
        dry_run: bool,
        report: &mut BulkReport,
    ) -> Result<(), QueueError> {
        report.matched += letters.len() as u64;
        let room = SAMPLE.saturating_sub(report.sample.len());
        report.sample.extend(letters.iter().take(room).cloned());
        if dry_run || letters.is_empty() {
            return Ok(());
        }
        match action {
            BulkAction::Purge => {
                let entries: Vec<&str> = letters.iter().map(|l| l.entry.as_str()).collect();
                report.applied += self.purge_entries(&entries).await?;
            }
            BulkAction::Retry => {
                let mut requests = Vec::with_capacity(letters.len());
                for letter in letters {
                    match retry_request(&letter) {
                        Ok(request) => requests.push(request),
                        Err(_) => report.skipped += 1,
                    }
                }
                for (retry, result) in self.retry_letters(requests).await? {
                    match result {
                        LetterRetry::Requested(outcome) => {
                            report.applied += 1;
                            report.retried.push(RetriedLetter {
                                entry: retry.entry,
                                key: retry.key,
                                trigger: retry.trigger,
                                outcome,
                            });
                        }
                        LetterRetry::Skipped { .. } => report.skipped += 1,
                        // Retried, purged or trimmed meanwhile: not ours.
                        LetterRetry::Gone => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// Requests the letters of `retries` again in one `dead_retry.lua`
    /// call; the result of each, in order.
    pub(super) async fn retry_letters(
        &self,
        retries: Vec<Retry>,
    ) -> Result<Vec<(Retry, LetterRetry)>, QueueError> {
        if retries.is_empty() {
            return Ok(Vec::new());
        }
        let mut inv = self.scripts.dead_retry.prepare_invoke();
        inv.key(self.keys.dead())
            .key(self.keys.waiting())
            .key(self.keys.seq())
            .key(self.keys.running())
            .key(self.keys.urgent())
            .arg(self.keys.prefix())
            .arg(self.keys.wake_channel());
        for retry in &retries {
            inv.arg(&retry.entry);
            retry.request.push_args(&mut inv);
        }
        let mut conn = self.conn.clone();
        let replies: Vec<Vec<String>> = inv
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("dead_retry"))?;
        if replies.len() != retries.len() {
            return Err(QueueError::Protocol {
                op: "dead_retry",
                detail: format!("{} replies to {} letters", replies.len(), retries.len()),
            });
        }
        let mut results = Vec::with_capacity(retries.len());
        for (retry, reply) in retries.into_iter().zip(replies) {
            let result = match reply.first().map(String::as_str) {
                Some("gone") => LetterRetry::Gone,
                Some("skipped") => {
                    let key = reply.get(2).cloned().unwrap_or_default();
                    QueueKeyOfWrongType {
                        op: "dead_retry",
                        key: Some(&key),
                    }
                    .emit();
                    LetterRetry::Skipped { key }
                }
                _ => {
                    let outcome = enqueue_outcome(&reply);
                    self.count_enqueue(&outcome);
                    LetterRetry::Requested(outcome?)
                }
            };
            results.push((retry, result));
        }
        Ok(results)
    }

    /// Deletes `entries` and their records in one `dead_purge.lua` call;
    /// how many the set held.
    pub(super) async fn purge_entries(&self, entries: &[&str]) -> Result<u64, QueueError> {
        if entries.is_empty() {
            return Ok(0);
        }
        let mut inv = self.scripts.dead_purge.prepare_invoke();
        inv.key(self.keys.dead()).arg(self.keys.prefix());
        for entry in entries {
            inv.arg(*entry);
        }
        let mut conn = self.conn.clone();
        inv.invoke_async(&mut conn)
            .await
            .map_err(redis_error("dead_purge"))
    }

    /// The age cutoff of `filter` in Redis server ms (the clock the
    /// dead-letter set is scored by), if it has one.
    async fn cutoff_ms(&self, filter: &DeadFilter) -> Result<Option<u64>, QueueError> {
        let Some(age) = filter.older_than else {
            return Ok(None);
        };
        let mut conn = self.conn.clone();
        let (secs, micros): (u64, u64) = redis::cmd("TIME")
            .query_async(&mut conn)
            .await
            .map_err(redis_error("dead_letters_time"))?;
        let now = secs.saturating_mul(1_000).saturating_add(micros / 1_000);
        let age = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
        Ok(Some(now.saturating_sub(age)))
    }

    /// Up to `n` entries of the dead-letter set past `after` in `order`
    /// (no newer than `max_score` when given), with their scores, and
    /// whether the set may hold more. Entries of one score are ordered by
    /// name, as Redis orders them, so a cursor inside a run of equal
    /// scores resumes where it stopped.
    async fn dead_batch(
        &self,
        order: Order,
        after: Option<&DeadCursor>,
        max_score: Option<u64>,
        n: usize,
    ) -> Result<(Vec<(String, u64)>, bool), QueueError> {
        let mut conn = self.conn.clone();
        let max = max_score.map_or_else(|| "+inf".to_owned(), |m| m.to_string());
        let mut offset = 0;
        loop {
            let mut cmd = match order {
                Order::OldestFirst => {
                    let mut c = redis::cmd("ZRANGEBYSCORE");
                    c.arg(self.keys.dead())
                        .arg(after.map_or_else(|| "-inf".to_owned(), |a| a.score.to_string()))
                        .arg(&max);
                    c
                }
                Order::NewestFirst => {
                    let mut c = redis::cmd("ZREVRANGEBYSCORE");
                    c.arg(self.keys.dead())
                        .arg(after.map_or_else(|| max.clone(), |a| a.score.to_string()))
                        .arg("-inf");
                    c
                }
            };
            cmd.arg("WITHSCORES").arg("LIMIT").arg(offset).arg(n);
            let raw: Vec<(String, f64)> = cmd
                .query_async(&mut conn)
                .await
                .map_err(redis_error("dead_letters"))?;
            let full = raw.len() == n;
            let fetched = raw.len();
            let kept: Vec<(String, u64)> = raw
                .into_iter()
                .map(|(entry, score)| (entry, score_ms(score)))
                .filter(|(entry, score)| {
                    after.is_none_or(|a| match order {
                        Order::OldestFirst => (*score, entry) > (a.score, &a.entry),
                        Order::NewestFirst => (*score, entry) < (a.score, &a.entry),
                    })
                })
                .collect();
            // A whole batch of entries at the cursor's score seen already:
            // look further along that score.
            if !kept.is_empty() || !full {
                return Ok((kept, full));
            }
            offset += fetched;
        }
    }

    /// The letters of `entries` whose records are kept, with their
    /// scores, in one pipeline.
    async fn dead_records(
        &self,
        entries: Vec<(String, u64)>,
    ) -> Result<Vec<(DeadLetter, u64)>, QueueError> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (entry, _) in &entries {
            pipe.hgetall(self.keys.dead_record(entry));
        }
        let mut conn = self.conn.clone();
        let records: Vec<Value> = pipe
            .query_async(&mut conn)
            .await
            .map_err(redis_error("dead_letters"))?;
        Ok(entries
            .into_iter()
            .zip(records)
            .filter_map(|((entry, score), record)| {
                // A record of another type (a hand edit) reads as missing.
                let record: HashMap<String, String> =
                    redis::from_redis_value(record).unwrap_or_default();
                (!record.is_empty()).then(|| (dead_letter(entry, &record), score))
            })
            .collect())
    }
}

/// A dead letter's request, as `dead_retry.lua` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Retry {
    pub(super) entry: String,
    pub(super) key: EntityKey,
    pub(super) trigger: Option<Trigger>,
    pub(super) request: Request,
}

/// What `dead_retry.lua` did with one letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum LetterRetry {
    Requested(EnqueueOutcome),
    /// No longer kept.
    Gone,
    /// The letter's record, or its entity's job record, holds another
    /// type (`key`): left as it is, and counted in
    /// `compactor_queue_wrong_type_keys_total`.
    Skipped {
        key: String,
    },
}

/// The request that retries `letter`: a branch summary's job as such (its
/// member names a leaf, not an entity), else a compaction of the entity
/// its member names, with the trigger it had (a manual one when its
/// payload is unusable).
pub(super) fn retry_request(letter: &DeadLetter) -> Result<Retry, QueueError> {
    let payload = letter.decoded_payload();
    if let Some(p) = &payload {
        if let JobKind::SummarizeBranch { leaf, branch_point } = p.job {
            return Ok(Retry {
                entry: letter.entry.clone(),
                key: p.key.clone(),
                trigger: None,
                request: Request::branch_summary(&p.key, leaf, branch_point),
            });
        }
    }
    let key: EntityKey = letter.member.parse().map_err(|e| QueueError::Protocol {
        op: "retry_dead",
        detail: format!("dead letter {:?} names no valid entity: {e}", letter.entry),
    })?;
    let trigger = payload.map_or(Trigger::Manual { instructions: None }, |p| p.trigger);
    Ok(Retry {
        entry: letter.entry.clone(),
        request: Request::compaction(&key, trigger.clone())?,
        key,
        trigger: Some(trigger),
    })
}

/// A set score (ms, a float in Redis' reply) as whole ms.
fn score_ms(score: f64) -> u64 {
    if score.is_finite() && score > 0.0 {
        // Scores are server ms: integers far below 2^53.
        score as u64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_the_kinds_of_the_dead_letter_metric() {
        assert_eq!(
            reason_kind("gave up after 3 attempts: llm: 503"),
            "exhausted"
        );
        assert_eq!(reason_kind("stalled: the lease expired 3 times"), "stalled");
        assert_eq!(reason_kind("cancelled"), "cancelled");
        assert_eq!(reason_kind("cancelled: by an operator"), "cancelled");
        assert_eq!(reason_kind("unknown workstream chat/7f3c"), "permanent");
        assert_eq!(
            reason_kind("payload: expected value at line 1"),
            "permanent"
        );
        assert_eq!(reason_kind("stalledness"), "permanent");
        assert_eq!(reason_kind(""), "permanent");
    }

    #[test]
    fn a_reason_token_matches_its_kind_or_the_first_word() {
        let r = |s: &str| DeadReason::parse(s).unwrap();
        assert!(r("exhausted").matches("gave up after 3 attempts: llm: 503"));
        assert!(r("permanent").matches("context length exceeded"));
        assert!(!r("permanent").matches("stalled: the lease expired 3 times"));
        assert!(r("stalled").matches("stalled: the lease expired 3 times"));
        // A kind this build does not know, by the word it starts with.
        assert!(r("revoked").matches("revoked: by policy"));
        assert!(!r("exhausted").matches("stalled: the lease expired 3 times"));
    }

    #[test]
    fn reason_tokens_parse() {
        for bad in ["", "Exhausted", "gave up", "a*", "1x", &"x".repeat(33)] {
            assert!(DeadReason::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            DeadReason::parse("cancelled").unwrap().as_str(),
            "cancelled"
        );
    }

    #[test]
    fn entries_domains_and_cursors_parse() {
        assert!(DeadFilter::parse_entry("compact:chat:7f3c|12").is_ok());
        for bad in [
            "compact:chat:7f3c",
            "|12",
            "compact:chat:7f3c|x",
            "a|",
            "compact:chat:7f 3c|1",
            "compact:chat:7f3c|12345678901234567890",
        ] {
            assert!(DeadFilter::parse_entry(bad).is_err(), "{bad:?}");
        }
        assert!(DeadFilter::parse_domain("chat").is_ok());
        assert!(DeadFilter::parse_domain("Chat").is_err());
        let cursor = DeadCursor::parse("1700000000000:compact:chat:7f3c|12").unwrap();
        assert_eq!(cursor.to_string(), "1700000000000:compact:chat:7f3c|12");
        assert!(DeadCursor::parse("x:compact:chat:7f3c|12").is_err());
        assert!(DeadCursor::parse("12").is_err());
    }

    #[test]
    fn a_member_names_its_domain() {
        assert_eq!(member_domain("compact:chat:7f3c"), "chat");
        assert_eq!(member_domain("branch:support:t-1:42"), "support");
        assert_eq!(member_domain("junk"), "");
    }

    #[test]
    fn a_filter_narrows_by_every_field() {
        let letter = DeadLetter {
            entry: "compact:chat:7f3c|12".into(),
            member: "compact:chat:7f3c".into(),
            job_id: 12,
            attempts: 3,
            stalls: 0,
            reason: "gave up after 3 attempts: llm: 503".into(),
            failed_at_ms: 1_000,
            payload: String::new(),
        };
        assert!(DeadFilter::default().is_empty());
        assert!(DeadFilter::default().matches(&letter, None));
        let by_reason = |r: &str| DeadFilter {
            reason: Some(DeadReason::parse(r).unwrap()),
            ..DeadFilter::default()
        };
        assert!(by_reason("exhausted").matches(&letter, None));
        assert!(!by_reason("stalled").matches(&letter, None));
        let by_domain = |d: &str| DeadFilter {
            domain: Some(d.to_owned()),
            ..DeadFilter::default()
        };
        assert!(by_domain("chat").matches(&letter, None));
        assert!(!by_domain("support").matches(&letter, None));
        let old = DeadFilter {
            older_than: Some(Duration::from_secs(1)),
            ..DeadFilter::default()
        };
        assert!(old.matches(&letter, Some(1_000)));
        assert!(!old.matches(&letter, Some(999)));
        let one = DeadFilter {
            entry: Some("compact:chat:7f3c|13".into()),
            ..DeadFilter::default()
        };
        assert!(!one.is_empty());
        assert!(!one.matches(&letter, None));
    }

    fn letter(member: &str, payload: &str) -> DeadLetter {
        DeadLetter {
            entry: format!("{member}|12"),
            member: member.into(),
            job_id: 12,
            attempts: 1,
            stalls: 0,
            reason: "x".into(),
            failed_at_ms: 1,
            payload: payload.into(),
        }
    }

    #[test]
    fn a_retry_keeps_the_trigger_unless_the_payload_is_unusable() {
        use compactor_shared::payload::Payload;
        let key = EntityKey::parse("chat", "7f3c").unwrap();
        let payload = Payload::new(key.clone(), Trigger::FollowUp)
            .unwrap()
            .encode();
        let retry = retry_request(&letter("compact:chat:7f3c", &payload)).unwrap();
        assert_eq!(retry.trigger, Some(Trigger::FollowUp));
        assert_eq!(retry.key, key);
        assert_eq!(
            retry.request,
            Request::compaction(&key, Trigger::FollowUp).unwrap()
        );
        let manual = Some(Trigger::Manual { instructions: None });
        let unusable = retry_request(&letter("compact:chat:7f3c", "{not json")).unwrap();
        assert_eq!(unusable.trigger, manual);
        assert!(retry_request(&letter("compact:chat", "{not json")).is_err());
    }
}
