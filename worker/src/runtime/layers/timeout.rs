//! The lock-duration cap: an attempt still running at its
//! [deadline](Attempt::deadline) is cancelled ([`Stop::TimedOut`]), a
//! retryable failure.
//!
//! Not tower's `Timeout`: the deadline is the attempt's own (the handler
//! plans its work against it), and running out of it is an outcome to
//! acknowledge, not an error to box.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use crate::runtime::attempt::{Attempt, Outcome, Stop};

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LockDurationLayer;

impl<S> Layer<S> for LockDurationLayer {
    type Service = LockDuration<S>;

    fn layer(&self, inner: S) -> LockDuration<S> {
        LockDuration { inner }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct LockDuration<S> {
    inner: S,
}

impl<S> Service<Attempt> for LockDuration<S>
where
    S: Service<Attempt, Response = (), Error = Stop>,
    S::Future: Send + 'static,
{
    type Response = ();
    type Error = Stop;
    type Future = Pin<Box<dyn Future<Output = Outcome> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Stop>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, attempt: Attempt) -> Self::Future {
        let deadline = attempt.deadline;
        let run = self.inner.call(attempt);
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

    use super::LockDurationLayer;
    use crate::runtime::attempt::tests::{attempt, service, Forever};
    use crate::runtime::attempt::Stop;

    #[tokio::test]
    async fn an_attempt_is_cancelled_at_its_deadline() {
        let attempt = attempt(Duration::from_millis(50));
        let cancel = attempt.cancel.clone();
        let started = Instant::now();
        let outcome = LockDurationLayer
            .layer(service(Forever))
            .call(attempt)
            .await;
        assert!(matches!(outcome, Err(Stop::TimedOut)));
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(cancel.is_cancelled());
    }
}
