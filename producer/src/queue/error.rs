//! The one error type of the queue client. Every Redis failure names the
//! operation that failed, so a log line says what the service was doing;
//! callers decide between retrying and giving up with
//! [`QueueError::is_unavailable`] instead of inspecting Redis errors.

use compactor_shared::payload::PayloadError;

use super::config::QueueConfigError;

/// Queue failures. Redis errors carry the operation that failed; the URL
/// is never part of an error (it may hold a password).
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("cannot connect to Redis at {target}: {source}")]
    Connect {
        target: String,
        #[source]
        source: redis::RedisError,
    },
    /// `[redis] url` cannot be used as given (the URLs shown redacted).
    #[error("unusable Redis URL {target}: {problem}")]
    Url {
        target: String,
        problem: &'static str,
    },
    #[error("Redis {op} failed: {source}")]
    Redis {
        op: &'static str,
        #[source]
        source: redis::RedisError,
    },
    #[error("unexpected reply to {op}: {detail}")]
    Protocol { op: &'static str, detail: String },
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error(transparent)]
    Config(#[from] QueueConfigError),
    /// No job has this id (or it was trimmed with the done and dead sets).
    #[error("no job {job_id}")]
    JobNotFound { job_id: u64 },
    /// The job ended before it could be cancelled.
    #[error("job {job_id} is {state} already: only a waiting or running job can be cancelled")]
    JobFinished { job_id: u64, state: &'static str },
    /// A page cursor that no page of jobs gave.
    #[error("malformed job cursor {cursor:?}: pass the next_cursor of the previous page")]
    InvalidCursor { cursor: String },
    /// A page size out of range.
    #[error("limit {limit} is not within 1-{max}")]
    InvalidLimit { limit: usize, max: usize },
    /// More jobs in one call than `max` ([`MAX_SETTLE_BATCH`](super::MAX_SETTLE_BATCH)).
    #[error("{op}: {len} jobs in one call, at most {max} allowed")]
    BatchTooLarge {
        op: &'static str,
        len: usize,
        max: usize,
    },
}

impl QueueError {
    /// Whether Redis could not be reached or did not answer (as opposed to
    /// an answer this build does not understand, or a refused request):
    /// retrying later may succeed.
    pub fn is_unavailable(&self) -> bool {
        match self {
            QueueError::Connect { .. } => true,
            QueueError::Redis { source, .. } => {
                source.is_io_error()
                    || !matches!(source.retry_method(), redis::RetryMethod::NoRetry)
            }
            _ => false,
        }
    }
}

/// Wraps a Redis error with the operation that failed.
pub(super) fn redis_error(op: &'static str) -> impl Fn(redis::RedisError) -> QueueError + Copy {
    move |source| QueueError::Redis { op, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io_error(kind: std::io::ErrorKind) -> redis::RedisError {
        redis::RedisError::from(std::io::Error::new(kind, "test"))
    }

    #[test]
    fn unreachable_redis_is_unavailable_and_a_refusal_is_not() {
        let refused = io_error(std::io::ErrorKind::ConnectionRefused);
        assert!(QueueError::Connect {
            target: "redis://h".into(),
            source: refused,
        }
        .is_unavailable());
        assert!(redis_error("ping")(io_error(std::io::ErrorKind::TimedOut)).is_unavailable());
        // A reply this build does not understand will not get better.
        let unexpected = redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, "reply"));
        assert!(!redis_error("enqueue")(unexpected).is_unavailable());
        assert!(!QueueError::Protocol {
            op: "enqueue",
            detail: "x".into(),
        }
        .is_unavailable());
        let config = QueueConfigError {
            field: "lease_ttl",
            problem: "must be at least 1ms",
        };
        assert!(!QueueError::from(config).is_unavailable());
    }

    #[test]
    fn redis_errors_name_their_operation() {
        let error = redis_error("settle")(io_error(std::io::ErrorKind::TimedOut));
        assert!(
            error.to_string().starts_with("Redis settle failed: "),
            "{error}"
        );
        let error = QueueError::BatchTooLarge {
            op: "settle",
            len: 129,
            max: 128,
        };
        assert_eq!(
            error.to_string(),
            "settle: 129 jobs in one call, at most 128 allowed"
        );
    }
}
