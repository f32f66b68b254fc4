//! The `[queue]` section of the configuration: what producers and workers
//! must agree on (the queue's name, lease and retention bounds) and the
//! timeouts of its Redis connection. Kept apart from the client so that
//! settings can be loaded, defaulted and checked without connecting.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::keys::QueueName;

/// Queue settings shared by producers and workers: the `[queue]` section
/// of the configuration (durations as `"30s"`, `"500ms"`, `"7days"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    pub name: QueueName,
    /// How long a claimed job's lease lasts without renewal.
    #[serde(with = "humantime_serde")]
    pub lease_ttl: Duration,
    /// Finished-job records kept at most (a busy queue at the bound trims
    /// in batches, once every 64th of it, and holds up to that many more
    /// between two trims)…
    pub done_max_count: u64,
    /// …and for at most this long.
    #[serde(with = "humantime_serde")]
    pub done_max_age: Duration,
    /// Dead-lettered jobs kept at most…
    pub dead_max_count: u64,
    /// …and for at most this long.
    #[serde(with = "humantime_serde")]
    pub dead_max_age: Duration,
    /// Expired leases one job may have before it is dead-lettered.
    pub max_stalls: u32,
    /// How long connecting to Redis may take before it is an error.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// How long one command may wait for its reply before it is an error
    /// (so an unreachable Redis fails a request instead of hanging it).
    #[serde(with = "humantime_serde")]
    pub response_timeout: Duration,
}

/// Why a queue setting was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid queue setting {field}: {problem}")]
pub struct QueueConfigError {
    pub field: &'static str,
    pub problem: &'static str,
}

impl QueueConfig {
    /// Checks each setting is usable.
    pub fn validate(&self) -> Result<(), QueueConfigError> {
        let bad = |field, problem| Err(QueueConfigError { field, problem });
        if self.lease_ttl < Duration::from_millis(1) {
            return bad("lease_ttl", "must be at least 1ms");
        }
        if self.done_max_count == 0 || self.dead_max_count == 0 {
            return bad("done_max_count / dead_max_count", "must be at least 1");
        }
        if self.done_max_age.is_zero() || self.dead_max_age.is_zero() {
            return bad("done_max_age / dead_max_age", "must be positive");
        }
        if self.connect_timeout.is_zero() || self.response_timeout.is_zero() {
            return bad(
                "connect_timeout / response_timeout",
                "must be positive, or an unreachable Redis hangs requests",
            );
        }
        Ok(())
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            name: QueueName::default(),
            lease_ttl: Duration::from_secs(30),
            done_max_count: 10_000,
            done_max_age: Duration::from_secs(24 * 3600),
            dead_max_count: 10_000,
            dead_max_age: Duration::from_secs(7 * 24 * 3600),
            max_stalls: 3,
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(5),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid() {
        assert_eq!(QueueConfig::default().validate(), Ok(()));
    }

    #[test]
    fn each_unusable_setting_is_refused_by_name() {
        let field = |change: fn(&mut QueueConfig)| {
            let mut config = QueueConfig::default();
            change(&mut config);
            config.validate().err().map(|e| e.field)
        };
        assert_eq!(
            field(|c| c.lease_ttl = Duration::from_micros(999)),
            Some("lease_ttl")
        );
        assert_eq!(field(|c| c.lease_ttl = Duration::from_millis(1)), None);
        assert_eq!(
            field(|c| c.done_max_count = 0),
            Some("done_max_count / dead_max_count")
        );
        assert_eq!(
            field(|c| c.dead_max_count = 0),
            Some("done_max_count / dead_max_count")
        );
        assert_eq!(
            field(|c| c.done_max_age = Duration::ZERO),
            Some("done_max_age / dead_max_age")
        );
        assert_eq!(
            field(|c| c.dead_max_age = Duration::ZERO),
            Some("done_max_age / dead_max_age")
        );
        assert_eq!(
            field(|c| c.connect_timeout = Duration::ZERO),
            Some("connect_timeout / response_timeout")
        );
        assert_eq!(
            field(|c| c.response_timeout = Duration::ZERO),
            Some("connect_timeout / response_timeout")
        );
        // No bound on stalls: 0 dead-letters a job at its first expiry.
        assert_eq!(field(|c| c.max_stalls = 0), None);
    }

    #[test]
    fn durations_are_read_as_human_text_and_unknown_fields_refused() {
        let config: QueueConfig = serde_json::from_str(
            r#"{"name": "q-1", "lease_ttl": "500ms", "dead_max_age": "7days"}"#,
        )
        .unwrap();
        assert_eq!(config.name.as_str(), "q-1");
        assert_eq!(config.lease_ttl, Duration::from_millis(500));
        assert_eq!(config.dead_max_age, Duration::from_secs(7 * 24 * 3600));
        assert_eq!(config.max_stalls, QueueConfig::default().max_stalls);
        assert!(serde_json::from_str::<QueueConfig>(r#"{"lease": "1s"}"#).is_err());
        assert!(serde_json::from_str::<QueueConfig>(r#"{"name": "Q"}"#).is_err());
    }
}
