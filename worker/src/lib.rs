//! `compactor-worker`: runs compaction jobs from the Redis queue.
//!
//! - [`startup`]: `run(settings, shutdown)`, used by `main` and the tests.
//! - [`settings`]: every section of the configuration, validated.
//! - [`jobs`]: the compaction job and its summarizer.
//! - [`llm`]: OpenAI-compatible and Anthropic clients with retries.
//! - [`runtime`]: the apalis-based worker runtime (leases, heartbeats,
//!   retries, recovery, graceful shutdown) around a pluggable
//!   [`runtime::JobHandler`].
//! - [`connect`]: connecting at start-up, waiting for Redis.
//! - [`signals`]: SIGTERM / SIGINT as a shutdown future.
//! - [`telemetry`]: the log subscriber.

pub mod connect;
pub mod jobs;
pub mod llm;
pub mod runtime;
pub mod settings;
pub mod signals;
pub mod startup;
pub mod telemetry;
