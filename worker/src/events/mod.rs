//! What the worker makes observable, vector-style, as the client library
//! does (`compactor_producer::events`): each occurrence is a struct whose
//! one [`InternalEvent::emit`] writes its log line and records its metrics
//! from the same fields, with the names and typed label values of the one
//! catalogue (`compactor_producer::events::catalogue`). Code outside this
//! module records no metric (a test over the source tree, in the producer,
//! checks the whole workspace).
//!
//! # Layout
//!
//! - `queue`: the runtime's dealings with the Redis queue — an operation
//!   failing, a lease lost, an unusable entry, the recovery sweep, the
//!   depth gauges, the pause gauges, a job handed back.
//! - `job`: one attempt's life — started, ended, failed, and the job
//!   completed, retried or dead-lettered.
//! - `compaction`: how a compaction job ended, and its announcement failing.
//! - `http`: an admin API request answered.
//! - `llm`: the LLM clients' requests, tokens, retries, answers, health
//!   and fallbacks.
//! - `hook`: the pre-compaction hook's calls.
//! - `outbox`: the event outbox's relay — events relayed, webhook
//!   deliveries, the backlog gauges, a step failing.
//! - `series`: every series created at zero at start-up (the only place
//!   that names each family and label set up front).

mod compaction;
mod hook;
mod http;
mod job;
mod llm;
mod outbox;
mod proxy;
mod queue;
mod series;

pub(crate) use compactor_producer::events::InternalEvent;

pub(crate) use compaction::{
    Compacted, CompactionConflicted, CompactionFailed, CompactionSkipped, ReleaseNotAnnounced,
};
pub(crate) use hook::HookCalled;
pub(crate) use http::{ConnectionShed, RequestServed};
pub(crate) use job::{
    AttemptEnded, AttemptFailed, AttemptStarted, JobCompleted, JobDeadLettered, RetryScheduled,
};
pub(crate) use llm::{
    AnswerProblem, AnswerRejected, FellBack, LlmHealthChanged, LlmRequestFinished, LlmRetried,
    LlmTokensUsed,
};
pub(crate) use outbox::{DeliveryAttempted, EventsRelayed, OutboxSampled, RelayStepFailed};
pub(crate) use proxy::{create_proxy_series, PromptTokens, ProxyServed};
pub(crate) use queue::{
    DepthSampled, JobHandedBack, LeaseLost, LeasesSwept, PauseSampled, QueueOpFailed,
    UnusableEntryDeadLettered,
};
pub(crate) use series::{
    create_event_series, create_hook_series, create_llm_series, create_series,
};
