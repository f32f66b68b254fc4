//! The worker's integration tests, one binary (zero2prod's
//! `tests/api/main.rs`): one link of sqlx, axum, reqwest and wiremock
//! instead of one per file. Tests that spawn the worker or the CLI use
//! `CARGO_BIN_EXE_*`, which every integration test of this package gets.
//!
//! One process means shared globals: the metrics recorder is installed
//! once (`observability::install`) and every test's series sit in it, so a
//! test that asserts metrics filters by a label value of its own (its
//! queue, its domain).
//!
//! The chaos suite (`tests/chaos`, target `chaos`) stays a binary of its
//! own: its scenarios run one at a time and for minutes, and are run on
//! their own (`cargo test -p compactor-worker --test chaos`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod cli;
mod default_config;
mod flood;
mod llm;
mod processes;
mod queue_cli;
mod queue_metrics;
mod recall_cli;
mod runtime;
mod settings;
mod startup;
mod startup_probe;
mod support;
