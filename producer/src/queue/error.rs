//! The one error type of the queue client. Every Redis failure names the
//! operation that failed, so a log line says what the service was doing;
//! callers decide between retrying and giving up with
//! [`QueueError::is_unavailable`] instead of inspecting Redis errors.

use compactor_shared::payload::PayloadError;

use super::config::QueueConfigError;
use crate::events::{InternalEvent, QueueKeyOfWrongType};

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
    /// A key of the queue holds another Redis type than the queue keeps
    /// there: a hand edit, or another program's key of the same name. The
    /// script that met it changed nothing (each checks its keys' types
    /// before its first write), and nothing retries it away: an operator
    /// moves the key aside. Counted in `compactor_queue_wrong_type_keys_total`.
    #[error("Redis {op} refused: {key}")]
    WrongType { op: &'static str, key: WrongTypeKey },
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

/// A key of the queue found holding another type than the queue keeps
/// there, as the refusing script named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrongTypeKey {
    /// The key's full name. `None` only when Redis itself refused a
    /// command outside the scripts' checks (its message names no key).
    pub key: Option<String>,
    /// The type found there (`string`, `list`, …), when named.
    pub found: Option<String>,
    /// The type the queue keeps there (`zset`, `hash`, a job id counter).
    pub expected: Option<String>,
}

impl WrongTypeKey {
    /// Reads the refusal of a script's type check (`expect_types` and
    /// `counter_value` in the prelude): `<key> holds a <found>, not a
    /// <expected>: …` or `<key> is not a job id counter: …`; anything else
    /// (Redis' own `WRONGTYPE Operation against a key holding the wrong
    /// kind of value`) names no key.
    fn parse(detail: &str) -> WrongTypeKey {
        if let Some((key, rest)) = detail.split_once(" holds a ") {
            if let Some((found, rest)) = rest.split_once(", not a ") {
                let expected = rest.split(':').next().unwrap_or(rest);
                return WrongTypeKey {
                    key: Some(key.to_owned()),
                    found: Some(found.to_owned()),
                    expected: Some(expected.to_owned()),
                };
            }
        }
        if let Some((key, _)) = detail.split_once(" is not a job id counter") {
            return WrongTypeKey {
                key: Some(key.to_owned()),
                found: None,
                expected: Some("job id counter".to_owned()),
            };
        }
        WrongTypeKey {
            key: None,
            found: None,
            expected: None,
        }
    }
}

impl std::fmt::Display for WrongTypeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.key, &self.found, &self.expected) {
            (Some(key), Some(found), Some(expected)) => write!(
                f,
                "key {key} holds a {found}, where the queue keeps a {expected}"
            )?,
            (Some(key), _, Some(expected)) => write!(f, "key {key} is not a {expected}")?,
            _ => f.write_str("a key of the queue holds another type than the queue keeps there")?,
        }
        f.write_str("; nothing was changed. Move the key aside (RENAME) or delete it")
    }
}

/// Wraps a Redis error with the operation that failed. A refusal of a key
/// of the wrong type becomes [`QueueError::WrongType`] (see
/// [`wrong_type`]).
pub(super) fn redis_error(op: &'static str) -> impl Fn(redis::RedisError) -> QueueError + Copy {
    move |source| {
        if !is_wrong_type(&source) {
            return QueueError::Redis { op, source };
        }
        wrong_type(op, WrongTypeKey::parse(&wrong_type_detail(&source)))
    }
}

/// The message of a `WRONGTYPE` refusal: the error's own, or, for a
/// pipeline, that of the command refused in it.
fn wrong_type_detail(source: &redis::RedisError) -> String {
    if let Some(detail) = source.detail() {
        return detail.to_owned();
    }
    source
        .clone()
        .into_server_errors()
        .and_then(|errors| {
            errors
                .iter()
                .find(|(_, e)| e.code() == "WRONGTYPE")
                .and_then(|(_, e)| e.details().map(str::to_owned))
        })
        .unwrap_or_default()
}

/// Whether Redis refused a command (or one of a pipeline's) for the type
/// of a key it touched.
pub(super) fn is_wrong_type(source: &redis::RedisError) -> bool {
    source.code() == Some("WRONGTYPE")
        || source
            .clone()
            .into_server_errors()
            .is_some_and(|errors| errors.iter().any(|(_, e)| e.code() == "WRONGTYPE"))
}

/// The refusal of `key`, counted in `compactor_queue_wrong_type_keys_total`:
/// every [`QueueError::WrongType`] is made here, so each is counted once.
pub(super) fn wrong_type(op: &'static str, key: WrongTypeKey) -> QueueError {
    QueueKeyOfWrongType {
        op,
        key: key.key.as_deref(),
    }
    .emit();
    QueueError::WrongType { op, key }
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
    fn a_wrong_type_refusal_names_the_key_and_is_no_outage() {
        // A server's error reply, as the connection reads it.
        let refusal = |detail: &str| {
            let reply = redis::parse_redis_value(format!("-WRONGTYPE {detail}\r\n").as_bytes())
                .expect("an error reply parses");
            let source = reply.extract_error().expect_err("an error reply");
            redis_error("enqueue")(source)
        };
        // As a script's check words it, Redis' script suffix included.
        let error = refusal(
            "{cq:q}:waiting holds a string, not a zset: nothing was changed script: 1f0e, on @user_script:138.",
        );
        let QueueError::WrongType { op, key } = &error else {
            panic!("{error:?}")
        };
        assert_eq!(*op, "enqueue");
        assert_eq!(key.key.as_deref(), Some("{cq:q}:waiting"));
        assert_eq!(key.found.as_deref(), Some("string"));
        assert_eq!(key.expected.as_deref(), Some("zset"));
        assert!(!error.is_unavailable());
        assert!(
            error
                .to_string()
                .contains("key {cq:q}:waiting holds a string, where the queue keeps a zset"),
            "{error}"
        );
        let counter = refusal("{cq:q}:seq is not a job id counter: nothing was changed");
        assert!(
            matches!(&counter, QueueError::WrongType { key, .. } if key.key.as_deref() == Some("{cq:q}:seq")),
            "{counter:?}"
        );
        // Redis' own refusal names no key.
        let bare = refusal("Operation against a key holding the wrong kind of value");
        assert!(
            matches!(&bare, QueueError::WrongType { key, .. } if key.key.is_none()),
            "{bare:?}"
        );
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
