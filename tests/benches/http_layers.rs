//! Latency of the admin HTTP API's two chat-path reads, through every
//! layer the server puts around a handler (connection handling, body limit,
//! request timeout, long-poll limit, auth): `GET …/context` of a workstream
//! of 40 short messages, and `GET …/wait` when no compaction holds it (the
//! long poll's fast path). One keep-alive client, requests one after the
//! other, so the numbers are per-request overhead plus the handler's
//! database reads, not throughput. A worker through `start_worker` (as the
//! binary builds it), PostgreSQL (127.0.0.1:5432) and Redis
//! (127.0.0.1:6379).
//!
//! Run: `cargo bench -p compactor-e2e --bench http_layers`
//! (`HTTP_BENCH_ITERATIONS`, default 2,000; `BENCH_RUNS`, default 3.)
//! Besides the human line, `BENCH_RESULT` JSON lines per run (p50 / p99).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::time::{Duration, Instant};

use compactor_e2e::bench::{bench_runs, env_or, ms, percentile, result};
use compactor_e2e::db::TestDb;
use compactor_e2e::{chat, settings, start_worker, TestRedis};
use compactor_shared::EntityKey;

/// The time of one `GET url`, the body read whole and checked.
async fn timed_get(http: &reqwest::Client, url: &str) -> Duration {
    let started = Instant::now();
    let response = http.get(url).send().await.unwrap();
    let status = response.status();
    let body = response.bytes().await.unwrap();
    let took = started.elapsed();
    assert!(status.is_success(), "{url}: {status}");
    assert!(!body.is_empty());
    took
}

struct Run {
    context: Vec<Duration>,
    wait: Vec<Duration>,
}

async fn run_once(iterations: usize) -> Run {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let worker = start_worker(settings(&db.url, &redis, None)).await;
    let client = compactor_e2e::client(&db, &redis).await;
    let k = EntityKey::parse("bench", "http").unwrap();
    let messages = chat(40, |i| format!("message {i}: a short line of chat"));
    client.append_messages(&k, messages).await.unwrap();

    let http = reqwest::Client::new();
    let base = worker.admin_url();
    let context_url = format!("{base}/v1/workstreams/bench/http/context");
    let wait_url = format!("{base}/v1/workstreams/bench/http/wait?timeout_ms=1000");
    for _ in 0..50 {
        timed_get(&http, &context_url).await;
        timed_get(&http, &wait_url).await;
    }
    let mut run = Run {
        context: Vec::with_capacity(iterations),
        wait: Vec::with_capacity(iterations),
    };
    for _ in 0..iterations {
        run.context.push(timed_get(&http, &context_url).await);
        run.wait.push(timed_get(&http, &wait_url).await);
    }
    run.context.sort();
    run.wait.sort();
    worker.stop().await;
    run
}

fn main() {
    let iterations = env_or("HTTP_BENCH_ITERATIONS", 2_000usize);
    let rt = compactor_e2e::bench::runtime();
    rt.block_on(async {
        for _ in 0..bench_runs(3) {
            let run = run_once(iterations).await;
            for (route, lat) in [("context", &run.context), ("wait", &run.wait)] {
                result(
                    "http_layers",
                    &format!("{route}_p50"),
                    ms(percentile(lat, 0.50)),
                    "ms",
                );
                result(
                    "http_layers",
                    &format!("{route}_p99"),
                    ms(percentile(lat, 0.99)),
                    "ms",
                );
            }
            println!(
                "admin API ({iterations} requests each, one keep-alive client): \
                 /context p50 {:.3} ms, p99 {:.3} ms; /wait (nothing running) \
                 p50 {:.3} ms, p99 {:.3} ms",
                ms(percentile(&run.context, 0.50)),
                ms(percentile(&run.context, 0.99)),
                ms(percentile(&run.wait, 0.50)),
                ms(percentile(&run.wait, 0.99)),
            );
        }
    });
}
