//! Chaos: real `compactor-worker` processes compacting real workstreams
//! (PostgreSQL, Redis, an LLM faked on loopback) while what production
//! does to a fleet happens to them — workers killed with SIGKILL, Redis
//! restarted, the database cut off for 20 s, the LLM hanging, resetting
//! connections and answering garbage, a rolling restart, a worker killed while its
//! event deliveries are in flight, a worker killed while an operator has
//! paused the queue. After each, the
//! invariants of [`harness::check_invariants`] must hold: no job lost, no
//! workstream compacted twice or by two runs at once, no lease left held,
//! no half-written commit. Each scenario prints a `CHAOS |` report line
//! (jobs, retries, recoveries, time to recover).
//!
//! The scenarios run one at a time (they share the machine's two cores);
//! each is bounded in time and cleans up after itself.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test code: a panic is a failed test

mod db_outage;
mod events_kill;
mod harness;
mod kill;
mod llm_chaos;
mod pause_kill;
mod redis_restart;
mod rolling_restart;

/// One scenario at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
