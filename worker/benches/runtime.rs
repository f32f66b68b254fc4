//! Worker runtime benchmark against a real Redis (127.0.0.1:6379 or
//! `REDIS_URL`), through the whole runtime (apalis worker, backend, lease
//! heartbeat task, acknowledgement), in process:
//!
//! - no-op processing: a backlog of jobs of distinct entities, drained by one
//!   runtime at concurrency 2 and at 50 (jobs/s from the runtime's start to
//!   the last handler call);
//! - pickup latency: an idle runtime (blocked on the wake-up list) and one
//!   request at a time; the time from calling `request_compaction` to the
//!   handler starting.
//!
//! Run: `cargo bench -p compactor-worker --bench runtime`
//! Each scenario runs `BENCH_RUNS` times (default 3) on a fresh queue;
//! min / median / max printed, and one machine-readable `BENCH_RESULT`
//! JSON line per run and measurement (collected by `bench/run`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

/// A queue of its own, deleted on drop, and entity keys (the producer's
/// tests' helpers).
#[path = "../../producer/tests/it/support/queue.rs"]
mod test_queue;
use test_queue::{entity_keys as keys, TestQueue};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use compactor_producer::queue::Trigger;
use compactor_shared::EntityKey;
use compactor_testkit::bench::{bench_runs, percentile, result};
use compactor_testkit::redis_url;
use compactor_worker::runtime::{Job, JobError, JobHandler, Runtime, RuntimeConfig};
use tokio::sync::{mpsc, oneshot};

/// The suite of this benchmark's `BENCH_RESULT` lines.
const SUITE: &str = "runtime";

/// Counts handler calls and reports when the expected number is reached.
struct Counting {
    seen: AtomicUsize,
    expected: usize,
    done: std::sync::Mutex<Option<oneshot::Sender<Instant>>>,
}

/// The bench crate's handle on a shared [`Counting`].
struct Counter(Arc<Counting>);

impl JobHandler for Counter {
    async fn run(&self, _job: Job) -> Result<(), JobError> {
        let this = &self.0;
        if this.seen.fetch_add(1, Ordering::Relaxed) + 1 == this.expected {
            if let Some(tx) = this.done.lock().unwrap().take() {
                let _ = tx.send(Instant::now());
            }
        }
        Ok(())
    }
}

/// Sends the instant each attempt starts.
struct Started(mpsc::UnboundedSender<Instant>);

impl JobHandler for Started {
    async fn run(&self, _job: Job) -> Result<(), JobError> {
        let _ = self.0.send(Instant::now());
        Ok(())
    }
}

fn config(concurrency: usize) -> RuntimeConfig {
    RuntimeConfig {
        name: "bench".to_owned(),
        concurrency,
        ..RuntimeConfig::default()
    }
}

/// CPU seconds used so far by the Redis server (user + sys, `INFO cpu`).
fn redis_cpu() -> f64 {
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let info: String = redis::cmd("INFO").arg("cpu").query(&mut conn).unwrap();
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| *k == "used_cpu_user" || *k == "used_cpu_sys")
        .map(|(_, v)| v.trim().parse::<f64>().unwrap())
        .sum()
}

/// CPU seconds used so far by this process (user + sys, `/proc/self/stat`,
/// in clock ticks of 10 ms).
fn own_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 of the stat line (utime, stime) are 11 and 12 here.
    (ticks(11) + ticks(12)) / 100.0
}

/// One no-op run: jobs per second, and CPU µs per job of Redis and of
/// this process (the worker runtime).
struct Drain {
    per_sec: f64,
    redis_us: f64,
    worker_us: f64,
}

/// Drains a backlog of `n` jobs at `concurrency`.
async fn noop(n: usize, concurrency: usize) -> Drain {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let ks = keys(n);
    for batch in ks.chunks(1_000) {
        let requests: Vec<_> = batch.iter().map(|k| (k.clone(), Trigger::Auto)).collect();
        q.enqueue_many(&requests).await.unwrap();
    }
    let (tx, rx) = oneshot::channel();
    let handler = Counter(Arc::new(Counting {
        seen: AtomicUsize::new(0),
        expected: n,
        done: std::sync::Mutex::new(Some(tx)),
    }));
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let runtime = Runtime::new(q.clone(), config(concurrency), handler).unwrap();
    let (redis0, own0) = (redis_cpu(), own_cpu());
    let start = Instant::now();
    let task = tokio::spawn(runtime.run(async move {
        let _ = stop_rx.await;
    }));
    let finished = rx.await.unwrap();
    let (redis1, own1) = (redis_cpu(), own_cpu());
    let _ = stop_tx.send(());
    task.await.unwrap().unwrap();
    let counts = q.counts().await.unwrap();
    assert_eq!((counts.waiting, counts.running), (0, 0), "all acknowledged");
    drop(t);
    Drain {
        per_sec: n as f64 / (finished - start).as_secs_f64(),
        redis_us: (redis1 - redis0) * 1e6 / n as f64,
        worker_us: (own1 - own0) * 1e6 / n as f64,
    }
}

