//! Printing results: text for people, or one JSON document for scripts.

use std::process::ExitCode;

use serde::Serialize;

/// Exit code when the command's answer is "no".
pub(crate) const NO: u8 = 1;
/// Exit code for bad usage or configuration.
pub(crate) const USAGE: u8 = 2;
/// Exit code when the database or Redis failed.
pub(crate) const UNAVAILABLE: u8 = 3;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Output {
    pub(crate) json: bool,
}

impl Output {
    /// Prints `value` as JSON, or `text` (built lazily) for people.
    pub(crate) fn print<T: Serialize>(&self, value: &T, text: impl FnOnce() -> String) {
        if self.json {
            match serde_json::to_string_pretty(value) {
                Ok(json) => println!("{json}"),
                Err(e) => eprintln!("compactor: cannot render JSON: {e}"),
            }
        } else {
            let text = text();
            if !text.is_empty() {
                println!("{}", text.trim_end());
            }
        }
    }

    /// Reports an error and returns `exit` as the exit code. With `--json`
    /// it is also printed as `{"error": {"code": …, "message": …}}`, the
    /// shape and the codes of the admin HTTP API's errors (`invalid_key`,
    /// `unknown_workstream`, `redis_unavailable`, …; see `failure::codes`),
    /// so a script reads the same words from either.
    pub(crate) fn fail(&self, exit: u8, code: &str, message: impl std::fmt::Display) -> ExitCode {
        if self.json {
            println!(
                "{}",
                serde_json::json!({"error": {"code": code, "message": message.to_string()}})
            );
        }
        eprintln!("compactor: {message}");
        ExitCode::from(exit)
    }
}
