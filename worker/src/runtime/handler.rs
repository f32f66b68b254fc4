//! What a job handler sees and returns. The runtime owns the lease, the
//! heartbeat, retries and acknowledgement; a handler only does the work and
//! says whether a failure is worth retrying.

use std::future::Future;
use std::time::Duration;

use compactor_producer::queue::payload::JobKind;
use compactor_producer::queue::{ClaimedJob, Trigger};
use compactor_shared::EntityKey;
use tokio_util::sync::CancellationToken;

/// One attempt of a job, as given to the handler.
#[derive(Debug, Clone)]
pub struct Job {
    pub key: EntityKey,
    pub trigger: Trigger,
    /// Which job: a compaction, or a branch summary.
    pub kind: JobKind,
    pub job_id: u64,
    /// 1 on the first attempt.
    pub attempt: u32,
    /// Attempts in all (the retry policy's); `attempt == max_attempts` is
    /// the last chance, when a handler should fall back rather than fail.
    pub max_attempts: u32,
    /// The queue lease of this attempt. Fence the final commit with it: a
    /// commit that presents a token other than the entity's current one
    /// must change nothing (the lease was lost and someone else runs now).
    pub lease_token: String,
    /// When the runtime cancels the attempt (the lock duration after it
    /// started): work that can be cut short (LLM retries) should end before,
    /// leaving time to commit.
    pub deadline: tokio::time::Instant,
    cancel: CancellationToken,
}

impl Job {
    pub(crate) fn from_claim(
        claimed: &ClaimedJob,
        max_attempts: u32,
        deadline: tokio::time::Instant,
        cancel: CancellationToken,
    ) -> Job {
        Job {
            key: claimed.key.clone(),
            trigger: claimed.payload.trigger.clone(),
            kind: claimed.payload.job.clone(),
            job_id: claimed.job_id,
            attempt: claimed.attempt,
            max_attempts,
            lease_token: claimed.lease_token.clone(),
            deadline,
            cancel,
        }
    }

    /// An attempt outside the queue (running a handler inline, in tools or
    /// tests): `lease_token` is the owner the handler's commit is fenced on.
    /// Its deadline is the default lock duration (5 minutes) from now; see
    /// [`Job::with_deadline`].
    pub fn new(
        key: EntityKey,
        trigger: Trigger,
        job_id: u64,
        attempt: u32,
        max_attempts: u32,
        lease_token: impl Into<String>,
    ) -> Job {
        Job {
            key,
            trigger,
            kind: JobKind::Compact,
            job_id,
            attempt,
            max_attempts,
            lease_token: lease_token.into(),
            deadline: tokio::time::Instant::now() + Duration::from_secs(300),
            cancel: CancellationToken::new(),
        }
    }

    /// The same attempt, of another kind of job.
    pub fn with_kind(mut self, kind: JobKind) -> Job {
        self.kind = kind;
        self
    }

    /// The same attempt with another deadline.
    pub fn with_deadline(mut self, deadline: tokio::time::Instant) -> Job {
        self.deadline = deadline;
        self
    }

    /// Whether no retry follows a failure of this attempt.
    pub fn is_last_attempt(&self) -> bool {
        self.attempt >= self.max_attempts
    }

    /// Whether the attempt was cancelled (lease lost, lock duration over,
    /// or handed back at shutdown). The handler's future is dropped then
    /// anyway; this is for work it spawned elsewhere.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Resolves when the attempt is cancelled.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }
}

/// Why an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// Worth another attempt (timeout, 429, 5xx, lost connection). After the
    /// last attempt the job is dead-lettered with this reason.
    #[error("{reason}")]
    Retryable {
        reason: String,
        /// The earliest the dependency said to come back (`Retry-After`).
        retry_after: Option<Duration>,
    },
    /// Will fail the same way every time (bad payload, unknown workstream,
    /// a context-length error chunking cannot fix): dead-lettered at once.
    #[error("{reason}")]
    Permanent { reason: String },
    /// The job did not fail: a service it needs (the database) is down.
    /// Run again after a pause without counting the attempt, however long
    /// the outage — retries never exhaust on someone else's outage, and the
    /// pause keeps the queue from spinning.
    #[error("{reason}")]
    Unavailable {
        reason: String,
        retry_after: Option<Duration>,
    },
}

impl JobError {
    /// A retryable failure. Keep `reason` short and free of message content:
    /// it is logged and stored with the job.
    pub fn retryable(reason: impl Into<String>) -> JobError {
        JobError::Retryable {
            reason: reason.into(),
            retry_after: None,
        }
    }

    /// A failure that no retry can fix.
    pub fn permanent(reason: impl Into<String>) -> JobError {
        JobError::Permanent {
            reason: reason.into(),
        }
    }

    /// A service the job needs is unavailable: try again later, the
    /// attempt not counted.
    pub fn unavailable(reason: impl Into<String>) -> JobError {
        JobError::Unavailable {
            reason: reason.into(),
            retry_after: None,
        }
    }

    /// A retryable failure that must not be retried before `after`.
    pub fn retry_after(reason: impl Into<String>, after: Duration) -> JobError {
        JobError::Retryable {
            reason: reason.into(),
            retry_after: Some(after),
        }
    }
}

/// The work a job does. Implemented by the compaction job, and by simple
/// handlers in tests and in `compactor-queue-probe`.
pub trait JobHandler: Send + Sync + 'static {
    fn run(&self, job: Job) -> impl Future<Output = Result<(), JobError>> + Send;
}
