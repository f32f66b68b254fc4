//! Logging: `tracing` to stderr, human-readable or JSON, filtered by
//! `[log] level` unless `RUST_LOG` says otherwise. Installed once by the
//! binary; the library only emits.
//!
//! Field conventions, so a log pipeline can compute with them: numbers are
//! logged as numbers (`u64`/`i64`/`bool`, never `u128` or `Debug` text,
//! which the JSON format writes as strings), and a duration is one field
//! in one unit, integer milliseconds named `*_ms` ([`millis`]).

use std::time::Duration;

use tracing_subscriber::EnvFilter;

/// A duration as a log field: whole milliseconds, as a `u64` (what the JSON
/// format writes as a number; `Duration::as_millis` is a `u128`, written as
/// a string).
pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

use crate::settings::{LogFormat, LogSettings};

/// Installs the global subscriber. A second call (tests) does nothing.
pub fn init(settings: &LogSettings) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&settings.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match settings.format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    if installed.is_err() {
        tracing::debug!("a tracing subscriber was already installed");
    }
}
