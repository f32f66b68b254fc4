//! The LLM's start-up probe against real loopback HTTP servers: what it
//! reads from a llama.cpp-shaped model list, the one WARN per cause an
//! operator sees, and a worker that starts while its LLM does not answer.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use compactor_e2e::db::TestDb;
use compactor_e2e::{settings, TestRedis};
use compactor_worker::llm::{LlmConfig, Provider};
use compactor_worker::startup::probe::{Finding, Probe};
use compactor_worker::startup::Application;
use secrecy::SecretString;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn config(base_url: &str, model: &str) -> LlmConfig {
    LlmConfig {
        provider: Provider::OpenAi,
        base_url: Some(base_url.to_owned()),
        model: model.to_owned(),
        ..LlmConfig::default()
    }
}

/// What llama.cpp's server answers on `/v1/models` (its shape, trimmed).
fn llama_cpp_models(n_ctx: u64) -> serde_json::Value {
    json!({
        "object": "list",
        "data": [{
            "id": "smollm2",
            "aliases": ["smollm2"],
            "object": "model",
            "owned_by": "llamacpp",
            "meta": {"vocab_type": 2, "n_ctx": n_ctx, "n_ctx_train": 8192}
        }]
    })
}

async fn llama_cpp(n_ctx: u64) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(llama_cpp_models(n_ctx)))
        .mount(&server)
        .await;
    server
}

/// An address nothing listens on.
fn dead_address() -> String {
    format!("http://127.0.0.1:{}/v1", compactor_testkit::free_port())
}

#[tokio::test]
async fn the_probe_reads_the_model_and_context_a_llama_cpp_server_lists() {
    let server = llama_cpp(4_096).await;
    let base = format!("{}/v1", server.uri());
    let fits = Probe::new(&config(&base, "smollm2"), None, 3_000).unwrap();
    match fits.run().await {
        Finding::Ready {
            served_context,
            unchecked,
            ..
        } => {
            assert_eq!(served_context, Some(4_096));
            assert!(!unchecked, "the model was looked up");
        }
        other => panic!("{other:?}"),
    }
    let too_big = Probe::new(&config(&base, "smollm2"), None, 6_000).unwrap();
    assert_eq!(
        too_big.run().await,
        Finding::ContextTooSmall {
            served: 4_096,
            needed: 6_000
        }
    );
    let other_model = Probe::new(&config(&base, "qwen2.5"), None, 1).unwrap();
    assert_eq!(
        other_model.run().await,
        Finding::ModelNotFound {
            listed: vec!["smollm2".into()]
        }
    );
}

#[tokio::test]
async fn the_probe_sends_the_key_and_tells_a_refusal_from_a_dead_server() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(header("authorization", "Bearer sk-right"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data": [{"id": "m"}]})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(401))
        .mount(&server)
        .await;
    let base = format!("{}/v1", server.uri());
    let with = |key: &str| Probe::new(&config(&base, "m"), Some(SecretString::from(key)), 1);
    assert!(matches!(
        with("sk-right").unwrap().run().await,
        Finding::Ready { .. }
    ));
    assert_eq!(
        with("sk-wrong").unwrap().run().await,
        Finding::Auth { status: 401 }
    );
    let dead = Probe::new(&config(&dead_address(), "m"), None, 1).unwrap();
    match dead.run().await {
        Finding::Unreachable { detail } => assert!(detail.contains("connect"), "{detail}"),
        other => panic!("{other:?}"),
    }
}

/// Log lines, captured.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn each_cause_is_one_warning_that_names_it_and_never_the_key() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let key = || Some(SecretString::from("sk-do-not-log"));
    runtime.block_on(async {
        let dead = Probe::new(&config(&dead_address(), "m"), key(), 1).unwrap();
        dead.report(&dead.run().await, true);
        let small = llama_cpp(2_048).await;
        let base = format!("{}/v1", small.uri());
        let p = Probe::new(&config(&base, "smollm2"), key(), 3_100).unwrap();
        p.report(&p.run().await, true);
        let p = Probe::new(&config(&base, "gpt-4o"), key(), 1).unwrap();
        p.report(&p.run().await, false);
        let ok = Probe::new(&config(&base, "smollm2"), key(), 1_000).unwrap();
        ok.report(&ok.run().await, true);
    });
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    for (line, level, cause) in [
        (
            lines[0],
            "WARN",
            "the server is unreachable (cannot connect",
        ),
        (lines[1], "WARN", "serves a context of 2048 tokens"),
        (lines[2], "WARN", "does not list model \"gpt-4o\""),
        (lines[3], "INFO", "the server answered"),
    ] {
        assert!(line.contains(level), "{line}");
        assert!(line.contains(cause), "{line}");
    }
    assert!(lines[0].contains("fall back to the extractive summarizer"));
    assert!(lines[2].contains("fail and are retried"));
    assert!(lines[3].contains("served_context=2048"), "{}", lines[3]);
    assert!(!text.contains("sk-do-not-log"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_llm_does_not_answer_still_starts() {
    let db = TestDb::sqlite().await;
    let redis = TestRedis::new();
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(120)))
        .mount(&server)
        .await;
    let mut s = settings(&db.url, &redis, Some(&server.uri()));
    s.llm.request_timeout = Duration::from_secs(60);
    let shutdown = CancellationToken::new();
    let app = tokio::time::timeout(
        Duration::from_secs(30),
        Application::build(s, shutdown.clone()),
    )
    .await
    .expect("start-up does not wait for the probe")
    .expect("the worker starts");
    let admin = app.admin_addr().unwrap();
    let task = tokio::spawn(app.run());
    let ready = reqwest::get(format!("http://{admin}/readyz"))
        .await
        .unwrap();
    assert!(ready.status().is_success());
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("a pending probe does not hold up the shutdown")
        .unwrap()
        .unwrap();
}
