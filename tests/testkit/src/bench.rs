//! What the benchmarks (`*/benches/*.rs`) share: how many runs, reading
//! knobs from the environment, percentiles, the machine-readable lines
//! `bench/run` collects, and process figures from `/proc`.

pub use crate::process::stop_process;

use std::time::Duration;

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

/// The `p` quantile (0.0 to 1.0) of `sorted`, nearest rank.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
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
