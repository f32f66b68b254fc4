//! When failed work runs again, every pause from `backon`:
//! - a failed attempt ([`RetryPolicy`]): exponential backoff with jitter,
//!   never sooner than a `Retry-After` the dependency gave, and never more
//!   attempts than configured;
//! - a failed queue step telling how an attempt ended ([`with_retries`]):
//!   short pauses, for as long as the job's lease lasts;
//! - a lost Redis connection ([`reconnect_backoff`]): until it is back.

use std::future::Future;
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder, Retryable};
use compactor_producer::events::catalogue::QueueOp;
use compactor_producer::queue::{FailAction, QueueError};
use tracing::error;

use super::handler::JobError;
use super::Shared;

/// Retry settings. The seed's: 2 attempts in all, backoff from 3 s.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (≥ 1).
    pub max_attempts: u32,
    /// Delay before the second attempt; each later one doubles it.
    #[serde(with = "humantime_serde")]
    pub base_delay: Duration,
    /// Longest backoff delay.
    #[serde(with = "humantime_serde")]
    pub max_delay: Duration,
    /// Add up to one more delay at random, so workers that failed together
    /// do not retry together.
    pub jitter: bool,
    /// Longest `Retry-After` honoured; a longer one is cut to this.
    #[serde(with = "humantime_serde")]
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 2,
            base_delay: Duration::from_secs(3),
            max_delay: Duration::from_secs(300),
            jitter: true,
            max_retry_after: Duration::from_secs(3600),
        }
    }
}

impl RetryPolicy {
    /// What to do after `attempt` (1-based) failed with `error`.
    pub fn decide(&self, attempt: u32, error: &JobError) -> FailAction {
        match error {
            JobError::Permanent { .. } => FailAction::DeadLetter,
            // Not the job's failure: the first backoff step every time.
            JobError::Unavailable { retry_after, .. } => FailAction::Postpone {
                delay: self.delay(1, *retry_after),
            },
            JobError::Retryable { .. } if attempt >= self.max_attempts => FailAction::DeadLetter,
            JobError::Retryable { retry_after, .. } => FailAction::Retry {
                delay: self.delay(attempt, *retry_after),
            },
        }
    }

    /// Delay after failed attempt `attempt` (1-based): the backoff step, or
    /// the dependency's `Retry-After` when that is later.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let mut builder = ExponentialBuilder::new()
            .with_min_delay(self.base_delay)
            .with_max_delay(self.max_delay.max(self.base_delay))
            .with_factor(2.0)
            .without_max_times();
        if self.jitter {
            builder = builder.with_jitter();
        }
        let step = usize::try_from(attempt.saturating_sub(1)).unwrap_or(usize::MAX);
        let backoff = builder.build().nth(step).unwrap_or(self.max_delay);
        match retry_after {
            Some(after) => backoff.max(after.min(self.max_retry_after)),
            None => backoff,
        }
    }
}

/// Runs a queue step, retrying Redis errors (each counted) after 50 ms
/// doubling to 2 s, for at most one lease TTL: past that the lease has
/// expired and recovery re-runs the job, so further tries are pointless.
/// `None` when it never succeeded.
pub(crate) async fn with_retries<T, F, Fut>(shared: &Shared, op: QueueOp, step: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, QueueError>>,
{
    let give_up = Instant::now() + shared.queue.config().lease_ttl;
    step.retry(queue_step_backoff())
        .adjust(|error, delay| {
            shared.count_error(op, error);
            delay.filter(|delay| Instant::now() + *delay < give_up)
        })
        .await
        .map_err(|error| {
            error!(op = op.as_str(), %error, "queue step failed; the lease will expire and recovery will re-run the job");
        })
        .ok()
}

/// Pauses between tries of a queue step: 50 ms doubling to 2 s, no jitter
/// (one worker's steps, not a crowd's).
fn queue_step_backoff() -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(2))
        .with_factor(2.0)
        .without_max_times()
}

/// Pauses between tries to reach Redis while it fails (claims, the wake-up
/// subscription): 100 ms doubling to 5 s.
pub(crate) fn reconnect_backoff() -> impl Iterator<Item = Duration> {
    compactor_producer::backoff::reconnect(Duration::from_millis(100), Duration::from_secs(5))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_jitter() -> RetryPolicy {
        RetryPolicy {
            jitter: false,
            max_attempts: 4,
            ..RetryPolicy::default()
        }
    }

    #[test]
    fn backoff_starts_at_the_base_and_doubles() {
        let p = no_jitter();
        assert_eq!(p.delay(1, None), Duration::from_secs(3));
        assert_eq!(p.delay(2, None), Duration::from_secs(6));
        assert_eq!(p.delay(3, None), Duration::from_secs(12));
    }

    #[test]
    fn jitter_stays_between_one_and_two_steps() {
        let p = RetryPolicy::default();
        let delays: Vec<Duration> = (0..200).map(|_| p.delay(1, None)).collect();
        assert!(delays
            .iter()
            .all(|d| *d >= Duration::from_secs(3) && *d < Duration::from_secs(6)));
        assert!(
            delays.iter().any(|d| *d != delays[0]),
            "jitter varies the delay"
        );
    }

    #[test]
    fn retry_after_wins_when_later_and_is_capped() {
        let p = no_jitter();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(20))),
            Duration::from_secs(20)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(1))),
            Duration::from_secs(3)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(90_000))),
            Duration::from_secs(3600)
        );
    }

    #[test]
    fn two_attempts_by_default_and_permanent_errors_are_never_retried() {
        let p = RetryPolicy::default();
        let transient = JobError::retryable("503");
        assert!(matches!(p.decide(1, &transient), FailAction::Retry { .. }));
        assert_eq!(p.decide(2, &transient), FailAction::DeadLetter);
        assert_eq!(
            p.decide(1, &JobError::permanent("unknown workstream")),
            FailAction::DeadLetter
        );
    }

    #[test]
    fn the_delay_is_capped() {
        let p = RetryPolicy {
            jitter: false,
            max_delay: Duration::from_secs(10),
            ..RetryPolicy::default()
        };
        assert_eq!(p.delay(30, None), Duration::from_secs(10));
    }

    #[test]
    fn queue_steps_are_tried_again_after_50_ms_doubling_to_2_s() {
        let ms: Vec<u128> = queue_step_backoff()
            .build()
            .take(8)
            .map(|d| d.as_millis())
            .collect();
        assert_eq!(ms, [50, 100, 200, 400, 800, 1600, 2000, 2000]);
    }
}
