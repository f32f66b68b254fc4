//! Queue protocol benchmark against a real Redis (127.0.0.1:6379 or
//! `REDIS_URL`): enqueue latency and throughput, the claim / complete
//! cycle with a no-op "handler" (two round trips per job, or one with
//! `complete_and_claim`), and the pickup latency of a manual request
//! behind a backlog of 10,000 automatic jobs (the urgent lane). This
//! measures the Lua protocol and client alone; the worker runtime (apalis)
//! adds its own overhead on top.
//!
//! Run: `cargo bench -p compactor-producer --bench enqueue`
//! Each scenario runs `BENCH_RUNS` times (default 3) on a fresh queue;
//! min / median / max printed, and one machine-readable `BENCH_RESULT`
//! JSON line per run and measurement (collected by `bench/run`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

/// A queue of its own, deleted on drop, and entity keys (the producer's
/// tests' helpers).
#[path = "../tests/it/support/queue.rs"]
mod test_queue;
use test_queue::{entity_keys as keys, TestQueue};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use compactor_producer::queue::{ClaimOutcome, Trigger};
use compactor_shared::EntityKey;
use compactor_testkit::bench::{bench_runs, percentile, result};
use compactor_testkit::redis_url;
use tokio::sync::mpsc;

/// The suite of this benchmark's `BENCH_RESULT` lines.
const SUITE: &str = "queue";

struct Sample {
    per_sec: f64,
    p50: Option<Duration>,
    p99: Option<Duration>,
}

impl Sample {
    /// `n` operations in `total`, with no latencies measured.
    fn throughput(n: usize, total: Duration) -> Sample {
        Sample {
            per_sec: n as f64 / total.as_secs_f64(),
            p50: None,
            p99: None,
        }
    }
}

