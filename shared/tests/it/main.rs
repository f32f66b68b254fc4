//! The shared crate's integration tests, one binary (zero2prod's
//! `tests/api/main.rs`): the engine end to end, its properties, and
//! `config/default.toml` against the code. No I/O: the testkit is used
//! without its Redis, database and LLM features.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod default_config;
mod framing;
mod planted_facts;
mod properties;
mod stated_survival;
