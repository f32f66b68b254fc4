//! Helpers of the benchmarks (`tests/benches/*.rs`) that know compactor:
//! the release `compactor-worker` binary and the size of a transcript; the
//! rest (runs, result lines, percentiles, process memory, free ports) is
//! `compactor_testkit::bench`, re-exported here.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use compactor_producer::client::{Compactor, IncomingMessage};
use compactor_shared::{EntityKey, Part};

use crate::db::TestDb;
use crate::{conversation, TestRedis};

pub use compactor_testkit::bench::{
    bench_runs, env_or, ms, percentile, result, status_kb, stop_process,
};
pub use compactor_testkit::free_port;

/// The release `compactor-worker`: `COMPACTOR_WORKER_BIN`, else
/// `$CARGO_TARGET_DIR/release/compactor-worker`, else the workspace's
/// `target/release/compactor-worker`.
pub fn worker_binary() -> PathBuf {
    let path = std::env::var_os("COMPACTOR_WORKER_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(|d| PathBuf::from(d).join("release/compactor-worker"))
        })
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/compactor-worker")
        });
    assert!(
        path.is_file(),
        "build it first: cargo build --release -p compactor-worker ({})",
        path.display()
    );
    path
}

/// The release `compactor-worker` (see [`worker_binary`]) on `db_url` and
/// `redis`'s queue, its admin API on `listen`, logging warnings only (to
/// the benchmark's stderr).
pub fn worker_command(db_url: &str, redis: &TestRedis, listen: &str) -> Command {
    let mut command = Command::new(worker_binary());
    command
        .env("DATABASE_URL", db_url)
        .env("REDIS_URL", &redis.url)
        .env("COMPACTOR__QUEUE__NAME", redis.config.name.as_str())
        .env("COMPACTOR__ADMIN__LISTEN", listen)
        .env("COMPACTOR__LOG__LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    command
}

/// `n` workstreams `bench:w0` to `bench:w<n-1>` of 200 messages each
/// (`conversation(50)`: over [`crate::small_model`]'s trigger).
pub async fn seed_workstreams(client: &Compactor, n: usize) -> Vec<EntityKey> {
    let keys: Vec<EntityKey> = (0..n)
        .map(|i| EntityKey::parse("bench", &format!("w{i}")).unwrap())
        .collect();
    let messages = conversation(50);
    for k in &keys {
        client.append_messages(k, messages.clone()).await.unwrap();
    }
    keys
}

/// Waits until `n` workstreams of `db` were compacted at least once,
/// polling every `poll`; panics after 10 minutes.
pub async fn until_compacted(db: &TestDb, n: usize, poll: Duration) {
    let started = Instant::now();
    loop {
        let done = db
            .scalar("SELECT COUNT(*) AS n FROM workstreams WHERE compactions > 0")
            .await;
        if done as usize == n {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "not done in 10 minutes ({done}/{n})"
        );
        tokio::time::sleep(poll).await;
    }
}

/// Content bytes of messages, counted as the transcript benchmark counts
/// them: text and reasoning, tool call inputs (compact JSON), tool output.
pub fn content_bytes(messages: &[IncomingMessage]) -> usize {
    messages
        .iter()
        .flat_map(|m| &m.parts)
        .map(Part::content_len)
        .sum()
}

/// The benchmarks' async runtime: two worker threads, as the machine the
/// figures in BENCHMARKS.md come from has two cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// An HTTP client for polling a worker's health endpoints: a request that
/// takes longer than 500 ms counts as not answered yet.
pub fn probe_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(500))
        .build()
        .expect("an HTTP client")
}
