//! Latency of the web console's overview (`GET /ui`) with a large done
//! set: the page reads the job counts (`ZCARD`s), completions per minute
//! over the last hour (60 `ZCOUNT`s of the done set, each O(log n)) and the
//! live workers, so its cost should not grow with the done records
//! retained. The done set is filled with `CONSOLE_BENCH_DONE` entries
//! (default 1,000,000) spread over the last 24 hours, as a worker that
//! completed that many jobs with `done_max_count` raised would leave it
//! (the job records themselves are not written: the overview never reads
//! them). One keep-alive client, requests one after the other. A worker
//! through `start_worker` (as the binary builds it), PostgreSQL
//! (127.0.0.1:5432) and Redis (127.0.0.1:6379).
//!
//! Run: `cargo bench -p compactor-e2e --bench console`
//! (`CONSOLE_BENCH_ITERATIONS`, default 1,000; `BENCH_RUNS`, default 3.)
//! Besides the human line, `BENCH_RESULT` JSON lines per run (p50 / p99).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::time::{Duration, Instant};

use compactor_e2e::bench::{bench_runs, env_or, ms, percentile, result};
use compactor_e2e::db::TestDb;
use compactor_e2e::{settings, start_worker, TestRedis};

const DAY_MS: u64 = 24 * 3_600_000;

/// Adds `n` entries to the done set, finished over the last 24 hours
/// (by the Redis server's clock).
async fn fill_done(redis: &TestRedis, n: u64) {
    let queue = redis.queue().await;
    let done = queue.keys().done();
    let mut conn = compactor_testkit::redis::connection(&redis.url).await;
    let (secs, _): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let now_ms = secs * 1_000;
    let batch = 10_000;
    let mut i = 0;
    while i < n {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(&done);
        for j in i..(i + batch).min(n) {
            // Evenly over the day, newest last.
            let finished = now_ms - DAY_MS + (j * DAY_MS) / n;
            zadd.arg(finished).arg(format!("compact:bench:e{j}|{j}"));
        }
        let _: u64 = zadd.query_async(&mut conn).await.unwrap();
        i += batch;
    }
    let count: u64 = redis::cmd("ZCARD")
        .arg(&done)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(count, n);
}

async fn run_once(done: u64, iterations: usize) -> Vec<Duration> {
    let db = TestDb::postgres().await;
    let mut redis = TestRedis::new();
    redis.config.done_max_count = done.max(1) * 2;
    fill_done(&redis, done).await;
    let worker = start_worker(settings(&db.url, &redis, None)).await;
    let http = reqwest::Client::new();
    let url = format!("{}/ui", worker.admin_url());
    let get = || async {
        let started = Instant::now();
        let response = http.get(&url).send().await.unwrap();
        let status = response.status();
        let body = response.text().await.unwrap();
        let took = started.elapsed();
        assert!(status.is_success(), "{status}");
        assert!(body.contains("id=\"count-done\""));
        (took, body)
    };
    let (_, body) = get().await;
    assert!(
        body.contains(&format!(">{}<", thousands(done))),
        "the overview counts the done set"
    );
    for _ in 0..50 {
        get().await;
    }
    let mut times = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        times.push(get().await.0);
    }
    times.sort();
    worker.stop().await;
    times
}

/// `1,000,000` as the overview writes it.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn main() {
    let done = env_or("CONSOLE_BENCH_DONE", 1_000_000u64);
    let iterations = env_or("CONSOLE_BENCH_ITERATIONS", 1_000usize);
    let rt = compactor_e2e::bench::runtime();
    rt.block_on(async {
        for _ in 0..bench_runs(3) {
            let times = run_once(done, iterations).await;
            result(
                "console",
                "overview_p50",
                ms(percentile(&times, 0.50)),
                "ms",
            );
            result(
                "console",
                "overview_p99",
                ms(percentile(&times, 0.99)),
                "ms",
            );
            println!(
                "GET /ui with {done} done records ({iterations} requests, one keep-alive client): \
                 p50 {:.3} ms, p99 {:.3} ms",
                ms(percentile(&times, 0.50)),
                ms(percentile(&times, 0.99)),
            );
        }
    });
}
