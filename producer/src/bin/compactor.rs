//! The `compactor` operator CLI. Its commands (migrate, enqueue, status,
//! dlq, demo, …) arrive with the queue, storage and operator-surface work;
//! until then it only reports its version.

use std::process::ExitCode;

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("--version" | "-V") => {
            println!("compactor {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "compactor {}: no commands are available yet in this build; see README.md",
                env!("CARGO_PKG_VERSION")
            );
            ExitCode::from(2)
        }
    }
}
