//! The runtime's behaviours as tower layers around the job handler, the
//! service apalis calls for each claimed job. Outermost first:
//!
//! ```text
//! ack         span; tell the queue how the attempt ended (complete, retry,
//!             dead-letter, hand back)                          Task → Attempt
//! measure     started / run-time metrics, slots in use, recent run times
//! shutdown    cancel when the shutdown grace period is over    → HandBack
//! timeout     cancel at the lock duration                      → TimedOut
//! heartbeat   renew the job's lease; cancel when it is lost    → LeaseLost
//! panic       a panic becomes a retryable failure              → Panicked
//! handler     the JobHandler                                   → Failed
//! ```
//!
//! Each layer below `ack` takes an [`Attempt`](super::attempt::Attempt) and
//! answers how it ended ([`Outcome`](super::attempt::Outcome)): it is a
//! behaviour implementing [`AroundAttempt`], made a tower layer by
//! [`AroundLayer`] (one `Layer`/`Service` plumbing for all five). A layer that
//! ends an attempt early drops the layers inside it, the handler's future
//! included, which cancels the work the handler spawned. `measure` sits
//! inside `ack` so an attempt's slot is free, and its run recorded, before
//! the outcome goes to the queue (the group acknowledgement claims by both).
//!
//! apalis's own concurrency limit goes around all of them (see
//! [`Runtime::run`](super::Runtime::run)).

mod ack;
mod around;
mod heartbeat;
mod measure;
mod panic;
mod shutdown;
mod timeout;

use std::sync::Arc;

use tower::ServiceBuilder;

use super::attempt::HandlerService;
use super::handler::JobHandler;
use super::Shared;

pub(crate) use ack::{Ack, AckLayer};
pub(crate) use around::{Around, AroundLayer};
use heartbeat::Heartbeat;
use measure::Measure;
use panic::CatchPanic;
use shutdown::HandBack;
use timeout::LockDuration;

/// The service apalis calls for each job run by handler `H` (innermost
/// first in the nesting, outermost first in [`attempt_service`]).
pub(crate) type AttemptService<H> = Ack<
    Around<
        Around<
            Around<Around<Around<HandlerService<H>, CatchPanic>, Heartbeat>, LockDuration>,
            HandBack,
        >,
        Measure,
    >,
>;

/// Stacks the layers over `handler`.
pub(crate) fn attempt_service<H: JobHandler>(
    shared: &Arc<Shared>,
    handler: Arc<H>,
) -> AttemptService<H> {
    ServiceBuilder::new()
        .layer(AckLayer::new(Arc::clone(shared)))
        .layer(AroundLayer(Measure::new(Arc::clone(shared))))
        .layer(AroundLayer(HandBack::new(shared.hand_back.clone())))
        .layer(AroundLayer(LockDuration))
        .layer(AroundLayer(Heartbeat::new(Arc::clone(shared))))
        .layer(AroundLayer(CatchPanic))
        .service(HandlerService::new(
            handler,
            shared.config.retry.max_attempts,
        ))
}
