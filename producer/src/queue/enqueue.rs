//! Requesting compactions: the step app code takes. One script call per
//! entity decides, by the state of the entity's job, whether the request
//! adds a job, joins the waiting one, or is remembered as the follow-up of
//! the running one (the table in the module docs of `queue`). Many
//! requests go in one round trip, [`ENQUEUE_BATCH`] to a script call.

use compactor_shared::payload::{Payload, Trigger};
use compactor_shared::{EntityKey, MessageId};
use serde::Serialize;

use super::call::{is_missing, Call};
use super::convert::parse_id;
use super::error::{redis_error, QueueError};
use super::handle::Queue;
use super::keys::Keys;
use super::lane::Lane;
use crate::events::catalogue::EnqueueResult;
use crate::events::{CompactionRequested, EnqueueFailed, InternalEvent};

/// Most requests one `enqueue_many` script call decides: a batch is one
/// call, paying the call's own work once, yet short enough (about 20 µs a
/// request) that it never holds Redis for long; a larger batch is sent as
/// several calls in one pipelined round trip.
pub const ENQUEUE_BATCH: usize = 500;

/// What a compaction request did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum EnqueueOutcome {
    /// A new job was added.
    Added { job_id: u64 },
    /// A job for the entity was waiting; the request joined it.
    Coalesced { job_id: u64 },
    /// A job for the entity is running; one follow-up will run after it.
    /// Serialized `followup`, the word of the HTTP API and the metrics.
    #[serde(rename = "followup")]
    FollowUpRecorded { job_id: u64 },
}

impl EnqueueOutcome {
    /// The `outcome` label of `compactor_enqueue_total`.
    pub fn result(&self) -> EnqueueResult {
        match self {
            EnqueueOutcome::Added { .. } => EnqueueResult::Added,
            EnqueueOutcome::Coalesced { .. } => EnqueueResult::Coalesced,
            EnqueueOutcome::FollowUpRecorded { .. } => EnqueueResult::FollowUp,
        }
    }

    /// Bounded label for metrics.
    pub fn label(&self) -> &'static str {
        self.result().as_str()
    }
}

impl Queue {
    /// Requests a compaction of `key`, in one round trip.
    pub async fn request_compaction(
        &self,
        key: &EntityKey,
        trigger: Trigger,
    ) -> Result<EnqueueOutcome, QueueError> {
        let result = self.enqueue_one(key, trigger).await;
        self.count_enqueue(&result);
        result
    }

    /// Requests compactions of many entities in one round trip, decided in
    /// order as [`Queue::request_compaction`] decides each (a later request
    /// of an entity meets the job an earlier one added). Outcomes are in
    /// request order. A request refused (a queue key of the wrong type)
    /// fails the call; the requests before it in its batch of
    /// [`ENQUEUE_BATCH`], and the batches before, stand.
    pub async fn enqueue_many(
        &self,
        requests: &[(EntityKey, Trigger)],
    ) -> Result<Vec<EnqueueOutcome>, QueueError> {
        let result = self.enqueue_many_unrecorded(requests).await;
        match &result {
            Ok(outcomes) => {
                for outcome in outcomes {
                    CompactionRequested {
                        queue: self.config.name.as_str(),
                        result: outcome.result(),
                        requests: 1,
                    }
                    .emit();
                }
            }
            Err(error) => EnqueueFailed {
                queue: self.config.name.as_str(),
                requests: requests.len() as u64,
                error,
            }
            .emit(),
        }
        result
    }

