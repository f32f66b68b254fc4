//! Listing jobs in a deep backlog: 100,000 waiting jobs (automatic
//! requests, the normal lane), and the time of one page of 50 — the first
//! page, and a deep page (after 99,000 jobs, reached by its cursor) — plus
//! a job looked up by id, through `Queue::list_jobs` and `Queue::job`, one
//! script call each. Redis at 127.0.0.1:6379 (`REDIS_URL`); the queue is
//! one of its own, deleted afterwards.
//!
//! Run: `cargo bench -p compactor-e2e --bench queue_jobs`
//! (`JOBS_BENCH_WAITING`, default 100,000; `JOBS_BENCH_ITERATIONS`,
//! default 1,000; `BENCH_RUNS`, default 3.) Target: p99 ≤ 20 ms per page.
//! Besides the human line, `BENCH_RESULT` JSON lines per run (p50 / p99).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::time::{Duration, Instant};

use compactor_e2e::bench::{bench_runs, env_or, ms, percentile, result};
use compactor_e2e::TestRedis;
use compactor_producer::queue::{JobCursor, JobView, Queue, Trigger};
use compactor_shared::EntityKey;

const PAGE: usize = 50;

/// Fills the queue with `n` waiting jobs, 1,000 requests per round trip.
async fn fill(q: &Queue, n: usize) {
    let requests: Vec<(EntityKey, Trigger)> = (0..n)
        .map(|i| {
            (
                EntityKey::parse("bench", &format!("e{i}")).unwrap(),
                Trigger::Auto,
            )
        })
        .collect();
    for chunk in requests.chunks(1_000) {
        q.enqueue_many(chunk).await.unwrap();
    }
}

/// The cursor after the first `skip` waiting jobs (pages of 500).
async fn cursor_after(q: &Queue, skip: usize) -> JobCursor {
    let mut cursor: Option<JobCursor> = None;
    let mut seen = 0;
    while seen < skip {
        let limit = (skip - seen).min(500);
        let page = q
            .list_jobs(JobView::Waiting, limit, cursor.as_ref())
            .await
            .unwrap();
        seen += page.jobs.len();
        cursor = Some(JobCursor::parse(&page.next_cursor.unwrap()).unwrap());
    }
    cursor.unwrap()
}

/// `iterations` timings of `op`, sorted.
async fn time<F, Fut>(iterations: usize, mut op: F) -> Vec<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut out = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let started = Instant::now();
        op().await;
        out.push(started.elapsed());
    }
    out.sort();
    out
}

fn main() {
    let waiting = env_or("JOBS_BENCH_WAITING", 100_000usize);
    let iterations = env_or("JOBS_BENCH_ITERATIONS", 1_000usize);
    let rt = compactor_e2e::bench::runtime();
    rt.block_on(async {
        let redis = TestRedis::new();
        let q = redis.queue().await;
        let filled = Instant::now();
        fill(&q, waiting).await;
        eprintln!("filled {waiting} waiting jobs in {:?}", filled.elapsed());
        let deep = cursor_after(&q, waiting.saturating_sub(1_000)).await;
        let some_id = q
            .list_jobs(JobView::Waiting, 1, Some(&deep))
            .await
            .unwrap()
            .jobs[0]
            .job_id;
        for _ in 0..bench_runs(3) {
            let first = time(iterations, || async {
                let page = q.list_jobs(JobView::Waiting, PAGE, None).await.unwrap();
                assert_eq!(page.jobs.len(), PAGE);
            })
            .await;
            let deep_page = time(iterations, || async {
                let page = q
                    .list_jobs(JobView::Waiting, PAGE, Some(&deep))
                    .await
                    .unwrap();
                assert_eq!(page.jobs.len(), PAGE);
            })
            .await;
            let lookup = time(iterations, || async {
                assert!(q.job(some_id).await.unwrap().is_some());
            })
            .await;
            for (metric, lat) in [
                ("first_page", &first),
                ("deep_page", &deep_page),
                ("lookup", &lookup),
            ] {
                result(
                    "queue_jobs",
                    &format!("{metric}_p50"),
                    ms(percentile(lat, 0.50)),
                    "ms",
                );
                result(
                    "queue_jobs",
                    &format!("{metric}_p99"),
                    ms(percentile(lat, 0.99)),
                    "ms",
                );
            }
            println!(
                "queue_jobs: {waiting} waiting, page of {PAGE}: first p50 {:.2} ms p99 {:.2} ms; \
                 deep p50 {:.2} ms p99 {:.2} ms; lookup by id p50 {:.2} ms p99 {:.2} ms",
                ms(percentile(&first, 0.50)),
                ms(percentile(&first, 0.99)),
                ms(percentile(&deep_page, 0.50)),
                ms(percentile(&deep_page, 0.99)),
                ms(percentile(&lookup, 0.50)),
                ms(percentile(&lookup, 0.99)),
            );
        }
    });
}
