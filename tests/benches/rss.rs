//! Peak memory of a `compactor-worker` process compacting one workstream of
//! 1,000,000 messages (target: ≤ 256 MB), and its idle memory before the
//! job. The worker runs as its own process (the release binary), so the
//! benchmark's own memory (it generates and appends the messages) is not
//! counted: its peak is read from `/proc/<pid>/status` (`VmHWM`).
//!
//! Run:
//! ```text
//! cargo build --release -p compactor-worker
//! cargo bench -p compactor-e2e --bench rss
//! ```
//! `RSS_BENCH_MESSAGES` (default 1,000,000, a multiple of 4),
//! `RSS_BENCH_DB` = sqlite | postgres (default sqlite, the embedded default),
//! `BENCH_RUNS` (default 1: each run appends the workstream anew). The
//! worker binary is `COMPACTOR_WORKER_BIN`, else
//! `$CARGO_TARGET_DIR/release/compactor-worker`, else `target/release/…`.
//! Besides the human lines, one `BENCH_RESULT` JSON line per run and
//! measurement (collected by `bench/run`): peak and idle RSS, compaction
//! time, and MB/s of message content compacted (streamed from the
//! database, extracted, chunked, summarized extractively, committed).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::time::{Duration, Instant};

use compactor_e2e::bench::{
    bench_runs, content_bytes, env_or, result, status_kb, stop_process, worker_binary,
    worker_command,
};
use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{conversation, TestRedis};
use compactor_shared::EntityKey;

fn main() {
    let messages: usize = env_or("RSS_BENCH_MESSAGES", 1_000_000);
    let backend = match std::env::var("RSS_BENCH_DB").as_deref() {
        Ok("postgres") => Backend::Postgres,
        _ => Backend::Sqlite,
    };
    let rt = compactor_e2e::bench::runtime();
    for _ in 0..bench_runs(1) {
        rt.block_on(run_once(messages, backend));
    }
}

async fn run_once(messages: usize, backend: Backend) {
    // Fails now, before the long set-up, if the release binary is missing.
    worker_binary();
    let db = TestDb::new(backend).await;
    let redis = TestRedis::new();
    let client = compactor_e2e::client(&db, &redis).await;
    let k = EntityKey::parse("bench", "huge").unwrap();
    let started = Instant::now();
    let mut bytes = 0;
    for batch in conversation(messages / 4).chunks(10_000) {
        bytes += content_bytes(batch);
        client.append_messages(&k, batch.to_vec()).await.unwrap();
    }
    println!(
        "appended {messages} messages ({backend:?}) in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let child = worker_command(&db.url, &redis, "127.0.0.1:0")
        .env("COMPACTOR__WORKER__LOCK_DURATION", "1h")
        .spawn()
        .unwrap();
    let pid = child.id();
    // Idle: connected, waiting for work.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_kb = status_kb(pid, "VmRSS:");

    let started = Instant::now();
    client.compact_now(&k, None).await.unwrap();
    let mut samples = Vec::new();
    loop {
        samples.push(status_kb(pid, "VmRSS:"));
        if client.status(&k).await.unwrap().compactions > 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1_800),
            "the compaction did not finish"
        );
        // Often enough to time a 10k-message compaction (≈ 0.1 s).
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    let peak_kb = status_kb(pid, "VmHWM:");
    stop_process(child);
    let run = &db.store.runs(&k, 1).await.unwrap()[0];
    println!(
        "compacted {} messages in {:.1} s ({} chunks, tokens {} → {})",
        run.run.messages_compacted,
        elapsed.as_secs_f64(),
        run.run.chunks,
        run.run.tokens_before,
        run.run.tokens_after
    );
    println!(
        "worker RSS: idle {:.1} MB, peak {:.1} MB (VmHWM), largest sample {:.1} MB",
        idle_kb as f64 / 1024.0,
        peak_kb as f64 / 1024.0,
        samples.iter().copied().max().unwrap_or(0) as f64 / 1024.0
    );
    let mb_per_s = bytes as f64 / 1e6 / elapsed.as_secs_f64();
    println!(
        "{:.1} MB of message content compacted at {mb_per_s:.1} MB/s",
        bytes as f64 / 1e6
    );
    let size = match messages {
        n if n % 1_000_000 == 0 => format!("{}m", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    };
    // SQLite (the embedded default) keeps the plain names; PostgreSQL's
    // figures are suffixed, so one `bench/run` can record both.
    let size = match backend {
        Backend::Sqlite => size,
        Backend::Postgres => format!("{size}_postgres"),
    };
    result(
        "rss",
        &format!("peak_rss_{size}"),
        peak_kb as f64 / 1024.0,
        "MB",
    );
    result(
        "rss",
        &format!("idle_rss_{size}"),
        idle_kb as f64 / 1024.0,
        "MB",
    );
    result(
        "rss",
        &format!("compaction_s_{size}"),
        elapsed.as_secs_f64(),
        "s",
    );
    result("rss", &format!("compaction_mb_s_{size}"), mb_per_s, "MB/s");
    result(
        "rss",
        &format!("content_mb_{size}"),
        bytes as f64 / 1e6,
        "MB",
    );
}
