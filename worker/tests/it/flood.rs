//! The `compactor-worker` process flooded with slow clients under a low
//! file-descriptor limit (the chaos finding: at a limit of 256, 300
//! connections trickling their headers made `/healthz` time out, and a
//! liveness probe would have restarted a healthy worker).

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use compactor_testkit::{redis_url, unique_name, TestDatabase};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::startup::{configured, QueueKeys, Running, WORKER};

/// The chaos run's limit, soft and hard (so start-up cannot raise it).
const DESCRIPTOR_LIMIT: u64 = 256;
/// Slow clients at once: more than the limit.
const SLOW_CLIENTS: usize = 300;

/// One slow client until `stop`: connects, sends a request's headers a byte
/// every 200 ms, and connects again whenever the server closes it.
/// Counts the times it was closed.
async fn slow_client(addr: String, stop: Arc<AtomicBool>, closed: Arc<AtomicUsize>) {
    let request = b"GET /healthz HTTP/1.1\r\nHost: flood\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut stream) = TcpStream::connect(&addr).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let mut buf = [0u8; 256];
        for byte in request.iter().cycle() {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            tokio::select! {
                read = stream.read(&mut buf) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                },
                () = tokio::time::sleep(Duration::from_millis(200)) => {
                    if stream.write_all(&[*byte]).await.is_err() {
                        break;
                    }
                }
            }
        }
        closed.fetch_add(1, Ordering::Relaxed);
    }
}

/// The worker under the limit of [`DESCRIPTOR_LIMIT`] descriptors, soft
/// and hard, logging JSON, with a probe listener of its own.
fn limited_worker(db: &TestDatabase, queue: &QueueKeys) -> Command {
    let mut limited = Command::new("bash");
    limited.args([
        "-c",
        &format!("ulimit -n {DESCRIPTOR_LIMIT} && exec \"$0\""),
        WORKER,
    ]);
    let mut command = configured(limited, &db.url, &redis_url());
    command
        .env("COMPACTOR__LOG__FORMAT", "json")
        .env("COMPACTOR__QUEUE__NAME", &queue.0)
        .env("COMPACTOR__ADMIN__HEALTH_LISTEN", "127.0.0.1:0");
    command
}

/// `/readyz` says the database answers, and a conversation can still be
/// written through the API: the flood left the database and Redis their
/// descriptors.
async fn the_database_still_answers(http: &reqwest::Client, probes: &str, api: &str) {
    let readyz = http
        .get(format!("http://{probes}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(readyz.status(), 200, "the database still answers");
    let appended = http
        .post(format!("http://{api}/v1/workstreams/chat/flooded/messages"))
        .json(&serde_json::json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "still here"}]}]}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("an append gets through the flood");
    assert_eq!(appended.status(), 200);
}

/// Under a limit of 256 descriptors, start-up caps the API's connections
/// below it (logged), and while 300 clients trickle their headers to the
/// API, `/healthz` answers within 1 s on the probe listener and within a
/// few on the API (a slow client is shed to admit it), and a conversation
/// can still be written (the database and Redis kept their descriptors).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_slow_clients_under_a_low_descriptor_limit_leaves_healthz_answering() {
    let db = TestDatabase::sqlite();
    let queue = QueueKeys(unique_name("flood"));
    let mut running = Running::start(limited_worker(&db, &queue));
    let capped = running.until("saying the connections are capped", |l| {
        l.contains("connections capped below admin.max_connections")
    });
    let capped: Value = serde_json::from_str(&capped).unwrap();
    assert_eq!(capped["descriptor_limit"], DESCRIPTOR_LIMIT);
    let cap = capped["max_connections"].as_u64().unwrap();
    assert!(cap < DESCRIPTOR_LIMIT, "{capped}");
    let ready = running.until("saying the worker is ready", |l| {
        l.contains("compactor-worker ready")
    });
    let ready: Value = serde_json::from_str(&ready).unwrap();
    let api = ready["admin"].as_str().unwrap().to_owned();
    let probes = ready["probes"].as_str().unwrap().to_owned();

    let stop = Arc::new(AtomicBool::new(false));
    let closed = Arc::new(AtomicUsize::new(0));
    let flood: Vec<_> = (0..SLOW_CLIENTS)
        .map(|_| {
            tokio::spawn(slow_client(
                api.clone(),
                Arc::clone(&stop),
                Arc::clone(&closed),
            ))
        })
        .collect();
    // The flood has filled the cap once the API sheds its slow clients.
    let http = reqwest::Client::new();
    compactor_testkit::eventually(
        "the API sheds slow clients",
        Duration::from_secs(30),
        || {
            let metrics = format!("http://{probes}/metrics");
            let http = http.clone();
            async move {
                let Ok(reply) = http.get(metrics).send().await else {
                    return false;
                };
                let text = reply.text().await.unwrap_or_default();
                text.lines().any(|l| {
                    l.starts_with("compactor_http_connections_shed_total{listener=\"api\"}")
                        && !l.ends_with(" 0")
                })
            }
        },
    )
    .await;
    // The probe listener, which the flood does not reach: within 1 s.
    // The API, which it floods: a slow client is shed to admit the probe,
    // which waits behind the flood's reconnections in the kernel's queue
    // (about 50 ms here; before, it waited for the header timeout, 10 s,
    // or its connection was dropped with the queue full).
    for (listener, base, bound) in [
        ("probe listener", &probes, Duration::from_secs(1)),
        ("API", &api, Duration::from_secs(5)),
    ] {
        let started = Instant::now();
        let healthz = http
            .get(format!("http://{base}/healthz"))
            .timeout(bound)
            .send()
            .await
            .unwrap_or_else(|e| panic!("/healthz on the {listener} within {bound:?}: {e:?}"));
        assert_eq!(healthz.status(), 200);
        eprintln!(
            "/healthz on the {listener} during the flood: {:?}",
            started.elapsed()
        );
    }
    the_database_still_answers(&http, &probes, &api).await;
    assert!(
        closed.load(Ordering::Relaxed) > 0,
        "slow clients were shed to admit the others"
    );

    stop.store(true, Ordering::Relaxed);
    for client in flood {
        client.abort();
    }
    running.terminate();
    let (status, lines) = running.exit();
    assert_eq!(status.code(), Some(0), "{}", lines.join("\n"));
    assert!(
        lines.iter().any(|l| l.contains("at its connection limit")),
        "the shedding is logged"
    );
}

