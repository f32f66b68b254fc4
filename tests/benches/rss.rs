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
//! `RSS_BENCH_DB` = sqlite | postgres (default sqlite, the embedded default).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{conversation, TestRedis};
use compactor_producer::client::Compactor;
use compactor_shared::config::EngineConfig;
use compactor_shared::EntityKey;

fn worker_binary() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/compactor-worker");
    assert!(
        path.is_file(),
        "build it first: cargo build --release -p compactor-worker ({})",
        path.display()
    );
    path
}

/// A field of `/proc/<pid>/status`, in kB.
fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

fn main() {
    let messages: usize = std::env::var("RSS_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let backend = match std::env::var("RSS_BENCH_DB").as_deref() {
        Ok("postgres") => Backend::Postgres,
        _ => Backend::Sqlite,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let binary = worker_binary();
        let db = TestDb::new(backend).await;
        let redis = TestRedis::new();
        let client = Compactor::from_parts(
            db.store.clone(),
            redis.queue().await,
            EngineConfig::default(),
        )
        .await;
        let k = EntityKey::parse("bench", "huge").unwrap();
        let started = Instant::now();
        for batch in conversation(messages / 4).chunks(10_000) {
            client.append_messages(&k, batch.to_vec()).await.unwrap();
        }
        println!(
            "appended {messages} messages ({backend:?}) in {:.1} s",
            started.elapsed().as_secs_f64()
        );

        let child = Command::new(&binary)
            .env("DATABASE_URL", &db.url)
            .env("REDIS_URL", &redis.url)
            .env("COMPACTOR__QUEUE__NAME", redis.config.name.as_str())
            .env("COMPACTOR__ADMIN__LISTEN", "127.0.0.1:0")
            .env("COMPACTOR__WORKER__LOCK_DURATION", "1h")
            .env("COMPACTOR__LOG__LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
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
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let elapsed = started.elapsed();
        let peak_kb = status_kb(pid, "VmHWM:");
        stop(child);
        let run = &db.store.runs(&k, 1).await.unwrap()[0];
        println!(
            "compacted {} messages in {:.1} s ({} chunks, tokens {} → {})",
            run.messages_compacted,
            elapsed.as_secs_f64(),
            run.chunks,
            run.tokens_before,
            run.tokens_after
        );
        println!(
            "worker RSS: idle {:.1} MB, peak {:.1} MB (VmHWM), largest sample {:.1} MB",
            idle_kb as f64 / 1024.0,
            peak_kb as f64 / 1024.0,
            samples.iter().copied().max().unwrap_or(0) as f64 / 1024.0
        );
    });
}
