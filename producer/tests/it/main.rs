//! The producer's integration tests, one binary (zero2prod's
//! `tests/api/main.rs`): one link of sqlx, redis and tokio instead of one
//! per file. Against the real Redis and databases (see `compactor-testkit`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod lanes;
mod queue;
mod redis_work;
mod store;
mod support;
mod wrong_type;
