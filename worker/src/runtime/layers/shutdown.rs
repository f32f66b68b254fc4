//! The end of the shutdown grace period: an attempt still running when it
//! is over is cancelled ([`Stop::HandBack`]) and its job handed back to
//! the queue, the attempt not counted.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio_util::sync::CancellationToken;
use tower::{Layer, Service};

use crate::runtime::attempt::{Attempt, Outcome, Stop};

#[derive(Debug, Clone)]
pub(crate) struct HandBackLayer {
    /// Cancelled when the grace period ends.
    hand_back: CancellationToken,
}

impl HandBackLayer {
    pub(crate) fn new(hand_back: CancellationToken) -> HandBackLayer {
        HandBackLayer { hand_back }
    }
}

impl<S> Layer<S> for HandBackLayer {
    type Service = HandBack<S>;

    fn layer(&self, inner: S) -> HandBack<S> {
        HandBack {
            inner,
            hand_back: self.hand_back.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct HandBack<S> {
    inner: S,
    hand_back: CancellationToken,
}

impl<S> Service<Attempt> for HandBack<S>
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
        let hand_back = self.hand_back.clone();
        let run = self.inner.call(attempt);
        Box::pin(async move {
            tokio::select! {
                outcome = run => outcome,
                () = hand_back.cancelled() => Err(Stop::HandBack),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;
    use tower::{Layer, Service};

    use super::HandBackLayer;
    use crate::runtime::attempt::tests::{attempt, service, Forever};
    use crate::runtime::attempt::Stop;

    #[tokio::test]
    async fn an_attempt_running_when_the_grace_period_ends_is_handed_back() {
        let hand_back = CancellationToken::new();
        let attempt = attempt(Duration::from_secs(60));
        let cancel = attempt.cancel.clone();
        let run = HandBackLayer::new(hand_back.clone())
            .layer(service(Forever))
            .call(attempt);
        hand_back.cancel();
        assert!(matches!(run.await, Err(Stop::HandBack)));
        assert!(cancel.is_cancelled());
    }
}
