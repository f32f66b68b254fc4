//! `compactor-worker`: runs compaction jobs from the Redis queue.
//!
//! - [`startup`]: `Application::build(settings, shutdown)` then `run()`,
//!   used by `main` and the tests.
//! - [`http`]: the admin HTTP API (workstream routes, `/metrics`,
//!   `/healthz`, `/readyz`).
//! - [`observability`]: the Prometheus recorder and its buckets.
//! - [`settings`]: every section of the configuration, validated.
//! - [`jobs`]: the compaction job and its summarizer.
//! - [`llm`]: OpenAI-compatible and Anthropic clients with retries.
//! - [`hook`]: the pre-compaction hook (`[hook]`), asked before each
//!   compaction summarizes.
//! - [`outbox`]: compaction events to a Redis Stream and to signed
//!   webhooks, from the transactional outbox.
//! - [`runtime`]: the apalis-based worker runtime (leases, heartbeats,
//!   retries, recovery, graceful shutdown) around a pluggable
//!   [`runtime::JobHandler`].
//! - [`connect`]: connecting at start-up, waiting for Redis.
//! - [`signals`]: SIGTERM / SIGINT as a shutdown future.
//! - [`telemetry`]: the log subscriber.

pub mod connect;
mod events;
pub mod hook;
pub mod http;
pub mod jobs;
pub mod llm;
pub mod observability;
pub mod outbox;
pub mod proxy;
pub mod runtime;
pub mod settings;
pub mod signals;
pub mod startup;
pub mod telemetry;
