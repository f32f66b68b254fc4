//! The end-to-end tests, one binary (zero2prod's `tests/api/main.rs`):
//! one link of the whole workspace instead of one per file. Their helpers
//! are the crate's library (`compactor_e2e`, on `compactor-testkit`).
//!
//! One process means shared globals: the metrics recorder is installed
//! once (`observability::install`, by whichever test starts a worker
//! first) and every test's series sit in it, so a test that asserts
//! metrics filters by a label value of its own (its queue, its domain).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod bad_input;
mod branches;
mod cluster;
mod compaction;
mod console;
mod context;
mod dead_letters;
mod dead_letters_http;
mod deploy;
mod docs;
mod events;
mod evidence;
mod fencing;
mod hook;
mod http;
mod lifecycle;
mod llm_faults;
mod pause;
mod priority;
mod proxy;
mod quality;
mod queue_control;
mod queue_http;
mod queue_jobs;
mod recall;
mod reconcile;
mod waiting;
mod workstream_list;

/// The worker's test helpers (a handler made of a closure, short timings,
/// waiting for a job's state), for the cluster tests that run the worker
/// runtime on a Redis Cluster.
#[path = "../../../worker/tests/it/support/mod.rs"]
mod worker_support;
