//! `compactor-worker`. The queue runtime (apalis over Redis), storage and
//! LLM clients are not built yet; until they are, the binary says so and
//! exits non-zero rather than pretending to process jobs.

use std::process::ExitCode;

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("--version" | "-V") => {
            println!("compactor-worker {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "compactor-worker {}: the queue runtime is not part of this build yet; \
                 only the compaction engine (crate compactor-shared) is",
                env!("CARGO_PKG_VERSION")
            );
            ExitCode::from(2)
        }
    }
}
