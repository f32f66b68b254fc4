//! The compaction queue on Redis, owned by the project.
//!
//! One job hash per entity carries a `state` that decides what a request
//! means, exactly as ARCHITECTURE.md §4 requires:
//!
//! | state of the entity's job | a request…                                   |
//! |---------------------------|----------------------------------------------|
//! | none, `done`              | adds a job (`Added`)                         |
//! | `waiting`                 | is coalesced into it (`Coalesced`)           |
//! | `running`                 | is remembered; the run's end adds exactly one follow-up (`FollowUpRecorded`) |
//!
//! Every transition is one Lua script (enqueue, claim, renew, complete),
//! loaded once and called by SHA (`redis::Script` reloads on `NOSCRIPT`).
//! Times come from the Redis server clock, so workers with skewed clocks
//! agree on lease deadlines. All keys of a queue share one hash tag.
//!
//! Not built yet (they come with the worker runtime): failure with retry
//! and dead-lettering, recovery of expired leases, and the dead-letter API.

mod client;
pub mod keys;
pub mod payload;

pub use client::{
    ClaimOutcome, ClaimedJob, Completion, EnqueueOutcome, JobState, Queue, QueueConfig,
    QueueCounts, QueueError,
};
pub use keys::{Keys, QueueName};
pub use payload::{Payload, PayloadError, Trigger};