/// Pickup latencies (sorted) of `n` requests to an idle runtime.
async fn pickup(n: usize) -> Vec<Duration> {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let runtime = Runtime::new(q.clone(), config(2), Started(tx)).unwrap();
    let task = tokio::spawn(runtime.run(async move {
        let _ = stop_rx.await;
    }));
    let ks = keys(n);
    let mut lat = Vec::with_capacity(n);
    // Warm up: connections open, scripts loaded, worker blocked and idle.
    q.request_compaction(&EntityKey::parse("bench", "warm").unwrap(), Trigger::Auto)
        .await
        .unwrap();
    rx.recv().await.unwrap();
    for k in &ks {
        // Let the worker finish acknowledging and go back to its blocking
        // wait, so every request meets an idle worker.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let t = Instant::now();
        q.request_compaction(k, Trigger::Auto).await.unwrap();
        let started = rx.recv().await.unwrap();
        lat.push(started - t);
    }
    let _ = stop_tx.send(());
    task.await.unwrap().unwrap();
    drop(t);
    lat.sort();
    lat
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            std::env::var("RUNTIME_BENCH_THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(2),
        )
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // `RUNTIME_BENCH=noop2|noop50|pickup` runs one scenario only.
        let only = std::env::var("RUNTIME_BENCH").ok();
        let wanted = |name: &str| only.as_deref().is_none_or(|o| o == name);
        for (concurrency, n) in [(2usize, 20_000usize), (50, 40_000)] {
            if !wanted(&format!("noop{concurrency}")) {
                continue;
            }
            let mut runs = Vec::new();
            for _ in 0..bench_runs(3) {
                runs.push(noop(n, concurrency).await);
            }
            for r in &runs {
                result(SUITE, &format!("noop_c{concurrency}"), r.per_sec, "jobs/s");
                result(
                    SUITE,
                    &format!("noop_c{concurrency}_redis_cpu_per_job"),
                    r.redis_us,
                    "µs",
                );
                result(
                    SUITE,
                    &format!("noop_c{concurrency}_worker_cpu_per_job"),
                    r.worker_us,
                    "µs",
                );
            }
            runs.sort_by(|a, b| a.per_sec.total_cmp(&b.per_sec));
            let shown: Vec<String> = runs.iter().map(|r| format!("{:.0}", r.per_sec)).collect();
            let median = &runs[runs.len() / 2];
            println!(
                "no-op jobs, concurrency {concurrency:<2} ({n} jobs)   jobs/s min/median/max {}   \
                 (median run) CPU per job: Redis {:.1} µs, worker {:.1} µs",
                shown.join(" / "),
                median.redis_us,
                median.worker_us
            );
        }
        if !wanted("pickup") {
            return;
        }
        let mut runs = Vec::new();
        for _ in 0..bench_runs(3) {
            runs.push(pickup(1_000).await);
        }
        for lat in &runs {
            result(
                SUITE,
                "pickup_p50",
                percentile(lat, 0.50).as_secs_f64() * 1e3,
                "ms",
            );
            result(
                SUITE,
                "pickup_p99",
                percentile(lat, 0.99).as_secs_f64() * 1e3,
                "ms",
            );
        }
        runs.sort_by_key(|lat| percentile(lat, 0.99));
        let ms = |d: Duration| format!("{:.3}", d.as_secs_f64() * 1e3);
        let p99s: Vec<String> = runs.iter().map(|l| ms(percentile(l, 0.99))).collect();
        let p50s: Vec<String> = runs.iter().map(|l| ms(percentile(l, 0.50))).collect();
        println!(
            "pickup latency, idle worker (1000 requests)  p50 ms {}   p99 ms min/median/max {}",
            p50s.join(" / "),
            p99s.join(" / ")
        );
    });
}
