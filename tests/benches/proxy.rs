//! What the drop-in proxy adds to a chat request (issue 35): a client that
//! resends a 10,000-message history each turn, as SDKs do, once straight
//! to an instant provider and once through the proxy, turn after turn.
//! The provider answers at once without reading the body it was sent, so
//! the difference is the proxy's: reading the history (comparing it with
//! the last turn's, naming what is new), building the context and sending
//! it on. The new message and the answer are stored beside the request
//! and after it, in the workstream's order; a turn that found the last
//! one still writing waits for it, and that wait is in its time.
//!
//! - non-streamed: time to the whole answer, p50 / p99, and the added time
//!   (through the proxy less straight, turn by turn);
//! - streamed: time to the first byte of the answer, the same way.
//!
//! The worker runs as in production (PostgreSQL by default, the extractive
//! summarizer, compactions in the background). The first request stores
//! the whole history (timed and reported on its own). The provider reports
//! 100 prompt tokens, so no compaction is asked for after it; the first
//! measured turn finds the context over the window by the estimate and
//! waits for its compaction (one turn of each run's first mode).
//!
//! Run:
//! ```text
//! cargo bench -p compactor-e2e --bench proxy
//! ```
//! `PROXY_BENCH_DB` (`postgres`, default, or `sqlite`), `PROXY_BENCH_MESSAGES`
//! (default 10,000), `PROXY_BENCH_TURNS` (per mode, default 200). Target
//! (issue 35): p99 ≤ 5 ms added.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::routing::post;
use axum::Router;
use compactor_e2e::bench::{env_or, ms, percentile, result};
use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{settings, start_worker, TestRedis};
use serde_json::{json, Value};

const ANSWER: &str = r#"{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Done; the next step is the replica check."},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}"#;

const STREAM: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Done; \"}}]}\n\ndata: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"the next step is the replica check.\"}}]}\n\ndata: [DONE]\n\n";

/// An instant provider: it answers without reading what it was sent
/// (a streamed answer when the body asks for one).
async fn provider() -> SocketAddr {
    async fn answer(body: Bytes) -> axum::response::Response {
        use axum::response::IntoResponse;
        let stream = memchr_find(&body, br#""stream":true"#);
        if stream {
            ([("content-type", "text/event-stream")], STREAM).into_response()
        } else {
            ([("content-type", "application/json")], ANSWER).into_response()
        }
    }
    let app = Router::new().route("/v1/chat/completions", post(answer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The `i`-th message of a long coding conversation.
fn message(i: usize) -> Value {
    if i.is_multiple_of(2) {
        json!({"role": "user", "content": format!(
            "Step {i}: the deploy of build {} fails on host web-{} with exit code {}; check the logs.",
            4_000 + i, i % 17, i % 7)})
    } else {
        json!({"role": "assistant", "content": format!(
            "Found it: the migration {} timed out after {} s on the replica; I raised the timeout and reran it.",
            i / 2, 30 + i % 50)})
    }
}

/// Time to the first byte of the answer, and to the whole answer.
async fn call(
    http: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (Duration, Duration) {
    let started = Instant::now();
    let mut request = http.post(url).json(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let mut response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let first = response.chunk().await.unwrap();
    let ttfb = started.elapsed();
    assert!(first.is_some());
    while response.chunk().await.unwrap().is_some() {}
    (ttfb, started.elapsed())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let backend = match std::env::var("PROXY_BENCH_DB").as_deref() {
        Ok("sqlite") => Backend::Sqlite,
        _ => Backend::Postgres,
    };
    let n: usize = env_or("PROXY_BENCH_MESSAGES", 10_000);
    let turns: usize = env_or("PROXY_BENCH_TURNS", 200);
    let db = TestDb::new(backend).await;
    let redis = TestRedis::new();
    let upstream = provider().await;
    let mut s = settings(&db.url, &redis, None);
    s.proxy.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    s.proxy.openai_upstream = format!("http://{upstream}");
    let worker = start_worker(s).await;
    let through = format!("{}/v1/chat/completions", worker.proxy_url());
    let straight = format!("http://{upstream}/v1/chat/completions");
    let http = reqwest::Client::new();
    let named = [
        ("x-compactor-workstream", "bench/proxy"),
        ("authorization", "Bearer sk-bench"),
    ];

    let mut history: Vec<Value> =
        vec![json!({"role": "system", "content": "You are a deploy assistant."})];
    history.extend((0..n).map(message));
    let body = |history: &[Value], stream: bool| json!({"model": "m", "messages": history, "stream": stream});
    let bytes = body(&history, false).to_string().len();
    println!("{n} messages, {bytes} bytes per request, {backend:?}");
    let (_, seeded) = call(&http, &through, &named, &body(&history, false)).await;
    println!(
        "first request (stores the whole history): {:.1} ms",
        ms(seeded)
    );
    result("proxy", "first_request_ms", ms(seeded), "ms");
    history
        .push(json!({"role": "assistant", "content": "Done; the next step is the replica check."}));

    for stream in [false, true] {
        let mode = if stream { "streamed" } else { "whole" };
        let (mut via, mut direct, mut added) = (Vec::new(), Vec::new(), Vec::new());
        for t in 0..turns {
            history.push(message(n + 2 * t));
            let b = body(&history, stream);
            let (d_first, d_whole) = call(
                &http,
                &straight,
                &[("authorization", "Bearer sk-bench")],
                &b,
            )
            .await;
            let (p_first, p_whole) = call(&http, &through, &named, &b).await;
            history.push(json!({"role": "assistant", "content": "Done; the next step is the replica check."}));
            let (p, d) = if stream {
                (p_first, d_first)
            } else {
                (p_whole, d_whole)
            };
            via.push(p);
            direct.push(d);
            added.push(p.saturating_sub(d));
        }
        for v in [&mut via, &mut direct, &mut added] {
            v.sort();
        }
        let what = if stream {
            "time to first byte"
        } else {
            "time to the answer"
        };
        println!(
            "{mode}: {what}: straight p50 {:.2} ms p99 {:.2} ms; through the proxy p50 {:.2} ms p99 {:.2} ms; added p50 {:.2} ms p99 {:.2} ms",
            ms(percentile(&direct, 0.5)),
            ms(percentile(&direct, 0.99)),
            ms(percentile(&via, 0.5)),
            ms(percentile(&via, 0.99)),
            ms(percentile(&added, 0.5)),
            ms(percentile(&added, 0.99)),
        );
        result(
            "proxy",
            &format!("{mode}_added_p50_ms"),
            ms(percentile(&added, 0.5)),
            "ms",
        );
        result(
            "proxy",
            &format!("{mode}_added_p99_ms"),
            ms(percentile(&added, 0.99)),
            "ms",
        );
    }
    worker.stop().await;
}