    /// Requests a `summarize_branch` job for the branch of `key` the head
    /// left (`branch_point` exclusive to the abandoned `leaf`), in one
    /// round trip. The same script as a compaction request, under the
    /// member [`Payload::member`] names (`branch:{domain}:{entity}:{leaf}`):
    /// requests for one abandoned leaf join one job, and a request while it
    /// runs records one follow-up (the same payload: the job is idempotent,
    /// a summary is stored once per leaf). Normal lane.
    pub async fn request_branch_summary(
        &self,
        key: &EntityKey,
        leaf: MessageId,
        branch_point: MessageId,
    ) -> Result<EnqueueOutcome, QueueError> {
        let inv = self.request_invocation(&Request::branch_summary(key, leaf, branch_point));
        let mut conn = self.conn.clone();
        let reply: Result<Vec<String>, _> = inv.invoke_async(&mut conn).await;
        let result = reply
            .map_err(redis_error("enqueue_branch"))
            .and_then(|r| enqueue_outcome(&r));
        self.count_enqueue(&result);
        result
    }

    fn enqueue_invocation(
        &self,
        key: &EntityKey,
        trigger: Trigger,
    ) -> Result<Call<'_>, QueueError> {
        Ok(self.request_invocation(&Request::compaction(key, trigger)?))
    }

    fn request_invocation(&self, request: &Request) -> Call<'_> {
        let mut inv = self.scripts.enqueue.prepare_invoke();
        inv.key(self.keys.job_of_member(&request.member))
            .key(self.keys.waiting())
            .key(self.keys.seq())
            .key(self.keys.running())
            .key(self.keys.urgent());
        request.push_args(&mut inv);
        inv.arg(self.keys.wake_channel()).arg(self.keys.prefix());
        inv
    }

    async fn enqueue_one(
        &self,
        key: &EntityKey,
        trigger: Trigger,
    ) -> Result<EnqueueOutcome, QueueError> {
        let inv = self.enqueue_invocation(key, trigger)?;
        let mut conn = self.conn.clone();
        let reply: Vec<String> = inv
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("enqueue"))?;
        enqueue_outcome(&reply)
    }

    pub(super) fn count_enqueue(&self, result: &Result<EnqueueOutcome, QueueError>) {
        let queue = self.config.name.as_str();
        match result {
            Ok(outcome) => CompactionRequested {
                queue,
                result: outcome.result(),
                requests: 1,
            }
            .emit(),
            Err(error) => EnqueueFailed {
                queue,
                requests: 1,
                error,
            }
            .emit(),
        }
    }

    async fn enqueue_many_unrecorded(
        &self,
        requests: &[(EntityKey, Trigger)],
    ) -> Result<Vec<EnqueueOutcome>, QueueError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for batch in requests.chunks(ENQUEUE_BATCH) {
            let mut inv = self.scripts.enqueue_many.prepare_invoke();
            inv.key(self.keys.waiting())
                .key(self.keys.seq())
                .key(self.keys.running())
                .key(self.keys.urgent())
                .arg(self.keys.wake_channel())
                .arg(self.keys.prefix());
            for (key, trigger) in batch {
                Request::compaction(key, trigger.clone())?.push_args(&mut inv);
            }
            inv.add_to(&mut pipe);
        }
        let mut conn = self.conn.clone();
        let batches: Vec<Vec<Vec<String>>> = match pipe.query_async(&mut conn).await {
            Ok(r) => r,
            // The server lost its code (restart, FUNCTION or SCRIPT FLUSH):
            // load and retry once. Enqueue is idempotent per entity, so a
            // partial first run cannot add a job twice.
            Err(e) if is_missing(&e) => {
                self.scripts
                    .enqueue_many
                    .load(&mut conn)
                    .await
                    .map_err(redis_error("enqueue_many: loading the script"))?;
                pipe.query_async(&mut conn)
                    .await
                    .map_err(redis_error("enqueue_many"))?
            }
            Err(source) => return Err(redis_error("enqueue_many")(source)),
        };
        let replies: Vec<Vec<String>> = batches.into_iter().flatten().collect();
        if replies.len() != requests.len() {
            return Err(QueueError::Protocol {
                op: "enqueue_many",
                detail: format!("{} outcomes for {} requests", replies.len(), requests.len()),
            });
        }
        replies.iter().map(|r| enqueue_outcome(r)).collect()
    }
}

