//! The operator's view of single jobs: pages of the jobs in one state
//! (waiting, delayed, running, done, dead) and a job looked up by the id
//! its logs show. One read-only script call each (`scripts/jobs.lua`), so
//! a page is one consistent snapshot and costs one round trip.
//!
//! Pages follow a cursor, a position in the state's sorted set (its score
//! and member), not an offset: jobs claimed or added ahead of it do not
//! shift the pages after it, and a deep page costs what the first does.
//! Waiting and delayed jobs are read from the urgent lane, then the normal
//! one, each in the order they will be claimed; running jobs by lease
//! deadline (a renewal moves a job later, so a job may show twice, never
//! not at all); done and dead jobs newest first.
//!
//! A job is found by id through the index `Keys::job_ids` (job id →
//! member) the scripts keep where jobs are added and their done and dead
//! entries trimmed, never by a scan. A job added before this index existed
//! is not found by id (it is still listed).

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use compactor_shared::payload::Payload;
use compactor_shared::EntityKey;
use serde::{Deserialize, Serialize};

use super::call::Call;
use super::error::{redis_error, QueueError};
use super::handle::Queue;

/// Most jobs in one page.
pub const MAX_JOBS_PAGE: usize = 500;

/// The form of a cursor, as `scripts/jobs.lua` writes it: the set
/// (`u`rgent, `n`ormal, `r`unning, `c`ompleted, `d`ead), the score (whole
/// milliseconds, or a waiting score), the member (printable ASCII).
/// [`JobCursor::parse`] accepts exactly these; the API documents it.
pub const JOB_CURSOR_PATTERN: &str = "^[urncd]:[0-9]{1,20}:[!-~]{1,400}$";

/// The score of a waiting job is the time it may run in ms times this
/// (`SCORE_SCALE` in `scripts/prelude.lua`).
const SCORE_SCALE: u64 = 1024;

/// Which jobs a page lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum JobView {
    /// Waiting in either lane, due now: claimed next.
    Waiting,
    /// Waiting with a time to run in the future (a retry's back-off).
    Delayed,
    /// Leased by a worker.
    Running,
    /// Finished (kept within `queue.done_max_count` and `_age`).
    Done,
    /// Dead-lettered (kept within `queue.dead_max_count` and `_age`).
    Dead,
}

impl JobView {
    pub const ALL: [JobView; 5] = [
        JobView::Waiting,
        JobView::Delayed,
        JobView::Running,
        JobView::Done,
        JobView::Dead,
    ];

    /// The word the script and the API use.
    pub fn as_str(self) -> &'static str {
        match self {
            JobView::Waiting => "waiting",
            JobView::Delayed => "delayed",
            JobView::Running => "running",
            JobView::Done => "done",
            JobView::Dead => "dead",
        }
    }
}

impl fmt::Display for JobView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not a [`JobView`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job state {0:?}: use waiting, delayed, running, done or dead")]
pub struct UnknownJobView(String);

impl FromStr for JobView {
    type Err = UnknownJobView;
    fn from_str(s: &str) -> Result<JobView, UnknownJobView> {
        JobView::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownJobView(s.chars().take(40).collect()))
    }
}

/// Where a page of jobs starts: the position of the last job of the
/// previous page, as [`JobPage::next_cursor`] gave it. Opaque to callers;
/// parsed so a malformed one is refused before it reaches Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCursor(String);

