//! Starting things one at a time, each only once the one before is
//! finished: how a test shows a worker that is idle for every job (woken
//! for each, not polling), in any crate and on any queue.

use std::future::Future;
use std::time::Duration;

use crate::wait::eventually;

/// For each of `items` in turn: `start` it, then wait (polling as
/// [`eventually`] does, up to `limit`, failing with `what`) until
/// `finished` holds for it and what `start` returned (a job id), before
/// the next is started.
///
/// Generic over the queue because this kit depends on no compactor crate;
/// the tests' own support modules bind it to `Queue`.
pub async fn one_at_a_time<T, Id, S, SFut, F, FFut>(
    items: impl IntoIterator<Item = T>,
    what: &str,
    limit: Duration,
    mut start: S,
    mut finished: F,
) where
    T: Clone,
    Id: Clone,
    S: FnMut(T) -> SFut,
    SFut: Future<Output = Id>,
    F: FnMut(T, Id) -> FFut,
    FFut: Future<Output = bool>,
{
    for item in items {
        let id = start(item.clone()).await;
        eventually(what, limit, || finished(item.clone(), id.clone())).await;
    }
}
