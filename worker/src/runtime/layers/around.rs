//! The one tower plumbing the attempt layers share: a layer is a value
//! implementing [`AroundAttempt`] — what it does around the inner
//! layers' run of an attempt — and [`Around`] makes it a
//! `Service<Attempt>` over the layers inside it.
//!
//! Each behaviour then is a dozen lines about itself (a `select!` against a
//! deadline, a lease, a token; a panic caught; a run measured) instead of a
//! `Layer` and a `Service` impl of its own.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use crate::runtime::attempt::{Attempt, Outcome, Stop};

/// How a layer's attempt ends: the boxed future every attempt layer
/// returns.
pub(crate) type Run = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// One behaviour around an attempt.
pub(crate) trait AroundAttempt: Clone {
    /// Runs `attempt` through `inner` (the layers inside this one) with
    /// this behaviour around it. A behaviour that ends the attempt early
    /// drops `inner`'s future, which cancels the work below it.
    fn around<F>(&self, attempt: Attempt, inner: impl FnOnce(Attempt) -> F) -> Run
    where
        F: Future<Output = Outcome> + Send + 'static;
}

/// The [`Layer`] of a behaviour `W`.
#[derive(Debug, Clone)]
pub(crate) struct AroundLayer<W>(pub(crate) W);

impl<S, W: Clone> Layer<S> for AroundLayer<W> {
    type Service = Around<S, W>;

    fn layer(&self, inner: S) -> Around<S, W> {
        Around {
            inner,
            behaviour: self.0.clone(),
        }
    }
}

/// Behaviour `W` around service `S`.
#[derive(Debug, Clone)]
pub(crate) struct Around<S, W> {
    inner: S,
    behaviour: W,
}

impl<S, W> Service<Attempt> for Around<S, W>
where
    S: Service<Attempt, Response = (), Error = Stop>,
    S::Future: Send + 'static,
    W: AroundAttempt,
{
    type Response = ();
    type Error = Stop;
    type Future = Run;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Stop>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, attempt: Attempt) -> Run {
        let inner = &mut self.inner;
        self.behaviour
            .around(attempt, |attempt| inner.call(attempt))
    }
}
