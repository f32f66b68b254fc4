//! The chat path at scale: what a chat backend pays per turn.
//!
//! - **Append throughput**: messages/s appended in batches of 100 (the
//!   coding conversation of the e2e tests: text, tool calls, tool results),
//!   over HTTP (`POST …/messages`, keep-alive) and through the Rust client
//!   (`Compactor::append_messages`), by 1 and by 8 concurrent writers, each
//!   on a workstream of its own. A worker runs meanwhile, as in production:
//!   workstreams that pass their trigger are compacted while appends go on.
//! - **`build_context` and `GET …/context`** p50/p99 on a workstream of 1k,
//!   10k and 100k un-compacted messages (seeded below the client, so no
//!   compaction is requested; the reconciliation sweep is off), one reader,
//!   requests one after the other, each after a new message is appended (a
//!   chat turn's: the history a read returns is never the one the read
//!   before it returned).
//! - **`/wait` overhead**: `GET …/wait` with nothing running, p50/p99.
//!
//! Run:
//! ```text
//! cargo bench -p compactor-e2e --bench chat_path
//! ```
//! `CHAT_BENCH_CONTEXT_CACHE_BYTES` sets the worker's and the client's
//! `[database] context_cache_bytes` (0: no history kept between reads, the
//! read before there was a cache). `CHAT_BENCH_DB` (`postgres`, default, or `sqlite`), `CHAT_BENCH_SIZES`
//! (default `1000 10000 100000`), `CHAT_BENCH_ITERATIONS` (reads per size,
//! default 300, fewer past 10k messages: 3,000,000 / size, at least 20), `CHAT_BENCH_APPENDS` (messages per writer, default
//! 10,000), `BENCH_RUNS` (default 1). Targets (issue 17): `/context` p99
//! ≤ 5 ms at 10k messages on PostgreSQL, append ≥ 20k messages/s in
//! batches of 100 over HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::time::{Duration, Instant};

use compactor_e2e::bench::{bench_runs, env_or, ms, percentile, result};
use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{conversation, settings, start_worker, TestRedis};
use compactor_producer::client::{Compactor, IncomingMessage};
use compactor_producer::settings::DatabaseSettings;
use compactor_producer::store::{NewMessage, Store};
use compactor_shared::config::EngineConfig;
use compactor_shared::EntityKey;

const BATCH: usize = 100;

/// `n` messages of the coding conversation, repeated as needed.
fn messages(n: usize) -> Vec<IncomingMessage> {
    let turn = conversation(25);
    turn.iter().cycle().take(n).cloned().collect()
}

fn new_messages(batch: &[IncomingMessage]) -> Vec<NewMessage> {
    batch
        .iter()
        .map(|m| NewMessage {
            role: m.role,
            parts: m.parts.clone(),
            pinned: false,
            token_estimate: serde_json::to_string(&m.parts).unwrap().len() as u64 / 4,
            client_id: None,
        })
        .collect()
}

