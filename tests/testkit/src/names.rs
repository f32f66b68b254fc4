//! Names no other test uses: tests of several binaries, and several runs,
//! share one Redis and one PostgreSQL, and stay apart by name alone.

use std::sync::atomic::{AtomicU32, Ordering};

/// `<prefix>_<pid>_<counter>_<nanos>`: unique within the process by the
/// counter, across processes by the pid, across runs (a pid reused after a
/// crash left keys behind) by the clock. Lowercase letters, digits and `_`
/// only (given such a prefix): valid as a queue name, a PostgreSQL schema
/// and a file name alike.
pub fn unique_name(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "{prefix}_{}_{}_{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
