//! Keeping a lease alive. A job holds two leases: the queue's lease on the
//! job (Redis, renewed by the runtime's heartbeat layer) and, while
//! it compacts, the lease on the entity (the database, renewed by the
//! compaction job). Both are kept by [`keep`], so they expire, and are
//! given up, by the same rule.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How a lease was lost.
#[derive(Debug)]
pub(crate) enum Lost<E> {
    /// A renewal was refused: the lease expired, and someone else may hold
    /// it now.
    Refused,
    /// Renewals failed for as long as the lease lasts (the store is
    /// unreachable); the last error.
    Unreachable(E),
}

/// Renews a lease of `ttl` every `every` and resolves only when it is lost;
/// drop the future to stop renewing. `renew` answers whether the lease was
/// still held; `on_error` sees each failed renewal.
///
/// The lease runs from when a renewal was *sent* (the store set the
/// deadline no earlier), so it is counted from then, and given up a renewal
/// interval before it would end: the holder stops before anyone may take
/// over.
pub(crate) async fn keep<E, Renew, Fut>(
    ttl: Duration,
    every: Duration,
    mut renew: Renew,
    mut on_error: impl FnMut(&E),
) -> Lost<E>
where
    Renew: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, E>>,
{
    let mut held_until = Instant::now() + ttl;
    loop {
        tokio::time::sleep(every).await;
        let sent = Instant::now();
        match renew().await {
            Ok(true) => held_until = sent + ttl,
            Ok(false) => return Lost::Refused,
            Err(error) => {
                on_error(&error);
                if Instant::now() + every >= held_until {
                    return Lost::Unreachable(error);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    const TTL: Duration = Duration::from_millis(300);
    const EVERY: Duration = Duration::from_millis(100);

    #[tokio::test]
    async fn a_refused_renewal_loses_the_lease() {
        let calls = AtomicU32::new(0);
        let lost = keep(
            TTL,
            EVERY,
            || async { Ok::<_, ()>(calls.fetch_add(1, Ordering::Relaxed) < 2) },
            |_| {},
        )
        .await;
        assert!(matches!(lost, Lost::Refused));
        assert_eq!(calls.load(Ordering::Relaxed), 3);
    }

    #[tokio::test]
    async fn failures_lose_the_lease_a_renewal_before_it_ends() {
        let errors = AtomicU32::new(0);
        let started = Instant::now();
        let lost = keep(
            TTL,
            EVERY,
            || async { Err::<bool, _>("down") },
            |_| {
                errors.fetch_add(1, Ordering::Relaxed);
            },
        )
        .await;
        assert!(matches!(lost, Lost::Unreachable("down")));
        // Not before the next try would come at the lease's end, and not
        // without trying.
        assert!(errors.load(Ordering::Relaxed) >= 1);
        let took = started.elapsed();
        assert!(took >= TTL - EVERY, "{took:?}");
    }
}
