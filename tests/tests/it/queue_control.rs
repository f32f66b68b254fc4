//! The `/v1/queue` routes of a worker started as the binary starts it,
//! called over a real socket with the bearer token: the overview, pausing
//! and resuming the queue and a domain, a running compaction finishing
//! while the queue is paused, a paused one starting once resumed, and the
//! routes refusing a missing token and a domain that is not one. Real
//! Redis and SQLite; the LLM faked at the HTTP boundary.

use std::time::Duration;

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{conversation, eventually, settings, start_worker, FakeLlm, Fault, TestRedis};
use compactor_worker::settings::AdminToken;
use reqwest::StatusCode;
use serde_json::{json, Value};

const TOKEN: &str = "queue-control-token";

/// One call: status and JSON body.
async fn call(
    base: &str,
    token: Option<&str>,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .timeout(Duration::from_secs(40));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

struct Api(String);

impl Api {
    async fn get(&self, path: &str) -> Value {
        let (status, body) = call(&self.0, Some(TOKEN), reqwest::Method::GET, path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        body
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        call(
            &self.0,
            Some(TOKEN),
            reqwest::Method::POST,
            path,
            Some(body),
        )
        .await
    }

    async fn ok(&self, path: &str, body: Value) -> Value {
        let (status, reply) = self.post(path, body).await;
        assert_eq!(status, StatusCode::OK, "{path}: {reply}");
        reply
    }

    /// Stores a conversation over the trigger for `entity` and ends the
    /// turn: a compaction is requested.
    async fn request_compaction(&self, entity: &str) {
        let messages = serde_json::to_value(conversation(200)).unwrap();
        let turn = self
            .ok(
                &format!("/v1/workstreams/chat/{entity}/messages"),
                json!({"messages": messages, "finalize": true}),
            )
            .await;
        assert_eq!(turn["turn"]["outcome"], "requested", "{turn}");
    }

    async fn waited(&self, entity: &str) -> Value {
        self.get(&format!(
            "/v1/workstreams/chat/{entity}/wait?timeout_ms=30000"
        ))
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_pauses_and_resumes_the_queue_over_http() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let mut s = settings(&db.url, &redis, Some(&llm.url()));
    s.engine.trigger = compactor_e2e::small_window().trigger;
    s.admin.token = Some(AdminToken::new(TOKEN));
    let worker = start_worker(s).await;
    let api = Api(worker.admin_url());

    let overview = api.get("/v1/queue").await;
    assert_eq!(overview["queue"], redis.config.name.as_str());
    assert_eq!(overview["queue_paused"], false);
    assert_eq!(overview["paused_domains"], json!([]));
    assert_eq!(overview["oldest_waiting_ms"], Value::Null);
    assert_eq!(overview["counts"]["waiting"], 0);
    eventually(
        "the worker is registered",
        Duration::from_secs(10),
        || async { api.get("/v1/queue").await["live_workers"] == 1 },
    )
    .await;

    // A compaction runs (the LLM takes its time) when the queue is paused.
    llm.fail_next([Fault::Hang(Duration::from_millis(1_500))]);
    api.request_compaction("running").await;
    eventually("the compaction runs", Duration::from_secs(20), || async {
        api.get("/v1/queue").await["counts"]["running"] == 1
    })
    .await;
    let paused = api.ok("/v1/queue/pause", json!({})).await;
    assert_eq!(paused["queue_paused"], true, "{paused}");
    assert!(paused["queue_paused_for_ms"].is_u64());
    // It finishes all the same.
    assert_eq!(api.waited("running").await["outcome"], "compacted");

    // A compaction requested while paused waits, counted, with its age.
    api.request_compaction("held").await;
    let overview = api.get("/v1/queue").await;
    assert_eq!(overview["queue_paused"], true);
    assert_eq!(overview["counts"]["waiting"], 1, "{overview}");
    assert!(overview["oldest_waiting_ms"].is_u64(), "{overview}");
    let status = api.get("/v1/workstreams/chat/held/status").await;
    assert_eq!(status["job"]["state"], "waiting", "{status}");

    // A domain pauses and resumes on its own; the queue stays paused.
    let (status, body) = api
        .post("/v1/queue/pause", json!({"domain": "support"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["paused_domains"][0]["domain"], "support");
    assert_eq!(body["paused_domains"][0]["parked"], 0);
    let body = api
        .ok("/v1/queue/resume", json!({"domain": "support"}))
        .await;
    assert_eq!(body["paused_domains"], json!([]));
    assert_eq!(body["queue_paused"], true);

    // Resumed (an empty body is the whole queue): the held job runs.
    let (status, body) = call(
        &api.0,
        Some(TOKEN),
        reqwest::Method::POST,
        "/v1/queue/resume",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["queue_paused"], false);
    assert_eq!(api.waited("held").await["outcome"], "compacted");
    let overview = api.get("/v1/queue").await;
    assert_eq!(overview["counts"]["waiting"], 0);
    assert_eq!(overview["counts"]["done"], 2);

    // A domain that is not one, and unknown fields, are refused.
    for body in [
        json!({"domain": "Not A Domain"}),
        json!({"domain": ""}),
        json!([]),
        json!("chat"),
        json!({"domain": "chat", "also": 1}),
    ] {
        let (status, reply) = api.post("/v1/queue/pause", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
        assert_eq!(reply["error"]["code"], "invalid_body");
    }
    // Nothing without the token.
    for (method, path) in [
        (reqwest::Method::GET, "/v1/queue"),
        (reqwest::Method::POST, "/v1/queue/pause"),
        (reqwest::Method::POST, "/v1/queue/resume"),
    ] {
        let (status, body) = call(&api.0, None, method, path, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(body["error"]["code"], "unauthorized");
    }
    assert_eq!(api.get("/v1/queue").await["queue_paused"], false);
    worker.stop().await;
}
