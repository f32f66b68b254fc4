//! Start-up time and idle memory of a `compactor-worker` process (the
//! release binary, default settings, extractive summarizer, a migrated
//! SQLite file, the machine's Redis):
//!
//! - start-up: from spawning the process to `/healthz` answering 200 (the
//!   admin API is up) and to `/readyz` answering 200 (Redis and the
//!   database reachable, the runtime polling), polled every millisecond;
//! - idle RSS: `VmRSS` of `/proc/<pid>/status` 3 s after it is ready, with
//!   an empty queue (target ≤ 30 MB).
//!
//! Run:
//! ```text
//! cargo build --release -p compactor-worker
//! cargo bench -p compactor-e2e --bench startup
//! ```
//! `BENCH_RUNS` (default 5); the binary as for the `rss` bench
//! (`COMPACTOR_WORKER_BIN`, `$CARGO_TARGET_DIR/release/…`, `target/release/…`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::time::{Duration, Instant};

use compactor_e2e::bench::{
    bench_runs, free_port, ms, result, status_kb, stop_process, worker_command,
};
use compactor_e2e::db::TestDb;
use compactor_e2e::TestRedis;

/// Polls `url` every millisecond until it answers 200; the time it did.
async fn first_ok(http: &reqwest::Client, url: &str, since: Instant) -> Duration {
    loop {
        if let Ok(r) = http.get(url).send().await {
            if r.status().is_success() {
                return since.elapsed();
            }
        }
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "{url} did not answer 200 within a minute"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

async fn run_once(http: &reqwest::Client) -> (Duration, Duration, u64) {
    let db = TestDb::sqlite().await;
    let redis = TestRedis::new();
    let port = free_port();
    let spawned = Instant::now();
    let child = worker_command(&db.url, &redis, &format!("127.0.0.1:{port}"))
        .spawn()
        .unwrap();
    let pid = child.id();
    let healthy = first_ok(http, &format!("http://127.0.0.1:{port}/healthz"), spawned).await;
    let ready = first_ok(http, &format!("http://127.0.0.1:{port}/readyz"), spawned).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_kb = status_kb(pid, "VmRSS:");
    stop_process(child);
    (healthy, ready, idle_kb)
}

fn main() {
    let rt = compactor_e2e::bench::runtime();
    rt.block_on(async {
        let http = compactor_e2e::bench::probe_client();
        for _ in 0..bench_runs(5) {
            let (healthy, ready, idle_kb) = run_once(&http).await;
            result("startup", "startup_healthz", ms(healthy), "ms");
            result("startup", "startup_readyz", ms(ready), "ms");
            result("startup", "idle_rss", idle_kb as f64 / 1024.0, "MB");
            println!(
                "worker start-up: /healthz 200 after {:.1} ms, /readyz 200 after {:.1} ms; \
                 idle RSS {:.1} MB",
                ms(healthy),
                ms(ready),
                idle_kb as f64 / 1024.0
            );
        }
    });
}
