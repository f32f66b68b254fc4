//! Helpers of the benchmarks (`tests/benches/*.rs`) that know compactor:
//! the release `compactor-worker` binary and the size of a transcript; the
//! rest (runs, result lines, percentiles, process memory, free ports) is
//! `compactor_testkit::bench`, re-exported here.

use std::path::PathBuf;

use compactor_producer::client::IncomingMessage;
use compactor_shared::Part;

pub use compactor_testkit::bench::{
    bench_runs, env_or, ms, percentile, result, status_kb, stop_process,
};
pub use compactor_testkit::free_port;

/// The release `compactor-worker`: `COMPACTOR_WORKER_BIN`, else
/// `$CARGO_TARGET_DIR/release/compactor-worker`, else the workspace's
/// `target/release/compactor-worker`.
pub fn worker_binary() -> PathBuf {
    let path = std::env::var_os("COMPACTOR_WORKER_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(|d| PathBuf::from(d).join("release/compactor-worker"))
        })
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/compactor-worker")
        });
    assert!(
        path.is_file(),
        "build it first: cargo build --release -p compactor-worker ({})",
        path.display()
    );
    path
}

/// Content bytes of messages, counted as the transcript benchmark counts
/// them: text and reasoning, tool call inputs (compact JSON), tool output.
pub fn content_bytes(messages: &[IncomingMessage]) -> usize {
    messages
        .iter()
        .flat_map(|m| &m.parts)
        .map(|p| match p {
            Part::Text { text } | Part::Reasoning { text } => text.len(),
            Part::ToolCall { input, .. } => input.to_string().len(),
            Part::ToolResult { output, .. } => output.len(),
            Part::File { uri, .. } => uri.len(),
        })
        .sum()
}

/// The benchmarks' async runtime: two worker threads, as the machine the
/// figures in BENCHMARKS.md come from has two cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// An HTTP client for polling a worker's health endpoints: a request that
/// takes longer than 500 ms counts as not answered yet.
pub fn probe_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(500))
        .build()
        .expect("an HTTP client")
}
