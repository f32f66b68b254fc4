//! Panic capture: a handler that panics ends its attempt as a retryable
//! failure ([`Stop::Panicked`]) instead of taking the worker down.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;

use super::around::{AroundAttempt, Run};
use crate::runtime::attempt::{Attempt, Outcome, Stop};

/// Longest panic message kept (it becomes the job's failure reason).
const MAX_MESSAGE_CHARS: usize = 200;

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CatchPanic;

impl AroundAttempt for CatchPanic {
    fn around<F>(&self, attempt: Attempt, inner: impl FnOnce(Attempt) -> F) -> Run
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        // The handler holds no state the runtime looks at after a panic:
        // its future is dropped, and the job is failed from its claim.
        let run = AssertUnwindSafe(inner(attempt)).catch_unwind();
        Box::pin(async move {
            match run.await {
                Ok(outcome) => outcome,
                Err(panic) => Err(Stop::Panicked(message(panic.as_ref()))),
            }
        })
    }
}

fn message(panic: &(dyn Any + Send)) -> String {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned());
    message.chars().take(MAX_MESSAGE_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tower::{Layer, Service};

    use super::super::around::AroundLayer;
    use super::CatchPanic;
    use crate::runtime::attempt::tests::{attempt, service, Panics};
    use crate::runtime::attempt::Stop;

    #[test]
    fn the_message_is_the_payload_cut_short() {
        let long = "x".repeat(500);
        assert_eq!(super::message(&"boom"), "boom");
        assert_eq!(super::message(&long).len(), 200);
        assert_eq!(super::message(&42_u8), "non-string panic payload");
    }

    #[tokio::test]
    async fn a_panicking_handler_ends_the_attempt_and_cancels_its_work() {
        let attempt = attempt(Duration::from_secs(60));
        let cancel = attempt.cancel.clone();
        let outcome = AroundLayer(CatchPanic)
            .layer(service(Panics))
            .call(attempt)
            .await;
        assert!(matches!(outcome, Err(Stop::Panicked(m)) if m == "handler bug"));
        assert!(cancel.is_cancelled());
    }
}
