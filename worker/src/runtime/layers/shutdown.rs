//! The end of the shutdown grace period: an attempt still running when it
//! is over is cancelled ([`Stop::HandBack`]) and its job handed back to
//! the queue, the attempt not counted.

use std::future::Future;

use tokio_util::sync::CancellationToken;

use super::around::{AroundAttempt, Run};
use crate::runtime::attempt::{Attempt, Outcome, Stop};

#[derive(Debug, Clone)]
pub(crate) struct HandBack {
    /// Cancelled when the grace period ends.
    hand_back: CancellationToken,
}

impl HandBack {
    pub(crate) fn new(hand_back: CancellationToken) -> HandBack {
        HandBack { hand_back }
    }
}

impl AroundAttempt for HandBack {
    fn around<F>(&self, attempt: Attempt, inner: impl FnOnce(Attempt) -> F) -> Run
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        let hand_back = self.hand_back.clone();
        let run = inner(attempt);
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

    use super::super::around::AroundLayer;
    use super::HandBack;
    use crate::runtime::attempt::tests::{attempt, service, Forever};
    use crate::runtime::attempt::Stop;

    #[tokio::test]
    async fn an_attempt_running_when_the_grace_period_ends_is_handed_back() {
        let hand_back = CancellationToken::new();
        let attempt = attempt(Duration::from_secs(60));
        let cancel = attempt.cancel.clone();
        let run = AroundLayer(HandBack::new(hand_back.clone()))
            .layer(service(Forever))
            .call(attempt);
        hand_back.cancel();
        assert!(matches!(run.await, Err(Stop::HandBack)));
        assert!(cancel.is_cancelled());
    }
}
