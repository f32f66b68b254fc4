//! Conversions between Rust values and what the Lua scripts take and
//! return: scripts get durations as whole milliseconds and answer with
//! job ids as strings. Shared by every operation, so each reads replies
//! the same way.

use std::time::Duration;

use super::error::QueueError;

/// The job id of a script reply, or a protocol error naming `op`.
pub(super) fn parse_id(value: Option<&String>, op: &'static str) -> Result<u64, QueueError> {
    value
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| QueueError::Protocol {
            op,
            detail: format!("job id {value:?} is not a number"),
        })
}

/// `d` in whole milliseconds for a script argument, at least 1: a lease,
/// TTL or age of zero would end what it bounds at once.
pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_must_be_numbers() {
        assert_eq!(parse_id(Some(&"42".to_owned()), "enqueue").unwrap(), 42);
        for bad in [
            None,
            Some("".to_owned()),
            Some("-1".to_owned()),
            Some("4x".to_owned()),
        ] {
            let err = parse_id(bad.as_ref(), "fail").unwrap_err();
            assert!(
                matches!(err, QueueError::Protocol { op: "fail", .. }),
                "{err}"
            );
        }
    }

    #[test]
    fn durations_become_at_least_one_millisecond() {
        assert_eq!(millis(Duration::from_secs(30)), 30_000);
        assert_eq!(millis(Duration::from_micros(1_999)), 1);
        assert_eq!(millis(Duration::ZERO), 1);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }
}
