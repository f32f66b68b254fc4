//! Helpers of the benchmarks (`tests/benches/*.rs`): how many runs
//! (`BENCH_RUNS`), the machine-readable result lines `bench/run` collects,
//! the release `compactor-worker` binary, process memory and free ports.

use std::path::PathBuf;
use std::process::{Child, Command};

use compactor_producer::client::IncomingMessage;
use compactor_shared::Part;

/// Runs per scenario: `BENCH_RUNS`, else `default`.
pub fn bench_runs(default: usize) -> usize {
    env_or("BENCH_RUNS", default)
}

/// An environment variable parsed, else `default`.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One measurement, as a `BENCH_RESULT {json}` line for `bench/report.py`.
pub fn result(suite: &str, metric: &str, value: f64, unit: &str) {
    let line = serde_json::json!({
        "suite": suite,
        "impl": "compactor",
        "metric": metric,
        "value": value,
        "unit": unit,
    });
    println!("BENCH_RESULT {line}");
}

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

/// A field of `/proc/<pid>/status`, in kB (0 when unreadable).
pub fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Stops a worker process gracefully (SIGTERM) and reaps it.
pub fn stop_process(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

/// A loopback port free right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
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
