//! End-to-end compactions per second with 1 to 4 `compactor-worker`
//! PROCESSES (the release binary, default concurrency 2 each) sharing one
//! PostgreSQL database (a schema of its own per measurement) and one Redis
//! queue, with an LLM that answers at once (the wiremock fake of the e2e
//! tests, served from this benchmark process on loopback).
//!
//! For each N: W workstreams of 200 messages each (≈ 7k tokens, over an 8k
//! window's trigger) are appended, N workers are started and waited for
//! (`/readyz` 200), then every workstream's compaction is requested at once
//! (`enqueue_many`, as `finalize_turn` would one by one) and the clock runs
//! until the last one is committed (polled every 10 ms).
//!
//! Run:
//! ```text
//! cargo build --release -p compactor-worker
//! cargo bench -p compactor-e2e --bench scale
//! ```
//! `SCALE_BENCH_WORKSTREAMS` (W, default 400), `SCALE_BENCH_MAX_WORKERS`
//! (default 4), `BENCH_RUNS` (default 3); the binary as for the `rss` bench.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::process::Child;
use std::time::{Duration, Instant};

use compactor_e2e::bench::{
    bench_runs, env_or, free_port, result, seed_workstreams, stop_process, until_compacted,
    worker_command,
};
use compactor_e2e::db::TestDb;
use compactor_e2e::{FakeLlm, TestRedis};
use compactor_producer::client::Compactor;
use compactor_producer::queue::Trigger;
use compactor_shared::EntityKey;

fn spawn(db: &TestDb, redis: &TestRedis, llm: &FakeLlm, port: u16) -> Child {
    worker_command(&db.url, redis, &format!("127.0.0.1:{port}"))
        .env_remove("OPENAI_API_KEY")
        .env("COMPACTOR__LLM__PROVIDER", "openai")
        .env("COMPACTOR__LLM__BASE_URL", llm.url())
        .env("COMPACTOR__LLM__MODEL", "fake-model")
        .env("COMPACTOR__ENGINE__TRIGGER__CONTEXT_WINDOW", "8000")
        .env("COMPACTOR__ENGINE__TRIGGER__OUTPUT_RESERVE", "2000")
        .env("COMPACTOR__ENGINE__TRIGGER__SAFETY_MARGIN", "500")
        // One summarization call must fit the 8k window (at most 17,556).
        .env("COMPACTOR__ENGINE__CHUNK__MAX_CHARS", "16000")
        .spawn()
        .unwrap()
}

async fn wait_ready(http: &reqwest::Client, port: u16) {
    let url = format!("http://127.0.0.1:{port}/readyz");
    let since = Instant::now();
    loop {
        if let Ok(r) = http.get(&url).send().await {
            if r.status().is_success() {
                return;
            }
        }
        assert!(since.elapsed() < Duration::from_secs(60), "{url} never 200");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn run_once(http: &reqwest::Client, workers: usize, workstreams: usize) -> f64 {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let client = Compactor::from_parts(
        db.store.clone(),
        redis.queue().await,
        compactor_e2e::small_model(),
    )
    .await;
    let keys = seed_workstreams(&client, workstreams).await;
    let mut children = Vec::new();
    for _ in 0..workers {
        let port = free_port();
        children.push(spawn(&db, &redis, &llm, port));
        wait_ready(http, port).await;
    }
    let requests: Vec<(EntityKey, Trigger)> =
        keys.iter().map(|k| (k.clone(), Trigger::Auto)).collect();
    let started = Instant::now();
    for batch in requests.chunks(1_000) {
        client.queue().enqueue_many(batch).await.unwrap();
    }
    until_compacted(&db, workstreams, Duration::from_millis(10)).await;
    let elapsed = started.elapsed();
    for child in children {
        stop_process(child);
    }
    assert_eq!(
        llm.summaries() as usize,
        workstreams,
        "one LLM call per compaction"
    );
    workstreams as f64 / elapsed.as_secs_f64()
}

fn main() {
    let workstreams = env_or("SCALE_BENCH_WORKSTREAMS", 400usize);
    let max_workers = env_or("SCALE_BENCH_MAX_WORKERS", 4usize);
    let rt = compactor_e2e::bench::runtime();
    rt.block_on(async {
        let http = compactor_e2e::bench::probe_client();
        for _ in 0..bench_runs(3) {
            for workers in 1..=max_workers {
                let rate = run_once(&http, workers, workstreams).await;
                result(
                    "scale",
                    &format!("processes_{workers}"),
                    rate,
                    "compactions/s",
                );
                println!(
                    "end-to-end, {workers} worker process(es) x concurrency 2, PostgreSQL, \
                     {workstreams} workstreams x 200 messages: {rate:.1} compactions/s"
                );
            }
        }
    });
}
