//! The admin HTTP API of a worker started as the binary starts it, called
//! over a real socket (reqwest against the port the worker bound): every
//! route, the bearer token, malformed keys, bodies and queries, `/readyz`
//! when Redis goes away or the schema falls behind, and `/metrics` after
//! end-to-end compactions. Real Redis, PostgreSQL and SQLite; the LLM faked
//! at the HTTP boundary.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{
    conversation, eventually, settings, start_worker, FakeLlm, Fault, PrivateRedis, TestRedis,
    Worker,
};
use compactor_producer::metrics::{Family, Kind};
use compactor_shared::trigger::TriggerPolicy;
use compactor_worker::settings::{AdminToken, Settings};
use compactor_worker::startup::{Application, StartupError};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// A 20,000-token model: `conversation(200)` is over its trigger.
fn small_window(s: &mut Settings) {
    s.engine.trigger = TriggerPolicy::Threshold {
        context_window: 20_000,
        ratio: 0.7,
        output_reserve: 4_000,
        safety_margin: 1_000,
    };
}

/// A client of one worker's admin API.
struct Api {
    base: String,
    client: reqwest::Client,
    token: Option<String>,
}

/// A response: status, JSON body (`Null` when not JSON), and headers.
struct Reply {
    status: StatusCode,
    body: Value,
    headers: reqwest::header::HeaderMap,
    text: String,
}

impl Reply {
    /// The `error.code` of an error body, checking its shape.
    fn code(&self) -> &str {
        let code = self.body["error"]["code"].as_str();
        assert!(
            self.body["error"]["message"].is_string(),
            "an error body has a message: {}",
            self.text
        );
        assert!(
            self.headers[reqwest::header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "errors are JSON"
        );
        code.unwrap_or_else(|| panic!("an error body: {} {}", self.status, self.text))
    }

    fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }
}

impl Api {
    fn new(worker: &Worker) -> Api {
        Api {
            base: worker.admin_url(),
            client: reqwest::Client::new(),
            token: None,
        }
    }

    fn with_token(mut self, token: &str) -> Api {
        self.token = Some(token.to_owned());
        self
    }

    async fn call(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Reply {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .timeout(Duration::from_secs(30));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            body,
            headers,
            text,
        }
    }

    async fn get(&self, path: &str) -> Reply {
        self.call(Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: &Value) -> Reply {
        self.call(Method::POST, path, Some(serde_json::to_vec(body).unwrap()))
            .await
    }

    async fn post_raw(&self, path: &str, body: &[u8]) -> Reply {
        self.call(Method::POST, path, Some(body.to_vec())).await
    }
}

/// `/v1/workstreams/chat/<entity>/<route>`.
fn ws(entity: &str, route: &str) -> String {
    format!("/v1/workstreams/chat/{entity}/{route}")
}

fn messages(turns: usize) -> Value {
    serde_json::to_value(conversation(turns)).unwrap()
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workstream_routes_store_compact_wait_and_serve_the_context() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let mut s = settings(&db.url, &redis, Some(&llm.url()));
    small_window(&mut s);
    let worker = start_worker(s).await;
    let api = Api::new(&worker);

    let health = api.get("/healthz").await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(health.body, json!({"status": "ok"}));
    let ready = api.get("/readyz").await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.text);
    assert_eq!(
        ready.body,
        json!({"ready": true, "checks": {"redis": "ok", "database": "ok", "schema": "ok"}})
    );

