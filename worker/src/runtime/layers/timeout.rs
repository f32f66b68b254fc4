//! The lock-duration cap: an attempt still running at its
//! [deadline](Attempt::deadline) is cancelled ([`Stop::TimedOut`]), a
//! retryable failure.
//!
//! Not tower's `Timeout`: the deadline is the attempt's own (the handler
//! plans its work against it), and running out of it is an outcome to
//! acknowledge, not an error to box.

use std::future::Future;

use super::around::{AroundAttempt, Run};
use crate::runtime::attempt::{Attempt, Outcome, Stop};

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LockDuration;

impl AroundAttempt for LockDuration {
    fn around<F>(&self, attempt: Attempt, inner: impl FnOnce(Attempt) -> F) -> Run
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        let deadline = attempt.deadline;
        let run = inner(attempt);
        Box::pin(async move {
            tokio::select! {
                outcome = run => outcome,
                () = tokio::time::sleep_until(deadline) => Err(Stop::TimedOut),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use tower::{Layer, Service};

    use super::super::around::AroundLayer;
    use super::LockDuration;
    use crate::runtime::attempt::tests::{attempt, service, Forever};
    use crate::runtime::attempt::Stop;

    #[tokio::test]
    async fn an_attempt_is_cancelled_at_its_deadline() {
        let attempt = attempt(Duration::from_millis(50));
        let cancel = attempt.cancel.clone();
        let started = Instant::now();
        let outcome = AroundLayer(LockDuration)
            .layer(service(Forever))
            .call(attempt)
            .await;
        assert!(matches!(outcome, Err(Stop::TimedOut)));
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(cancel.is_cancelled());
    }
}
