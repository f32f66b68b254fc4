//! End-to-end compactions per second: N workstreams of 200 messages each,
//! all over their trigger, compacted by one worker (started as the binary
//! starts it, concurrency 2 by default) with an LLM that answers at once (a
//! wiremock server on loopback). Measured from the worker's start to the
//! last commit. PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379).
//!
//! Run: `cargo bench -p compactor-e2e --bench compaction`
//! (`E2E_BENCH_WORKSTREAMS` = N, default 200; `E2E_BENCH_CONCURRENCY`, default 2;
//! `E2E_BENCH_DB` = postgres | sqlite, default postgres; `BENCH_RUNS`, default 3.)
//! Besides the human line, one `BENCH_RESULT` JSON line per run.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::time::{Duration, Instant};

use compactor_e2e::bench::{bench_runs, env_or, result, seed_workstreams, until_compacted};
use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{settings, spawn_worker, FakeLlm, TestRedis};
use compactor_producer::client::Compactor;

async fn run_once(backend: Backend, workstreams: usize, concurrency: usize) -> (f64, u32) {
    let db = TestDb::new(backend).await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let mut s = settings(&db.url, &redis, Some(&llm.url()));
    s.worker.concurrency = concurrency;
    // A small model (8k window, trigger at 5.5k tokens): 200 messages
    // (≈ 7k tokens) are over it.
    s.engine.trigger = compactor_e2e::small_model().trigger;
    let client =
        Compactor::from_parts(db.store.clone(), redis.queue().await, s.engine.clone()).await;
    let keys = seed_workstreams(&client, workstreams).await;
    for k in &keys {
        let turn = client.finalize_turn(k, None).await.unwrap();
        assert!(
            matches!(
                turn,
                compactor_producer::client::TurnOutcome::Requested { .. }
            ),
            "{turn:?}"
        );
    }
    let started = Instant::now();
    let worker = spawn_worker(s);
    until_compacted(&db, workstreams, Duration::from_millis(5)).await;
    let elapsed = started.elapsed();
    worker.stop().await;
    (workstreams as f64 / elapsed.as_secs_f64(), llm.summaries())
}

fn main() {
    let backend = match std::env::var("E2E_BENCH_DB").as_deref() {
        Ok("sqlite") => Backend::Sqlite,
        _ => Backend::Postgres,
    };
    let workstreams = env_or("E2E_BENCH_WORKSTREAMS", 200usize);
    let concurrency = env_or("E2E_BENCH_CONCURRENCY", 2usize);
    let rt = compactor_e2e::bench::runtime();
    rt.block_on(async {
        let mut rates = Vec::new();
        let metric = match backend {
            Backend::Postgres => "in_process_postgres",
            Backend::Sqlite => "in_process_sqlite",
        };
        for _ in 0..bench_runs(3) {
            let (rate, calls) = run_once(backend, workstreams, concurrency).await;
            assert_eq!(calls as usize, workstreams, "one LLM call per compaction");
            result("e2e", metric, rate, "compactions/s");
            rates.push(rate);
        }
        rates.sort_by(f64::total_cmp);
        let shown: Vec<String> = rates.iter().map(|r| format!("{r:.1}")).collect();
        println!(
            "end-to-end compactions, {backend:?}, {workstreams} workstreams x 200 messages, \
             concurrency {concurrency}: compactions/s min/median/max {}",
            shown.join(" / ")
        );
    });
}
