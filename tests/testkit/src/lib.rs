//! The workspace's test kit: what the integration tests and benchmarks of
//! every crate need from the world around them, written once.
//!
//! # Layout
//! - [`names`]: names no other test (or run) uses, for queues, schemas and
//!   files — how tests share one Redis and one PostgreSQL in parallel.
//! - [`redis`]: the machine's Redis ([`redis_url`]), deleting a key prefix,
//!   and [`PrivateRedis`], a `redis-server` of a test's own that it may
//!   stop and restart.
//! - [`ports`]: loopback ports free right now, and why they are only a hint.
//! - [`process`]: stopping the processes a test started.
//! - [`db`]: [`TestDatabase`], a PostgreSQL schema or a SQLite file per test,
//!   removed on drop.
//! - [`llm`]: [`FakeLlm`], an OpenAI-compatible server on loopback that
//!   answers in the summary format and fails on request.
//! - [`wait`]: [`eventually`] and [`eventually_some`], polling a condition
//!   (or for a value) within a time limit.
//! - [`turns`]: [`one_at_a_time`], starting things (jobs) each only once
//!   the one before is finished.
//! - [`config`]: `config/default.toml` and its key paths.
//! - [`bench`]: how many runs a benchmark makes, percentiles, and the
//!   `BENCH_RESULT` lines `bench/run` collects.
//!
//! It depends on no compactor crate: the producer's own tests use it, and
//! a dev-dependency on a crate that depends on the producer would build
//! the producer twice and make its types two different types. Helpers
//! that need `Queue` or `Store` stay in that crate's test module, built on
//! these. The I/O modules are cargo features (`redis`, `db`, `llm`, on by
//! default) so that the pure crate's tests can use the rest cheaply.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic is a failed test

pub mod bench;
pub mod config;
#[cfg(feature = "db")]
pub mod db;
#[cfg(feature = "llm")]
pub mod llm;
pub mod names;
pub mod ports;
pub mod process;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "async")]
pub mod turns;
#[cfg(feature = "async")]
pub mod wait;

#[cfg(feature = "db")]
pub use db::{Backend, TestDatabase};
#[cfg(feature = "llm")]
pub use llm::{FakeLlm, Fault};
pub use names::unique_name;
pub use ports::free_port;
#[cfg(feature = "redis")]
pub use redis::{redis_url, PrivateRedis};
#[cfg(feature = "async")]
pub use turns::one_at_a_time;
#[cfg(feature = "async")]
pub use wait::{eventually, eventually_some, within};