/// What one request asks of `request_job` (in the prelude): the arguments
/// `enqueue.lua` takes, and the dead-letter retry too, so both request a
/// job alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Request {
    /// The member naming the job (`Payload::member`).
    pub(super) member: String,
    /// The payload of a new job.
    pub(super) payload: String,
    /// The payload of the follow-up recorded while a job runs: the request
    /// itself when manual (its instructions), else a follow-up trigger.
    pub(super) followup: String,
    pub(super) manual: bool,
    pub(super) lane: Lane,
}

impl Request {
    /// The request's arguments to a script, in the order every caller of
    /// `request_job` takes them: member, payload of a new job, payload of
    /// a follow-up, "1" when manual, lane.
    pub(super) fn push_args(&self, inv: &mut Call<'_>) {
        inv.arg(&self.member)
            .arg(&self.payload)
            .arg(&self.followup)
            .arg(if self.manual { "1" } else { "0" })
            .arg(self.lane.as_str());
    }

    /// A compaction of `key` with `trigger`.
    pub(super) fn compaction(key: &EntityKey, trigger: Trigger) -> Result<Request, QueueError> {
        let manual = trigger.is_manual();
        let lane = Lane::of(&trigger);
        let followup_trigger = if manual {
            trigger.clone()
        } else {
            Trigger::FollowUp
        };
        Ok(Request {
            member: Keys::member(key),
            payload: Payload::new(key.clone(), trigger)?.encode(),
            followup: Payload::new(key.clone(), followup_trigger)?.encode(),
            manual,
            lane,
        })
    }

    /// A `summarize_branch` job (see [`Queue::request_branch_summary`]).
    pub(super) fn branch_summary(
        key: &EntityKey,
        leaf: MessageId,
        branch_point: MessageId,
    ) -> Request {
        let payload = Payload::summarize_branch(key.clone(), leaf, branch_point);
        let encoded = payload.encode();
        Request {
            member: payload.member(),
            payload: encoded.clone(),
            followup: encoded,
            manual: false,
            lane: Lane::Normal,
        }
    }
}

/// Reads `enqueue.lua`'s reply: `{outcome, job_id}`.
pub(super) fn enqueue_outcome(reply: &[String]) -> Result<EnqueueOutcome, QueueError> {
    let job_id = parse_id(reply.get(1), "enqueue")?;
    match reply.first().map(String::as_str) {
        Some("added") => Ok(EnqueueOutcome::Added { job_id }),
        Some("coalesced") => Ok(EnqueueOutcome::Coalesced { job_id }),
        Some("followup") => Ok(EnqueueOutcome::FollowUpRecorded { job_id }),
        other => Err(QueueError::Protocol {
            op: "enqueue",
            detail: format!("unknown outcome {other:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|p| (*p).to_owned()).collect()
    }

    #[test]
    fn each_enqueue_reply_reads_as_its_outcome() {
        for (word, outcome) in [
            ("added", EnqueueOutcome::Added { job_id: 7 }),
            ("coalesced", EnqueueOutcome::Coalesced { job_id: 7 }),
            ("followup", EnqueueOutcome::FollowUpRecorded { job_id: 7 }),
        ] {
            assert_eq!(enqueue_outcome(&reply(&[word, "7"])).unwrap(), outcome);
            // The label of the metrics is the word of the script.
            assert_eq!(outcome.label(), word);
        }
        assert!(enqueue_outcome(&reply(&["added"])).is_err());
        assert!(enqueue_outcome(&reply(&["queued", "7"])).is_err());
    }

    #[test]
    fn a_recorded_follow_up_is_serialized_as_followup() {
        let json = serde_json::to_value(EnqueueOutcome::FollowUpRecorded { job_id: 3 }).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"outcome": "followup", "job_id": 3})
        );
    }
}
