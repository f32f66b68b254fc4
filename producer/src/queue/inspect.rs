//! Read-only views for operators and the admin API: the state of one
//! entity's job and the number of jobs in each state. Plain reads, no
//! script: they change nothing, and a reply this build does not
//! understand is an error rather than a guess.

use compactor_shared::EntityKey;
use serde::Serialize;

use super::convert::parse_id;
use super::error::{is_wrong_type, redis_error, wrong_type, QueueError, WrongTypeKey};
use super::handle::Queue;

/// State of an entity's job, as seen by inspection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum JobState {
    Waiting {
        job_id: u64,
    },
    Running {
        job_id: u64,
        attempt: u32,
        followup_pending: bool,
    },
    Done {
        job_id: u64,
    },
    /// The last job of the entity was dead-lettered.
    Dead {
        job_id: u64,
    },
}

/// How many jobs are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueCounts {
    /// Waiting in either lane or parked (their domain is paused):
    /// `waiting_urgent + waiting_normal + waiting_parked`.
    pub waiting: u64,
    /// Of `waiting`, those of the urgent lane (manual and reactive
    /// requests, claimed first).
    pub waiting_urgent: u64,
    /// Of `waiting`, those of the normal lane (automatic requests).
    pub waiting_normal: u64,
    /// Of `waiting`, those parked because their domain is paused (each
    /// keeps its lane for when the domain resumes).
    pub waiting_parked: u64,
    pub running: u64,
    pub done: u64,
    pub dead: u64,
}

impl Queue {
    /// The state of `key`'s job, if there is one.
    pub async fn job_state(&self, key: &EntityKey) -> Result<Option<JobState>, QueueError> {
        self.record_state(self.keys.job(key)).await
    }

    /// The state of the `summarize_branch` job of `key`'s branch left at
    /// `leaf`, if there is one.
    pub async fn branch_job_state(
        &self,
        key: &EntityKey,
        leaf: compactor_shared::MessageId,
    ) -> Result<Option<JobState>, QueueError> {
        let member =
            compactor_shared::payload::Payload::summarize_branch(key.clone(), leaf, leaf).member();
        self.record_state(self.keys.job_of_member(&member)).await
    }

    /// The state of the job whose record is `record`.
    async fn record_state(&self, record: String) -> Result<Option<JobState>, QueueError> {
        let mut conn = self.conn.clone();
        let fields: Result<Vec<Option<String>>, _> = redis::cmd("HMGET")
            .arg(&record)
            .arg(&["state", "job_id", "attempts", "followup"])
            .query_async(&mut conn)
            .await;
        match fields {
            Ok(fields) => job_state(&fields),
            Err(e) => Err(self
                .named_refusal("job_state", e, &[(record, "hash")])
                .await),
        }
    }

    /// Job counts by state, and of the waiting ones by lane.
    pub async fn counts(&self) -> Result<QueueCounts, QueueError> {
        let mut conn = self.conn.clone();
        let sets = [
            self.keys.urgent(),
            self.keys.waiting(),
            self.keys.running(),
            self.keys.done(),
            self.keys.dead(),
        ];
        let mut pipe = redis::pipe();
        for set in &sets {
            pipe.zcard(set);
        }
        let counted: Result<(u64, u64, u64, u64, u64), _> = pipe.query_async(&mut conn).await;
        let (urgent, normal, running, done, dead) = match counted {
            Ok(counts) => counts,
            Err(e) => {
                let sets = sets.map(|set| (set, "zset"));
                return Err(self.named_refusal("counts", e, &sets).await);
            }
        };
        let parked = self.parked_count().await?;
        Ok(QueueCounts {
            waiting: urgent + normal + parked,
            waiting_urgent: urgent,
            waiting_normal: normal,
            waiting_parked: parked,
            running,
            done,
            dead,
        })
    }
}

impl Queue {
    /// The error of a plain command's failure. Redis' own `WRONGTYPE`
    /// names no key, so on one the keys the command touched (`keys`, each
    /// with the type the queue keeps there) are looked at, and the first
    /// holding another type is named: the error and the metric say which
    /// key to move aside.
    pub(super) async fn named_refusal(
        &self,
        op: &'static str,
        source: redis::RedisError,
        keys: &[(String, &'static str)],
    ) -> QueueError {
        if !is_wrong_type(&source) {
            return redis_error(op)(source);
        }
        let mut conn = self.conn.clone();
        let mut pipe = redis::pipe();
        for (key, _) in keys {
            pipe.cmd("TYPE").arg(key);
        }
        let found: Vec<String> = pipe.query_async(&mut conn).await.unwrap_or_default();
        let foreign = keys
            .iter()
            .zip(found)
            .find(|((_, want), found)| found != "none" && found != want);
        wrong_type(
            op,
            match foreign {
                Some(((key, want), found)) => WrongTypeKey {
                    key: Some(key.clone()),
                    found: Some(found),
                    expected: Some((*want).to_owned()),
                },
                // Put right meanwhile.
                None => WrongTypeKey {
                    key: None,
                    found: None,
                    expected: None,
                },
            },
        )
    }
}

/// Reads a job record's `state`, `job_id`, `attempts` and `followup`
/// fields, in that order.
fn job_state(fields: &[Option<String>]) -> Result<Option<JobState>, QueueError> {
    let get = |i: usize| fields.get(i).cloned().flatten();
    let job_id = || parse_id(get(1).as_ref(), "job_state");
    match get(0).as_deref() {
        None => Ok(None),
        Some("waiting") => Ok(Some(JobState::Waiting { job_id: job_id()? })),
        Some("running") => Ok(Some(JobState::Running {
            job_id: job_id()?,
            attempt: get(2).and_then(|a| a.parse().ok()).unwrap_or(0),
            followup_pending: get(3).is_some(),
        })),
        Some("done") => Ok(Some(JobState::Done { job_id: job_id()? })),
        Some("dead") => Ok(Some(JobState::Dead { job_id: job_id()? })),
        Some(other) => Err(QueueError::Protocol {
            op: "job_state",
            detail: format!("unknown state {other:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(values: &[Option<&str>]) -> Vec<Option<String>> {
        values.iter().map(|v| v.map(str::to_owned)).collect()
    }

    #[test]
    fn each_state_of_a_record_reads_as_its_job_state() {
        assert_eq!(job_state(&fields(&[None, None, None, None])).unwrap(), None);
        assert_eq!(
            job_state(&fields(&[Some("waiting"), Some("5"), Some("0"), None])).unwrap(),
            Some(JobState::Waiting { job_id: 5 })
        );
        assert_eq!(
            job_state(&fields(&[
                Some("running"),
                Some("5"),
                Some("2"),
                Some("{}")
            ]))
            .unwrap(),
            Some(JobState::Running {
                job_id: 5,
                attempt: 2,
                followup_pending: true,
            })
        );
        assert_eq!(
            job_state(&fields(&[Some("done"), Some("5"), None, None])).unwrap(),
            Some(JobState::Done { job_id: 5 })
        );
        assert_eq!(
            job_state(&fields(&[Some("dead"), Some("5"), None, None])).unwrap(),
            Some(JobState::Dead { job_id: 5 })
        );
    }

    #[test]
    fn an_unknown_state_or_id_is_an_error() {
        assert!(job_state(&fields(&[Some("paused"), Some("5"), None, None])).is_err());
        assert!(job_state(&fields(&[Some("waiting"), None, None, None])).is_err());
    }
}
