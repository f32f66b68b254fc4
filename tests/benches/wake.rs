//! Waiter wake-up latency: a chat request blocked in `Compactor::wait`
//! while a compaction holds the workstream's lease, and the time from the
//! release to the wait returning. Each iteration does what a worker does
//! at the end of a compaction — `release_lease` in the database, then
//! `publish_release` on Redis — while a waiter (the `Compactor` client, its
//! one pattern subscription per process) is blocked; the waiter then
//! re-reads the workstream (and, in the default `requested` mode, the job's
//! progress in Redis: one script call) and returns. PostgreSQL (127.0.0.1:5432) and
//! Redis (127.0.0.1:6379); waiter and "worker" are tasks of this process,
//! on separate connections.
//!
//! Two latencies per iteration:
//! - `from_announcement`: from the lease released (the database write
//!   returned, the announcement about to be sent) to the wait returning;
//! - `from_release_start`: from the start of the `release_lease` write.
//!
//! Run: `cargo bench -p compactor-e2e --bench wake`
//! (`WAKE_BENCH_ITERATIONS`, default 1,000; `BENCH_RUNS`, default 3;
//! `WAKE_BENCH_MODE`, `requested` (default, suite `wake`) or `running`
//! (suite `wake_running`).)
//! Besides the human line, `BENCH_RESULT` JSON lines per run (p50 / p99).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::time::{Duration, Instant};

use compactor_e2e::bench::{bench_runs, env_or, ms, percentile, result};
use compactor_e2e::db::TestDb;
use compactor_e2e::{compaction_event, still_waiting, TestRedis};
use compactor_producer::client::{Compactor, IncomingMessage, Readiness, WaitMode};
use compactor_producer::events::EventOutcome;
use compactor_producer::store::LeaseTaken;
use compactor_shared::{EntityKey, Role};

struct Run {
    from_announcement: Vec<Duration>,
    from_release_start: Vec<Duration>,
    /// Waits that returned without the announcement's event (woken by
    /// something else: a resync, or the lease seen free at once).
    without_event: usize,
}

async fn run_once(iterations: usize, mode: WaitMode) -> Run {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let engine = compactor_shared::config::EngineConfig::default();
    // The waiting side: a client with its own queue connection and release
    // subscription.
    let waiter = Compactor::from_parts(db.store.clone(), redis.queue().await, engine).await;
    // The releasing side: a worker's own queue connection.
    let worker_queue = redis.queue().await;
    let k = EntityKey::parse("bench", "wake").unwrap();
    waiter
        .append_messages(&k, vec![IncomingMessage::text(Role::User, "hi")])
        .await
        .unwrap();
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    let event = compaction_event("bench", "wake", EventOutcome::Compacted, 1);
    // Warm up: subscription established, connections and statements ready.
    let warm = waiter
        .wait_until_ready(&k, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(matches!(warm, Readiness::Ready { .. }), "{warm:?}");

    let mut run = Run {
        from_announcement: Vec::with_capacity(iterations),
        from_release_start: Vec::with_capacity(iterations),
        without_event: 0,
    };
    for _ in 0..iterations {
        let taken = db
            .store
            .take_lease(ws.id, "bench-worker", Duration::from_secs(60))
            .await
            .unwrap();
        assert!(matches!(taken, LeaseTaken::Taken { .. }), "{taken:?}");
        let mut task = {
            let (c, k) = (waiter.clone(), k.clone());
            tokio::spawn(async move {
                let r = c.wait(&k, mode, Duration::from_secs(30)).await;
                (r, Instant::now())
            })
        };
        // Let the waiter read the lease and block on the announcement.
        assert!(
            still_waiting(&mut task, Duration::from_millis(10)).await,
            "the waiter waits while the lease is held"
        );
        let release_start = Instant::now();
        assert!(db.store.release_lease(ws.id, "bench-worker").await.unwrap());
        let released = Instant::now();
        worker_queue.publish_release(&k, &event).await.unwrap();
        let (readiness, woke) = task.await.unwrap();
        match readiness.unwrap() {
            // The announced event says the run committed.
            Readiness::Compacted { .. } => {}
            Readiness::Ready { .. } => run.without_event += 1,
            other => panic!("{other:?}"),
        }
        run.from_announcement.push(woke - released);
        run.from_release_start.push(woke - release_start);
    }
    run.from_announcement.sort();
    run.from_release_start.sort();
    run
}

fn main() {
    let iterations = env_or("WAKE_BENCH_ITERATIONS", 1_000usize);
    let (mode, suite) = match std::env::var("WAKE_BENCH_MODE").as_deref() {
        Ok("running") => (WaitMode::Running, "wake_running"),
        Ok("requested") | Err(_) => (WaitMode::Requested, "wake"),
        Ok(other) => panic!("WAKE_BENCH_MODE: requested or running, not {other:?}"),
    };
    let rt = compactor_e2e::bench::runtime();
    rt.block_on(async {
        for _ in 0..bench_runs(3) {
            let run = run_once(iterations, mode).await;
            let (a, r) = (&run.from_announcement, &run.from_release_start);
            for (metric, lat) in [("from_announcement", a), ("from_release_start", r)] {
                result(
                    suite,
                    &format!("{metric}_p50"),
                    ms(percentile(lat, 0.50)),
                    "ms",
                );
                result(
                    suite,
                    &format!("{metric}_p99"),
                    ms(percentile(lat, 0.99)),
                    "ms",
                );
                result(
                    suite,
                    &format!("{metric}_max"),
                    ms(lat[lat.len() - 1]),
                    "ms",
                );
            }
            result(suite, "without_event", run.without_event as f64, "waits");
            println!(
                "waiter wake-up after release ({iterations} waits, mode {}): from the announcement \
                 p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms; from the start of the release write \
                 p50 {:.3} ms, p99 {:.3} ms; {} returned without the event",
                mode.as_str(),
                ms(percentile(a, 0.50)),
                ms(percentile(a, 0.99)),
                ms(a[a.len() - 1]),
                ms(percentile(r, 0.50)),
                ms(percentile(r, 0.99)),
                run.without_event
            );
        }
    });
}