/// Appends `per_writer` messages with each of `writers` concurrent
/// writers (HTTP when `http`, else the client); messages/s overall.
async fn append_rate(
    client: &Compactor,
    base: &str,
    writers: usize,
    per_writer: usize,
    http: bool,
    tag: &str,
) -> f64 {
    let batches: Vec<Vec<IncomingMessage>> = messages(per_writer)
        .chunks(BATCH)
        .map(<[IncomingMessage]>::to_vec)
        .collect();
    let bodies: Vec<String> = batches
        .iter()
        .map(|b| serde_json::json!({ "messages": b }).to_string())
        .collect();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let key = EntityKey::parse("bench", &format!("append-{tag}-{w}")).unwrap();
        let client = client.clone();
        let batches = batches.clone();
        let bodies = bodies.clone();
        let url = format!("{base}/v1/workstreams/bench/append-{tag}-{w}/messages");
        tasks.push(tokio::spawn(async move {
            let http_client = reqwest::Client::new();
            for (batch, body) in batches.into_iter().zip(bodies) {
                if http {
                    let r = http_client
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    assert!(r.status().is_success(), "{}", r.status());
                    r.bytes().await.unwrap();
                } else {
                    client.append_messages(&key, batch).await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (writers * per_writer) as f64 / started.elapsed().as_secs_f64()
}

async fn timed<F: std::future::Future<Output = ()>>(f: F) -> Duration {
    let started = Instant::now();
    f.await;
    started.elapsed()
}

async fn get_ok(http: &reqwest::Client, url: &str) {
    let r = http.get(url).send().await.unwrap();
    let status = r.status();
    let body = r.bytes().await.unwrap();
    assert!(status.is_success() && !body.is_empty(), "{url}: {status}");
}

fn report(metric: &str, mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    let (p50, p99) = (ms(percentile(&times, 0.5)), ms(percentile(&times, 0.99)));
    result("chat_path", &format!("{metric}_p50"), p50, "ms");
    result("chat_path", &format!("{metric}_p99"), p99, "ms");
    (p50, p99)
}

fn main() {
    let backend = match std::env::var("CHAT_BENCH_DB").as_deref() {
        Ok("sqlite") => Backend::Sqlite,
        _ => Backend::Postgres,
    };
    let db_label = if backend == Backend::Sqlite {
        "sqlite"
    } else {
        "postgres"
    };
    let sizes: Vec<usize> = std::env::var("CHAT_BENCH_SIZES")
        .unwrap_or_else(|_| "1000 10000 100000".to_owned())
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    let iterations: usize = env_or("CHAT_BENCH_ITERATIONS", 300);
    let appends: usize = env_or("CHAT_BENCH_APPENDS", 10_000);
    let rt = compactor_e2e::bench::runtime();
    rt.block_on(async {
        for run in 0..bench_runs(1) {
            let db = TestDb::new(backend).await;
            let redis = TestRedis::new();
            let mut s = settings(&db.url, &redis, None);
            s.reconcile.interval = Duration::ZERO;
            let kept_bytes: u64 = env_or(
                "CHAT_BENCH_CONTEXT_CACHE_BYTES",
                s.database.context_cache_bytes,
            );
            s.database.context_cache_bytes = kept_bytes;
            let worker = start_worker(s).await;
            let mut client_db = DatabaseSettings::for_url(&db.url);
            client_db.context_cache_bytes = kept_bytes;
            let client = Compactor::from_parts(
                Store::connect_with(&client_db).await.unwrap(),
                redis.queue().await,
                EngineConfig::default(),
            )
            .await;
            let base = worker.admin_url();
            let http = reqwest::Client::new();

            for (writers, http_on, label) in [
                (1, true, "append_http_1"),
                (8, true, "append_http_8"),
                (1, false, "append_client_1"),
                (8, false, "append_client_8"),
            ] {
                let tag = format!("{label}-{run}");
                let rate = append_rate(&client, &base, writers, appends, http_on, &tag).await;
                result("chat_path", &format!("{label}_{db_label}"), rate, "msg/s");
                println!("{db_label} {label}: {rate:.0} messages/s (batches of {BATCH})");
            }

            for &n in &sizes {
                let entity = format!("context-{n}-{run}");
                let key = EntityKey::parse("bench", &entity).unwrap();
                let seeded = messages(n + 2 * iterations);
                for batch in seeded[..n].chunks(1000) {
                    db.store
                        .append_messages(&key, &new_messages(batch))
                        .await
                        .unwrap();
                }
                // A turn's next message, appended below the client before
                // each read (as the chat backend's turn does; not timed).
                let mut next = seeded[n..].chunks(1).map(new_messages);
                let url = format!("{base}/v1/workstreams/bench/{entity}/context");
                for _ in 0..3 {
                    client.build_context(&key).await.unwrap();
                    get_ok(&http, &url).await;
                }
                // Fewer reads of the biggest workstreams (each reads all
                // of it): 300 at 10k, 30 at 100k, at least 20; and at most
                // n / 10, so the appends grow the workstream by 20 % at
                // most (a thousand messages: 100 reads, 1,200 at the end).
                let reads = iterations.min(3_000_000 / n.max(1)).min(n / 10).max(20);
                let mut built = Vec::with_capacity(reads);
                let mut served = Vec::with_capacity(reads);
                for _ in 0..reads {
                    let turn = next.next().unwrap();
                    db.store.append_messages(&key, &turn).await.unwrap();
                    built.push(
                        timed(async {
                            client.build_context(&key).await.unwrap();
                        })
                        .await,
                    );
                    let turn = next.next().unwrap();
                    db.store.append_messages(&key, &turn).await.unwrap();
                    served.push(timed(get_ok(&http, &url)).await);
                }
                let (b50, b99) = report(&format!("build_context_{n}_{db_label}"), built);
                let (c50, c99) = report(&format!("context_{n}_{db_label}"), served);
                println!(
                    "{db_label}, {n} un-compacted messages (one appended before each \
                     read): build_context p50 {b50:.2} ms p99 {b99:.2} ms; GET /context \
                     p50 {c50:.2} ms p99 {c99:.2} ms"
                );
            }

            let key = EntityKey::parse("bench", &format!("wait-{run}")).unwrap();
            client.append_messages(&key, messages(10)).await.unwrap();
            let url = format!("{base}/v1/workstreams/bench/wait-{run}/wait?timeout_ms=1000");
            let mut waits = Vec::with_capacity(iterations);
            for _ in 0..iterations {
                waits.push(timed(get_ok(&http, &url)).await);
            }
            let (w50, w99) = report(&format!("wait_{db_label}"), waits);
            println!("{db_label} GET /wait, nothing running: p50 {w50:.3} ms, p99 {w99:.3} ms");
            worker.stop().await;
        }
    });
}