/// One client of the drop-in proxy: sends a whole request naming no
/// workstream (forwarded as it came) and waits for the answer, which the
/// provider never gives, until the server closes the connection or the
/// task is aborted. A connection refused ends it: the other clients are
/// there to fill the cap.
async fn hanging_proxy_client(addr: String) {
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: flood\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let Ok(mut stream) = TcpStream::connect(&addr).await else {
        return;
    };
    if stream.write_all(request.as_bytes()).await.is_err() {
        return;
    }
    let mut buf = [0u8; 256];
    while let Ok(1..) = stream.read(&mut buf).await {}
}

/// The drop-in proxy served beside the API under a limit of 256
/// descriptors: each of its connections holds a second one, to the
/// provider, so start-up gives the two listeners a share of the room
/// each (logged). With 300 clients waiting on a provider that never
/// answers, the proxy holds at most its cap of provider connections, and
/// the probes, the database and the API still answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_connections_hold_two_descriptors_and_share_the_room_with_the_api() {
    // A provider that accepts and never answers, counting connections.
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream_addr = upstream.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let holder = {
        let accepted = Arc::clone(&accepted);
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = upstream.accept().await {
                accepted.fetch_add(1, Ordering::Relaxed);
                held.push(stream);
            }
        })
    };
    let db = TestDatabase::sqlite();
    let queue = QueueKeys(unique_name("flood-proxy"));
    let mut command = limited_worker(&db, &queue);
    command.env("COMPACTOR__PROXY__LISTEN", "127.0.0.1:0").env(
        "COMPACTOR__PROXY__OPENAI_UPSTREAM",
        format!("http://{upstream_addr}"),
    );
    let mut running = Running::start(command);
    let capped = running.until("saying the connections are capped", |l| {
        l.contains("connections capped below admin.max_connections")
    });
    let capped: Value = serde_json::from_str(&capped).unwrap();
    let api_cap = capped["max_connections"].as_u64().unwrap();
    let proxy_cap = capped["proxy_connections"]
        .as_u64()
        .unwrap_or_else(|| panic!("the proxy's cap is logged: {capped}"));
    let reserved = capped["reserved"].as_u64().unwrap();
    assert!(
        api_cap + 2 * proxy_cap <= DESCRIPTOR_LIMIT - reserved,
        "both listeners at their caps fit the limit: {capped}"
    );
    let ready = running.until("saying the worker is ready", |l| {
        l.contains("compactor-worker ready")
    });
    let ready: Value = serde_json::from_str(&ready).unwrap();
    let api = ready["admin"].as_str().unwrap().to_owned();
    let probes = ready["probes"].as_str().unwrap().to_owned();
    let proxy = ready["proxy"].as_str().unwrap().to_owned();

    let flood: Vec<_> = (0..SLOW_CLIENTS)
        .map(|_| tokio::spawn(hanging_proxy_client(proxy.clone())))
        .collect();
    // The proxy has reached its cap once the provider holds that many.
    compactor_testkit::eventually(
        "the proxy holds its cap of provider connections",
        Duration::from_secs(30),
        || {
            let n = accepted.load(Ordering::Relaxed) as u64;
            async move { n >= proxy_cap }
        },
    )
    .await;
    let http = reqwest::Client::new();
    let healthz = http
        .get(format!("http://{probes}/healthz"))
        .timeout(Duration::from_secs(1))
        .send()
        .await
        .expect("/healthz on the probe listener within 1 s");
    assert_eq!(healthz.status(), 200);
    the_database_still_answers(&http, &probes, &api).await;
    // Held past the checks: the cap held, no connection beyond it.
    let held = accepted.load(Ordering::Relaxed) as u64;
    eprintln!("caps: API {api_cap}, proxy {proxy_cap}; provider connections held: {held}");
    assert!(
        held <= proxy_cap,
        "{held} provider connections, cap {proxy_cap}"
    );

    for client in flood {
        client.abort();
    }
    holder.abort();
    running.terminate();
    let (status, lines) = running.exit();
    assert_eq!(status.code(), Some(0), "{}", lines.join("\n"));
}
