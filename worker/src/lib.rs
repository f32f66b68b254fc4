//! `compactor-worker`: runs compaction jobs from the Redis queue.
//!
//! - [`runtime`]: the apalis-based worker runtime (leases, heartbeats,
//!   retries, recovery, graceful shutdown) around a pluggable
//!   [`runtime::JobHandler`].
//! - [`connect`]: connecting at start-up, waiting for Redis.
//! - [`signals`]: SIGTERM / SIGINT as a shutdown future.

pub mod connect;
pub mod llm;
pub mod runtime;
pub mod signals;
