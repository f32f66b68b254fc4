//! When a failed attempt runs again: exponential backoff with jitter
//! (`backon`), never sooner than a `Retry-After` the dependency gave, and
//! never more attempts than configured.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use compactor_producer::queue::FailAction;

use super::handler::JobError;

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
}