fn report(name: &str, metric: &str, samples: &mut [Sample]) {
    for s in samples.iter() {
        result(SUITE, metric, s.per_sec, "ops/s");
        if let (Some(p50), Some(p99)) = (s.p50, s.p99) {
            result(
                SUITE,
                &format!("{metric}_p50"),
                p50.as_secs_f64() * 1e3,
                "ms",
            );
            result(
                SUITE,
                &format!("{metric}_p99"),
                p99.as_secs_f64() * 1e3,
                "ms",
            );
        }
    }
    samples.sort_by(|a, b| a.per_sec.total_cmp(&b.per_sec));
    let rate: Vec<String> = samples
        .iter()
        .map(|s| format!("{:.0}", s.per_sec))
        .collect();
    print!("{name:<46} ops/s min/median/max {}", rate.join(" / "));
    if let (Some(p50), Some(p99)) = (
        samples[samples.len() / 2].p50,
        samples[samples.len() / 2].p99,
    ) {
        print!(
            "   (median run) p50 {:.3} ms, p99 {:.3} ms",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
    println!();
}

/// An automatic request for each of `n` distinct entities, for
/// `enqueue_many`.
fn auto_requests(n: usize) -> Vec<(EntityKey, Trigger)> {
    keys(n).into_iter().map(|k| (k, Trigger::Auto)).collect()
}

async fn sequential(n: usize, same_key: bool) -> Sample {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let ks = keys(if same_key { 1 } else { n });
    let mut lat = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        let k = &ks[if same_key { 0 } else { i }];
        let t = Instant::now();
        q.request_compaction(k, Trigger::Auto).await.unwrap();
        lat.push(t.elapsed());
    }
    let total = start.elapsed();
    drop(t);
    lat.sort();
    Sample {
        p50: Some(percentile(&lat, 0.50)),
        p99: Some(percentile(&lat, 0.99)),
        ..Sample::throughput(n, total)
    }
}

async fn in_flight(n: usize, parallel: usize) -> Sample {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let ks = Arc::new(keys(n));
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..parallel)
        .map(|_| {
            let (q, ks, next) = (q.clone(), ks.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= ks.len() {
                        break;
                    }
                    q.request_compaction(&ks[i], Trigger::Auto).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let total = start.elapsed();
    drop(t);
    Sample::throughput(n, total)
}

async fn bulk(n: usize, batch: usize) -> Sample {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let requests = auto_requests(n);
    let start = Instant::now();
    for chunk in requests.chunks(batch) {
        q.enqueue_many(chunk).await.unwrap();
    }
    let total = start.elapsed();
    drop(t);
    Sample::throughput(n, total)
}

/// `concurrency` loops over `n` waiting jobs: claim, then either
/// `complete` + `claim` (two round trips per job) or `complete_and_claim`
/// (one).
async fn process(n: usize, concurrency: usize, combined: bool) -> Sample {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let requests = auto_requests(n);
    for chunk in requests.chunks(1_000) {
        q.enqueue_many(chunk).await.unwrap();
    }
    let done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|w| {
            let (q, done) = (q.clone(), done.clone());
            tokio::spawn(async move {
                let worker = format!("w{w}");
                let mut next = q.claim(&worker).await.unwrap();
                loop {
                    let job = match next {
                        ClaimOutcome::Claimed(job) => job,
                        ClaimOutcome::Empty { .. } => break,
                        ClaimOutcome::Unusable { .. } => panic!("bench payloads are valid"),
                    };
                    next = if combined {
                        q.complete_and_claim(&job, &worker).await.unwrap().1
                    } else {
                        q.complete(&job).await.unwrap();
                        q.claim(&worker).await.unwrap()
                    };
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let total = start.elapsed();
    assert_eq!(done.load(Ordering::Relaxed), n);
    drop(t);
    Sample::throughput(n, total)
}

/// Pickup latencies (sorted) of `n` manual requests behind a backlog of
/// `backlog` automatic jobs: an idle worker with one free slot, blocked on
/// the queue's wake-up channel, claims once per wake-up; each request is
/// timed from calling `request_compaction` to the claim that leases it
/// returning. The worker completes each job it takes; the backlog (all of
/// it older than every request) waits throughout, so every request meets
/// all of it and is claimed first only because of its lane.
async fn urgent_pickup(n: usize, backlog: usize) -> Vec<Duration> {
    let t = TestQueue::new().await;
    let q = &t.queue;
    for chunk in auto_requests(backlog).chunks(1_000) {
        q.enqueue_many(chunk).await.unwrap();
    }
    let mut wakeups = q.subscribe_wakeups().await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let worker = {
        let q = q.clone();
        tokio::spawn(async move {
            for _ in 0..n {
                wakeups.next(Duration::from_secs(1)).await.unwrap();
                let job = match q.claim("idle").await.unwrap() {
                    ClaimOutcome::Claimed(job) => job,
                    other => panic!("a job after a wake-up: {other:?}"),
                };
                let claimed_at = Instant::now();
                q.complete(&job).await.unwrap();
                tx.send((job.key, claimed_at)).unwrap();
            }
        })
    };
    let manual = Trigger::Manual { instructions: None };
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let k = EntityKey::parse("urgent", &format!("u{i}")).unwrap();
        // Let the worker go back to its blocking wait, so every request
        // meets an idle worker.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let requested_at = Instant::now();
        q.request_compaction(&k, manual.clone()).await.unwrap();
        let (claimed, claimed_at) = rx.recv().await.unwrap();
        assert_eq!(claimed, k, "the manual request is claimed first");
        lat.push(claimed_at - requested_at);
    }
    worker.await.unwrap();
    assert_eq!(
        q.counts().await.unwrap().waiting_normal,
        backlog as u64,
        "the backlog still waits"
    );
    drop(t);
    lat.sort();
    lat
}

/// Runs [`urgent_pickup`] `BENCH_RUNS` times (default 3) and reports its
/// p50 and p99 per run as `urgent_pickup_backlog10k_p50` / `_p99` (ms).
async fn measure_urgent_pickup(n: usize, backlog: usize) {
    let mut runs = Vec::new();
    for _ in 0..bench_runs(3) {
        runs.push(urgent_pickup(n, backlog).await);
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for lat in &runs {
        for (q, name) in [(0.50, "p50"), (0.99, "p99")] {
            let metric = format!("urgent_pickup_backlog10k_{name}");
            result(SUITE, &metric, ms(percentile(lat, q)), "ms");
        }
    }
    runs.sort_by_key(|lat| percentile(lat, 0.99));
    let shown = |q: f64| -> Vec<String> {
        runs.iter()
            .map(|l| format!("{:.3}", ms(percentile(l, q))))
            .collect()
    };
    println!(
        "{:<46} p50 ms {}   p99 ms min/median/max {}",
        format!("manual pickup behind {backlog} auto ({n})"),
        shown(0.50).join(" / "),
        shown(0.99).join(" / ")
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    // On a runtime worker thread, as an application's request handler would
    // be: the future `tokio::main` blocks on runs on the main thread, and
    // every reply would then cross threads to reach it.
    tokio::spawn(run()).await.unwrap();
}

/// Runs `scenario` `BENCH_RUNS` times (default 3), each run on a fresh
/// queue of its own, and reports the runs as `name` and `metric`.
async fn measure<F>(name: &str, metric: &str, mut scenario: impl FnMut() -> F)
where
    F: std::future::Future<Output = Sample>,
{
    let mut samples: Vec<Sample> = Vec::new();
    for _ in 0..bench_runs(3) {
        samples.push(scenario().await);
    }
    report(name, metric, &mut samples);
}

async fn run() {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    println!("queue protocol benchmark, Redis at {}", redis_url());
    measure(
        "enqueue, sequential, new jobs (20k)",
        "enqueue_seq_new",
        || sequential(20_000, false),
    )
    .await;
    measure(
        "enqueue, sequential, one key (coalesced, 20k)",
        "enqueue_seq_coalesced",
        || sequential(20_000, true),
    )
    .await;
    measure(
        "enqueue, 100 in flight (50k)",
        "enqueue_inflight100",
        || in_flight(50_000, 100),
    )
    .await;
    measure(
        "enqueue_many, batches of 500 (100k)",
        "enqueue_bulk500",
        || bulk(100_000, 500),
    )
    .await;
    for concurrency in [2, 50] {
        for combined in [false, true] {
            let how = if combined {
                "complete_and_claim"
            } else {
                "complete, claim"
            };
            let metric = if combined {
                format!("protocol_complete_and_claim_c{concurrency}")
            } else {
                format!("protocol_complete_claim_c{concurrency}")
            };
            measure(
                &format!("{how}, concurrency {concurrency} (20k)"),
                &metric,
                || process(20_000, concurrency, combined),
            )
            .await;
        }
    }
    measure_urgent_pickup(1_000, 10_000).await;
}