impl JobCursor {
    /// `<set>:<score>:<member>`, as `scripts/jobs.lua` writes it.
    pub fn parse(raw: &str) -> Result<JobCursor, QueueError> {
        let invalid = || QueueError::InvalidCursor {
            cursor: raw.chars().take(80).collect(),
        };
        let mut parts = raw.splitn(3, ':');
        let (Some(set), Some(score), Some(member)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(invalid());
        };
        let known_set = matches!(set, "u" | "n" | "r" | "c" | "d");
        let score_ok = (1..=20).contains(&score.len()) && score.bytes().all(|b| b.is_ascii_digit());
        let member_ok =
            (1..=400).contains(&member.len()) && member.bytes().all(|b| (b'!'..=b'~').contains(&b));
        if !known_set || !score_ok || !member_ok {
            return Err(invalid());
        }
        Ok(JobCursor(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One job as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobSummary {
    /// The id its logs and spans show.
    pub job_id: u64,
    pub state: JobView,
    /// The queue member: `compact:{domain}:{entity_id}`, or
    /// `branch:{domain}:{entity_id}:{leaf}` for a branch summary.
    pub member: String,
    /// The workstream's domain and entity id (absent when the payload
    /// cannot be read: it may be why the job died).
    pub domain: Option<String>,
    pub entity_id: Option<String>,
    /// `compact` or `summarize_branch`.
    pub kind: Option<String>,
    /// What asked for it: `auto`, `manual`, `follow_up` or `reactive`.
    pub trigger: Option<String>,
    /// `urgent` or `normal` (the lane it waits, or waited, in).
    pub lane: String,
    /// Claims so far (a cancelled or handed-back attempt is given back).
    pub attempts: u32,
    /// Leases that expired (its worker died).
    pub stalls: u32,
    /// When it was added (server ms).
    pub enqueued_at_ms: Option<u64>,
    /// Since it was added (ms), by the server clock.
    pub age_ms: Option<u64>,
    /// Waiting and delayed jobs: when it may run (server ms).
    pub due_at_ms: Option<u64>,
    /// Running jobs: when the current attempt started.
    pub started_at_ms: Option<u64>,
    /// Done and dead jobs: when they finished or died.
    pub finished_at_ms: Option<u64>,
    /// Why the last attempt failed (a dead job: why it died).
    pub last_error: Option<String>,
    /// Running jobs: the worker holding the lease (its registry id).
    pub worker: Option<String>,
    /// Running jobs: when the lease runs out unless renewed (server ms).
    pub lease_deadline_ms: Option<u64>,
    /// Running jobs: a request came in meanwhile; one follow-up will run.
    pub followup_pending: bool,
}

/// One page of jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobPage {
    pub jobs: Vec<JobSummary>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<String>,
}

impl Queue {
    /// Up to `limit` (1–[`MAX_JOBS_PAGE`]) jobs in `state`, after `cursor`.
    pub async fn list_jobs(
        &self,
        state: JobView,
        limit: usize,
        cursor: Option<&JobCursor>,
    ) -> Result<JobPage, QueueError> {
        if limit == 0 || limit > MAX_JOBS_PAGE {
            return Err(QueueError::InvalidLimit {
                limit,
                max: MAX_JOBS_PAGE,
            });
        }
        let (now, next, jobs) = self
            .jobs_script()
            .arg("list")
            .arg(state.as_str())
            .arg(limit)
            .arg(cursor.map_or("", JobCursor::as_str))
            .invoke_async::<(u64, String, Vec<Vec<String>>)>(&mut self.conn.clone())
            .await
            .map_err(redis_error("list_jobs"))?;
        Ok(JobPage {
            jobs: jobs.iter().map(|j| summary(now, j)).collect(),
            next_cursor: (!next.is_empty()).then_some(next),
        })
    }

    /// The job with id `job_id`, in whatever state it is (a done job while
    /// its entry is kept), or `None`.
    pub async fn job(&self, job_id: u64) -> Result<Option<JobSummary>, QueueError> {
        let (now, _, jobs) = self
            .jobs_script()
            .arg("get")
            .arg(job_id)
            .invoke_async::<(u64, String, Vec<Vec<String>>)>(&mut self.conn.clone())
            .await
            .map_err(redis_error("job"))?;
        Ok(jobs.first().map(|j| summary(now, j)))
    }

    fn jobs_script(&self) -> Call<'_> {
        let mut inv = self.scripts.jobs.prepare_invoke();
        inv.key(self.keys.urgent())
            .key(self.keys.waiting())
            .key(self.keys.running())
            .key(self.keys.done())
            .key(self.keys.dead())
            .key(self.keys.job_ids())
            .arg(self.keys.prefix());
        inv
    }
}

/// A job from the script's field, value pairs. Fields a hand-edited record
/// lacks read as absent or zero.
fn summary(now: u64, pairs: &[String]) -> JobSummary {
    let f: HashMap<&str, &str> = pairs
        .chunks_exact(2)
        .map(|p| (p[0].as_str(), p[1].as_str()))
        .collect();
    let num = |k: &str| f.get(k).and_then(|v| v.parse::<u64>().ok());
    let count = |k: &str| num(k).and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    let state = f
        .get("view")
        .and_then(|v| v.parse().ok())
        .unwrap_or(JobView::Waiting);
    let member = f.get("member").copied().unwrap_or_default().to_owned();
    let payload = f
        .get("payload")
        .and_then(|p| Payload::decode(p.as_bytes()).ok());
    let key = payload
        .as_ref()
        .map(|p| p.key.clone())
        .or_else(|| member.parse::<EntityKey>().ok());
    let score = f
        .get("score")
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        // Scores are whole numbers far below 2^53: exact in an f64.
        .map(|s| s as u64);
    let enqueued_at_ms = num("enqueued_at");
    let (due_at_ms, lease_deadline_ms, finished_at_ms) = match state {
        JobView::Waiting | JobView::Delayed => (score.map(|s| s / SCORE_SCALE), None, None),
        JobView::Running => (None, num("deadline").or(score), None),
        JobView::Done => (None, None, num("finished_at").or(score)),
        JobView::Dead => (None, None, num("failed_at").or(score)),
    };
    let running = state == JobView::Running;
    JobSummary {
        job_id: num("job_id").unwrap_or(0),
        state,
        domain: key.as_ref().map(|k| k.domain().to_owned()),
        entity_id: key.as_ref().map(|k| k.entity_id().to_owned()),
        kind: payload.as_ref().map(|p| p.job.label().to_owned()),
        trigger: payload.as_ref().map(|p| p.trigger.label().to_owned()),
        lane: match f.get("lane") {
            Some(&"urgent") => "urgent",
            _ => "normal",
        }
        .to_owned(),
        attempts: count("attempts"),
        stalls: count("stalls"),
        enqueued_at_ms,
        age_ms: enqueued_at_ms.map(|at| now.saturating_sub(at)),
        due_at_ms,
        started_at_ms: num("started_at").filter(|_| running),
        finished_at_ms,
        last_error: f
            .get("last_error")
            .filter(|e| !e.is_empty())
            .map(|e| (*e).to_owned()),
        worker: f.get("worker").filter(|_| running).map(|w| (*w).to_owned()),
        lease_deadline_ms,
        followup_pending: running && f.contains_key("followup"),
        member,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(fields: &[(&str, &str)]) -> Vec<String> {
        fields
            .iter()
            .flat_map(|(k, v)| [(*k).to_owned(), (*v).to_owned()])
            .collect()
    }

    #[test]
    fn cursors_are_parsed_before_they_reach_redis() {
        for good in [
            "u:1774600000000000:compact:chat:7f3c",
            "c:17:compact:a:b|12",
        ] {
            assert_eq!(JobCursor::parse(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            "u",
            "x:1:m",
            "u:nan:m",
            "u:inf:m",
            "u:1.5:m",
            "u:-1:m",
            "u:1:",
            "u:one:m",
            "u:1:m\n",
            "u:1:a b",
            &format!("u:1:{}", "m".repeat(401)),
            &format!("u:{}:m", "1".repeat(21)),
        ] {
            assert!(
                matches!(JobCursor::parse(bad), Err(QueueError::InvalidCursor { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn job_views_read_their_own_names_only() {
        for v in JobView::ALL {
            assert_eq!(v.as_str().parse::<JobView>().unwrap(), v);
        }
        assert!("paused".parse::<JobView>().is_err());
    }

    #[test]
    fn a_running_job_reads_its_worker_lease_and_workstream() {
        let key = EntityKey::parse("chat", "7f3c").unwrap();
        let payload = Payload::new(key, compactor_shared::payload::Trigger::Auto)
            .unwrap()
            .encode();
        let job = summary(
            10_000,
            &pairs(&[
                ("state", "running"),
                ("job_id", "12"),
                ("payload", &payload),
                ("attempts", "2"),
                ("enqueued_at", "4000"),
                ("started_at", "9000"),
                ("worker", "w-1"),
                ("deadline", "39000"),
                ("last_error", "llm: 503"),
                ("followup", "{}"),
                ("view", "running"),
                ("member", "compact:chat:7f3c"),
                ("score", "39000"),
            ]),
        );
        assert_eq!(job.job_id, 12);
        assert_eq!(job.state, JobView::Running);
        assert_eq!(job.domain.as_deref(), Some("chat"));
        assert_eq!(job.entity_id.as_deref(), Some("7f3c"));
        assert_eq!(job.kind.as_deref(), Some("compact"));
        assert_eq!(job.trigger.as_deref(), Some("auto"));
        assert_eq!(job.lane, "normal");
        assert_eq!(job.attempts, 2);
        assert_eq!(job.age_ms, Some(6_000));
        assert_eq!(job.started_at_ms, Some(9_000));
        assert_eq!(job.worker.as_deref(), Some("w-1"));
        assert_eq!(job.lease_deadline_ms, Some(39_000));
        assert_eq!(job.last_error.as_deref(), Some("llm: 503"));
        assert!(job.followup_pending);
    }

    #[test]
    fn a_delayed_job_is_due_at_its_score_and_a_bad_payload_still_names_the_entity() {
        let job = summary(
            0,
            &pairs(&[
                ("payload", "{not json"),
                ("lane", "urgent"),
                ("worker", "stale"),
                ("view", "delayed"),
                ("member", "compact:chat:7f3c"),
                ("job_id", "3"),
                ("score", &(5_000 * SCORE_SCALE + 3).to_string()),
            ]),
        );
        assert_eq!(job.state, JobView::Delayed);
        assert_eq!(job.due_at_ms, Some(5_000));
        assert_eq!(job.domain.as_deref(), Some("chat"));
        assert_eq!(job.kind, None);
        assert_eq!(job.lane, "urgent");
        assert_eq!(job.worker, None, "only a running job has a worker");
    }
}
