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
//! Every transition is one Lua script (enqueue, claim, renew, complete,
//! fail, release, recover, pause, and an operator's cancel),
//! loaded once as a Redis function library and called by name (`call`:
//! by SHA on a server without functions; a call reloads lost code).
//! Times come from the Redis server clock, so workers with skewed clocks
//! agree on lease deadlines. All keys of a queue share one hash tag, so the
//! queue runs unchanged on a Redis Cluster (`[redis] cluster = true`; see
//! the `conn` module): a queue lives in one slot, on one shard.
//!
//! Waiting jobs are in one of two lanes (`lane`): manual and reactive
//! requests are claimed before automatic ones, whatever the backlog.
//!
//! A failed attempt is retried after a delay the worker chooses, or
//! dead-lettered; a job whose lease expires (its worker crashed) returns to
//! the queue, until it has stalled `max_stalls` times and is dead-lettered.
//! Dead letters and finished records are bounded by count and age. A
//! dead-lettered job still gets the follow-up requested while it ran.
//!
//! Redis does not undo a script that fails half-way, so every script reads
//! and checks all it needs (the types of its keys) before its first write:
//! a failing script changes nothing. A job record whose set lost its entry
//! all the same (an eviction, a hand edit) is put back by the next request
//! for its entity and by the workers' repair sweep (`repair`): a waiting
//! job back in line, a running one tracked again at its lease deadline so
//! that recovery returns it.
//!
//! An operator can pause the queue, or one domain of it (`pause`): claims
//! hand out no paused job, which stays waiting (counted, deduplicating
//! requests) until resumed; running jobs finish.
//!
//! Workers register in a registry on the queue and renew their entry with
//! a heartbeat (`workers`), so a chat request waiting on a compaction can
//! tell a job that will run from one that nobody is there to run
//! (`progress`). The end of each run is announced on the entity's release
//! channel, by the worker (what the run did) and by the queue (that the
//! job settled).
//!
//! The worker runtime that drives these steps (heartbeats, backoff, graceful
//! shutdown) is `compactor-worker`'s `runtime` module. The payload format is
//! pure data and lives in `compactor_shared::payload`, so it can be fuzzed
//! without a Redis client.
//!
//! # Layout
//!
//! One concern per file, one file per operation (as mini-redis's `cmd/`):
//!
//! - `handle`: [`Queue`], connecting and `PING`; `conn`: its connections
//!   (one server or a cluster); `config`: the `[queue]` settings;
//!   `error`: [`QueueError`].
//! - `keys`: every key name; `lane`: the two lanes of waiting jobs;
//!   `scripts`: the Lua scripts (`scripts/*.lua`) and their loading;
//!   `call`: how they are called (`FCALL`, or `EVALSHA`); `convert`: script arguments and replies.
//! - Operations, each an `impl Queue` block: `enqueue` (app code's
//!   requests), `settle` (complete and claim in one round trip), `claim`
//!   (the leased job, renewing its lease), `fail` (retry, postpone,
//!   dead-letter, hand back), `recover` (expired leases), `repair`
//!   (records that lost their set entry), `dead_letters` (and
//!   `dead_bulk`: by filter, in batches), `inspect`
//!   (job state, counts), `pubsub` (wake-ups and release announcements),
//!   `workers` (the registry of live workers; `workers_view`, the
//!   operator's table of them), `pause` (pausing and resuming the
//!   queue or a domain), `jobs` (pages of jobs by state, a job by
//!   id), `cancel` (an operator cancels a job), `throughput`
//!   (completions per minute, from the done set), `progress` (where a
//!   job stands, for waiters) and `stream` (the Redis Stream of
//!   compaction events the worker's outbox relay feeds).

mod call;
mod cancel;
mod claim;
mod config;
mod conn;
mod convert;
mod dead_bulk;
mod dead_letters;
mod enqueue;
mod error;
mod fail;
mod handle;
mod inspect;
mod jobs;
pub mod keys;
mod lane;
mod pause;
mod progress;
mod pubsub;
mod recover;
mod repair;
mod scripts;
mod settle;
mod stream;
mod throughput;
mod workers;
mod workers_view;

pub use compactor_shared::payload;

pub use cancel::{CancelThen, Cancelled, CANCELLED_REASON};
pub use claim::{ClaimOutcome, ClaimedJob};
pub use config::{QueueConfig, QueueConfigError};
pub use dead_bulk::{
    member_domain, reason_kind, BulkAction, BulkReport, BulkWalk, DeadCursor, DeadFilter,
    DeadFilterError, DeadPage, DeadReason, RetriedLetter, SAMPLE as DEAD_LETTER_SAMPLE,
};
pub use dead_letters::DeadLetter;
pub use enqueue::{EnqueueOutcome, ENQUEUE_BATCH};
pub use error::{QueueError, WrongTypeKey};
pub use fail::{FailAction, Failure};
pub use handle::Queue;
pub use inspect::{JobState, QueueCounts};
pub use jobs::{
    JobCursor, JobPage, JobSummary, JobView, UnknownJobView, JOB_CURSOR_PATTERN, MAX_JOBS_PAGE,
};
pub use keys::{Keys, QueueName};
pub use lane::Lane;
pub use pause::{PauseScope, PauseState, PausedDomain};
pub use payload::{Payload, PayloadError, Trigger};
pub use progress::{JobProgress, JobStage};
pub use pubsub::{Notice, Subscription};
pub use recover::Recovery;
pub use repair::Repair;
pub use settle::{Completion, Settled, MAX_SETTLE_BATCH};
pub use stream::StreamEntry;
pub use throughput::{Throughput, MAX_THROUGHPUT_MINUTES};
pub use workers::{WorkerInfo, WorkerRegistration};
pub use workers_view::WorkerStatus;