    // Store a long conversation; nothing is requested yet.
    let stored = api
        .post(
            &ws("http-1", "messages"),
            &json!({"messages": messages(200)}),
        )
        .await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.text);
    assert_eq!(stored.body["ids"].as_array().unwrap().len(), 800);
    assert!(stored.body["uncompacted_tokens"].as_u64().unwrap() > 14_000);
    assert!(
        stored.body.get("turn").is_none(),
        "no turn without finalize"
    );
    let status = api.get(&ws("http-1", "status")).await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.text);
    assert_one_job_key(&status.text);
    assert_eq!(status.body["domain"], "chat");
    assert_eq!(status.body["entity_id"], "http-1");
    assert_eq!(status.body["compactions"], 0);
    assert_eq!(status.body["job"], Value::Null);
    assert_eq!(status.body["lease"], Value::Null);

    // The next turn ends over the trigger: a compaction is requested. The
    // LLM's first answer takes a while, so the wait below finds it running.
    llm.fail_next([Fault::Hang(Duration::from_millis(1_500))]);
    let turn = api
        .post(
            &ws("http-1", "messages"),
            &json!({
                "messages": [{"role": "user", "parts": [{"type": "text", "text": "and now?"}]}],
                "finalize": true
            }),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
    assert_eq!(turn.body["ids"].as_array().unwrap().len(), 1);
    assert_eq!(turn.body["turn"]["outcome"], "requested", "{}", turn.text);
    assert_eq!(turn.body["turn"]["enqueue"]["outcome"], "added");
    let job_id = turn.body["turn"]["enqueue"]["job_id"].as_u64().unwrap();
    eventually("the compaction runs", Duration::from_secs(20), || async {
        api.get(&ws("http-1", "status")).await.body["lease"].is_object()
    })
    .await;
    let running = api.get(&ws("http-1", "status")).await;
    assert_one_job_key(&running.text);
    assert_eq!(running.body["job"]["job_id"], job_id);
    assert_eq!(running.body["job"]["state"], "running");

    let waited = api.get(&ws("http-1", "wait?timeout_ms=30000")).await;
    assert_eq!(waited.status, StatusCode::OK, "{}", waited.text);
    assert_eq!(waited.body["outcome"], "compacted", "{}", waited.text);
    assert!(waited.body["waited_ms"].is_u64());
    let event = &waited.body["event"];
    assert_eq!(event["outcome"], "compacted", "{}", waited.text);
    assert_eq!(event["trigger"], "auto");
    assert_eq!(event["job_id"], job_id);
    assert!(event["tokens_after"].as_u64().unwrap() < event["tokens_before"].as_u64().unwrap());

    let done = api.get(&ws("http-1", "status")).await;
    assert_one_job_key(&done.text);
    assert_eq!(done.body["compactions"], 1, "{}", done.text);
    assert_eq!(done.body["lease"], Value::Null);
    assert_eq!(done.body["breaker_open"], false);
    assert!(done.body["last_compacted_at"].is_string());
    assert_eq!(done.body["job"]["state"], "done", "{}", done.text);

    // The next turn's context: the summary first, then the 6-message tail.
    let context = api.get(&ws("http-1", "context")).await;
    assert_eq!(context.status, StatusCode::OK, "{}", context.text);
    let messages = context.body["messages"].as_array().unwrap();
    // The 6-message tail grows to 7 so as not to separate the last tool
    // call from its result.
    assert_eq!(messages.len(), 8, "summary + tail");
    assert_eq!(messages[0]["role"], "system");
    // The summary the (slow) fake LLM wrote.
    let preamble = messages[0]["parts"][0]["text"].as_str().unwrap();
    assert!(preamble.contains("- late"), "{preamble}");
    assert_eq!(messages[7]["parts"][0]["text"], "and now?");
    assert!(context.body["tokens"].as_u64().unwrap() > 0);
    assert_eq!(context.body["over_budget"], false);

    // Nothing runs now: a wait returns at once, without an event, in
    // either mode.
    for query in ["timeout_ms=5000", "timeout_ms=5000&mode=running"] {
        let idle = api.get(&ws("http-1", &format!("wait?{query}"))).await;
        assert_eq!(idle.status, StatusCode::OK, "{}", idle.text);
        assert_eq!(
            idle.body,
            json!({"outcome": "ready", "waited_ms": idle.body["waited_ms"], "event": null}),
            "{query}"
        );
    }

    // A manual compaction, with instructions; a second request joins it
    // (or follows it, if it started already).
    let compact = api
        .post(
            &ws("http-1", "compact"),
            &json!({"instructions": "keep the release decisions"}),
        )
        .await;
    assert_eq!(compact.status, StatusCode::ACCEPTED, "{}", compact.text);
    assert_eq!(compact.body["outcome"], "added");
    let manual_job = compact.body["job_id"].as_u64().unwrap();
    assert!(manual_job > job_id);
    let again = api.post_raw(&ws("http-1", "compact"), b"").await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text);
    assert!(
        ["coalesced", "followup", "added"].contains(&again.body["outcome"].as_str().unwrap()),
        "{}",
        again.text
    );
    eventually(
        "the manual compaction ran",
        Duration::from_secs(20),
        || async {
            let status = api.get(&ws("http-1", "status")).await.body;
            status["job"]["state"] == "done" && status["job"]["job_id"].as_u64() >= Some(manual_job)
        },
    )
    .await;

    // Ending a turn that added nothing, with the provider's usage.
    let turn = api
        .post(
            &ws("http-1", "messages"),
            &json!({"messages": [], "finalize": true, "usage": {"input_tokens": 900, "output_tokens": 100}}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
    assert_eq!(turn.body["ids"], json!([]));
    assert_eq!(turn.body["turn"]["outcome"], "not_due", "{}", turn.text);
    assert!(turn.body["turn"]["current_tokens"].as_u64().unwrap() >= 1_000);

    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v1_routes_need_the_bearer_token_when_one_is_set() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let mut s = settings(&db.url, &redis, None);
    let token = "s3cret-admin-token";
    s.admin.token = Some(AdminToken::new(token));
    let worker = start_worker(s).await;
    let anonymous = Api::new(&worker);
    let wrong = Api::new(&worker).with_token("s3cret-admin-tokeN");
    let authorized = Api::new(&worker).with_token(token);

    for (method, path) in [
        (Method::GET, ws("auth", "status")),
        (Method::GET, ws("auth", "context")),
        (Method::GET, ws("auth", "wait?timeout_ms=10")),
        (Method::POST, ws("auth", "messages")),
        (Method::POST, ws("auth", "compact")),
    ] {
        let missing = anonymous
            .call(method.clone(), &path, Some(b"not even JSON".to_vec()))
            .await;
        assert_eq!(missing.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(missing.code(), "unauthorized");
        assert!(missing.message().contains("missing"), "{}", missing.text);
        assert!(missing.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer"));
        let refused = wrong.call(method.clone(), &path, None).await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(refused.code(), "unauthorized");
        assert!(refused.message().contains("invalid"), "{}", refused.text);
    }
    // Another scheme is no bearer token.
    let basic = reqwest::Client::new()
        .get(format!("{}{}", worker.admin_url(), ws("auth", "status")))
        .basic_auth("admin", Some(token))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), StatusCode::UNAUTHORIZED);

    // The right token gets through (to a workstream that does not exist).
    let through = authorized.get(&ws("auth", "status")).await;
    assert_eq!(through.status, StatusCode::NOT_FOUND, "{}", through.text);
    assert_eq!(through.code(), "unknown_workstream");
    let stored = authorized
        .post(
            &ws("auth", "messages"),
            &json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]}),
        )
        .await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.text);

    // Probes and the scrape need none.
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(anonymous.get(path).await.status, StatusCode::OK, "{path}");
    }
    worker.stop().await;

    // A token variable that is configured but not set stops the start,
    // before anything is connected, naming the variable.
    let mut s = settings(&db.url, &redis, None);
    let variable = format!("COMPACTOR_E2E_UNSET_{}", std::process::id());
    s.admin.token_env = Some(variable.clone());
    let err = Application::build(s, CancellationToken::new())
        .await
        .err()
        .expect("a missing token variable is a start-up error");
    assert!(matches!(err, StartupError::AdminToken(_)), "{err:?}");
    assert!(err.to_string().contains(&variable), "{err}");

    // Disabled: no API, no address.
    let mut s = settings(&db.url, &redis, None);
    s.admin.enabled = false;
    s.admin.token_env = Some(variable);
    let app = Application::build(s, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(app.admin_addr(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_clear_json_errors() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let mut s = settings(&db.url, &redis, None);
    s.admin.max_body_bytes = 64 * 1024;
    let worker = start_worker(s).await;
    let api = Api::new(&worker);
    let one = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    assert_eq!(
        api.post(&ws("known", "messages"), &one).await.status,
        StatusCode::OK
    );

    // Keys that are not workstream keys, on every route.
    let long = "e".repeat(200);
    for (domain, entity, expected) in [
        ("chat", "BAD%20KEY", "entity"),
        ("chat", long.as_str(), "at most 128"),
        ("chat", "%7B", "entity"),
        ("Chat", "x", "domain"),
        ("chat", "%FF", ""),
    ] {
        for (method, route) in [
            (Method::GET, "status"),
            (Method::GET, "context"),
            (Method::GET, "wait"),
            (Method::POST, "messages"),
            (Method::POST, "compact"),
        ] {
            let path = format!("/v1/workstreams/{domain}/{entity}/{route}");
            let reply = api
                .call(method, &path, Some(serde_json::to_vec(&one).unwrap()))
                .await;
            assert_eq!(
                reply.status,
                StatusCode::BAD_REQUEST,
                "{path}: {}",
                reply.text
            );
            assert_eq!(reply.code(), "invalid_key", "{path}");
            assert!(reply.message().contains(expected), "{path}: {}", reply.text);
        }
    }

    // Bodies.
    let path = ws("known", "messages");
    let invalid = |body: &'static [u8], expected: &'static str, code: &'static str| {
        let api = &api;
        let path = &path;
        async move {
            let reply = api.post_raw(path, body).await;
            assert_eq!(
                reply.status,
                StatusCode::BAD_REQUEST,
                "{}: {}",
                String::from_utf8_lossy(body),
                reply.text
            );
            assert_eq!(reply.code(), code, "{}", reply.text);
            assert!(
                reply.message().contains(expected),
                "{}: {}",
                String::from_utf8_lossy(body),
                reply.text
            );
        }
    };
    invalid(b"not JSON", "expected", "invalid_body").await;
    invalid(b"", "EOF", "invalid_body").await;
    invalid(
        br#"{"messages": [{"role": "user", "parts": [{"type": "video", "uri": "x"}]}]}"#,
        "unknown variant `video`",
        "invalid_body",
    )
    .await;
    invalid(
        br#"{"messages": [], "finalise": true}"#,
        "unknown field `finalise`",
        "invalid_body",
    )
    .await;
    invalid(
        br#"{"messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}], "colour": 1}]}"#,
        "unknown field `colour`",
        "invalid_body",
    )
    .await;
    invalid(
        br#"{"messages": [{"role": "robot", "parts": [{"type": "text", "text": "x"}]}]}"#,
        "unknown variant `robot`",
        "invalid_body",
    )
    .await;
    invalid(
        br#"{"messages": []}"#,
        "at least one message",
        "invalid_body",
    )
    .await;
    invalid(
        br#"{"messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}]}], "usage": {"input_tokens": 1}}"#,
        "finalize",
        "invalid_body",
    )
    .await;
    invalid(
        br#"{"messages": [{"role": "user", "parts": []}]}"#,
        "at least one part",
        "invalid_message",
    )
    .await;
    let compact = api
        .post(&ws("known", "compact"), &json!({"instruction": "typo"}))
        .await;
    assert_eq!(compact.status, StatusCode::BAD_REQUEST, "{}", compact.text);
    assert_eq!(compact.code(), "invalid_body");
    assert!(compact.message().contains("unknown field `instruction`"));

    // A body over admin.max_body_bytes.
    let big = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "x".repeat(100 * 1024)}]}]});
    let too_large = api.post(&path, &big).await;
    assert_eq!(
        too_large.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        too_large.text
    );
    assert_eq!(too_large.code(), "payload_too_large");

    // Queries.
    for (query, expected) in [
        ("timeout_ms=60001", "above the maximum of 60000"),
        ("timeout_ms=soon", "timeout_ms"),
        ("timeout=5", "unknown field `timeout`"),
        ("mode=soon", "unknown variant `soon`"),
    ] {
        let reply = api.get(&ws("known", &format!("wait?{query}"))).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            reply.text
        );
        assert_eq!(reply.code(), "invalid_query");
        assert!(
            reply.message().contains(expected),
            "{query}: {}",
            reply.text
        );
    }

    // Workstreams that do not exist.
    for (method, route) in [
        (Method::GET, "status"),
        (Method::GET, "context"),
        (Method::GET, "wait?timeout_ms=10"),
        (Method::POST, "compact"),
    ] {
        let reply = api.call(method, &ws("ghost", route), None).await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_FOUND,
            "{route}: {}",
            reply.text
        );
        assert_eq!(reply.code(), "unknown_workstream");
        assert!(reply.message().contains("chat/ghost"), "{}", reply.text);
    }
    let finalize_ghost = api
        .post(
            &ws("ghost", "messages"),
            &json!({"messages": [], "finalize": true}),
        )
        .await;
    assert_eq!(finalize_ghost.status, StatusCode::NOT_FOUND);
    assert_eq!(finalize_ghost.code(), "unknown_workstream");

    // Routes and methods that do not exist.
    let nowhere = api.get("/v2/workstreams").await;
    assert_eq!(nowhere.status, StatusCode::NOT_FOUND);
    assert_eq!(nowhere.code(), "not_found");
    let wrong_method = api.call(Method::DELETE, &ws("known", "status"), None).await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(wrong_method.code(), "method_not_allowed");
    let get_messages = api.get(&ws("known", "messages")).await;
    assert_eq!(get_messages.status, StatusCode::METHOD_NOT_ALLOWED);

    // The workstream that was stored is untouched by all of the above.
    let status = api.get(&ws("known", "status")).await;
    assert_eq!(status.status, StatusCode::OK);
    assert!(status.body["uncompacted_tokens"].as_u64().unwrap() > 0);
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_turns_503_while_redis_is_unreachable() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let mut private = PrivateRedis::start();
    let mut s = settings(&db.url, &redis, None);
    s.redis.url = compactor_producer::settings::ConnectionUrl::new(private.url());
    let worker = start_worker(s).await;
    let api = Api::new(&worker);
    assert_eq!(api.get("/readyz").await.status, StatusCode::OK);
    let one = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    assert_eq!(
        api.post(&ws("r", "messages"), &one).await.status,
        StatusCode::OK
    );

    private.kill();
    eventually("readyz says 503", Duration::from_secs(20), || async {
        api.get("/readyz").await.status == StatusCode::SERVICE_UNAVAILABLE
    })
    .await;
    let started = Instant::now();
    let not_ready = api.get("/readyz").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the probe is bounded: {:?}",
        started.elapsed()
    );
    assert_eq!(not_ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(not_ready.code(), "not_ready");
    assert!(
        not_ready.message().starts_with("redis: "),
        "{}",
        not_ready.text
    );
    assert_eq!(not_ready.body["ready"], false);
    assert_ne!(not_ready.body["checks"]["redis"], "ok");
    assert_eq!(not_ready.body["checks"]["database"], "ok");
    assert_eq!(not_ready.body["checks"]["schema"], "ok");
    // Alive all the same: no restart for a dependency's outage.
    assert_eq!(api.get("/healthz").await.status, StatusCode::OK);
    // A route that needs Redis says so.
    let status = api.get(&ws("r", "status")).await;
    assert_eq!(
        status.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        status.text
    );
    assert_eq!(status.code(), "redis_unavailable");

    // Redis back on the same port: ready again.
    let _back = PrivateRedis::start_on(private.port);
    eventually("readyz says 200 again", Duration::from_secs(30), || async {
        api.get("/readyz").await.status == StatusCode::OK
    })
    .await;
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_turns_503_when_the_schema_falls_behind() {
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let worker = start_worker(settings(&db.url, &redis, None)).await;
    let api = Api::new(&worker);
    assert_eq!(api.get("/readyz").await.status, StatusCode::OK);
    let last = compactor_migrations::migration_names().pop().unwrap();
    db.exec(&format!(
        "DELETE FROM seaql_migrations WHERE version = '{last}'"
    ))
    .await;
    let reply = api.get("/readyz").await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.text
    );
    assert_eq!(reply.code(), "not_ready");
    assert_eq!(reply.body["checks"]["redis"], "ok");
    assert_eq!(reply.body["checks"]["database"], "ok");
    let schema = reply.body["checks"]["schema"].as_str().unwrap();
    assert!(
        schema.contains(&last) && schema.contains("compactor migrate"),
        "{schema}"
    );
    worker.stop().await;
}

