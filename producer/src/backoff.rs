//! Pauses between attempts to reach a service that is down (Redis, the
//! database): exponential with jitter, capped, endless — the caller decides
//! when to give up. One definition, so every reconnect loop behaves alike.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// `min`, doubling up to `max`, each with up to as much again of jitter.
pub fn reconnect(min: Duration, max: Duration) -> impl Iterator<Item = Duration> + Send {
    ExponentialBuilder::new()
        .with_min_delay(min)
        .with_max_delay(max)
        .with_jitter()
        .without_max_times()
        .build()
}
