//! Completions per minute, read from the `done` set (scored by the server
//! time each job finished): the throughput an operator's console charts.
//! One `TIME` and one `ZCOUNT` per minute, each O(log n) in the set's
//! size, so the read stays cheap however many done records are retained.
//! It counts only what the set still holds: past `done_max_age` or
//! `done_max_count` (the retention bounds) the oldest minutes read low.

use serde::Serialize;

use super::error::{redis_error, QueueError};
use super::handle::Queue;

/// Most minutes one read covers (a day).
pub const MAX_THROUGHPUT_MINUTES: usize = 24 * 60;

const MINUTE_MS: u64 = 60_000;

/// Jobs completed in each of the last minutes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Throughput {
    /// Redis server time (unix ms) the read was made at: the end of the
    /// last bucket.
    pub now_ms: u64,
    /// Completions per minute, oldest first; the last bucket is the
    /// minute that ends at `now_ms`.
    pub per_minute: Vec<u64>,
}

impl Throughput {
    /// Completions in the last `minutes` buckets.
    pub fn last(&self, minutes: usize) -> u64 {
        self.per_minute.iter().rev().take(minutes).sum()
    }
}

impl Queue {
    /// Completions in each of the last `minutes` minutes (at most
    /// [`MAX_THROUGHPUT_MINUTES`]), by the Redis server's clock.
    pub async fn throughput(&self, minutes: usize) -> Result<Throughput, QueueError> {
        let minutes = minutes.clamp(1, MAX_THROUGHPUT_MINUTES);
        let mut conn = self.conn.clone();
        let redis_err = redis_error("throughput");
        let (secs, micros): (u64, u64) = redis::cmd("TIME")
            .query_async(&mut conn)
            .await
            .map_err(redis_err)?;
        let now_ms = secs * 1_000 + micros / 1_000;
        let mut pipe = redis::pipe();
        for (from, to) in buckets(now_ms, minutes) {
            // `(from` excludes the bound: a job finished exactly on a
            // minute's edge counts once, in the older minute.
            pipe.cmd("ZCOUNT")
                .arg(self.keys.done())
                .arg(format!("({from}"))
                .arg(to);
        }
        let per_minute: Vec<u64> = pipe.query_async(&mut conn).await.map_err(redis_err)?;
        Ok(Throughput { now_ms, per_minute })
    }
}

/// The `(from, to]` bounds (unix ms) of `minutes` one-minute buckets
/// ending at `now_ms`, oldest first.
fn buckets(now_ms: u64, minutes: usize) -> impl Iterator<Item = (u64, u64)> {
    (0..minutes as u64).rev().map(move |i| {
        let to = now_ms.saturating_sub(i * MINUTE_MS);
        (to.saturating_sub(MINUTE_MS), to)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_adjacent_minutes_ending_now_oldest_first() {
        let b: Vec<_> = buckets(1_000_000, 3).collect();
        assert_eq!(
            b,
            vec![(820_000, 880_000), (880_000, 940_000), (940_000, 1_000_000)]
        );
    }

    #[test]
    fn the_last_minutes_add_up_from_the_newest() {
        let t = Throughput {
            now_ms: 0,
            per_minute: vec![5, 1, 2, 3],
        };
        assert_eq!(t.last(2), 5);
        assert_eq!(t.last(10), 11);
    }
}