/// Scrapes `/metrics` after compactions driven through the API, and finds
/// every family of both catalogues with its kind.
///
/// How each family gets a series: at start-up the worker creates, at zero,
/// the series whose labels are all known then (the runtime's queue-labelled
/// counters — recovered, released, leases lost, queue errors by op, its own
/// dead letters — release-announcement errors by op, and the LLM client's
/// counters for the configured provider); the sweep samples the gauges at
/// once. Everything labelled by domain is driven below: a compaction whose
/// first attempt fails at the LLM and is retried, a turn held back by an
/// open breaker, a wait that times out on a held lease, a commit refused by
/// the fence, and an entity lease lost mid-compaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_end_to_end_compactions_have_every_family() {
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let mut s = settings(&db.url, &redis, Some(&llm.url()));
    small_window(&mut s);
    let worker = start_worker(s).await;
    let api = Api::new(&worker);
    let finalize_long = |entity: &'static str| {
        let api = &api;
        async move {
            let reply = api
                .post(
                    &ws(entity, "messages"),
                    &json!({"messages": messages(200), "finalize": true}),
                )
                .await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
            assert_eq!(reply.body["turn"]["outcome"], "requested", "{}", reply.text);
        }
    };
    let compactions = |entity: &'static str| {
        let api = &api;
        async move { api.get(&ws(entity, "status")).await.body["compactions"].as_i64() }
    };

    // 1. The first attempt fails at the LLM (a 500, retried, then a 401,
    //    not retried; a third failure in a row would mark the provider
    //    unhealthy and commit offline at once); the second commits.
    llm.fail_next([Fault::ServerError, Fault::Unauthorized]);
    finalize_long("m-retried").await;
    eventually(
        "compacted on the second attempt",
        Duration::from_secs(30),
        || async { compactions("m-retried").await == Some(1) },
    )
    .await;
    let waited = api.get(&ws("m-retried", "wait?timeout_ms=1000")).await;
    assert_eq!(waited.body["outcome"], "ready", "{}", waited.text);

    // 2. An open circuit breaker holds the automatic request back.
    let stored = api
        .post(
            &ws("m-breaker", "messages"),
            &json!({"messages": messages(200)}),
        )
        .await;
    assert_eq!(stored.status, StatusCode::OK);
    db.exec(
        "UPDATE workstreams SET consecutive_failures = 3, breaker_message_id = last_message_id \
         WHERE entity_id = 'm-breaker'",
    )
    .await;
    let held_back = api
        .post(
            &ws("m-breaker", "messages"),
            &json!({"messages": [], "finalize": true}),
        )
        .await;
    assert_eq!(
        held_back.body["turn"]["outcome"], "breaker_open",
        "{}",
        held_back.text
    );
    assert_eq!(held_back.body["turn"]["consecutive_failures"], 3);
    let status = api.get(&ws("m-breaker", "status")).await;
    assert_eq!(status.body["breaker_open"], true);

    // 3. A wait that times out on a lease someone holds.
    let one = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    api.post(&ws("m-held", "messages"), &one).await;
    db.exec(&format!(
        "UPDATE workstreams SET is_compacting = true, lease_owner = 'someone-else', \
         lease_deadline_ms = {} WHERE entity_id = 'm-held'",
        now_ms() + 60_000
    ))
    .await;
    let timed_out = api.get(&ws("m-held", "wait?timeout_ms=50")).await;
    assert_eq!(timed_out.status, StatusCode::OK);
    assert_eq!(timed_out.body["outcome"], "timed_out", "{}", timed_out.text);
    assert_eq!(timed_out.body["phase"], "running");
    assert_eq!(
        timed_out.body["job_id"],
        Value::Null,
        "a lease without a job"
    );
    assert!(api.get(&ws("m-held", "status")).await.body["lease"].is_object());

    // 4. The watermark moves while the LLM answers: the commit is fenced off.
    let calls = llm.calls().len();
    llm.fail_next([Fault::Hang(Duration::from_millis(1_500))]);
    finalize_long("m-fenced").await;
    eventually("the LLM is asked", Duration::from_secs(20), || async {
        llm.calls().len() > calls
    })
    .await;
    db.exec(
        "UPDATE workstreams SET last_compacted_message_id = last_message_id \
         WHERE entity_id = 'm-fenced'",
    )
    .await;
    eventually("the fenced run ends", Duration::from_secs(20), || async {
        api.get(&ws("m-fenced", "status")).await.body["job"]["state"] == "done"
    })
    .await;
    assert_eq!(compactions("m-fenced").await, Some(0), "nothing committed");

    // 5. Another owner takes the entity lease while the LLM answers: the
    //    renewal is refused, the attempt fails, the retry commits.
    let calls = llm.calls().len();
    llm.fail_next([Fault::Hang(Duration::from_millis(2_000))]);
    finalize_long("m-stolen").await;
    eventually("the LLM is asked", Duration::from_secs(20), || async {
        llm.calls().len() > calls
    })
    .await;
    db.exec(&format!(
        "UPDATE workstreams SET lease_owner = 'thief', lease_deadline_ms = {} \
         WHERE entity_id = 'm-stolen'",
        now_ms() + 1_000
    ))
    .await;
    eventually(
        "compacted after the lost lease",
        Duration::from_secs(30),
        || async { compactions("m-stolen").await == Some(1) },
    )
    .await;

    let scrape = api.get("/metrics").await;
    assert_eq!(scrape.status, StatusCode::OK);
    assert!(scrape.headers[reqwest::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = scrape.text;
    let families: Vec<&Family> = compactor_producer::metrics::FAMILIES
        .iter()
        .chain(compactor_worker::llm::metrics::FAMILIES)
        .collect();
    assert_eq!(families.len(), 35, "every family of both catalogues");
    let mut missing = Vec::new();
    for family in &families {
        let kind = match family.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        if !text.contains(&format!("# TYPE {} {kind}\n", family.name)) {
            missing.push(family.name);
        }
        assert!(
            text.contains(&format!("# HELP {} {}\n", family.name, family.help)),
            "{} has its help text",
            family.name
        );
        if family.kind == Kind::Histogram {
            assert!(
                text.contains(&format!("{}_bucket{{", family.name)),
                "{} is a histogram with buckets",
                family.name
            );
        }
    }
    assert!(missing.is_empty(), "families not in /metrics: {missing:?}");
    assert!(!text.contains("quantile="), "no summaries");

    // What the scenario drove is counted (other tests of this binary only
    // add to the same process-wide recorder).
    for (name, label) in [
        ("compactor_jobs_failed_total", "domain=\"chat\""),
        ("compactor_jobs_retried_total", "domain=\"chat\""),
        ("compactor_llm_retries_total", "provider=\"openai\""),
        ("compactor_breaker_skips_total", "domain=\"chat\""),
        ("compactor_lease_wait_timeouts_total", "domain=\"chat\""),
        ("compactor_fence_conflicts_total", "domain=\"chat\""),
        ("compactor_entity_leases_lost_total", "domain=\"chat\""),
        ("compactor_compactions_total", "domain=\"chat\""),
        ("compactor_turns_total", "domain=\"chat\""),
    ] {
        let total: f64 = text
            .lines()
            .filter(|l| l.starts_with(name) && l.contains(label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        assert!(total > 0.0, "{name}{{{label}}} counted: {total}");
    }
    // Labels are bounded: never an entity id.
    for entity in ["m-retried", "m-breaker", "m-held", "m-fenced", "m-stolen"] {
        assert!(!text.contains(entity), "{entity} in /metrics");
    }
    worker.stop().await;
}

/// `/status` names its `job` once: strict JSON parsers refuse a key twice
/// (and lenient ones keep either).
fn assert_one_job_key(text: &str) {
    assert_eq!(text.matches("\"job\":").count(), 1, "{text}");
}

fn one_message(text: &str) -> Value {
    json!({"role": "user", "parts": [{"type": "text", "text": text}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_append_stores_nothing_twice() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let worker = start_worker(settings(&db.url, &redis, None)).await;
    let api = Api::new(&worker);
    let path = ws("idem", "messages");
    let with_key = |key: &'static str, body: &Value| {
        let (api, path, body) = (&api, &path, serde_json::to_vec(body).unwrap());
        async move {
            let response = api
                .client
                .post(format!("{}{path}", api.base))
                .header("Idempotency-Key", key)
                .body(body)
                .send()
                .await
                .unwrap();
            let status = response.status();
            let text = response.text().await.unwrap();
            (
                status,
                serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
                text,
            )
        }
    };
    let body = json!({"messages": [one_message("a"), one_message("b"), one_message("c")]});

    // The same request sent three times (the client never saw an answer):
    // stored once, the same ids each time.
    let (status, first, text) = with_key("req-1", &body).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(first["already_stored"], 0);
    for _ in 0..2 {
        let (status, again, text) = with_key("req-1", &body).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        assert_eq!(again["ids"], first["ids"]);
        assert_eq!(again["already_stored"], 3);
        assert_eq!(again["uncompacted_tokens"], first["uncompacted_tokens"]);
    }
    // Another key is another request.
    let (_, other, _) = with_key("req-2", &body).await;
    assert_eq!(other["already_stored"], 0);
    assert_ne!(other["ids"], first["ids"]);

    // Client ids per message, without the header: the same.
    let mine = json!({"messages": [
        {"role": "user", "parts": [{"type": "text", "text": "x"}], "client_id": "msg-1"},
        {"role": "assistant", "parts": [{"type": "text", "text": "y"}], "client_id": "msg-2"}
    ]});
    let stored = api.post(&path, &mine).await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.text);
    let again = api.post(&path, &mine).await;
    assert_eq!(again.body["ids"], stored.body["ids"]);
    assert_eq!(again.body["already_stored"], 2);

    // A client id (or key) reused for other content is a conflict, and
    // nothing of that request is stored.
    let before = api.get(&ws("idem", "status")).await.body["uncompacted_tokens"].clone();
    let clash = api
        .post(
            &path,
            &json!({"messages": [
                one_message("new"),
                {"role": "user", "parts": [{"type": "text", "text": "changed"}], "client_id": "msg-1"}
            ]}),
        )
        .await;
    assert_eq!(clash.status, StatusCode::CONFLICT, "{}", clash.text);
    assert_eq!(clash.code(), "client_id_conflict");
    assert!(clash.message().contains("msg-1"), "{}", clash.text);
    let (status, _, text) = with_key("req-1", &json!({"messages": [one_message("not a")]})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    assert_eq!(
        api.get(&ws("idem", "status")).await.body["uncompacted_tokens"],
        before
    );
    let context = api.get(&ws("idem", "context")).await;
    assert_eq!(context.body["messages"].as_array().unwrap().len(), 8);

    // Malformed keys and ids.
    let (status, bad, text) = with_key("", &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert_eq!(bad["error"]["code"], "invalid_header");
    let long_id = api
        .post(
            &path,
            &json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}], "client_id": "i".repeat(256)}]}),
        )
        .await;
    assert_eq!(long_id.status, StatusCode::BAD_REQUEST, "{}", long_id.text);
    assert_eq!(long_id.code(), "invalid_message");
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_during_a_redis_outage_is_stored_and_says_compaction_is_unavailable() {
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let mut private = PrivateRedis::start();
    let mut s = settings(&db.url, &redis, None);
    small_window(&mut s);
    s.redis.url = compactor_producer::settings::ConnectionUrl::new(private.url());
    s.queue.response_timeout = Duration::from_secs(1);
    let worker = start_worker(s).await;
    let api = Api::new(&worker);
    let path = ws("outage", "messages");
    let turn = json!({"messages": messages(200), "finalize": true});
    let send = || {
        let (api, path, body) = (&api, &path, serde_json::to_vec(&turn).unwrap());
        async move {
            let response = api
                .client
                .post(format!("{}{path}", api.base))
                .header("Idempotency-Key", "turn-17")
                .body(body)
                .timeout(Duration::from_secs(30))
                .send()
                .await
                .unwrap();
            let status = response.status();
            let text = response.text().await.unwrap();
            (status, serde_json::from_str::<Value>(&text).unwrap(), text)
        }
    };

    private.kill();
    let (status, stored, text) = send().await;
    assert_eq!(status, StatusCode::OK, "stored, so not a 503: {text}");
    assert_eq!(stored["ids"].as_array().unwrap().len(), 800);
    assert_eq!(stored["turn"]["outcome"], "unavailable", "{text}");
    assert!(stored["turn"]["current_tokens"].as_u64().unwrap() > 14_000);
    assert!(
        stored["turn"]["reason"]
            .as_str()
            .unwrap()
            .contains("enqueue"),
        "{text}"
    );
    // Waiting needs Redis for the requested compaction; the lease alone
    // does not.
    let wait = api.get(&ws("outage", "wait?timeout_ms=1000")).await;
    assert_eq!(
        wait.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        wait.text
    );
    assert_eq!(wait.code(), "redis_unavailable");
    let running_only = api
        .get(&ws("outage", "wait?timeout_ms=1000&mode=running"))
        .await;
    assert_eq!(running_only.status, StatusCode::OK, "{}", running_only.text);
    assert_eq!(running_only.body["outcome"], "ready");

    // Redis is back, without its data; the worker registers again at its
    // next heartbeat. The client retries the same request: nothing is
    // stored twice, and the compaction is requested this time.
    let _back = PrivateRedis::start_on(private.port);
    let queue = compactor_producer::queue::Queue::connect(&private.url(), redis.config.clone())
        .await
        .unwrap();
    eventually(
        "the worker registers again",
        Duration::from_secs(20),
        || async { !queue.live_workers().await.unwrap().is_empty() },
    )
    .await;
    let mut retried = None;
    for _ in 0..100 {
        let (status, body, text) = send().await;
        assert_eq!(status, StatusCode::OK, "{text}");
        if body["turn"]["outcome"] != "unavailable" {
            retried = Some(body);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let retried = retried.expect("Redis takes requests again");
    assert_eq!(retried["ids"], stored["ids"], "the same messages");
    assert_eq!(retried["already_stored"], 800);
    assert_eq!(retried["uncompacted_tokens"], stored["uncompacted_tokens"]);
    assert_eq!(retried["turn"]["outcome"], "requested", "{retried}");
    let compacted = api.get(&ws("outage", "wait?timeout_ms=30000")).await;
    assert_eq!(compacted.body["outcome"], "compacted", "{}", compacted.text);
    let context = api.get(&ws("outage", "context")).await;
    assert!(
        context.body["messages"].as_array().unwrap().len() < 20,
        "summary + tail: nothing was stored twice"
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_behind_a_busy_worker_says_queued_then_compacted() {
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let mut s = settings(&db.url, &redis, Some(&llm.url()));
    small_window(&mut s);
    s.worker.concurrency = 1;
    llm.answer_after(Duration::from_millis(1_500));
    let worker = start_worker(s).await;
    let api = Api::new(&worker);
    let finalize = |entity: &'static str| {
        let api = &api;
        async move {
            let reply = api
                .post(
                    &ws(entity, "messages"),
                    &json!({"messages": messages(200), "finalize": true}),
                )
                .await;
            assert_eq!(reply.body["turn"]["outcome"], "requested", "{}", reply.text);
            reply.body["turn"]["enqueue"]["job_id"].as_u64().unwrap()
        }
    };
    finalize("busy-a").await;
    eventually(
        "the worker is busy with a",
        Duration::from_secs(20),
        || async { api.get(&ws("busy-a", "status")).await.body["lease"].is_object() },
    )
    .await;
    let job_b = finalize("busy-b").await;

    let queued = api.get(&ws("busy-b", "wait?timeout_ms=300")).await;
    assert_eq!(queued.status, StatusCode::OK, "{}", queued.text);
    assert_eq!(
        queued.body,
        json!({"outcome": "timed_out", "waited_ms": queued.body["waited_ms"], "phase": "queued", "job_id": job_b})
    );
    assert!(queued.body["waited_ms"].as_u64().unwrap() >= 300);
    let running_only = api
        .get(&ws("busy-b", "wait?timeout_ms=300&mode=running"))
        .await;
    assert_eq!(
        running_only.body["outcome"], "ready",
        "{}",
        running_only.text
    );

    let compacted = api.get(&ws("busy-b", "wait?timeout_ms=30000")).await;
    assert_eq!(compacted.body["outcome"], "compacted", "{}", compacted.text);
    assert_eq!(compacted.body["event"]["job_id"], job_b);
    assert_eq!(compacted.body["event"]["entity_id"], "busy-b");
    assert_eq!(
        api.get(&ws("busy-b", "status")).await.body["compactions"],
        1
    );
    worker.stop().await;
}

/// The (method, path) pairs of `docs/openapi.yaml`'s `paths`, read as text
/// (two-space indented paths, four-space indented methods).
fn documented_routes(doc: &str) -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    let mut in_paths = false;
    let mut path: Option<String> = None;
    for line in doc.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            in_paths = line == "paths:";
            continue;
        }
        if !in_paths {
            continue;
        }
        if let Some(p) = line.strip_prefix("  /") {
            path = Some(format!("/{}", p.trim_end_matches(':')));
        } else if let Some(m) = line.strip_prefix("    ") {
            let method = m.trim_end_matches(':');
            if ["get", "post", "put", "patch", "delete", "head", "options"].contains(&method) {
                routes.insert((method.to_uppercase(), path.clone().unwrap()));
            }
        }
    }
    routes
}

#[test]
fn the_openapi_document_names_every_route_the_router_serves() {
    let doc = include_str!("../../docs/openapi.yaml");
    assert!(doc.starts_with("openapi: 3."));
    let documented = documented_routes(doc);
    let served: BTreeSet<(String, String)> = compactor_worker::http::served_routes()
        .into_iter()
        .map(|(method, path)| (method.to_string(), path.to_owned()))
        .collect();
    assert_eq!(served.len(), 8);
    assert_eq!(documented, served);
}
